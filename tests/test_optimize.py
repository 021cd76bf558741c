"""The optimizer's contract: options, fail-safe, never worse."""

from __future__ import annotations

import pytest
import torch
from egglog import Vec, i64, panic, rule, ruleset, var

import eqsat
from eqsat import pipeline
from eqsat import rules
from eqsat.terms import Tensor
from tests.graphs import GraphBuilder, assert_bit_identical, permute_graph

aten = torch.ops.aten


def test_unknown_option_is_a_clear_error():
    with pytest.raises(TypeError, match="unknown eqsat option.*iteration_limt"):
        eqsat.optimize(permute_graph(), iteration_limt=3)


def test_unknown_target_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown target 'ethos-u99'"):
        eqsat.optimize(permute_graph(), target="ethos-u99")


def minimal_transpose_graph():
    """A rank-2 transpose and an elementwise op: no rule finds anything cheaper."""
    g = GraphBuilder()
    x = g.input("x", (4, 8))
    y = g.call(aten.permute_copy.default, x, [1, 0])
    return g.output(g.call(aten.neg.default, y))


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_nothing_cheaper_returns_the_original_graph_untouched(target):
    gm = minimal_transpose_graph()
    code = gm.code
    result, report = eqsat.optimize(gm, target=target)
    assert result is gm and gm.code == code
    assert not report.changed and report.fallback is None
    assert report.cost_after == report.cost_before


def test_accept_always_writes_back_an_equivalent_graph():
    gm = permute_graph()
    result, report = eqsat.optimize(gm, accept="always")
    assert result is not gm and report.changed
    assert_bit_identical(gm, result)


def duplicate_subgraphs():
    g = GraphBuilder()
    x = g.input("x", (4, 8))
    first, second = g.call(aten.bitwise_not.default, x), g.call(aten.bitwise_not.default, x)
    return g.output(g.call(aten.add.Tensor, first, second))


def test_duplicate_subgraphs_stay_apart_on_request():
    result, report = eqsat.optimize(duplicate_subgraphs(), merge_duplicates=False)
    assert not report.changed
    assert result is not None and report.ops_after["aten.bitwise_not.default"] == 2


def test_duplicate_subgraphs_merge_by_default_and_cost_less():
    gm = duplicate_subgraphs()
    result, report = eqsat.optimize(gm)
    assert report.changed and report.cost_after < report.cost_before
    assert report.ops_after["aten.bitwise_not.default"] == 1
    assert report.rules_fired["merge-duplicates"] == 1
    assert_bit_identical(gm, result)


def test_a_broken_extractor_leaves_the_graph_untouched_and_says_why(monkeypatch):
    def broken_extractor(*args, **kwargs):
        raise RuntimeError("extractor exploded")

    monkeypatch.setattr(pipeline, "extract", broken_extractor)
    gm = permute_graph()
    code = gm.code
    with pytest.warns(RuntimeWarning, match="extractor exploded"):
        result, report = eqsat.optimize(gm, accept="always")
    assert result is gm and gm.code == code
    assert report.fallback == "RuntimeError: extractor exploded"
    assert not report.changed


def broken_rules():
    x, p = var("x", Tensor), var("p", Vec[i64])
    return ruleset(rule(Tensor.transpose(x, p)).then(panic("broken rule fired")), name="broken")


def test_a_broken_rule_leaves_the_graph_untouched_and_says_why(monkeypatch):
    monkeypatch.setattr(rules, "REWRITES", (broken_rules(),))
    gm = permute_graph()
    with pytest.warns(RuntimeWarning, match="broken rule fired"):
        result, report = eqsat.optimize(gm, accept="always")
    assert result is gm
    assert "broken rule fired" in report.fallback


