"""eqsat calibrate: micro-benchmarks compiled by the pinned Vela, fitted, written, and resumed."""

import json

import pytest

from eqsat.calibration import calibrate
from eqsat.calibration.fit import sample_config
from eqsat.calibration.graphs import Sample, build_tosa
from eqsat.calibration.grid import grid
from eqsat.configuration import Generation
from eqsat.extract.vela_cost import VelaCalibratedCost, transpose_passes, vela_version
from eqsat.vela import LayerCycles

TARGET = "ethos-u85-256"
TABLES = [Sample("table", {"shape": shape, "dtype": "int8"}) for shape in ([1, 8, 8, 16], [1, 16, 16, 16], [1, 16, 32, 32], [1, 32, 32, 48])]


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """Four TABLE samples calibrated against real Vela into a temporary directory."""
    root = tmp_path_factory.mktemp("calibration")
    data = calibrate.calibrate(TARGET, workdir=root / "work", jobs=2, out=root / f"{TARGET}.json", progress=False, samples=TABLES)
    return root, data


def test_calibrated_model_predicts_the_measured_samples(round_trip):
    root, _ = round_trip
    records = calibrate.load_cache(root / "work" / TARGET / "samples.jsonl", vela_version())
    model = VelaCalibratedCost(TARGET, path=root / f"{TARGET}.json")
    for sample in TABLES:
        measured = records[sample.key]["cycles"]
        predicted = model.cost_of(sample_config(sample, TARGET))
        assert measured > 0
        assert predicted == pytest.approx(measured, rel=0.15)


def test_data_file_records_vela_version_target_and_system_config(round_trip):
    root, data = round_trip
    written = json.loads((root / f"{TARGET}.json").read_text())
    assert written == data
    assert written["vela_version"] == vela_version()
    assert written["target"] == TARGET
    assert written["system_config"] == "Ethos_U85_SYS_DRAM_Mid"
    assert written["memory_mode"] == "Sram_Only"
    model = written["models"]["table/int8"]
    assert model["n"] == 4 and model["r2"] > 0.9 and model["mape"] < 15


def test_a_second_run_resumes_from_the_cache_without_vela(round_trip, monkeypatch):
    root, data = round_trip

    def no_vela(*_args, **_kwargs):
        raise AssertionError("every sample is cached: Vela must not run")

    monkeypatch.setattr(calibrate, "measure_batch", no_vela)
    again = calibrate.calibrate(TARGET, workdir=root / "work", out=root / "again.json", progress=False, samples=TABLES)
    assert again["models"] == data["models"]
    assert len((root / "work" / TARGET / "samples.jsonl").read_text().splitlines()) == len(TABLES)


def test_a_family_refit_replaces_only_those_families_in_the_existing_file(round_trip, monkeypatch):
    root, data = round_trip
    monkeypatch.setattr(calibrate, "measure_batch", lambda *_args, **_kwargs: pytest.fail("every sample is cached"))
    shipped = json.loads(calibrate.vela_cost.calibration_path(TARGET).read_text())
    refit = calibrate.calibrate(TARGET, workdir=root / "work", out=root / "refit.json", progress=False, samples=TABLES, families=["table"])
    assert refit["models"]["table/int8"] == data["models"]["table/int8"] != shipped["models"]["table/int8"]
    assert {f: m for f, m in refit["models"].items() if f != "table/int8"} == {f: m for f, m in shipped["models"].items() if f != "table/int8"}
    assert refit["transpose_feasibility"] == shipped["transpose_feasibility"]
    assert refit["refits"][-1]["families"] == ["table"]
    assert json.loads((root / "refit.json").read_text()) == refit
    with pytest.raises(ValueError, match="no fitted family"):
        calibrate.calibrate(TARGET, workdir=root / "work", out=root / "none.json", progress=False, samples=TABLES, families=["conv2d"])
    assert calibrate.in_families("binary/ADD", ["binary"]) and not calibrate.in_families("isolated/binary/ADD", ["binary"])


@pytest.mark.parametrize("target", ["ethos-u85-512", "ethos-u55-128"])
def test_a_family_refit_measures_every_sample_that_feeds_the_family_and_no_other(target):
    """`feeds` keeps a sample for a refit of a family exactly when the fit observes the sample as that family (or
    fits it jointly): every observation of every sample in the grid names a family its sample feeds."""
    from eqsat.calibration.fit import observations

    samples = grid(target, "fit") + grid(target, "heldout")
    for sample in samples:
        record = {"status": "ok", "kind": sample.kind, "params": sample.params, "split": sample.split, "key": sample.key, "roles": {}, "cycles": 1.0}
        for observation in observations(record, target):
            family = observation.family.removeprefix("isolated/")
            if not family.startswith("context/"):
                assert calibrate.feeds(sample, [family.split("/", 1)[0]]), (sample.kind, observation.family)
    transposes = [s for s in samples if calibrate.feeds(s, ["transpose"])]
    assert {s.kind for s in transposes} == {"transpose"} | (calibrate.JOINT_SAMPLES & {s.kind for s in samples})


