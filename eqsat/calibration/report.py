"""`eqsat calibrate --report`: how well the calibrated cost model predicts Vela.

Two views, both against the pinned Vela:
- per op family, on held-out shapes that calibration never fitted (another
  seed of the same grid): Spearman rank correlation and mean absolute error;
- per zoo model and target: the cost model's estimate of the graph at eqsat's
  insertion point against Vela's `cycles_total` for the TOSA of the stock
  lowering. These come from the `eqsat bench` rows of a results directory:
  each pass report keeps the graph it was given (`graph_before`), which is
  priced again with the current calibration, so a cost-model change is
  re-measured without rerunning the zoo. Rows without it fall back to the
  report's `cost_before` when measured with the current calibration file, and
  are left out (and counted) otherwise.
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

from eqsat.configuration import Configuration
from eqsat.extract import vela_cost
from eqsat.extract.cost import priced, value_costs
from eqsat.ir import Graph, Term
from eqsat.calibration.calibrate import DEFAULT_WORKDIR, measure
from eqsat.calibration.fit import chain_configs, observations, quality
from eqsat.calibration.grid import grid
from eqsat.extract.vela_cost import OpConfig



def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def heldout_scores(target: str, workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2, scale: float = 1.0, progress: bool = False) -> dict[str, dict]:
    """Per family, on held-out shapes (measured now if not cached): n, Spearman rank correlation and mean abs % error.

    Whole chains (`ctx_chain`) are scored on their total cycles, as `chain`.
    """
    model = vela_cost.VelaCalibratedCost(target)
    samples = grid(target, "heldout", scale)
    records = measure(samples, Configuration.of(target), workdir, jobs=jobs, progress=progress)
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
    name = vela_cost.short_op_name(term.attrs[0].split("#", 1)[0]) if keyed else term.op
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


def model_rows(targets: list[str], results: Path) -> tuple[list[dict], int]:
    """Per benchmarked model and target: the estimate at the insertion point, Vela's cycles_total and, when the
    row keeps the graphs, the per-family attribution (`attribute`).

    Read from the rows `eqsat bench` left in results/runs/: the graphs the pass was given are priced with the
    current calibration; a row without them counts its reports' `cost_before` if measured with the
    current calibration file, and is left out otherwise. Returns (rows, how many were left out).
    """
    rows, stale = [], 0
    models = {t: vela_cost.VelaCalibratedCost(t) for t in targets}
    for run in sorted((Path(results) / "runs").glob("*.json")):
        row = json.loads(run.read_text())
        target = row["target"]
        if target not in targets or row.get("configuration", target) != target:  # another configuration's row: not this calibration's
            continue
        reports = row["reports"]
        families = None
        if reports and all(r.get("graph_before") for r in reports):
            graphs = [Graph.from_data(r["graph_before"]) for r in reports]
            predicted = sum(priced(g, models[target]) for g in graphs)
            families = attribute(graphs, row["stock"]["layers"], target, models[target])
        elif row.get("calibration") == vela_cost.calibration_digest(target):
            estimates = [r["cost_before"] for r in reports]
            predicted = sum(estimates) if estimates and all(e is not None for e in estimates) else math.nan
        else:
            stale += 1
            continue
        rows.append({"model": row["model"], "target": target, "predicted": predicted,
                     "vela_cycles_total": row["stock"]["cycles_total"], "families": families})
    return rows, stale


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

    figure, axes = plt.subplots(figsize=(5.5, 5))
    for target, marker in zip(sorted({r["target"] for r in rows}), "os^v"):
        mine = [r for r in rows if r["target"] == target and math.isfinite(r["predicted"])]
        axes.scatter([r["vela_cycles_total"] for r in mine], [r["predicted"] for r in mine], marker=marker, label=target)
    low = min([r["vela_cycles_total"] for r in rows] + [1])
    high = max(r["vela_cycles_total"] for r in rows) if rows else 10
    axes.plot([low, high], [low, high], "k--", linewidth=0.8)
    axes.plot([low, high], [0.9 * low, 0.9 * high], "k:", linewidth=0.5)
    axes.plot([low, high], [1.1 * low, 1.1 * high], "k:", linewidth=0.5)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("Vela cycles_total (whole model)")
    axes.set_ylabel("cost model estimate (cost_before, summed)")
    axes.set_title("Zoo models: calibrated estimate vs Vela")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def family_table(rows: list[dict], targets: list[str]) -> list[str]:
    """Markdown: per op family, the estimate and Vela's Op Cycles summed over the zoo models, per target."""
    totals: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        for family, (predicted, measured) in (r["families"] or {}).items():
            pair = totals.setdefault(family, {}).setdefault(r["target"], [0.0, 0.0])
            pair[0] += predicted
            pair[1] += measured
    if not totals:
        return []
    lines = ["", "### Per op family, summed over the models", ""]
    lines += ["Each op's estimate (in its graph's context) against Vela's `Op Cycles` of the layers named after it.", ""]
    lines += ["| family | " + " | ".join(f"{t} estimate | {t} Vela | difference" for t in targets) + " |", "|---|" + "---:|---:|---:|" * len(targets)]
    order = sorted(totals, key=lambda f: -max(abs(p - m) for p, m in totals[f].values()))
    for family in order:
        cells = []
        for t in targets:
            p, m = totals[family].get(t, (0.0, 0.0))
            cells.append(f"{p:.0f} | {m:.0f} | {p - m:+.0f}")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return lines


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def write_report(targets: list[str], path: Path, results: Path, workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2) -> Path:
    """The report at path (+ calibration_zoo.png beside it): fit quality, held-out rank correlation, and
    the accuracy on the models benchmarked in results (`eqsat bench --out results`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {t: json.loads(vela_cost.calibration_path(t).read_text()) for t in targets}
    heldout = {t: heldout_scores(t, workdir, jobs=jobs) for t in targets}
    rows, stale = model_rows(targets, results)
    plot_path = path.with_name("calibration_zoo.png")
    if rows:
        _plot(rows, plot_path)

    lines = ["# Cost model calibration against Vela", ""]
    lines += ["Generated by `eqsat calibrate --report`. Data: `eqsat/extract/calibration/<target>.json`.", ""]
    lines += ["| target | Vela | system config | memory mode | samples (ok/all) | last `eqsat calibrate` run (samples cached earlier are not re-measured) |", "|---|---|---|---|---:|---:|"]
    for t, d in data.items():
        statuses = d["grid"]["statuses"]
        lines.append(f"| {t} | {d['vela_version']} | {d['system_config']} | {d['memory_mode']} | {statuses.get('ok', 0)}/{sum(statuses.values())} | {d['seconds'] / 60:.1f} min |")

    lines += ["", "## Whole models: estimate at eqsat's insertion point vs Vela", ""]
    lines += ["`predicted` is the sum over delegates of the pass reports' `cost_before`: the estimate of the graph",
              "eqsat is given, before any rewrite. `Vela` is `cycles_total` of the stock lowering's TOSA. Both come from",
              f"the `eqsat bench` rows in {results}/runs/ measured with the current calibration"
              + (f" ({stale} rows of an older calibration left out: rerun `eqsat bench --out {results}`)." if stale else "."), ""]
    lines += ["Per target, the op family whose estimate is furthest from Vela's per-layer `Op Cycles`, as estimate/Vela, follows.", ""]
    lines += ["| model | " + " | ".join(f"{t} predicted | {t} Vela | error | {t} largest miss" for t in targets) + " |"]
    lines += ["|---|" + "---:|---:|---:|---|" * len(targets)]
    by_model: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["target"]] = r
    for model_name, per_target in by_model.items():
        cells = []
        for t in targets:
            r = per_target.get(t)
            cells.append(
                f"{r['predicted']:.0f} | {r['vela_cycles_total']} | {_percent(r['predicted'], r['vela_cycles_total']):+.1f}% | {largest_miss(r['families'])}"
                if r else "n/a | n/a | n/a | n/a"
            )
        lines.append(f"| {model_name} | " + " | ".join(cells) + " |")
    summary = []
    for t in targets:
        errors = [abs(_percent(r["predicted"], r["vela_cycles_total"])) for r in rows if r["target"] == t and math.isfinite(r["predicted"])]
        if errors:
            within = sum(e <= 15 for e in errors)
            summary.append(f"| {t} | {np.mean(errors):.1f}% | {np.median(errors):.1f}% | {max(errors):.1f}% | {within}/{len(errors)} |")
    lines += ["", "| target | mean abs error | median abs error | max abs error | models within 15% |", "|---|---:|---:|---:|---:|", *summary]
    if rows:
        lines += ["", f"![estimate vs Vela]({plot_path.name})"]
    lines += family_table(rows, targets)

    lines += ["", "## Held-out shapes: rank correlation per family", ""]
    lines += ["Shapes drawn with another seed and never fitted. Spearman ρ between the model's and Vela's `Op Cycles`; MAPE = mean absolute % error.", ""]
    families = sorted({f for s in heldout.values() for f in s})
    lines += ["| family | " + " | ".join(f"{t} n | {t} ρ | {t} MAPE" for t in targets) + " |", "|---|" + "---:|---:|---:|" * len(targets)]
    for family in families:
        cells = []
        for t in targets:
            score = heldout[t].get(family)
            cells.append(f"{score['n']} | {_fmt(score['spearman'])} | {_fmt(score['mape'], 1)}%" if score else "- | - | -")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")

    lines += ["", "## Fitted models", ""]
    lines += ["cycles = Σ coef × feature, fitted by non-negative least squares weighted by 1/cycles: NPU cycles and",
              "memory-access cycles apart (one model per memory, SRAM, DRAM or flash, the access model being their largest),",
              "an op costing the larger of the two per pass (joint families: `Op Cycles` over whole graphs).", ""]
    for t, d in data.items():
        lines += [f"### {t}", "", "| family | model | features (coef) | n | R² | MAPE |", "|---|---|---|---:|---:|---:|"]
        for family, m in d["models"].items():
            if family.startswith("context/"):
                continue
            for name, part in (("NPU" if "access" in m else "Op Cycles", m), ("access", m.get("access"))):
                if part is None:
                    continue
                pieces = part.get("pieces", [part])
                terms = " **max** ".join(
                    (f"{p['memory']}: " if "memory" in p else "") + (", ".join(f"{f} ({c:.3g})" for f, c in zip(p["features"], p["coef"]) if c) or "0")
                    for p in pieces
                )
                lines.append(f"| {family} | {name} | {terms} | {part['n']} | {_fmt(part['r2'])} | {_fmt(part['mape'], 1)}% |")
        lines.append("")

    lines += ["## What Vela did in context", ""]
    lines += ["Mean cycles of the op under test inside a small graph (0 = folded or fused into a neighbour).", ""]
    lines += ["| context | " + " | ".join(targets) + " |", "|---|" + "---:|" * len(targets)]
    contexts = sorted({f for d in data.values() for f in d["models"] if f.startswith("context/")})
    for family in contexts:
        lines.append(f"| {family.removeprefix('context/')} | " + " | ".join(_fmt(data[t]["models"].get(family, {}).get("coef", [None])[0], 1) for t in targets) + " |")

    lines += ["", "## Transposes Vela cannot run", ""]
    for t, d in data.items():
        rejected = [json.loads(k) for k, ok in d["transpose_feasibility"].items() if not ok]
        accepted = sum(d["transpose_feasibility"].values())
        lines.append(f"- **{t}**: of {len(d['transpose_feasibility'])} transposes outside the Arm backend's always-supported region "
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
