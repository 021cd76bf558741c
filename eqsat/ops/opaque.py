"""Every op the rules know nothing about: `Opaque(key, operands)`, where the key names its target, its
non-tensor arguments and its output type, so two opaque terms are equal exactly when the ops are the same
pure op on the same inputs. Any node no other op reads is read as opaque; a new one is a copy of the node
its key was read from.

`reference` holds the exact semantics of the TOSA ops that stay opaque but that the fuzzer draws, so
that graphs holding them can be evaluated too."""

from __future__ import annotations

from typing import Callable

from torch import fx

from eqsat.ir import Term, with_window
from eqsat.ops.nodes import node_args, pool_window
from eqsat.ops._op import Op, Writer, keyed_fact_row, keyed_load_rule


def read(node: fx.Node, index: Callable[[fx.Node], int], key: Callable[[], str]) -> Term:
    window = pool_window(node)  # a pooling's price depends on its window
    return Term("Opaque", tuple(index(a) for a in node_args(node)), (key() if window is None else with_window(key(), window),))


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    return out.copy_prototype(term.attrs[0], operands)


OP = Op(
    name="Opaque",
    targets=frozenset(),
    read=read,
    fact_row=keyed_fact_row,
    load_rule=keyed_load_rule("Opaque"),
    emit=emit,
    reference={"tosa.REVERSE.default": lambda x, *, axis: x.flip(axis)},
    keyed=True,
)
