"""Budgets: each limit stops a graph built to blow up (or a stand-in for one), and the best graph found so far
comes back, or the original when a hard limit (time, memory) stopped the pass. No test asserts on time."""

from __future__ import annotations

import gc
import logging
import os
import sys
import time

import pytest
import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext

import eqsat
from benchmarks.scale import synthetic_graph
from eqsat import bridge_fx, fuzz, pipeline, rules
from eqsat.extract.egraph_view import EGraphView
from eqsat.fuzz import GraphSpec, Step
from eqsat.rules import StopReason
from tests.graphs import transpose_reshape_chain

CHAIN = transpose_reshape_chain(40)


def optimize_chain(**options):
    original = CHAIN.build()
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        optimized, report = eqsat.optimize(original, **options)
    return original, optimized, report


def assert_bit_exact(original, optimized):
    for seed in range(2):
        inputs = fuzz.random_full_range_inputs(original, seed)
        for want, got in zip(fuzz.evaluate(original, inputs), fuzz.evaluate(optimized, inputs), strict=True):
            assert want.shape == got.shape and torch.equal(want, got)


def test_iteration_limit_stops_saturation_and_the_best_graph_found_comes_back(caplog):
    with caplog.at_level(logging.INFO, logger="eqsat"):
        original, optimized, report = optimize_chain(iteration_limit=2)
    assert report.iterations == 2 and report.stop_reason == StopReason.ITERATION_LIMIT
    assert "stopped at the iteration limit after 2 iteration(s)" in caplog.text
    assert report.changed and report.fallback is None and report.cost_after < report.cost_before
    assert_bit_exact(original, optimized)


E_NODE_LIMIT = 1_000


def test_enode_limit_stops_saturation_and_bounds_the_egraph():
    original, optimized, report = optimize_chain(enode_limit=E_NODE_LIMIT)
    assert report.stop_reason == StopReason.ENODE_LIMIT and report.iterations < 10
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
    # Saturation gets half of the pass's time limit: 2.5 s of the stepping clock. The first iteration
    # takes 1 s of it and starts at 2 s, so a second, predicted to take at least as long, would end past it.
    monkeypatch.setattr(rules, "time", SteppingClock())
    original, optimized, report = optimize_chain(time_limit=5.0)
    assert report.iterations == 1 and report.stop_reason == StopReason.TIME_LIMIT
    assert report.changed and report.fallback is None
    assert_bit_exact(original, optimized)


def test_a_run_within_budget_says_saturated(caplog):
    short = transpose_reshape_chain(4)
    with caplog.at_level(logging.INFO, logger="eqsat"), TosaLoweringContext(fuzz.TOSA_SPEC):
        _, report = eqsat.optimize(short.build())
    assert report.stop_reason == StopReason.SATURATED and report.iterations < 30
    assert "stopped at" not in caplog.text


@pytest.mark.parametrize(
    "limit, stop_reason",
    [("iteration_limit", StopReason.ITERATION_LIMIT), ("enode_limit", StopReason.ENODE_LIMIT), ("time_limit", StopReason.TIME_LIMIT)],
)
def test_a_zero_budget_runs_no_rewrites_and_keeps_the_graph(limit, stop_reason, monkeypatch):
    monkeypatch.setattr(rules, "time", SteppingClock())
    original, optimized, report = optimize_chain(**{limit: 0})
    assert report.iterations == 0 and set(report.rules_fired) <= {"merge-duplicates"}  # merged at load, no round ran
    assert report.stop_reason == stop_reason
    assert optimized is original and not report.changed


@pytest.mark.parametrize("iterations", [1, 2])
def test_a_budget_stop_still_types_every_eclass_for_the_cost_model(iterations):
    # The cost model prices a term by the shapes of its e-class and operands; terms of the last
    # iteration must not go untyped (an untyped transpose looked almost free and skipped U55 checks).
    loaded = bridge_fx.to_egraph(CHAIN.build())
    result = rules.saturate(loaded.egraph, rules.Budget(iterations=iterations))
    assert result.stop_reason == StopReason.ITERATION_LIMIT
    view = EGraphView.of(loaded.egraph, len(loaded.nodes))
    rewritten = [c for c, terms in view.candidates.items() if any(t.op != "Opaque" for t in terms)]
    assert len(rewritten) > 40 and [c for c in rewritten if c not in view.types] == []


# ---------------------------------------------------------------- hard bounds: the worker process


def test_egglog_starts_no_threads_so_the_pass_can_fork_its_worker():
    # A forked child has only the forking thread; a thread pool started by egglog in the caller
    # (rayon, say) could hold a lock forever in the child. egglog 13.2 starts none; a new egglog must not either.
    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    before = threads()
    loaded = bridge_fx.to_egraph(CHAIN.build())
    rules.saturate(loaded.egraph, rules.Budget(iterations=3))
    EGraphView.of(loaded.egraph, len(loaded.nodes))
    assert threads() == before


