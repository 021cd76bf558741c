"""eqsat bench: resuming, and the headline table's honesty (regressions shown, estimates beside Vela)."""

import json
import re
import subprocess
import sys

import pytest
import torch

from eqsat import bench
from eqsat.extract import vela_cost

TARGET = "ethos-u55-128"


def measurement(cycles: int) -> dict:
    return {
        "delegates": 1,
        "cpu_ops": [],
        "cycles_npu": cycles,
        "cycles_total": cycles + 100,
        "data_movement_cycles": cycles // 4,
        "tosa_ops": {"TRANSPOSE": 2, "CONV2D": 1},
        "lowering_seconds": 10.0,
    }


def row(model: str, stock: int, optimized: int, calibration: str) -> dict:
    report = {"rules_fired": {"transpose-compose": 3}, "cost_before": 900.0, "cost_after": 1100.0, "phase_seconds": {"saturate": 1.0}}
    return {
        "model": model,
        "target": TARGET,
        "stock": measurement(stock),
        "optimized": measurement(optimized),
        "reports": [report],
        "calibration": calibration,
        "bit_exact": True,
        "mismatch": None,
        "eqsat_seconds": 1.0,
        "calibration_inputs": "random",
    }


def test_table_shows_a_regression_and_the_estimate_against_vela():
    table = bench.markdown_table([row("m", 1000, 1200, "x")])
    line = table.splitlines()[2]
    assert "| 1100 | 1300 | +18.2% | 1000 → 1200 (+20.0%) |" in line  # inference cycles first, NPU cycles beside
    assert "900 (-18.2%) → 1100 (-15.4%)" in line
    assert "transpose-compose ×3" in line and "10.0%" in line


def test_a_rerun_measures_only_missing_rows_and_rows_of_another_calibration(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    current = vela_cost.calibration_digest(TARGET)
    (runs / f"kept__{TARGET}.json").write_text(json.dumps(row("kept", 1, 1, current)))
    (runs / f"stale__{TARGET}.json").write_text(json.dumps(row("stale", 1, 1, "an older calibration")))
    measured = []

    def worker(command, **_kwargs):
        spec, model, target, path, quantization, io_layout = command[-6:]
        assert spec == f"specs:{model}" and quantization == "a8w8" and io_layout == "contiguous"
        measured.append(model)
        with open(path, "w") as out:
            json.dump(row(model, 2, 2, current), out)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(bench.subprocess, "run", worker)
    rows = bench.run({m: f"specs:{m}" for m in ("kept", "stale", "new")}, [TARGET], tmp_path)
    assert measured == ["stale", "new"]
    assert [r["model"] for r in rows] == ["kept", "stale", "new"]
    assert [r["stock"]["cycles_npu"] for r in rows] == [1, 2, 2]


def test_headline_shows_the_change_the_estimate_error_and_bit_exactness():
    table = bench.headline_table([row("m", 1000, 1200, "x")])
    line = table.splitlines()[2]
    assert line == "| m | ethos-u55-128 | 1100 | 1300 | +18.2% | 1000 → 1200 (+20.0%) | 250 → 300 | -18.2% | 10.0% | yes |"
    assert (
        "1 models, 0 faster, 1 slower (m); summed inference cycles eqsat/stock = 1.182; "
        "change predicted in Vela's direction in 1 of 1 changed graphs; largest eqsat time share 10.0%; largest optimizer peak memory 0 MiB"
    ) in table


def test_a_builder_spec_names_a_file_or_a_module_and_a_function(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text("import torch\ndef build():\n    return torch.nn.ReLU(), (torch.zeros(1, 4),)\ndef wrong():\n    return 3\n")
    module, inputs = bench.build(f"{source}:build")
    assert isinstance(module, torch.nn.ReLU) and inputs[0].shape == (1, 4)
    assert bench.load_builder("benchmarks.zoo.resnet8:build_resnet8").__name__ == "build_resnet8"
    for spec, message in [
        (f"{tmp_path}/absent.py:build", "no file"),
        (f"{source}:absent", "has no function absent"),
        ("no_such_module_here:build", "cannot import no_such_module_here"),
        ("build", "is not FILE.py:FUNCTION or MODULE:FUNCTION"),
        (f"{source}:wrong", "returned int, not (torch.nn.Module, example_inputs)"),
    ]:
        with pytest.raises(bench.ModelSpecError, match=re.escape(message)):
            bench.build(spec)


def test_a_model_file_imports_its_neighbours_and_a_failed_import_is_one_line(tmp_path):
    (tmp_path / "blocks.py").write_text("import torch\nBlock = torch.nn.Tanh\n")
    (tmp_path / "model.py").write_text("import torch\nfrom blocks import Block\ndef build():\n    return Block(), (torch.zeros(2),)\n")
    (tmp_path / "broken.py").write_text("import no_such_package_here\ndef build():\n    pass\n")
    module, _ = bench.build(f"{tmp_path / 'model.py'}:build")
    assert isinstance(module, torch.nn.Tanh)
    with pytest.raises(bench.ModelSpecError, match=re.escape("No module named 'no_such_package_here'")):
        bench.build(f"{tmp_path / 'broken.py'}:build")
    assert str(tmp_path) not in sys.path


def test_eqsat_bench_refuses_a_bad_spec_in_one_line(capsys):
    from eqsat.cli import main

    assert main(["bench", "--model", "nowhere.py:build"]) == 2
    assert capsys.readouterr().err.strip() == "eqsat bench: nowhere.py:build: no file nowhere.py"


def test_eqsat_bench_measures_a_users_model_end_to_end(tmp_path, capsys):
    from eqsat.cli import main

    source = tmp_path / "user_model.py"
    source.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)\n"
        "    def forward(self, x):\n"
        "        return self.conv(x).permute(0, 2, 3, 1).permute(0, 3, 1, 2) + 1\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    return Net().eval(), (torch.randn(1, 4, 8, 8),)\n"
    )
    out = tmp_path / "results"
    assert main(["bench", "--model", f"{source}:build", "--targets", TARGET, "--out", str(out), "--quant", "a16w8"]) == 0
    (row,) = json.loads((out / "results.json").read_text())
    assert row["model"] == "build" and row["quantization"] == "a16w8" and row["bit_exact"]
    assert row["optimized"]["cycles_total"] <= row["stock"]["cycles_total"]
    printed = capsys.readouterr().out
    assert "| build | ethos-u55-128 |" in printed
    layers = row["stock"]["layers"]
    assert layers and sum(layer["cycles_total"] for layer in layers) == row["stock"]["cycles_total"]
    assert "#### build on ethos-u55-128" in printed and "| Conv2D |" in printed  # where the cycles went, per source TOSA op
    assert (out / "layers" / "build__ethos-u55-128.png").exists() and "## Where the cycles went" in (out / "results.md").read_text()
    (run,) = (out / "runs").glob("*.json")  # the graph the pass was given, for `eqsat calibrate --report`; not in results.json
    assert json.loads(run.read_text())["reports"][0]["graph_before"]["terms"] and "graph_before" not in row["reports"][0]


