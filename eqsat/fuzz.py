"""Fuzzing the optimizer: random TOSA-dialect graphs, checked bit-exact.

Motivation: rule tests check one law at a time; the fuzzer checks what the
laws do together, on graphs shaped like the ones the pass sees in the Arm
pipeline (pure TOSA dialect, rescales inserted, int8 with zero points).

Overview:
- `graph_specs()` is a hypothesis strategy for `GraphSpec`: a straight-line
  program of TRANSPOSE, CONCAT, SLICE, RESHAPE, PAD, RESCALE, CLAMP, TABLE
  (int8, a random permutation as its lookup table) and rescaled ADD (int8 -> int32 -> ADD -> int8, with broadcasting) over random
  int8 inputs of rank 1 to 6. Every value carries its zero point, and the
  "ReLU'd tensor concatenated with a signed tensor under a shared zero point"
  shape (CLAMP(x, zp, 127) ++ y) is one of the steps.
- `GraphSpec.build()` writes a spec as an FX graph in TOSA dialect, with
  FakeTensor `val` meta like the Arm pipeline's.
- `evaluate()` (`eqsat.ops.reference`) runs such a graph exactly, each op
  as its registry file specifies it: RESCALE as the TOSA specification
  defines it (the multiplier and shift that the Arm backend serializes, an
  int64 multiply, one rounding shift, zero points, saturation, REQUIREs
  and ERROR_IFs checked), data movement, TABLE, ADD and CLAMP on integers.
- `check()` optimizes a spec's graph and compares both graphs' outputs bit
  for bit; `run()` checks many specs under hypothesis, which shrinks every
  failure to a minimal reproducer, printed as Python by `GraphSpec.to_python()`.

Future work: per-channel rescales, MUL steps and int16 TABLE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from torch import fx

from eqsat import pipeline
from eqsat.graph_builder import GraphBuilder
from eqsat.ir import MAX_RANK
from eqsat.ops.nodes import TOSA
from eqsat.ops.reference import evaluate

TOSA_SPEC = TosaSpecification.create_from_string("TOSA-1.0+INT")
MAX_DIM = 4
MAX_STEPS = 8


# ---------------------------------------------------------------- specs


@dataclass(frozen=True)
class Step:
    """One op of a spec: `op` applied to earlier values `operands`, with attributes.

    ops and attributes:
    transpose (perm,), concat (axis,), slice (start, size), reshape (shape,),
    pad (padding, value), rescale (scale, in_zp, out_zp), clamp (low, high), table (seed,),
    add (scale_a, scale_b, scale_out, zp_a, zp_b, zp_out).
    """

    op: str
    operands: tuple[int, ...]
    attrs: tuple


@dataclass(frozen=True)
class GraphSpec:
    """A straight-line int8 program: inputs (shapes), steps, and output value indices.

    Value k is input k for k < len(inputs), else the result of step k - len(inputs).
    """

    inputs: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    def build(self) -> fx.GraphModule:
        """The spec as a TOSA-dialect FX graph with FakeTensor `val` meta."""
        builder = GraphBuilder()
        values: list[fx.Node] = [builder.input(f"x{k}", shape) for k, shape in enumerate(self.inputs)]
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
        return GraphSpec(
            tuple(shape for k, shape in enumerate(self.inputs) if k in live),
            tuple(Step(s.op, tuple(position[j] for j in s.operands), s.attrs) for k, s in enumerate(self.steps) if n + k in live),
            tuple(position[k] for k in self.outputs),
        )

    def to_python(self) -> str:
        """A standalone reproducer: Python that rebuilds this spec and checks it."""
        steps = ",\n".join(f"        Step({s.op!r}, {s.operands!r}, {s.attrs!r})" for s in self.steps)
        return (
            "from eqsat.fuzz import GraphSpec, Step, check\n"
            "spec = GraphSpec(\n"
            f"    inputs={self.inputs!r},\n"
            f"    steps=(\n{steps},\n    ),\n"
            f"    outputs={self.outputs!r},\n"
            ")\n"
            "print(check(spec))\n"
        )


def merge(specs: list[GraphSpec]) -> GraphSpec:
    """Several specs side by side as one spec (one optimizer run checks them all)."""
    inputs = tuple(shape for spec in specs for shape in spec.inputs)
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
    return GraphSpec(inputs, tuple(steps), tuple(outputs))


def _rescale(b: GraphBuilder, x: fx.Node, dtype: torch.dtype, scale: float, in_zp: int, out_zp: int) -> fx.Node:
    return b.call(TOSA.RESCALE.default, x, dtype, [scale], in_zp, out_zp)


def _build_add(b: GraphBuilder, xs: list[fx.Node], scale_a, scale_b, scale_out, zp_a, zp_b, zp_out) -> fx.Node:
    wide_a = _rescale(b, xs[0], torch.int32, scale_a, zp_a, 0)
    wide_b = _rescale(b, xs[1], torch.int32, scale_b, zp_b, 0)
    return _rescale(b, b.call(TOSA.ADD.default, wide_a, wide_b), torch.int8, scale_out, 0, zp_out)


def lookup_table(seed: int) -> torch.Tensor:
    """The int8 TABLE of a table step: a permutation of -128..127 drawn from seed."""
    return torch.randperm(256, generator=torch.Generator().manual_seed(seed)).sub(128).to(torch.int8)


def _build_table(b: GraphBuilder, xs: list[fx.Node], seed: int) -> fx.Node:
    table = b.constant(f"table{sum(1 for _ in b.root.buffers())}", lookup_table(seed))
    return b.call(TOSA.TABLE.default, xs[0], table)


_BUILDERS: dict[str, Callable[..., fx.Node]] = {
    "transpose": lambda b, xs, perm: b.call(TOSA.TRANSPOSE.default, xs[0], list(perm)),
    "concat": lambda b, xs, axis: b.call(TOSA.CONCAT.default, xs, axis=axis),
    "slice": lambda b, xs, start, size: b.call(TOSA.SLICE.default, xs[0], b.const_shape(start), b.const_shape(size)),
    "reshape": lambda b, xs, shape: b.call(TOSA.RESHAPE.default, xs[0], b.const_shape(shape)),
    "pad": lambda b, xs, padding, value: b.call(TOSA.PAD.default, xs[0], b.const_shape(padding), value=value),
    "rescale": lambda b, xs, scale, in_zp, out_zp: _rescale(b, xs[0], torch.int8, scale, in_zp, out_zp),
    "clamp": lambda b, xs, low, high: b.call(TOSA.CLAMP.default, xs[0], low, high),
    "table": _build_table,
    "add": _build_add,
}


# ---------------------------------------------------------------- strategies


@dataclass
class _Value:
    shape: tuple[int, ...]
    zero_point: int


@dataclass
class _Drafting:
    """A spec being drawn. Values are numbered in creation order while drawing;
    `spec()` renumbers them so that inputs come first."""

    values: list[_Value] = field(default_factory=list)
    input_ids: list[int] = field(default_factory=list)
    steps: list[tuple[Step, int]] = field(default_factory=list)

    def add_input(self, shape: tuple[int, ...], zero_point: int) -> int:
        self.values.append(_Value(shape, zero_point))
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
        return GraphSpec(shapes_in, steps, tuple(dict.fromkeys(position[j] for j in outputs)))


zero_points = st.integers(-128, 127)
scales = st.sampled_from([0.25, 0.5, 0.75, 1.0, 1.0 / 3.0, 1.5, 2.0, 0.0078125, 0.9])


def shapes(min_rank: int = 1, max_rank: int = MAX_RANK) -> st.SearchStrategy[tuple[int, ...]]:
    """Small static shapes of rank min_rank..max_rank."""
    return st.lists(st.integers(1, MAX_DIM), min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def _factorization(draw, numel: int) -> tuple[int, ...]:
    """A random shape of rank 1..MAX_RANK with this many elements."""
    factors, n, p = [], numel, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    rank = draw(st.integers(1, MAX_RANK))
    dims = [1] * rank
    for factor in factors:
        dims[draw(st.integers(0, rank - 1))] *= factor
    return tuple(dims)


def _step_transpose(draw, g: _Drafting, k: int) -> int:
    shape = g.values[k].shape
    perm = tuple(draw(st.permutations(range(len(shape)))))
    return g.add_step(Step("transpose", (k,), (perm,)), _Value(tuple(shape[p] for p in perm), g.values[k].zero_point))


def _step_concat(draw, g: _Drafting, k: int, part: int | None = None) -> int:
    """k ++ (parts that fit: k itself, other values, or new inputs) along a random axis, all under k's zero point."""
    value = g.values[k]
    axis = draw(st.integers(0, len(value.shape) - 1))
    operands = [k] if part is None else [k, part]
    for _ in range(draw(st.integers(0 if part is not None else 1, 2))):
        fits = [
            j for j, v in enumerate(g.values)
            if v.zero_point == value.zero_point and len(v.shape) == len(value.shape)
            and all(a == b for d, (a, b) in enumerate(zip(v.shape, value.shape)) if d != axis)
        ]
        if draw(st.booleans()):
            operands.append(draw(st.sampled_from(fits)))
        else:
            shape = tuple(draw(st.integers(1, MAX_DIM)) if d == axis else s for d, s in enumerate(value.shape))
            operands.append(g.add_input(shape, value.zero_point))
    size = sum(g.values[j].shape[axis] for j in operands)
    out = tuple(size if d == axis else s for d, s in enumerate(value.shape))
    return g.add_step(Step("concat", tuple(operands), (axis,)), _Value(out, value.zero_point))


