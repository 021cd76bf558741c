"""`eqsat optimize` on TOSA flatbuffers the Arm backend dumps for zoo models, on both targets.

The files are dumped once per session (`dump_intermediate_artifacts_to`, through `eqsat.lowering.lower`).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from tosa.DType import DType

from benchmarks.zoo import ZOO
import eqsat
from eqsat import bridge_tosa, cli, lowering, optimize_tosa, validate, vela
from eqsat.ops import reference
from eqsat.ops.nodes import TOSA
from tests.graphs import GraphBuilder

MODELS = ["attention-permute", "shufflenet-v2", "small-convnet"]
TARGETS = ["ethos-u55-128", "ethos-u85-256"]
IMPROVED = {
    ("attention-permute", "ethos-u55-128"),
    ("attention-permute", "ethos-u85-256"),
    ("shufflenet-v2", "ethos-u55-128"),
    ("shufflenet-v2", "ethos-u85-256"),
    ("small-convnet", "ethos-u55-128"),
}
"""The files on which eqsat lowered Vela's cycles_total when measured (the others it leaves as they are)."""


@dataclass
class Dumped:
    flatbuffer: bytes
    pass_cost: float
    """What the cost model said the graph costs when eqsat saw it inside the lowering."""


@pytest.fixture(scope="module")
def dumped(tmp_path_factory) -> dict[tuple[str, str], Dumped]:
    """The TOSA flatbuffer of each model's one delegate, as the Arm backend dumps it for each target (with
    eqsat installed without rules or merging, to hear what the pass saw: it returns the graph unchanged)."""
    files = {}
    for model in MODELS:
        module, example_inputs = ZOO[model].build()
        for target in TARGETS:
            exported = lowering.quantize(module, example_inputs, target)
            eqsat.install(target=target, rules=(), merge_duplicates=False)
            try:
                lowered = lowering.lower(exported, target, workdir=tmp_path_factory.mktemp(f"{model}-{target}"))
                (report,) = eqsat.last_reports()
            finally:
                eqsat.uninstall()
            assert lowered.delegates == 1 and not report.changed
            files[model, target] = Dumped(lowered.tosa_flatbuffers[0], report.cost_before)
    return files


@pytest.fixture(scope="module")
def optimized(dumped) -> dict[tuple[str, str], optimize_tosa.Optimized]:
    return {key: optimize_tosa.optimize_file(file.flatbuffer, key[1]) for key, file in dumped.items()}


CASES = [(model, target) for model in MODELS for target in TARGETS]


@pytest.mark.parametrize("model,target", CASES)
def test_a_dumped_file_comes_out_no_slower_under_vela_and_bit_exact(optimized, model, target):
    result = optimized[model, target]
    assert result.bit_exact, result.mismatch
    assert result.cycles_after == vela.estimate(result.flatbuffer, target).cycles_total
    if (model, target) in IMPROVED:
        assert result.kept, result.reason
        assert result.cycles_after < result.cycles_before
    else:
        assert result.cycles_after <= result.cycles_before


@pytest.mark.parametrize("model,target", CASES)
def test_the_cost_model_prices_a_file_as_it_priced_the_graph_inside_the_lowering(dumped, optimized, model, target):
    assert optimized[model, target].report.cost_before == pytest.approx(dumped[model, target].pass_cost, rel=1e-9)


def _operators_as_written(data: bytes) -> list[tuple]:
    """Every operator with its attribute and the data of its constant inputs, in a comparable form."""
    parsed = bridge_tosa.parse(data)
    rows = []
    for o in parsed.operators:
        constants = [
            parsed.tensors[name].get("Data", np.zeros(0, np.uint8)).tobytes()
            for name in o.inputs
            if name in parsed.producer and parsed.operators[parsed.producer[name]].op == "CONST"
        ]
        fields = {k: v.tobytes() if isinstance(v, np.ndarray) else v for k, v in o.fields.items()}
        rows.append((o.op, o.attribute, repr(sorted(fields.items())), tuple(constants), repr(o.location)))
    return rows


