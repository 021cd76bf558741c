"""`eqsat calibrate --report`: whole models re-priced from the graphs the bench rows keep, and attributed per op."""

import json
import math

import pytest

import eqsat
from eqsat.calibration.report import attribute, model_rows, node_of_layer
from eqsat.configuration import Configuration
from eqsat.extract import vela_cost
from eqsat.extract.cost import priced
from eqsat.extract.vela_cost import VelaCalibratedCost
from eqsat.ir import Graph
from tests.calibration.harness import TARGET, conv_graph, write_row
from tests.graphs import permute_graph


def test_the_graph_a_report_keeps_prices_to_its_cost_before():
    _, report = eqsat.optimize(permute_graph(), target=TARGET)
    graph = Graph.from_data(json.loads(json.dumps(report.as_dict()))["graph_before"])
    assert len(graph.terms) == len(graph.names) > 2
    assert priced(graph, VelaCalibratedCost(TARGET)) == report.cost_before > 0


def test_a_layer_goes_to_the_node_it_names_or_up_its_operands_to_the_op_it_came_from():
    graph = conv_graph()
    index, readers = {name: i for i, name in enumerate(graph.names)}, {0: [2], 1: [2], 2: [3], 3: [4]}
    assert node_of_layer({"name": "tosa_transpose_default", "source": "Transpose"}, graph, index, readers) == 4
    assert node_of_layer({"name": "tosa_transpose_default_int32", "source": "Transpose"}, graph, index, readers) == 4
    assert node_of_layer({"name": "tosa_rescale_default", "source": "Conv2D"}, graph, index, readers) == 2  # written through the fused RESCALE
    assert node_of_layer({"name": "tosa_rescale_default_copy", "source": "Transpose"}, graph, index, readers) == 4  # a copy for its reader
    assert node_of_layer({"name": "tosa_transpose_default", "source": "Rescale"}, graph, index, readers) == 3  # a RESCALE term is one
    assert node_of_layer({"name": "#17", "source": "Conv2D"}, graph, index, readers) is None


def test_attribution_sums_the_estimate_and_vela_per_family():
    graph, model = conv_graph(), VelaCalibratedCost(TARGET)
    layers = [
        {"name": "tosa_rescale_default", "source": "Conv2D", "cycles_total": 1000},
        {"name": "#2", "source": "Transpose", "cycles_total": 20},  # a pass of the transpose named next
        {"name": "tosa_transpose_default", "source": "Transpose", "cycles_total": 300},
        {"name": "#3", "source": "Transpose", "cycles_total": 7},
    ]
    families = attribute([graph], layers, TARGET, model)
    assert families["conv2d"][1] == 1000 and families["transpose/int8"][1] == 320 and families["unattributed"] == [0.0, 7.0]
    assert sum(p for p, _ in families.values()) == pytest.approx(priced(graph, model))


def test_an_intermediate_pass_goes_with_the_named_layer_of_its_op_that_follows_it():
    graph, model = conv_graph(), VelaCalibratedCost(TARGET)
    layers = [
        {"name": "#1", "source": "Transpose", "cycles_total": 40},
        {"name": "#2", "source": "Conv2D", "cycles_total": 5},
        {"name": "tosa_transpose_default", "source": "Transpose", "cycles_total": 300},
        {"name": "#3", "source": "Transpose", "cycles_total": 7},
    ]
    families = attribute([graph], layers, TARGET, model)
    assert families["transpose/int8"][1] == 340 and families["unattributed"] == [0.0, 12.0]


def test_rows_are_priced_again_from_their_graphs_whatever_calibration_measured_them(tmp_path):
    runs = tmp_path / "runs"
    current = vela_cost.calibration_digest(TARGET)
    write_row(runs, "kept-graph", conv_graph(), "an older calibration")
    write_row(runs, "no-graph-current", None, current)
    write_row(runs, "no-graph-stale", None, "an older calibration")
    rows, stale = model_rows([Configuration.of(TARGET)], [tmp_path])
    by_model = {r["model"]: r for r in rows}
    assert stale == 1 and set(by_model) == {"kept-graph", "no-graph-current"}
    assert by_model["kept-graph"]["predicted"] == pytest.approx(priced(conv_graph(), VelaCalibratedCost(TARGET)))
    assert by_model["no-graph-current"]["predicted"] == 5.0 and by_model["no-graph-current"]["families"] is None
    assert not math.isnan(by_model["kept-graph"]["predicted"])


