"""The rule tests run TOSA-dialect FX graphs with the registry's exact reference evaluator (`eqsat.ops.reference`,
the one the fuzzer uses: RESCALE with the TOSA specification's REQUIREs and ERROR_IFs, a violated one raises)."""

from __future__ import annotations

from torch import fx

from eqsat.ops import RequireViolation
from eqsat.ops.reference import evaluate
from tests.graphs import random_inputs


def is_legal(graph_module: fx.GraphModule) -> bool:
    """The graph meets every TOSA REQUIRE and ERROR_IF on the test inputs (generators only draw legal originals)."""
    try:
        for input_seed in range(2):
            evaluate(graph_module, random_inputs(graph_module, input_seed))
    except RequireViolation:
        return False
    return True


def assert_every_extraction_agrees(saturated) -> None:
    """Saturated.assert_every_extraction_agrees: every e-node, TOSA ops run by the reference."""
    saturated.assert_every_extraction_agrees()
