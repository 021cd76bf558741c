"""Concat/slice algebra: slices of concats, concats of slices, and their identities.

A slice that reads only some inputs of a concat does not need the others; a
concat of adjacent slices of one tensor is one slice, and a slice that covers
its whole input is the input. Together they show a concat whose consumers
only read one input is dead (DESIGN §1), and fold split-then-concat patterns.

CONCAT and SLICE are pure data movement: no law here depends on or changes
quantization (terms carry none). A concat whose inputs are quantized unlike
its output is not data movement; the bridge reads it as an opaque op
(`ops.concat.requantizes_inputs`), so these laws never see one.

Queries cannot iterate over a Vec (DESIGN §3). The inputs of a concat are
enumerated through the analysis `concat_offset(parts, axis, i)` (where input
i starts along axis) and reached through their `element` handles, so most laws
are one rule for every arity. (Elements are joined on a bound index only: a
query that looks up `element(parts, index + k)` for several k makes egglog
join every element of every lookup first, exponential in k; so a slice that
spans several inputs is split off one input at a time.) Slice-slice is
generated per rank (`slice-slice-rank<r>`). The laws that rebuild a concat's
input list take the leading and trailing inputs from the analysis
(`leading_parts`, `trailing_parts`) and act at one position only, the first
where they apply: concat-of-adjacent-slices merges the first maximal run of
adjacent slices (`slice_run_begin`/`slice_run_end`, found one input at a
time, and `first_slice_run`), concat-flatten flattens the first nested concat
(`first_nested_concat`). Acting at any position, as they once did, gave a
concat of r adjacent slices up to 2^(r-1) equivalent concats (300 adjacent
slices in concats of 2..16 inputs passed 600k e-nodes in 5 iterations) and a
concat of m nested concats up to 2^m (150 nested concats: 132k e-nodes);
now each run or nested concat gives one new concat.

Bounds: each rule joins the matched slice or concat with at most two of its
inputs, keyed on (parts, index) (a run step looks up the neighbour of a bound
index: at most the concat's arity candidates), so a round's work grows with
the concats' inputs, and the terms it creates with the runs and nested
concats.

concat-extends-concat is concat-flatten's inverse where the e-graph already
holds the shorter concat: DenseNet-style blocks concatenate [x, y1..yk] at
every layer k, and Vela copies every input of a concat that has other readers
(on Ethos-U55 about 1.5k cycles each for a 64 x 12 int8 input), so extending
the previous layer's concat by one input copies two tensors instead of k + 1.
It looks the shorter concat up, so it builds no concat the graph does not
already compute; concat-flatten then adds at most MAX_CONCAT_ARITY partial
flattenings of each nested concat it makes. The lookup joins on the table
`concat_prefix` (each concat's inputs but the last), which the ruleset
`concat_prefixes` fills right before every concat-slice round
(eqsat.rules.LOOKUPS): looked up through the `pop` primitive in the query,
egglog joined every pair of concats along one axis before computing it (a
round took 0.02, 0.15 and 1.4 s at 400, 1,200 and 4,000 concats).

Not covered: flattening into a concat of more than MAX_CONCAT_ARITY + 1 inputs.
Strided slices are not Slice terms.
"""

from __future__ import annotations

from egglog import Fact, Vec, eq, function, i64, rule, ruleset, set_, var

from eqsat.rules._law import law
from eqsat.ir import MAX_RANK
from eqsat.rules.analysis import concat_offset, first_nested_concat, first_slice_run, leading_parts, slice_run_begin, slice_run_end, trailing_parts
from eqsat.rules.guards import (
    MAX_CONCAT_ARITY,
    ends_after,
    is_zeros,
    selects_whole_input,
    single_operand,
    starts_inside,
    within_one_input,
)
from eqsat.terms import Tensor, shape

x, part = var("x", Tensor), var("part", Tensor)
parts, inner = var("parts", Vec[Tensor]), var("inner", Vec[Tensor])
axis, index = var("axis", i64), var("index", i64)
offset, extent, begin, length = (var(n, i64) for n in ("offset", "extent", "begin", "length"))
start, size = var("start", Vec[i64]), var("size", Vec[i64])

concat_slice = ruleset(name="concat-slice")

concat_prefixes = ruleset(name="concat-prefixes")
"""Fills concat_prefix; saturated before each concat-slice round (eqsat.rules.LOOKUPS)."""


@function(egg_fn="concat_prefix", merge=lambda old, new: old)
def concat_prefix(parts: Vec[Tensor]) -> Vec[Tensor]:
    """parts without its last input, for the concats of three or more inputs."""


@concat_prefixes.register
def _concat_prefixes():
    yield rule(Tensor.concat(parts, axis), parts.length() >= i64(3), name="concat-prefix").then(set_(concat_prefix(parts)).to(parts.pop()))


def input_of_concat(parts: Vec[Tensor], axis: i64, index: i64, part: Tensor, offset: i64) -> list[Fact]:
    """part == parts[index], starting at offset along axis (enumerates index over the concat's inputs)."""
    return [eq(offset).to(concat_offset(parts, axis, index)), eq(part).to(Tensor.element(parts, index))]


@concat_slice.register
def _identities():
    # concat([x], axis) == x
    yield law("concat-single", Tensor.concat(parts, axis), x, *single_operand(parts, x))
    # slice(x, [0, ..., 0], shape(x)) == x
    yield law("slice-full", x.slice(start, size), x, eq(size).to(shape(x)), *is_zeros(start))


