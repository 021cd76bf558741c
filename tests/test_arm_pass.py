"""The drop-in pass inside the real Arm pipeline: install, target from the compile spec, insertion points."""

from __future__ import annotations

import copy

import pytest
import torch

import eqsat
from eqsat import lowering
from eqsat.ops.nodes import Dialect
from eqsat.report import op_counts
from executorch.backends.arm._passes import arm_pass_manager
from tests.graphs import GraphBuilder


class TwoBranchConcat(torch.nn.Module):
    """conv a, conv b -> concat -> permute -> slice -> add: data movement the pass sees."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x):
        y = torch.cat([self.a(x), self.b(x)], dim=1).permute(0, 2, 3, 1)
        return y[..., :8] + 1


def lower_with_eqsat(target, tmp_path, **install_options):
    model, inputs = TwoBranchConcat().eval(), (torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1)),)
    exported = lowering.quantize(model, inputs, target)
    eqsat.install(**install_options)
    try:
        lowered = lowering.lower(exported, target, workdir=tmp_path)
        return lowered, eqsat.last_reports()
    finally:
        eqsat.uninstall()


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_install_takes_the_target_from_the_compile_spec(target, tmp_path):
    lowered, reports = lower_with_eqsat(target, tmp_path)
    assert lowered.delegates == 1 and lowered.cpu_ops == []
    assert [r.target for r in reports] == [target]
    assert reports[0].dialect == Dialect.TOSA and reports[0].fallback is None


def test_install_before_exir_to_tosa_sees_edge_aten_ops(tmp_path):
    _, reports = lower_with_eqsat("ethos-u55-128", tmp_path, before="ExirToTosaPass")
    assert reports[0].dialect == Dialect.ATEN
    assert "aten.permute_copy.default" in reports[0].ops_before or "aten.cat.default" in reports[0].ops_before


def test_uninstall_removes_the_pass(tmp_path):
    _, reports = lower_with_eqsat("ethos-u55-128", tmp_path / "first")
    model, inputs = TwoBranchConcat().eval(), (torch.randn(1, 4, 8, 8),)
    lowering.lower(lowering.quantize(model, inputs, "ethos-u55-128"), "ethos-u55-128", workdir=tmp_path / "second")
    assert len(eqsat.last_reports()) == len(reports) == 1
    registered = [p for r in arm_pass_manager._registered_pass_insertions.values() for p in r.before_passes]
    assert not any(isinstance(p, eqsat.EqsatPass) for p in registered)


def test_install_rejects_an_unknown_insertion_point():
    with pytest.raises(ValueError, match="before must be one of"):
        eqsat.install(before="NoSuchPass")


def permute_pair() -> torch.fx.GraphModule:
    """Two permutes that cancel across a negation: a graph the pass rewrites whenever it has a target (back to back,
    Vela's MergeTransposes removes the pair itself, so removing it saves nothing)."""
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    there = g.call(torch.ops.aten.neg.default, g.call(torch.ops.aten.permute_copy.default, x, [0, 2, 3, 1]))
    return g.output(g.call(torch.ops.aten.permute_copy.default, there, [0, 3, 1, 2]))


def test_pass_without_target_outside_a_lowering_keeps_the_graph_and_says_why():
    gm = permute_pair()
    eqsat_pass = eqsat.EqsatPass()
    assert eqsat_pass.resolve_target() is None
    result = eqsat_pass(gm)
    assert not result.modified and op_counts(gm) == {"aten.neg.default": 1, "aten.permute_copy.default": 2}
    (report,) = eqsat_pass.reports
    assert report.fallback.startswith("no target") and not report.changed
    with pytest.raises(ValueError, match="no target"):
        eqsat.EqsatPass(strict=True)(permute_pair())


def lower_tosa_only(model, inputs, workdir):
    """Quantize and lower as upstream's TosaPipelineINT does: TOSAQuantizer, TosaCompileSpec, TOSAPartitioner.
    Returns each delegate's TOSA flatbuffer."""
    from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    spec = TosaCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(str(workdir))
    quantizer = TOSAQuantizer(spec)
    quantizer.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(check_guards=False), quantizer)
    prepared(*inputs)
    exported = torch.export.export(convert_pt2e(prepared), inputs)
    to_edge_transform_and_lower(exported, partitioner=[TOSAPartitioner(spec)])
    return [path.read_bytes() for path in sorted(workdir.glob("output*.tosa"))]


def test_install_without_target_leaves_a_tosa_only_lowering_as_stock(tmp_path):
    model, inputs = TwoBranchConcat().eval(), (torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1)),)
    stock = lower_tosa_only(model, inputs, tmp_path / "stock")
    eqsat.install()
    try:
        with_eqsat = lower_tosa_only(model, inputs, tmp_path / "eqsat")
        reports = eqsat.last_reports()
    finally:
        eqsat.uninstall()
    assert len(stock) == 1 and with_eqsat == stock  # the same TOSA graph, byte for byte
    (report,) = reports
    assert report.fallback.startswith("no target") and not report.changed
    assert report.ops_before == report.ops_after and "tosa.TRANSPOSE.default" in report.ops_before


def test_keep_inputs_keeps_the_graph_the_pass_was_given():
    gm = permute_pair()
    eqsat_pass = eqsat.EqsatPass("ethos-u55-128", keep_inputs=True)
    result = eqsat_pass(gm)
    assert result.modified and "aten.permute_copy.default" not in op_counts(gm)
    (kept,) = eqsat_pass.input_graphs
    assert op_counts(kept) == {"aten.neg.default": 1, "aten.permute_copy.default": 2}


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_verify_vela_lowers_the_graph_vela_estimates_faster_and_reports_both(target, tmp_path):
    from eqsat.validate import assert_lowerings_equivalent
    from eqsat.vela import estimate

    model, inputs = TwoBranchConcat().eval(), (torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1)),)
    exported = lowering.quantize(model, inputs, target)
    stock = lowering.lower(copy.deepcopy(exported), target, workdir=tmp_path / "stock")
    lowered, reports = lower_with_eqsat(target, tmp_path / "verified", verify="vela", accept="always")
    (report,) = reports
    assert report.verification is not None, "eqsat changed nothing: the check never ran"
    figures = report.verification["vela_cycles_total"]
    kept = report.verification["kept"]
    assert kept == ("eqsat" if figures["eqsat"] < figures["original"] else "original")
    assert report.changed == (kept == "eqsat") and report.phase_seconds["verify"] > 0
    (tosa,) = lowered.tosa_flatbuffers
    assert estimate(tosa, target).cycles_total == min(figures.values())
    assert figures["original"] == estimate(stock.tosa_flatbuffers[0], target).cycles_total
    assert_lowerings_equivalent(stock, lowered)


def test_verify_is_checked_like_every_option():
    with pytest.raises(ValueError, match="verify must be"):
        eqsat.install(verify="tosa")
