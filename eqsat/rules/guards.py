"""Named side conditions shared by the rules.

Each guard is a list of egglog facts to put in a rule's query. Fallible
arithmetic (vector indexing) lives here, in queries, never in actions: a
failing primitive in a query only means "no match" (DESIGN §3).
"""

from __future__ import annotations

from egglog import Fact, Vec, eq, i64

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
    """operands == [operand]. Queries cannot match inside a Vec, so bind by index."""
    return [eq(operands.length()).to(i64(1)), eq(operand).to(operands[0])]
