"""Transposes through view reshapes: a chain of transposes and reshapes composed at a finer shape, and refactored.

A reshape that only splits or merges dims is a view: the data does not move. A
transpose next to such a reshape is a transpose of the finer of the two
shapes, with each dim of the coarser shape a run of adjacent fine dims. So a
chain transpose, reshape, transpose, reshape, ... (a MobileViT patch unfold or
fold) is one transpose at the finest common shape: split the dims on either
side of each reshape wherever the other side has a boundary inside them, and
transpose-compose meets the transposes. transpose-rank then merges back the
dims that stay adjacent, and transpose-peel-leading-dim offers a rank-5 or
rank-6 permutation that keeps its innermost axis as two transposes (the first
moves one dim to the front, the second permutes the rest below it), which Vela
may run in far fewer passes. Which rank, which innermost axis and how many
transposes: the cost model picks.

Laws:
- transpose-split-dim-at-source-boundary: a transpose of reshape(x, s) is a
  transpose of s with one dim split in two, where shape(x) has a boundary (a
  prefix product) strictly inside that dim of s.
- reshape-split-transposed-dim-at-target-boundary: reshape(transpose(x, p), s)
  reads the transpose with one output dim split in two, where s has a boundary
  strictly inside that dim; the split is made on x's dim.
- transpose-peel-leading-dim: transpose(x, p) == transpose(transpose(x, q),
  p') where q moves the dim p[0] to the front and p' keeps dim 0 in place.

Bounds: the split laws fire only in a transpose, reshape, transpose window
(the chains whose transposes can meet) whose shapes around the reshape have no
unit dim (transpose-drop-unit-dim gives each window such a form, so a window
is not split once per placement of its unit dims), and each at one boundary: the
smallest, `first_inner_boundary` of the analysis. So the splits of a window
form one sequence, coarse to fine, not every subset of its boundaries; each
adds a transpose of rank one more than the one it matched, only up to
MAX_RANK, and only at boundaries that a shape in the window already has. Each
split law joins the matched window with its two shapes, their
`first_inner_boundary` (computed once per pair of shapes by the analysis), one
`index_below` enumeration (at most MAX_RANK rows that match) and
`prefix_product` lookups keyed on those shapes, so a round's work grows with
the windows, never with pairs of them. Peeling matches one transpose of rank
>= 5 that keeps its innermost axis, and builds two; the inner one (one dim
moved to the front) and the outer one (dim 0 fixed) are never peeled again,
and transpose-compose maps every product back to a permutation of the same
operand, of which a rank r has r!.
"""

from __future__ import annotations

from egglog import UnstableFn, Vec, eq, i64, ne, ruleset, var

from eqsat.ir import MAX_RANK
from eqsat.rules._law import law
from eqsat.rules.analysis import first_inner_boundary, index_below, split_inside
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
p, s = var("p", Vec[i64]), var("s", Vec[i64])

transpose_view = ruleset(name="transpose-view")


def shifted(values: Vec[i64], offset: i64, count: i64) -> Vec[i64]:
    """[values[offset], ..., values[offset + count - 1]]. An expression for queries."""
    return count.range().map(UnstableFn[i64, i64](i64.__add__, offset)).map(values.__getitem__)


def inserted(values: Vec[i64], position: i64, value: i64) -> Vec[i64]:
    """values with value inserted before index position. An expression for queries."""
    return position.range().map(values.__getitem__).push(value).append(shifted(values, position, values.length() - position))


def split_dim(dims: Vec[i64], dim: i64, outer: i64) -> Vec[i64]:
    """dims with dims[dim] split into (outer, dims[dim] / outer). An expression for queries."""
    return inserted(dims.set(dim, outer), dim + 1, dims[dim] / outer)


def split_perm(perm: Vec[i64], position: i64, dim: i64) -> Vec[i64]:
    """perm for the input with dim `dim` (output position `position`) split in two: input dims above `dim`
    renumbered up by one, and dim + 1 right after dim. An expression for queries."""
    rank = perm.length()
    renumbered = (dim + 1).range().append((rank - dim - 1).range().map(UnstableFn[i64, i64](i64.__add__, dim + 2)))
    return inserted(perm.map(renumbered.__getitem__), position + 1, dim + 1)


