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

Each law enumerates the output position it removes through the analysis'
`index_below` and renumbers the remaining input dims through a lookup table
built in the query (`renumbering`), so a law is one rule for every rank and
position. Saturation ends: every transpose a law builds has a lower rank than
the one it matched.

Bounds: each rule joins the matched transpose with its operand's shape and
the 21 rows of `index_below` (at most rank of them match), so a round's work
grows with the transposes, never with pairs of them.
"""

from __future__ import annotations

from egglog import Fact, UnstableFn, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import index_below
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
p, dims = var("p", Vec[i64]), var("dims", Vec[i64])

transpose_rank = ruleset(name="transpose-rank")


def is_unit_dim(in_shape: Vec[i64], dim: i64) -> list[Fact]:
    """Input dim `dim` has size 1."""
    return [eq(in_shape[dim]).to(i64(1))]


def renumbering(removed: i64, rank: i64) -> Vec[i64]:
    """[0, 1, ..., removed, removed, removed + 1, ..., rank - 2]: entry d is input dim d's number once dim
    `removed` is gone (d - 1 above it). An expression for queries."""
    return (removed + 1).range().append((rank - removed - 1).range().map(UnstableFn[i64, i64](i64.__add__, removed)))


def perm_without(perm: Vec[i64], position: i64) -> Vec[i64]:
    """perm without output position `position`, renumbered for the input without dim perm[position]."""
    return perm.remove(position).map(renumbering(perm[position], perm.length()).__getitem__)


@transpose_rank.register
def _transpose_rank_lowering():
    merged, unit_dropped, out, low_perm = (var(n, Vec[i64]) for n in ("merged", "unit_dropped", "out", "low_perm"))
    i, j = var("i", i64), var("j", i64)
    # transpose(x, p) == reshape(transpose(reshape(x, merged), p'), shape(x)∘p)
    #   when p[i + 1] == p[i] + 1 = j + 1: input dims j, j + 1 stay adjacent and in order in the output, rank 3..MAX_RANK.
    #   merged is shape(x) with dims j, j + 1 replaced by their product; p' is p without position i + 1,
    #   with input dims above j renumbered down by one. Rank goes from r to r - 1 >= 2.
    yield law(
        "transpose-merge-adjacent-dims",
        x.transpose(p),
        x.reshape(merged).transpose(low_perm).reshape(out),
        eq(dims).to(shape(x)),
        i64(3) <= p.length(),
        eq(dims.length()).to(p.length()),
        index_below(p.length() - 1, i),
        eq(p[i + 1]).to(p[i] + 1),
        eq(j).to(p[i]),
        eq(merged).to(dims.set(j, dims[j] * dims[j + 1]).remove(j + 1)),
        eq(low_perm).to(perm_without(p, i + 1)),
        eq(out).to(p.map(dims.__getitem__)),
    )
    # transpose(x, p) == reshape(transpose(reshape(x, unit_dropped), p'), shape(x)∘p)
    #   when shape(x)[j] == 1 for j = p[i]: a dim of size 1 can go anywhere, rank 2..MAX_RANK. unit_dropped is
    #   shape(x) without dim j; p' is p without position i, renumbered. Rank goes from r to r - 1 >= 1.
    yield law(
        "transpose-drop-unit-dim",
        x.transpose(p),
        x.reshape(unit_dropped).transpose(low_perm).reshape(out),
        eq(dims).to(shape(x)),
        i64(2) <= p.length(),
        eq(dims.length()).to(p.length()),
        index_below(p.length(), i),
        eq(j).to(p[i]),
        *is_unit_dim(dims, j),
        eq(unit_dropped).to(dims.remove(j)),
        eq(low_perm).to(perm_without(p, i)),
        eq(out).to(p.map(dims.__getitem__)),
    )