def test_where_the_cycles_went_groups_layers_by_source_op_and_says_what_changed():
    layer = lambda source, cycles: {"name": "t", "operator": source, "source": source, "cycles_total": cycles, "cycles_npu": cycles, "cycles_access": 0}  # noqa: E731
    r = row("m", 1000, 900, "x")
    r["stock"]["layers"] = [layer("Transpose", 300), layer("Transpose", 200), layer("Conv2D", 400), layer("Concat", 100)]
    r["optimized"]["layers"] = [layer("Conv2D", 450), layer("Slice", 50), layer("Concat", 100)]
    lines = bench.where_cycles_went(r).splitlines()
    assert "| Transpose | 500 | 0 | -500 | vanished |" in lines
    assert "| Conv2D | 400 | 450 | +50 | dearer |" in lines
    assert "| Slice | 0 | 50 | +50 | appeared |" in lines
    assert "| Concat | 100 | 100 | +0 |  |" in lines


def test_the_predicted_direction_of_a_change_is_checked_against_vela():
    """The row's estimate goes 900 -> 1100: it agrees with a slower lowering, not with a faster or an unchanged one,
    and an unchanged row that the model also saw unchanged is no change at all."""
    assert bench.predicted_direction_agrees(row("slower", 1000, 1200, "x")) is True
    assert bench.predicted_direction_agrees(row("faster", 1000, 900, "x")) is False
    assert bench.predicted_direction_agrees(row("same", 1000, 1000, "x")) is False
    still = row("still", 1000, 1000, "x")
    still["reports"][0]["cost_after"] = 900.2
    assert bench.predicted_direction_agrees(still) is None
    text = bench.summary([row("slower", 1000, 1200, "x"), row("faster", 1000, 900, "x"), still])
    assert "change predicted in Vela's direction in 1 of 2 changed graphs (not: faster)" in text


