"""The rewrite schedule: which rulesets run, in what order, under which budgets.

This module composes the schedule and nothing else does. Each algebra lives in
its own module with one ruleset; the analysis ruleset (it adds no terms) is
saturated before every round of rewrites, and a rewrite ruleset's lookups
(LOOKUPS, they add no terms either) right before its own round; a round whose
GUARDS do not hold (no term it could match) is skipped.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable, Iterator

from egglog import EGraph, Fact, Ruleset

from eqsat import terms
from eqsat.rules import (
    _program,
    analysis,
    concat_slice,
    reduce,
    rescale,
    reshape,
    reshape_concat,
    slice_concat_rank,
    slice_pushdown,
    transpose,
    transpose_rank,
    transpose_view,
)

ANALYSIS: Ruleset = analysis.analysis
"""Shape and dtype facts for terms the rewrites create."""

RULESETS: dict[str, Ruleset] = {
    "transpose": transpose.transpose,
    "concat-slice": concat_slice.concat_slice,
    "reshape": reshape.reshape,
    "transpose-rank": transpose_rank.transpose_rank,
    "transpose-view": transpose_view.transpose_view,
    "slice-pushdown": slice_pushdown.slice_pushdown,
    "rescale": rescale.rescale,
    "reduce": reduce.reduce,
    "reshape-concat": reshape_concat.reshape_concat,
    "slice-concat-rank": slice_concat_rank.slice_concat_rank,
}
"""The rewrite rulesets by name, one per algebra, in the order they run."""

REWRITES: tuple[Ruleset, ...] = tuple(RULESETS.values())

LOOKUPS: dict[str, Ruleset] = {_program.ruleset_key(concat_slice.concat_slice): concat_slice.concat_prefixes}
"""Rulesets saturated right before a rewrite ruleset's round, by the rewrite ruleset's key: they fill tables
its queries look terms up in, with a row for every term the round sees (the analysis runs once per
iteration, before the rulesets that add terms). egglog computes a primitive in a query only after joining
the tables around it, so looking a term up by a value computed from another joins all pairs of the two;
a table of the computed values makes it a keyed lookup."""


GUARDS: dict[str, Callable[[], list[Fact]]] = {_program.ruleset_key(slice_concat_rank.slice_concat_rank): slice_concat_rank.may_match}
"""Facts without which a rewrite ruleset cannot match, by the ruleset's key: its round is skipped when they do
not hold (checked right before it). egglog joins slice-concat-rank's queries with the 21 rows of
`index_below` before testing the rank, 0.18 s a round on the 20,000-node scale graph, which has no rank-5 tensor;
the check reads the shapes alone."""


def program_rulesets() -> tuple[Ruleset, ...]:
    """Every ruleset saturation runs, compiled as one program (eqsat.rules._program); read when called, so
    that tests may replace REWRITES."""
    return (ANALYSIS, *LOOKUPS.values(), *REWRITES)


def rulesets_named(names: tuple[str, ...] | None) -> tuple[Ruleset, ...]:
    """The rewrite rulesets with these names (all of them for None)."""
    if names is None:
        return REWRITES
    unknown = sorted(set(names) - set(RULESETS))
    if unknown:
        raise ValueError(f"unknown ruleset(s) {unknown}; known: {sorted(RULESETS)}")
    return tuple(RULESETS[name] for name in names)


class StopReason(StrEnum):
    """Why saturation stopped: it saturated, or which of its limits (Budget) it reached. The pass's
    hard limits (eqsat.pipeline.BudgetExceeded) stop the whole pass with TIME_LIMIT or MEMORY_LIMIT. The values
    are what reports and JSON have always held."""

    SATURATED = "saturated"
    ITERATION_LIMIT = "iteration limit"
    TIME_LIMIT = "time limit"
    ENODE_LIMIT = "e-node limit"
    MEMORY_LIMIT = "memory limit"


@dataclass(frozen=True)
class Budget:
    """Limits on saturation, enforced between iterations. These defaults are the pass's
    (eqsat.pipeline.Options reads them from here).

    iterations, enodes, seconds: at most so many iterations, no new iteration once
    the e-graph has more e-nodes or saturation has run longer, or would by its
    end if it grew the e-graph by the factor the last iteration did (its time
    taken to grow by that factor too).
    memory: bytes the process's address space may grow by during saturation
    (None: unbounded). No new iteration starts once it has grown by more, or
    would, if the next iteration grew it as much as the last one did.

    One egglog iteration (analysis, then one round of each ruleset) cannot be
    interrupted, so these are soft limits: a run can overshoot the time,
    e-node and memory limits by the work of one iteration. The pass makes
    them hard by running saturation in a worker process that it kills at its
    deadline and whose address space is capped (eqsat.pipeline).
    """

    iterations: int = 30
    enodes: int = 200_000
    seconds: float = 20.0
    memory: int | None = None


@dataclass
class SaturationResult:
    """rule_matches: the rewrites' matches per rule; analysis_matches: the analysis and lookup rules' (the work
    of typing new terms and filling the lookups)."""

    iterations: int = 0
    stop_reason: StopReason = StopReason.SATURATED
    rule_matches: Counter = field(default_factory=Counter)
    analysis_matches: Counter = field(default_factory=Counter)


def enode_count(egraph: EGraph) -> int:
    return _program.enode_count(egraph)


def _statm_bytes(field: int) -> int | None:
    """Field `field` of /proc/self/statm (which counts pages) in bytes, or None where /proc is missing."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def address_space() -> int | None:
    """The size of this process's address space in bytes (statm's first field, what RLIMIT_AS caps and the
    memory budgets measure), or None where /proc is missing."""
    return _statm_bytes(0)


