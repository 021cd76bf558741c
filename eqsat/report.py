"""What one eqsat run did, as plain data."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from eqsat.ir import Graph
from eqsat.ops import op_name
from eqsat.ops.nodes import Dialect

if TYPE_CHECKING:  # the report is plain data: it does not load the rules to name a stop reason
    from eqsat.rules import StopReason


@dataclass
class Report:
    """The record of one run of the optimizer on one graph.

    Costs are in the cost model's unit (`cost_unit`); `fallback` is the reason
    the original graph was returned untouched, or None. `stop_reason` says
    why saturation stopped (eqsat.rules.StopReason: saturated or the limit), or which hard limit
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
    opaque_reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    """For each op the bridge read as opaque (no rule looks into it), how many of its nodes were left so for each
    reason (eqsat.bridge_fx.OpaqueReason: unsupported op, unsupported dtype, no tensor value, dynamic shape,
    unsupported arguments), by op name; empty when the graph was not read."""
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
    boundary_transposes: dict[str, float] = field(default_factory=dict)
    """The TRANSPOSEs at the graph's inputs and outputs that the returned graph keeps (eqsat.ir.Graph.boundary_transposes),
    by node name, with their estimated cost: the NCHW <-> NHWC transposes of a model exported with contiguous 4-D
    inputs or outputs, which no rewrite inside a delegate removes and exporting it channels-last does
    (eqsat.lowering.IO_LAYOUTS). Empty when the graph was not priced."""
    verification: dict | None = None
    """With verify="vela": which graph the lowering kept ("eqsat" or "original") and Vela's
    `cycles_total` for both (`eqsat.arm_pass`); None when nothing was verified."""

    def __str__(self) -> str:
        """The report as text, one fact a line: what ran, what it found, what it could not look into."""
        if self.fallback is not None:
            outcome = f"original kept: {self.fallback}"
        else:
            outcome = "optimized" if self.changed else "original kept: no cheaper graph found"
        lines = [f"eqsat for {self.target or 'no target'} ({self.dialect or 'not read'}): {outcome}"]
        lines.append(f"  FX nodes: {self.fx_nodes_before} before, {self.fx_nodes_after} after")
        if self.stop_reason:
            lines.append(
                f"  saturation: {self.iterations} iteration(s), {self.stop_reason}; "
                f"{self.egraph_enodes} e-nodes in {self.egraph_classes} e-classes"
            )
        if self.cost_before is not None:
            after = "not priced" if self.cost_after is None else f"{self.cost_after:g}"
            lines.append(f"  cost ({self.cost_unit}): {self.cost_before:g} before, {after} after")
        fired = ", ".join(f"{rule} {count}" for rule, count in self.rules_fired.items() if count)
        lines.append(f"  rules fired: {fired or 'none'}")
        if self.boundary_transposes:
            kept = ", ".join(f"{name} ({cost:g})" for name, cost in self.boundary_transposes.items())
            lines.append(f"  boundary transposes kept (export channels-last to remove them): {kept}")
        for op, reasons in self.opaque_reasons.items():
            why = ", ".join(f"{count} {reason}" for reason, count in reasons.items())
            lines.append(f"  left opaque: {op} ({why})")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """The report as JSON-able data."""
        data = asdict(replace(self, graph_before=None))
        data["graph_before"] = None if self.graph_before is None else self.graph_before.as_data()
        return data


def op_counts(graph_module) -> dict[str, int]:
    """How many call_function nodes of each target a graph has."""
    counts = Counter(op_name(n.target) for n in graph_module.graph.nodes if n.op == "call_function")
    return dict(sorted(counts.items()))
