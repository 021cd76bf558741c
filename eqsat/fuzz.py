"""Fuzzing the optimizer: random TOSA-dialect graphs, checked bit-exact.

Motivation: rule tests check one law at a time; the fuzzer checks what the
laws do together, on graphs shaped like the ones the pass sees in the Arm
pipeline (pure TOSA dialect, rescales inserted, int8 or int16 with zero points).

Overview:
- `graph_specs()` is a hypothesis strategy for `GraphSpec`: a straight-line
  int8 or int16 program of TRANSPOSE, CONCAT, SLICE, RESHAPE, PAD, RESCALE
  (per tensor or per channel), CLAMP, REVERSE (an op the bridge does not
  model), TABLE (int8, or int16 interpolated into int32 and rescaled back),
  rescaled ADD and SUB (to int32, the op, back; with broadcasting) and
  REDUCE_SUM (the same way), REDUCE_MAX and REDUCE_MIN, over inputs of rank
  1 to 6 with dims of 1 to MAX_DIM (and, when asked, a zero-size dim, which
  the optimizer must refuse). Every value carries its zero point, and the
  "ReLU'd tensor concatenated with a signed tensor under a shared zero point"
  shape (CLAMP(x, zp, max) ++ y) is one of the steps.
- `GraphSpec.build()` writes a spec as an FX graph in TOSA dialect, with
  FakeTensor `val` meta like the Arm pipeline's.
- `evaluate()` (`eqsat.ops.reference`) runs such a graph exactly, each op
  as its registry file specifies it: RESCALE as the TOSA specification
  defines it (the multiplier and shift that the Arm backend serializes, an
  int64 multiply, one rounding shift, zero points, saturation, REQUIREs
  and ERROR_IFs checked), data movement, TABLE, ADD, SUB, CLAMP and the reductions on
  integers.
- `check()` optimizes a spec's graph for a target and compares both graphs'
  outputs bit for bit; `run()` checks many specs under hypothesis, each batch
  for one of the targets, which shrinks every failure to a minimal
  reproducer, printed as Python by `GraphSpec.to_python()`.

Future work: MUL steps.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from torch import fx

from eqsat import pipeline
from eqsat.bridge_fx import ZERO_SIZE_REFUSAL
from eqsat.graph_builder import GraphBuilder
from eqsat.ir import MAX_RANK
from eqsat.ops.nodes import TOSA
from eqsat.ops.reference import evaluate

TOSA_SPEC = TosaSpecification.create_from_string("TOSA-1.0+INT+int16")
"""The TOSA profile fuzzed graphs are built in: integer, with the int16 extension that both Ethos-U targets have."""
MAX_DIM = 4
MAX_STEPS = 8


# ---------------------------------------------------------------- specs

DTYPES = {"int8": torch.int8, "int16": torch.int16}
"""The activation dtypes of fuzzed graphs: a8w8 lowerings carry int8 tensors, a16w8 lowerings int16."""

TARGETS = ("ethos-u55-128", "ethos-u85-256")
"""The targets the fuzzer optimizes for: each has its own cost model, so its own extractions."""


@dataclass(frozen=True)
class Step:
    """One op of a spec: `op` applied to earlier values `operands`, with attributes.

    ops and attributes:
    transpose (perm,), concat (axis,), slice (start, size), reshape (shape,),
    pad (padding, value), clamp (low, high), reverse (axis,), table (seed,),
    rescale (scale, in_zp, out_zp), add and sub (scale_a, scale_b, scale_out, zp_a, zp_b, zp_out),
    reduce_sum (axis, scale_in, scale_out, zp_in, zp_out), reduce_max (axis,), reduce_min (axis,).

    A scale is a float (per tensor) or a tuple of floats (per channel: one per
    index of the last axis). Every step's result has its first operand's dtype
    (int8 or int16). add, sub and reduce_sum compute on int32 between RESCALEs,
    as the Arm backend lowers them; an int16 table looks up a 513-entry int16
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
    "add": _build_binary(TOSA.ADD.default),
    "sub": _build_binary(TOSA.SUB.default),
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
    """A per-tensor scale, or (half the time, with at least one channel) one scale per channel."""
    if channels >= 1 and draw(st.booleans()):
        return tuple(draw(scales) for _ in range(channels))
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
    shape = g.values[k].shape
    perm = tuple(draw(st.permutations(range(len(shape)))))
    return g.add_step(Step("transpose", (k,), (perm,)), _like(g.values[k], tuple(shape[p] for p in perm)))