def test_strict_mode_raises_instead_of_falling_back(monkeypatch):
    monkeypatch.setattr(pipeline, "extract", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        eqsat.optimize(permute_graph(), strict=True)


def test_report_is_plain_data():
    import json

    _, report = eqsat.optimize(permute_graph())
    data = json.loads(json.dumps(report.as_dict()))
    assert data["target"] == "ethos-u55-128"
    assert set(data["phase_seconds"]) >= {"load", "saturate", "extract"}
    assert data["ops_before"]["aten.permute_copy.default"] == 1


def test_a_tosa_graph_is_optimized_outside_the_arm_pipeline():
    from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
    from executorch.exir.dialects._ops import ops as exir_ops

    tosa = exir_ops.backend.tosa
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT+int16+int4+u55")):
        y = g.call(tosa.CLAMP.default, g.call(tosa.TRANSPOSE.default, x, [0, 2, 3, 1]), -100, 100)
        gm = g.output(g.call(tosa.TRANSPOSE.default, y, [0, 3, 1, 2]))
    result, report = eqsat.optimize(gm, target="ethos-u55-128")
    assert report.fallback is None and report.changed and report.cost_after < report.cost_before
    # Bit-exactness of this rewrite is checked by the reference model in the test below (the TOSA dialect has no
    # CPU kernels). Cancelling the pair would leave the clamp to run alone, a layer of its own that Vela prices dearer than two
    # transposes that carry it (test_clamp_alone_costs_vela_more_than_the_transposes_that_carry_it): each pass is
    # rewritten instead into the rank-3 swap Vela runs in one pass, not two, and the clamp stays fused.
    transposes = [n for n in result.graph.nodes if n.target == tosa.TRANSPOSE.default]
    assert [len(n.args[1]) for n in transposes] == [3, 3]
    (clamp,) = [n for n in result.graph.nodes if n.target == tosa.CLAMP.default]
    assert clamp.args[0] in transposes


def test_clamp_alone_costs_vela_more_than_the_transposes_that_carry_it():
    """The Vela side of the test above: x -> TRANSPOSE -> CLAMP -> TRANSPOSE back, as a TOSA file, comes out of
    `eqsat optimize` bit-exact and cheaper under Vela than both the stock file and the clamp alone."""
    import tosa_serializer as ts

    from eqsat.calibration.graphs import _attr, _clamp, _Graph
    from eqsat.optimize_tosa import optimize_file
    from eqsat.vela import estimate

    def graph(pair: bool) -> bytes:
        g = _Graph()
        x = g.input([1, 2, 3, 4], "int8")
        if pair:
            t = g.op("t", ts.Op.TRANSPOSE, [x], [1, 3, 4, 2], "int8", _attr("TransposeAttribute", [0, 2, 3, 1]))
            c = _clamp(g, "c", t, [1, 3, 4, 2], "int8")
            g.output(g.op("back", ts.Op.TRANSPOSE, [c], [1, 2, 3, 4], "int8", _attr("TransposeAttribute", [0, 3, 1, 2])))
        else:
            g.output(_clamp(g, "c", x, [1, 2, 3, 4], "int8"))
        return g.tosa.serialize()

    result = optimize_file(graph(True), "ethos-u55-128")
    assert result.kept and result.bit_exact
    assert result.cycles_after < result.cycles_before
    assert result.cycles_after < estimate(graph(False), "ethos-u55-128").cycles_total


def test_a_transpose_beyond_the_u55_bound_that_the_graph_has_is_priced_not_infinite():
    """pixel_unshuffle(2) of a (1, 12, 270, 480) map as the Arm backend lowers it for Ethos-U55 (upstream's
    test_pixel_unshuffle_u55_INT[rand_4d_contiguous]): its transpose is beyond the U55 worst-case bound and
    absent from calibration, but the backend let it through because Vela compiled it. Priced inf, the pass
    fell back with "no finite-cost term for root classes"."""
    from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
    from executorch.exir.dialects._ops import ops as exir_ops

    from eqsat.ops.reference import evaluate
    from tests.graphs import random_inputs

    tosa = exir_ops.backend.tosa
    g = GraphBuilder()
    x = g.input("x", (1, 12, 270, 480))
    with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT+int16+int4+u55")):
        split = g.call(tosa.RESHAPE.default, x, g.const_shape((1, 12, 135, 2, 240, 2)))
        moved = g.call(tosa.TRANSPOSE.default, split, [0, 1, 3, 5, 2, 4])
        gm = g.output(g.call(tosa.RESHAPE.default, moved, g.const_shape((1, 48, 135, 240))))
    result, report = eqsat.optimize(gm, target="ethos-u55-128")
    assert report.fallback is None
    assert 0 < report.cost_after <= report.cost_before < float("inf")
    inputs = random_inputs(gm, 0)
    (expected,), (actual,) = evaluate(gm, inputs), evaluate(result, inputs)  # TOSA ops by the exact reference
    assert expected.dtype == actual.dtype and torch.equal(expected, actual)


def test_a_saving_below_min_saving_keeps_the_original_graph():
    gm = permute_graph()
    _, taken = eqsat.optimize(gm)
    assert taken.changed and taken.cost_after < taken.cost_before
    saving = 1 - taken.cost_after / taken.cost_before
    result, report = eqsat.optimize(gm, min_saving=min(0.99, saving * 1.5))
    assert result is gm and not report.changed


def test_min_saving_out_of_range_is_a_clear_error():
    with pytest.raises(ValueError, match="min_saving"):
        eqsat.optimize(permute_graph(), min_saving=1.5)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"accept": "bogus"}, "accept must be 'cheaper' or 'always', not 'bogus'"),
        ({"verify": "bogus"}, "verify must be 'none' or 'vela', not 'bogus'"),
        ({"extractor": "bogus"}, r"extractor must be one of .*, not 'bogus'"),
        ({"min_saving": 1.5}, r"min_saving must be in \[0, 1\), not 1.5"),
        ({"rules": ("bogus",)}, r"unknown ruleset\(s\) \['bogus'\]"),
        ({"time_limit": -1.0}, "time_limit must be >= 0"),
        ({"memory_limit_mb": 0}, "memory_limit_mb > 0"),
    ],
)
def test_options_made_directly_refuse_a_bad_value_with_a_clear_error(bad, message):
    with pytest.raises(ValueError, match=message):
        pipeline.Options(**bad)


