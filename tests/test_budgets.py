"""Saturation budgets: each limit stops a graph built to blow up, and the best graph found so far comes back."""

from __future__ import annotations

import logging
import random

import pytest
import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext

import eqsat
from eqsat import bridge_fx, fuzz, rules
from eqsat.extract.egraph_view import EGraphView
from eqsat.fuzz import GraphSpec, Step

CHAIN_SHAPE = (1, 2, 1, 3, 1, 2)


def transpose_reshape_chain(length: int, seed: int = 0) -> GraphSpec:
    """Alternating rank-6 transposes and reshapes over unit dims: nearly every transpose and reshape law applies
    everywhere, and unbudgeted saturation takes 10 iterations and ~7,000 e-nodes at length 40."""
    rng = random.Random(seed)
    steps, shape = [], CHAIN_SHAPE
    for i in range(length):
        if i % 2 == 0:
            perm = rng.sample(range(6), 6)
            steps.append(Step("transpose", (i,), (tuple(perm),)))
            shape = tuple(shape[p] for p in perm)
        else:
            shape = tuple(rng.sample(shape, 6))
            steps.append(Step("reshape", (i,), (shape,)))
    return GraphSpec((CHAIN_SHAPE,), tuple(steps), (length,))


CHAIN = transpose_reshape_chain(40)


def optimize_chain(**options):
    original = CHAIN.build()
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        optimized, report = eqsat.optimize(original, **options)
    return original, optimized, report


def assert_bit_exact(original, optimized):
    for seed in range(2):
        inputs = fuzz.random_int8_inputs(original, seed)
        for want, got in zip(fuzz.evaluate(original, inputs), fuzz.evaluate(optimized, inputs), strict=True):
            assert want.shape == got.shape and torch.equal(want, got)


def test_iteration_limit_stops_saturation_and_the_best_graph_found_comes_back(caplog):
    with caplog.at_level(logging.INFO, logger="eqsat"):
        original, optimized, report = optimize_chain(iteration_limit=2)
    assert report.iterations == 2 and report.stop_reason == "iteration limit"
    assert "stopped at the iteration limit after 2 iteration(s)" in caplog.text
    assert report.changed and report.fallback is None and report.cost_after < report.cost_before
    assert_bit_exact(original, optimized)


E_NODE_LIMIT = 1_000


def test_enode_limit_stops_saturation_and_bounds_the_egraph():
    original, optimized, report = optimize_chain(enode_limit=E_NODE_LIMIT)
    assert report.stop_reason == "e-node limit" and report.iterations < 10
    # The limit is checked between iterations; one iteration overshoots it by less than the limit again.
    assert report.egraph_enodes < 2 * E_NODE_LIMIT
    assert report.changed and report.cost_after < report.cost_before
    assert_bit_exact(original, optimized)


class SteppingClock:
    """A monotonic clock that advances one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_time_limit_is_checked_between_iterations(monkeypatch):
    monkeypatch.setattr(rules, "time", SteppingClock())
    original, optimized, report = optimize_chain(time_limit=2.5)
    assert report.iterations == 2 and report.stop_reason == "time limit"
    assert report.changed and report.fallback is None
    assert_bit_exact(original, optimized)


def test_a_run_within_budget_says_saturated(caplog):
    short = transpose_reshape_chain(4)
    with caplog.at_level(logging.INFO, logger="eqsat"), TosaLoweringContext(fuzz.TOSA_SPEC):
        _, report = eqsat.optimize(short.build())
    assert report.stop_reason == "saturated" and report.iterations < 30
    assert "stopped at" not in caplog.text


@pytest.mark.parametrize("limit", ["iteration_limit", "enode_limit", "time_limit"])
def test_a_zero_budget_runs_no_rewrites_and_keeps_the_graph(limit, monkeypatch):
    monkeypatch.setattr(rules, "time", SteppingClock())
    original, optimized, report = optimize_chain(**{limit: 0})
    assert report.iterations == 0 and report.rules_fired == {}
    assert report.stop_reason == limit.replace("enode", "e-node").replace("_", " ")
    assert optimized is original and not report.changed


@pytest.mark.parametrize("iterations", [1, 2])
def test_a_budget_stop_still_types_every_eclass_for_the_cost_model(iterations):
    # The cost model prices a term by the shapes of its e-class and operands; terms of the last
    # iteration must not go untyped (an untyped transpose looked almost free and skipped U55 checks).
    loaded = bridge_fx.to_egraph(CHAIN.build())
    result = rules.saturate(loaded.egraph, rules.Budget(iterations=iterations))
    assert result.stop_reason == "iteration limit"
    view = EGraphView.of(loaded.egraph, len(loaded.nodes))
    rewritten = [c for c, terms in view.candidates.items() if any(t.op != "Opaque" for t in terms)]
    assert len(rewritten) > 40 and [c for c in rewritten if c not in view.types] == []
