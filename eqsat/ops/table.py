"""TABLE: out[i] = the lookup of x[i] in a constant table. TOSA `TABLE(x, table)`.

Elementwise in x; the table is a second operand that never moves. The term
is keyed like an opaque op, and a new TABLE is a copy of the node its key
was read from.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import op_name, static_shape
from eqsat.ops._op import Op, Writer, require

TARGETS = frozenset({"tosa.TABLE.default"})


def read(node: fx.Node, index: Callable[[fx.Node], int], key: Callable[[], str]) -> Term | None:
    is_table = (
        op_name(node.target) in TARGETS
        and len(node.args) == 2
        and not node.kwargs
        and all(isinstance(a, fx.Node) for a in node.args)
        and static_shape(node) is not None
        and static_shape(node.args[0]) == static_shape(node)
    )
    return Term("Table", (index(node.args[0]), index(node.args[1])), (key(),)) if is_table else None


def fact_row(i: int, term: Term) -> tuple[str, list]:
    return "Table_2", [i, term.attrs[0], *term.args]


def load_rule(n: int) -> tuple[list[str], str]:
    return ["key", "x0", "x1"], "(Table key (Node x0) (Node x1))"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    return out.copy_prototype(term.attrs[0], operands)


def reference(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """TOSA TABLE. int8: out = table[x + 128] (256 entries). int16 (513 entries, out int32): the entries either side
    of (x + 32768) / 128, interpolated, (base << 7) + (next - base) * fraction; REQUIRE the slope fits int16."""
    if x.dtype == torch.int8 and table.dtype == torch.int8 and tuple(table.shape) == (256,):
        return table[x.to(torch.int64) + 128]
    if x.dtype == torch.int16 and table.dtype == torch.int16 and tuple(table.shape) == (513,):
        value = x.to(torch.int64) + 32768
        base, following = table.to(torch.int64)[value >> 7], table.to(torch.int64)[(value >> 7) + 1]
        slope = following - base
        require(bool(((slope >= -32768) & (slope <= 32767)).all()), "the slope between table entries fits int16")
        return ((base << 7) + slope * (value & 0x7F)).to(torch.int32)
    raise NotImplementedError(f"no TABLE of {x.dtype} with a {table.dtype}{list(table.shape)} table")


OP = Op(
    name="Table",
    targets=TARGETS,
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: tuple(inputs[0]),
    reference={"tosa.TABLE.default": reference},
    keyed=True,
)