def _step_concat(draw, g: _Drafting, k: int, part: int | None = None) -> int:
    """k ++ (parts that fit: k itself, other values, or new inputs) along a random axis, all under k's zero point."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    operands = [k] if part is None else [k, part]
    for _ in range(draw(st.integers(0 if part is not None else 1, 2))):
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
    size = sum(g.values[j].shape[axis] for j in operands)
    return g.add_step(Step("concat", tuple(operands), (axis,)), _like(value, tuple(size if d == axis else s for d, s in enumerate(value.shape))))


def _step_slice(draw, g: _Drafting, k: int) -> int:
    """A random box (none of a zero-size value: TOSA SLICE REQUIREs start < dim)."""
    shape = g.values[k].shape
    if 0 in shape:
        return k
    start = tuple(draw(st.integers(0, d - 1)) for d in shape)
    size = tuple(draw(st.integers(1, d - s)) for d, s in zip(shape, start))
    return g.add_step(Step("slice", (k,), (start, size)), _like(g.values[k], size))


def _step_reshape(draw, g: _Drafting, k: int) -> int:
    shape = draw(_factorization(math.prod(g.values[k].shape)))
    return g.add_step(Step("reshape", (k,), (shape,)), _like(g.values[k], shape))


def _step_pad(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    padding = tuple(draw(st.integers(0, 1)) for _ in range(2 * len(value.shape)))
    out = tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(value.shape))
    return g.add_step(Step("pad", (k,), (padding, value.zero_point)), _like(value, out))


def _step_rescale(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    out_zp = draw(zero_points(value.dtype))
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


def _step_binary(op: str) -> Callable[..., int]:
    def step(draw, g: _Drafting, k: int) -> int:
        """k op other, where other is a value of k's shape and dtype or a new input broadcast along some dims."""
        value = g.values[k]
        same = [j for j, v in enumerate(g.values) if v.shape == value.shape and v.dtype == value.dtype]
        if draw(st.booleans()):
            other = draw(st.sampled_from(same))
        else:
            shape = tuple(1 if draw(st.booleans()) else d for d in value.shape)
            other = g.add_input(shape, draw(zero_points(value.dtype)), value.dtype)
        if draw(st.booleans()):
            k, other = other, k
        a, b = g.values[k], g.values[other]
        out = _broadcast(a.shape, b.shape)
        zp_out = draw(zero_points(value.dtype))
        attrs = (draw(scales), draw(scales), _scale(draw, out[-1]), a.zero_point, b.zero_point, zp_out)
        return g.add_step(Step(op, (k, other), attrs), _like(value, out, zp_out))

    return step


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
        value = g.values[k]
        axis = draw(st.integers(0, len(value.shape) - 1))
        return g.add_step(Step(op, (k,), (axis,)), _like(value, _reduced(value.shape, axis)))

    return step


def _step_relu_concat(draw, g: _Drafting, k: int) -> int:
    """CLAMP(k, zp, max) ++ y with y signed under the same zero point: the shape that trips the stock pipeline."""
    value = g.values[k]
    relu = g.add_step(Step("clamp", (k,), (value.zero_point, _value_range(value.dtype)[1])), _like(value, value.shape))
    signed = g.add_input(value.shape, value.zero_point, value.dtype)
    return _step_concat(draw, g, relu, part=signed)


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
    "add": _step_binary("add"),
    "sub": _step_binary("sub"),
    "reduce_sum": _step_reduce_sum,
    "reduce_max": _step_reduce_extreme("reduce_max"),
    "reduce_min": _step_reduce_extreme("reduce_min"),
    "relu-concat": _step_relu_concat,
}

ZERO_SIZE_SHARE = 10
"""With zero-size specs allowed, one spec in this many has an input with a zero-size dimension."""


@st.composite
def graph_specs(draw, max_steps: int = MAX_STEPS, zero_size: bool = False) -> GraphSpec:
    """Random int8 or int16 TOSA programs mixing every step kind, over inputs of rank 1..6.

    zero_size: sometimes (1 in ZERO_SIZE_SHARE) give the first input a zero-size dimension.
    """
    g = _Drafting()
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    shape = draw(shapes())
    if zero_size and draw(st.integers(0, ZERO_SIZE_SHARE - 1)) == 0:
        empty = draw(st.integers(0, len(shape) - 1))
        shape = tuple(0 if d == empty else s for d, s in enumerate(shape))
    g.add_input(shape, draw(zero_points(dtype)), dtype)
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(sorted(STEP_KINDS)))
        operand = draw(st.integers(0, len(g.values) - 1))
        STEP_KINDS[kind](draw, g, operand)
    if not g.steps:  # every step drawn was a slice of a zero-size value, which adds none
        _step_transpose(draw, g, 0)
    results = [value_id for _, value_id in g.steps]
    extra = draw(st.lists(st.sampled_from(results), max_size=2, unique=True))
    return g.spec([results[-1], *extra])


