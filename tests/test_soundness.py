"""eqsat.soundness: a sound ruleset passes, a wrong law is caught on real tensors."""

from __future__ import annotations

import pytest
import torch
from egglog import String, Vec, eq, i64, ruleset, var
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat import bridge_fx
from eqsat.ir import TensorType
from eqsat.ops.nodes import TOSA
from eqsat.rules._law import law
from eqsat.rules.concat_slice import concat_slice
from eqsat.rules.transpose import transpose
from eqsat.soundness import LawDidNotFire, Saturated, Unsound, fired_share, law_fires_in, random_inputs
from eqsat.terms import Tensor
from tests.graphs import GraphBuilder, tosa_lowering

permute = torch.ops.aten.permute_copy.default
x, p, q = var("x", Tensor), var("p", Vec[i64]), var("q", Vec[i64])

wrong = ruleset(name="wrong")
# WRONG: transpose(transpose(x, p), q) == transpose(x, q)  -- forgets p
wrong.register(law("transpose-forget-inner", x.transpose(p).transpose(q), x.transpose(q)))


def twice_permuted():
    g = GraphBuilder()
    there = g.call(permute, g.input("x", (2, 3, 4)), [1, 2, 0])
    return g.output(g.call(permute, there, [0, 2, 1]))


def test_a_sound_ruleset_passes():
    saturated = Saturated(twice_permuted(), transpose)
    assert saturated.fired("transpose-compose") >= 1
    saturated.assert_every_extraction_agrees()


def test_a_wrong_law_is_caught():
    saturated = Saturated(twice_permuted(), wrong)
    assert saturated.fired("transpose-forget-inner") == 1
    with pytest.raises(Unsound, match="disagrees with its class"):
        saturated.assert_every_extraction_agrees()


def test_fired_share_counts_cases_and_generated_families():
    cases = [{"transpose-through-pad-3": 2}, {"transpose-through-pad-4": 0, "other": 1}, {"transpose-through-padding": 1}, {}]
    assert fired_share(cases, "transpose-through-pad") == 0.25
    assert fired_share([], "transpose-through-pad") == 0.0


@given(st.permutations(range(3)))
@settings(max_examples=5, deadline=None, database=None)
def permuted_twice(perm):
    g = GraphBuilder()
    there = g.call(permute, g.input("x", (2, 3, 4)), list(perm))
    Saturated(g.output(g.call(permute, there, [0, 2, 1])), transpose).assert_every_extraction_agrees()


def test_a_law_that_fires_in_every_case_meets_its_share():
    law_fires_in(1.0, "transpose-compose")(permuted_twice)()


def test_a_law_that_fires_in_no_generated_case_fails_its_share():
    with pytest.raises(LawDidNotFire, match="transpose-forget-inner fired in 0% of 5 saturated cases"):
        law_fires_in(0.1, "transpose-forget-inner")(permuted_twice)()


# ---------------------------------------------------------------- one scratch e-graph, reset from graph to graph


def sliced_twice():
    g = GraphBuilder()
    once = g.call(torch.ops.aten.slice_copy.Tensor, g.input("y", (6, 5)), 0, 1, 5)
    return g.output(g.call(torch.ops.aten.slice_copy.Tensor, once, 1, 2, 4))