def test_rows_measured_channels_last_are_not_the_zoos_error(tmp_path):
    """A model exported channels-last is another graph than the zoo's (no boundary transposes): its row is kept
    out of the zoo's error, whichever row of the model comes first."""
    runs = tmp_path / "runs"
    write_row(runs, "a", conv_graph(), "", io_layout="channels_last", cycles_total=7)
    write_row(runs, "a", conv_graph(), "", cycles_total=100)
    write_row(runs, "b", conv_graph(), "", io_layout="channels_last")
    rows, _ = model_rows([Configuration.of(TARGET)], [tmp_path])
    assert [(r["model"], r["vela_cycles_total"]) for r in rows] == [("a", 100)]


def test_heldout_scores_measure_a_targets_heldout_shapes(tmp_path, monkeypatch):
    """The held-out view of `eqsat calibrate --report` measures its samples with Vela for the target's default
    configuration (it failed on a target string once measuring took configurations) and scores each family."""
    from eqsat.calibration import report
    from eqsat.calibration.graphs import Sample

    tables = [Sample("table", {"shape": shape, "dtype": "int8"}, split="heldout") for shape in ([1, 8, 8, 16], [1, 16, 16, 16], [1, 16, 32, 32])]
    monkeypatch.setattr(report, "grid", lambda target, split, scale: tables)
    scores = report.heldout_scores(Configuration.of("ethos-u85-256"), tmp_path)
    assert scores["table/int8"]["n"] == 3
    assert (tmp_path / "ethos-u85-256" / "samples.jsonl").exists()


def test_each_configuration_is_scored_on_its_own_rows_from_every_results_folder_with_its_own_file(tmp_path, other_calibration):
    """The zoo is benchmarked apart per memory mode (`--out RESULTS/modes`): the report finds those rows, and prices
    them with the configuration's calibration, never the default's."""
    configuration, default = other_calibration, Configuration.of(TARGET)
    results = tmp_path / "results"
    write_row(results / "runs", "default-row", conv_graph(), "")
    write_row(results / "modes" / "runs", "other-row", conv_graph(), "", configuration=configuration)
    write_row(results / "modes" / "runs", "unreported", conv_graph(), "", configuration=Configuration.of(TARGET, memory_mode="Shared_Sram", system_config="Ethos_U55_Deep_Embedded"))
    rows, stale = model_rows([default, configuration], [results])
    by_model = {r["model"]: r for r in rows}
    assert stale == 0 and set(by_model) == {"default-row", "other-row"}
    assert by_model["other-row"]["configuration"] == configuration and by_model["default-row"]["configuration"] == default
    own, theirs = priced(conv_graph(), VelaCalibratedCost(configuration)), priced(conv_graph(), VelaCalibratedCost(TARGET))
    assert own > theirs  # its file's doubled coefficients
    assert by_model["other-row"]["predicted"] == pytest.approx(own) and by_model["default-row"]["predicted"] == pytest.approx(theirs)
    assert by_model["other-row"]["folder"] == results / "modes" / "runs"
    assert model_rows([default], [results])[0] == [r for r in rows if r["configuration"] == default]


def test_the_report_has_a_table_per_configuration_with_its_rows(tmp_path, other_calibration, monkeypatch):
    from eqsat.calibration import report

    monkeypatch.setattr(report, "grid", lambda target, split, scale: [])  # no held-out shapes: no Vela run
    configuration = other_calibration
    results = tmp_path / "results"
    write_row(results / "runs", "default-row", conv_graph(), "")
    write_row(results / "modes" / "runs", "other-row", conv_graph(), "", configuration=configuration, cycles_total=2000)
    path = report.write_report([Configuration.of(TARGET), configuration], tmp_path / "report.md", [results], tmp_path / "work")
    text = path.read_text()
    default_section, other_section = text.split(f"### {TARGET}\n")[1], text.split(f"### {configuration.name}\n")[1]
    assert "| default-row |" in default_section.split("###")[0] and "other-row" not in default_section.split("###")[0]
    error = 100 * (priced(conv_graph(), VelaCalibratedCost(configuration)) - 2000) / 2000
    assert "| other-row | " in other_section.split("###")[0] and f"| {error:+.1f}% |" in other_section.split("###")[0]
    assert f"| {configuration.name} | {abs(error):.1f}% | {abs(error):.1f}% | {abs(error):.1f}% |" in text
