"""One optimizer run: FX -> e-graph -> saturate -> extract -> refine -> FX -> checks.

Never makes a graph worse: the original graph is always a candidate, and if
the extracted graph is not cheaper under the cost model, or anything fails,
the original graph comes back untouched (with the reason in the report and a
warning in the log). `strict=True` raises instead of falling back.

Hard budgets. One egglog iteration cannot be interrupted and egglog has no
memory limit, so saturation, extraction and refinement run in a worker
process forked from the caller's (Linux). The caller waits for the worker's
answer until the pass's deadline and kills it there; the worker's address
space is capped (RLIMIT_AS), so an e-graph that outgrows the memory limit
ends the worker, never the caller. Inside the worker the same limits are
also soft: saturation stops between iterations at a share of the time limit
and of the memory limit, so a normal stop still extracts the best graph
found so far; only a killed worker gives back the original graph. Loading
and write-back run in the caller and check the deadline every few hundred
nodes. egglog 13.2 starts no threads while loading or saturating (checked by
tests/test_budgets.py), so forking after loading the e-graph is safe.

The worker costs about 50 ms per run on small graphs (fork of a process
with torch loaded, the answer pickled back through a pipe, the worker's
exit; a 62-node graph took 0.47 s instead of 0.42 s in-process, median of
five, on this 2-core machine) and 0.3 s on the 20,000-node scale graph
(`report.phase_seconds["worker"]`).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import os
import pickle
import resource
import select
import signal
import sys
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator, NamedTuple

from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.tosa.specification import TosaLoweringContext, get_context_spec
from torch import fx

from eqsat import bridge_fx, rules
from eqsat.configuration import ACCELERATORS, Configuration, check_target
from eqsat.errors import EqsatError
from eqsat.extract import cost as cost_models
from eqsat.extract.egraph_view import EGraphView
from eqsat.extract import EXTRACTORS, extract
from eqsat.extract._gc import paused_gc
from eqsat.extract.greedy import reachable
from eqsat.extract.refine import refine_from
from eqsat.ir import Graph, TensorType, Term
from eqsat.ops.nodes import output_slots
from eqsat.rules import StopReason
from eqsat.report import Report, op_counts

logger = logging.getLogger("eqsat")

COST_TOLERANCE = 1e-9
"""Relative difference of two cost totals below which they count as equal."""


class BudgetExceeded(EqsatError):
    """A hard budget stopped the pass before it had a graph: `limit` is StopReason.TIME_LIMIT or MEMORY_LIMIT."""

    def __init__(self, limit: StopReason, detail: str):
        super().__init__(f"{limit}: {detail}")
        self.limit = limit

    def __reduce__(self):
        return type(self), (self.limit, str(self).removeprefix(f"{self.limit}: "))


SATURATION_SHARE = 0.5
"""Saturation starts no new iteration once this share of time_limit has passed since the pass began."""

SEARCH_SHARE = 0.75
"""Extraction's and refinement's wall-clock safety nets stop them at this share of time_limit."""

MEMORY_SHARE = 0.5
"""Saturation starts no new iteration that would grow the worker by more than this share of memory_limit_mb
(the rest is for the last analysis and for extraction, which holds the e-graph as Python objects)."""

FINISH_SECONDS_PER_NODE = 2e-4
"""Time write-back leaves FX to finish the graph, per node: twice the 90 µs per node measured at
20,000 nodes (dead-code elimination, lint and code generation took 1.8 s)."""

MEMORY_EXIT = 86
"""The worker's exit status when even reporting a MemoryError failed."""

ISOLATE = sys.platform == "linux"
"""Run saturation, extraction and refinement in a forked worker (hard budgets); elsewhere in-process, soft budgets only."""