def image_input_graph():
    """A 4-channel 32x32 image transposed NCHW -> NHWC at the graph input: the rules can rank-lower the
    transpose to (4, 1024) -> (1024, 4), which Vela runs in 8286 NPU cycles instead of 8784, but with
    51200 memory-access cycles instead of 1600 (ethos-u85-256)."""
    g = GraphBuilder()
    x = g.input("x", (1, 4, 32, 32))
    y = g.call(aten.permute_copy.default, x, [0, 2, 3, 1])
    return g.output(g.call(aten.neg.default, y))


def npu_only(model):
    """The same calibration with its memory-access models dropped: what the optimizer believed before."""
    stripped = pipeline.cost_models.vela_cost.VelaCalibratedCost(model.target)
    stripped._models = {family: {k: v for k, v in m.items() if k != "access"} for family, m in model._models.items()}
    return stripped


def test_acceptance_rejects_a_rewrite_that_saves_npu_cycles_but_costs_inference_cycles(monkeypatch):
    from tests.tosa_graphs import vela_layers

    target = "ethos-u85-256"
    as_is, lowered = vela_layers((1, 4, 32, 32), (0, 2, 3, 1), target), vela_layers((4, 1024), (1, 0), target)
    assert lowered.cycles_npu < as_is.cycles_npu and lowered.cycles_total > as_is.cycles_total  # the premise, from Vela
    gm = image_input_graph()
    result, report = eqsat.optimize(gm, target=target, min_saving=0.0)
    assert any(name.startswith("transpose-merge-adjacent-dims") for name in report.rules_fired), report.rules_fired
    assert result is gm and not report.changed

    real = pipeline.cost_models.cost_model_for
    monkeypatch.setattr(pipeline.cost_models, "cost_model_for", lambda t: npu_only(real(t)))
    _, believed = eqsat.optimize(gm, target=target, min_saving=0.0)
    assert believed.changed, "without memory-access costs the rank-lowered transpose looks cheaper"


