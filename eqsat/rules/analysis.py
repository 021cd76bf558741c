"""The analysis: static shapes and dtypes of the terms the rewrites create.

Loaded terms get their shape and dtype from the FX meta (the bridge sets them).
These rules derive them for new terms. They add no tensor terms, so they are
saturated apart from the rewrites (STYLE §egglog-python).
"""

from __future__ import annotations

from egglog import String, Vec, eq, i64, rule, ruleset, set_, var

from eqsat.rules.guards import MAX_CONCAT_ARITY
from eqsat.terms import Tensor, dtype, shape

x, t = var("x", Tensor), var("t", Tensor)
parts = var("parts", Vec[Tensor])
perm, start, size, new_shape, dims = (var(n, Vec[i64]) for n in ("perm", "start", "size", "new_shape", "dims"))
axis = var("axis", i64)
element_type = var("element_type", String)

analysis = ruleset(name="analysis")


@analysis.register
def _data_movement_shapes():
    # shape(transpose(x, p))[i] == shape(x)[p[i]]
    yield rule(eq(t).to(x.transpose(perm)), eq(dims).to(shape(x)), eq(dims.length()).to(perm.length()), name="shape-transpose").then(
        set_(shape(t)).to(perm.map(dims.__getitem__))
    )
    # shape(slice(x, start, size)) == size
    yield rule(eq(t).to(x.slice(start, size)), name="shape-slice").then(set_(shape(t)).to(size))
    # shape(reshape(x, s)) == s
    yield rule(eq(t).to(x.reshape(new_shape)), name="shape-reshape").then(set_(shape(t)).to(new_shape))


@analysis.register
def _concat_shapes():
    # shape(concat([a0..ak], axis))[axis] == sum shape(ai)[axis]; other dims as a0's
    for arity in range(1, MAX_CONCAT_ARITY + 1):
        items = [var(f"part{i}", Tensor) for i in range(arity)]
        extents = [var(f"extent{i}", i64) for i in range(arity)]
        first_shape = var("first_shape", Vec[i64])
        facts = [eq(t).to(Tensor.concat(parts, axis)), eq(parts.length()).to(i64(arity))]
        facts += [eq(item).to(parts[i]) for i, item in enumerate(items)]
        facts += [eq(first_shape).to(shape(items[0]))]
        facts += [axis < first_shape.length()]
        facts += [eq(extent).to(shape(item)[axis]) for item, extent in zip(items, extents)]
        total = var("total", i64)
        facts += [eq(total).to(sum(extents[1:], extents[0]))]
        yield rule(*facts, name=f"shape-concat-{arity}").then(set_(shape(t)).to(first_shape.set(axis, total)))


@analysis.register
def _data_movement_dtypes():
    # data movement keeps the element type
    yield rule(eq(t).to(x.transpose(perm)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    yield rule(eq(t).to(x.slice(start, size)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    yield rule(eq(t).to(x.reshape(new_shape)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    yield rule(eq(t).to(Tensor.concat(parts, axis)), eq(x).to(parts[0]), eq(element_type).to(dtype(x))).then(
        set_(dtype(t)).to(element_type)
    )
