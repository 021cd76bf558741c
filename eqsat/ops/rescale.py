"""RESCALE (scale32, SINGLE_ROUND, signed): TOSA `RESCALE(x, dtype, scales, in_zp, out_zp)`.

The term carries the exact integer multipliers and shifts that the Arm
serializer derives from the float scales (`multipliers_and_shifts`), so laws
reason about rounding exactly. `reference` is the TOSA 1.0 specification's
RESCALE, REQUIREs and ERROR_IFs included: a violated one raises `ops.RequireViolation`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import TOSA, node_args, static_shape, tensor_val
from eqsat.ops._op import Op, Writer, error_if, require, vec

DTYPES = ("torch.int8", "torch.int16", "torch.int32")
"""The dtypes a Rescale term reads and writes."""


def multiplier_and_shift(scale: float) -> tuple[int, int] | None:
    """The scale32 multiplier and right shift of one float scale, as the Arm serializer computes them
    (executorch's `_compute_multiplier_and_shift`, checked against it in tests/ops), or None where it refuses."""
    try:
        mantissa, exponent = math.frexp(float(scale))
        multiplier = round(mantissa * (1 << 31))
    except (ValueError, OverflowError):  # nan, inf
        return None
    if multiplier == 1 << 31:
        multiplier, exponent = multiplier // 2, exponent + 1
    shift = 31 - exponent
    if shift > 62:
        multiplier, shift = multiplier >> min(31, shift - 62), 62
    if multiplier < 0 or not 2 <= shift <= 62:
        return None
    return multiplier, shift


def multipliers_and_shifts(scales: list[float]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The TOSA multipliers and shifts the Arm serializer derives from float scales (scale32), or None if it cannot."""
    exact = [multiplier_and_shift(s) for s in scales]
    if any(e is None for e in exact):
        return None
    return tuple(m for m, _ in exact), tuple(s for _, s in exact)


def scales_of(multipliers: tuple[int, ...], shifts: tuple[int, ...]) -> list[float]:
    """The float scales that serialize back to exactly these multipliers and shifts (multiplier * 2^-shift)."""
    return [math.ldexp(m, -s) for m, s in zip(multipliers, shifts)]


def read(node: fx.Node, index: Callable[[fx.Node], int], key: Callable[[], str]) -> Term | None:
    """A signed scale32 RESCALE; an unsigned one, or one of other dtypes, is elementwise (per tensor) or opaque."""
    if tensor_val(node) is None:
        return None
    term = _read_exact(node, index)
    if term is None:
        return Term("Elementwise", tuple(index(a) for a in node_args(node)), (key(),)) if len(node.args[2]) == 1 else None
    return term


def _read_exact(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    if len(node.args) < 5:
        return None
    x, out_dtype, scales, in_zp, out_zp = node.args[:5]
    unsigned = any(node.kwargs.get(k, False) for k in ("input_unsigned", "output_unsigned")) or any(node.args[5:7])
    x_val, shape = tensor_val(x) if isinstance(x, fx.Node) else None, static_shape(node)
    if unsigned or x_val is None or shape is None or str(x_val.dtype) not in DTYPES:
        return None
    if str(out_dtype) not in DTYPES or not scales or (len(scales) > 1 and (not shape or len(scales) != shape[-1])):
        return None
    exact = multipliers_and_shifts(list(scales))
    if exact is None:
        return None
    return Term("Rescale", (index(x),), (str(out_dtype), exact[0], exact[1], int(in_zp), int(out_zp), index(node)))


def fact_row(i: int, term: Term) -> tuple[str, list]:
    out_dtype, multipliers, shifts, in_zp, out_zp, tag = term.attrs
    return f"Rescale_{len(multipliers)}", [i, *term.args, out_dtype, *multipliers, *shifts, in_zp, out_zp, tag]


def load_rule(n: int) -> tuple[list[str], str]:
    ms, ss = [f"m{k}" for k in range(n)], [f"s{k}" for k in range(n)]
    return ["x0", "key", *ms, *ss, "izp", "ozp", "tag"], f"(Rescale (Node x0) key {vec(ms)} {vec(ss)} izp ozp tag)"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    """A RESCALE with the scales of the term's multipliers and shifts; it keeps the qparams of the node it stands in for."""
    out_dtype, multipliers, shifts, in_zp, out_zp, _tag = term.attrs
    args = (operands[0], getattr(torch, out_dtype.removeprefix("torch.")), scales_of(multipliers, shifts), in_zp, out_zp)
    node = out.call(TOSA.RESCALE.default, args, {})
    for key in ("input_qparams", "output_qparams"):
        if out.original is not None and key in out.original.meta:
            node.meta[key] = out.original.meta[key]
    out.keep_special_dtype(node)
    return node


RANGES = {torch.int8: (-128, 127), torch.int16: (-32768, 32767), torch.int32: (-(2**31), 2**31 - 1)}


def reference(
    x: torch.Tensor,
    out_dtype: torch.dtype,
    scales: list[float],
    in_zp: int,
    out_zp: int,
    *,
    input_unsigned: bool = False,
    output_unsigned: bool = False,
) -> torch.Tensor:
    """TOSA RESCALE, scale32, SINGLE_ROUND, signed: ((x - in_zp) * m + 2^(s-1)) >> s, + out_zp, saturated;
    per channel (the last dim) when there is more than one scale. Checks apply_scale_32's REQUIREs and the
    ERROR_IF that only an int8 tensor has a zero point (signed)."""
    if input_unsigned or output_unsigned:
        raise NotImplementedError("RESCALE reference for signed tensors only")
    error_if(x.dtype != torch.int8 and in_zp != 0, f"input_zp {in_zp} != 0 for {x.dtype}")
    error_if(out_dtype != torch.int8 and out_zp != 0, f"output_zp {out_zp} != 0 for {out_dtype}")
    exact = multipliers_and_shifts(list(scales))
    require(exact is not None, f"scales {list(scales)} have a scale32 multiplier and shift")
    multipliers, shifts = exact
    require(len(multipliers) == 1 or (x.dim() > 0 and x.shape[-1] == len(multipliers)), "one per-channel scale per index of the last dim")
    value = x.numpy().astype(np.int64) - in_zp
    m = np.array(multipliers, dtype=np.int64)  # broadcasts along the last (channel) axis, or per tensor
    s = np.array(shifts, dtype=np.int64)
    require(bool(((2 <= s) & (s <= 62)).all()), "2 <= shift <= 62")
    require(bool((value >= -(np.int64(1) << (s - 1))).all() and (value < (np.int64(1) << (s - 1))).all()), "-2^(shift-1) <= value < 2^(shift-1)")
    product = value * m  # |value| < 2^31, m < 2^31: no int64 overflow
    result = (product + (np.int64(1) << (s - 1))) >> s  # arithmetic shift: floor
    require(bool((result >= -(2**31)).all() and (result <= 2**31 - 1).all()), "the scaled value fits int32")
    low, high = RANGES[out_dtype]
    return torch.from_numpy(np.clip(result + out_zp, low, high)).to(out_dtype)


OP = Op(
    name="Rescale",
    targets=frozenset({"tosa.RESCALE.default"}),
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: tuple(inputs[0]),
    reference={"tosa.RESCALE.default": reference},
)
