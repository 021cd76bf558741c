"""How the bridge and the extractor scale: FX -> e-graph -> FX on synthetic graphs of N nodes, and eqsat.optimize on stress graphs.

    .venv/bin/python -m benchmarks.scale --nodes 2000 20000
    .venv/bin/python -m benchmarks.scale --suite stress                  # only the stress classes
    .venv/bin/python -m benchmarks.scale --suite stress --models all     # every size of every model class

Builds an edge-ATen graph of repeated blocks (permute, neg, cat, slice),
then times loading, saturation, extraction and write-back under two budgets:
"pass", the pass's default budget (eqsat.pipeline.Options), which is the
e-graph the pass extracts from; and "stress", three iterations with the
e-node limit lifted, which grows the e-graph about six times larger.
Extraction (`extract_s`) is reading the e-graph's tables into terms
(`read_s`) plus greedy selection under the cost model (`choose_s`).
Wall-clock numbers: a benchmark, never a test. The synthetic graphs then also
run end to end through `eqsat.optimize` under the pass's default options
(write-back included), in the stress suite's table.

The stress suite (`--suite stress`) runs `eqsat.optimize` under the pass's
default options on graph classes at real sizes and reports the report's
time per phase, iterations and stop reason, and the peak resident memory
the run added: in the caller (Linux VmHWM after resetting it through
/proc/self/clear_refs, minus the resident size before the run: loading and
write-back) and in the optimizer's forked worker (the report's
`peak_memory_mb`: saturation, extraction, refinement). Both count egglog's
native memory, which tracemalloc would not; each row runs in a fresh
process, after a warm-up optimize of a tiny graph:
- same-parameter: 300 RESCALEs (or TRANSPOSEs, adjacent SLICEs of one
  tensor, two-input CONCATs) with identical parameters feeding concats of
  2..16 inputs (eqsat.stress_graphs), the shapes that made per-arity and
  per-position rules explode;
- gru-<n>: the zoo's two-layer unrolled GRU (hoisted input projection sliced
  per step, sigmoid/tanh TABLEs, MUL/ADD/SUB, LayerNorm) over n steps;
- band-mlp-<n>: the zoo's per-band MLP over n bands, circular shift as slice + concat;
- transformer-<n>: an encoder of n pre-norm layers (attention with head
  permutes, FFN, two LayerNorms);
- synthetic-<n>: the synthetic graph of about n nodes (run by `--suite synthetic`).
By default the model classes run at one size each (DEFAULT_STRESS_MODELS:
gru-16, band-mlp-32, transformer-4), which keeps the whole benchmark near
10 minutes on 2 cores; `--models all` adds gru-8, band-mlp-16 and
transformer-12.
The model classes are quantized and lowered through the Arm pipeline up to
the point where eqsat's pass is handed the TOSA graph (keep_inputs=True; the
lowering stops there), then optimized on their own; `capture s` is that
quantization and partial lowering, outside eqsat.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch import fx
from torch.fx.node import map_aggregate

import eqsat
from eqsat import arm_pass, bridge_fx, lowering, rules
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
    bridge_fx.to_fx(loaded, extraction.selection, view.class_of_node, types=view.types)
    times["write_back_s"] = time.perf_counter() - start
    times["iterations"] = float(saturation.iterations)
    return times


class TransformerEncoder(torch.nn.Module):
    """n pre-norm encoder layers: x + attention(LN(x)), then x + FFN(LN(x)); the zoo's attention (head permutes)."""

    def __init__(self, layers: int, dim: int = 32, heads: int = 4):
        super().__init__()
        from benchmarks.zoo.conformer_block import MultiHeadSelfAttention

        self.attention = torch.nn.ModuleList(MultiHeadSelfAttention(dim, heads) for _ in range(layers))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(dim) for _ in range(layers))
        self.ffn = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.ReLU(), torch.nn.Linear(2 * dim, dim)) for _ in range(layers)
        )

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        for attention, norm, ffn in zip(self.attention, self.norms, self.ffn):
            sequence = sequence + attention(sequence)
            sequence = sequence + ffn(norm(sequence))
        return sequence


STRESS_MODELS = ("gru-8", "gru-16", "band-mlp-16", "band-mlp-32", "transformer-4", "transformer-12")
"""The model classes of the stress suite (`--models all`)."""

