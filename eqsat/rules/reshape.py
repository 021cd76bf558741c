"""Reshape algebra: collapse and cancel reshapes, sink them below unary ops, and lower transpose ranks.

Vela removes a RESHAPE as memory-only, so reshapes are free moves: chains
collapse, a reshape to the input's own shape is the input, and a reshape
sinks below a unary elementwise op or a TABLE so that it can meet another
data-movement op.

Motivation for the transpose laws: Ethos-U55 runs only a few permutations
natively and decomposes the others into long sequences of 1x1 pooling ops. A
5-D or 4-D transpose often only moves blocks of dims that stay together, or
dims of size 1; as a reshape around a lower-rank transpose it may become a
permutation the hardware supports. Each law lowers the rank by one; applied
again it lowers it further. The split form (a transpose of a reshape that
splits dims the permutation keeps together) follows from the merge form,
reshape-reshape and reshape-identity, so it is not a law of its own.

Bounds: each rule joins the matched reshape or transpose with its operand and
its operand's shape, keyed on the matched term; none joins two terms that only
share parameters.
"""

from __future__ import annotations

from egglog import Fact, String, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.ir import MAX_RANK
from eqsat.rules.guards import single_operand, table_operand_is_not_batched_mac_shape
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
s, s1, s2 = var("s", Vec[i64]), var("s1", Vec[i64]), var("s2", Vec[i64])
p, dims = var("p", Vec[i64]), var("dims", Vec[i64])
key = var("key", String)
operands = var("operands", Vec[Tensor])

reshape = ruleset(name="reshape")


def keeps_adjacent(perm: Vec[i64], position: int) -> list[Fact]:
    """Output dims position and position + 1 are input dims j and j + 1, in that order."""
    return [eq(perm[position + 1]).to(perm[position] + 1)]


def is_unit_dim(in_shape: Vec[i64], dim: i64) -> list[Fact]:
    """Input dim `dim` has size 1."""
    return [eq(in_shape[dim]).to(i64(1))]


def perm_without(perm: Vec[i64], position: int, rank: int) -> Vec[i64]:
    """perm without output position `position`, renumbered for the input without dim perm[position].

    Input dims above the removed one move down by one: p[r] - min(max(p[r] - j, 0), 1).
    An expression for queries (it indexes perm), built per rank.
    """
    removed = perm[position]
    return Vec(*[perm[r] - (perm[r] - removed).max(0).min(1) for r in range(rank) if r != position])


@reshape.register
def _reshape_algebra():
    # reshape(reshape(x, s1), s2) == reshape(x, s2)
    yield law("reshape-reshape", x.reshape(s1).reshape(s2), x.reshape(s2))
    # reshape(x, s) == x  when s == shape(x)
    yield law("reshape-identity", x.reshape(s), x, eq(s).to(shape(x)))


@reshape.register
def _reshape_through_elementwise():
    # reshape(f(x), s) == f(reshape(x, s))  for a unary elementwise f (this direction only, so it terminates)
    yield law(
        "reshape-through-unary",
        Tensor.elementwise(key, operands).reshape(s),
        Tensor.elementwise(key, Vec(x.reshape(s))),
        *single_operand(operands, x),
    )
    lut = var("lut", Tensor)
    # reshape(table(k, x, lut), s) == table(k, reshape(x, s), lut)  (TABLE is elementwise in x; lut stays) unless s is [N,1,1,C], N > 1
    yield law(
        "reshape-through-table",
        Tensor.table(key, x, lut).reshape(s),
        Tensor.table(key, x.reshape(s), lut),
        *table_operand_is_not_batched_mac_shape(s),
    )


@reshape.register
def _transpose_rank_lowering():
    merged, unit_dropped, out, low_perm = (var(n, Vec[i64]) for n in ("merged", "unit_dropped", "out", "low_perm"))
    j = var("j", i64)
    for rank in range(3, MAX_RANK + 1):
        for i in range(rank - 1):
            # transpose(x, p) == reshape(transpose(reshape(x, merged), p'), shape(x)∘p)
            #   when p[i + 1] == p[i] + 1 = j + 1: input dims j, j + 1 stay adjacent and in order in the output.
            #   merged is shape(x) with dims j, j + 1 replaced by their product; p' is p without position
            #   i + 1, with input dims above j renumbered down by one. Rank goes from `rank` to rank - 1 >= 2.
            yield law(
                f"transpose-merge-adjacent-dims-{rank}-{i}",
                x.transpose(p),
                x.reshape(merged).transpose(low_perm).reshape(out),
                eq(dims).to(shape(x)),
                eq(dims.length()).to(i64(rank)),
                eq(p.length()).to(i64(rank)),
                *keeps_adjacent(p, i),
                eq(j).to(p[i]),
                eq(merged).to(dims.set(j, dims[j] * dims[j + 1]).remove(j + 1)),
                eq(low_perm).to(perm_without(p, i + 1, rank)),
                eq(out).to(p.map(dims.__getitem__)),
            )
    for rank in range(2, MAX_RANK + 1):
        for i in range(rank):
            # transpose(x, p) == reshape(transpose(reshape(x, unit_dropped), p'), shape(x)∘p)
            #   when shape(x)[j] == 1 for j = p[i]: a dim of size 1 can go anywhere. unit_dropped is shape(x)
            #   without dim j; p' is p without position i, renumbered. Rank goes from `rank` to rank - 1 >= 1.
            yield law(
                f"transpose-drop-unit-dim-{rank}-{i}",
                x.transpose(p),
                x.reshape(unit_dropped).transpose(low_perm).reshape(out),
                eq(dims).to(shape(x)),
                eq(dims.length()).to(i64(rank)),
                eq(p.length()).to(i64(rank)),
                eq(j).to(p[i]),
                *is_unit_dim(dims, j),
                eq(unit_dropped).to(dims.remove(j)),
                eq(low_perm).to(perm_without(p, i, rank)),
                eq(out).to(p.map(dims.__getitem__)),
            )