def test_the_summed_ratio_weighs_each_model_by_its_stock_cycles():
    rows = [row("big", 9900, 4900, "x"), row("small", 0, 100, "x")]  # cycles_total 10000 -> 5000 and 100 -> 200
    assert [bench.ratio(r) for r in rows] == [0.5, 2.0]
    assert bench.summed_ratio(rows) == 5200 / 10100
    assert f"summed inference cycles eqsat/stock = {5200 / 10100:.3f}" in bench.summary(rows)


def test_the_zoo_charts_are_redrawn_from_results_json_and_stay_one_page_wide(tmp_path):
    from matplotlib.image import imread

    def chart_widths(count: int) -> tuple[int, int]:
        out = tmp_path / str(count)
        out.mkdir()
        rows = [row(f"model-{i}", 1000, 900 + i, "x") for i in range(count)]
        rows += [{**r, "target": "ethos-u85-256"} for r in rows]
        (out / "results.json").write_text(json.dumps(rows))
        assert bench.plot(out) == [out / "cycles.png", out / "time_share.png"]
        return imread(out / "cycles.png").shape[1], imread(out / "time_share.png").shape[1]

    few, many = chart_widths(2), chart_widths(40)
    assert few == many and max(many) <= 1400  # one panel per target, models down the side: more models, a taller chart


def test_calibration_inputs_default_to_seeded_random_tensors_shaped_like_the_example():
    example = (torch.zeros(1, 4, 8), torch.zeros(2, dtype=torch.int32))
    samples = bench.calibration_inputs("spec", example, None)
    assert len(samples) == bench.CALIBRATION_SAMPLES
    assert all(s[0].shape == (1, 4, 8) and s[0].dtype == torch.float32 and s[1] is example[1] for s in samples)
    assert samples[0][0].std() > 0.5 and not torch.equal(samples[0][0], samples[1][0])  # drawn, not the zero example
    again = bench.calibration_inputs("spec", example, None)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(samples, again))  # seeded


def test_calibration_inputs_from_a_file_are_checked_against_the_example_inputs(tmp_path):
    example = (torch.zeros(1, 4),)
    good, wrong, junk = tmp_path / "good.pt", tmp_path / "wrong.pt", tmp_path / "junk.pt"
    torch.save([torch.ones(1, 4), (torch.full((1, 4), 2.0),)], good)
    torch.save([(torch.ones(1, 5),)], wrong)
    junk.write_text("not a tensor file")
    assert [s[0][0, 0].item() for s in bench.calibration_inputs("m.py:f", example, good)] == [1.0, 2.0]
    for path, message in [
        (wrong, "m.py:f: calibration sample 0 is [((1, 5), torch.float32)], the example inputs are [((1, 4), torch.float32)]"),
        (junk, f"--calibration-inputs: {junk} is not a torch.save file of tensors"),
        (tmp_path / "absent.pt", f"--calibration-inputs: no file {tmp_path / 'absent.pt'}"),
    ]:
        with pytest.raises(bench.ModelSpecError, match=re.escape(message)):
            bench.calibration_inputs("m.py:f", example, path)


