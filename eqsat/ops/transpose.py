"""TRANSPOSE: output dim i is input dim perm[i]. TOSA `TRANSPOSE(x, perms)`, edge ATen `permute_copy(x, dims)`."""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import TOSA, Dialect, normalize_axis, tensor_val
from eqsat.ops._op import Op, Writer, vec


def read(node: fx.Node, index: Callable[[fx.Node], int], key) -> Term | None:
    if tensor_val(node) is None:
        return None
    x, perm = node.args[0], node.args[1]
    rank = len(perm)
    return Term("Transpose", (index(x),), (tuple(normalize_axis(p, rank) for p in perm),))


def output_shape(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[p] for p in perm)


def fact_row(i: int, term: Term) -> tuple[str, list]:
    return f"Transpose_{len(term.attrs[0])}", [i, *term.args, *term.attrs[0]]


def load_rule(n: int) -> tuple[list[str], str]:
    perm = [f"p{k}" for k in range(n)]
    return ["x0", *perm], f"(Transpose (Node x0) {vec(perm)})"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    perm = list(term.attrs[0])
    if out.dialect == Dialect.TOSA:
        node = out.call(TOSA.TRANSPOSE.default, (operands[0], perm), {})
    else:
        node = out.call(out.aten("permute_copy", "default"), (operands[0], perm), {})
    out.keep_special_dtype(node)
    out.inherit_input_qparams(node, operands)
    return node


def reference(x: torch.Tensor, perm: list[int]) -> torch.Tensor:
    return x.permute(list(perm)).contiguous()


OP = Op(
    name="Transpose",
    targets=frozenset({"tosa.TRANSPOSE.default", "aten.permute_copy.default"}),
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: output_shape(inputs[0], term.attrs[0]),
    reference={"tosa.TRANSPOSE.default": reference},
    moves_data=True,
)
