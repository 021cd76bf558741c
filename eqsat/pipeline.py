"""One optimizer run: FX -> e-graph -> saturate -> extract -> refine -> FX -> checks.

Never makes a graph worse: the original graph is always a candidate, and if
the extracted graph is not cheaper under the cost model, or anything fails,
the original graph comes back untouched (with the reason in the report and a
warning in the log). `strict=True` raises instead of falling back.
"""

from __future__ import annotations

import logging
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Iterator

from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.tosa.specification import TosaLoweringContext, get_context_spec
from torch import fx

from eqsat import bridge_fx, rules
from eqsat.extract import cost as cost_models
from eqsat.extract.egraph_view import EGraphView
from eqsat.extract import EXTRACTORS, extract
from eqsat.extract.refine import refine
from eqsat.ir import Term
from eqsat.report import Report, op_counts

logger = logging.getLogger("eqsat")

ACCELERATORS = tuple(
    [f"ethos-u55-{macs}" for macs in (32, 64, 128, 256)]
    + [f"ethos-u85-{macs}" for macs in (128, 256, 512, 1024, 2048)]
)


COST_TOLERANCE = 1e-9
"""Relative difference of two cost totals below which they count as equal."""


class EqsatError(RuntimeError):
    """An internal failure of the optimizer (raised only in strict mode)."""


@dataclass(frozen=True)
class Options:
    """How the optimizer runs.

    accept: "cheaper" writes the extracted graph back only when the cost model
    says it is cheaper; "always" writes it back whenever it is not more
    expensive (tests use it to exercise the round trip).
    rules: names of the rewrite rulesets to run (None: all; (): none).
    extractor: "greedy", "ilp" or "auto" (eqsat.extract.extract).
    merge_duplicates: let identical pure ops share one node (see bridge_fx.to_egraph).
    min_saving: with accept="cheaper", the fraction of the estimated cost the
    extracted graph must save. Smaller savings are within the cost model's
    error: on the zoo, a predicted 0.08% saving was a 2.2% loss in Vela
    (unet-skip, U85), while every predicted saving above 0.1% was a real one.
    verify: "vela" compiles each delegate's TOSA twice with the pinned Vela, as eqsat
    rewrote it and as it was, and lowers the one with fewer `cycles_total`
    (the report's `verification` says which, with both figures). It acts in
    an installed pipeline (`install()`, `EqsatPass`), where the delegate's
    TOSA exists; `optimize()` on a bare graph cannot verify. "none": trust
    the cost model.
    iteration_limit, enode_limit, time_limit: the saturation budget
    (rules.Budget). The report's `stop_reason` names the limit that stopped
    saturation ("iteration limit", "e-node limit", "time limit") or says
    "saturated"; either way the cheapest graph found so far is extracted.
    """

    iteration_limit: int = 30
    enode_limit: int = 200_000
    time_limit: float = 20.0
    strict: bool = False
    accept: str = "cheaper"
    rules: tuple[str, ...] | None = None
    extractor: str = "auto"
    merge_duplicates: bool = False
    min_saving: float = 0.001
    verify: str = "none"

    @classmethod
    def from_kwargs(cls, **kwargs) -> Options:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown eqsat option(s) {unknown}; known: {sorted(known)}")
        options = cls(**kwargs)
        if not 0.0 <= options.min_saving < 1.0:
            raise ValueError(f"min_saving must be in [0, 1), not {options.min_saving!r}")
        if options.verify not in ("none", "vela"):
            raise ValueError(f"verify must be 'none' or 'vela', not {options.verify!r}")
        if options.accept not in ("cheaper", "always"):
            raise ValueError(f"accept must be 'cheaper' or 'always', not {options.accept!r}")
        rules.rulesets_named(options.rules)
        if options.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {EXTRACTORS}, not {options.extractor!r}")
        return options

    @property
    def budget(self) -> rules.Budget:
        return rules.Budget(self.iteration_limit, self.enode_limit, self.time_limit)


def check_target(target: str) -> str:
    if target not in ACCELERATORS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(ACCELERATORS)}")
    return target


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


