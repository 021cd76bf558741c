"""Named side conditions shared by the rules.

Each guard is a list of egglog facts to put in a rule's query. Fallible
arithmetic (vector indexing) lives here, in queries, never in actions: a
failing primitive in a query only means "no match" (DESIGN §3).
"""

from __future__ import annotations

from egglog import Fact, UnstableFn, Vec, eq, i64

from eqsat.terms import Tensor

MAX_RANK = 6
"""TOSA's maximum tensor rank."""

MAX_CONCAT_ARITY = 16
"""Concat rules are generated per number of inputs up to this many."""


def is_identity_perm(perm: Vec[i64]) -> list[Fact]:
    """perm == [0, 1, ..., n-1]."""
    return [eq(perm).to(perm.length().range())]


def same_length(a: Vec[i64], b: Vec[i64]) -> list[Fact]:
    return [eq(a.length()).to(b.length())]


def single_operand(operands: Vec[Tensor], operand: Tensor) -> list[Fact]:
    """operands == [operand]. Queries cannot match inside a Vec, so bind through `element`."""
    return [eq(operands.length()).to(i64(1)), eq(operand).to(Tensor.element(operands, i64(0)))]


def zeros_like(v: Vec[i64]) -> Vec[i64]:
    """[0, ..., 0] as long as v (an expression for queries: 0 * each element)."""
    return v.map(UnstableFn[i64, i64](i64.__mul__, i64(0)))


def is_zeros(v: Vec[i64]) -> list[Fact]:
    """v == [0, ..., 0]."""
    return [eq(v).to(zeros_like(v))]


def selects_whole_input(start: Vec[i64], size: Vec[i64], axis: i64, offset: i64, input_shape: Vec[i64]) -> list[Fact]:
    """The box (start, size) of a concat along axis is exactly the input at offset, whose shape is input_shape."""
    return [eq(size).to(input_shape), eq(start).to(zeros_like(size).set(axis, offset))]


def within_one_input(begin: i64, length: i64, offset: i64, extent: i64) -> list[Fact]:
    """[begin, begin + length) lies inside the input [offset, offset + extent) of a concat."""
    return [offset <= begin, begin + length <= offset + extent]


def starts_inside(begin: i64, offset: i64, extent: i64) -> list[Fact]:
    """begin is an element of the input [offset, offset + extent) (so the input is not empty)."""
    return [offset <= begin, begin < offset + extent]


def ends_inside(end: i64, offset: i64, extent: i64) -> list[Fact]:
    """The last element end - 1 is in the input [offset, offset + extent)."""
    return [offset < end, end <= offset + extent]


def adjacent_along(axis: i64, start_a: Vec[i64], size_a: Vec[i64], start_b: Vec[i64], size_b: Vec[i64]) -> list[Fact]:
    """Box b starts where box a ends along axis, and the two boxes are the same on every other dim."""
    return [
        eq(start_b).to(start_a.set(axis, start_a[axis] + size_a[axis])),
        eq(size_b.set(axis, size_a[axis])).to(size_a),
    ]


def ends_after(end: i64, offset: i64, extent: i64) -> list[Fact]:
    """A box ending at end reaches past the input [offset, offset + extent) of a concat."""
    return [offset + extent < end]


def two_operands(operands: Vec[Tensor], left: Tensor, right: Tensor) -> list[Fact]:
    """operands == [left, right], bound through the `element` handles (a join, not a vec-get filter)."""
    return [
        eq(operands.length()).to(i64(2)),
        eq(left).to(Tensor.element(operands, i64(0))),
        eq(right).to(Tensor.element(operands, i64(1))),
    ]