def cancelling_permutes():
    g = GraphBuilder()
    x = g.input("x", (1, 4, 8, 16))
    there = g.call(aten.neg.default, g.call(aten.permute_copy.default, x, [0, 2, 3, 1]))
    return g.output(g.call(aten.permute_copy.default, there, [0, 3, 1, 2]))


def test_the_written_back_graph_is_priced_again_and_kept_only_if_cheaper(monkeypatch):
    gm = cancelling_permutes()
    optimized, report = eqsat.optimize(gm)
    assert report.changed and report.cost_after == pipeline.fx_graph_cost(optimized, pipeline.cost_models.cost_model_for(report.target))
    dearer = cancelling_permutes()  # stands in for a write-back that came out dearer than its selection
    monkeypatch.setattr(pipeline.bridge_fx, "to_fx", lambda *args, **kwargs: dearer)
    result, report = eqsat.optimize(gm)
    assert result is gm and not report.changed and report.fallback is None


def _boundary_transposes_priced_alone(gm, target: str) -> dict[str, float]:
    graph = pipeline.bridge_fx.read_graph(gm).as_ir()
    types = {value: t for value, t in enumerate(graph.types) if t is not None}
    model = pipeline.cost_models.cost_model_for(target).running_transposes_of(graph)
    costs = pipeline.cost_models.value_costs(dict(enumerate(graph.terms)), graph.outputs, types.get, model)
    return {graph.names[value]: costs[value] for value in graph.boundary_transposes()}


@pytest.mark.parametrize("changed", [True, False])
def test_the_report_prices_the_boundary_transposes_the_returned_graph_keeps(changed):
    g = GraphBuilder()
    x = g.input("x", (1, 4, 8, 16))
    kept = g.call(aten.neg.default, g.call(aten.permute_copy.default, x, [0, 2, 3, 1]))
    kept = g.call(aten.permute_copy.default, g.call(aten.permute_copy.default, kept, [0, 3, 1, 2]), [0, 2, 3, 1])
    gm = g.output(kept)  # the round trip behind the input's transpose goes, without rules nothing does
    optimized, report = eqsat.optimize(gm, target="ethos-u85-256", rules=None if changed else ())
    assert report.changed == changed
    assert report.boundary_transposes and report.boundary_transposes == _boundary_transposes_priced_alone(optimized, "ethos-u85-256")
    assert any(cycles > 0 for cycles in report.boundary_transposes.values())


def test_a_fallback_logs_its_reason_as_a_warning_and_its_traceback_for_debugging(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in write-back")

    monkeypatch.setattr(pipeline.bridge_fx, "to_fx", broken)
    with caplog.at_level("DEBUG", logger="eqsat"), pytest.warns(RuntimeWarning, match="a bug in write-back"):
        result, report = eqsat.optimize(cancelling_permutes())
    assert "a bug in write-back" in report.fallback
    warning = [r for r in caplog.records if r.levelname == "WARNING"]
    debug = [r for r in caplog.records if r.levelname == "DEBUG" and r.exc_info]
    assert warning and "a bug in write-back" in warning[0].getMessage()
    assert debug and debug[0].exc_info[0] is RuntimeError


def test_saturated_view_is_the_egraph_the_pass_extracts_from():
    """Extracting and refining on saturated_view's e-graph gives the cost the pass reports (benchmarks.optimality reads it)."""
    from eqsat.extract import cost as cost_models
    from eqsat.extract import extract
    from eqsat.extract.refine import refine_from

    gm = permute_graph()
    _, report = eqsat.optimize(gm, target="ethos-u55-128", accept="always")
    view, roots = pipeline.saturated_view(gm, target="ethos-u55-128")
    assert view.enode_count == report.egraph_enodes and len(view.candidates) == report.egraph_classes
    model = cost_models.cost_model_for("ethos-u55-128")
    term_cost = cost_models.term_costs(model, view.types)
    extraction = extract(view.candidates, roots, term_cost)
    refined = refine_from(extraction.starts, view.candidates, roots, lambda s: cost_models.graph_cost(s, roots, view.types.get, model, term_cost))
    assert refined.cost == pytest.approx(report.cost_after)