@dataclass(frozen=True)
class Options:
    """How the optimizer runs.

    accept: "cheaper" writes the extracted graph back only when the cost model
    says it is cheaper; "always" writes it back whenever it is not more
    expensive (tests use it to exercise the round trip).
    rules: names of the rewrite rulesets to run (None: all; (): none).
    extractor: "greedy", "ilp" or "auto" (eqsat.extract.extract).
    merge_duplicates: ops that compute the same value share one e-class, input RESCALEs excepted
    (bridge_fx.duplicate_pairs); on by default: merging them saved cycles on every zoo model measured.
    min_saving: with accept="cheaper", the fraction of the estimated cost the
    extracted graph must save. It is set by the model's measured error on
    the change a rewrite makes, not on totals: the threshold is the largest
    predicted saving that Vela measured as a loss. With the NPU-cycle model a
    predicted 0.08% saving was a 2.2% loss (unet-skip, U85); with the
    inference-cycle model every rewrite accepted on the zoo (predicted
    savings from 0.5% to 54% of cycles_total, both targets) lowered Vela's
    cycles_total, so 0.1% stands.
    verify: "vela" compiles each delegate's TOSA twice with the pinned Vela, as eqsat
    rewrote it and as it was, and lowers the one with fewer `cycles_total`
    (the report's `verification` says which, with both figures). It acts in
    an installed pipeline (`install()`, `EqsatPass`), where the delegate's
    TOSA exists; `optimize()` on a bare graph cannot verify. "none": trust
    the cost model.
    system_config, memory_mode, config_ini: the configuration Vela compiles
    for, as `EthosUCompileSpec(target, system_config=..., memory_mode=...,
    config_ini=...)` names it (None: the compile spec's default for the
    target; installed, the pass reads them from each lowering's compile spec,
    eqsat.arm_pass). The graph is priced only with the calibration of exactly
    that configuration; a configuration without one is refused: the original
    graph comes back with the reason and the `eqsat calibrate` command that
    calibrates it (eqsat.extract.cost.cost_model_for).

    Budgets (defaults from rules.Budget; memory_limit_mb's is here):
    iteration_limit, enode_limit: saturation starts no new iteration after so
    many, or once the e-graph has more e-nodes (checked between iterations,
    so the last one can overshoot by its own growth).
    time_limit: seconds for the whole pass (loading, saturation, extraction,
    refinement, write-back, checks). It is hard: the pass returns within
    time_limit + max(1 s, 25 %). Saturation stops between iterations once
    half of it has passed (stop_reason "time limit"), extraction and
    refinement stop at three quarters (a safety net: they are bounded by
    work, so on a normal run the clock never decides the graph; if it does,
    `report.clock_stops` names the phase); past the deadline the worker is
    killed, or loading or write-back gives up, and the original graph comes
    back with fallback "BudgetExceeded: time limit: ...".
    memory_limit_mb: how far (MiB) the worker process may grow its address
    space beyond the caller's; None lifts it. Saturation stops between
    iterations before it would pass half of it (stop_reason "memory limit");
    at the limit itself an allocation fails, the worker dies, and the
    original graph comes back with fallback "BudgetExceeded: memory limit:
    ...". The caller's process is never touched. The default, 2048 MiB, fits
    a developer laptop next to the lowering process itself (about 1.2 GB of
    address space with torch and executorch loaded), and is five times what
    the default e-node limit needs: the 20,000-node scale graph, stopped at
    144k e-nodes, grows the process by about 400 MB (egglog's tables, then
    the e-graph as Python objects while extracting).
    A stopped saturation extracts the best graph found so far; the report's
    `stop_reason` names the limit ("iteration limit", "e-node limit",
    "time limit", "memory limit") or says "saturated".
    The caller cannot interrupt egglog's bulk load of the graph (0.5 s at
    20,000 nodes) nor FX finishing the written-back graph (write-back gives
    up early enough to leave it twice its measured time). The first run of a
    new eqsat version also compiles the rules (about 2 s, then cached on
    disk, see eqsat.rules._program); that is not counted.
    """

    iteration_limit: int = rules.Budget.iterations
    enode_limit: int = rules.Budget.enodes
    time_limit: float = rules.Budget.seconds
    memory_limit_mb: float | None = 2048
    strict: bool = False
    accept: str = "cheaper"
    rules: tuple[str, ...] | None = None
    extractor: str = "auto"
    merge_duplicates: bool = True
    min_saving: float = 0.001
    verify: str = "none"
    system_config: str | None = None
    memory_mode: str | None = None
    config_ini: str | None = None

    def __post_init__(self) -> None:
        """Check the values here, so that every way of making Options (the constructor, from_kwargs,
        dataclasses.replace) refuses a bad one with a ValueError that names it."""
        if not 0.0 <= self.min_saving < 1.0:
            raise ValueError(f"min_saving must be in [0, 1), not {self.min_saving!r}")
        if self.verify not in ("none", "vela"):
            raise ValueError(f"verify must be 'none' or 'vela', not {self.verify!r}")
        if self.accept not in ("cheaper", "always"):
            raise ValueError(f"accept must be 'cheaper' or 'always', not {self.accept!r}")
        rules.rulesets_named(self.rules)
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {EXTRACTORS}, not {self.extractor!r}")
        if self.time_limit < 0 or (self.memory_limit_mb is not None and self.memory_limit_mb <= 0):
            raise ValueError("time_limit must be >= 0 and memory_limit_mb > 0 (or None)")

    @classmethod
    def from_kwargs(cls, **kwargs) -> Options:
        """Options from keyword arguments; a TypeError that lists the known names for an unknown one."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown eqsat option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)

    def configuration(self, target: str) -> Configuration:
        """The configuration these options name for target (UnknownTargetError for a target Vela does not know)."""
        return Configuration.of(target, self.system_config, self.memory_mode, self.config_ini)

    @property
    def memory_limit(self) -> int | None:
        """memory_limit_mb in bytes."""
        return None if self.memory_limit_mb is None else int(self.memory_limit_mb * 2**20)

    @property
    def budget(self) -> rules.Budget:
        """Saturation's budget in a pass that begins now (its soft limits, see the class docstring)."""
        memory = None if self.memory_limit is None else int(MEMORY_SHARE * self.memory_limit)
        return rules.Budget(self.iteration_limit, self.enode_limit, SATURATION_SHARE * self.time_limit, memory)