def _step_slice(draw, g: _Drafting, k: int) -> int:
    shape = g.values[k].shape
    start = tuple(draw(st.integers(0, d - 1)) for d in shape)
    size = tuple(draw(st.integers(1, d - s)) for d, s in zip(shape, start))
    return g.add_step(Step("slice", (k,), (start, size)), _Value(size, g.values[k].zero_point))


def _step_reshape(draw, g: _Drafting, k: int) -> int:
    shape = draw(_factorization(math.prod(g.values[k].shape)))
    return g.add_step(Step("reshape", (k,), (shape,)), _Value(shape, g.values[k].zero_point))


def _step_pad(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    padding = tuple(draw(st.integers(0, 1)) for _ in range(2 * len(value.shape)))
    out = tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(value.shape))
    return g.add_step(Step("pad", (k,), (padding, value.zero_point)), _Value(out, value.zero_point))


def _step_rescale(draw, g: _Drafting, k: int) -> int:
    value, out_zp = g.values[k], draw(zero_points)
    return g.add_step(Step("rescale", (k,), (draw(scales), value.zero_point, out_zp)), _Value(value.shape, out_zp))


def _step_clamp(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    low = draw(st.sampled_from([value.zero_point, -128, draw(zero_points)]))
    high = draw(st.integers(low, 127))
    return g.add_step(Step("clamp", (k,), (low, high)), _Value(value.shape, value.zero_point))


def _step_table(draw, g: _Drafting, k: int) -> int:
    value = g.values[k]
    return g.add_step(Step("table", (k,), (draw(st.integers(0, 3)),)), _Value(value.shape, draw(zero_points)))


def _step_add(draw, g: _Drafting, k: int) -> int:
    """k + other, where other is a value of the same shape or a new input broadcast along some dims."""
    value = g.values[k]
    same = [j for j, v in enumerate(g.values) if v.shape == value.shape]
    if draw(st.booleans()):
        other = draw(st.sampled_from(same))
    else:
        shape = tuple(1 if draw(st.booleans()) else d for d in value.shape)
        other = g.add_input(shape, draw(zero_points))
    if draw(st.booleans()):
        k, other = other, k
    a, b = g.values[k], g.values[other]
    out = tuple(max(x, y) for x, y in zip(a.shape, b.shape))
    zp_out = draw(zero_points)
    attrs = (draw(scales), draw(scales), draw(scales), a.zero_point, b.zero_point, zp_out)
    return g.add_step(Step("add", (k, other), attrs), _Value(out, zp_out))


def _step_relu_concat(draw, g: _Drafting, k: int) -> int:
    """CLAMP(k, zp, 127) ++ y with y signed under the same zero point: the shape that trips the stock pipeline."""
    value = g.values[k]
    relu = g.add_step(Step("clamp", (k,), (value.zero_point, 127)), _Value(value.shape, value.zero_point))
    signed = g.add_input(value.shape, value.zero_point)
    return _step_concat(draw, g, relu, part=signed)


STEP_KINDS: dict[str, Callable[..., int]] = {
    "transpose": _step_transpose,
    "concat": _step_concat,
    "slice": _step_slice,
    "reshape": _step_reshape,
    "pad": _step_pad,
    "rescale": _step_rescale,
    "clamp": _step_clamp,
    "table": _step_table,
    "add": _step_add,
    "relu-concat": _step_relu_concat,
}


@st.composite
def graph_specs(draw, max_steps: int = MAX_STEPS) -> GraphSpec:
    """Random int8 TOSA programs mixing every step kind, over inputs of rank 1..6."""
    g = _Drafting()
    g.add_input(draw(shapes()), draw(zero_points))
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(sorted(STEP_KINDS)))
        operand = draw(st.integers(0, len(g.values) - 1))
        STEP_KINDS[kind](draw, g, operand)
    results = [value_id for _, value_id in g.steps]
    extra = draw(st.lists(st.sampled_from(results), max_size=2, unique=True))
    return g.spec([results[-1], *extra])