def test_a_graph_that_outgrows_the_memory_limit_comes_back_untouched_and_the_caller_survives():
    # 20,000 nodes saturate into about 136k e-nodes in one iteration, which egglog's tables and extraction's
    # Python objects cannot hold in 50 MB: egglog aborts the worker, or extraction raises MemoryError.
    original = synthetic_graph(20000)
    with pytest.warns(RuntimeWarning, match="memory limit"):
        optimized, report = eqsat.optimize(original, memory_limit_mb=50, time_limit=600)
    assert optimized is original and not report.changed
    assert report.stop_reason == StopReason.MEMORY_LIMIT and report.fallback.startswith("BudgetExceeded: memory limit")
    assert os.getpid() == TEST_PROCESS


TEST_PROCESS = os.getpid()


def test_python_running_out_of_memory_in_the_worker_is_the_memory_limit_too(monkeypatch):
    # Extraction holds the e-graph as Python objects: there the cap raises MemoryError instead of aborting.
    real_extract = pipeline.extract

    def greedy_extract(*args, **kwargs):
        hoard = bytearray(512 * 2**20)  # more than the 100 MiB the worker may grow by
        return real_extract(*args, **kwargs) if hoard else None

    monkeypatch.setattr(pipeline, "extract", greedy_extract)
    with pytest.warns(RuntimeWarning, match="memory limit"):
        original, optimized, report = optimize_chain(memory_limit_mb=100)
    assert optimized is original and report.stop_reason == StopReason.MEMORY_LIMIT
    assert report.fallback.startswith("BudgetExceeded: memory limit: the optimizer ran out of memory")


class GrowingAddressSpace:
    """rules.address_space as if every reading found the process 25 MiB larger."""

    def __init__(self) -> None:
        self.size = rules.address_space()

    def __call__(self) -> int:
        self.size += 25 * 2**20
        return self.size


def test_memory_limit_stops_saturation_between_iterations_and_the_best_graph_found_comes_back(monkeypatch, caplog):
    # Saturation may grow by half of 250 MiB, counting the next iteration as another 25 MiB: four iterations.
    monkeypatch.setattr(rules, "address_space", GrowingAddressSpace())
    with caplog.at_level(logging.INFO, logger="eqsat"):
        original, optimized, report = optimize_chain(memory_limit_mb=250)
    assert report.stop_reason == StopReason.MEMORY_LIMIT and report.iterations == 4
    assert "stopped at the memory limit after 4 iteration(s)" in caplog.text
    assert report.changed and report.fallback is None and report.cost_after < report.cost_before
    assert_bit_exact(original, optimized)


def slow_saturation(seconds: float):
    """rules.saturate, whose last iteration takes `seconds` longer (as one egglog iteration can)."""
    real = rules.saturate

    def saturate(*args, **kwargs):
        result = real(*args, **kwargs)
        time.sleep(seconds)
        return result

    return saturate


def test_a_saturation_that_outlasts_the_time_limit_is_killed_and_the_graph_comes_back_untouched(monkeypatch):
    # Unkilled, the pass would take 20 s and return a rewritten graph.
    monkeypatch.setattr(rules, "saturate", slow_saturation(20))
    with pytest.warns(RuntimeWarning, match="time limit"):
        original, optimized, report = optimize_chain(time_limit=0.5)
    assert optimized is original and not report.changed
    assert report.stop_reason == StopReason.TIME_LIMIT and report.fallback.startswith("BudgetExceeded: time limit")
    assert "worker was stopped at the pass's deadline" in report.fallback


