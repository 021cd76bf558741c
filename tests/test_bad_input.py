"""Bad and unusual input: each case is optimized bit-exact, or returned untouched with its reason logged and reported."""

from __future__ import annotations

import numpy as np
import math

import pytest
import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_a16w8_quantization_config
from executorch.exir import to_edge
from torch import fx
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import eqsat
from eqsat import lowering
from eqsat.bridge_fx import ZERO_SIZE_REFUSAL
from eqsat.validate import assert_lowerings_equivalent, tosa_inputs
from tests.graphs import GraphBuilder, assert_bit_identical

aten = torch.ops.aten


def double_permute_then_cat(dtype: torch.dtype, shape=(1, 2, 3, 4)) -> fx.GraphModule:
    """permute, its inverse, then cat with the input (add for a scalar): two transposes that cancel."""
    g = GraphBuilder()
    x = g.input("x", shape, dtype)
    perm = [0, 2, 3, 1][: len(shape)] if len(shape) == 4 else list(reversed(range(len(shape))))
    inverse = [perm.index(d) for d in range(len(shape))]
    y = g.call(aten.permute_copy.default, g.call(aten.permute_copy.default, x, perm), inverse)
    if not shape:
        return g.output(g.call(aten.add.Tensor, y, x))
    return g.output(g.call(aten.cat.default, [y, x], 0))


def assert_optimized_bit_exact(graph_module, **options):
    optimized, report = eqsat.optimize(graph_module, accept="always", **options)
    assert report.fallback is None and report.changed
    assert_bit_identical(graph_module, optimized)
    assert_bit_identical(graph_module, optimized, seed=1)
    return optimized, report


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.int32, torch.int8])
def test_every_dtype_is_optimized_bit_exact(dtype):
    optimized, report = assert_optimized_bit_exact(double_permute_then_cat(dtype))
    assert report.rules_fired.get("transpose-compose", 0) > 0
    assert "aten.permute_copy.default" not in report.ops_after


@pytest.mark.parametrize("shape", [(), (1,) * 6, (3, 1, 1, 2, 1, 1)])
def test_odd_shapes_are_optimized_bit_exact(shape):
    assert_optimized_bit_exact(double_permute_then_cat(torch.int8, shape))


def assert_refused_for_zero_size(graph_module):
    result, report = eqsat.optimize(graph_module, accept="always")
    assert result is graph_module and not report.changed
    assert report.fallback is not None and ZERO_SIZE_REFUSAL in report.fallback


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3)])
def test_a_zero_size_tensor_is_refused_with_the_reason(shape):
    assert_refused_for_zero_size(double_permute_then_cat(torch.int8, shape))


@pytest.mark.parametrize("accept", ["cheaper", "always"])
def test_a_graph_the_cost_model_cannot_price_stays_as_it_is(accept):
    """Rank 7 is beyond the TOSA profile: the model prices it infinite, and infinity is never compared."""
    gm = double_permute_then_cat(torch.int8, (1,) * 7)
    result, report = eqsat.optimize(gm, accept=accept)
    assert report.cost_before == math.inf and report.fallback is None
    assert result is gm and not report.changed


def test_zero_sized_parts_of_a_concat_and_empty_slices_are_refused():
    g = GraphBuilder()
    empty, x = g.input("empty", (2, 0)), g.input("x", (2, 3))
    nothing = g.call(aten.slice_copy.Tensor, x, 1, 2, 2)
    joined = g.call(aten.cat.default, [empty, x, nothing], 1)
    assert_refused_for_zero_size(g.output(g.call(aten.slice_copy.Tensor, joined, 1, 0, 2), nothing))


def test_unknown_ops_stay_opaque_and_the_rest_is_optimized():
    g = GraphBuilder()
    x = g.input("x", (4, 6), torch.float32)
    values = g.getitem(g.call(aten.sort.default, x, 1), 0)
    back = g.call(aten.permute_copy.default, g.call(aten.permute_copy.default, values, [1, 0]), [1, 0])
    optimized, report = assert_optimized_bit_exact(g.output(g.call(aten.cumsum.default, back, 0)))
    assert report.ops_after["aten.sort.default"] == 1 and "aten.permute_copy.default" not in report.ops_after


class PermuteCatSlice(torch.nn.Module):
    def forward(self, x):
        y = x.permute(0, 2, 1).permute(0, 2, 1)
        return torch.cat([y, x], 1)[:, :3]


