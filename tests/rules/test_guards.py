"""eqsat.rules.guards: each named side condition holds exactly where it should."""

from __future__ import annotations

from egglog import EGraph, Vec, i64

from eqsat.rules.guards import is_identity_perm, is_zeros, table_operand_is_not_batched_mac_shape, within_one_input


def holds(facts) -> bool:
    return EGraph().check_bool(*facts)


def ints(*values: int) -> Vec[i64]:
    return Vec(*[i64(v) for v in values])


def test_is_identity_perm():
    assert holds(is_identity_perm(ints(0, 1, 2)))
    assert not holds(is_identity_perm(ints(0, 2, 1)))


def test_is_zeros():
    assert holds(is_zeros(ints(0, 0, 0)))
    assert not holds(is_zeros(ints(0, 1, 0)))


def test_within_one_input():
    # [begin, begin + length) inside [offset, offset + extent)
    assert holds(within_one_input(i64(3), i64(2), i64(2), i64(4)))
    assert not holds(within_one_input(i64(1), i64(2), i64(2), i64(4)))
    assert not holds(within_one_input(i64(5), i64(2), i64(2), i64(4)))


def test_table_operand_is_not_batched_mac_shape():
    # MLBEDSW-11805: [N, 1, 1, C] with N > 1, and only that, is refused
    assert not holds(table_operand_is_not_batched_mac_shape(ints(2, 1, 1, 8)))
    assert not holds(table_operand_is_not_batched_mac_shape(ints(4, 1, 1, 1)))
    for safe in [(1, 1, 1, 8), (2, 1, 2, 8), (2, 2, 1, 8), (2, 1, 1), (2, 1, 1, 8, 1), (8,)]:
        assert holds(table_operand_is_not_batched_mac_shape(ints(*safe))), safe
    assert holds(table_operand_is_not_batched_mac_shape(Vec[i64]()))  # rank 0
