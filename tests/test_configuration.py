"""Targets and configurations: every one ExecuTorch accepts is known, resolved as its compile spec resolves it,
priced only with its own calibration, and never fails a lowering."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch
from ethosu.vela.architecture_features import Accelerator
from executorch.backends.arm.ethosu import EthosUCompileSpec

import eqsat
from eqsat import arm_pass, cli, lowering, targets, vela
from eqsat import configuration as configuration_module
from eqsat.calibration import calibrate
from eqsat.calibration.graphs import Sample, build_tosa
from eqsat.configuration import ACCELERATORS, Configuration, Generation, UnknownTargetError, vela_flag_values
from eqsat.extract import vela_cost
from eqsat.extract.cost import UncalibratedTargetError, cost_model_for, priced
from eqsat.ir import TensorType, Term
from tests.graphs import GraphBuilder

DRAM = {"memory_mode": "Dedicated_Sram_384KB"}
"""A memory mode U85 systems with DRAM use, not the compile spec's default for Ethos-U85 (Sram_Only)."""
TABLE = Sample("table", {"shape": [1, 32, 32, 48], "dtype": "int8"})


class ConvPermute(torch.nn.Module):
    """A convolution and a permute: a tiny model with data movement for the pass to see."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(4, 8, 1)

    def forward(self, x):
        return self.conv(x).permute(0, 2, 3, 1) + 1


def permute_graph():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    return g.output(g.call(torch.ops.aten.permute_copy.default, x, [0, 2, 3, 1]))


def lower_stock_and_with_eqsat(configuration: Configuration, tmp_path, **install_options):
    """The stock lowering of ConvPermute and the lowering with eqsat installed, and the pass's reports."""
    model, inputs = ConvPermute().eval(), (torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1)),)
    exported = lowering.quantize(model, inputs, configuration)
    stock = lowering.lower(copy.deepcopy(exported), configuration, workdir=tmp_path / "stock")
    eqsat.install(**install_options)
    try:
        with pytest.warns(RuntimeWarning, match="kept the unmodified graph"):
            lowered = lowering.lower(exported, configuration, workdir=tmp_path / "eqsat")
        return stock, lowered, eqsat.last_reports()
    finally:
        eqsat.uninstall()


# ---------------------------------------------------------------- what is known, and how it resolves


def test_every_vela_accelerator_is_a_target():
    assert ACCELERATORS == tuple(Accelerator.member_list())
    assert eqsat.ACCELERATORS == ACCELERATORS


@pytest.mark.parametrize("target", ACCELERATORS)
def test_default_resolution_matches_the_compile_spec(target):
    spec = vela_flag_values(EthosUCompileSpec(target).compiler_flags)
    assert Configuration.of(target) == Configuration(spec["target"], spec["system_config"], spec["memory_mode"], spec["config_ini"])
    assert Configuration.of(target).is_default and Configuration.of(target).name == target
    named = vela_flag_values(EthosUCompileSpec(target, **DRAM).compiler_flags)
    assert Configuration.of(target, **DRAM).memory_mode == named["memory_mode"] == "Dedicated_Sram_384KB"