def test_dynamic_shapes_are_optimized_where_static_and_opaque_elsewhere():
    exported = torch.export.export(
        PermuteCatSlice(), (torch.randn(2, 4, 5),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}
    )
    graph_module = to_edge(exported).exported_program().graph_module
    optimized, report = eqsat.optimize(graph_module, accept="always")
    assert report.fallback is None and report.changed
    assert "aten.permute_copy.default" not in report.ops_after
    for batch in (1, 3, 7):
        x = torch.randn(batch, 4, 5)
        assert torch.equal(graph_module(x)[0], optimized(x)[0])


class CondOnPermuted(torch.nn.Module):
    def forward(self, x):
        y = x.permute(1, 0).permute(1, 0)
        branches = (lambda t: t.permute(1, 0).permute(1, 0) + 1, lambda t: t - 1)
        return torch.cond(y.sum() > 0, *branches, (y,)).permute(1, 0)


def test_control_flow_submodules_are_kept_and_the_outer_graph_is_optimized():
    graph_module = to_edge(torch.export.export(CondOnPermuted(), (torch.randn(3, 4),))).exported_program().graph_module
    optimized, report = eqsat.optimize(graph_module, accept="always")
    assert report.fallback is None and report.changed
    assert report.ops_after["aten.permute_copy.default"] == 1
    assert [n.target for n in optimized.graph.nodes if n.op == "get_attr"] == ["submodule_1", "submodule_0"]
    for sign in (1, -1):
        x = sign * torch.rand(3, 4)
        assert torch.equal(graph_module(x)[0], optimized(x)[0])


def test_a_graph_without_nodes_is_returned_untouched_with_the_reason(caplog):
    empty = fx.GraphModule(torch.nn.Module(), fx.Graph())
    with pytest.warns(RuntimeWarning, match="the graph has no output node"):
        result, report = eqsat.optimize(empty)
    assert result is empty and not report.changed
    assert report.fallback == "ValueError: the graph has no output node"
    assert "the graph has no output node" in caplog.text


def test_a_graph_with_no_outputs_or_only_inputs_is_kept():
    g = GraphBuilder()
    nothing = g.output()
    result, report = eqsat.optimize(nothing)
    assert result is nothing and report.fallback is None and report.cost_before == report.cost_after == 0
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    passthrough = g.output(x, x)
    optimized, report = eqsat.optimize(passthrough, accept="always")
    assert report.fallback is None
    assert_bit_identical(passthrough, optimized)


def test_nodes_without_meta_are_opaque():
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(aten.neg.default, (x,)),))
    bare = fx.GraphModule(torch.nn.Module(), graph)
    optimized, report = eqsat.optimize(bare, accept="always")
    assert report.fallback is None
    x = torch.arange(6).reshape(2, 3)
    assert torch.equal(optimized(x)[0], -x)


class PermuteTwiceConcat(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x.permute(0, 2, 3, 1), x.permute(0, 2, 3, 1)], 3) + 1


def lower_with_eqsat(exported, target, workdir, **options):
    eqsat.install(accept="always", **options)
    try:
        return lowering.lower(exported, target, workdir=workdir), eqsat.last_reports()
    finally:
        eqsat.uninstall()


def test_an_int16_lowering_with_eqsat_is_bit_exact_with_the_stock_one(tmp_path):
    target, x = "ethos-u55-128", torch.randn(1, 4, 4, 4, generator=torch.Generator().manual_seed(0))
    quantizer = EthosUQuantizer(EthosUCompileSpec(target))
    quantizer.set_global(get_symmetric_a16w8_quantization_config())
    prepared = prepare_pt2e(torch.export.export(PermuteTwiceConcat(), (x,)).module(check_guards=False), quantizer)
    prepared(x)
    exported = torch.export.export(convert_pt2e(prepared), (x,))
    stock = lowering.lower(exported, target, workdir=tmp_path / "stock")
    # the transpose laws alone hoist the transposes out of the concat: an int16 graph written back
    optimized, reports = lower_with_eqsat(exported, target, tmp_path / "eqsat", rules=("transpose",))
    assert [r.fallback for r in reports] == [None] and reports[0].changed
    assert tosa_inputs(optimized.tosa_flatbuffers[0])[0].dtype == np.int16
    assert_lowerings_equivalent(stock, optimized)


def test_a_float_model_has_no_delegate_and_lowers_without_running_eqsat(tmp_path):
    exported = torch.export.export(PermuteTwiceConcat(), (torch.randn(1, 4, 4, 4),))
    lowered, reports = lower_with_eqsat(exported, "ethos-u55-128", tmp_path)
    assert lowered.delegates == 0 and reports == []
    assert "aten.cat.default" in lowered.cpu_ops