def test_torn_cache_lines_are_skipped(tmp_path):
    cache = tmp_path / "samples.jsonl"
    cache.write_text('{"key": "a", "vela": "%s", "status": "ok", "cycles_total": 1}\n{"key": "b", "ve' % vela_version())
    assert list(calibrate.load_cache(cache, vela_version())) == ["a"]


def test_cache_lines_without_the_memory_measures_are_measured_again(tmp_path):
    cache = tmp_path / "samples.jsonl"
    cache.write_text('{"key": "a", "vela": "%s", "status": "ok", "cycles": 5}\n' % vela_version())
    assert calibrate.load_cache(cache, vela_version()) == {}


def test_module_lines_without_their_operands_are_measured_again(tmp_path):
    cache = tmp_path / "samples.jsonl"
    line = {"vela": vela_version(), "status": "ok", "cycles_total": 1, "kind": "module", "nodes": []}
    cache.write_text(json.dumps({**line, "key": "old"}) + "\n" + json.dumps({**line, "key": "new", "operands": [], "outputs": []}) + "\n")
    assert list(calibrate.load_cache(cache, vela_version())) == ["new"]


def test_layers_are_attributed_to_the_sample_and_op_that_caused_them():
    graph, layouts = build_tosa(
        [
            Sample("transpose", {"shape": [1, 4, 4, 8], "perm": [0, 3, 1, 2], "dtype": "int8"}),
            Sample("rescale", {"shape": [1, 4, 4, 8], "source": "int8", "dest": "int32", "per_channel": False, "scale": "unit"}),
        ]
    )
    assert graph
    transpose_out = next(iter(layouts[0].producer))
    rescale_in = next(t for t in layouts[1].consumer if "_in" in t)
    rescale_out = next(iter(layouts[1].producer))
    layers = [
        LayerCycles("#12", "Transpose", "Transpose", 5, 5),
        LayerCycles(transpose_out, "Transpose", "Transpose", 7, 7),
        LayerCycles(f"{rescale_in}_int32", "Add", "Rescale", 11, 11),
        LayerCycles(rescale_out, "Mul", "Rescale", 13, 13),
    ]
    assert calibrate._attribute(layers, layouts) == [{"op": 12}, {"op": 24}]
    assert calibrate._attribute([LayerCycles("const_values_int32", "Add", "Rescale", 1, 1)], layouts) is None


def test_heldout_shapes_are_not_fitted():
    fit_keys = {s.key for s in grid("ethos-u55-128", "fit", 0.2)}
    heldout = grid("ethos-u55-128", "heldout", 0.2)
    assert heldout and not fit_keys & {s.key for s in heldout}


def test_transpose_passes_follow_vela_per_generation():
    nhwc_to_nchw = ((1, 16, 16, 32), (0, 3, 1, 2))
    assert len(transpose_passes(*nhwc_to_nchw, Generation.U85)) == 1  # any 3D permutation natively
    assert len(transpose_passes(*nhwc_to_nchw, Generation.U55)) == 2  # two axis swaps
    assert len(transpose_passes((4, 8, 16, 32), (3, 2, 1, 0), Generation.U55)) == 6
    assert transpose_passes((1, 8, 1, 4), (2, 1, 0, 3), Generation.U55) == []  # only unit axes move


def test_a_context_block_is_measured_on_a_target_that_has_no_calibration_yet(calibrations_without):
    """A new target's module samples are lowered before any cost model of it exists: the graphs at eqsat's
    position are kept without running eqsat (its pass refuses an uncalibrated target), nothing stays registered
    with the Arm pass manager, and the recorded nodes are the graph Vela measured (every node read, one output)."""
    from executorch.backends.arm._passes import arm_pass_manager

    target = "ethos-u55-64"
    calibrations_without(target)
    assert not calibrate.vela_cost.has_calibration(target)
    result = calibrate.lower_block({"blocks": [{"block": "residual", "d": 16, "n": 8, "seed": 5}]}, target)
    assert result["cycles"]["total"] > 0 and not result["cpu_ops"]
    assert "Rescale" in json.dumps(result["nodes"])
    assert len(result["operands"]) == len(result["nodes"]) and result["outputs"]
    assert not any(registered.before_passes for registered in arm_pass_manager._registered_pass_insertions.values())
