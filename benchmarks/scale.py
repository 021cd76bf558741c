"""How the bridge and the extractor scale: FX -> e-graph -> FX on synthetic graphs of N nodes.

    .venv/bin/python -m benchmarks.scale --nodes 2000 20000

Builds an edge-ATen graph of repeated blocks (permute, neg, cat, slice),
then times loading, saturation, extraction and write-back under two budgets:
"pass", the pass's default budget (eqsat.pipeline.Options), which is the
e-graph the pass extracts from; and "stress", three iterations with the
e-node limit lifted, which grows the e-graph about six times larger.
Extraction (`extract_s`) is reading the e-graph's tables into terms
(`read_s`) plus greedy selection under the cost model (`choose_s`).
Wall-clock numbers: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch import fx
from torch.fx.node import map_aggregate

from eqsat import bridge_fx, rules
from eqsat.pipeline import Options
from eqsat.extract import cost as cost_models
from eqsat.extract import extract
from eqsat.extract.egraph_view import EGraphView

aten = torch.ops.aten

BUDGETS = {"pass": Options().budget, "stress": rules.Budget(iterations=3, enodes=2_000_000, seconds=600)}


def synthetic_graph(node_count: int) -> fx.GraphModule:
    """A chain of small data-movement blocks with about node_count nodes."""
    graph = fx.Graph()
    mode = FakeTensorMode()

    def call(target, *args):
        node = graph.call_function(target, args)
        fake = map_aggregate(args, lambda a: a.meta["val"] if isinstance(a, fx.Node) else a)
        with mode:
            node.meta["val"] = target(*fake)
        return node

    value = graph.placeholder("x")
    with mode:
        value.meta["val"] = torch.empty((1, 4, 8, 8), dtype=torch.int8)
    while len(graph.nodes) < node_count:
        t = call(aten.permute_copy.default, value, [0, 2, 3, 1])
        n = call(aten.neg.default, t)
        back = call(aten.permute_copy.default, n, [0, 3, 1, 2])
        joined = call(aten.cat.default, [back, value], 1)
        value = call(aten.slice_copy.Tensor, joined, 1, 0, 4)
    graph.output((value,))
    return fx.GraphModule(torch.nn.Module(), graph)


def measure(node_count: int, budget: rules.Budget) -> dict[str, float]:
    gm = synthetic_graph(node_count)
    model = cost_models.cost_model_for("ethos-u55-128")
    times: dict[str, float] = {"fx_nodes": float(len(gm.graph.nodes))}
    start = time.perf_counter()
    loaded = bridge_fx.to_egraph(gm)
    times["load_s"] = time.perf_counter() - start
    start = time.perf_counter()
    saturation = rules.saturate(loaded.egraph, budget)
    times["saturate_s"] = time.perf_counter() - start
    start = time.perf_counter()
    view = EGraphView.of(loaded.egraph, len(loaded.nodes))
    times["read_s"] = time.perf_counter() - start
    times["enodes"] = float(view.enode_count)

    term_cost = cost_models.term_costs(model, view.types)
    roots = [view.class_of_node[i] for i in loaded.outputs if i is not None]
    extraction = extract(view.candidates, roots, term_cost, extractor="greedy")
    times["extract_s"] = time.perf_counter() - start
    times["choose_s"] = times["extract_s"] - times["read_s"]
    start = time.perf_counter()
    bridge_fx.to_fx(loaded, extraction.selection, view.class_of_node)
    times["write_back_s"] = time.perf_counter() - start
    times["iterations"] = float(saturation.iterations)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--budget", choices=sorted(BUDGETS), nargs="+", default=list(BUDGETS))
    arguments = parser.parse_args()
    counts = ["fx_nodes", "iterations", "enodes"]
    columns = [*counts, "load_s", "saturate_s", "read_s", "choose_s", "extract_s", "write_back_s"]
    print("| budget | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for budget in arguments.budget:
        for count in arguments.nodes:
            row = measure(count, BUDGETS[budget])
            cells = (f"{row[c]:.0f}" if c in counts else f"{row[c]:.2f}" for c in columns)
            print(f"| {budget} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