def resident_set() -> int | None:
    """The bytes of this process's memory held in RAM (statm's second field, the resident set size: what
    getrusage's ru_maxrss peaks at), or None where /proc is missing."""
    return _statm_bytes(1)


def prepare() -> None:
    """Compile (or read back from the cache) the schedule's program in this process, so that
    worker processes forked from it inherit the parsed program instead of parsing it each time."""
    _program.compiled(program_rulesets())


_SCRATCH: list[EGraph] = []
"""The scratch e-graph; replaced when the schedule's program is another (tests replace rulesets)."""
_SCRATCH_LOCK = threading.Lock()


@contextmanager
def scratch_egraph() -> Iterator[EGraph | None]:
    """An empty e-graph that declares the term language and already holds the schedule's compiled
    program, for one optimizer run; None when egglog cannot run the program (then load into a fresh one).

    One per process, made on first use and reset after each with egglog's push/pop: adding the
    program to a new e-graph costs egglog about 0.14 s of CPU (it compiles every rule's query),
    more than saturating a small model's graph; a push and a pop cost about 0.02 s. Runs in one
    process take turns; a worker forked inside a run has its own copy. The e-class ids a run
    sees are the same as in a fresh e-graph (tests/rules/test_program.py).
    """
    program = _program.compiled(program_rulesets())
    if program is None:
        yield None
        return
    with _SCRATCH_LOCK:
        if not _SCRATCH or _SCRATCH[0]._eqsat_program is not program:
            egraph = EGraph()
            terms.declare(egraph)
            _program.CompiledRunner(egraph, program)
            _SCRATCH[:] = [egraph]
        (egraph,) = _SCRATCH
        egraph.push()
        try:
            yield egraph
        finally:
            egraph.pop()


def runs_compiled(rewrites: tuple[Ruleset, ...]) -> bool:
    """Whether every one of rewrites is in the schedule's compiled program (program_rulesets), so that saturate
    can run them on the scratch e-graph."""
    known = {_program.ruleset_key(r) for r in program_rulesets()}
    return all(_program.ruleset_key(r) in known for r in rewrites)


def _runner(egraph: EGraph, rewrites: tuple[Ruleset, ...]) -> _program.Runner:
    """How saturate runs rulesets on egraph: as the cached program of the analysis and all
    rewrite rulesets (eqsat.rules._program), unless a ruleset is not one of them or egraph
    already has rulesets from egglog-python; then through egglog-python."""
    if not egraph._state.rulesets and runs_compiled(rewrites):
        program = _program.compiled(program_rulesets())
        if program is not None:
            return _program.CompiledRunner(egraph, program)
    if getattr(egraph, "_eqsat_program", None) is not None:
        raise ValueError("this e-graph runs eqsat's compiled rulesets; other rulesets need an e-graph of their own")
    return _program.Runner(egraph)


def saturate(egraph: EGraph, budget: Budget, rewrites: tuple[Ruleset, ...] | None = None) -> SaturationResult:
    """Run analysis, then one round of every rewrite ruleset (each after its LOOKUPS), until nothing changes
    or a budget is hit.

    A run stopped by a budget ends with one more analysis, so every e-class it created has its shape.

    rewrites: the rulesets to run, by default REWRITES.
    """
    rewrites = REWRITES if rewrites is None else rewrites
    result = SaturationResult()
    if not rewrites:
        return result
    started = time.monotonic()
    runner = _runner(egraph, rewrites)
    memory_start = address_space() if budget.memory is not None else None
    memory_before = memory_start
    enodes_before, growth, last_seconds = runner.enode_count(), 1.0, 0.0
    while True:
        if result.iterations >= budget.iterations:
            result.stop_reason = StopReason.ITERATION_LIMIT
            break
        elapsed, enodes = time.monotonic() - started, runner.enode_count()
        # One iteration cannot be interrupted: do not start one that, growing the e-graph as the last
        # one did, would end past a limit (a rank-6 fuzz graph went from 100k to 1.07M e-nodes, and
        # 0.3 s to 150 s, in one iteration).
        if elapsed + last_seconds * growth > budget.seconds:
            result.stop_reason = StopReason.TIME_LIMIT
            break
        if enodes * growth > budget.enodes:
            result.stop_reason = StopReason.ENODE_LIMIT
            break
        if memory_start is not None and (memory_now := address_space()) is not None:
            grown, last_iteration = memory_now - memory_start, memory_now - memory_before
            if grown + last_iteration > budget.memory:
                result.stop_reason = StopReason.MEMORY_LIMIT
                break
            memory_before = memory_now
        iteration_started = time.monotonic()
        result.analysis_matches.update(runner.run(ANALYSIS, saturate=True)[1])
        updated = False
        for rules in rewrites:
            key = _program.ruleset_key(rules)
            if key in GUARDS and not runner.egraph.check_bool(*GUARDS[key]()):
                continue
            lookups = LOOKUPS.get(key)
            if lookups is not None:
                result.analysis_matches.update(runner.run(lookups, saturate=True)[1])
            changed, rule_matches = runner.run(rules)
            updated |= changed
            for rule, matches in rule_matches.items():
                if matches:
                    result.rule_matches[rule] += matches
        result.iterations += 1
        last_seconds = time.monotonic() - iteration_started
        growth, enodes_before = max(1.0, runner.enode_count() / max(1, enodes_before)), runner.enode_count()
        if not updated:
            result.stop_reason = StopReason.SATURATED
            break
    if result.stop_reason != StopReason.SATURATED and result.iterations:
        # type the terms of the last iteration: the cost model reads their shapes
        result.analysis_matches.update(runner.run(ANALYSIS, saturate=True)[1])
    return result