def test_eqsat_bench_refuses_bad_calibration_inputs_in_one_line(tmp_path, capsys):
    from eqsat.cli import main

    source = tmp_path / "mine.py"
    source.write_text("import torch\ndef build():\n    return torch.nn.ReLU(), (torch.zeros(1, 4),)\n")
    torch.save({"not": "a list"}, tmp_path / "dict.pt")
    assert main(["bench", "--model", f"{source}:build", "--calibration-inputs", str(tmp_path / "dict.pt")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"eqsat bench: --calibration-inputs: {tmp_path / 'dict.pt'} must hold a non-empty list of input tuples of tensors"


def test_quantization_calibrates_on_the_calibration_inputs():
    from eqsat import lowering

    model, example = torch.nn.Sequential(torch.nn.Linear(4, 4)).eval(), (torch.randn(1, 4),)

    def input_scale(samples):
        program = lowering.quantize(model, example, TARGET, calibration_inputs=samples)
        quantize = next(n for n in program.graph.nodes if "quantize_per_tensor" in str(n.target))
        return quantize.args[1]

    assert input_scale([(torch.full((1, 4), 100.0),)]) > 20 * input_scale(None)  # the range follows the samples


def test_eqsat_bench_runs_a_named_memory_mode_and_labels_its_rows(tmp_path, capsys):
    """A configuration without calibration is measured stock and with eqsat installed: the pass leaves the graph
    with the reason, the row is that configuration's, and the default configuration's rows are not touched."""
    from eqsat.cli import main

    source = tmp_path / "user_model.py"
    source.write_text(
        "import torch\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Conv2d(4, 8, 1).eval(), (torch.randn(1, 4, 8, 8),)\n"
    )
    out = tmp_path / "results"
    name = "ethos-u85-256.Ethos_U85_SYS_DRAM_Mid.Dedicated_Sram_384KB"
    assert main(["bench", "--model", f"{source}:build", "--targets", "ethos-u85-256", "--memory-mode", "Dedicated_Sram_384KB", "--out", str(out)]) == 0
    (row,) = json.loads((out / "results.json").read_text())
    assert row["target"] == "ethos-u85-256" and row["configuration"] == name and row["calibration"] == ""
    assert "memory mode Dedicated_Sram_384KB keeps the arena in Axi1 with Axi0 as its cache" in row["reports"][0]["fallback"]
    assert row["optimized"]["cycles_total"] == row["stock"]["cycles_total"] and row["bit_exact"]
    assert f"| build | {name} |" in capsys.readouterr().out
    assert [p.name for p in (out / "runs").glob("*.json")] == [f"build__{name}.json"]


def test_eqsat_bench_measures_both_io_layouts_side_by_side(tmp_path, capsys):
    """--io-layout contiguous channels_last: one row per layout, both bit-exact. Exported channels-last, the delegate
    has no boundary TRANSPOSE left, in stock or with eqsat; contiguous, Vela's cycles of the boundary transposes are
    counted and the pass's report names the ones it kept, priced."""
    from eqsat.cli import main

    source = tmp_path / "image_model.py"
    source.write_text(
        "import torch\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval(), (torch.randn(1, 3, 16, 16),)\n"
    )
    out = tmp_path / "results"
    assert main(["bench", "--model", f"{source}:build", "--targets", "ethos-u85-256", "--io-layout", "contiguous", "channels_last", "--out", str(out)]) == 0
    rows = {row["io_layout"]: row for row in json.loads((out / "results.json").read_text())}
    assert set(rows) == {"contiguous", "channels_last"} and all(row["bit_exact"] for row in rows.values())
    nchw, nhwc = rows["contiguous"], rows["channels_last"]
    assert nchw["stock"]["tosa_ops"]["TRANSPOSE"] == 2 and "TRANSPOSE" not in nhwc["stock"]["tosa_ops"]
    assert 0 < nchw["stock"]["boundary_transpose_cycles"] <= nchw["stock"]["data_movement_cycles"]
    assert nhwc["stock"]["boundary_transpose_cycles"] == nhwc["optimized"]["boundary_transpose_cycles"] == 0
    assert nhwc["stock"]["cycles_total"] < nchw["stock"]["cycles_total"]
    (kept,) = [report["boundary_transposes"] for report in nchw["reports"]]
    assert len(kept) == nchw["optimized"]["tosa_ops"]["TRANSPOSE"] and max(kept.values()) > 0  # the output's folds into the conv
    assert nhwc["reports"][0]["boundary_transposes"] == {}
    printed = capsys.readouterr().out
    assert "| build (channels_last) | ethos-u85-256 |" in printed and "- ethos-u85-256 channels_last: 1 models" in printed
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == ["build__ethos-u85-256.json", "build__ethos-u85-256__channels_last.json"]
    assert (out / "layers" / "build__ethos-u85-256__channels_last.png").exists()
    side_by_side = (out / "io_layouts.md").read_text().splitlines()[2]
    assert side_by_side.startswith(f"| build | ethos-u85-256 | {nchw['stock']['cycles_total']} → ") and side_by_side.endswith(
        f" | {nhwc['optimized']['cycles_total'] / nchw['optimized']['cycles_total']:.3f} |"
    )


def test_a_bad_io_layout_is_refused_and_the_callers_model_keeps_its_format():
    from eqsat import lowering

    model, x = torch.nn.Conv2d(3, 4, 1).eval(), (torch.randn(1, 3, 4, 4),)
    with pytest.raises(ValueError, match="io_layout must be one of contiguous, channels_last"):
        lowering.quantize(model, x, TARGET, io_layout="nhwc")
    lowering.quantize(model, x, TARGET, io_layout="channels_last")
    assert model.weight.is_contiguous() and x[0].is_contiguous()
