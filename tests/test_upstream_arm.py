"""Upstream's Arm backend tests, from the installed ExecuTorch wheel, end the same with eqsat installed as
without (benchmarks.upstream_tests: the selection, and how the two runs are made; its results page is
benchmarks/results/upstream_tests.md). Slow: two pytest runs of about 45 upstream tests each, side by side (the 21 of the data-movement files took 12.7 min on 2 shared cores)."""

import pytest

from benchmarks import upstream_tests


@pytest.mark.slow
def test_upstream_arm_tests_end_the_same_with_eqsat_installed():
    result = upstream_tests.compare(cases=1)
    assert len(result["plain"]) == len(result["eqsat"]) == len(result["tests"]) > 0
    differing = {
        test: (outcome, result["eqsat"].get(test))
        for test, outcome in result["plain"].items()
        if result["eqsat"].get(test) != outcome
    }
    assert not differing, differing
