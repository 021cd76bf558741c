"""Reshapes through concats: a reshape of a concat is a concat of reshapes, along the remapped axis.

Motivation: the Arm backend lowers each Conv1d as a view 3-D -> 4-D, a
CONV2D and a view 4-D -> 3-D, and a dense (DenseNet-style) conv1d stack
concatenates in 3-D, so every reshape next to a concat is a memory copy in
Vela. Moving the 3-D -> 4-D reshape of a concat into its inputs lets it meet
each input's 4-D -> 3-D reshape and cancel (reshape-reshape,
reshape-identity), so the concat runs on the convolutions' 4-D outputs.

The law holds whenever the reshape keeps the concat's axis as one dim with
the same elements before it: viewing the concat as (P, n, Q) with P the
product of the dims before the axis and n its extent, a reshape to s with
prod(s[:j]) == P and s[j] == n views every input as (P, n_i, Q) too.

Bounds: the law is generated per number of inputs (up to MAX_CONCAT_ARITY)
and joins the matched reshape with its concat's inputs keyed on the concat
(`bound_parts`) and their shapes, so no rule joins terms that only share
parameters (DESIGN §3). The new concat has no reshape around it, so the law
does not match its own output; a reshape that already reads a concat of
reshapes builds reshapes of reshapes, which reshape-reshape collapses into
shapes the e-graph already has.
"""

from __future__ import annotations

from egglog import Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import prefix_product
from eqsat.rules.guards import MAX_CONCAT_ARITY
from eqsat.rules.transpose import bound_parts
from eqsat.terms import Tensor, shape

parts = var("parts", Vec[Tensor])
s, dims = var("s", Vec[i64]), var("dims", Vec[i64])
axis, new_axis, before = var("axis", i64), var("new_axis", i64), var("before", i64)

reshape_concat = ruleset(name="reshape-concat")


@reshape_concat.register
def _reshape_through_concat():
    for arity in range(2, MAX_CONCAT_ARITY + 1):
        items, binds = bound_parts(parts, arity, "part")
        extents = [var(f"extent{i}", i64) for i in range(arity)]
        # reshape(concat([a_i], axis), s) == concat([reshape(a_i, s with dim j = shape(a_i)[axis])], j)
        #   where prod(s[:j]) == prod(shape[:axis]) and s[j] == shape[axis]: the axis stays one dim, with as many elements before it
        yield law(
            f"reshape-through-concat-{arity}",
            Tensor.concat(parts, axis).reshape(s),
            Tensor.concat(Vec(*[item.reshape(s.set(new_axis, extent)) for item, extent in zip(items, extents)]), new_axis),
            eq(dims).to(shape(Tensor.concat(parts, axis))),
            axis < dims.length(),
            eq(before).to(prefix_product(dims, axis)),
            eq(before).to(prefix_product(s, new_axis)),
            new_axis < s.length(),
            eq(s[new_axis]).to(dims[axis]),
            *binds,
            *[eq(extent).to(shape(item)[axis]) for item, extent in zip(items, extents)],
        )
