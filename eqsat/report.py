"""What one eqsat run did, as plain data."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum

from eqsat.ir import Graph
from eqsat.ops import op_name
from eqsat.ops.nodes import Dialect


class StopReason(StrEnum):
    """Why saturation stopped: it saturated, or which of its limits (eqsat.rules.Budget) it reached. The pass's
    hard limits (eqsat.pipeline.BudgetExceeded) stop the whole pass with TIME_LIMIT or MEMORY_LIMIT. The values
    are what reports and JSON have always held."""

    SATURATED = "saturated"
    ITERATION_LIMIT = "iteration limit"
    TIME_LIMIT = "time limit"
    ENODE_LIMIT = "e-node limit"
    MEMORY_LIMIT = "memory limit"


@dataclass
class Report:
    """The record of one run of the optimizer on one graph.

    Costs are in the cost model's unit (`cost_unit`); `fallback` is the reason
    the original graph was returned untouched, or None. `stop_reason` says
    why saturation stopped (a StopReason: saturated or the limit), or which hard limit
    (time or memory) stopped the whole pass; "" when saturation did not run. `clock_stops`
    names the phases ("ilp", "refine") that a wall-clock safety net cut
    short instead of their work bound: their result depends on the machine.
    `phase_seconds["worker"]` is the cost of running them in a worker process.
    """

    target: str
    system_config: str = ""
    memory_mode: str = ""
    config_ini: str = ""
    """The configuration the run priced for, besides its target (eqsat.configuration; "" when it had none: an
    unknown target)."""
    dialect: Dialect | str = ""
    """The dialect the graph was given in (eqsat.ops.nodes.Dialect); "" when it was not read."""
    fx_nodes_before: int = 0
    fx_nodes_after: int = 0
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    rules_fired: dict[str, int] = field(default_factory=dict)
    iterations: int = 0
    stop_reason: StopReason | str = ""
    egraph_enodes: int = 0
    egraph_classes: int = 0
    cost_before: float | None = None
    cost_after: float | None = None
    cost_unit: str = ""
    extractor: str = ""
    clock_stops: list[str] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    changed: bool = False
    fallback: str | None = None
    peak_memory_mb: float | None = None
    """How far the optimizer's worker process grew beyond the process it was forked from (peak RSS), MiB;
    None when it ran in-process."""
    graph_before: Graph | None = None
    """The graph the pass was given, as terms: what `cost_before` priced, kept so that `eqsat calibrate
    --report` can price it again after the cost model changes (`as_dict` writes it as `Graph.as_data`, only
    when asked: 0.4 s at 20,000 nodes)."""
    verification: dict | None = None
    """With verify="vela": which graph the lowering kept ("eqsat" or "original") and Vela's
    `cycles_total` for both (`eqsat.arm_pass`); None when nothing was verified."""

    def as_dict(self) -> dict:
        """The report as JSON-able data."""
        data = asdict(replace(self, graph_before=None))
        data["graph_before"] = None if self.graph_before is None else self.graph_before.as_data()
        return data


def op_counts(graph_module) -> dict[str, int]:
    """How many call_function nodes of each target a graph has."""
    counts = Counter(op_name(n.target) for n in graph_module.graph.nodes if n.op == "call_function")
    return dict(sorted(counts.items()))
