"""Domain errors are ValueError (bad input) or eqsat.EqsatError (the optimizer got something wrong), never
AssertionError: `python -O` cannot strip them, and a caller's `except ValueError` or `except EqsatError` sees them
(eqsat.errors)."""

from __future__ import annotations

import pytest
import torch

from eqsat import EqsatError, fuzz, pipeline, soundness, validate
from eqsat.ops import RequireViolation
from eqsat.ops.rescale import reference
from tests.graphs import GraphBuilder


def test_a_violated_require_is_a_value_error():
    """2^30 would need shift 0: REQUIRE 2 <= shift <= 62."""
    with pytest.raises(ValueError, match="REQUIRE") as raised:
        reference(torch.tensor([1], dtype=torch.int32), torch.int32, [2.0**30], 0, 0)
    assert isinstance(raised.value, RequireViolation) and not isinstance(raised.value, AssertionError)


def test_a_fuzz_failure_is_an_eqsat_error():
    assert issubclass(fuzz.FuzzFailure, EqsatError) and not issubclass(fuzz.FuzzFailure, AssertionError)



@pytest.mark.parametrize(
    "error",
    [soundness.Unsound, soundness.LawDidNotFire, validate.NotEquivalentError, pipeline.BudgetExceeded],
    ids=lambda error: error.__name__,
)
def test_what_eqsat_got_wrong_is_an_eqsat_error(error):
    assert issubclass(error, EqsatError) and not issubclass(error, AssertionError)


def test_two_graphs_that_differ_raise_what_except_eqsat_error_catches():
    """neg(x) against x: the check behind every rule's soundness test."""
    graphs = []
    for negate in (True, False):
        g = GraphBuilder()
        x = g.input("x", (2, 3))
        graphs.append(g.output(g.call(torch.ops.aten.neg.default, x) if negate else g.call(torch.ops.aten.clone.default, x)))
    try:
        soundness.assert_bit_identical(*graphs)
    except EqsatError as error:
        assert isinstance(error, soundness.Unsound) and "output 0 differs" in str(error)
    else:
        pytest.fail("neg(x) and x were found bit-identical")