DEFAULT_STRESS_MODELS = ("gru-16", "band-mlp-32", "transformer-4")
"""The ones run by default: capturing a graph (quantizing and lowering it) takes 20 s to 3 min each on 2
cores, so the default keeps the whole benchmark near 10 minutes."""

SAME_PARAMETER_KINDS = ("rescale", "transpose", "adjacent-slice", "nested-concat")


def stress_model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A model class of the stress suite by name (`gru-<steps>`, `band-mlp-<bands>`, `transformer-<layers>`),
    seeded, in eval mode, with its example inputs."""
    from benchmarks.zoo.bandwise_mlp import BandwiseMlp
    from benchmarks.zoo.emg_gru_gesture import EmgGruGesture

    torch.manual_seed(0)
    family, size = name.rsplit("-", 1)
    n = int(size)
    if family == "gru":  # the zoo model frames 8 samples per step
        return EmgGruGesture().eval(), (torch.randn(1, 8, 8 * n),)
    if family == "band-mlp":
        return BandwiseMlp(bands=n).eval(), (torch.randn(1, 8, n, 8),)
    if family == "transformer":
        return TransformerEncoder(n).eval(), (torch.randn(1, 16, 32),)
    raise ValueError(f"unknown stress model {name!r}; known: {STRESS_MODELS}")


class _Captured(Exception):
    """Raised by the capturing pass once it holds the graph: the rest of the lowering (Vela) is not needed."""


def captured_graph(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], target: str, workdir: Path) -> fx.GraphModule:
    """The TOSA graph the Arm pipeline hands the pass when it lowers model for target (its first delegate's).

    eqsat is installed with keep_inputs=True, and its pass stops the lowering
    as soon as it has kept the graph, so neither the pass nor Vela runs.
    """
    eqsat_pass = eqsat.install(target, keep_inputs=True)

    def keep_and_stop(graph_module: fx.GraphModule):
        eqsat_pass.input_graphs.append(arm_pass.copy_graph(graph_module))
        raise _Captured

    eqsat_pass.call = keep_and_stop
    try:
        lowering.lower(lowering.quantize(model, inputs, target), target, workdir=workdir)
    except Exception as error:  # the pass manager wraps _Captured in a plain Exception
        cause = error
        while cause is not None and not isinstance(cause, _Captured):
            cause = cause.__cause__
        if cause is None:
            raise
    finally:
        eqsat.uninstall()
    if not eqsat_pass.input_graphs:
        raise RuntimeError("the Arm pipeline never ran the pass")
    return eqsat_pass.input_graphs[0]


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _children_cpu_seconds() -> float:
    """CPU time of this process's finished children (the optimizer's workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def optimize_measured(graphs: list[fx.GraphModule], target: str) -> dict[str, object]:
    """eqsat.optimize on each graph (one per delegate): summed phase seconds, e-graph size, iterations, stop
    reasons, and the peak resident memory the runs added (MB)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # reset VmHWM, the peak resident size, to the current one
        resident_before = _status_kb("VmRSS")
    except OSError:
        resident_before = None
    row: dict[str, object] = {"fx_nodes": 0, "enodes": 0, "iterations": 0, "stop": set(), "phases": {}, "worker_mb": 0.0}
    cpu_start = time.process_time() + _children_cpu_seconds()
    start = time.perf_counter()
    for graph in graphs:
        _, report = eqsat.optimize(graph, target=target)
        row["fx_nodes"] += report.fx_nodes_before
        row["enodes"] += report.egraph_enodes
        row["iterations"] += report.iterations
        row["worker_mb"] = max(row["worker_mb"], report.peak_memory_mb or 0.0)
        row["stop"].add(report.stop_reason if not report.fallback else f"fallback: {report.fallback[:40]}")
        for phase, seconds in report.phase_seconds.items():
            row["phases"][phase] = row["phases"].get(phase, 0.0) + seconds
    row["total_s"] = time.perf_counter() - start
    row["cpu_s"] = time.process_time() + _children_cpu_seconds() - cpu_start
    if resident_before is not None:
        row["peak_mb"] = (_status_kb("VmHWM") - resident_before) / 1024
    else:  # no /proc: the process-wide peak, an upper bound
        row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


PHASES = ("load", "saturate", "extract", "refine", "write_back", "check")


def stress_row(name: str, target: str) -> dict[str, object]:
    """One row of the stress table, measured in the calling process: build or capture the graph, then optimize it."""
    from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification

    from eqsat import stress_graphs

    def same_parameter(kind: str, count: int) -> fx.GraphModule:
        with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT")):
            return stress_graphs.same_parameter_graph(kind, count)

    eqsat.optimize(same_parameter("rescale", 2), target=target)  # warm-up: reads (or builds) the rules cache
    started = time.perf_counter()
    if name.startswith("same-parameter-"):
        graph = same_parameter(name.removeprefix("same-parameter-"), 300)
    elif name.startswith("synthetic-"):
        graph = synthetic_graph(int(name.removeprefix("synthetic-")))
    else:
        model, inputs = stress_model(name)
        with tempfile.TemporaryDirectory(prefix="eqsat-scale-") as workdir:
            graph = captured_graph(model, inputs, target, Path(workdir))
    capture_s = time.perf_counter() - started
    row = optimize_measured([graph], target)
    row["capture_s"], row["stop"] = capture_s, sorted(row["stop"])
    return row


def stress_suite(target: str, model_names: tuple[str, ...] = DEFAULT_STRESS_MODELS) -> None:
    """Print the stress table."""
    names = [f"same-parameter-{kind}" for kind in SAME_PARAMETER_KINDS] + list(model_names)
    optimize_table(f"Stress suite, eqsat.optimize for {target} under the default options", names, target)


def optimize_table(title: str, names: list[str], target: str) -> None:
    """Print eqsat.optimize per phase on graphs named as stress_row names them: one row per graph, each
    measured in a fresh process (so that the peak resident memory a run adds is not hidden by memory an
    earlier row freed). `cpu s` is the CPU time of the caller and of the optimizer's worker together."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    print(f"\n{title}")
    print(
        "| graph | fx nodes | e-nodes | iterations | stop | " + " | ".join(f"{p} s" for p in PHASES)
        + " | total s | cpu s | caller peak +MB | worker peak +MB | capture s |"
    )
    print("|---|" + "---:|" * 3 + "---|" + "---:|" * (len(PHASES) + 5))
    context = multiprocessing.get_context("spawn")
    for name in names:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            row = pool.submit(stress_row, name, target).result()
        phases = " | ".join(f"{row['phases'].get(p, 0.0):.2f}" for p in PHASES)
        print(
            f"| {name} | {row['fx_nodes']} | {row['enodes']} | {row['iterations']} | {', '.join(row['stop'])} | {phases} "
            f"| {row['total_s']:.2f} | {row['cpu_s']:.2f} | {row['peak_mb']:.0f} | {row['worker_mb']:.0f} | {row['capture_s']:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--budget", choices=sorted(BUDGETS), nargs="+", default=list(BUDGETS))
    parser.add_argument("--suite", choices=("synthetic", "stress"), nargs="+", default=["synthetic", "stress"])
    parser.add_argument("--target", default="ethos-u55-128", help="the target of eqsat.optimize (stress suite, synthetic graphs end to end)")
    parser.add_argument(
        "--models", nargs="+", default=list(DEFAULT_STRESS_MODELS), help=f"the stress suite's model classes, or all: {', '.join(STRESS_MODELS)}"
    )
    arguments = parser.parse_args()
    if "synthetic" in arguments.suite:
        synthetic_suite(arguments)
    if "stress" in arguments.suite:
        stress_suite(arguments.target, STRESS_MODELS if arguments.models == ["all"] else tuple(arguments.models))


def synthetic_suite(arguments: argparse.Namespace) -> None:
    counts = ["fx_nodes", "iterations", "enodes"]
    columns = [*counts, "load_s", "saturate_s", "read_s", "choose_s", "extract_s", "write_back_s"]
    print("| budget | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for budget in arguments.budget:
        for count in arguments.nodes:
            row = measure(count, BUDGETS[budget])
            cells = (f"{row[c]:.0f}" if c in counts else f"{row[c]:.2f}" for c in columns)
            print(f"| {budget} | " + " | ".join(cells) + " |", flush=True)
    names = [f"synthetic-{count}" for count in arguments.nodes]
    optimize_table(f"Synthetic graphs end to end, eqsat.optimize for {arguments.target} under the default options", names, arguments.target)


if __name__ == "__main__":
    main()
