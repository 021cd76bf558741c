"""Slice and concat rank lowering: a rank-5 or rank-6 SLICE or CONCAT as a lower-rank one between two reshapes.

Motivation: Vela runs ops on up to 4-D (NHWC) tensors and copies a SLICE with
leading dimensions beyond HWC one leading index at a time (a 5-D band
selection of a spectrogram became 48 memory copies on Ethos-U55). When two
adjacent dims of the slice's box can be read as one dim, the same elements
are one box of the input viewed with those dims merged; for a concat, two
adjacent dims on one side of its axis merge in every input alike. As a
reshape around a lower-rank op, the leading dims can fold into H, and Vela
removes the reshapes as memory-only. The cost model prices the per-index
copies (`VelaCalibratedCost.cost`), so extraction keeps the rank where Vela
is cheaper. Nested concats along one axis are flattened by concat-flatten
(eqsat/rules/concat_slice.py) at any rank.

A slice can merge dims j, j + 1 when its box is whole along j + 1 (then it
takes start[j] * n .. (start[j] + size[j]) * n of the merged dim, n the
input's extent of j + 1), or one index wide along j (then the run
start[j] * n + start[j + 1] of length size[j + 1]). A concat's merged view is
reshape(concat(...), merged), which reshape-through-concat
(eqsat/rules/reshape_concat.py) turns into a concat of the inputs' merged views.

Only ops whose output is batched (more than one index in the dims before the
last three) are lowered: the others run as one op already, and lowering every
slice of a rank-6 graph with unit dims, crossed with the transpose laws, grew
a fuzz graph past its time limit.

Saturation ends: each law matches rank 5 or 6 only and builds an op of one
rank lower, so a rank-6 op yields rank-5 forms, which yield rank-4 forms, and
those match nothing here.

Bounds: each rule joins the matched slice or concat with its (operand's)
shape and the 21 rows of `index_below` (at most rank - 1 of them match), so a
round's work grows with the rank-5/6 slices and concats, never with pairs of them.
egglog joins every slice and concat with those rows before it tests the rank,
so on an e-graph without a rank-5/6 tensor (`may_match`) the round is skipped
(eqsat.rules.GUARDS): 0.18 s a round on the 20,000-node scale graph. A lookup
table keyed by shape would remove the join, but filling it changes the order
in which egglog creates e-classes where the laws fire, and with it which of
two equally priced graphs extraction keeps (band-split-frontend).
"""

from __future__ import annotations

from egglog import Fact, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import index_below, prefix_product
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
parts = var("parts", Vec[Tensor])
axis, j = var("axis", i64), var("j", i64)
start, size, dims, merged = (var(n, Vec[i64]) for n in ("start", "size", "dims", "merged"))
low_start, low_size = var("low_start", Vec[i64]), var("low_size", Vec[i64])

slice_concat_rank = ruleset(name="slice-concat-rank")

LOWERED_RANKS = (5, 6)
"""The ranks whose slices and concats the laws lower (one rank per application)."""


def rank_is_lowered(vector: Vec[i64]) -> list[Fact]:
    """vector (a shape or box) has rank 5 or 6."""
    return [i64(LOWERED_RANKS[0]) <= vector.length(), vector.length() <= i64(LOWERED_RANKS[-1])]


def may_match() -> list[Fact]:
    """Some tensor of the e-graph has rank 5 or 6: without one, no law here can match (a round is skipped,
    eqsat.rules.GUARDS)."""
    return [eq(dims).to(shape(x)), *rank_is_lowered(dims)]


def is_batched(out_shape: Vec[i64]) -> list[Fact]:
    """out_shape has more than one index in its dims before the last three: Vela copies it per index."""
    return [prefix_product(out_shape, out_shape.length() - 3) > i64(1)]


def merged_pair(in_shape: Vec[i64], pair: i64) -> Vec[i64]:
    """in_shape with dims pair and pair + 1 replaced by their product (an expression for queries)."""
    return in_shape.set(pair, in_shape[pair] * in_shape[pair + 1]).remove(pair + 1)


@slice_concat_rank.register
def _slice_rank_lowering():
    # slice(x, start, size) == reshape(slice(reshape(x, merged), start', size'), size)
    #   when the box is whole along dim j + 1 (start[j + 1] == 0, size[j + 1] == n = shape(x)[j + 1]), rank 5..6:
    #   merged is shape(x) with dims j, j + 1 replaced by their product; start'[j] = start[j] * n and
    #   size'[j] = size[j] * n, dim j + 1 removed from both.
    yield law(
        "slice-merge-whole-inner-dim",
        x.slice(start, size),
        x.reshape(merged).slice(low_start, low_size).reshape(size),
        eq(dims).to(shape(x)),
        *rank_is_lowered(dims),
        *is_batched(size),
        index_below(dims.length() - 1, j),
        eq(start[j + 1]).to(i64(0)),
        eq(size[j + 1]).to(dims[j + 1]),
        eq(merged).to(merged_pair(dims, j)),
        eq(low_start).to(start.set(j, start[j] * dims[j + 1]).remove(j + 1)),
        eq(low_size).to(size.set(j, size[j] * dims[j + 1]).remove(j + 1)),
    )
    # slice(x, start, size) == reshape(slice(reshape(x, merged), start', size'), size)
    #   when the box is one index wide along dim j (size[j] == 1), rank 5..6: merged as above;
    #   start'[j] = start[j] * shape(x)[j + 1] + start[j + 1] and size'[j] = size[j + 1], dim j + 1 removed.
    yield law(
        "slice-merge-unit-outer-dim",
        x.slice(start, size),
        x.reshape(merged).slice(low_start, low_size).reshape(size),
        eq(dims).to(shape(x)),
        *rank_is_lowered(dims),
        *is_batched(size),
        index_below(dims.length() - 1, j),
        eq(size[j]).to(i64(1)),
        eq(merged).to(merged_pair(dims, j)),
        eq(low_start).to(start.set(j, start[j] * dims[j + 1] + start[j + 1]).remove(j + 1)),
        eq(low_size).to(size.remove(j)),
    )


@slice_concat_rank.register
def _concat_rank_lowering():
    # concat(parts, axis) == reshape(reshape(concat(parts, axis), merged), shape)
    #   for dims j, j + 1 both before or both after axis ((j - axis) * (j + 1 - axis) > 0), rank 5..6: the
    #   merged view is a concat of the inputs' merged views (reshape-through-concat), of rank one lower.
    yield law(
        "concat-merge-adjacent-dims",
        Tensor.concat(parts, axis),
        Tensor.concat(parts, axis).reshape(merged).reshape(dims),
        eq(dims).to(shape(Tensor.concat(parts, axis))),
        *rank_is_lowered(dims),
        *is_batched(dims),
        index_below(dims.length() - 1, j),
        (j - axis) * (j + 1 - axis) > i64(0),
        eq(merged).to(merged_pair(dims, j)),
    )
