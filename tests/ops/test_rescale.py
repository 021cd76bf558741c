"""RESCALE's reference semantics (the strict evaluator's) and its multiplier/shift helper, checked against executorch's."""

from __future__ import annotations

import math
import random

import pytest
import torch
from executorch.backends.arm.operators.op_tosa_rescale import _compute_multiplier_and_shift
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.ops import RequireViolation
from eqsat.ops.rescale import multiplier_and_shift, reference, scales_of


def executorch_multiplier_and_shift(scale: float) -> tuple[int, int] | None:
    """What the Arm serializer writes for scale (scale32), or None where it refuses."""
    try:
        multipliers, shifts = _compute_multiplier_and_shift([scale], 32)
    except (AssertionError, ValueError, OverflowError):
        return None
    return multipliers[0], shifts[0]


def test_the_multiplier_and_shift_are_executorchs_over_many_random_scales():
    rng = random.Random(0)
    scales = [math.ldexp(rng.uniform(0.5, 1.0), rng.randint(-80, 40)) for _ in range(20000)]
    scales += [rng.uniform(-2.0, 2.0) for _ in range(2000)]
    scales += [0.0, -0.0, 1.0, 0.5, 2.0**30, 2.0**29, 2.0**-32, 2.0**-70, 5e-324, 1 - 2.0**-53, math.inf, -math.inf, math.nan]
    refused = 0
    for scale in scales:
        expected = executorch_multiplier_and_shift(scale)
        assert multiplier_and_shift(scale) == expected, scale
        refused += expected is None
    assert 0 < refused < len(scales) / 2  # both branches are exercised


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True))
def test_the_multiplier_and_shift_are_executorchs_on_any_float(scale):
    assert multiplier_and_shift(scale) == executorch_multiplier_and_shift(scale)


def test_the_scales_of_a_multiplier_and_shift_serialize_back_to_them():
    rng = random.Random(1)
    for _ in range(2000):
        exact = multiplier_and_shift(math.ldexp(rng.uniform(0.5, 1.0), rng.randint(-60, 28)))
        assert exact is not None and multiplier_and_shift(scales_of((exact[0],), (exact[1],))[0]) == exact


def test_rescale_rounds_half_up_and_saturates_as_tosa_specifies():
    x = torch.tensor([3, -3, 5, 127, -128], dtype=torch.int8)
    assert reference(x, torch.int8, [0.5], 0, 0).tolist() == [2, -1, 3, 64, -64]
    assert reference(x, torch.int8, [2.0], 1, -10).tolist() == [-6, -18, -2, 127, -128]
    assert multiplier_and_shift(0.5) == (1 << 30, 31)


def test_rescale_to_int32_keeps_the_full_product():
    x = torch.tensor([127, -128], dtype=torch.int8)
    assert reference(x, torch.int32, [1.5], -128, 0).tolist() == [383, 0]


def test_rescale_per_channel_scales_the_last_dim():
    x = torch.tensor([[10, 10], [-10, -10]], dtype=torch.int8)
    assert reference(x, torch.int8, [0.5, 2.0], 0, 0).tolist() == [[5, 20], [-5, -20]]


def test_rescale_accepts_the_edges_of_the_required_value_range():
    """scale 2^20 is multiplier 2^30, shift 10: REQUIRE -2^9 <= x - in_zp < 2^9."""
    assert multiplier_and_shift(2.0**20) == (1 << 30, 10)
    x = torch.tensor([-512, 511], dtype=torch.int32)
    assert reference(x, torch.int32, [2.0**20], 0, 0).tolist() == [-512 * 2**20, 511 * 2**20]


@pytest.mark.parametrize(
    "dtype, value, in_zp, scale",
    [(torch.int32, 512, 0, 2.0**20), (torch.int32, -513, 0, 2.0**20), (torch.int8, 100, -28, 2.0**23), (torch.int8, -65, 0, 2.0**23)],
)
def test_rescale_rejects_a_value_outside_the_required_range(dtype, value, in_zp, scale):
    """2^20 has shift 10, 2^23 shift 7: REQUIRE -2^(shift-1) <= x - in_zp < 2^(shift-1)."""
    with pytest.raises(RequireViolation, match="value"):
        reference(torch.tensor([value], dtype=dtype), torch.int32, [scale], in_zp, 0)


def test_rescale_rejects_a_scale_without_a_legal_shift():
    """2^30 would need shift 0: REQUIRE 2 <= shift <= 62; the serializer refuses it."""
    assert multiplier_and_shift(2.0**30) is None
    with pytest.raises(RequireViolation, match="scale"):
        reference(torch.tensor([1], dtype=torch.int32), torch.int32, [2.0**30], 0, 0)


@pytest.mark.parametrize("source, dest, in_zp, out_zp", [(torch.int16, torch.int8, 5, 0), (torch.int32, torch.int8, 3, 0), (torch.int8, torch.int32, 0, 1)])
def test_rescale_rejects_a_zero_point_on_a_tensor_wider_than_int8(source, dest, in_zp, out_zp):
    with pytest.raises(RequireViolation, match="ERROR_IF"):
        reference(torch.zeros(2, dtype=source), dest, [0.5], in_zp, out_zp)


def test_rescale_requires_one_scale_per_index_of_the_last_dim():
    x = torch.tensor([[4, 4, 4], [-4, 32767, -32768]], dtype=torch.int16)
    assert reference(x, torch.int16, [0.5, 1.0, 2.0], 0, 0).tolist() == [[2, 4, 8], [-2, 32767, -32768]]
    with pytest.raises(RequireViolation, match="per-channel"):
        reference(x, torch.int16, [1.0, 1.0], 0, 0)
