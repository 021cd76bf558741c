"""`eqsat bench`: Vela cycles with and without eqsat, per model and target.

A model is named by a builder spec, `path/to/file.py:function` or
`package.module:function`: a function of no arguments that returns
`(torch.nn.Module, example_inputs)`. The built-in zoo is such a set of
builders (`python -m benchmarks` hands it over); a user hands their own with
`eqsat bench --model SPEC`.

Each model x target runs in its own process (a crash loses one row, not the
run) and leaves its row as JSON under `<out>/runs/`; a rerun skips rows that
exist and were measured with the current calibration file of their target's
configuration, so an interrupted run resumes. A target runs at its compile
spec's default configuration unless the run names a system config, memory
mode or vela.ini (eqsat.configuration); a row of another configuration is
labelled with its `Configuration.name`. The rows are then gathered into
`results.json`, a markdown table `results.md` and PNG charts; the charts
are drawn from `results.json` alone (`plot`), so they can be redrawn without
rerunning the models.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
from tqdm import tqdm

from eqsat.configuration import Configuration
from eqsat.extract import vela_cost

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)

DEFAULT_TARGETS = ("ethos-u55-128", "ethos-u85-256")


class ModelSpecError(ValueError):
    """A builder spec that does not lead to a model: the message is one line for the user."""


def load_builder(spec: str):
    """The function a builder spec names (`path/to/file.py:function` or `package.module:function`)."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ModelSpecError(f"{spec!r} is not FILE.py:FUNCTION or MODULE:FUNCTION")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ModelSpecError(f"{spec}: no file {path}")
        loader = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loader)
        sys.path.insert(0, str(path.resolve().parent))  # its neighbours import as when it runs as a script
        try:
            loader.loader.exec_module(module)
        except ImportError as error:
            raise ModelSpecError(f"{spec}: {path}: {error}") from None
        finally:
            sys.path.remove(str(path.resolve().parent))
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as error:
            raise ModelSpecError(f"{spec}: cannot import {where}: {error}") from None
    builder = getattr(module, name, None)
    if not callable(builder):
        raise ModelSpecError(f"{spec}: {where} has no function {name}")
    return builder


def build(spec: str):
    """(module, example_inputs) from a builder spec, checked."""
    import torch

    built = load_builder(spec)()
    if not (isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module)):
        raise ModelSpecError(f"{spec} returned {type(built).__name__}, not (torch.nn.Module, example_inputs)")
    module, inputs = built
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if not all(isinstance(x, torch.Tensor) for x in inputs):
        raise ModelSpecError(f"{spec}: example_inputs must be tensors, not {[type(x).__name__ for x in inputs]}")
    return module.eval(), inputs


QUANTIZATIONS = ("a8w8", "a16w8")
"""The Arm quantizer configurations a benchmark can use (eqsat.lowering.QUANTIZATION_CONFIGS)."""

CALIBRATION_SAMPLES = 8
"""How many seeded random input tuples quantization calibrates on when the user gives none."""


def load_calibration_inputs(path: Path) -> list[tuple]:
    """The input tuples in a `torch.save`d file: a list of tuples of tensors (or of tensors, for one input)."""
    import torch

    if not Path(path).is_file():
        raise ModelSpecError(f"--calibration-inputs: no file {path}")
    try:
        loaded = torch.load(path, weights_only=True)
    except Exception as error:  # torch.load raises pickle, zip and weights-only errors alike
        raise ModelSpecError(f"--calibration-inputs: {path} is not a torch.save file of tensors: {error}") from None
    samples = [tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in loaded] if isinstance(loaded, (list, tuple)) else []
    if not samples or not all(isinstance(x, torch.Tensor) for sample in samples for x in sample):
        raise ModelSpecError(f"--calibration-inputs: {path} must hold a non-empty list of input tuples of tensors")
    return samples


def calibration_inputs(spec: str, example_inputs: tuple, path: Path | None) -> list[tuple]:
    """What quantization calibrates on: the samples in `path`, checked against the example inputs'
    shapes and dtypes, or CALIBRATION_SAMPLES seeded random tensors shaped like them (standard normal
    for floating-point inputs; integer inputs repeat the example)."""
    import torch

    if path is not None:
        samples = load_calibration_inputs(path)
        expected = [(tuple(x.shape), x.dtype) for x in example_inputs]
        for index, sample in enumerate(samples):
            if [(tuple(x.shape), x.dtype) for x in sample] != expected:
                got = [(tuple(x.shape), x.dtype) for x in sample]
                raise ModelSpecError(f"{spec}: calibration sample {index} is {got}, the example inputs are {expected}")
        return samples
    generator = torch.Generator().manual_seed(0)
    return [
        tuple(torch.randn(x.shape, generator=generator, dtype=x.dtype) if x.is_floating_point() else x for x in example_inputs)
        for _ in range(CALIBRATION_SAMPLES)
    ]