@dataclass(frozen=True)
class Deadlines:
    """The pass's clock: `started` (time.monotonic()) and its time_limit."""

    started: float
    time_limit: float

    def share(self, fraction: float) -> float:
        """Seconds left until this share of the time limit has passed (never negative)."""
        return max(0.0, self.started + fraction * self.time_limit - time.monotonic())

    @property
    def hard(self) -> float:
        """When the worker is killed and loading or write-back give up: half of the allowed overshoot,
        max(1 s, 25 %), after time_limit, leaving the other half to return the original graph."""
        return self.started + self.time_limit + max(1.0, 0.25 * self.time_limit) / 2

    def check(self, reserve: float = 0.0) -> None:
        """Raise BudgetExceeded past the hard deadline, or `reserve` seconds before it (loading and
        write-back call this every few hundred nodes)."""
        if time.monotonic() + reserve > self.hard:
            raise BudgetExceeded(StopReason.TIME_LIMIT, f"the pass ran past its time limit of {self.time_limit:g} s")


@contextmanager
def _tosa_lowering_context(target: str) -> Iterator[None]:
    """The TOSA specification of target's compile spec, unless a lowering already set one.

    TOSA dialect ops compute their FakeTensor meta only inside a TosaLoweringContext; the Arm
    pipeline provides one, a direct call of optimize() on a TOSA graph does not.
    """
    try:
        get_context_spec()
    except RuntimeError:
        with TosaLoweringContext(EthosUCompileSpec(target).tosa_spec):
            yield
    else:
        yield


