"""Reduction algebra: a max or min over the innermost axis gets a transposed equivalent.

Vela runs REDUCE_MAX over the innermost axis as a pool over a tensor of one
channel, element by element: on a (1, 64, 32) int8 tensor 8761 cycles on
Ethos-U55-128 and 10396 on Ethos-U85-256, against 1456 and 734 when the same
reduction runs over the next axis out after a transpose. So the law below puts
a transposed form of every innermost max or min in the e-graph, and the cost
model decides, per target, whether the transpose pays for itself.

REDUCE_SUM is left out, and what keeps it out is extraction, no longer
pricing. Vela runs an innermost sum well (Ethos-U55 as a CONV2D, 520 cycles
on the same tensor; Ethos-U85 220), so its transposed form rarely wins. With
the law also on sums, re-measured on the layer cost model (`python -m
benchmarks --models tds-conv1d conformer-block emg-global-pool
mobilevit-patch-attention --fresh` on a tree without `is_not_a_sum`), four
rows gain (tds-conv1d U55 94,576 -> 93,128, conformer-block U55 171,504 ->
171,216, mobilevit-patch-attention U55 2,222,550 -> 2,218,198 and U85
541,115 -> 496,083) but emg-global-pool loses: U55 28,274 -> 32,954, U85
13,158 -> 16,096. There the e-graph grows to 340 candidate terms, past the
ILP's cap, and refinement from greedy's selection stops at a graph the cost
model itself prices 32,092 (U55), where refinement from the ILP's best
selection reaches 25,446, the graph the smaller e-graph gives
(`python -m benchmarks.optimality --models emg-global-pool`).

The transpose back reads a tensor whose last-but-one dim is the kept unit dim,
so `transpose-unit-dims-is-reshape` turns it into a reshape; the transpose in
front moves with the transpose laws to wherever it is cheapest.

Bounds: the law adds one transposed form per reduction over the innermost
axis; its right-hand side reduces the axis before, so it never matches its
own output, and `transpose-through-reduce` with `transpose-compose` only
union the transposed form back into the class it came from (the law may match
such a term before it merges, and adds nothing new). Each match joins one
reduction with its operand's shape: no self-join.
"""

from __future__ import annotations

from egglog import Fact, String, StringLike, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
key = var("key", String)
axis = var("axis", i64)
dims, swap = var("dims", Vec[i64]), var("swap", Vec[i64])

reduce = ruleset(name="reduce")


def is_not_a_sum(reduce_key: StringLike) -> list[Fact]:
    """The reduction keyed reduce_key is a max or a min, not a sum (TOSA REDUCE_SUM, aten sum): its key names neither."""
    return [eq(reduce_key.replace("REDUCE_SUM", "")).to(reduce_key), eq(reduce_key.replace("aten.sum", "")).to(reduce_key)]


@reduce.register
def _innermost_reduction():
    # reduce(x, r-1) == transpose(reduce(transpose(x, s), r-2), s)  where s swaps the last two dims (s == s⁻¹, s[r-2] == r-1);
    #   for a max or min, only when x's last two dims are both longer than 1 (else one of the two forms reduces a unit dim)
    yield law(
        "reduce-innermost-through-transpose",
        Tensor.reduce(key, x, axis),
        Tensor.reduce(key, x.transpose(swap), axis - 1).transpose(swap),
        *is_not_a_sum(key),
        eq(dims).to(shape(x)),
        eq(axis + 1).to(dims.length()),
        i64(1) <= axis,
        i64(1) < dims[axis],
        i64(1) < dims[axis - 1],
        eq(swap).to(dims.length().range().set(axis, axis - 1).set(axis - 1, axis)),
    )