def run_one(
    spec: str,
    model: str,
    target: Configuration | str,
    row_path: Path,
    quantization: str = "a8w8",
    calibration_path: Path | None = None,
    io_layout: str = "contiguous",
) -> None:
    """Measure one model on one target and write its row (runs in a worker process)."""
    from eqsat.compare import compare

    module, example_inputs = build(spec)
    samples = calibration_inputs(spec, example_inputs, calibration_path)
    comparison = compare(
        model, module, example_inputs, target, quantization=quantization, calibration_inputs=samples, io_layout=io_layout
    )
    row = {**comparison.as_dict(), "quantization": quantization, "calibration_inputs": str(calibration_path or "random")}
    row_path.write_text(json.dumps(row, indent=1))


def _stem(model: str, configuration: str, io_layout: str) -> str:
    """A row's file name, without suffix: its model and configuration, and its io layout where not contiguous."""
    return f"{model}__{configuration}" + ("" if io_layout == "contiguous" else f"__{io_layout}")


def _row_path(out: Path, model: str, configuration: Configuration, io_layout: str = "contiguous") -> Path:
    return out / "runs" / f"{_stem(model, configuration.name, io_layout)}.json"


def io_layout_of(row: dict) -> str:
    """The memory format of the row's 4-D inputs and outputs (eqsat.lowering.IO_LAYOUTS)."""
    return row.get("io_layout", "contiguous")


def group_of(row: dict) -> str:
    """What a row's totals are summed over: its configuration, and its io layout where not contiguous."""
    layout = io_layout_of(row)
    return configuration_name(row) + ("" if layout == "contiguous" else f" {layout}")


def configuration_name(row: dict) -> str:
    """What a row was measured on: its target, or its configuration's name when that is not the target's default."""
    return row.get("configuration") or row["target"]


def _is_current(row_path: Path, target: Configuration, quantization: str, calibration_path: Path | None) -> bool:
    """The row exists and was measured with target's current cost-model calibration, this quantization and
    these calibration inputs (its file name says its io layout)."""
    if not row_path.exists():
        return False
    row = json.loads(row_path.read_text())
    return (
        row.get("calibration") == vela_cost.calibration_digest(target)
        and row.get("quantization", "a8w8") == quantization
        and row.get("calibration_inputs", "example inputs") == str(calibration_path or "random")
    )


def run(
    models: dict[str, str],
    targets: list[Configuration | str],
    out: Path,
    *,
    fresh: bool = False,
    quantization: str = "a8w8",
    calibration_path: Path | None = None,
    io_layouts: tuple[str, ...] = ("contiguous",),
) -> list[dict]:
    """Measure every model (name -> builder spec) on every target (a configuration, or a target at its default
    configuration) in each io layout (eqsat.lowering.IO_LAYOUTS), each in its own process; returns the rows."""
    (out / "runs").mkdir(parents=True, exist_ok=True)
    configurations = [t if isinstance(t, Configuration) else Configuration.of(t) for t in targets]
    jobs = [(m, c, layout) for m in models for c in configurations for layout in dict.fromkeys(io_layouts)]
    # workers import the specs' modules from where this process was started
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH", "")]))}
    failures = []
    with tqdm(jobs, desc="eqsat bench", unit="run") as progress:
        for model, target, layout in progress:
            progress.set_postfix_str(f"{model} {target.name} {layout}")
            row_path = _row_path(out, model, target, layout)
            if not fresh and _is_current(row_path, target, quantization, calibration_path):
                continue
            worker = subprocess.run(
                [sys.executable, "-m", "eqsat.bench", models[model], model, json.dumps(target.as_data()), str(row_path), quantization, layout]
                + ([str(calibration_path)] if calibration_path else []),
                capture_output=True,
                text=True,
                env=env,
            )
            if worker.returncode != 0:
                failures.append((model, f"{target.name} ({layout})", worker.stderr.strip().splitlines()[-1:]))
    for model, target, last_line in failures:
        print(f"eqsat bench: {model} on {target} failed: {' '.join(last_line)}", file=sys.stderr)
    rows = [json.loads(p.read_text()) for m, t, layout in jobs if (p := _row_path(out, m, t, layout)).exists()]
    return rows