@concat_slice.register
def _slice_of_slice():
    outer_start, outer_size = var("outer_start", Vec[i64]), var("outer_size", Vec[i64])
    for rank in range(1, MAX_RANK + 1):
        sums = [var(f"begin{d}", i64) for d in range(rank)]
        # slice(slice(x, s1, z1), s2, z2) == slice(x, s1 + s2, z2)
        yield law(
            f"slice-slice-rank{rank}",
            x.slice(start, size).slice(outer_start, outer_size),
            x.slice(Vec(*sums), outer_size),
            eq(start.length()).to(i64(rank)),
            eq(outer_start.length()).to(i64(rank)),
            *[eq(total).to(start[d] + outer_start[d]) for d, total in enumerate(sums)],
        )


@concat_slice.register
def _slice_of_concat():
    # slice(concat([a0..ak], axis), box) == ai  when box is exactly ai's place in the concat
    yield law(
        "slice-of-concat-exact",
        Tensor.concat(parts, axis).slice(start, size),
        part,
        *input_of_concat(parts, axis, index, part, offset),
        *selects_whole_input(start, size, axis, offset, shape(part)),
    )
    # slice(concat([a0..ak], axis), start, size) == slice(ai, start - offset_i on axis, size)  when the box is inside ai
    inner_start = var("inner_start", Vec[i64])
    yield law(
        "slice-of-concat-inside",
        Tensor.concat(parts, axis).slice(start, size),
        part.slice(inner_start, size),
        *input_of_concat(parts, axis, index, part, offset),
        eq(extent).to(shape(part)[axis]),
        eq(begin).to(start[axis]),
        eq(length).to(size[axis]),
        *within_one_input(begin, length, offset, extent),
        eq(inner_start).to(start.set(axis, begin - offset)),
    )


@concat_slice.register
def _slice_of_concat_spanning():
    joined, end, boundary = var("joined", Tensor), var("end", i64), var("boundary", i64)
    first_start, first_size, rest_start, rest_size = (var(n, Vec[i64]) for n in ("first_start", "first_size", "rest_start", "rest_size"))
    # slice(concat([..ai..], axis), box) == concat([slice(ai, box ∩ ai), slice(concat([..ai..], axis), box after ai)], axis)
    #   when the box starts in ai and ends after it. The rest is again inside one input or spanning, and
    #   concat-flatten makes the nested concats one concat of the clipped pieces.
    yield law(
        "slice-of-concat-spanning",
        joined.slice(start, size),
        Tensor.concat(Vec(part.slice(first_start, first_size), joined.slice(rest_start, rest_size)), axis),
        eq(joined).to(Tensor.concat(parts, axis)),
        *input_of_concat(parts, axis, index, part, offset),
        eq(extent).to(shape(part)[axis]),
        eq(begin).to(start[axis]),
        eq(end).to(begin + size[axis]),
        *starts_inside(begin, offset, extent),
        *ends_after(end, offset, extent),
        eq(boundary).to(offset + extent),
        eq(first_start).to(start.set(axis, begin - offset)),
        eq(first_size).to(size.set(axis, boundary - begin)),
        eq(rest_start).to(start.set(axis, boundary)),
        eq(rest_size).to(size.set(axis, end - boundary)),
    )


@concat_slice.register
def _concat_of_slices():
    first, end, total = var("first", i64), var("end", i64), var("total", i64)
    head, rest, merged_size = var("head", Vec[Tensor]), var("rest", Vec[Tensor]), var("merged_size", Vec[i64])
    # concat([.., slice(x, s_f, z_f), .., slice(x, s_e-1, z_e-1), ..], axis) == concat([.., slice(x, s_f, z_f + .. + z_e-1 on axis), ..], axis)
    #   when inputs f..e-1 are the first run of slices of x that each start along axis where the one before ends
    #   (same box on every other dim); the run's extent is the concat's offset of e minus that of f
    yield law(
        "concat-of-adjacent-slices",
        Tensor.concat(parts, axis),
        Tensor.concat(head.push(x.slice(start, merged_size)).append(rest), axis),
        eq(first).to(first_slice_run(parts, axis)),
        eq(Tensor.element(parts, first)).to(x.slice(start, size)),
        eq(first).to(slice_run_begin(parts, axis, x, start, first)),
        eq(end).to(slice_run_end(parts, axis, x, start, first)),
        first + 2 <= end,
        eq(total).to(concat_offset(parts, axis, end) - concat_offset(parts, axis, first)),
        eq(merged_size).to(size.set(axis, total)),
        eq(head).to(leading_parts(parts, first)),
        eq(rest).to(trailing_parts(parts, end)),
    )


@concat_slice.register
def _concat_flatten():
    first = var("first", i64)
    head, rest = var("head", Vec[Tensor]), var("rest", Vec[Tensor])
    # concat([.., concat([b0..bm], axis), ..], axis) == concat([.., b0..bm, ..], axis)  for the first such input
    yield law(
        "concat-flatten",
        Tensor.concat(parts, axis),
        Tensor.concat(head.append(inner, rest), axis),
        eq(first).to(first_nested_concat(parts, axis)),
        eq(Tensor.element(parts, first)).to(Tensor.concat(inner, axis)),
        parts.length() + inner.length() <= i64(MAX_CONCAT_ARITY + 1),
        eq(head).to(leading_parts(parts, first)),
        eq(rest).to(trailing_parts(parts, first + 1)),
    )


@concat_slice.register
def _concat_extends_concat():
    prefix, last = var("prefix", Tensor), var("last", Tensor)
    # concat([b0..bn], axis) == concat([concat([b0..bn-1], axis), bn], axis)  when concat([b0..bn-1], axis) is in the e-graph
    yield law(
        "concat-extends-concat",
        Tensor.concat(parts, axis),
        Tensor.concat(Vec(prefix, last), axis),
        eq(prefix).to(Tensor.concat(concat_prefix(parts), axis)),
        eq(last).to(parts[parts.length() - 1]),  # read from the Vec: a join with the element table cost synthetic-20000 4.7 s of saturation
    )