@pytest.mark.parametrize("model", MODELS)
def test_a_file_read_and_written_without_rewrites_is_the_same_graph(dumped, model):
    data = dumped[model, "ethos-u55-128"].flatbuffer
    graph_module, parsed = bridge_tosa.read_flatbuffer(data)
    written = bridge_tosa.write_flatbuffer(graph_module, parsed)
    assert Counter(_operators_as_written(written)) == Counter(_operators_as_written(data))
    validate.assert_equivalent(data, written, trials=1)
    assert vela.estimate(written, "ethos-u55-128").cycles_total == vela.estimate(data, "ethos-u55-128").cycles_total


@pytest.mark.parametrize("model,target", sorted(IMPROVED))
def test_operators_eqsat_does_not_model_pass_through_unchanged(dumped, optimized, model, target):
    modelled = set(bridge_tosa.DIALECT_READERS) | {"CONST"}
    before = Counter(row for row in _operators_as_written(dumped[model, target].flatbuffer) if row[0] not in modelled)
    after = Counter(row for row in _operators_as_written(optimized[model, target].flatbuffer) if row[0] not in modelled)
    assert before and after == before


def _edited(data: bytes, edit) -> bytes:
    parsed = copy.deepcopy(bridge_tosa.parse(data))
    edit(parsed)
    return bridge_tosa.to_bytes(parsed)


def _set_version(parsed):
    parsed.version["_Minor"] = 80
    parsed.version["_Major"] = 0


def _make_float(parsed):
    name = parsed.inputs[0]
    parsed.tensors[name]["Type"] = int(DType.FP32)