def _change(before: int, after: int) -> str:
    if before == 0:
        return "n/a"
    return f"{100.0 * (after - before) / before:+.1f}%"


def _priced(row: dict) -> bool:
    """Whether the cost model priced every delegate of the row (not so for a configuration without calibration)."""
    return bool(row["reports"]) and all(r["cost_before"] is not None for r in row["reports"])


def _estimate(row: dict) -> str:
    """The cost model's totals before and after, with their errors against Vela's cycles_total."""
    if not _priced(row):
        return "n/a"
    before = sum(r["cost_before"] for r in row["reports"])
    after = sum(r["cost_after"] for r in row["reports"])
    return (
        f"{before:.0f} ({_change(row['stock']['cycles_total'], before)}) → "
        f"{after:.0f} ({_change(row['optimized']['cycles_total'], after)})"
    )


def _estimate_error(row: dict) -> str:
    """The cost model's estimate of the stock graph against Vela's cycles_total."""
    if not _priced(row):
        return "n/a"
    return _change(row["stock"]["cycles_total"], sum(r["cost_before"] for r in row["reports"]))


def _sign(change: float) -> int:
    return (change > 0) - (change < 0)


PREDICTION_TOLERANCE = 0.5
"""Cycles: an estimated change smaller than this predicts no change (estimates are sums of fitted floats)."""


def predicted_direction_agrees(row: dict) -> bool | None:
    """Whether the cost model predicted the direction of the change that Vela measured, when eqsat changed the
    graph (its estimate moved or Vela's cycles_total did): down, up or unchanged. None when nothing changed or the
    row is not priced. What extraction relies on is this ranking, more than the estimate's absolute error."""
    if not _priced(row):
        return None
    predicted = sum(r["cost_after"] for r in row["reports"]) - sum(r["cost_before"] for r in row["reports"])
    measured = row["optimized"]["cycles_total"] - row["stock"]["cycles_total"]
    predicted_sign = _sign(predicted) if abs(predicted) >= PREDICTION_TOLERANCE else 0
    if predicted_sign == 0 and measured == 0:
        return None
    return predicted_sign == _sign(measured)


def _rules_fired(row: dict) -> str:
    fired: dict[str, int] = {}
    for report in row["reports"]:
        for law, count in report["rules_fired"].items():
            fired[law] = fired.get(law, 0) + count
    return ", ".join(f"{law} ×{count}" for law, count in sorted(fired.items())) or "none"


def time_share(row: dict) -> float | None:
    """eqsat's share of the row's lowering time, in percent (None when the lowering took no measurable time)."""
    lowering = row["optimized"]["lowering_seconds"]
    return 100 * row["eqsat_seconds"] / lowering if lowering else None


def _time_share(row: dict) -> str:
    share = time_share(row)
    return "n/a" if share is None else f"{share:.1f}%"


def _boundary(row: dict) -> str:
    before, after = (row[side].get("boundary_transpose_cycles") for side in ("stock", "optimized"))
    return "n/a" if before is None else f"{before} → {after}"