def test_each_graph_starts_from_an_empty_scratch_egraph(monkeypatch):
    """Saturated loads graph after graph into the one scratch e-graph (rules.scratch_egraph), and each sees only its
    own terms: the second graph's e-graph holds no term of the first (no Transpose), and it, its rule matches and
    its row count are what a fresh e-graph gives."""
    loaded_into = []
    to_egraph = bridge_fx.to_egraph

    def recording(graph_module, **options):
        loaded_into.append(options.get("into"))
        return to_egraph(graph_module, **options)

    monkeypatch.setattr(bridge_fx, "to_egraph", recording)
    first = Saturated(twice_permuted(), transpose, concat_slice)
    second = Saturated(sliced_twice(), transpose, concat_slice)
    fresh = Saturated(sliced_twice(), transpose, concat_slice, keep_egraph=True)
    assert loaded_into[0] is not None and loaded_into[1] is loaded_into[0] and loaded_into[2] is None
    assert first.loaded.egraph is None and second.loaded.egraph is None and fresh.loaded.egraph is not None
    assert first.fired("transpose-compose") >= 1 and second.fired("slice-slice-rank2") >= 1
    assert not [t for terms in second.view.candidates.values() for t in terms if t.op == "Transpose"]
    assert second.view.candidates == fresh.view.candidates
    assert second.result.rule_matches == fresh.result.rule_matches
    assert second.enode_count == fresh.enode_count


# ---------------------------------------------------------------- every e-node, REQUIREs, merged nodes, analysis, inputs

dtype_, m, s, zi, zo, tag = var("dtype_", String), var("m", Vec[i64]), var("s", Vec[i64]), var("zi", i64), var("zo", i64), var("tag", i64)
out_of_domain = ruleset(name="out-of-domain")
# WRONG: a rescale equals itself with shift 1 (TOSA REQUIREs 2 <= shift: the e-node does not run)
out_of_domain.register(law("rescale-shift-one", x.rescale(dtype_, m, s, zi, zo, tag), x.rescale(dtype_, m, Vec(i64(1)), zi, zo, tag), eq(s.length()).to(i64(1))))


def rescaled():
    with tosa_lowering():
        g = GraphBuilder()
        x_ = g.input("x", (2, 3))
        return g.output(g.call(TOSA.RESCALE.default, g.call(TOSA.RESCALE.default, x_, torch.int8, [0.5], 3, -2), torch.int8, [0.75], -2, 1))


def test_an_enode_that_breaks_a_require_is_caught():
    saturated = Saturated(rescaled(), out_of_domain)
    assert saturated.fired("rescale-shift-one") >= 1
    with pytest.raises(Unsound, match="does not run: RequireViolation"):
        saturated.assert_every_extraction_agrees()


def test_every_enode_is_evaluated_once_per_draw():
    saturated = Saturated(twice_permuted(), transpose)
    assert saturated.assert_every_extraction_agrees() == saturated.view.enode_count


def test_a_wrong_merge_of_two_fx_nodes_is_caught(monkeypatch):
    """Two rescales of x with different scales merged as duplicates: every node's own value is its class's."""
    with tosa_lowering():
        g = GraphBuilder()
        x_ = g.input("x", (2, 3))
        a = g.call(TOSA.RESCALE.default, x_, torch.int8, [0.5], 0, 0)
        b = g.call(TOSA.RESCALE.default, x_, torch.int8, [0.25], 0, 0)
        graph_module = g.output(a, b)
    monkeypatch.setattr(bridge_fx, "duplicate_pairs", lambda nodes: [(1, 2)])
    with pytest.raises(Unsound, match="disagree"):
        Saturated(graph_module, transpose, merge_duplicates=True).assert_every_extraction_agrees()


def test_a_wrong_shape_in_the_analysis_is_caught():
    saturated = Saturated(twice_permuted(), transpose)
    eclass = saturated.class_of(next(n for n in saturated.graph_module.graph.nodes if n.op == "placeholder"))
    saturated.view.types[eclass] = TensorType((4, 3, 2), "torch.int8")
    with pytest.raises(Unsound, match="is analysed as"):
        saturated.assert_every_extraction_agrees()


def test_inputs_aim_at_the_ends_of_the_range_and_next_to_each_zero_point():
    with tosa_lowering():
        g = GraphBuilder()
        graph_module = g.output(g.call(TOSA.RESCALE.default, g.input("x", (2000,)), torch.int8, [0.5], 3, -50))
    drawn = set(random_inputs(graph_module, 0)[0].tolist())
    assert {-128, -127, 126, 127, 2, 3, 4, -51, -50, -49, -1, 0, 1} <= drawn
