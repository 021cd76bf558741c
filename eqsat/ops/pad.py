"""PAD with a constant. TOSA `PAD(x, padding, value=)`: padding is [before_0, after_0, before_1, after_1, ...],
one pair per dim, first dim first (a CONST_SHAPE operand). Edge ATen `constant_pad_nd(x, pad, value)` and
torch's `pad` list the pairs from the last dim backwards (`torch_pairs`)."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import TOSA, const_shape_values, op_name, static_shape, tensor_val
from eqsat.ops._op import Op, Writer, vec


def torch_pairs(padding: tuple[int, ...] | list[int]) -> list[int]:
    """TOSA's (before, after) pairs, first dim first, as torch lists them: last dim first. Its own inverse
    (for a full list of pairs)."""
    pairs = [list(padding[i : i + 2]) for i in range(0, len(padding), 2)]
    return [v for pair in reversed(pairs) for v in pair]


def _integral(value: Any) -> int | None:
    """value as an int if it is a whole number (a pad constant), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value != int(value):
        return None
    return int(value)


def _read_tosa(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """TOSA PAD(x, CONST_SHAPE [before_0, after_0, ...], value=v) with a whole-number pad value."""
    x, padding = node.args[0], const_shape_values(node.args[1]) if len(node.args) > 1 else None
    value = _integral(node.kwargs.get("value", 0))
    shape = static_shape(x) if isinstance(x, fx.Node) else None
    if padding is None or value is None or shape is None or len(padding) != 2 * len(shape) or min(padding, default=0) < 0:
        return None
    return Term("Pad", (index(x),), (padding, value))


def _read_aten(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """aten constant_pad_nd(x, [last_before, last_after, ...], value): pairs from the last dim backwards; no cropping."""
    x, pad = node.args[0], node.args[1]
    value = _integral(node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0))
    shape = static_shape(x) if isinstance(x, fx.Node) else None
    if shape is None or value is None or not isinstance(pad, (list, tuple)) or len(pad) % 2 or len(pad) > 2 * len(shape):
        return None
    if not all(isinstance(v, int) and v >= 0 for v in pad):
        return None
    padding = (0, 0) * (len(shape) - len(pad) // 2) + tuple(int(v) for v in torch_pairs(pad))
    return Term("Pad", (index(x),), (padding, value))


def read(node: fx.Node, index: Callable[[fx.Node], int], key) -> Term | None:
    if tensor_val(node) is None:
        return None
    return _read_tosa(node, index) if op_name(node.target) == "tosa.PAD.default" else _read_aten(node, index)


def output_shape(shape: tuple[int, ...], padding: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n + padding[2 * d] + padding[2 * d + 1] for d, n in enumerate(shape))


def fact_row(i: int, term: Term) -> tuple[str, list]:
    padding, value = term.attrs
    return f"Pad_{len(padding)}", [i, *term.args, *padding, value]


def load_rule(n: int) -> tuple[list[str], str]:
    pads = [f"p{k}" for k in range(n)]
    return ["x0", *pads, "value"], f"(Pad (Node x0) {vec(pads)} value)"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    """TOSA PAD with a new CONST_SHAPE padding, or aten constant_pad_nd."""
    x = operands[0]
    padding, value = term.attrs
    constant = float(value) if x.meta["val"].dtype.is_floating_point else int(value)
    if out.pads_as_tosa:
        node = out.call(TOSA.PAD.default, (x, out.const_shape(padding)), {"value": constant})
    else:
        node = out.call(out.aten("constant_pad_nd", "default"), (x, torch_pairs(padding), constant), {})
    out.keep_special_dtype(node)
    out.inherit_input_qparams(node, operands)
    return node


def reference(x: torch.Tensor, padding: list[int], *, value) -> torch.Tensor:
    return torch.nn.functional.pad(x, torch_pairs(padding), value=value)


OP = Op(
    name="Pad",
    targets=frozenset({"tosa.PAD.default", "aten.constant_pad_nd.default"}),
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: output_shape(inputs[0], term.attrs[0]),
    reference={"tosa.PAD.default": reference},
    moves_data=True,
)
