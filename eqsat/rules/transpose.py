"""Transpose algebra: identity, composition, unit-dim transposes, and propagation.

A transpose that meets its inverse cancels through composition and identity.
Propagation moves a transpose across the ops between it and its inverse
(decomposed norms, activations, concats, slices, reductions) so that the two
can meet; hoisting turns one transpose per concat input into one after the
concat. Rescales have their own laws (eqsat/rules/rescale.py): TOSA RESCALE
is not read as a plain elementwise op, because per-channel ones are not.

Covered by the unary law: every op the bridge reads as a one-operand
Elementwise (TOSA CLAMP and CAST, aten relu/neg/abs/clamp/bitwise_not).
TABLE and PAD have laws of their own: a TABLE's lookup table is a second
operand that stays where it is, and a PAD's (before, after) pairs move with
the dims they pad.

A slice and a transpose commute both ways (transpose-through-slice and its
inverse slice-through-transpose, kept together here): a slice moves towards
the inputs to meet a concat, a transpose towards its inverse.

Where a law needs the position of an input dim in a permutation (a concat's
or a reduction's axis) it enumerates positions through the analysis'
`index_below`, and where it permutes a box or a padding it reads the
analysis' `inverse_perm` or `paired_perm`, instead of being generated per
position and rank; transpose-through-concat reads its new inputs from
`transposed_inputs` instead of being generated per arity and axis.

Bounds: each rule joins the matched transpose with its operand, at most two
operand elements, and lookups keyed on its perm or its concat's inputs (the
analysis builds `transposed_inputs` and `transposed_sources` one input at a
time), so no rule joins one transpose atom per concat input (DESIGN §3).
"""

from __future__ import annotations

import itertools

from egglog import Fact, String, UnstableFn, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.ir import MAX_RANK
from eqsat.rules.analysis import index_below, inverse_perm, paired_perm, transposed_inputs, transposed_sources
from eqsat.rules.guards import (
    is_identity_perm,
    same_length,
    single_operand,
    table_operand_is_not_batched_mac_shape,
    two_operands,
    zeros_like,
)
from eqsat.terms import Tensor, shape

x, a, b = var("x", Tensor), var("a", Tensor), var("b", Tensor)
p, q = var("p", Vec[i64]), var("q", Vec[i64])
dims, other_dims = var("dims", Vec[i64]), var("other_dims", Vec[i64])
key = var("key", String)
operands, parts = var("operands", Vec[Tensor]), var("parts", Vec[Tensor])
axis = var("axis", i64)

transpose = ruleset(name="transpose")


def moves_only_unit_dims(perm: Vec[i64], in_shape: Vec[i64], rank: int) -> list[Fact]:
    """perm keeps the relative order of the dims of size other than 1.

    For every pair i < j of output dims: in_shape[perm[i]] == 1, or
    in_shape[perm[j]] == 1, or perm[i] < perm[j]. Written as a sum of
    violations that must be 0: is_big(d) = min(d - 1, 1) and
    inverted(i, j) = min(max(perm[i] - perm[j], 0), 1).
    """
    facts: list[Fact] = [eq(perm.length()).to(i64(rank)), eq(in_shape.length()).to(i64(rank))]
    if rank < 2:
        return facts
    big = [(in_shape[perm[i]] - 1).min(1) for i in range(rank)]
    violations = [
        big[i] * big[j] * (perm[i] - perm[j]).max(0).min(1) for i, j in itertools.combinations(range(rank), 2)
    ]
    return facts + [eq(sum(violations[1:], violations[0])).to(i64(0))]


def all_unit_dims(in_shape: Vec[i64], other: Vec[i64]) -> list[Fact]:
    """in_shape == [1] * len(other), of rank 1..MAX_RANK: the tensor broadcasts against any layout of other's rank."""
    return [
        i64(0) < other.length(),
        other.length() <= i64(MAX_RANK),
        eq(in_shape).to(zeros_like(other).map(UnstableFn[i64, i64](i64.__add__, i64(1)))),
    ]


@transpose.register
def _transpose_algebra():
    # transpose(x, p) == x  when p is the identity permutation
    yield law("transpose-identity", x.transpose(p), x, *is_identity_perm(p))
    # transpose(transpose(x, p), q) == transpose(x, p∘q), where (p∘q)[i] = p[q[i]]
    yield law("transpose-compose", x.transpose(p).transpose(q), x.transpose(q.map(p.__getitem__)), *same_length(p, q))
    # transpose(x, p) == reshape(x, shape(x)∘p)  when p moves only dims of size 1
    for rank in range(2, MAX_RANK + 1):
        yield law(
            f"transpose-unit-dims-is-reshape-{rank}",
            x.transpose(p),
            x.reshape(p.map(dims.__getitem__)),
            eq(dims).to(shape(x)),
            *moves_only_unit_dims(p, dims, rank),
        )