def original_cost(loaded: bridge_fx.Loaded, model: cost_models.CostModel) -> float:
    """The cost of the graph as it is (eqsat.extract.cost.graph_cost over its FX nodes)."""
    graph = {loaded.index_of[n]: loaded.terms[loaded.index_of[n]] for n in loaded.nodes}
    outputs = [i for i in loaded.outputs if i is not None]
    return cost_models.graph_cost(graph, outputs, lambda index: bridge_fx.tensor_type(loaded.nodes[index]), model)


def _check_outputs(original: fx.GraphModule, optimized: fx.GraphModule) -> None:
    """The optimized graph must return the same shapes and dtypes, slot for slot."""

    def signature(gm: fx.GraphModule) -> list:
        output = next(n for n in gm.graph.nodes if n.op == "output")
        slots = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
        return [bridge_fx.tensor_type(s) if isinstance(s, fx.Node) else repr(s) for s in slots]

    before, after = signature(original), signature(optimized)
    if before != after:
        raise EqsatError(f"output signature changed: {before} -> {after}")


def _rebuild(
    loaded: bridge_fx.Loaded, model: cost_models.CostModel, options: Options, report: Report
) -> fx.GraphModule | None:
    """Saturate, extract and write back; None when the original should be kept."""
    with _phase(report, "saturate"):
        saturation = rules.saturate(loaded.egraph, options.budget, rules.rulesets_named(options.rules))
    report.iterations, report.stop_reason = saturation.iterations, saturation.stop_reason
    if saturation.stop_reason != "saturated":
        logger.info(
            "eqsat: saturation stopped at the %s after %d iteration(s); extracting the best graph found so far",
            saturation.stop_reason,
            saturation.iterations,
        )
    report.rules_fired = dict(sorted(saturation.rule_matches.items()))

    with _phase(report, "extract"):
        view = EGraphView.of(loaded.egraph, len(loaded.nodes))
        report.egraph_enodes, report.egraph_classes = view.enode_count, len(view.candidates)

        term_cost = cost_models.term_costs(model, view.types)

        def graph_cost(selection: dict[str, Term]) -> float:
            return cost_models.graph_cost(selection, roots, view.types.get, model, term_cost)

        roots = [view.class_of_node[i] for i in loaded.outputs if i is not None]
        extraction = extract(view.candidates, roots, term_cost, extractor=options.extractor)
        report.extractor = extraction.extractor
    with _phase(report, "refine"):
        selection, report.cost_after = refine(extraction.selection, view.candidates, roots, graph_cost)

    # Both totals are float sums taken in different orders: equal graphs may differ in the last bits.
    noise = COST_TOLERANCE * max(1.0, abs(report.cost_before))
    accepted = report.cost_after < report.cost_before * (1.0 - options.min_saving) - noise or (
        options.accept == "always" and report.cost_after <= report.cost_before + noise
    )
    if not accepted:
        return None
    with _phase(report, "write_back"):
        return bridge_fx.to_fx(loaded, selection, view.class_of_node)


def optimize(graph_module: fx.GraphModule, target: str = "ethos-u55-128", **options) -> tuple[fx.GraphModule, Report]:
    """Optimize one FX graph for target; returns (graph module, report).

    The input graph module is never modified. The result is a new graph
    module when the optimizer found a cheaper equivalent graph, else the input.
    """
    check_target(target)
    parsed = Options.from_kwargs(**options)
    report = Report(target=target, fx_nodes_before=len(graph_module.graph.nodes), ops_before=op_counts(graph_module))
    try:
        model = cost_models.cost_model_for(target)
        report.cost_unit = model.unit
        with _tosa_lowering_context(target):
            with _phase(report, "load"):
                loaded = bridge_fx.to_egraph(graph_module, merge_duplicates=parsed.merge_duplicates)
            report.dialect = loaded.dialect
            report.cost_before = original_cost(loaded, model)
            optimized = _rebuild(loaded, model, parsed, report)
            if optimized is not None:
                with _phase(report, "check"):
                    _check_outputs(graph_module, optimized)
    except Exception as error:  # noqa: BLE001 - the fail-safe: any failure keeps the original graph
        if parsed.strict:
            raise
        report.fallback = f"{type(error).__name__}: {error}"
        message = f"eqsat: kept the unmodified graph because of {report.fallback}"
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