class JumpingClock:
    """The pipeline's clock (`time`), jumped one second forward by each call of a function it wraps."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def perf_counter(self) -> float:
        return time.perf_counter()

    def jumping(self, function):
        def jumped(*args, **kwargs):
            self.offset += 1.0
            return function(*args, **kwargs)

        return jumped


def test_loading_gives_up_at_the_deadline(monkeypatch):
    clock = JumpingClock()
    monkeypatch.setattr(pipeline, "time", clock)
    monkeypatch.setattr(bridge_fx, "read_node", clock.jumping(bridge_fx.read_node))  # 62 s for the chain's 62 nodes
    with pytest.warns(RuntimeWarning, match="time limit"):
        original, optimized, report = optimize_chain(time_limit=5.0)
    assert optimized is original and report.stop_reason == StopReason.TIME_LIMIT
    assert report.fallback.startswith("BudgetExceeded: time limit: the pass ran past") and "worker" not in report.phase_seconds


def test_write_back_gives_up_at_the_deadline(monkeypatch):
    # The worker forked with the clock at 0 s; writing back then takes a second per node.
    clock = JumpingClock()
    monkeypatch.setattr(pipeline, "time", clock)
    monkeypatch.setattr(bridge_fx._Emitter, "_emit_one", clock.jumping(bridge_fx._Emitter._emit_one))
    with pytest.warns(RuntimeWarning, match="time limit"):
        original, optimized, report = optimize_chain(time_limit=5.0)
    assert optimized is original and not report.changed and "write_back" in report.phase_seconds
    assert report.stop_reason == StopReason.TIME_LIMIT and report.fallback.startswith("BudgetExceeded: time limit: the pass ran past")


@pytest.mark.parametrize("isolate", [True, False])
def test_a_rust_panic_is_a_fallback_and_strict_mode_raises_it(isolate, monkeypatch):
    # pyo3 turns a Rust panic into PanicException, a BaseException (and not picklable: defined here, like this one).
    class PanicException(BaseException):
        pass

    def panicking_extract(*args, **kwargs):
        raise PanicException("rust panicked")

    monkeypatch.setattr(pipeline, "ISOLATE", isolate)
    monkeypatch.setattr(pipeline, "extract", panicking_extract)
    with pytest.warns(RuntimeWarning, match="rust panicked"):
        original, optimized, report = optimize_chain()
    assert optimized is original and report.fallback.endswith("PanicException: rust panicked")
    with pytest.raises(BaseException, match="rust panicked"):
        optimize_chain(strict=True)


def test_strict_mode_raises_when_a_hard_limit_stops_the_pass(monkeypatch):
    clock = JumpingClock()
    monkeypatch.setattr(pipeline, "time", clock)
    monkeypatch.setattr(bridge_fx._Emitter, "_emit_one", clock.jumping(bridge_fx._Emitter._emit_one))
    with pytest.raises(pipeline.BudgetExceeded, match="time limit"):
        optimize_chain(time_limit=5.0, strict=True)


def test_the_report_says_how_far_the_worker_grew():
    from eqsat import pipeline
    from eqsat.graph_builder import GraphBuilder

    assert pipeline.ISOLATE, "the optimizer runs in a worker process on Linux"
    g = GraphBuilder()
    x = g.input("x", (1, 4, 8, 16))
    there = g.call(torch.ops.aten.permute_copy.default, x, [0, 2, 3, 1])
    _, report = eqsat.optimize(g.output(g.call(torch.ops.aten.permute_copy.default, there, [0, 3, 1, 2])))
    assert 0 < report.peak_memory_mb < pipeline.Options().memory_limit_mb


def test_an_iteration_predicted_to_explode_is_not_started():
    """A fuzzed rank-6 graph whose sixth iteration grew the e-graph from 100k to 1.07M e-nodes (150 s):
    growth by the last iteration's factor would pass the e-node limit, so saturation stops before it,
    and the pass returns a bit-exact graph instead of being killed at its deadline."""
    from eqsat import fuzz
    from eqsat.fuzz import GraphSpec, Step

    spec = GraphSpec(
        inputs=((1, 2, 4, 4, 2, 1), (1, 1, 1, 1, 1, 1)),
        steps=(
            Step("slice", (0,), ((0, 0, 2, 3, 1, 0), (1, 1, 1, 1, 1, 1))),
            Step("add", (0, 0), (1.0, 0.3333333333333333, 0.5, 8, 8, -128)),
            Step("transpose", (2,), ((3, 1, 4, 0, 2, 5),)),
            Step("transpose", (2,), ((0, 4, 5, 1, 3, 2),)),
            Step("clamp", (5,), (8, 127)),
            Step("concat", (6, 1), (4,)),
            Step("table", (2,), (2,)),
            Step("reshape", (3,), ((4, 2, 8),)),
        ),
        outputs=(9,),
    )
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        # a time limit the five iterations fit in on a loaded machine too (5.7 s idle, 28 s at a load of 14)
        _, report = eqsat.optimize(spec.build(), target="ethos-u55-128", accept="always", time_limit=60)
    # which prediction stops it first depends on the machine's speed; neither lets the iteration start
    assert report.fallback is None and report.stop_reason in (StopReason.ENODE_LIMIT, StopReason.TIME_LIMIT)
    assert report.iterations <= 5 and report.egraph_enodes < eqsat.Options().enode_limit
    assert fuzz.check(spec) is None


def test_the_pass_runs_without_the_cyclic_collector_and_restores_it(monkeypatch):
    """Loading, extraction and write-back allocate an object or more per node and e-node and free nothing
    cyclic: the collector's passes over the heap were about a sixth of the pass's CPU time on the
    20,000-node scale graph. In-process (ISOLATE off), so that every phase runs under the callback."""
    monkeypatch.setattr(pipeline, "ISOLATE", False)
    inside, after = [], []

    def count(phase, info):
        if phase == "start":
            frame = sys._getframe(1)
            while frame is not None and frame.f_code is not pipeline._optimize.__code__:
                frame = frame.f_back
            (inside if frame is not None else after).append(info["generation"])

    gc_was_enabled = gc.isenabled()
    gc.enable()
    gc.callbacks.append(count)
    try:
        _, report = eqsat.optimize(synthetic_graph(400), accept="always")
        gc.collect()
    finally:
        gc.callbacks.remove(count)
        if not gc_was_enabled:
            gc.disable()
    assert report.changed and report.fallback is None
    assert inside == []
    assert after  # the collector is back on after the pass