@transpose_view.register
def _splits_at_view_boundaries():
    source, split, out = var("source", Vec[i64]), var("split", Vec[i64]), var("out", Vec[i64])
    k, i, outer, boundary = var("k", i64), var("i", i64), var("outer", i64), var("boundary", i64)
    w, q = var("w", Tensor), var("q", Vec[i64])
    # transpose(reshape(x, s), p) == reshape(transpose(reshape(x, s'), p'), s∘p)
    #   where s' is s with dim k split into (a, s[k] / a) at a boundary of shape(x) strictly inside dim k, rank(s) < MAX_RANK,
    #   and p' is p with input dim k read as the adjacent pair (k, k + 1), dims above k renumbered up by one.
    #   Only where x is itself a transpose (transpose, reshape, transpose), the chains whose transposes can meet, and
    #   neither shape has a unit dim (transpose-drop-unit-dim gives every such chain a form without them).
    yield law(
        "transpose-split-dim-at-source-boundary",
        x.reshape(s).transpose(p),
        x.reshape(split).transpose(split_perm(p, i, k)).reshape(out),
        eq(x).to(w.transpose(q)),
        eq(source).to(shape(x)),
        s.not_contains(i64(1)),
        source.not_contains(i64(1)),
        eq(s.length()).to(p.length()),
        s.length() < i64(MAX_RANK),
        eq(boundary).to(first_inner_boundary(s, source)),
        *split_inside(s, k, boundary, outer),
        index_below(p.length(), i),
        eq(p[i]).to(k),
        eq(split).to(split_dim(s, k, outer)),
        eq(out).to(p.map(s.__getitem__)),
    )
    z_shape, transposed = var("z_shape", Vec[i64]), var("transposed", Tensor)
    # reshape(transpose(x, p), s) == reshape(transpose(reshape(x, shape(x)'), p'), s)
    #   where s has a boundary strictly inside output dim i of the transpose, a elements in, rank(x) < MAX_RANK;
    #   shape(x)' is shape(x) with dim p[i] split into (a, shape(x)[p[i]] / a), and p' reads it as that adjacent pair.
    #   Only where a transpose reads the reshape (transpose, reshape, transpose), the chains whose transposes can meet,
    #   and neither shape has a unit dim (transpose-drop-unit-dim gives every such chain a form without them).
    yield law(
        "reshape-split-transposed-dim-at-target-boundary",
        transposed.reshape(s),
        x.reshape(split).transpose(split_perm(p, i, k)).reshape(s),
        eq(w).to(transposed.reshape(s).transpose(q)),
        eq(transposed).to(x.transpose(p)),
        eq(z_shape).to(shape(x)),
        eq(out).to(shape(transposed)),
        s.not_contains(i64(1)),
        out.not_contains(i64(1)),
        z_shape.length() < i64(MAX_RANK),
        eq(boundary).to(first_inner_boundary(out, s)),
        *split_inside(out, i, boundary, outer),
        eq(k).to(p[i]),
        eq(split).to(split_dim(z_shape, k, outer)),
    )


@transpose_view.register
def _transpose_factoring():
    front, rest = var("front", Vec[i64]), var("rest", Vec[i64])
    lead = var("lead", i64)
    # transpose(x, p) == transpose(transpose(x, q), p')  for p[0] != 0, where q == [p[0], 0, ..., p[0] - 1, p[0] + 1, ...]
    #   moves dim p[0] to the front and p' == [0, q⁻¹[p[1]], q⁻¹[p[2]], ...] keeps it there; not when p == q.
    #   Only for rank >= 5 with the innermost axis in place: the transposes Vela decomposes into the most passes
    #   (a composed unfold or fold is one), peeled into factors that keep the innermost axis too.
    yield law(
        "transpose-peel-leading-dim",
        x.transpose(p),
        x.transpose(front).transpose(rest),
        i64(5) <= p.length(),
        eq(p[p.length() - 1]).to(p.length() - 1),
        eq(lead).to(p[0]),
        ne(lead).to(i64(0)),
        eq(front).to(inserted(p.length().range().remove(lead), i64(0), lead)),
        ne(front).to(p),
        eq(rest).to(p.map(front_position(lead, p.length()).__getitem__)),
    )


def front_position(lead: i64, rank: i64) -> Vec[i64]:
    """Entry d is where input dim d ends up once dim `lead` moved to the front: d + 1 below lead, 0 for lead, d above.
    An expression for queries."""
    return lead.range().map(UnstableFn[i64, i64](i64.__add__, i64(1))).push(i64(0)).append(shifted(rank.range(), lead + 1, rank - lead - 1))