COLUMNS = {
    "model": ("model", "---", lambda r: r["model"] + ("" if io_layout_of(r) == "contiguous" else f" ({io_layout_of(r)})")),
    "target": ("target", "---", configuration_name),
    "stock": ("inference cycles stock", "---:", lambda r: str(r["stock"]["cycles_total"])),
    "eqsat": ("inference cycles eqsat", "---:", lambda r: str(r["optimized"]["cycles_total"])),
    "change": ("change", "---:", lambda r: _change(r["stock"]["cycles_total"], r["optimized"]["cycles_total"])),
    "npu": (
        "NPU cycles stock → eqsat",
        "---",
        lambda r: f"{r['stock']['cycles_npu']} → {r['optimized']['cycles_npu']} ({_change(r['stock']['cycles_npu'], r['optimized']['cycles_npu'])})",
    ),
    "data movement": (
        "data-movement cycles stock → eqsat",
        "---",
        lambda r: f"{r['stock']['data_movement_cycles']} → {r['optimized']['data_movement_cycles']}",
    ),
    "boundary": ("boundary-transpose cycles stock → eqsat", "---", _boundary),
    "ops": (
        "TOSA ops stock → eqsat",
        "---",
        lambda r: f"{sum(r['stock']['tosa_ops'].values())} → {sum(r['optimized']['tosa_ops'].values())}",
    ),
    "estimate": ("cost model stock → eqsat (error vs Vela)", "---", _estimate),
    "estimate error": ("cost model error vs Vela (stock)", "---:", _estimate_error),
    "rules": ("rules fired", "---", _rules_fired),
    "time share": ("eqsat time / lowering", "---:", _time_share),
    "bit-exact": ("bit-exact", "---", lambda r: "yes" if r["bit_exact"] else f"NO: {r['mismatch']}"),
}
"""The table columns: (header, alignment, cell of a row). Inference cycles are Vela's `cycles_total`, the
sum over its layers of `Op Cycles` (the larger of NPU and memory-access cycles); data-movement cycles
are the `Op Cycles` of the layers that come from TRANSPOSE, CONCAT, SLICE and RESHAPE; boundary-transpose cycles
those of the transposes at the delegates' inputs and outputs (eqsat.compare.boundary_transposes), which an
io layout of channels_last removes (eqsat.lowering.IO_LAYOUTS). A model measured channels-last is named so."""

FULL = ("model", "target", "stock", "eqsat", "change", "npu", "data movement", "boundary", "ops", "estimate", "rules", "time share", "bit-exact")
HEADLINE = ("model", "target", "stock", "eqsat", "change", "npu", "data movement", "estimate error", "time share", "bit-exact")


