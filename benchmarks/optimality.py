"""`python -m benchmarks.optimality`: how far the shipped extraction is from the optimum, per zoo e-graph (#16 §4).

    python -m benchmarks.optimality [--models NAME ...] [--targets T ...] [--out FILE] [--term-limit N]

For each model and target it lowers the model with eqsat installed, keeps the
graphs the pass was given, and saturates each as the pass does
(`pipeline.saturated_view`). On that e-graph it compares, under the same cost
model (the sum of the chosen terms' costs, each e-class once):
- the shipped extraction (`eqsat.extract.extract`, as the pass runs it), and
- the optimum of `eqsat.extract.ilp.extract_optimal`: proven where its work
  limits allow, else the best selection it found and a proven lower bound.
It also gives the whole-graph cost (the layers Vela runs, `graph_cost`) after
refinement from each, as the pass refines. E-graphs with more candidate terms than
--term-limit are listed without a solve. The table goes to --out
(default benchmarks/results/optimality.md).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.zoo import ZOO
from eqsat import arm_pass, bench, lowering, pipeline
from eqsat.extract import cost as cost_models
from eqsat.extract import extract
from eqsat.extract.greedy import reachable_candidates
from eqsat.extract.ilp import extract_optimal
from eqsat.extract.refine import refine, refine_from

TERM_LIMIT = 450
"""E-graphs with more candidate terms than this are listed without a solve (default of --term-limit)."""

COLUMNS = (
    "model",
    "target",
    "terms",
    "shipped (extractor)",
    "optimum",
    "lower bound",
    "gap",
    "whole graph: shipped",
    "whole graph: from optimum",
)


def captured_graphs(name: str, target: str) -> list:
    """The graphs the pass is given when the zoo model is lowered for target (one per delegate)."""
    module, example_inputs = bench.build(ZOO[name].spec)
    samples = bench.calibration_inputs(ZOO[name].spec, example_inputs, None)
    exported = lowering.quantize(module, example_inputs, target, calibration_inputs=samples)
    eqsat_pass = arm_pass.install(target=target, keep_inputs=True)
    try:
        with tempfile.TemporaryDirectory(prefix="eqsat-optimality-") as workdir:
            lowering.lower(exported, target, workdir=workdir)
    finally:
        arm_pass.uninstall()
    return list(eqsat_pass.input_graphs)


def row(name: str, target: str, graph_module, term_limit: int) -> list[str]:
    """One table row: the shipped extraction against the optimum on the graph's saturated e-graph."""
    view, roots = pipeline.saturated_view(graph_module, target)
    model = cost_models.cost_model_for(target)
    term_cost = cost_models.term_costs(model, view.types)

    def graph_cost(selection) -> float:
        return cost_models.graph_cost(selection, roots, view.types.get, model, term_cost)

    def region_cost(selection, region, core) -> float:
        return cost_models.region_cost(selection, region, core, roots, view.types.get, model, term_cost)

    terms = sum(len(view.candidates[c]) for c in reachable_candidates(view.candidates, roots))
    shipped = extract(view.candidates, roots, term_cost)
    shipped_graph = refine_from(shipped.starts, view.candidates, roots, graph_cost, region_cost=region_cost).cost
    cells = [name, target, str(terms), f"{shipped.cost:,.0f} ({shipped.extractor})"]
    if terms > term_limit:
        return cells + ["not solved", "", "", f"{shipped_graph:,.0f}", ""]
    optimum = extract_optimal(view.candidates, roots, term_cost)
    if optimum.selection is None:
        return cells + ["none found", f"{optimum.bound:,.0f}", "", f"{shipped_graph:,.0f}", ""]
    from_optimum = refine({**shipped.selection, **optimum.selection}, view.candidates, roots, graph_cost, region_cost=region_cost).cost
    gap = shipped.cost / optimum.cost - 1.0
    proven = "proven" if optimum.proven else f"≤ {shipped.cost / optimum.bound - 1.0:.1%} proven"
    return cells + [
        f"{optimum.cost:,.0f}" + ("" if optimum.proven else " (best found)"),
        f"{optimum.bound:,.0f}",
        f"{gap:+.1%} ({proven})",
        f"{shipped_graph:,.0f}",
        f"{from_optimum:,.0f}",
    ]


HEADER = """# Extraction against the optimum (#16 §4)

Written by `python -m benchmarks.optimality`. Costs are the cost model's estimated inference cycles. "shipped" is
the extraction the pass makes (greedy, or the ILP within its node limit and 300-term cap), "optimum" the cheapest
acyclic selection (`eqsat.extract.ilp.extract_optimal`), both as the sum of the chosen terms' costs; "gap" is
shipped / optimum - 1. The whole-graph columns price the layers Vela runs (`eqsat.extract.cost.graph_cost`) after
refinement, from the shipped starts as the pass refines, and from the optimum.

"""


def table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return HEADER + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.optimality", description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(ZOO), metavar="NAME", help="zoo models (default: all)")
    parser.add_argument("--targets", nargs="+", default=list(bench.DEFAULT_TARGETS), choices=pipeline.ACCELERATORS)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/optimality.md"))
    parser.add_argument("--term-limit", type=int, default=TERM_LIMIT, help=f"largest e-graph solved, in candidate terms (default {TERM_LIMIT})")
    arguments = parser.parse_args(argv)
    rows = []
    for name in arguments.models or ZOO:
        for target in arguments.targets:
            for graph_module in captured_graphs(name, target):
                rows.append(row(name, target, graph_module, arguments.term_limit))
                print(" | ".join(rows[-1]), flush=True)
    arguments.out.write_text(table(rows))
    print(f"table: {arguments.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