@pytest.mark.parametrize(
    "target, system_config, memory_mode",
    [
        ("ethos-u55-64", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
        ("ethos-u65-512", "Ethos_U65_High_End", "Dedicated_Sram_384KB"),
        ("ethos-u85-1024", "Ethos_U85_SYS_DRAM_Mid", "Sram_Only"),
    ],
)
def test_each_family_defaults_to_its_compile_spec_system_config_and_memory_mode(target, system_config, memory_mode):
    assert Configuration.of(target) == Configuration(target, system_config, memory_mode, "Arm/vela.ini")


def test_the_last_flag_wins_as_in_vela_and_several_ini_files_are_all_named():
    flags = ["--memory-mode", "Shared_Sram", "--config=mine.ini", "--memory-mode=Sram_Only", "--config=Arm/vela.ini"]
    assert vela_flag_values(flags) == {"target": None, "system_config": None, "memory_mode": "Sram_Only", "config_ini": "mine.ini;Arm/vela.ini"}


def test_ethos_u65_is_priced_as_the_u55_architecture_it_is():
    assert vela_cost.target_family("ethos-u65-256") == vela_cost.target_family("ethos-u55-128") == Generation.U55
    assert vela_cost.target_family("ethos-u85-128") == Generation.U85
    assert EthosUCompileSpec("ethos-u65-256").tosa_spec.is_U55_subset


def test_an_unknown_target_is_a_clear_error_where_the_user_names_it():
    with pytest.raises(UnknownTargetError, match="unknown target 'ethos-u65-128'"):
        eqsat.install(target="ethos-u65-128")
    with pytest.raises(UnknownTargetError):
        eqsat.optimize(permute_graph(), target="ethos-u55-48")
    with pytest.raises(SystemExit):
        cli.main(["optimize", "in.tosa", "--target", "ethos-u55-48", "-o", "out.tosa"])


def test_a_configuration_without_calibration_is_refused_at_install_with_the_command(calibrations_without):
    calibrations_without(Configuration.of("ethos-u55-128", memory_mode="Sram_Only").name)
    with pytest.raises(UncalibratedTargetError, match="eqsat calibrate --target ethos-u55-128 --memory-mode Sram_Only"):
        eqsat.install(target="ethos-u55-128", memory_mode="Sram_Only")
    assert not arm_pass._installed


@pytest.mark.parametrize("target", ["ethos-u65-256", "ethos-u85-256"])
def test_a_memory_mode_with_an_off_chip_arena_is_refused_with_the_reason_and_not_calibrated(target, calibrations_without):
    """Dedicated_Sram_384KB (Ethos-U65's default) caches an off-chip arena in SRAM as Vela's scheduler decides per
    graph; eqsat refuses to price it, and `eqsat calibrate` to fit it, with that reason. Sram_Only and Shared_Sram
    keep the arena in SRAM."""
    configuration = Configuration.of(target, **DRAM)
    calibrations_without(configuration.name)
    reason = "memory mode Dedicated_Sram_384KB keeps the arena in Axi1 with Axi0 as its cache"
    assert reason in configuration_module.unpriceable(configuration)
    with pytest.raises(UncalibratedTargetError, match=reason):
        cost_model_for(configuration)
    with pytest.raises(ValueError, match=f"cannot calibrate {target} .*: {reason}"):
        calibrate.check_configuration(configuration)
    for memory_mode in ("Sram_Only", "Shared_Sram"):
        assert configuration_module.unpriceable(Configuration.of(target, memory_mode=memory_mode)) is None


# ---------------------------------------------------------------- pricing: exactly the configuration's calibration


def test_a_non_default_memory_mode_is_refused_with_the_reason_never_priced_with_the_default(calibrations_without):
    configuration = Configuration.of("ethos-u85-256", **DRAM)
    calibrations_without(configuration.name)
    assert vela_cost.has_calibration("ethos-u85-256") and not vela_cost.has_calibration(configuration)
    with pytest.raises(UncalibratedTargetError, match="no cost-model calibration for ethos-u85-256 with Ethos_U85_SYS_DRAM_Mid/Dedicated_Sram_384KB"):
        cost_model_for(configuration)
    gm = permute_graph()
    with pytest.warns(RuntimeWarning, match="Dedicated_Sram_384KB keeps the arena"):
        result, report = eqsat.optimize(gm, target="ethos-u85-256", **DRAM)
    assert result is gm and report.cost_before is None and "Dedicated_Sram_384KB keeps the arena in Axi1" in report.fallback
    assert (report.system_config, report.memory_mode) == ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB")


def test_a_file_that_records_another_configuration_is_refused(tmp_path, monkeypatch):
    configuration = Configuration.of("ethos-u85-256", **DRAM)
    shutil.copy(vela_cost.calibration_path("ethos-u85-256"), tmp_path / f"{configuration.name}.json")
    monkeypatch.setattr(vela_cost, "CALIBRATION_DIR", tmp_path)
    with pytest.raises(UncalibratedTargetError, match="calibrates ethos-u85-256 with Ethos_U85_SYS_DRAM_Mid/Sram_Only, not .*Dedicated_Sram_384KB"):
        cost_model_for(configuration)


def test_a_non_default_configuration_is_priced_with_its_own_file_and_no_other(other_calibration):
    configuration = other_calibration
    own, default = vela_cost.VelaCalibratedCost(configuration), vela_cost.VelaCalibratedCost(configuration.target)
    assert (own.target, own.configuration, default.configuration) == ("ethos-u55-128", configuration, Configuration.of("ethos-u55-128"))
    assert own.data == json.loads(vela_cost.calibration_path(configuration).read_text()) == cost_model_for(configuration).data
    transpose = (Term("Transpose", (0,), ((0, 2, 1, 3),)), TensorType((1, 16, 8, 32), "torch.int8"), [TensorType((1, 8, 16, 32), "torch.int8")])
    assert own.cost(*transpose) > default.cost(*transpose) > 0  # its file's doubled coefficients
    with pytest.raises(vela_cost.OtherConfigurationError, match="the calibration data given calibrates ethos-u55-128 with Ethos_U55_High_End_Embedded/Sram_Only, not .*Shared_Sram"):
        vela_cost.VelaCalibratedCost("ethos-u55-128", data=own.data)  # a target alone is its default configuration
    with pytest.raises(vela_cost.OtherConfigurationError, match="ethos-u55-128.json calibrates .*Shared_Sram, not .*Sram_Only"):
        vela_cost.VelaCalibratedCost(configuration, path=vela_cost.calibration_path("ethos-u55-128"))


def test_vela_estimates_with_the_configuration_it_is_given():
    graph, _ = build_tosa([TABLE])
    default = vela.estimate(graph, "ethos-u85-256")
    assert vela.estimate(graph, Configuration.of("ethos-u85-256")) == default
    in_dram = vela.estimate(graph, Configuration.of("ethos-u85-256", **DRAM))
    # Sram_Only keeps the tensors in SRAM; Dedicated_Sram_384KB places them in DRAM, where the TABLE reads and writes them
    assert [layer.cycles_dram for layer in default.layers] == [0] and in_dram.layers[0].cycles_dram > 0
    assert in_dram.cycles_total != default.cycles_total


def test_calibrating_a_configuration_writes_its_own_file_which_then_prices_it(tmp_path, monkeypatch):
    configuration = Configuration.of("ethos-u55-128", memory_mode="Sram_Only")
    calibrate.check_configuration(configuration)
    monkeypatch.setattr(vela_cost, "CALIBRATION_DIR", tmp_path / "calibration")
    tables = [Sample("table", {"shape": shape, "dtype": "int8"}) for shape in ([1, 8, 8, 16], [1, 16, 16, 16], [1, 16, 32, 32], [1, 32, 32, 48])]
    data = calibrate.calibrate(configuration, workdir=tmp_path / "work", jobs=2, progress=False, samples=tables)
    path = tmp_path / "calibration" / "ethos-u55-128.Ethos_U55_High_End_Embedded.Sram_Only.json"
    assert json.loads(path.read_text()) == data and data["memory_mode"] == "Sram_Only"
    records = calibrate.load_cache(tmp_path / "work" / configuration.name / "samples.jsonl", vela_cost.vela_version())
    graph, _ = build_tosa([TABLE])
    assert records[TABLE.key]["cycles_total"] == vela.estimate(graph, configuration).cycles_total
    assert cost_model_for(configuration).data == data


def test_calibrate_refuses_a_memory_mode_its_vela_ini_does_not_name():
    with pytest.raises(ValueError, match="has no Memory_Mode Dedicated_Sram_999KB; it has .*Dedicated_Sram_384KB"):
        calibrate.check_configuration(Configuration.of("ethos-u85-256", memory_mode="Dedicated_Sram_999KB"))


# ---------------------------------------------------------------- inside a real lowering


def test_an_ethos_u65_lowering_with_eqsat_installed_succeeds_and_equals_the_stock_one(tmp_path):
    stock, lowered, reports = lower_stock_and_with_eqsat(Configuration.of("ethos-u65-256"), tmp_path)
    assert lowered.tosa_flatbuffers == stock.tosa_flatbuffers and lowered.cpu_ops == stock.cpu_ops == []
    (report,) = reports
    assert (report.target, report.system_config, report.memory_mode) == ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram_384KB")
    assert not report.changed and "memory mode Dedicated_Sram_384KB keeps the arena in Axi1" in report.fallback


@pytest.mark.parametrize("install_options", [{}, {"target": "ethos-u85-256"}], ids=["target-from-spec", "target-given"])
def test_a_non_default_memory_mode_in_the_compile_spec_is_refused_inside_the_lowering(install_options, tmp_path, calibrations_without):
    calibrations_without(Configuration.of("ethos-u85-256", **DRAM).name)
    stock, lowered, reports = lower_stock_and_with_eqsat(Configuration.of("ethos-u85-256", **DRAM), tmp_path, **install_options)
    assert lowered.tosa_flatbuffers == stock.tosa_flatbuffers
    (report,) = reports
    assert report.memory_mode == "Dedicated_Sram_384KB" and not report.changed
    assert "no cost-model calibration for ethos-u85-256 with Ethos_U85_SYS_DRAM_Mid/Dedicated_Sram_384KB" in report.fallback


def test_an_unknown_target_from_a_compile_spec_leaves_the_graph_with_the_reason():
    """What the pass does when the spec names a target Vela does not know (EthosUCompileSpec("ethos-u55-48")
    accepts it; only Vela, after the pass, refuses it)."""
    eqsat_pass = eqsat.EqsatPass()
    gm = permute_graph()
    target = arm_pass._compiling_target.set("ethos-u55-48")
    flags = arm_pass._compiling_flags.set(vela_flag_values(EthosUCompileSpec("ethos-u55-48").compiler_flags))
    try:
        with pytest.warns(RuntimeWarning, match="unknown target 'ethos-u55-48'"):
            result = eqsat_pass(gm)
    finally:
        arm_pass._compiling_flags.reset(flags)
        arm_pass._compiling_target.reset(target)
    assert not result.modified and result.graph_module is gm
    assert eqsat_pass.reports[0].fallback.startswith("UnknownTargetError: unknown target 'ethos-u55-48'")


def test_the_pass_prices_the_default_configuration_the_compile_spec_resolves():
    eqsat_pass = eqsat.EqsatPass()
    target = arm_pass._compiling_target.set("ethos-u55-128")
    flags = arm_pass._compiling_flags.set(vela_flag_values(EthosUCompileSpec("ethos-u55-128").compiler_flags) | {"target": "ethos-u55-128"})
    try:
        options = eqsat_pass.options_for("ethos-u55-128")
        other_target = eqsat_pass.options_for("ethos-u85-256")
    finally:
        arm_pass._compiling_flags.reset(flags)
        arm_pass._compiling_target.reset(target)
    assert options.configuration("ethos-u55-128") == Configuration.of("ethos-u55-128")
    assert other_target.configuration("ethos-u85-256") == Configuration.of("ethos-u85-256")
    given = eqsat.EqsatPass(memory_mode="Sram_Only").options_for("ethos-u55-128")
    assert given.configuration("ethos-u55-128").memory_mode == "Sram_Only"


# ---------------------------------------------------------------- eqsat targets


REPORT = """\
| target | Vela | system config | memory mode | samples (ok/all) | last run |
|---|---|---|---|---:|---:|
| ethos-u55-128 | 5.1.0 | Ethos_U55_High_End_Embedded | Shared_Sram | 1/1 | 0.0 min |
| ethos-u85-256 | 4.0.0 | Ethos_U85_SYS_DRAM_Mid | Sram_Only | 1/1 | 0.0 min |

| target | mean abs error | median abs error | max abs error | models within 15% |
|---|---:|---:|---:|---:|
| ethos-u55-128 | 1.5% | 1.0% | 2.5% | 3/3 |
| ethos-u85-256 | 1.5% | 1.0% | 2.5% | 3/3 |
"""
"""A report fixture (not a measurement): ethos-u55-128 scored with the shipped Vela, ethos-u85-256 with another."""


def test_eqsat_targets_lists_every_target_how_it_is_priced_and_its_measured_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "calibration_report.md").write_text(REPORT)
    calibrated = tmp_path / "calibration"
    calibrated.mkdir()
    for target in ("ethos-u55-128", "ethos-u85-256"):  # ethos-u65-256 left without a calibration
        (calibrated / f"{target}.json").write_bytes(vela_cost.calibration_path(target).read_bytes())
    monkeypatch.setattr(vela_cost, "CALIBRATION_DIR", calibrated)
    assert cli.main(["targets", "--results", str(tmp_path), "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(ACCELERATORS) <= set(listed)
    version = vela_cost.vela_version()
    assert version == "5.1.0", "the fixture scores ethos-u55-128 with the shipped Vela"
    assert listed["ethos-u55-128"]["priced"] == "calibrated: ethos-u55-128.json" and listed["ethos-u55-128"]["vela_version"] == version
    assert listed["ethos-u55-128"]["zoo_error"].startswith("1.5% mean, 2.5% worst (3 models")
    assert listed["ethos-u85-256"]["zoo_error"] == targets.NOT_MEASURED  # the report scored it with another Vela
    assert listed["ethos-u55-32"]["priced"] == "refused: no calibration: run `eqsat calibrate --target ethos-u55-32`"
    assert listed["ethos-u65-256"]["priced"].startswith("refused: memory mode Dedicated_Sram_384KB keeps the arena in Axi1")
    assert listed["ethos-u65-256"]["memory_mode"] == "Dedicated_Sram_384KB" and listed["ethos-u65-256"]["zoo_error"] == targets.NOT_MEASURED


def test_eqsat_targets_lists_a_calibrated_non_default_configuration(tmp_path, monkeypatch):
    configuration = Configuration.of("ethos-u85-256", **DRAM)
    data = json.loads(vela_cost.calibration_path("ethos-u85-256").read_text()) | configuration.as_data()
    (tmp_path / f"{configuration.name}.json").write_text(json.dumps(data))
    monkeypatch.setattr(vela_cost, "CALIBRATION_DIR", tmp_path)
    (row,) = [r for r in targets.rows(tmp_path) if r.configuration == configuration]
    assert row.priced == f"calibrated: {configuration.name}.json" and row.zoo_error == targets.NOT_MEASURED
    assert "| ethos-u85-256 | Ethos_U85_SYS_DRAM_Mid | Dedicated_Sram_384KB |" in targets.table([row])


def test_eqsat_targets_shows_the_error_the_report_measured_on_a_non_default_configuration(tmp_path, capsys, monkeypatch, other_calibration):
    """`eqsat calibrate --report` scores the configuration on the rows benchmarked apart on it, and `eqsat targets`
    reads the error back from the report."""
    from eqsat.calibration import report
    from tests.calibration.harness import conv_graph, write_row

    configuration = other_calibration
    monkeypatch.setattr(report, "grid", lambda target, split, scale: [])  # no held-out shapes: no Vela run
    predicted = priced(conv_graph(), vela_cost.VelaCalibratedCost(configuration))
    cycles = round(1.25 * predicted)  # a fixture, whose error the report must find
    results = tmp_path / "results"
    write_row(results / "modes" / "runs", "conv", conv_graph(), "", configuration=configuration, cycles_total=cycles)
    assert cli.main(["calibrate", "--report", "--results", str(results), "--workdir", str(tmp_path / "work")]) == 0
    assert f"### {configuration.name}" in (results / "calibration_report.md").read_text()
    capsys.readouterr()
    assert cli.main(["targets", "--results", str(results), "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    error = f"{abs(100 * (predicted - cycles) / cycles):.1f}%"
    assert listed[configuration.name]["zoo_error"].startswith(f"{error} mean, {error} worst (1 models")
    assert listed["ethos-u55-128"]["zoo_error"] == targets.NOT_MEASURED  # no row measured on the default configuration