@transpose.register
def _transpose_through_elementwise():
    # transpose(f(x), p) == f(transpose(x, p))  for a unary elementwise f
    yield law(
        "transpose-through-unary",
        Tensor.elementwise(key, operands).transpose(p),
        Tensor.elementwise(key, Vec(x.transpose(p))),
        *single_operand(operands, x),
    )
    left, right = var("left", Tensor), var("right", Tensor)
    binds = two_operands(operands, left, right)
    # transpose(f(a, b), p) == f(transpose(a, p), transpose(b, p))  when a and b have the same shape (no broadcast)
    yield law(
        "transpose-through-binary",
        Tensor.elementwise(key, operands).transpose(p),
        Tensor.elementwise(key, Vec(left.transpose(p), right.transpose(p))),
        *binds,
        eq(shape(left)).to(shape(right)),
    )
    # transpose(f(a, c), p) == f(transpose(a, p), c)  when c has shape [1]*rank(a) (a broadcast scalar), rank 1..MAX_RANK
    yield law(
        "transpose-through-binary-scalar-right",
        Tensor.elementwise(key, operands).transpose(p),
        Tensor.elementwise(key, Vec(left.transpose(p), right)),
        *binds,
        eq(dims).to(shape(left)),
        *all_unit_dims(shape(right), dims),
    )
    # transpose(f(c, b), p) == f(c, transpose(b, p))  when c has shape [1]*rank(b) (a broadcast scalar), rank 1..MAX_RANK
    yield law(
        "transpose-through-binary-scalar-left",
        Tensor.elementwise(key, operands).transpose(p),
        Tensor.elementwise(key, Vec(left, right.transpose(p))),
        *binds,
        eq(dims).to(shape(right)),
        *all_unit_dims(shape(left), dims),
    )


@transpose.register
def _transpose_through_table_and_pad():
    lut, padding, moved = var("lut", Tensor), var("padding", Vec[i64]), var("moved", Vec[i64])
    value = var("value", i64)
    # transpose(table(k, x, lut), p) == table(k, transpose(x, p), lut)  (TABLE is elementwise in x; lut stays) unless the new operand is [N,1,1,C], N > 1
    yield law(
        "transpose-through-table",
        Tensor.table(key, x, lut).transpose(p),
        Tensor.table(key, x.transpose(p), lut),
        *table_operand_is_not_batched_mac_shape(shape(Tensor.table(key, x, lut).transpose(p))),
    )
    # transpose(pad(x, padding, v), p) == pad(transpose(x, p), padding'), padding' pair i = padding pair p[i], rank 1..MAX_RANK
    yield law(
        "transpose-through-pad",
        x.pad(padding, value).transpose(p),
        x.transpose(p).pad(moved, value),
        i64(0) < p.length(),
        p.length() <= i64(MAX_RANK),
        eq(padding.length()).to(p.length() * 2),
        eq(moved).to(paired_perm(p, p.length()).map(padding.__getitem__)),
    )


@transpose.register
def _transpose_through_reduce():
    reduce_key, new_axis = var("reduce_key", String), var("new_axis", i64)
    # transpose(reduce(x, axis), p) == reduce(transpose(x, p), j)  where p[j] == axis (the kept unit dim moves with p)
    yield law(
        "transpose-through-reduce",
        Tensor.reduce(reduce_key, x, axis).transpose(p),
        Tensor.reduce(reduce_key, x.transpose(p), new_axis),
        index_below(p.length(), new_axis),
        eq(p[new_axis]).to(axis),
    )


@transpose.register
def _transpose_and_slice():
    start, size, inverse = var("start", Vec[i64]), var("size", Vec[i64]), var("inverse", Vec[i64])
    # An inverse pair: saturation still ends because each law only rebuilds what the other started from.
    # transpose-through-slice on transpose(slice(x, s, z), p) adds slice(transpose(x, p), s∘p, z∘p), and
    # slice-through-transpose on that adds transpose(slice(x, (s∘p)∘p⁻¹, (z∘p)∘p⁻¹), p) = the term it came from,
    # so a pair adds at most one slice and one transpose per term it starts from, and creates no new box or perm.
    # transpose(slice(x, start, size), p) == slice(transpose(x, p), start∘p, size∘p), where (v∘p)[i] = v[p[i]]
    yield law(
        "transpose-through-slice",
        x.slice(start, size).transpose(p),
        x.transpose(p).slice(p.map(start.__getitem__), p.map(size.__getitem__)),
        *same_length(p, start),
        *same_length(p, size),
    )
    # slice(transpose(x, p), start, size) == transpose(slice(x, start∘p⁻¹, size∘p⁻¹), p), rank 1..MAX_RANK
    #   (start'[p[i]] = start[i]: the box of transpose(x, p) as a box of x)
    yield law(
        "slice-through-transpose",
        x.transpose(p).slice(start, size),
        x.slice(inverse.map(start.__getitem__), inverse.map(size.__getitem__)).transpose(p),
        i64(0) < p.length(),
        p.length() <= i64(MAX_RANK),
        *same_length(p, start),
        *same_length(p, size),
        eq(inverse).to(inverse_perm(p, p.length())),
    )


@transpose.register
def _transpose_through_concat():
    inputs, new_axis = var("inputs", Vec[Tensor]), var("new_axis", i64)
    # transpose(concat([a_i], axis), p) == concat([transpose(a_i, p)], j)  where p[j] == axis, for 2..MAX_CONCAT_ARITY inputs
    yield law(
        "transpose-through-concat",
        Tensor.concat(parts, axis).transpose(p),
        Tensor.concat(inputs, new_axis),
        eq(inputs).to(transposed_inputs(parts, p, parts.length())),
        index_below(p.length(), new_axis),
        eq(p[new_axis]).to(axis),
    )
    sources, source_axis = var("sources", Vec[Tensor]), var("source_axis", i64)
    # concat([transpose(a_i, p)], axis) == transpose(concat([a_i], p[axis]), p)
    yield law(
        "transpose-hoist-from-concat",
        Tensor.concat(parts, axis),
        Tensor.concat(sources, source_axis).transpose(p),
        i64(1) < parts.length(),
        eq(sources).to(transposed_sources(parts, p, parts.length())),
        eq(source_axis).to(p[axis]),
    )