# ---------------------------------------------------------------- inputs


def random_full_range_inputs(graph_module: fx.GraphModule, seed: int) -> list[torch.Tensor]:
    """Uniform tensors over the full range of each placeholder's integer dtype (int8 or int16 in fuzzed graphs)."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for node in graph_module.graph.nodes:
        if node.op == "placeholder":
            val = node.meta["val"]
            info = torch.iinfo(val.dtype)
            tensors.append(torch.randint(info.min, info.max + 1, tuple(val.shape), generator=generator, dtype=val.dtype))
    return tensors


# ---------------------------------------------------------------- checking


def check(spec: GraphSpec, target: str = "ethos-u55-128", trials: int = 2) -> str | None:
    """Optimize the spec's graph and compare it with the original; None if bit-exact, else what went wrong.

    The optimizer writes back its extraction whenever it is not more
    expensive (accept="always"), so the rewrite path runs on every graph.
    A fallback counts as a failure: every generated graph is valid input,
    except one with a zero-size tensor, which TOSA cannot represent: that one
    must come back untouched, refused with `bridge_fx.ZERO_SIZE_REFUSAL`. An
    optimized graph that does not run is a failure; an original that does not
    run is a bug of the fuzzer and raises.
    """
    original = spec.build()
    with TosaLoweringContext(TOSA_SPEC), _quiet(spec.has_zero_size()):
        optimized, report = pipeline.optimize(original, target=target, accept="always")
    if spec.has_zero_size():
        refused = report.fallback is not None and ZERO_SIZE_REFUSAL in report.fallback and optimized is original
        return None if refused else f"a graph with a zero-size tensor was not refused: fallback {report.fallback!r}"
    if report.fallback is not None:
        return f"fallback: {report.fallback}"
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


class FuzzFailure(pipeline.EqsatError):
    """A generated graph that the optimizer got wrong (message: what, and a reproducer)."""


def assert_optimizes_exactly(specs: list[GraphSpec], target: str = "ethos-u55-128") -> None:
    """Check a batch of specs in one optimizer run (the run's fixed cost dominates small graphs).

    On a failure, each spec is checked alone, so the reproducer is the one
    failing graph (or the whole batch if only the batch fails), without the
    steps its outputs do not need if it still fails without them. Raises
    FuzzFailure with a reproducer. Specs with a zero-size tensor are checked
    one by one (the optimizer refuses the whole graph they are in).
    """
    for spec in specs:
        if spec.has_zero_size() and (problem := check(spec, target)) is not None:
            raise FuzzFailure(f"{problem}\nreproducer:\n{spec.to_python()}\noriginal graph:\n{spec.build().code}")
    specs = [spec for spec in specs if not spec.has_zero_size()]
    if not specs or (problem := check(merge(specs), target)) is None:
        return
    culprit = merge(specs)
    for spec in specs:
        alone = check(spec, target)
        if alone is not None:
            problem, culprit = alone, spec
            break
    pruned = culprit.pruned()
    if pruned != culprit and (still := check(pruned, target)) is not None:
        problem, culprit = still, pruned
    raise FuzzFailure(f"{problem}\nreproducer:\n{culprit.to_python()}\noriginal graph:\n{culprit.build().code}")


BATCH = 10
"""Graphs per optimizer run."""


def batches(size: int = BATCH, zero_size: bool = False) -> st.SearchStrategy[list[GraphSpec]]:
    """Lists of `size` graph specs, checked together by `assert_optimizes_exactly` (zero_size: see graph_specs)."""
    return st.lists(graph_specs(zero_size=zero_size), min_size=size, max_size=size)


@dataclass
class FuzzRun:
    """What `run` did: graphs checked (shrinking included), batches that failed (before and while
    shrinking), and the minimized failures (known once the run ends)."""

    graphs: int = 0
    failing_batches: int = 0
    failures: list[str] = field(default_factory=list)


def run(
    n: int,
    seed_value: int = 0,
    targets: tuple[str, ...] = TARGETS,
    batch: int = BATCH,
    progress: Callable[[FuzzRun], None] | None = None,
) -> FuzzRun:
    """Check about n random graphs (zero-size ones included), `batch` per optimizer run, each batch for one of
    targets; each distinct failure comes back shrunk to a minimal reproducer. progress is called with the
    run so far after every batch, passing or failing."""
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
    @given(st.sampled_from(targets), batches(batch, zero_size=True))
    def check_batch(target: str, specs: list[GraphSpec]) -> None:
        result.graphs += len(specs)
        try:
            assert_optimizes_exactly(specs, target)
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
