"""The rank-5/6 permute/view fuzz cases of the Arm backend's own tests, priced in the order Vela puts them.

executorch's `backends/arm/test/misc/test_high_rank_permute_view_invariants.py` builds ten chains of permutes and
views behind a convolution. On both targets eqsat must never make one slower under Vela, and whenever it changes
one, the sign of the predicted change must be Vela's. The fast test runs the transposes of
`high_rank_permute_fuzz_case_1` alone, as a hand-built TOSA graph: before Vela's reshape canonicalisation was
priced (`eqsat.extract.layers.transposes_as_vela_runs_them`), eqsat predicted it 85% cheaper on Ethos-U85, and
Vela said 16.6% dearer. The slow test lowers every case of the module on both targets.
"""

from __future__ import annotations

import pytest
import tosa_serializer as ts

from eqsat import bridge_tosa, vela
from eqsat.calibration.graphs import _attr, _clamp, _Graph
from eqsat.pipeline import optimize

TARGETS = ["ethos-u55-128", "ethos-u85-256"]


def fuzz_case_1_transposes() -> bytes:
    """high_rank_permute_fuzz_case_1 behind its convolution: (1, 16, 16, 64) viewed as (16, 16, 4, 16, 1) and
    permuted by (2, 1, 3, 0, 4), what the Arm backend emits for its chain of permutes and views."""
    g = _Graph()
    x = _clamp(g, "pre", g.input([1, 16, 16, 64], "int8"), [1, 16, 16, 64], "int8")
    r = g.op("r", ts.Op.RESHAPE, [x, g.shape_const([16, 16, 4, 16, 1])], [16, 16, 4, 16, 1], "int8", _attr("ReshapeAttribute"))
    g.output(g.op("t", ts.Op.TRANSPOSE, [r], [4, 16, 16, 16, 1], "int8", _attr("TransposeAttribute", [2, 1, 3, 0, 4])))
    return g.tosa.serialize()


def _sign(before: float, after: float) -> int:
    return (after > before) - (after < before)


@pytest.mark.parametrize("target", TARGETS)
def test_the_transposes_of_fuzz_case_1_are_never_made_slower_and_are_priced_in_vela_order(target):
    data = fuzz_case_1_transposes()
    graph_module, parsed = bridge_tosa.read_flatbuffer(data)
    optimized, report = optimize(graph_module, target)
    assert report.fallback is None
    before = vela.estimate(data, target).cycles_total
    after = vela.estimate(bridge_tosa.write_flatbuffer(optimized, parsed), target).cycles_total if report.changed else before
    assert after <= before
    if report.changed:
        assert _sign(report.cost_before, report.cost_after) == _sign(before, after), (report.cost_before, report.cost_after, before, after)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(10))
def test_no_high_rank_permute_view_case_of_the_arm_backend_is_made_slower(case, target):
    """Each case lowered without and with eqsat (benchmarks.high_rank_permutes): never slower under Vela, bit-exact,
    and the predicted change has Vela's sign whenever eqsat changed the graph."""
    from benchmarks.high_rank_permutes import measure_case
    from eqsat.bench import predicted_direction_agrees

    comparison = measure_case(case, target)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_total <= comparison.stock.cycles_total
    assert predicted_direction_agrees(comparison.as_dict()) is not False