# ---------------------------------------------------------------- inputs


def random_int8_inputs(graph_module: fx.GraphModule, seed: int) -> list[torch.Tensor]:
    """Uniform tensors over each placeholder's dtype range (int8 for fuzzed graphs)."""
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
    A fallback counts as a failure: every generated graph is valid input.
    So does an optimized graph that does not run; an original that does not
    run is a bug of the fuzzer and raises.
    """
    original = spec.build()
    with TosaLoweringContext(TOSA_SPEC):
        optimized, report = pipeline.optimize(original, target=target, accept="always")
    if report.fallback is not None:
        return f"fallback: {report.fallback}"
    for trial in range(trials):
        inputs = random_int8_inputs(original, trial)
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
                    f"output {slot} differs on random_int8_inputs(seed={trial}); "
                    f"rules fired: {report.rules_fired}\noptimized graph:\n{optimized.code}"
                )
    return None


class FuzzFailure(AssertionError):
    """A generated graph that the optimizer got wrong (message: what, and a reproducer)."""


def assert_optimizes_exactly(specs: list[GraphSpec], target: str = "ethos-u55-128") -> None:
    """Check a batch of specs in one optimizer run (the run's fixed cost dominates small graphs).

    On a failure, each spec is checked alone, so the reproducer is the one
    failing graph (or the whole batch if only the batch fails), without the
    steps its outputs do not need if it still fails without them. Raises
    FuzzFailure with a reproducer.
    """
    problem = check(merge(specs), target)
    if problem is None:
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


def batches(size: int = BATCH) -> st.SearchStrategy[list[GraphSpec]]:
    """Lists of `size` graph specs, checked together by `assert_optimizes_exactly`."""
    return st.lists(graph_specs(), min_size=size, max_size=size)


@dataclass
class FuzzRun:
    """What `run` did: graphs checked (shrinking included) and the minimized failures."""

    graphs: int = 0
    failures: list[str] = field(default_factory=list)


def run(n: int, seed_value: int = 0, target: str = "ethos-u55-128", batch: int = BATCH) -> FuzzRun:
    """Check about n random graphs, `batch` per optimizer run; each distinct failure comes back shrunk to a minimal reproducer."""
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
    @given(batches(batch))
    def check_batch(specs: list[GraphSpec]) -> None:
        result.graphs += len(specs)
        assert_optimizes_exactly(specs, target)

    try:
        check_batch()
    except FuzzFailure as failure:
        result.failures.append(str(failure))
    except BaseExceptionGroup as group:
        result.failures.extend(str(failure) for failure in group.exceptions)
    return result
