"""Transpose rank lowering: a transpose as a lower-rank transpose between two reshapes.

Motivation: Ethos-U55 runs only a few permutations natively and decomposes
the others into long sequences of 1x1 pooling ops. A 5-D or 4-D transpose
often only moves blocks of dims that stay together, or dims of size 1; as a
reshape around a lower-rank transpose it may become a permutation the
hardware supports. Each law lowers the rank by one; applied again it lowers
it further. The split form (a transpose of a reshape that splits dims the
permutation keeps together) follows from the merge form and the reshape laws
(reshape-reshape, reshape-identity), so it is not a law of its own. Vela
removes a RESHAPE as memory-only, so the reshapes cost nothing there.

Each law picks the input dim it removes by joining the analysis' per-dim
lookup `renumbered_perm(p, d, rank)` (the permutation with input dim d's
number taken out) and finds its output position in `inverse_perm(p)`, so a
law is one rule for every rank and position. Saturation ends: every
transpose a law builds has a lower rank than the one it matched.

Bounds: each rule joins the matched transpose with its operand's shape and
two lookups keyed on its perm (at most rank rows each), so a round's work
grows with the transposes, never with pairs of them.
"""

from __future__ import annotations

from egglog import Fact, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import inverse_perm, renumbered_perm
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
p, dims = var("p", Vec[i64]), var("dims", Vec[i64])

transpose_rank = ruleset(name="transpose-rank")


def is_unit_dim(in_shape: Vec[i64], dim: i64) -> list[Fact]:
    """Input dim `dim` has size 1."""
    return [eq(in_shape[dim]).to(i64(1))]


@transpose_rank.register
def _transpose_rank_lowering():
    merged, unit_dropped, out, low_perm, renumbered, inverse = (
        var(n, Vec[i64]) for n in ("merged", "unit_dropped", "out", "low_perm", "renumbered", "inverse")
    )
    j, removed = var("j", i64), var("removed", i64)
    # transpose(x, p) == reshape(transpose(reshape(x, merged), p'), shape(x)∘p)
    #   when input dims j, j + 1 sit next to each other, in order, in the output (p⁻¹[j + 1] == p⁻¹[j] + 1), rank 3..MAX_RANK.
    #   merged is shape(x) with dims j, j + 1 replaced by their product; p' is p without the entry j + 1,
    #   with input dims above j renumbered down by one. Rank goes from r to r - 1 >= 2.
    yield law(
        "transpose-merge-adjacent-dims",
        x.transpose(p),
        x.reshape(merged).transpose(low_perm).reshape(out),
        eq(dims).to(shape(x)),
        i64(3) <= p.length(),
        eq(dims.length()).to(p.length()),
        eq(renumbered).to(renumbered_perm(p, removed, p.length())),
        eq(j).to(removed - 1),
        i64(0) <= j,
        eq(inverse).to(inverse_perm(p, p.length())),
        eq(inverse[removed]).to(inverse[j] + 1),
        eq(merged).to(dims.set(j, dims[j] * dims[removed]).remove(removed)),
        eq(low_perm).to(renumbered.remove(inverse[removed])),
        eq(out).to(p.map(dims.__getitem__)),
    )
    # transpose(x, p) == reshape(transpose(reshape(x, unit_dropped), p'), shape(x)∘p)
    #   when shape(x)[j] == 1: a dim of size 1 can go anywhere, rank 2..MAX_RANK. unit_dropped is shape(x)
    #   without dim j; p' is p without the entry j, renumbered. Rank goes from r to r - 1 >= 1.
    yield law(
        "transpose-drop-unit-dim",
        x.transpose(p),
        x.reshape(unit_dropped).transpose(low_perm).reshape(out),
        eq(dims).to(shape(x)),
        eq(dims.length()).to(p.length()),
        eq(renumbered).to(renumbered_perm(p, j, p.length())),
        *is_unit_dim(dims, j),
        eq(inverse).to(inverse_perm(p, p.length())),
        eq(unit_dropped).to(dims.remove(j)),
        eq(low_perm).to(renumbered.remove(inverse[j])),
        eq(out).to(p.map(dims.__getitem__)),
    )
