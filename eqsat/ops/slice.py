"""SLICE: the box [start, start + size) of the input. TOSA `SLICE(x, start, size)` (CONST_SHAPE operands),
edge ATen `slice_copy(x, dim, start, end, step)` (one dim; a step other than 1 is not a Slice)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from eqsat.ir import TensorType, Term
from eqsat.ops.nodes import TOSA, const_shape_values, normalize_axis, op_name, static_shape, tensor_val
from eqsat.ops._op import Op, Writer, vec


def _read_tosa(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    start, size = const_shape_values(node.args[1]), const_shape_values(node.args[2])
    if start is None or size is None:
        return None
    return Term("Slice", (index(node.args[0]),), (start, size))


def _read_aten(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """aten slice_copy(self, dim=0, start=None, end=None, step=1), arguments given by position or keyword;
    a step other than 1 stays opaque."""
    arguments = {"dim": 0, "start": None, "end": None, "step": 1, **dict(zip(("self", "dim", "start", "end", "step"), node.args)), **node.kwargs}
    x, dim, start, step = arguments["self"], arguments["dim"], arguments["start"], arguments["step"]
    in_shape, out_shape = static_shape(x), static_shape(node)
    if in_shape is None or out_shape is None or step != 1:
        return None
    dim = normalize_axis(dim, len(in_shape))
    begin = 0 if start is None else min(max(start + in_shape[dim] if start < 0 else start, 0), in_shape[dim])
    starts = tuple(begin if d == dim else 0 for d in range(len(in_shape)))
    return Term("Slice", (index(x),), (starts, out_shape))


def read(node: fx.Node, index: Callable[[fx.Node], int], key) -> Term | None:
    if tensor_val(node) is None:
        return None
    return _read_tosa(node, index) if op_name(node.target) == "tosa.SLICE.default" else _read_aten(node, index)


def fact_row(i: int, term: Term) -> tuple[str, list]:
    return f"Slice_{len(term.attrs[0])}", [i, *term.args, *term.attrs[0], *term.attrs[1]]


def load_rule(n: int) -> tuple[list[str], str]:
    starts, sizes = [f"s{k}" for k in range(n)], [f"z{k}" for k in range(n)]
    return ["x0", *starts, *sizes], f"(Slice (Node x0) {vec(starts)} {vec(sizes)})"


def _aten_slices(out: Writer, x: fx.Node, box: tuple) -> fx.Node:
    """One slice_copy per dimension the box cuts (the input itself if it cuts none)."""
    start, size = box
    full = tuple(x.meta["val"].shape)
    dtype = str(x.meta["val"].dtype)
    for dim, (begin, extent) in enumerate(zip(start, size)):
        if (begin, extent) != (0, full[dim]):
            cut = TensorType(tuple(size[: dim + 1]) + full[dim + 1 :], dtype)
            x = out.call(out.aten("slice_copy", "Tensor"), (x, dim, begin, begin + extent), {}, cut)
    return x


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    x = operands[0]
    if out.slices_as_tosa:
        start, size = term.attrs
        node = out.call(TOSA.SLICE.default, (x, out.const_shape(start), out.const_shape(size)), {})
    else:
        node = _aten_slices(out, x, term.attrs)
    out.keep_special_dtype(node)
    out.inherit_input_qparams(node, operands)
    return node


def reference(x: torch.Tensor, start: list[int], size: list[int]) -> torch.Tensor:
    return x[tuple(slice(b, b + n) for b, n in zip(start, size))].contiguous()


OP = Op(
    name="Slice",
    targets=frozenset({"tosa.SLICE.default", "aten.slice_copy.Tensor"}),
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: tuple(term.attrs[1]),
    reference={"tosa.SLICE.default": reference},
    moves_data=True,
)