@contextmanager
def _phase(report: Report, name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        report.phase_seconds[name] = report.phase_seconds.get(name, 0.0) + time.perf_counter() - started


def fx_graph_cost(graph_module: fx.GraphModule, model: cost_models.CostModel) -> float:
    """What an FX graph costs, read node by node (eqsat.extract.cost.graph_cost): the graph the pass was
    given, and the graph it wrote back, are priced the same way."""
    return cost_models.priced(bridge_fx.read_graph(graph_module).as_ir(), model)


def boundary_transposes(graph: Graph, value_costs: dict[int, float]) -> dict[str, float]:
    """graph's boundary TRANSPOSEs (eqsat.ir.Graph.boundary_transposes) by name, with what the layers Vela runs for
    each cost (value_costs: eqsat.extract.cost.priced_by_value)."""
    return {graph.names[value]: value_costs.get(value, 0.0) for value in graph.boundary_transposes()}


class Written(NamedTuple):
    """A written-back graph module, the graph it reads as, and what each of its values costs."""

    module: fx.GraphModule
    graph: Graph
    value_costs: dict[int, float]


def accepts(before: float, after: float, options: Options) -> bool:
    """Whether a graph costing `after` replaces one costing `before`.

    A cost the model cannot give (infinite or NaN: an op the target cannot run, or no price at all)
    never replaces anything, nor is anything compared with it.
    """
    if not (math.isfinite(before) and math.isfinite(after)):
        return False
    # Both totals are float sums taken in different orders: equal graphs may differ in the last bits.
    noise = COST_TOLERANCE * max(1.0, abs(before))
    if options.accept == "always":
        return after <= before + noise
    return after < before * (1.0 - options.min_saving) - noise


def _check_outputs(original: fx.GraphModule, optimized: fx.GraphModule) -> None:
    """The optimized graph must return the same shapes and dtypes, slot for slot."""

    def signature(gm: fx.GraphModule) -> list:
        return [bridge_fx.tensor_type(s) if isinstance(s, fx.Node) else repr(s) for s in output_slots(gm.graph)]

    before, after = signature(original), signature(optimized)
    if before != after:
        raise EqsatError(f"output signature changed: {before} -> {after}")


@dataclass
class Search:
    """What saturation, extraction and refinement found: the report fields they fill, the
    selection (the chosen term of each e-class the roots need) with the e-class of each node,
    and the type of each selected e-class (write-back gives new nodes their `val` from it)."""

    report: dict = field(default_factory=dict)
    selection: dict[str, Term] | None = None
    class_of_node: list[str] | None = None
    types: dict[str, TensorType] | None = None
    error: BaseException | None = None


SEARCH_FIELDS = ("iterations", "stop_reason", "rules_fired", "egraph_enodes", "egraph_classes", "extractor", "cost_after", "clock_stops")


def search(loaded: bridge_fx.Loaded, model: cost_models.CostModel, options: Options, deadlines: Deadlines) -> Search:
    """Saturate, extract and refine (in the worker process); never raises."""
    report = Report(target=model.target)
    try:
        selection, class_of_node, types = _search(loaded, model, options, deadlines, report)
    except BaseException as error:  # noqa: BLE001 - reported to the caller, which decides (strict or fallback)
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        if isinstance(error, MemoryError):
            error = BudgetExceeded(StopReason.MEMORY_LIMIT, f"the optimizer ran out of memory ({_memory_detail(options)})")
        found = Search(error=error)
    else:
        found = Search(selection=selection, class_of_node=class_of_node, types=types)
    found.report = {name: getattr(report, name) for name in SEARCH_FIELDS} | {"phase_seconds": report.phase_seconds}
    return found


def _search(
    loaded: bridge_fx.Loaded, model: cost_models.CostModel, options: Options, deadlines: Deadlines, report: Report
) -> tuple[dict[str, Term], list[str], dict[str, TensorType]]:
    view, roots = _saturated_view(loaded, options, deadlines, report)
    with _phase(report, "extract"):
        term_cost = cost_models.term_costs(model, view.types)

        def graph_cost(selection: dict[str, Term]) -> float:
            return cost_models.graph_cost(selection, roots, view.types.get, model, term_cost)

        def region_cost(selection: dict[str, Term], region: list[str], core: frozenset[str]) -> float:
            return cost_models.region_cost(selection, region, core, roots, view.types.get, model, term_cost)

        extraction = extract(
            view.candidates, roots, term_cost, extractor=options.extractor, ilp_time_limit=deadlines.share(SEARCH_SHARE)
        )
        report.extractor = extraction.extractor
        if extraction.clock_stopped:
            report.clock_stops.append("ilp")
    with _phase(report, "refine"):
        refined = refine_from(
            extraction.starts, view.candidates, roots, graph_cost, region_cost=region_cost, seconds=deadlines.share(SEARCH_SHARE)
        )
        report.cost_after = refined.cost
        if refined.clock_stopped:
            report.clock_stops.append("refine")
    # What write-back can read: the roots' classes and the classes of the original nodes (a copied node
    # keeps operands its term does not model, like a RESHAPE's CONST_SHAPE), with their operands.
    needed = roots + [c for c in dict.fromkeys(view.class_of_node) if c in refined.selection]
    selection = {c: refined.selection[c] for c in reachable(refined.selection, needed)}
    return selection, view.class_of_node, {c: view.types[c] for c in selection if c in view.types}


def _saturated_view(loaded: bridge_fx.Loaded, options: Options, deadlines: Deadlines, report: Report) -> tuple[EGraphView, list[str]]:
    """Saturate the loaded e-graph; its candidate terms and types, and the e-classes of the outputs."""
    budget = dataclasses.replace(options.budget, seconds=deadlines.share(SATURATION_SHARE))
    with _phase(report, "saturate"):
        saturation = rules.saturate(loaded.egraph, budget, rules.rulesets_named(options.rules))
    report.iterations, report.stop_reason = saturation.iterations, saturation.stop_reason
    fired = saturation.rule_matches + Counter({"merge-duplicates": loaded.merged_duplicates})
    report.rules_fired = dict(sorted(fired.items()))
    with _phase(report, "extract"):
        view = EGraphView.of(loaded.egraph, len(loaded.nodes))
        report.egraph_enodes, report.egraph_classes = view.enode_count, len(view.candidates)
    return view, [view.class_of_node[i] for i in loaded.outputs if i is not None]


def saturated_view(graph_module: fx.GraphModule, target: str = "ethos-u55-128", **options) -> tuple[EGraphView, list[str]]:
    """The saturated e-graph that optimize() extracts from for graph_module (candidate terms and types), and the
    e-classes of its outputs: for offline study of extraction (benchmarks.optimality)."""
    check_target(target)
    parsed = Options.from_kwargs(**options)
    deadlines = Deadlines(time.monotonic(), parsed.time_limit)
    with _tosa_lowering_context(target), rules.scratch_egraph() as scratch:
        loaded = bridge_fx.to_egraph(graph_module, merge_duplicates=parsed.merge_duplicates, checkpoint=deadlines.check, into=scratch)
        return _saturated_view(loaded, parsed, deadlines, Report(target=target))


def _memory_detail(options: Options) -> str:
    return f"its address space is capped at {options.memory_limit_mb:g} MiB above the caller's"


def _run_worker(work: Callable[[], Search], options: Options, deadlines: Deadlines) -> Search:
    """work() in a forked worker process, capped at options.memory_limit and killed at deadlines.hard.

    Raises BudgetExceeded when the worker was killed at the deadline or died at its memory cap.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _worker_main(work, write_end, options.memory_limit)  # never returns
    os.close(write_end)
    data, status = None, None
    try:
        data = _receive(read_end, deadlines.hard)
    finally:
        os.close(read_end)
        if data is None:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if data is None:
        raise BudgetExceeded(StopReason.TIME_LIMIT, f"the optimizer worker was stopped at the pass's deadline (time limit {options.time_limit:g} s)")
    if data:
        try:
            return pickle.loads(data)
        except Exception:  # noqa: BLE001 - a truncated answer: the worker died while sending it
            pass
    died = f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
    out_of_memory = (os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)) or (
        os.WIFEXITED(status) and os.WEXITSTATUS(status) == MEMORY_EXIT
    )
    if out_of_memory and options.memory_limit is not None:
        raise BudgetExceeded(StopReason.MEMORY_LIMIT, f"the optimizer worker died ({died}); {_memory_detail(options)}")
    raise EqsatError(f"the optimizer worker died ({died})")


def _receive(fd: int, deadline: float) -> bytes | None:
    """Everything written to fd until its writer closes it, or None if that does not happen by deadline."""
    chunks = []
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if not poller.poll(max(1, int(remaining * 1000))):
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _worker_main(work: Callable[[], Search], write_end: int, memory_limit: int | None) -> None:
    """The worker process: cap the address space, run work, send its Search back pickled, exit."""
    code = 1
    try:
        gc.freeze()  # the caller's objects stay out of collections: fewer copy-on-write pages
        if memory_limit is not None and (size := rules.address_space()) is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = size + memory_limit if hard == resource.RLIM_INFINITY else min(hard, size + memory_limit)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        resident = rules.resident_set() or 0
        found = work()
        # Linux starts a forked process's high-water mark at the resident size it inherited
        found.report["peak_memory_mb"] = max(0.0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - resident) / 2**20
        if found.error is not None:
            try:
                pickle.loads(pickle.dumps(found.error))
            except Exception:  # noqa: BLE001 - an error that does not survive pickling (pyo3's PanicException) is sent as text
                found.error = EqsatError(f"{type(found.error).__name__}: {found.error}")
        data = pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
        code = 0
    except MemoryError:
        code = MEMORY_EXIT
    except BaseException:  # noqa: BLE001 - nothing may escape the worker into the caller's stack
        code = 1
    finally:
        os._exit(code)


def _rebuild(
    loaded: bridge_fx.Loaded, model: cost_models.CostModel, options: Options, deadlines: Deadlines, report: Report
) -> Written | None:
    """Saturate, extract and refine (in a worker), then write back; None when the original should be kept."""
    if ISOLATE:
        rules.prepare()
        with _phase(report, "worker"):
            found = _run_worker(lambda: search(loaded, model, options, deadlines), options, deadlines)
        # "worker" keeps only the cost of the process itself: fork, pickling, and waiting for it to exit
        report.phase_seconds["worker"] -= sum(found.report["phase_seconds"].values())
    else:
        found = search(loaded, model, options, deadlines)
    for name, value in found.report.items():
        if name != "phase_seconds":
            setattr(report, name, value)
    report.phase_seconds.update(found.report["phase_seconds"])
    if found.error is not None:
        raise found.error
    if report.stop_reason != StopReason.SATURATED:
        logger.info(
            "eqsat: saturation stopped at the %s after %d iteration(s); extracting the best graph found so far",
            report.stop_reason,
            report.iterations,
        )
    for phase in report.clock_stops:
        logger.info("eqsat: the wall-clock safety net stopped %s (time limit %g s); its result depends on the machine's load", phase, options.time_limit)

    if not accepts(report.cost_before, report.cost_after, options):
        if not math.isfinite(report.cost_before):
            logger.info("eqsat: the cost model cannot price the graph as given (%s); it stays as it is", report.cost_before)
        return None
    # FX finishing the graph cannot be interrupted: write-back gives up early enough to leave it time.
    reserve = FINISH_SECONDS_PER_NODE * len(loaded.nodes)
    with _phase(report, "write_back"):
        written = bridge_fx.to_fx(
            loaded, found.selection, found.class_of_node, checkpoint=lambda: deadlines.check(reserve), types=found.types
        )
    with _phase(report, "check"):
        # the graph as written (an aten slice of a box is one node per cut dimension, say) is priced again
        graph = bridge_fx.read_graph(written).as_ir()
        report.cost_after, value_costs = cost_models.priced_by_value(graph, model)
    if not accepts(report.cost_before, report.cost_after, options):
        logger.info("eqsat: the written-back graph costs %.1f, the original %.1f; keeping the original", report.cost_after, report.cost_before)
        return None
    return Written(written, graph, value_costs)


def optimize(graph_module: fx.GraphModule, target: str = "ethos-u55-128", **options) -> tuple[fx.GraphModule, Report]:
    """Optimize one FX graph for target; returns (graph module, report).

    The input graph module is never modified. The result is a new graph
    module when the optimizer found a cheaper equivalent graph, else the input.
    It runs without Python's cyclic collector (eqsat.extract._gc), which is back on when it returns.

    An unknown target or option is an error of this call (UnknownTargetError, TypeError, ValueError). A
    configuration eqsat cannot price, as any other failure, gives back the input with the reason in the report.
    """
    check_target(target)
    return run(graph_module, target, Options.from_kwargs(**options))


def run(graph_module: fx.GraphModule, target: str, options: Options) -> tuple[fx.GraphModule, Report]:
    """optimize() without checking target first: the pass calls it with the target a lowering's compile spec
    names, where nothing eqsat cannot handle may fail the lowering. An unknown target too gives back the
    input, with the reason in the report (options.strict raises)."""
    with paused_gc():
        return _optimize(graph_module, target, options)


def _optimize(graph_module: fx.GraphModule, target: str, parsed: Options) -> tuple[fx.GraphModule, Report]:
    started = time.monotonic()
    deadlines = Deadlines(started, parsed.time_limit)
    report = Report(target=target, fx_nodes_before=len(graph_module.graph.nodes), ops_before=op_counts(graph_module))
    try:
        configuration = parsed.configuration(target)
        report.system_config, report.memory_mode, report.config_ini = (
            configuration.system_config,
            configuration.memory_mode,
            configuration.config_ini,
        )
        model = cost_models.cost_model_for(configuration)
        report.cost_unit = model.unit
        with _tosa_lowering_context(target), rules.scratch_egraph() as scratch:
            with _phase(report, "load"):
                loaded = bridge_fx.to_egraph(
                    graph_module, merge_duplicates=parsed.merge_duplicates, checkpoint=deadlines.check, into=scratch
                )
                read = loaded.read_graph()
                report.graph_before, report.opaque_reasons = read.as_ir(), read.opaque_reasons()
                model = model.running_transposes_of(report.graph_before)
                report.cost_before, value_costs = cost_models.priced_by_value(report.graph_before, model)
            report.dialect = loaded.dialect
            deadlines.check()
            written = _rebuild(loaded, model, parsed, deadlines, report)
            optimized = None if written is None else written.module
            with _phase(report, "check"):
                if written is not None:
                    _check_outputs(graph_module, written.module)
                    report.boundary_transposes = boundary_transposes(written.graph, written.value_costs)
                else:
                    report.boundary_transposes = boundary_transposes(report.graph_before, value_costs)
    except BaseException as error:  # noqa: BLE001 - the fail-safe: any failure keeps the original graph
        # BaseException: pyo3's PanicException (a Rust panic inside egglog) is one; interrupts are not failures.
        if parsed.strict or isinstance(error, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        if isinstance(error, BudgetExceeded):
            report.stop_reason = error.limit
        report.fallback = f"{type(error).__name__}: {error}"
        message = f"eqsat: kept the unmodified graph because of {report.fallback}"
        logger.debug("eqsat: the failure behind the fallback", exc_info=error)
        logger.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        optimized = None
    result = optimized if optimized is not None else graph_module
    report.changed = optimized is not None
    if not report.changed:
        report.cost_after = report.cost_before
    report.fx_nodes_after = len(result.graph.nodes)
    report.ops_after = op_counts(result)
    return result, report