def _table(rows: list[dict], columns: tuple[str, ...]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS[c][0] for c in columns) + " |",
        "|" + "|".join(COLUMNS[c][1] for c in columns) + "|",
    ]
    lines += ["| " + " | ".join(COLUMNS[c][2](row) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown_table(rows: list[dict]) -> str:
    """The full table: cycles, data movement, op counts, the estimate, rules fired, time share, bit-exactness."""
    return _table(rows, FULL)


def headline_table(rows: list[dict]) -> str:
    """The README's table: inference cycles before and after, NPU cycles, data movement, the estimate's error,
    time share, bit-exactness; then the totals over the rows."""
    return _table(rows, HEADLINE) + "\n" + summary(rows)


def io_layout_table(rows: list[dict]) -> str:
    """Per model and configuration measured in both io layouts: inference cycles stock -> eqsat contiguous, Vela's
    cycles of its boundary transposes, stock -> eqsat channels-last, and eqsat channels-last over eqsat contiguous."""
    by_key = {(r["model"], configuration_name(r), io_layout_of(r)): r for r in rows}
    lines = [
        "| model | target | contiguous: stock → eqsat | boundary transposes (stock, eqsat) | channels_last: stock → eqsat | eqsat channels_last / eqsat contiguous |",
        "|---|---|---|---|---|---:|",
    ]
    for (model, name, layout), nchw in by_key.items():
        nhwc = by_key.get((model, name, "channels_last"))
        if layout != "contiguous" or nhwc is None:
            continue
        stock, eqsat = nchw["stock"], nchw["optimized"]
        lines.append(
            f"| {model} | {name} | {stock['cycles_total']} → {eqsat['cycles_total']} | "
            f"{stock.get('boundary_transpose_cycles', 'n/a')}, {eqsat.get('boundary_transpose_cycles', 'n/a')} | "
            f"{nhwc['stock']['cycles_total']} → {nhwc['optimized']['cycles_total']} | "
            f"{nhwc['optimized']['cycles_total'] / eqsat['cycles_total']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    """Per target (and io layout where not contiguous: `group_of`): the rows, the rows slower or faster with eqsat, the
    ratio of summed inference cycles, the largest time share and the largest peak memory of the optimizer's worker."""
    lines = []
    for target in sorted({group_of(r) for r in rows}):
        mine = [r for r in rows if group_of(r) == target]
        slower = [r["model"] for r in mine if r["optimized"]["cycles_total"] > r["stock"]["cycles_total"]]
        faster = sum(r["optimized"]["cycles_total"] < r["stock"]["cycles_total"] for r in mine)
        shares = [share / 100 for share in map(time_share, mine) if share is not None]
        memory = [p for r in mine for p in [x.get("peak_memory_mb") for x in r["reports"]] if p is not None]
        directions = {r["model"]: predicted_direction_agrees(r) for r in mine}
        changed = [m for m, agrees in directions.items() if agrees is not None]
        against = [m for m in changed if not directions[m]]
        lines.append(
            f"- {target}: {len(mine)} models, {faster} faster, {len(slower)} slower{' (' + ', '.join(slower) + ')' if slower else ''}; "
            f"summed inference cycles eqsat/stock = {summed_ratio(mine):.3f}; "
            f"change predicted in Vela's direction in {len(changed) - len(against)} of {len(changed)} changed graphs"
            f"{' (not: ' + ', '.join(against) + ')' if against else ''}; largest eqsat time share {100 * max(shares, default=0):.1f}%; "
            f"largest optimizer peak memory {max(memory, default=0):.0f} MiB"
        )
    return "\n".join(lines) + "\n"


def ratio(row: dict) -> float:
    """A row's inference cycles eqsat/stock: below 1 eqsat made the lowering faster."""
    return row["optimized"]["cycles_total"] / row["stock"]["cycles_total"]


def summed_ratio(rows: list[dict]) -> float:
    """Summed inference cycles eqsat/stock over rows: each model weighs by its stock cycles."""
    return sum(r["optimized"]["cycles_total"] for r in rows) / sum(r["stock"]["cycles_total"] for r in rows)


PANELS_PER_ROW = 3
"""The zoo charts wrap their per-target panels into rows of this many, so that they stay one page wide."""


def _per_target_panels(rows: list[dict], value, path: Path, xlabel: str, title, reference: float | None) -> None:
    """One horizontal bar panel per target and configuration: each model's value(row), smallest on top, labelled;
    a vertical line at reference; title(rows of the panel) above it. Saved to path."""
    targets = sorted({group_of(r) for r in rows})
    columns = min(len(targets), PANELS_PER_ROW)
    lines = -(-len(targets) // columns)
    height = max(3.0, 0.25 * max(sum(group_of(r) == t for r in rows) for t in targets) + 1.2)
    figure, panels = plt.subplots(lines, columns, figsize=(5.5 * columns, height * lines), squeeze=False)
    for axes in panels.flat[len(targets):]:
        axes.set_visible(False)
    for axes, target in zip(panels.flat, targets):
        mine = sorted((r for r in rows if group_of(r) == target), key=lambda r: (value(r), r["model"]), reverse=True)
        values = [value(r) for r in mine]
        if reference is None:
            colours = ["tab:blue"] * len(values)
        else:
            colours = ["tab:green" if x < reference else "tab:red" if x > reference else "tab:gray" for x in values]
            axes.axvline(reference, color="black", linewidth=0.8)
        axes.barh([r["model"] for r in mine], values, color=colours)
        for position, x in enumerate(values):
            axes.text(x, position, f" {x:.3g}", va="center", fontsize=7)
        axes.set_xlim(0, 1.15 * max(reference or 0.0, *values))
        axes.tick_params(axis="y", labelsize=8)
        axes.set_xlabel(xlabel)
        axes.set_title(f"{target}: {title(mine)}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_ratios(rows: list[dict], path: Path) -> None:
    """Per target: each model's inference cycles eqsat/stock (below the line at 1.0: faster), the summed ratio in
    the panel's title."""
    _per_target_panels(rows, ratio, path, "Vela cycles_total, eqsat / stock (below 1: faster)",
                       lambda mine: f"summed eqsat/stock = {summed_ratio(mine):.3f}", reference=1.0)


def plot_time_share(rows: list[dict], path: Path) -> None:
    """Per target: eqsat's share of each model's lowering time, the largest in the panel's title."""
    share = lambda row: time_share(row) or 0.0  # noqa: E731
    _per_target_panels(rows, share, path, "eqsat time / lowering time (%)",
                       lambda mine: f"largest share {max(map(share, mine)):.1f}%", reference=None)


def plot(out: Path) -> list[Path]:
    """The zoo charts, cycles.png and time_share.png, drawn from `<out>/results.json` alone, so that they
    can be redrawn without rerunning the models."""
    rows = json.loads((out / "results.json").read_text())
    plot_ratios(rows, out / "cycles.png")
    plot_time_share(rows, out / "time_share.png")
    return [out / "cycles.png", out / "time_share.png"]


def cycles_by_source(measurement: dict) -> dict[str, int]:
    """Vela's inference cycles (`Op Cycles`) of a lowering, summed per source TOSA operator."""
    totals: dict[str, int] = {}
    for layer in measurement.get("layers", []):
        totals[layer["source"]] = totals.get(layer["source"], 0) + layer["cycles_total"]
    return totals


def where_cycles_went(row: dict) -> str:
    """A markdown table: per source TOSA operator, inference cycles stock and eqsat, and what happened."""
    stock, eqsat = cycles_by_source(row["stock"]), cycles_by_source(row["optimized"])
    lines = [f"#### {row['model']} on {configuration_name(row)}", "", "| source TOSA op | stock | eqsat | change | |", "|---|---:|---:|---:|---|"]
    for source in sorted(set(stock) | set(eqsat), key=lambda s: -max(stock.get(s, 0), eqsat.get(s, 0))):
        before, after = stock.get(source, 0), eqsat.get(source, 0)
        what = "vanished" if after == 0 < before else "appeared" if before == 0 < after else "dearer" if after > before else "cheaper" if after < before else ""
        lines.append(f"| {source} | {before} | {after} | {after - before:+d} | {what} |")
    return "\n".join(lines) + "\n"


def plot_where_cycles_went(row: dict, path: Path) -> None:
    """Two stacked bars, stock and eqsat, of inference cycles per source TOSA operator."""
    stock, eqsat = cycles_by_source(row["stock"]), cycles_by_source(row["optimized"])
    sources = sorted(set(stock) | set(eqsat), key=lambda s: -max(stock.get(s, 0), eqsat.get(s, 0)))
    figure, axes = plt.subplots(figsize=(5, 4.5))
    bottoms = [0, 0]
    for source in sources:
        heights = [stock.get(source, 0), eqsat.get(source, 0)]
        axes.bar(["stock", "eqsat"], heights, bottom=bottoms, label=source)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axes.set_ylabel("Vela inference cycles (Op Cycles)")
    axes.set_title(f"{row['model']} on {configuration_name(row)}", fontsize=9)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_results(rows: list[dict], out: Path) -> None:
    """results.json, results.md, headline.md (io_layouts.md when the rows have both io layouts) and the charts; the
    graphs the pass was given stay in runs/ only."""
    slim = [{**r, "reports": [{k: v for k, v in report.items() if k != "graph_before"} for report in r["reports"]]} for r in rows]
    (out / "results.json").write_text(json.dumps(slim, indent=1))
    with_layers = [r for r in rows if r["stock"].get("layers")]
    where = ["", "## Where the cycles went", "", "Vela's inference cycles per source TOSA operator, stock and eqsat (per-layer `Op Cycles`).", ""]
    where += [where_cycles_went(r) for r in with_layers]
    (out / "results.md").write_text(markdown_table(rows) + ("\n".join(where) if with_layers else ""))
    (out / "layers").mkdir(exist_ok=True)
    for row in with_layers:
        plot_where_cycles_went(row, out / "layers" / f"{_stem(row['model'], configuration_name(row), io_layout_of(row))}.png")
    (out / "headline.md").write_text(headline_table(rows))
    if len({io_layout_of(r) for r in rows}) > 1:
        (out / "io_layouts.md").write_text(io_layout_table(rows))
    plot(out)


def main(models: dict[str, str], targets: list[str], out: Path, **settings) -> int:
    """Run (settings as for `run`), write the results and print the table; 0 when every row exists and is bit-exact."""
    rows = run(models, targets, out, **settings)
    write_results(rows, out)
    print(markdown_table(rows))
    print(summary(rows))
    for row in rows:
        if row["stock"]["cpu_ops"]:
            print(f"eqsat bench: {row['model']} on {configuration_name(row)} is not fully delegated; on the CPU: {', '.join(row['stock']['cpu_ops'])}")
    print(f"results: {out / 'results.md'}, {out / 'results.json'}, charts in {out}")
    complete = len(rows) == len(models) * len(targets) * len(set(settings.get("io_layouts", ("contiguous",))))
    return 0 if complete and all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":  # worker process: SPEC NAME CONFIGURATION ROW QUANTIZATION IO_LAYOUT [CALIBRATION_INPUTS]
    try:
        configuration = vela_cost.recorded_configuration(json.loads(sys.argv[3]))
        calibration = Path(sys.argv[7]) if len(sys.argv) > 7 else None
        run_one(*sys.argv[1:3], configuration, Path(sys.argv[4]), sys.argv[5], calibration, io_layout=sys.argv[6])
    except ModelSpecError as error:
        print(f"eqsat bench: {error}", file=sys.stderr)
        sys.exit(2)
