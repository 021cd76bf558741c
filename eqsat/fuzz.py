"""Fuzzing the optimizer: random TOSA-dialect graphs, checked bit-exact.

Motivation: rule tests check one law at a time; the fuzzer checks what the
laws do together, on graphs shaped like the ones the pass sees in the Arm
pipeline (pure TOSA dialect, rescales inserted, int8 or int16 with zero points).

Overview:
- `graph_specs()` is a hypothesis strategy for `GraphSpec`: a straight-line
  int8 or int16 program of TRANSPOSE, CONCAT (one input or more), SLICE,
  RESHAPE, PAD, RESCALE (per tensor or per channel), CLAMP, REVERSE (an op
  the bridge does not model), TABLE (int8, or int16 interpolated into int32
  and rescaled back), rescaled ADD, SUB and MUL (to int32, the op, back; with
  broadcasting, scalars included) and REDUCE_SUM (the same way), REDUCE_MAX
  and REDUCE_MIN, over inputs of rank 1 to 6 with dims of 1 to MAX_DIM (and,
  when asked, a zero-size dim, which the optimizer must refuse). Every value
  carries its zero point. Some steps are aimed at laws that random programs
  rarely reach: RESCALE->RESCALE through int32 with parameters on both sides
  of the fusion guards (per tensor and per channel), RESCALEs that are the
  identity or miss it by one guard, concats of equally rescaled values, data
  movement after a (per-channel) RESCALE, CLAMP, TABLE, PAD or a binary op,
  slices of a PAD's unpadded part, slices of concats across an input
  boundary, adjacent slices concatenated back, DenseNet's growing concats,
  and the "ReLU'd tensor concatenated with a signed tensor under a shared
  zero point" shape (CLAMP(x, zp, max) ++ y).
  A step reads the latest value half the time, so such chains are common.
- `GraphSpec.build()` writes a spec as an FX graph in TOSA dialect, with
  FakeTensor `val` meta like the Arm pipeline's.
- `evaluate()` (`eqsat.ops.reference`) runs such a graph exactly, each op
  as its registry file specifies it: RESCALE as the TOSA specification
  defines it (the multiplier and shift that the Arm backend serializes, an
  int64 multiply, one rounding shift, zero points, saturation, REQUIREs
  and ERROR_IFs checked), data movement, TABLE, ADD, SUB, MUL, CLAMP and the
  reductions on integers. Inputs aim half their elements at each dtype's
  extremes and the values next to each zero point (`soundness.random_inputs`).
- `check_every_enode()` saturates a spec's graph with the pass's rules and
  checks every e-node of the e-graph against its e-class's value
  (`soundness.check_every_enode`), and counts the laws that fired.
- `check()` does that, then optimizes a spec's graph for a target and compares
  both graphs' outputs bit for bit; `run()` checks many specs under hypothesis,
  each batch for every target, which shrinks every failure to a minimal
  reproducer, printed as Python by `GraphSpec.to_python()`, and reports per
  law in how many graphs of each dtype it fired (`FuzzRun.markdown()`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import re
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from torch import fx

from eqsat import pipeline, rules, soundness
from eqsat.bridge_fx import ZERO_SIZE_REFUSAL
from eqsat.configuration import Configuration
from eqsat.errors import EqsatError
from eqsat.graph_builder import GraphBuilder
from eqsat.ir import MAX_RANK
from eqsat.ops.nodes import TOSA
from eqsat.ops.reference import evaluate
from eqsat.rules import _program

TOSA_SPEC = TosaSpecification.create_from_string("TOSA-1.0+INT+int16")
"""The TOSA profile fuzzed graphs are built in: integer, with the int16 extension that both Ethos-U targets have."""
MAX_DIM = 4
MAX_STEPS = 8


# ---------------------------------------------------------------- specs

DTYPES = {"int8": torch.int8, "int16": torch.int16}
"""The activation dtypes of fuzzed graphs: a8w8 lowerings carry int8 tensors, a16w8 lowerings int16."""

TARGETS = ("ethos-u55-128", "ethos-u85-256")
"""The targets the fuzzer optimizes for: each has its own cost model, so its own extractions."""

Target = Configuration | str
"""What the fuzzer optimizes for: a configuration, or a target at its default configuration."""


@dataclass(frozen=True)
class Step:
    """One op of a spec: `op` applied to earlier values `operands`, with attributes.

    ops and attributes:
    transpose (perm,), concat (axis,), slice (start, size), reshape (shape,),
    pad (padding, value), clamp (low, high), reverse (axis,), table (seed,),
    rescale (scale, in_zp, out_zp), add, sub and mul (scale_a, scale_b, scale_out, zp_a, zp_b, zp_out),
    shared_binary (op, scale_in, scale_out, zp_in, zp_out),
    rescale_pair (wide_scale, scale, in_zp, out_zp), concat_of_rescales (axis, scales, in_zp, out_zp),
    reduce_sum (axis, scale_in, scale_out, zp_in, zp_out), reduce_max (axis,), reduce_min (axis,).

    A scale is a float (per tensor) or a tuple of floats (per channel: one per
    index of the last axis). Every step's result has its first operand's dtype
    (int8 or int16). add, sub, mul and reduce_sum compute on int32 between RESCALEs,
    as the Arm backend lowers them, and rescale_pair goes through int32; an int16 table looks up a 513-entry int16
    table into int32 (TOSA's interpolating TABLE) and rescales by 2^-7 back to int16.
    """

    op: str
    operands: tuple[int, ...]
    attrs: tuple


@dataclass(frozen=True)
class GraphSpec:
    """A straight-line int8/int16 program: inputs (shapes), steps, and output value indices.

    Value k is input k for k < len(inputs), else the result of step k - len(inputs).
    `dtypes[k]` is input k's dtype ("int8" or "int16"); inputs past its end are int8.
    """

    inputs: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    dtypes: tuple[str, ...] = ()

    def dtype_of(self, k: int) -> str:
        """The dtype of input k."""
        return self.dtypes[k] if k < len(self.dtypes) else "int8"

    def has_zero_size(self) -> bool:
        """Whether an input has a zero-size dimension (then so does every value computed from it)."""
        return any(0 in shape for shape in self.inputs)

    def build(self) -> fx.GraphModule:
        """The spec as a TOSA-dialect FX graph with FakeTensor `val` meta."""
        builder = GraphBuilder()
        values: list[fx.Node] = [builder.input(f"x{k}", shape, DTYPES[self.dtype_of(k)]) for k, shape in enumerate(self.inputs)]
        with TosaLoweringContext(TOSA_SPEC):
            for step in self.steps:
                values.append(_BUILDERS[step.op](builder, [values[k] for k in step.operands], *step.attrs))
        return builder.output(*[values[k] for k in self.outputs])

    def pruned(self) -> GraphSpec:
        """The same outputs without the steps and inputs they do not depend on."""
        live, n = set(self.outputs), len(self.inputs)
        for k in range(len(self.steps) - 1, -1, -1):
            if n + k in live:
                live.update(self.steps[k].operands)
        kept = [k for k in range(n + len(self.steps)) if k in live]
        position = {old: new for new, old in enumerate(kept)}
        inputs = [k for k in range(n) if k in live]
        return GraphSpec(
            tuple(self.inputs[k] for k in inputs),
            tuple(Step(s.op, tuple(position[j] for j in s.operands), s.attrs) for k, s in enumerate(self.steps) if n + k in live),
            tuple(position[k] for k in self.outputs),
            _dtypes_field([self.dtype_of(k) for k in inputs]),
        )

    def to_python(self) -> str:
        """A standalone reproducer: Python that rebuilds this spec and checks it."""
        steps = ",\n".join(f"        Step({s.op!r}, {s.operands!r}, {s.attrs!r})" for s in self.steps)
        dtypes = f"    dtypes={self.dtypes!r},\n" if self.dtypes else ""
        return (
            "from eqsat.fuzz import GraphSpec, Step, check\n"
            "spec = GraphSpec(\n"
            f"    inputs={self.inputs!r},\n"
            f"    steps=(\n{steps},\n    ),\n"
            f"    outputs={self.outputs!r},\n"
            f"{dtypes}"
            ")\n"
            "print(check(spec))\n"
        )


def _dtypes_field(dtypes: list[str]) -> tuple[str, ...]:
    """The `dtypes` of a spec whose inputs have these dtypes: empty when all are int8."""
    return tuple(dtypes) if any(d != "int8" for d in dtypes) else ()


def merge(specs: list[GraphSpec]) -> GraphSpec:
    """Several specs side by side as one spec (one optimizer run checks them all)."""
    inputs = tuple(shape for spec in specs for shape in spec.inputs)
    dtypes = [spec.dtype_of(k) for spec in specs for k in range(len(spec.inputs))]
    step_base = len(inputs)
    steps: list[Step] = []
    outputs: list[int] = []
    input_base = 0
    for spec in specs:
        n = len(spec.inputs)

        def moved(k: int) -> int:
            return input_base + k if k < n else step_base + k - n

        steps.extend(Step(s.op, tuple(moved(k) for k in s.operands), s.attrs) for s in spec.steps)
        outputs.extend(moved(k) for k in spec.outputs)
        input_base += n
        step_base += len(spec.steps)
    return GraphSpec(inputs, tuple(steps), tuple(outputs), _dtypes_field(dtypes))


def _scale_list(scale: float | tuple[float, ...]) -> list[float]:
    return list(scale) if isinstance(scale, tuple) else [scale]


def _dtype(node: fx.Node) -> torch.dtype:
    return node.meta["val"].dtype


def _rescale(b: GraphBuilder, x: fx.Node, dtype: torch.dtype, scale, in_zp: int, out_zp: int) -> fx.Node:
    return b.call(TOSA.RESCALE.default, x, dtype, _scale_list(scale), in_zp, out_zp)


def _build_binary(op: Any) -> Callable[..., fx.Node]:
    """A builder of a rescaled binary op: both operands to int32, op, back to the first operand's dtype."""

    def build(b: GraphBuilder, xs: list[fx.Node], scale_a, scale_b, scale_out, zp_a, zp_b, zp_out) -> fx.Node:
        wide_a = _rescale(b, xs[0], torch.int32, scale_a, zp_a, 0)
        wide_b = _rescale(b, xs[1], torch.int32, scale_b, zp_b, 0)
        return _rescale(b, b.call(op, wide_a, wide_b), _dtype(xs[0]), scale_out, 0, zp_out)

    return build


BINARY_OPS = {"add": TOSA.ADD.default, "sub": TOSA.SUB.default, "mul": TOSA.MUL.default}


def _build_shared_binary(b: GraphBuilder, xs: list[fx.Node], op: str, scale_in, scale_out, zp_in, zp_out) -> fx.Node:
    """op(r, r) for r the operand's RESCALE to int32, read by both operand slots (a layer norm's x * x), back to the
    operand's dtype."""
    wide = _rescale(b, xs[0], torch.int32, scale_in, zp_in, 0)
    return _rescale(b, b.call(BINARY_OPS[op], wide, wide), _dtype(xs[0]), scale_out, 0, zp_out)


def _build_reduce_sum(b: GraphBuilder, xs: list[fx.Node], axis, scale_in, scale_out, zp_in, zp_out) -> fx.Node:
    wide = _rescale(b, xs[0], torch.int32, scale_in, zp_in, 0)
    return _rescale(b, b.call(TOSA.REDUCE_SUM.default, wide, axis=axis), _dtype(xs[0]), scale_out, 0, zp_out)


def lookup_table(seed: int, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    """The TABLE of a table step, drawn from seed: for int8 a permutation of -128..127, for int16 513 int16
    entries whose neighbours differ by less than 2^14 (TABLE REQUIREs that the slope between entries fits int16)."""
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.int8:
        return torch.randperm(256, generator=generator).sub(128).to(torch.int8)
    steps = torch.randint(-(2**14), 2**14, (513,), generator=generator)
    return steps.cumsum(0).clamp(-(2**15), 2**15 - 1).to(torch.int16)


INT16_TABLE_SCALE = 2.0**-7
"""An int16 TABLE's int32 result has 7 fractional bits; the table step rescales it back to int16 by this."""


def _build_table(b: GraphBuilder, xs: list[fx.Node], seed: int) -> fx.Node:
    dtype = _dtype(xs[0])
    table = b.constant(f"table{sum(1 for _ in b.root.buffers())}", lookup_table(seed, dtype))
    looked_up = b.call(TOSA.TABLE.default, xs[0], table)
    return looked_up if dtype == torch.int8 else _rescale(b, looked_up, dtype, INT16_TABLE_SCALE, 0, 0)


def _build_rescale(b: GraphBuilder, xs: list[fx.Node], scale, in_zp: int, out_zp: int) -> fx.Node:
    return _rescale(b, xs[0], _dtype(xs[0]), scale, in_zp, out_zp)


def _build_rescale_pair(b: GraphBuilder, xs: list[fx.Node], wide_scale: float, scale, in_zp: int, out_zp: int) -> fx.Node:
    """RESCALE to int32 by wide_scale, then back to the operand's dtype by scale (per tensor or per channel)."""
    wide = _rescale(b, xs[0], torch.int32, wide_scale, in_zp, 0)
    return _rescale(b, wide, _dtype(xs[0]), scale, 0, out_zp)


def _build_concat_of_rescales(b: GraphBuilder, xs: list[fx.Node], axis: int, scales: tuple, in_zp: int, out_zp: int) -> fx.Node:
    """CONCAT of the operands, each rescaled by its own entry of scales (all equal, mostly: see _step_concat_of_rescales)."""
    return b.call(TOSA.CONCAT.default, [_rescale(b, x, _dtype(x), scale, in_zp, out_zp) for x, scale in zip(xs, scales)], axis=axis)


_BUILDERS: dict[str, Callable[..., fx.Node]] = {
    "transpose": lambda b, xs, perm: b.call(TOSA.TRANSPOSE.default, xs[0], list(perm)),
    "concat": lambda b, xs, axis: b.call(TOSA.CONCAT.default, xs, axis=axis),
    "slice": lambda b, xs, start, size: b.call(TOSA.SLICE.default, xs[0], b.const_shape(start), b.const_shape(size)),
    "reshape": lambda b, xs, shape: b.call(TOSA.RESHAPE.default, xs[0], b.const_shape(shape)),
    "pad": lambda b, xs, padding, value: b.call(TOSA.PAD.default, xs[0], b.const_shape(padding), value=value),
    "rescale": _build_rescale,
    "clamp": lambda b, xs, low, high: b.call(TOSA.CLAMP.default, xs[0], low, high),
    "reverse": lambda b, xs, axis: b.call(TOSA.REVERSE.default, xs[0], axis=axis),
    "table": _build_table,
    **{name: _build_binary(op) for name, op in BINARY_OPS.items()},
    "shared_binary": _build_shared_binary,
    "rescale_pair": _build_rescale_pair,
    "concat_of_rescales": _build_concat_of_rescales,
    "reduce_sum": _build_reduce_sum,
    "reduce_max": lambda b, xs, axis: b.call(TOSA.REDUCE_MAX.default, xs[0], axis=axis),
    "reduce_min": lambda b, xs, axis: b.call(TOSA.REDUCE_MIN.default, xs[0], axis=axis),
}


# ---------------------------------------------------------------- strategies


@dataclass
class _Value:
    shape: tuple[int, ...]
    zero_point: int
    dtype: str


@dataclass
class _Drafting:
    """A spec being drawn. Values are numbered in creation order while drawing;
    `spec()` renumbers them so that inputs come first."""

    values: list[_Value] = field(default_factory=list)
    input_ids: list[int] = field(default_factory=list)
    steps: list[tuple[Step, int]] = field(default_factory=list)

    def add_input(self, shape: tuple[int, ...], zero_point: int, dtype: str) -> int:
        self.values.append(_Value(shape, zero_point, dtype))
        self.input_ids.append(len(self.values) - 1)
        return len(self.values) - 1

    def add_step(self, step: Step, result: _Value) -> int:
        self.values.append(result)
        self.steps.append((step, len(self.values) - 1))
        return len(self.values) - 1

    def spec(self, outputs: list[int]) -> GraphSpec:
        position = {value_id: k for k, value_id in enumerate(self.input_ids)}
        for k, (_, value_id) in enumerate(self.steps):
            position[value_id] = len(self.input_ids) + k
        steps = tuple(Step(s.op, tuple(position[j] for j in s.operands), s.attrs) for s, _ in self.steps)
        shapes_in = tuple(self.values[j].shape for j in self.input_ids)
        dtypes = _dtypes_field([self.values[j].dtype for j in self.input_ids])
        return GraphSpec(shapes_in, steps, tuple(dict.fromkeys(position[j] for j in outputs)), dtypes)


def zero_points(dtype: str) -> st.SearchStrategy[int]:
    """TOSA zero points: any int8 value for int8, 0 for int16 (RESCALE REQUIREs it)."""
    return st.integers(-128, 127) if dtype == "int8" else st.just(0)


def _value_range(dtype: str) -> tuple[int, int]:
    info = torch.iinfo(DTYPES[dtype])
    return info.min, info.max


scales = st.sampled_from([0.25, 0.5, 0.75, 1.0, 1.0 / 3.0, 1.5, 2.0, 0.0078125, 0.9])


def _scale(draw, channels: int) -> float | tuple[float, ...]:
    """A per-tensor scale, or (half the time, with at least one channel) one scale per channel: drawn
    independently, or all exactly 1 (what per-channel-rescale-identity needs)."""
    if channels >= 1 and draw(st.booleans()):
        return (1.0,) * channels if draw(st.integers(0, 3)) == 0 else tuple(draw(scales) for _ in range(channels))
    return draw(scales)


def shapes(min_rank: int = 1, max_rank: int = MAX_RANK) -> st.SearchStrategy[tuple[int, ...]]:
    """Small static shapes of rank min_rank..max_rank (dims 1..MAX_DIM: size-1 dims are common)."""
    return st.lists(st.integers(1, MAX_DIM), min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def _factorization(draw, numel: int) -> tuple[int, ...]:
    """A random shape of rank 1..MAX_RANK with this many elements (for 0: a zero somewhere)."""
    rank = draw(st.integers(1, MAX_RANK))
    if numel == 0:
        dims = [draw(st.integers(1, MAX_DIM)) for _ in range(rank)]
        dims[draw(st.integers(0, rank - 1))] = 0
        return tuple(dims)
    factors, n, p = [], numel, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    dims = [1] * rank
    for factor in factors:
        dims[draw(st.integers(0, rank - 1))] *= factor
    return tuple(dims)


def _like(value: _Value, shape: tuple[int, ...], zero_point: int | None = None) -> _Value:
    return _Value(shape, value.zero_point if zero_point is None else zero_point, value.dtype)


def _step_transpose(draw, g: _Drafting, k: int) -> int:
    """A random permutation; half the time one that keeps the last axis last (a per-channel rescale can cross it)."""
    shape = g.values[k].shape
    if draw(st.booleans()):
        perm = (*draw(st.permutations(range(len(shape) - 1))), len(shape) - 1)
    else:
        perm = tuple(draw(st.permutations(range(len(shape)))))
    return g.add_step(Step("transpose", (k,), (perm,)), _like(g.values[k], tuple(shape[p] for p in perm)))


def _concat_parts(draw, g: _Drafting, k: int, axis: int, operands: list[int]) -> list[int]:
    """operands, then up to two more values that fit a concat of k along axis (k itself, other values of its
    dtype and zero point, or new inputs)."""
    value = g.values[k]
    operands = list(operands)
    for _ in range(draw(st.integers(0, 2))):  # no other part: a one-input concat (concat-single)
        fits = [
            j for j, v in enumerate(g.values)
            if v.zero_point == value.zero_point and v.dtype == value.dtype and len(v.shape) == len(value.shape)
            and all(a == b for d, (a, b) in enumerate(zip(v.shape, value.shape)) if d != axis)
        ]
        if draw(st.booleans()):
            operands.append(draw(st.sampled_from(fits)))
        else:
            shape = tuple(draw(st.integers(1, MAX_DIM)) if d == axis else s for d, s in enumerate(value.shape))
            operands.append(g.add_input(shape, value.zero_point, value.dtype))
    return operands


def _step_concat(draw, g: _Drafting, k: int, part: int | None = None) -> int:
    """k ++ (parts that fit: k itself, other values, or new inputs) along a random axis, all under k's zero point."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    operands = _concat_parts(draw, g, k, axis, [k] if part is None else [k, part])
    size = sum(g.values[j].shape[axis] for j in operands)
    return g.add_step(Step("concat", tuple(operands), (axis,)), _like(value, tuple(size if d == axis else s for d, s in enumerate(value.shape))))


def _step_slice(draw, g: _Drafting, k: int) -> int:
    """A random box (none of a zero-size value: TOSA SLICE REQUIREs start < dim); a third of the time one that
    keeps the whole last axis, a third one that cuts only the last axis (a per-channel rescale's channels)."""
    shape = g.values[k].shape
    if 0 in shape:
        return k
    start = [draw(st.integers(0, d - 1)) for d in shape]
    size = [draw(st.integers(1, d - s)) for d, s in zip(shape, start)]
    form = draw(st.sampled_from(["any", "keeps channels", "cuts channels"]))
    if form == "keeps channels":
        start[-1], size[-1] = 0, shape[-1]
    elif form == "cuts channels":
        start[:-1], size[:-1] = [0] * (len(shape) - 1), list(shape[:-1])
    return g.add_step(Step("slice", (k,), (tuple(start), tuple(size))), _like(g.values[k], tuple(size)))


def _step_reshape(draw, g: _Drafting, k: int) -> int:
    """A random shape of as many elements; half the time one that keeps the last dim (and leading dims of 1)."""
    shape = g.values[k].shape
    if shape and shape[-1] > 0 and draw(st.booleans()):
        leading = draw(_factorization(math.prod(shape[:-1])))[: MAX_RANK - 1]
        new = (*leading, shape[-1]) if math.prod(leading) == math.prod(shape[:-1]) else (math.prod(shape[:-1]), shape[-1])
    else:
        new = draw(_factorization(math.prod(shape)))
    return g.add_step(Step("reshape", (k,), (new,)), _like(g.values[k], new))


def _step_pad(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    padding = tuple(draw(st.integers(0, 1)) for _ in range(2 * len(value.shape)))
    out = tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(value.shape))
    return g.add_step(Step("pad", (k,), (padding, value.zero_point)), _like(value, out))


def _step_rescale(draw, g: _Drafting, k: int) -> int:
    """A RESCALE keeping the dtype; half the time the zero point too (with a scale of 1: an identity)."""
    value = g.values[k]
    out_zp = value.zero_point if draw(st.booleans()) else draw(zero_points(value.dtype))
    scale = _scale(draw, value.shape[-1])
    return g.add_step(Step("rescale", (k,), (scale, value.zero_point, out_zp)), _like(value, value.shape, out_zp))


def _step_clamp(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    lowest, highest = _value_range(value.dtype)
    low = draw(st.sampled_from([value.zero_point, lowest, draw(st.integers(lowest, highest))]))
    high = draw(st.integers(low, highest))
    return g.add_step(Step("clamp", (k,), (low, high)), _like(value, value.shape))


def _step_reverse(draw, g: _Drafting, k: int) -> int:
    """REVERSE: an op the bridge does not model (an opaque term)."""
    value = g.values[k]
    return g.add_step(Step("reverse", (k,), (draw(st.integers(0, len(value.shape) - 1)),)), _like(value, value.shape))


def _step_table(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    return g.add_step(Step("table", (k,), (draw(st.integers(0, 3)),)), _like(value, value.shape, draw(zero_points(value.dtype))))


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(y if x == 1 else x for x, y in zip(a, b))


MUL_SCALES = {"int8": scales, "int16": st.sampled_from([0.25, 0.125, 0.0078125])}
"""The scales of a MUL's operands to int32: an int16 one at most 2^-2, so that the product of two stays below 2^28
(TOSA MUL REQUIREs that it fits int32, and the RESCALE back that it is below 2^(shift - 1) for a scale up to 2)."""


def _step_binary(op: str) -> Callable[..., int]:
    def step(draw, g: _Drafting, k: int) -> int:
        """k op other, where other is a value of k's shape and dtype or a new input broadcast along some
        dims (a third of the time along all: a scalar); operands may be swapped."""
        value = g.values[k]
        same = [j for j, v in enumerate(g.values) if v.shape == value.shape and v.dtype == value.dtype]
        form = draw(st.sampled_from(["same", "broadcast", "scalar"]))
        if form == "same":
            other = draw(st.sampled_from(same))
        else:
            shape = tuple(1 if form == "scalar" or draw(st.booleans()) else d for d in value.shape)
            other = g.add_input(shape, draw(zero_points(value.dtype)), value.dtype)
        if draw(st.booleans()):
            k, other = other, k
        a, b = g.values[k], g.values[other]
        out = _broadcast(a.shape, b.shape)
        zp_out = draw(zero_points(value.dtype))
        operand_scales = MUL_SCALES[value.dtype] if op == "mul" else scales
        attrs = (draw(operand_scales), draw(operand_scales), _scale(draw, out[-1]), a.zero_point, b.zero_point, zp_out)
        return g.add_step(Step(op, (k, other), attrs), _like(value, out, zp_out))

    return step


def _step_shared_binary(draw, g: _Drafting, k: int) -> int:
    """k op k, as k's RESCALE to int32 read by both operand slots (split-shared-operand-rescale), or half the time
    with a RESCALE of k of its own for each slot (the same parameters: the law has nothing to split)."""
    value = g.values[k]
    op = draw(st.sampled_from(sorted(BINARY_OPS)))
    scale_in, scale_out = draw(MUL_SCALES[value.dtype] if op == "mul" else scales), _scale(draw, value.shape[-1])
    zp_out = draw(zero_points(value.dtype))
    if draw(st.booleans()):
        step = Step("shared_binary", (k,), (op, scale_in, scale_out, value.zero_point, zp_out))
    else:
        step = Step(op, (k, k), (scale_in, scale_in, scale_out, value.zero_point, value.zero_point, zp_out))
    return g.add_step(step, _like(value, value.shape, zp_out))


def _reduced(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return tuple(1 if d == axis else s for d, s in enumerate(shape))


def _step_reduce_sum(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    out = _reduced(value.shape, axis)
    zp_out = draw(zero_points(value.dtype))
    attrs = (axis, draw(scales), _scale(draw, out[-1]), value.zero_point, zp_out)
    return g.add_step(Step("reduce_sum", (k,), attrs), _like(value, out, zp_out))


def _step_reduce_extreme(op: str) -> Callable[..., int]:
    def step(draw, g: _Drafting, k: int) -> int:
        """A max or min over a random axis, half the time the innermost one."""
        value = g.values[k]
        axis = len(value.shape) - 1 if draw(st.booleans()) else draw(st.integers(0, len(value.shape) - 1))
        return g.add_step(Step(op, (k,), (axis,)), _like(value, _reduced(value.shape, axis)))

    return step


def _step_relu_concat(draw, g: _Drafting, k: int) -> int:
    """CLAMP(k, zp, max) ++ y with y signed under the same zero point: the shape that trips the stock pipeline."""
    value = g.values[k]
    relu = g.add_step(Step("clamp", (k,), (value.zero_point, _value_range(value.dtype)[1])), _like(value, value.shape))
    signed = g.add_input(value.shape, value.zero_point, value.dtype)
    return _step_concat(draw, g, relu, part=signed)


MANTISSAS = (0.5, 0.75, 0.6180339887, 0.99)
"""Mantissas of drawn scales: a scale mantissa * 2^e serializes to the multiplier mantissa * 2^31 and shift 31 - e."""


def _with_shift(draw, shift: int) -> float:
    """A scale whose scale32 shift is exactly shift."""
    return math.ldexp(draw(st.sampled_from(MANTISSAS)), 31 - shift)


def _with_channels(draw, g: _Drafting, k: int) -> int:
    """A value with channels (a last dim above 1) for a per-channel RESCALE: k; or, when k's last dim is 1, a
    transpose of k that swaps a dim above 1 last; or, when k has no such dim, a new input of k's rank, dtype and
    zero point with a last dim above 1."""
    value = g.values[k]
    shape, last = value.shape, len(value.shape) - 1
    if shape[-1] > 1:
        return k
    if wide := [d for d, extent in enumerate(shape) if extent > 1]:
        swapped = draw(st.sampled_from(wide))
        perm = tuple(last if d == swapped else swapped if d == last else d for d in range(len(shape)))
        return g.add_step(Step("transpose", (k,), (perm,)), _like(value, tuple(shape[p] for p in perm)))
    return g.add_input((*shape[:-1], draw(st.integers(2, MAX_DIM))), value.zero_point, value.dtype)


def _per_channel_form(draw, g: _Drafting, k: int) -> tuple[int, int]:
    """(value, channels) for a per-channel RESCALE of k: a value with channels (_with_channels) and their count."""
    k = _with_channels(draw, g, k)
    return k, g.values[k].shape[-1]


def _rescale_form(draw, g: _Drafting, k: int) -> tuple[int, int]:
    """(value, channels) for an aimed RESCALE of k: half the time per channel (_per_channel_form), else per tensor,
    of k (channels 1)."""
    if draw(st.sampled_from(["per channel", "per tensor"])) == "per tensor":
        return k, 1
    return _per_channel_form(draw, g, k)


def _step_rescale_pair(draw, g: _Drafting, k: int) -> int:
    """A _rescale_pair per tensor or per channel (_rescale_form; rescale-rescale-exact, rescale-per-channel-rescale-exact)."""
    return _rescale_pair(draw, g, *_rescale_form(draw, g, k))


def _step_per_channel_rescale_pair(draw, g: _Drafting, k: int) -> int:
    """A per-channel _rescale_pair of a value with channels (_per_channel_form; rescale-per-channel-rescale-exact)."""
    return _rescale_pair(draw, g, *_per_channel_form(draw, g, k))


def _rescale_pair(draw, g: _Drafting, k: int, channels: int) -> int:
    """RESCALE to int32 by 2^e, then back by a scale per tensor (channels 1) or one per channel, with shift e + margin:
    two times in three within fuses_exactly's guards (a power of two, e <= 15, every margin >= 17: the fusion
    laws fire), otherwise just past one of them as far as the original graph stays legal: 0.75 * 2^e, e of 16 or
    17 (int8 only), or one margin (of one channel) below 17. Both RESCALEs REQUIRE -2^(shift - 1) <= value <
    2^(shift - 1): |x - zp| <= 255 (int8) or -2^15 <= x < 2^15 (int16), times 2^e, so int8 takes e up to 17 and
    margins from 9, int16 e up to 14 and margins from 16 (from 17 when the first scale is not a power of two)."""
    value = g.values[k]
    int8 = value.dtype == "int8"
    missed = None
    if draw(st.integers(0, 2)) == 2:
        missed = draw(st.sampled_from(["power of two", "margin", *(["exponent"] if int8 else [])]))
    exponent = draw(st.integers(16, 17) if missed == "exponent" else st.integers(0, 15 if int8 else 14))
    margins = [draw(st.sampled_from([17, 18, 20])) for _ in range(channels)]
    if missed == "margin":
        lowest = 9 if int8 else 16
        margins[draw(st.integers(0, channels - 1))] = draw(st.sampled_from(sorted({lowest, 12, 16} - set(range(lowest)))))
    second = tuple(_with_shift(draw, exponent + margin) for margin in margins)
    scale = second if channels > 1 else second[0]
    wide_scale = math.ldexp(0.75 if missed == "power of two" else 1.0, exponent)
    out_zp = draw(zero_points(value.dtype))
    return g.add_step(Step("rescale_pair", (k,), (wide_scale, scale, value.zero_point, out_zp)), _like(value, value.shape, out_zp))


NEAR_ONE = 1.0 - 2.0**-20
"""A scale just below 1: it serializes to a multiplier that is not a power of two, so a RESCALE by it is no identity."""


def _step_identity_rescale(draw, g: _Drafting, k: int) -> int:
    """A RESCALE that keeps the dtype and the zero point with a scale of exactly 1, per tensor or on every channel
    (_rescale_form): an identity (rescale-identity, per-channel-rescale-identity); a quarter of the time it misses
    one guard: one channel's scale (or the tensor's) is NEAR_ONE, or (int8 only: an int16 zero point is 0) the
    output zero point is one off."""
    k, channels = _rescale_form(draw, g, k)
    value = g.values[k]
    scale = [1.0] * channels
    out_zp = value.zero_point
    if draw(st.integers(0, 3)) == 0:
        if value.dtype == "int8" and draw(st.booleans()):
            out_zp += 1 if out_zp < 127 else -1
        else:
            scale[draw(st.integers(0, channels - 1))] = NEAR_ONE
    attrs = (tuple(scale) if channels > 1 else scale[0], value.zero_point, out_zp)
    return g.add_step(Step("rescale", (k,), attrs), _like(value, value.shape, out_zp))


def _step_concat_of_rescales(draw, g: _Drafting, k: int) -> int:
    """A concat of values rescaled alike (a quarter of the time one part rescaled otherwise): per channel
    only along another axis than the last."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    operands = _concat_parts(draw, g, k, axis, [k])
    channels = value.shape[-1] if axis != len(value.shape) - 1 else 0
    scale = _scale(draw, channels)
    part_scales = [scale] * len(operands)
    if len(operands) > 1 and draw(st.integers(0, 3)) == 0:
        part_scales[draw(st.integers(0, len(operands) - 1))] = _scale(draw, channels)
    out_zp = value.zero_point if draw(st.booleans()) else draw(zero_points(value.dtype))
    size = sum(g.values[j].shape[axis] for j in operands)
    shape = tuple(size if d == axis else s for d, s in enumerate(value.shape))
    attrs = (axis, tuple(part_scales), value.zero_point, out_zp)
    return g.add_step(Step("concat_of_rescales", tuple(operands), attrs), _like(value, shape, out_zp))


def _step_moved_rescale(draw, g: _Drafting, k: int) -> int:
    """A RESCALE, three times in four per channel (with all scales 1 a quarter of those times), then a
    transpose, slice or reshape of its result."""
    value = g.values[k]
    out_zp = value.zero_point if draw(st.booleans()) else draw(zero_points(value.dtype))
    channels = value.shape[-1]
    if channels > 1 and draw(st.integers(0, 3)) > 0:
        scale = (1.0,) * channels if draw(st.integers(0, 3)) == 0 else tuple(draw(scales) for _ in range(channels))
    else:
        scale = draw(scales)
    rescaled = g.add_step(Step("rescale", (k,), (scale, value.zero_point, out_zp)), _like(value, value.shape, out_zp))
    return draw(st.sampled_from([_step_transpose, _step_slice, _step_reshape]))(draw, g, rescaled)


def _step_moved(draw, g: _Drafting, k: int) -> int:
    """An op the *-through-* laws move data movement across (CLAMP, TABLE, a rescaled ADD or MUL), then a
    transpose, slice or reshape of its result (after a PAD: _step_moved_pad)."""
    producer = draw(st.sampled_from(["clamp", "table", "add", "mul"]))
    produced = STEP_KINDS[producer](draw, g, k)
    return draw(st.sampled_from([_step_transpose, _step_slice, _step_reshape]))(draw, g, produced)


def _step_moved_pad(draw, g: _Drafting, k: int) -> int:
    """A PAD, then a slice of the unpadded part (slice-inside-pad), a transpose (transpose-through-pad) or a random
    slice (which mostly reads some padding: the other side of slice-inside-pad's guard)."""
    value = g.values[k]
    padded = _step_pad(draw, g, k)
    then = draw(st.sampled_from(["slice inside", "transpose", "slice"]))
    if then == "slice inside" and 0 not in value.shape:
        padding = g.steps[-1][0].attrs[0]
        start = tuple(draw(st.integers(padding[2 * i], padding[2 * i] + d - 1)) for i, d in enumerate(value.shape))
        size = tuple(draw(st.integers(1, padding[2 * i] + d - b)) for i, (d, b) in enumerate(zip(value.shape, start)))
        return g.add_step(Step("slice", (padded,), (start, size)), _like(g.values[padded], size))
    return (_step_transpose if then == "transpose" else _step_slice)(draw, g, padded)


def _step_sliced_table(draw, g: _Drafting, k: int) -> int:
    """A slice of a TABLE's result."""
    return _step_slice(draw, g, _step_table(draw, g, k))


def _step_sliced_concat(draw, g: _Drafting, k: int) -> int:
    """A concat, then a slice along its axis that starts in one input and ends in a later one (or, a quarter
    of the time, a random box)."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    operands = _concat_parts(draw, g, k, axis, [k, g.add_input(value.shape, value.zero_point, value.dtype)])
    extents = [g.values[j].shape[axis] for j in operands]
    size = sum(extents)
    shape = tuple(size if d == axis else s for d, s in enumerate(value.shape))
    concat = g.add_step(Step("concat", tuple(operands), (axis,)), _like(value, shape))
    if 0 in shape or 0 in extents or draw(st.integers(0, 3)) == 0:  # an empty input has no element to start in
        return _step_slice(draw, g, concat)
    first = draw(st.integers(0, len(operands) - 2))
    boundary = sum(extents[: first + 1])
    begin = draw(st.integers(boundary - extents[first], boundary - 1))
    end = draw(st.integers(boundary + 1, size))
    start = tuple(begin if d == axis else 0 for d in range(len(shape)))
    box = tuple(end - begin if d == axis else s for d, s in enumerate(shape))
    return g.add_step(Step("slice", (concat,), (start, box)), _like(value, box))


def _step_split_concat(draw, g: _Drafting, k: int) -> int:
    """Slices of k that tile an axis, concatenated back along it: in order (adjacent slices), or, a quarter
    of the time, with two pieces swapped; sometimes with another part after them."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    extent = value.shape[axis]
    if 0 in value.shape or extent < 2:
        return _step_concat(draw, g, k)
    cuts = sorted(draw(st.sets(st.integers(1, extent - 1), min_size=1, max_size=min(3, extent - 1))))
    bounds = list(zip([0, *cuts], [*cuts, extent]))
    if draw(st.integers(0, 3)) == 0:
        bounds[0], bounds[1] = bounds[1], bounds[0]
    pieces = []
    for begin, end in bounds:
        start = tuple(begin if d == axis else 0 for d in range(len(value.shape)))
        size = tuple(end - begin if d == axis else s for d, s in enumerate(value.shape))
        pieces.append(g.add_step(Step("slice", (k,), (start, size)), _like(value, size)))
    if draw(st.booleans()):
        pieces = _concat_parts(draw, g, k, axis, pieces)
    size = sum(g.values[j].shape[axis] for j in pieces)
    return g.add_step(Step("concat", tuple(pieces), (axis,)), _like(value, tuple(size if d == axis else s for d, s in enumerate(value.shape))))


def _step_growing_concat(draw, g: _Drafting, k: int) -> int:
    """DenseNet's pattern: concat([k, y1]) and then concat([k, y1, y2]) along the same axis."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    parts = [k, g.add_input(value.shape, value.zero_point, value.dtype)]
    for _ in range(2):
        size = sum(g.values[j].shape[axis] for j in parts)
        shape = tuple(size if d == axis else s for d, s in enumerate(value.shape))
        grown = g.add_step(Step("concat", tuple(parts), (axis,)), _like(value, shape))
        parts.append(g.add_input(value.shape, value.zero_point, value.dtype))
    return grown


def _step_transposed_binary(draw, g: _Drafting, k: int) -> int:
    """A rescaled ADD, SUB or MUL (often with a broadcast scalar), then a transpose of its result."""
    op = draw(st.sampled_from(["add", "sub", "mul"]))
    return _step_transpose(draw, g, STEP_KINDS[op](draw, g, k))


def _step_sliced_binary(draw, g: _Drafting, k: int) -> int:
    """A rescaled ADD, SUB or MUL (a third of the time of two values of one shape: slice-through-binary), then a
    slice of its result."""
    op = draw(st.sampled_from(["add", "sub", "mul"]))
    return _step_slice(draw, g, STEP_KINDS[op](draw, g, k))


STEP_KINDS: dict[str, Callable[..., int]] = {
    "transpose": _step_transpose,
    "concat": _step_concat,
    "slice": _step_slice,
    "reshape": _step_reshape,
    "pad": _step_pad,
    "rescale": _step_rescale,
    "clamp": _step_clamp,
    "reverse": _step_reverse,
    "table": _step_table,
    **{name: _step_binary(name) for name in BINARY_OPS},
    "shared-binary": _step_shared_binary,
    "reduce_sum": _step_reduce_sum,
    "reduce_max": _step_reduce_extreme("reduce_max"),
    "reduce_min": _step_reduce_extreme("reduce_min"),
    "relu-concat": _step_relu_concat,
    "rescale_pair": _step_rescale_pair,
    "per-channel-rescale_pair": _step_per_channel_rescale_pair,
    "concat_of_rescales": _step_concat_of_rescales,
    "moved": _step_moved,
    "moved-rescale": _step_moved_rescale,
    "moved-pad": _step_moved_pad,
    "identity-rescale": _step_identity_rescale,
    "sliced-table": _step_sliced_table,
    "sliced-concat": _step_sliced_concat,
    "split-concat": _step_split_concat,
    "growing-concat": _step_growing_concat,
    "transposed-binary": _step_transposed_binary,
    "sliced-binary": _step_sliced_binary,
}

ZERO_SIZE_SHARE = 10
"""With zero-size specs allowed, one spec in this many has an input with a zero-size dimension."""


@st.composite
def graph_specs(
    draw, max_steps: int = MAX_STEPS, zero_size: bool = False, kinds: tuple[str, ...] | None = None, dtypes: tuple[str, ...] = tuple(DTYPES)
) -> GraphSpec:
    """Random int8 or int16 TOSA programs mixing every step kind, over inputs of rank 1..6.

    zero_size: sometimes (1 in ZERO_SIZE_SHARE) give the first input a zero-size dimension.
    kinds, dtypes: the step kinds (of STEP_KINDS; None: every one) and the dtypes drawn from.
    """
    g = _Drafting()
    dtype = draw(st.sampled_from(sorted(dtypes)))
    shape = draw(shapes())
    if zero_size and draw(st.integers(0, ZERO_SIZE_SHARE - 1)) == 0:
        empty = draw(st.integers(0, len(shape) - 1))
        shape = tuple(0 if d == empty else s for d, s in enumerate(shape))
    g.add_input(shape, draw(zero_points(dtype)), dtype)
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(sorted(STEP_KINDS if kinds is None else kinds)))
        operand = len(g.values) - 1 if draw(st.booleans()) else draw(st.integers(0, len(g.values) - 1))  # chains half the time
        STEP_KINDS[kind](draw, g, operand)
    if not g.steps:  # every step drawn was a slice of a zero-size value, which adds none
        _step_transpose(draw, g, 0)
    results = [value_id for _, value_id in g.steps]
    extra = draw(st.lists(st.sampled_from(results), max_size=2, unique=True))
    return g.spec([results[-1], *extra])


# ---------------------------------------------------------------- inputs


def random_full_range_inputs(graph_module: fx.GraphModule, seed: int) -> list[torch.Tensor]:
    """Tensors over the full range of each placeholder's dtype (int8 or int16 in fuzzed graphs), half their
    elements aimed at the range's ends and the graph's zero points with their neighbours (soundness.random_inputs)."""
    return soundness.random_inputs(graph_module, seed)


# ---------------------------------------------------------------- checking


@dataclass
class EnodeCheck:
    """What check_every_enode saw of one spec: the pass's rules' matches when saturating its graph, and
    how many e-nodes it evaluated per input draw (0 when the e-graph was too large: soundness.TooLarge)."""

    rules_fired: dict[str, int]
    enodes: int


def check_every_enode(spec: GraphSpec, trials: int = 2) -> EnodeCheck:
    """Saturate the spec's graph with the pass's rules and budget (duplicates merged, as the pass does) and
    check every e-node against its e-class on `trials` input draws (soundness.check_every_enode); raises
    soundness.Unsound on a disagreement."""
    graph_module = spec.build()
    with TosaLoweringContext(TOSA_SPEC), rules.scratch_egraph() as scratch:
        saturated = soundness.Saturated(graph_module, *rules.REWRITES, merge_duplicates=True, budget=rules.Budget(), into=scratch)
        try:
            enodes = saturated.assert_every_extraction_agrees(trials)
        except soundness.TooLarge:
            enodes = 0
        return EnodeCheck(dict(saturated.result.rule_matches), enodes)


def check(spec: GraphSpec, target: Target = "ethos-u55-128", trials: int = 2, every_enode: bool = True) -> str | None:
    """Optimize the spec's graph and compare it with the original; None if bit-exact, else what went wrong.
    every_enode: also check every e-node of its saturated e-graph (check_every_enode) first.

    The optimizer writes back its extraction whenever it is not more
    expensive (accept="always"), so the rewrite path runs on every graph.
    A fallback counts as a failure (a BudgetExceeded one is marked GAVE_UP:
    see assert_optimizes_exactly): every generated graph is valid input,
    except one with a zero-size tensor, which TOSA cannot represent: that one
    must come back untouched, refused with `bridge_fx.ZERO_SIZE_REFUSAL`. An
    optimized graph that does not run is a failure; an original that does not
    run is a bug of the fuzzer and raises.
    """
    if every_enode and not spec.has_zero_size():
        try:
            check_every_enode(spec, trials)
        except soundness.Unsound as error:
            return f"every-e-node check {error}"
    original = spec.build()
    with TosaLoweringContext(TOSA_SPEC), _quiet(spec.has_zero_size()):
        configuration = Configuration.resolve(target)
        optimized, report = pipeline.optimize(
            original,
            target=configuration.target,
            accept="always",
            system_config=configuration.system_config,
            memory_mode=configuration.memory_mode,
            config_ini=configuration.config_ini,
        )
    if spec.has_zero_size():
        refused = report.fallback is not None and ZERO_SIZE_REFUSAL in report.fallback and optimized is original
        return None if refused else f"a graph with a zero-size tensor was not refused: fallback {report.fallback!r}"
    if report.fallback is not None:
        return f"{GAVE_UP if report.fallback.startswith(pipeline.BudgetExceeded.__name__) else 'fallback'}: {report.fallback}"
    for trial in range(trials):
        inputs = random_full_range_inputs(original, trial)
        expected = evaluate(original, inputs)
        try:
            actual = evaluate(optimized, inputs)
        except Exception as error:  # noqa: BLE001 - an optimized graph that does not run is a finding
            return f"the optimized graph does not run: {type(error).__name__}: {error}\noptimized graph:\n{optimized.code}"
        if len(expected) != len(actual):
            return f"the optimized graph has {len(actual)} outputs, the original {len(expected)}"
        for slot, (want, got) in enumerate(zip(expected, actual)):
            if want.dtype != got.dtype or want.shape != got.shape or not torch.equal(want, got):
                return (
                    f"output {slot} differs on random_full_range_inputs(seed={trial}); "
                    f"rules fired: {report.rules_fired}\noptimized graph:\n{optimized.code}"
                )
    return None


@contextlib.contextmanager
def _quiet(expected_refusal: bool) -> Iterator[None]:
    """Silence the optimizer's fallback warning when the fallback is what check() expects."""
    if not expected_refusal:
        yield
        return
    eqsat_logger = logging.getLogger("eqsat")
    level = eqsat_logger.level
    eqsat_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            yield
    finally:
        eqsat_logger.setLevel(level)


GAVE_UP = "gave up at its budget"
"""How check() marks the pass's BudgetExceeded fallback: within its bounds by design (eqsat.rules.Budget:
one egglog iteration cannot be interrupted, and the pass's worker is stopped at its deadline), so the fuzzer
records such a graph instead of failing on it; how often the pass gives up is a finding of the run, not of
soundness."""


class FuzzFailure(EqsatError):
    """A generated graph that the optimizer got wrong (message: what, and a reproducer)."""


def assert_optimizes_exactly(
    specs: list[GraphSpec], target: Target = "ethos-u55-128", seen: FuzzRun | None = None, every_enode: bool = True
) -> list[str]:
    """Check every e-node of each spec's saturated e-graph (check_every_enode, unless every_enode is False),
    then optimize the batch in one optimizer run (the run's fixed cost dominates small graphs) and compare
    it bit for bit. seen: a run that counts the graphs, e-nodes and the laws fired in each graph.

    On a failure, each spec is checked alone, so the reproducer is the one
    failing graph (or the whole batch if only the batch fails), without the
    steps its outputs do not need if it still fails without them. Raises
    FuzzFailure with a reproducer. Specs with a zero-size tensor are checked
    one by one (the optimizer refuses the whole graph they are in).

    Returns what the pass gave up on at its budget (GAVE_UP), each with its
    reproducer: a spec that does so alone; the batch is then checked again
    without it. Whether the pass gives up depends on the machine's speed,
    so these are recorded, not failed.
    """
    for spec in specs:
        if spec.has_zero_size():
            if (problem := check(spec, target)) is not None:
                _fail(problem, spec, target)
            continue
        if not every_enode:
            continue
        try:
            checked = check_every_enode(spec)
        except soundness.Unsound as error:
            _fail(f"every-e-node check {error}", spec, target)
        if seen is not None:
            seen.count(spec, checked)
    specs = [spec for spec in specs if not spec.has_zero_size()]
    gave_up: list[str] = []
    while specs and (problem := check(merge(specs), target, every_enode=False)) is not None:
        culprit = merge(specs)
        for spec in specs:
            alone = check(spec, target)
            if alone is not None:
                problem, culprit = alone, spec
                break
        if not problem.startswith(GAVE_UP):
            _fail(problem, culprit, target)
        if culprit not in specs:  # only the batch is too large: its graphs pass alone
            break
        gave_up.append(f"{problem}\nreproducer:\n{culprit.to_python()}")
        specs = [spec for spec in specs if spec is not culprit]
    return gave_up


def _fail(problem: str, culprit: GraphSpec, target: Target) -> None:
    """Raise FuzzFailure for culprit, pruned to the steps its outputs need if it still fails without the others."""
    pruned = culprit.pruned()
    if pruned != culprit and (still := check(pruned, target)) is not None:
        problem, culprit = still, pruned
    raise FuzzFailure(f"{problem}\nreproducer:\n{culprit.to_python()}\noriginal graph:\n{culprit.build().code}")


BATCH = 10
"""Graphs per optimizer run."""

LAW_SHARE = 0.01
"""The share of the graphs of each dtype that every law must fire in (a law of one dtype: of that dtype's)."""


def batches(size: int = BATCH, zero_size: bool = False) -> st.SearchStrategy[list[GraphSpec]]:
    """Lists of `size` graph specs, checked together by `assert_optimizes_exactly` (zero_size: see graph_specs)."""
    return st.lists(graph_specs(zero_size=zero_size), min_size=size, max_size=size)


def law_names() -> list[str]:
    """Every law of the pass's rewrite rulesets (eqsat.rules.REWRITES), by the name its matches are counted under."""
    program = _program.compiled(rules.program_rulesets())
    if program is None:
        raise RuntimeError("egglog cannot compile the rules' program")
    rewrites = {program.rulesets[_program.ruleset_key(r)] for r in rules.REWRITES}
    named = re.findall(r':ruleset (\S+) :name "([^"]+)"', "\n".join(program.commands))
    return sorted({name for ruleset_name, name in named if ruleset_name in rewrites})


def law_family(name: str) -> str:
    """A law generated once per rank ("slice-slice-rank3", "slice-inside-pad-2") as one family ("slice-slice-rank*")."""
    return re.sub(r"-(rank)?\d+$", r"-\1*", name)


def dtype_of_law(name: str) -> str | None:
    """The dtype a law is stated for ("rescale-rescale-exact-int16": int16), None for a law of both."""
    return next((dtype for dtype in DTYPES if name.endswith(f"-{dtype}")), None)


@dataclass
class FuzzRun:
    """What `run` did: graphs checked (shrinking included), batches that failed (before and while
    shrinking), the minimized failures (known once the run ends), and the graphs the pass gave up on at its
    budget (GAVE_UP; "target: reason, reproducer").

    Of the graphs without a zero-size tensor: how many of each dtype (`graphs_by_dtype`), in how many of
    each dtype each law family fired (`fired[family][dtype]`), the e-nodes evaluated (per input draw) and
    the graphs whose e-graph was too large to check every e-node (`too_large`)."""

    graphs: int = 0
    failing_batches: int = 0
    failures: list[str] = field(default_factory=list)
    gave_up: list[str] = field(default_factory=list)
    graphs_by_dtype: Counter = field(default_factory=Counter)
    fired: dict[str, Counter] = field(default_factory=dict)
    enodes: int = 0
    too_large: int = 0

    def count(self, spec: GraphSpec, checked: EnodeCheck) -> None:
        dtype = spec.dtype_of(0)
        self.graphs_by_dtype[dtype] += 1
        for family in {law_family(name) for name, matches in checked.rules_fired.items() if matches}:
            self.fired.setdefault(family, Counter())[dtype] += 1
        self.enodes += checked.enodes
        self.too_large += checked.enodes == 0

    def add(self, other: FuzzRun) -> None:
        """Count other's graphs, failures and laws into this run (runs of several processes)."""
        self.graphs += other.graphs
        self.failing_batches += other.failing_batches
        self.failures.extend(other.failures)
        self.gave_up.extend(other.gave_up)
        self.graphs_by_dtype.update(other.graphs_by_dtype)
        for family, counts in other.fired.items():
            self.fired.setdefault(family, Counter()).update(counts)
        self.enodes += other.enodes
        self.too_large += other.too_large

    def law_table(self) -> list[tuple[str, dict[str, float | None]]]:
        """Each law family with the share of graphs of each dtype it fired in (None: not a law of that dtype)."""
        families = sorted({law_family(name) for name in law_names()})
        return [
            (family, {
                dtype: None if dtype_of_law(family) not in (None, dtype) else self.fired.get(family, Counter())[dtype] / max(1, self.graphs_by_dtype[dtype])
                for dtype in DTYPES
            })
            for family in families
        ]

    def unreached(self, share: float) -> list[str]:
        """The law families that fired in less than share of the graphs of a dtype they are a law of."""
        return [family for family, shares in self.law_table() if any(v is not None and v < share for v in shares.values())]

    def markdown(self) -> str:
        """The per-law table as Markdown."""
        counts = ", ".join(f"{self.graphs_by_dtype[d]} {d}" for d in DTYPES)
        lines = [f"Graphs without a zero-size tensor: {counts}; e-nodes checked per input draw: {self.enodes}; "
                 f"graphs too large to check every e-node: {self.too_large}.", "",
                 "| law | " + " | ".join(f"{d} graphs" for d in DTYPES) + " |", "|---|" + "---:|" * len(DTYPES)]
        for family, shares in self.law_table():
            cells = ["—" if v is None else f"{v:.1%}" for v in shares.values()]
            lines.append(f"| `{family}` | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def run(
    n: int,
    seed_value: int = 0,
    targets: tuple[Target, ...] = TARGETS,
    batch: int = BATCH,
    progress: Callable[[FuzzRun], None] | None = None,
    stop_at: float | None = None,
) -> FuzzRun:
    """Check about n random graphs (zero-size ones included), `batch` per optimizer run, each batch optimized
    for every one of targets (every e-node is checked once per graph: saturation does not depend on the
    target); each distinct failure comes back shrunk to a minimal reproducer. progress is called with the
    run so far after every batch, passing or failing. stop_at: a time.time() after which batches drawn are
    no longer checked (nor counted)."""
    result = FuzzRun()

    @settings(
        max_examples=max(1, math.ceil(n / batch)),
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
    )
    @seed(seed_value)
    @given(batches(batch, zero_size=True))
    def check_batch(specs: list[GraphSpec]) -> None:
        if stop_at is not None and time.time() > stop_at and not result.failing_batches:
            return
        result.graphs += len(specs)
        try:
            for position, target in enumerate(targets):
                gave_up = assert_optimizes_exactly(specs, target, seen=result if position == 0 else None, every_enode=position == 0)
                result.gave_up.extend(f"{Configuration.resolve(target).name}: {reproducer}" for reproducer in gave_up)
        except FuzzFailure:
            result.failing_batches += 1
            raise
        finally:
            if progress is not None:
                progress(result)

    try:
        check_batch()
    except FuzzFailure as failure:
        result.failures.append(str(failure))
    except BaseExceptionGroup as group:
        result.failures.extend(str(failure) for failure in group.exceptions)
    return result


def run_parallel(n: int, seed_value: int, targets: tuple[Target, ...], jobs: int, stop_at: float | None = None, quiet: bool = False) -> FuzzRun:
    """run() in `jobs` processes (spawned: a forked egglog or torch can hang), n / jobs graphs each under
    seeds seed_value, seed_value + 1, ...; their counts added up. Each job prints its progress every
    PROGRESS_EVERY graphs unless quiet."""
    started = time.time()
    arguments = [(math.ceil(n / jobs), seed_value + job, targets, stop_at, None if quiet else (job, jobs, started)) for job in range(jobs)]
    if jobs == 1:
        return _run_job(*arguments[0])
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        parts = pool.starmap(_run_job, arguments)
    total = FuzzRun()
    for part in parts:
        total.add(part)
    return total


PROGRESS_EVERY = 500
"""Graphs between two progress lines of a job."""


def _run_job(n: int, seed_value: int, targets: tuple[Target, ...], stop_at: float | None, announce: tuple[int, int, float] | None) -> FuzzRun:
    """One job of run_parallel; announce: (job number, jobs, start time) to print progress, or None."""
    reported = 0

    def progress(done: FuzzRun) -> None:
        nonlocal reported
        if announce is not None and (done.graphs % PROGRESS_EVERY < BATCH or (reported == 0 and done.failing_batches > 0)):
            job, jobs, started = announce
            failing = f", {done.failing_batches} failing batch(es): shrinking" if done.failing_batches else ""
            where = f" (job {job} of {jobs})" if jobs > 1 else ""
            print(f"eqsat fuzz{where}: {done.graphs} graphs checked{failing}, {time.time() - started:.0f} s", flush=True)
            reported = done.failing_batches

    return run(n, seed_value, targets, progress=progress, stop_at=stop_at)