def _add_control_flow(parsed):
    parsed.operators.append(bridge_tosa.Operator("COND_IF", None, {}, [parsed.inputs[0]], [b"branch"]))


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda data: b"not a flatbuffer at all\n", "not a TOSA flatbuffer"),
        (lambda data: data[:1000], "not a readable TOSA flatbuffer"),
        (lambda data: _edited(data, _set_version), "TOSA 0.80.0: eqsat optimize reads TOSA 1.0"),
        (lambda data: _edited(data, _make_float), "FP32 tensors: eqsat optimize reads the TOSA INT profile"),
        (lambda data: _edited(data, _add_control_flow), "control flow (COND_IF)"),
    ],
    ids=["not-tosa", "truncated", "version", "profile", "control-flow"],
)
def test_eqsat_optimize_refuses_what_it_cannot_read_in_one_line_with_status_2(dumped, tmp_path, capsys, make, reason):
    path, out = tmp_path / "in.tosa", tmp_path / "out.tosa"
    path.write_bytes(make(dumped["small-convnet", "ethos-u55-128"].flatbuffer))
    assert cli.main(["optimize", str(path), "--target", "ethos-u55-128", "-o", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], lines
    assert not out.exists()


def test_eqsat_optimize_prints_cycles_and_writes_the_file(dumped, tmp_path, capsys):
    path, out = tmp_path / "in.tosa", tmp_path / "out.tosa"
    path.write_bytes(dumped["attention-permute", "ethos-u85-256"].flatbuffer)
    assert cli.main(["optimize", str(path), "--target", "ethos-u85-256", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    before = vela.estimate(path.read_bytes(), "ethos-u85-256").cycles_total
    after = vela.estimate(out.read_bytes(), "ethos-u85-256").cycles_total
    assert f"Vela cycles_total: {before} before, {after} after" in printed
    assert "bit-exact on 3 seeded random inputs" in printed


def test_eqsat_optimize_exits_1_and_writes_nothing_when_the_reference_model_disagrees(dumped, tmp_path, capsys, monkeypatch):
    write_flatbuffer = bridge_tosa.write_flatbuffer

    def wrong_output_zero_point(graph_module, parsed):
        def edit(written):
            last = written.operators[written.producer[written.outputs[0]]]
            assert last.op == "RESCALE"
            zero_point = written.tensors[last.inputs[4]]
            zero_point["Data"] = (zero_point["Data"].view(np.int8) + np.int8(1)).view(np.uint8)

        return _edited(write_flatbuffer(graph_module, parsed), edit)

    monkeypatch.setattr(bridge_tosa, "write_flatbuffer", wrong_output_zero_point)
    path, out = tmp_path / "in.tosa", tmp_path / "out.tosa"
    path.write_bytes(dumped["attention-permute", "ethos-u85-256"].flatbuffer)
    assert cli.main(["optimize", str(path), "--target", "ethos-u85-256", "-o", str(out)]) == 1
    assert "MISMATCH under the TOSA reference model" in capsys.readouterr().out
    assert not out.exists()


def test_every_operator_eqsat_writes_anew_computes_what_its_dialect_node_computes():
    """Nodes without a source operator (as eqsat's emitters write them) are written as new TOSA operators;
    the reference model runs the written file bit-identically to eqsat's exact evaluator on the FX graph."""
    build = GraphBuilder()
    with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT+int16")):
        x, y = build.input("x", (1, 4, 6, 8)), build.input("y", (1, 4, 6, 8))
        transposed = build.call(TOSA.TRANSPOSE.default, x, [0, 2, 3, 1])
        joined = build.call(TOSA.CONCAT.default, [x, y], axis=3)
        cut = build.call(TOSA.SLICE.default, joined, build.const_shape((0, 1, 0, 2)), build.const_shape((1, 2, 6, 8)))
        reshaped = build.call(TOSA.RESHAPE.default, cut, build.const_shape((1, 12, 8)))
        padded = build.call(TOSA.PAD.default, x, build.const_shape((0, 0, 0, 0, 1, 1, 2, 0)), value=-3)
        wide = build.call(TOSA.RESCALE.default, x, torch.int32, [0.37], -2, 0)
        per_channel = build.call(TOSA.RESCALE.default, wide, torch.int8, [0.5 / (k + 1) for k in range(8)], 0, 5)
        summed = build.call(TOSA.REDUCE_SUM.default, wide, axis=2)
        largest = build.call(TOSA.REDUCE_MAX.default, y, axis=1)
        graph_module = build.output(transposed, reshaped, padded, per_channel, summed, largest)
    outputs = [b"transposed", b"reshaped", b"padded", b"per_channel", b"summed", b"largest"]
    placeholders = {b"x": x, b"y": y}
    parsed = bridge_tosa.TosaFile(
        version={"_Major": 1, "_Minor": 0, "_Patch": 0, "_Draft": False},
        software_version=None,
        region=b"main",
        block=b"main",
        operators=[],
        tensors={name: {"Name": name, "Shape": np.array(node.meta["val"].shape, np.int32), "Type": int(DType.INT8)} for name, node in placeholders.items()},
        shapes={},
        inputs=list(placeholders),
        outputs=outputs,
    )
    written = bridge_tosa.write_flatbuffer(graph_module, parsed)
    assert Counter(o.op for o in bridge_tosa.parse(written).operators) >= Counter(
        ["TRANSPOSE", "CONCAT", "SLICE", "RESHAPE", "PAD", "RESCALE", "RESCALE", "REDUCE_SUM", "REDUCE_MAX"]
    )
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        inputs = [torch.randint(-128, 128, (1, 4, 6, 8), dtype=torch.int8, generator=generator) for _ in placeholders]
        expected = reference.evaluate(graph_module, inputs)
        actual = validate.run_reference(written, [t.numpy() for t in inputs])
        for name, e, a in zip(outputs, expected, actual, strict=True):
            assert a.dtype == e.numpy().dtype and a.shape == tuple(e.shape), name
            assert a.tobytes() == e.numpy().tobytes(), name


def test_eqsat_optimize_help_says_what_it_does_its_defaults_and_an_example(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["optimize", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "TOSA reference model" in text and "cycles_total" in text
    assert "(default: 3)" in text and "(default: 0)" in text
    assert "example: eqsat optimize" in text


@pytest.mark.parametrize("kind, k", [("max_pool2d", 3), ("avg_pool2d", 2)])
def test_a_pooling_read_from_a_file_carries_its_window_as_in_the_lowering(kind, k):
    """The window sits in the operator's attribute, not among its inputs; the opaque term's key carries it
    (`ir.with_window`), as it does for the TOSA dialect's node inside a lowering, so both are priced alike."""
    from eqsat import bridge_fx
    from eqsat.calibration.graphs import Sample, build_tosa
    from eqsat.ir import window_of

    data, _ = build_tosa([Sample(kind, {"shape": [1, 12, 12, 8], "k": k, "stride": 2})])
    graph_module, _ = bridge_tosa.read_flatbuffer(data)
    read = bridge_fx.read_graph(graph_module)
    pools = [t for t in read.terms if t.op == "Opaque" and kind.upper() in t.attrs[0]]
    assert [window_of(t.attrs[0]) for t in pools] == [(k, k)]
