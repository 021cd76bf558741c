"""`eqsat calibrate --report`: how well the calibrated cost model predicts Vela.

Each calibrated configuration (target, system config, memory mode, vela.ini) is
scored with its own calibration file, in three views against the pinned Vela:
- per op family, on held-out shapes that calibration never fitted (another
  seed of the same grid), measured on that configuration: Spearman rank
  correlation and mean absolute error;
- per zoo model, one table per configuration: the cost model's estimate of the
  graph at eqsat's insertion point against Vela's `cycles_total` for the TOSA
  of the stock lowering on that configuration. These come from the
  `eqsat bench` rows measured on it (`eqsat.bench.configuration_name`), in the
  runs/ folder of each results directory and of its subfolders (the zoo
  benchmarked apart per target or memory mode: `--out RESULTS/targets`,
  `RESULTS/modes`): each pass report keeps the graph it was given
  (`graph_before`), which is priced again with the current calibration, so a
  cost-model change is re-measured without rerunning the zoo. Rows without it
  fall back to the report's `cost_before` when measured with the current
  calibration file, and are left out (and counted) otherwise.
- per op family, over those models: the estimate of each op against Vela's
  per-layer `Op Cycles` of the stock TOSA, a layer attributed to the node
  whose name it carries (Vela names a layer after the tensor it writes, and
  suffixes the tensors it adds: `_copy`, `_int32`, ...).

The report is written where it is told, with a scatter plot of estimate
against Vela beside it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from eqsat.bench import configuration_name, io_layout_of
from eqsat.configuration import Configuration
from eqsat.extract import vela_cost
from eqsat.extract.cost import priced, value_costs
from eqsat.ir import Graph, Term, op_of
from eqsat.calibration.calibrate import DEFAULT_WORKDIR, measure
from eqsat.calibration.fit import chain_configs, observations, quality
from eqsat.calibration.grid import grid
from eqsat.extract.vela_cost import OpConfig



def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def heldout_scores(configuration: Configuration, workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2, scale: float = 1.0, progress: bool = False) -> dict[str, dict]:
    """Per family, on held-out shapes measured on configuration (now if not cached) and priced with its calibration:
    n, Spearman rank correlation and mean abs % error.

    Whole chains (`ctx_chain`) are scored on their total cycles, as `chain`.
    """
    model = vela_cost.VelaCalibratedCost(configuration)
    target = configuration.target
    samples = grid(target, "heldout", scale)
    records = measure(samples, configuration, workdir, jobs=jobs, progress=progress)
    pairs: dict[str, list[tuple[float, float]]] = {}
    for sample in samples:
        record = records.get(sample.key)
        if record is None or record["status"] != "ok":
            continue
        if sample.kind == "ctx_chain":
            predicted = sum(model.cost_of(c) for c in chain_configs(sample, target))
            pairs.setdefault("chain (rescale, binary, clamp)", []).append((predicted, float(record["cycles_total"])))
            continue
        for o in observations(record, target, "total"):
            if o.family.startswith(("isolated/", "context/")) or o.family not in model.data["models"]:
                continue
            pairs.setdefault(o.family, []).append((model.cost_of(OpConfig(o.family, o.features)), o.cycles))
    scores = {}
    for family, values in sorted(pairs.items()):
        predicted, measured = np.array([v[0] for v in values]), np.array([v[1] for v in values])
        scores[family] = {"n": len(values), "spearman": spearman(predicted, measured), "mape": quality(predicted, measured)["mape"]}
    return scores


def family_of(graph: Graph, value: int, target: str) -> str:
    """The calibration family that prices value (op_config's); "reshape" for a reshape (free unless copied)."""
    term = graph.terms[value]
    if term.op == "Reshape":
        return "reshape"
    return vela_cost.op_config(term, graph.types[value], [graph.types[a] for a in term.args], target).family


def _kind(term: Term) -> str:
    """The TOSA op a term reads, spelled as Vela's per-layer `Source` column is once lowercased ("conv2d")."""
    keyed = term.op in ("Opaque", "Elementwise", "Table", "Reduce") and term.attrs and isinstance(term.attrs[0], str)
    name = vela_cost.short_op_name(op_of(term.attrs[0])) if keyed else term.op
    return name.replace("_", "").lower()


def node_of_layer(layer: dict, graph: Graph, index: dict[str, int], readers: dict[int, list[int]]) -> int | None:
    """The node a Vela layer runs.

    Vela names a layer after the tensor it writes (the tensors it adds carry a suffix, `_copy`, `_int32`:
    the longest prefix at a '_' that names a node) and gives the op it came from (`source`). A layer that
    writes through fused ops (a CONV2D and its output RESCALE) is the nearest node of that op up the named
    node's operands; a copy Vela makes of a tensor for a reader (a RESHAPE kept as a MemoryCopy is named
    `<its input>_copy`) is that reader.
    """
    name = layer["name"]
    while name and name not in index:
        name = name.rpartition("_")[0]
    if not name:
        return None
    source = layer["source"].lower()
    frontier = [index[name]]
    for _ in range(3):
        for value in frontier:
            if _kind(graph.terms[value]) == source:
                return value
        frontier = [a for value in frontier for a in graph.terms[value].args]
    return next((r for r in readers.get(index[name], []) if _kind(graph.terms[r]) == source), index[name])


def _readers(graph: Graph) -> dict[int, list[int]]:
    readers: dict[int, list[int]] = {}
    for value, term in enumerate(graph.terms):
        for arg in term.args:
            readers.setdefault(arg, []).append(value)
    return readers


def attribute(graphs: list[Graph], layers: list[dict], target: str, model: vela_cost.VelaCalibratedCost) -> dict[str, list[float]]:
    """Per op family: [the model's estimate, Vela's Op Cycles] summed over the graphs' nodes and the layers
    attributed to them (`node_of_layer`); an intermediate pass (a layer named `#<id>`, e.g. of a transpose
    Vela decomposes) goes with the named layer of the same source op that follows it, as in calibration;
    layers no node names go to "unattributed"."""
    sums: dict[str, list[float]] = {}
    for graph in graphs:
        costs = value_costs(dict(enumerate(graph.terms)), graph.outputs, graph.types.__getitem__, model)
        for value, cost in costs.items():
            sums.setdefault(family_of(graph, value, target), [0.0, 0.0])[0] += cost
    indexes = [{name: i for i, name in enumerate(g.names)} for g in graphs]
    readers = [_readers(g) for g in graphs]
    passes: list[dict] = []  # intermediate passes ('#<id>') of the op whose named layer follows them
    for layer in layers:
        if layer["name"].startswith("#"):
            passes.append(layer)
            continue
        family = "unattributed"
        for graph, index, read in zip(graphs, indexes, readers):
            node = node_of_layer(layer, graph, index, read)
            if node is not None:
                family = family_of(graph, node, target)
                break
        mine = [p for p in passes if p["source"] == layer["source"]] if family != "unattributed" else []
        sums.setdefault(family, [0.0, 0.0])[1] += layer["cycles_total"] + sum(p["cycles_total"] for p in mine)
        sums.setdefault("unattributed", [0.0, 0.0])[1] += sum(p["cycles_total"] for p in passes if p not in mine)
        passes = []
    if passes:
        sums.setdefault("unattributed", [0.0, 0.0])[1] += sum(p["cycles_total"] for p in passes)
    return sums


def run_folders(results: list[Path]) -> list[Path]:
    """Where `eqsat bench` left its rows: the runs/ folder of each results directory, then those of its subfolders."""
    folders = []
    for root in map(Path, results):
        folders += [folder for folder in [root / "runs", *sorted(root.glob("*/runs"))] if folder.is_dir() and folder not in folders]
    return folders


def model_rows(configurations: list[Configuration], results: list[Path]) -> tuple[list[dict], int]:
    """Per benchmarked model and configuration: the estimate at the insertion point, Vela's cycles_total and, when
    the row keeps the graphs, the per-family attribution (`attribute`).

    Read from the rows `eqsat bench` measured on each configuration with contiguous inputs and outputs, in the
    `run_folders` of results (the first row of a model there that can be priced wins): the graphs the pass was given are priced with the
    configuration's current calibration; a row without them counts its reports' `cost_before` if measured with
    that calibration file, and is left out otherwise. Returns (rows, in the order of configurations, how many
    were left out).
    """
    rows, stale = [], 0
    by_name = {c.name: c for c in configurations}
    models = {c.name: vela_cost.VelaCalibratedCost(c) for c in configurations}
    digests = {c.name: vela_cost.calibration_digest(c) for c in configurations}
    seen: set[tuple[str, str]] = set()
    for folder in run_folders(results):
        for run in sorted(folder.glob("*.json")):
            row = json.loads(run.read_text())
            name = configuration_name(row)
            if name not in by_name or io_layout_of(row) != "contiguous" or (row["model"], name) in seen:
                continue
            model, reports = models[name], row["reports"]
            families = None
            if reports and all(r.get("graph_before") for r in reports):
                graphs = [Graph.from_data(r["graph_before"]) for r in reports]
                predicted = sum(priced(g, model) for g in graphs)
                families = attribute(graphs, row["stock"]["layers"], model.target, model)
            elif row.get("calibration") == digests[name]:
                estimates = [r["cost_before"] for r in reports]
                predicted = sum(estimates) if estimates and all(e is not None for e in estimates) else math.nan
            else:
                stale += 1
                continue
            rows.append({"model": row["model"], "configuration": by_name[name], "predicted": predicted,
                         "vela_cycles_total": row["stock"]["cycles_total"], "families": families, "folder": folder})
            seen.add((row["model"], name))
    order = list(by_name)
    return sorted(rows, key=lambda r: order.index(r["configuration"].name)), stale


def largest_miss(families: dict[str, list[float]] | None) -> str:
    """The family whose estimate is furthest from Vela's cycles, as 'family predicted/Vela'."""
    if not families:
        return "n/a"
    family, (predicted, measured) = max(families.items(), key=lambda item: abs(item[1][0] - item[1][1]))
    return f"{family} {predicted:.0f}/{measured:.0f}"


def _percent(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured if measured else float("nan")


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.5, 5.5))
    names = list(dict.fromkeys(r["configuration"].name for r in rows))
    for index, name in enumerate(names):
        mine = [r for r in rows if r["configuration"].name == name and math.isfinite(r["predicted"])]
        marker = "os^vD<>ph*"[index % 10]
        axes.scatter([r["vela_cycles_total"] for r in mine], [r["predicted"] for r in mine], marker=marker, label=name)
    low = min((r["vela_cycles_total"] for r in rows), default=1)
    high = max(r["vela_cycles_total"] for r in rows) if rows else 10
    axes.plot([low, high], [low, high], "k--", linewidth=0.8)
    axes.plot([low, high], [0.9 * low, 0.9 * high], "k:", linewidth=0.5)
    axes.plot([low, high], [1.1 * low, 1.1 * high], "k:", linewidth=0.5)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("Vela cycles_total (whole model)")
    axes.set_ylabel("cost model estimate (cost_before, summed)")
    axes.set_title("Zoo models: calibrated estimate vs Vela")
    axes.legend(fontsize="x-small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def model_table(rows: list[dict]) -> list[str]:
    """Markdown: per model of one configuration, the estimate, Vela's cycles_total, the error and the largest miss."""
    lines = ["| model | predicted | Vela | error | largest miss (estimate/Vela) |", "|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['predicted']:.0f} | {r['vela_cycles_total']} | "
                     f"{_percent(r['predicted'], r['vela_cycles_total']):+.1f}% | {largest_miss(r['families'])} |")
    return lines


def family_table(rows: list[dict]) -> list[str]:
    """Markdown: per op family, the estimate and Vela's Op Cycles summed over one configuration's models."""
    totals: dict[str, list[float]] = {}
    for r in rows:
        for family, (predicted, measured) in (r["families"] or {}).items():
            pair = totals.setdefault(family, [0.0, 0.0])
            pair[0] += predicted
            pair[1] += measured
    if not totals:
        return []
    lines = ["", "Per op family, summed over the models: each op's estimate (in its graph's context) against Vela's",
             "`Op Cycles` of the layers named after it.", ""]
    lines += ["| family | estimate | Vela | difference |", "|---|---:|---:|---:|"]
    for family, (p, m) in sorted(totals.items(), key=lambda item: -abs(item[1][0] - item[1][1])):
        lines.append(f"| {family} | {p:.0f} | {m:.0f} | {p - m:+.0f} |")
    return lines


def zoo_errors(rows: list[dict]) -> list[float]:
    """The absolute % errors of the rows' estimates against Vela's cycles_total (rows without an estimate left out)."""
    return [abs(_percent(r["predicted"], r["vela_cycles_total"])) for r in rows if math.isfinite(r["predicted"])]


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def write_report(configurations: list[Configuration], path: Path, results: list[Path], workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2) -> Path:
    """The report at path (+ calibration_zoo.png beside it) on each configuration, with its own calibration file: fit
    quality, held-out rank correlation, and the accuracy on the models benchmarked on it in results
    (`eqsat bench --out RESULTS`, or a subfolder of RESULTS: `run_folders`).

    A configuration goes by `Configuration.name` in the first column of its tables (a target alone: its default
    configuration), as `eqsat targets` reads them back (eqsat.targets.zoo_errors)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [c.name for c in configurations]
    data = {c.name: json.loads(vela_cost.calibration_path(c).read_text()) for c in configurations}
    heldout = {c.name: heldout_scores(c, workdir, jobs=jobs) for c in configurations}
    rows, stale = model_rows(configurations, results)
    plot_path = path.with_name("calibration_zoo.png")
    if rows:
        _plot(rows, plot_path)
    folders = ", ".join(f"{folder}/" for folder in run_folders(results)) or "(none found)"

    lines = ["# Cost model calibration against Vela", ""]
    lines += ["Generated by `eqsat calibrate --report`. Data: `eqsat/extract/calibration/<configuration>.json`, the configuration",
              "named by its target alone for the target's default system config and memory mode.", ""]
    lines += ["| target | Vela | system config | memory mode | samples (ok/all) | last `eqsat calibrate` run (samples cached earlier are not re-measured) |", "|---|---|---|---|---:|---:|"]
    for name, d in data.items():
        statuses = d["grid"]["statuses"]
        lines.append(f"| {name} | {d['vela_version']} | {d['system_config']} | {d['memory_mode']} | {statuses.get('ok', 0)}/{sum(statuses.values())} | {d['seconds'] / 60:.1f} min |")

    lines += ["", "## Whole models: estimate at eqsat's insertion point vs Vela", ""]
    lines += ["`predicted` is the sum over delegates of the pass reports' `cost_before`: the estimate of the graph",
              "eqsat is given, before any rewrite, with the configuration's own calibration. `Vela` is `cycles_total` of the",
              "stock lowering's TOSA on that configuration. Both come from the `eqsat bench` rows measured on it in",
              f"{folders}" + (f" ({stale} rows of an older calibration left out: rerun `eqsat bench` into their folder)." if stale else "."), ""]
    summary = []
    for name in names:
        errors = zoo_errors([r for r in rows if r["configuration"].name == name])
        if errors:
            within = sum(e <= 15 for e in errors)
            summary.append(f"| {name} | {np.mean(errors):.1f}% | {np.median(errors):.1f}% | {max(errors):.1f}% | {within}/{len(errors)} |")
    lines += ["| target | mean abs error | median abs error | max abs error | models within 15% |", "|---|---:|---:|---:|---:|", *summary]
    if rows:
        lines += ["", f"![estimate vs Vela]({plot_path.name})"]
    for configuration in configurations:
        mine = [r for r in rows if r["configuration"] == configuration]
        lines += ["", f"### {configuration.name}", ""]
        if not mine:
            lines.append(f"{configuration.describe()}: no `eqsat bench` rows measured on it.")
            continue
        where = ", ".join(sorted({f"{r['folder']}/" for r in mine}))
        lines += [f"{configuration.describe()}: {len(mine)} models, from {where}. The largest miss is the op family whose",
                  "estimate is furthest from Vela's per-layer `Op Cycles`.", ""]
        lines += model_table(mine)
        lines += family_table(mine)

    lines += ["", "## Held-out shapes: rank correlation per family", ""]
    lines += ["Shapes drawn with another seed and never fitted, measured on each configuration. Spearman ρ between the model's and Vela's `Op Cycles`; MAPE = mean absolute % error.", ""]
    families = sorted({f for s in heldout.values() for f in s})
    lines += ["| family | " + " | ".join(f"{n} n | {n} ρ | {n} MAPE" for n in names) + " |", "|---|" + "---:|---:|---:|" * len(names)]
    for family in families:
        cells = []
        for n in names:
            score = heldout[n].get(family)
            cells.append(f"{score['n']} | {_fmt(score['spearman'])} | {_fmt(score['mape'], 1)}%" if score else "- | - | -")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")

    lines += ["", "## Fitted models", ""]
    lines += ["cycles = Σ coef × feature, fitted by non-negative least squares weighted by 1/cycles: NPU cycles and",
              "memory-access cycles apart (one model per memory, SRAM, DRAM or flash, the access model being their largest),",
              "an op costing the larger of the two per pass (joint families: `Op Cycles` over whole graphs).", ""]
    for name, d in data.items():
        lines += [f"### {name}", "", "| family | model | features (coef) | n | R² | MAPE |", "|---|---|---|---:|---:|---:|"]
        for family, m in d["models"].items():
            if family.startswith("context/"):
                continue
            for part_name, part in (("NPU" if "access" in m else "Op Cycles", m), ("access", m.get("access"))):
                if part is None:
                    continue
                pieces = part.get("pieces", [part])
                terms = " **max** ".join(
                    (f"{p['memory']}: " if "memory" in p else "") + (", ".join(f"{f} ({c:.3g})" for f, c in zip(p["features"], p["coef"]) if c) or "0")
                    for p in pieces
                )
                lines.append(f"| {family} | {part_name} | {terms} | {part['n']} | {_fmt(part['r2'])} | {_fmt(part['mape'], 1)}% |")
        lines.append("")

    lines += ["## What Vela did in context", ""]
    lines += ["Mean cycles of the op under test inside a small graph (0 = folded or fused into a neighbour).", ""]
    lines += ["| context | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    contexts = sorted({f for d in data.values() for f in d["models"] if f.startswith("context/")})
    for family in contexts:
        lines.append(f"| {family.removeprefix('context/')} | " + " | ".join(_fmt(data[n]["models"].get(family, {}).get("coef", [None])[0], 1) for n in names) + " |")

    lines += ["", "## Transposes Vela cannot run", ""]
    for name, d in data.items():
        rejected = [json.loads(k) for k, ok in d["transpose_feasibility"].items() if not ok]
        accepted = sum(d["transpose_feasibility"].values())
        lines.append(f"- **{name}**: of {len(d['transpose_feasibility'])} transposes outside the Arm backend's always-supported region "
                     f"(a product of rank-2 dims above 2^16), Vela ran {accepted} and rejected {len(rejected)}"
                     + (": " + "; ".join(f"{s} perm {p} {dt}" for s, p, dt in rejected) if rejected else "") + ".")
    lines += ["", "## Limits", "", LIMITS, ""]
    path.write_text("\n".join(lines))
    return path


LIMITS = """- The cost model is context-free (it sees one e-node and its operand types). Vela's fusion is not:
  RESCALE, CLAMP and the int32 ADD/SUB/MUL between rescales are priced jointly from whole graphs
  (hand-built chains, and small blocks lowered by the Arm backend), i.e. for the neighbourhoods those
  graphs have. SLICE is priced as measured in front of typical consumers (mostly folded).
- RESHAPE costs 0; a reshape between a graph input and output is a MemoryCopy in Vela.
- CONV2D, DEPTHWISE_CONV2D, MATMUL, pools, reductions and RESIZE are linear proxies on a small grid:
  Vela's block configurations and weight streaming make them ±20-30% per op.
- U55 transposes outside the always-supported region are checked by compiling them once with Vela."""
