"""A reduction along one axis that keeps the dim (size 1): TOSA `REDUCE_SUM/MAX/MIN(x, axis=)`, edge ATen
`sum.dim_IntList/amax/amin(x, [dim], keepdim=True)`.

The term is keyed like an opaque op (the key names the op and its other
arguments); a new reduction is a copy of the node its key was read from,
with the axis replaced.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import normalize_axis, op_name, static_shape
from eqsat.ops._op import Op, Writer, require

TARGETS = frozenset(
    {
        "tosa.REDUCE_SUM.default",
        "tosa.REDUCE_MAX.default",
        "tosa.REDUCE_MIN.default",
        "aten.sum.dim_IntList",
        "aten.amax.default",
        "aten.amin.default",
    }
)


def reduce_axis(node: fx.Node) -> int | None:
    """The single kept-dim axis a reduction node reduces, or None if it is not of that form."""
    x, shape = node.args[0], static_shape(node)
    if not isinstance(x, fx.Node) or shape is None or static_shape(x) is None:
        return None
    if op_name(node.target).startswith("tosa."):
        axis = node.kwargs.get("axis", node.args[1] if len(node.args) > 1 else None)
    else:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if not keepdim or not isinstance(dims, (list, tuple)) or len(dims) != 1:
            return None
        axis = dims[0]
    if not isinstance(axis, int) or len(shape) != len(static_shape(x)):
        return None
    return normalize_axis(axis, len(shape))


def with_reduce_axis(node: fx.Node, axis: int) -> tuple[tuple, dict]:
    """The args and kwargs of a copy of reduction node that reduces axis instead."""
    args, kwargs = list(node.args), dict(node.kwargs)
    if op_name(node.target).startswith("tosa."):
        if "axis" in kwargs:
            kwargs["axis"] = axis
        else:
            args[1] = axis
    elif "dim" in kwargs:
        kwargs["dim"] = [axis]
    else:
        args[1] = [axis]
    return tuple(args), kwargs


def read(node: fx.Node, index: Callable[[fx.Node], int], key: Callable[[], str]) -> Term | None:
    axis = reduce_axis(node)
    return None if axis is None else Term("Reduce", (index(node.args[0]),), (key(), axis))


def output_shape(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return tuple(1 if d == axis else n for d, n in enumerate(shape))


def fact_row(i: int, term: Term) -> tuple[str, list]:
    return "Reduce_1", [i, term.attrs[0], *term.args, term.attrs[1]]


def load_rule(n: int) -> tuple[list[str], str]:
    return ["key", "x0", "axis"], "(Reduce key (Node x0) axis)"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    def reduce_term_axis(node: fx.Node) -> None:
        node.args, node.kwargs = with_reduce_axis(node, term.attrs[1])

    return out.copy_prototype(term.attrs[0], operands, reduce_term_axis)


def _reduce_sum(x: torch.Tensor, *, axis: int) -> torch.Tensor:
    """TOSA REDUCE_SUM on int32: the sum must fit int32 (apply_add_s's REQUIRE)."""
    if x.dtype != torch.int32:
        raise NotImplementedError(f"REDUCE_SUM reference for int32 only, got {x.dtype}")
    total = x.to(torch.int64).sum(axis, keepdim=True)
    require(bool(((total >= -(2**31)) & (total <= 2**31 - 1)).all()), "the sum fits int32")
    return total.to(torch.int32)


REFERENCE = {
    "tosa.REDUCE_SUM.default": _reduce_sum,
    "tosa.REDUCE_MAX.default": lambda x, *, axis: x.amax(axis, keepdim=True),
    "tosa.REDUCE_MIN.default": lambda x, *, axis: x.amin(axis, keepdim=True),
}

OP = Op(
    name="Reduce",
    targets=TARGETS,
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: output_shape(inputs[0], term.attrs[1]),
    reference=REFERENCE,
    keyed=True,
)
