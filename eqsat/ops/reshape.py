"""RESHAPE to a static shape, row-major. TOSA `RESHAPE(x, shape)` (a CONST_SHAPE operand), edge ATen `view_copy(x, shape)`."""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import TOSA, Dialect, static_shape
from eqsat.ops._op import Op, Writer, vec


def read(node: fx.Node, index: Callable[[fx.Node], int], key) -> Term | None:
    shape = static_shape(node)
    if shape is None:
        return None
    return Term("Reshape", (index(node.args[0]),), (shape,))


def fact_row(i: int, term: Term) -> tuple[str, list]:
    return f"Reshape_{len(term.attrs[0])}", [i, *term.args, *term.attrs[0]]


def load_rule(n: int) -> tuple[list[str], str]:
    dims = [f"d{k}" for k in range(n)]
    return ["x0", *dims], f"(Reshape (Node x0) {vec(dims)})"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    shape = out.const_shape(term.attrs[0]) if out.shapes_as_const_shape else list(term.attrs[0])
    target = TOSA.RESHAPE.default if out.dialect == Dialect.TOSA else out.aten("view_copy", "default")
    node = out.call(target, (operands[0], shape), {})
    out.keep_special_dtype(node)
    out.inherit_input_qparams(node, operands)
    return node


def reference(x: torch.Tensor, shape: list[int]) -> torch.Tensor:
    return x.reshape(list(shape))


OP = Op(
    name="Reshape",
    targets=frozenset({"tosa.RESHAPE.default", "aten.view_copy.default"}),
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: tuple(term.attrs[0]),
    reference={"tosa.RESHAPE.default": reference},
    moves_data=True,
)
