"""Domain errors are ValueError (bad input) or eqsat.EqsatError (the optimizer got something wrong), never
AssertionError: `python -O` cannot strip them, and a caller's `except ValueError` or `except EqsatError` sees them."""

from __future__ import annotations

import pytest
import torch

from eqsat import EqsatError, fuzz
from eqsat.ops import RequireViolation
from eqsat.ops.rescale import reference


def test_a_violated_require_is_a_value_error():
    """2^30 would need shift 0: REQUIRE 2 <= shift <= 62."""
    with pytest.raises(ValueError, match="REQUIRE") as raised:
        reference(torch.tensor([1], dtype=torch.int32), torch.int32, [2.0**30], 0, 0)
    assert isinstance(raised.value, RequireViolation) and not isinstance(raised.value, AssertionError)


def test_a_fuzz_failure_is_an_eqsat_error():
    assert issubclass(fuzz.FuzzFailure, EqsatError) and not issubclass(fuzz.FuzzFailure, AssertionError)
