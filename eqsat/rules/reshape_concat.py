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

Bounds: one rule. It joins the matched reshape with its concat and the
inputs the analysis builds one at a time (`reshaped_inputs`, defined only
where the law's condition holds), so no rule joins one atom per concat
input (DESIGN §3). The new concat has no reshape around it, so the law does
not match its own output; a reshape that already reads a concat of reshapes
builds reshapes of reshapes, which reshape-reshape collapses into shapes the
e-graph already has.
"""

from __future__ import annotations

from egglog import Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import reshaped_inputs
from eqsat.terms import Tensor

parts, inputs = var("parts", Vec[Tensor]), var("inputs", Vec[Tensor])
s = var("s", Vec[i64])
axis, new_axis = var("axis", i64), var("new_axis", i64)

reshape_concat = ruleset(name="reshape-concat")


@reshape_concat.register
def _reshape_through_concat():
    # reshape(concat([a_i], axis), s) == concat([reshape(a_i, s with dim j = shape(a_i)[axis])], j)
    #   where prod(s[:j]) == prod(shape[:axis]) and s[j] == shape[axis]: the axis stays one dim, with as many elements before it
    yield law(
        "reshape-through-concat",
        Tensor.concat(parts, axis).reshape(s),
        Tensor.concat(inputs, new_axis),
        eq(inputs).to(reshaped_inputs(parts, axis, s, new_axis, parts.length())),
    )
