"""Slice pushdown: move a SLICE towards the inputs, through elementwise ops, TABLE and reshapes,
and into a PAD when the slice reads none of the padding.

Motivation: a slice that reaches a concat can select a single input and make
the others dead (DESIGN §1: CONCAT -> RESHAPE -> TRANSPOSE -> SLICE). Each law
moves a slice one op closer to the inputs, and never back, so saturation
terminates; the ops it moves past then compute only the sliced elements.

Not covered: a reshape whose box is a partial row of the input's leading
merged dim, or a slice that cuts more than one dim of a reshape's output;
binary ops that broadcast. A slice of a transpose moves with the transpose
laws (eqsat/rules/transpose.py: slice-through-transpose sits there with its
inverse, transpose-through-slice).

Bounds: each rule joins the matched slice with its operand (and at most two
operand elements keyed on (operands, i), or the prefix products of two shapes),
keyed on the matched term. slice-through-reshape joins the two shapes' prefix
products only on the dims that line up (at most one row per dim of each), and
reads every other product through arithmetic on them: lookups of two shapes'
element counts joined on their value made it most of a saturation's time.
"""

from __future__ import annotations

from egglog import Fact, String, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import prefix_product
from eqsat.ir import MAX_RANK
from eqsat.rules.guards import inside_unpadded, single_operand, table_operand_is_not_batched_mac_shape, two_operands, unpadded_start, zeros_like
from eqsat.terms import Tensor, shape

x, a, b = var("x", Tensor), var("a", Tensor), var("b", Tensor)
start, size, s = (var(n, Vec[i64]) for n in ("start", "size", "s"))
key = var("key", String)
operands = var("operands", Vec[Tensor])

slice_pushdown = ruleset(name="slice-pushdown")


def cuts_only_dim(box_start: Vec[i64], box_size: Vec[i64], full: Vec[i64], dim: i64) -> list[Fact]:
    """The box (box_start, box_size) of a tensor of shape full is the whole tensor except along dim."""
    return [eq(box_start).to(zeros_like(full).set(dim, box_start[dim])), eq(box_size).to(full.set(dim, box_size[dim]))]


@slice_pushdown.register
def _slice_through_elementwise():
    # slice(f(x), start, size) == f(slice(x, start, size))  for a unary elementwise f
    yield law(
        "slice-through-unary",
        Tensor.elementwise(key, operands).slice(start, size),
        Tensor.elementwise(key, Vec(x.slice(start, size))),
        *single_operand(operands, x),
    )
    # slice(f(a, b), box) == f(slice(a, box), slice(b, box))  when shape(a) == shape(b) (no broadcast)
    yield law(
        "slice-through-binary",
        Tensor.elementwise(key, operands).slice(start, size),
        Tensor.elementwise(key, Vec(a.slice(start, size), b.slice(start, size))),
        *two_operands(operands, a, b),
        eq(shape(a)).to(shape(b)),
    )


@slice_pushdown.register
def _slice_through_table_and_pad():
    lut, padding, dims, inner_start = var("lut", Tensor), var("padding", Vec[i64]), var("dims", Vec[i64]), var("inner_start", Vec[i64])
    value = var("value", i64)
    # slice(table(k, x, lut), start, size) == table(k, slice(x, start, size), lut)  (TABLE is elementwise in x) unless size is [N,1,1,C], N > 1
    yield law(
        "slice-through-table",
        Tensor.table(key, x, lut).slice(start, size),
        Tensor.table(key, x.slice(start, size), lut),
        *table_operand_is_not_batched_mac_shape(size),
    )
    for rank in range(1, MAX_RANK + 1):
        # slice(pad(x, padding, v), start, size) == slice(x, start - before, size)  when the box reads no padding:
        #   before[i] <= start[i] and start[i] + size[i] <= before[i] + shape(x)[i] on every dim i
        yield law(
            f"slice-inside-pad-{rank}",
            x.pad(padding, value).slice(start, size),
            x.slice(inner_start, size),
            eq(dims).to(shape(x)),
            *inside_unpadded(start, size, padding, dims, rank),
            eq(inner_start).to(unpadded_start(start, padding, rank)),
        )


@slice_pushdown.register
def _slice_through_reshape():
    dims, source_start, source_size = (var(n, Vec[i64]) for n in ("dims", "source_start", "source_size"))
    k, l, outer, total, inner, source_inner, begin, extent = (
        var(n, i64) for n in ("k", "l", "outer", "total", "inner", "source_inner", "begin", "extent")
    )
    # slice(reshape(x, s), start, size) == reshape(slice(x, start', size'), size)
    #   when the box cuts only dim k of s, and dim l of x = shape(x) lines up with it: the dims before
    #   them hold the same number of elements, outer = prod(s[:k]) == prod(x[:l]), and the cut, in
    #   elements, begin = start[k] * prod(s[k+1:]) and extent = size[k] * prod(s[k+1:]), falls on whole
    #   rows of x's dim l: both are multiples of source_inner = prod(x[l+1:]). Then for each of the
    #   outer blocks both boxes select the same contiguous run of elements, in the same order, and
    #   start' = [0..] with start'[l] = begin / source_inner, size' = x with size'[l] = extent / source_inner.
    #   The products after the dims are read as total / (outer * s[k]) and total / (outer * x[l]), with total
    #   = prod(s) = prod(x) (a reshape keeps the element count): one lookup, not two joined on their value.
    #   This covers reshapes that insert or remove size-1 dims and cuts of whole rows of merged dims.
    yield law(
        "slice-through-reshape",
        x.reshape(s).slice(start, size),
        x.slice(source_start, source_size).reshape(size),
        eq(dims).to(shape(x)),
        eq(outer).to(prefix_product(s, k)),
        k < s.length(),
        *cuts_only_dim(start, size, s, k),
        eq(outer).to(prefix_product(dims, l)),
        l < dims.length(),
        eq(total).to(prefix_product(s, s.length())),
        eq(inner).to(total / (outer * s[k])),
        eq(source_inner).to(total / (outer * dims[l])),
        eq(begin).to(start[k] * inner),
        eq(extent).to(size[k] * inner),
        eq(begin % source_inner).to(i64(0)),
        eq(extent % source_inner).to(i64(0)),
        eq(source_start).to(zeros_like(dims).set(l, begin / source_inner)),
        eq(source_size).to(dims.set(l, extent / source_inner)),
    )
