"""eqsat.rules.reduce: the law fires, does not fire where its guard fails, stays bounded, and is sound."""

from __future__ import annotations

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat import bridge_fx
from eqsat.extract.greedy import extract_greedy
from eqsat.ir import Term
from eqsat.rules import StopReason
from eqsat.rules.reduce import reduce
from eqsat.rules.reshape import reshape
from eqsat.rules.transpose import transpose
from tests.graphs import GraphBuilder, tosa_lowering
from eqsat.soundness import assert_bit_identical
from tests.rules.harness import Saturated, law_fires_in, saturated_stress_graph

aten = torch.ops.aten
tosa = exir_ops.backend.tosa
LAW = "reduce-innermost-through-transpose"

REDUCTIONS = {
    "aten-sum": lambda g, x, axis: g.call(aten.sum.dim_IntList, x, [axis], True, dtype=torch.int32),
    "aten-amax": lambda g, x, axis: g.call(aten.amax.default, x, [axis], True),
    "aten-amin": lambda g, x, axis: g.call(aten.amin.default, x, [axis], True),
}


def transposed_reductions(s: Saturated, node) -> list:
    """The Reduce terms in node's e-class reached through a Transpose: reduce(transpose(x, s), axis) terms."""
    outer = [term for term in s.terms_of(node) if term.op == "Transpose"]
    return [inner for term in outer for inner in s.view.candidates[term.args[0]] if inner.op == "Reduce"]


@pytest.mark.parametrize("reduction", ["aten-amax", "aten-amin"])
def test_reduce_innermost_fires_with_the_axis_moved_out_by_one(reduction):
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4))
    reduced = REDUCTIONS[reduction](g, x, 2)
    s = Saturated(g.output(reduced), reduce)
    assert s.fired(LAW) == 1
    (moved,) = transposed_reductions(s, reduced)
    assert moved.attrs[1] == 1
    (operand,) = [term for term in s.view.candidates[moved.args[0]] if term.op == "Transpose"]
    assert operand.attrs == ((0, 2, 1),) and operand.args == (s.class_of(x),)


def test_reduce_innermost_fires_on_a_tosa_reduce_max_and_writes_back_the_new_axis():
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (1, 6, 5, 4))
        reduced = g.call(tosa.REDUCE_MAX.default, x, axis=3)
        s = Saturated(g.output(reduced), reduce, transpose, reshape)
        assert s.fired(LAW) >= 1
        written = [s.random_extraction(seed) for seed in range(12)]
    axes = {n.kwargs["axis"] for gm in written for n in gm.graph.nodes if n.target == tosa.REDUCE_MAX.default}
    assert axes == {2, 3}


def test_reduce_innermost_does_not_fire_on_a_sum():
    """Vela runs an innermost sum well; its transposed form has nothing to win (eqsat/rules/reduce.py)."""
    g = GraphBuilder()
    reduced = REDUCTIONS["aten-sum"](g, g.input("x", (2, 3, 4)), 2)
    s = Saturated(g.output(reduced), reduce)
    assert s.fired(LAW) == 0


def test_reduce_innermost_does_not_fire_on_a_tosa_reduce_sum():
    with tosa_lowering():
        g = GraphBuilder()
        reduced = g.call(tosa.REDUCE_SUM.default, g.input("x", (1, 6, 5, 4), torch.int32), axis=3)
        s = Saturated(g.output(reduced), reduce)
    assert s.fired(LAW) == 0


def test_reduce_innermost_does_not_fire_on_an_outer_axis():
    g = GraphBuilder()
    reduced = g.call(aten.amax.default, g.input("x", (2, 3, 4)), [1], True)
    s = Saturated(g.output(reduced), reduce)
    assert s.fired(LAW) == 0
    assert transposed_reductions(s, reduced) == []


@pytest.mark.parametrize("shape", [(3, 1), (2, 1, 4), (2, 3, 1)])
def test_reduce_innermost_does_not_fire_when_one_of_the_last_two_dims_is_a_unit_dim(shape):
    g = GraphBuilder()
    reduced = g.call(aten.amax.default, g.input("x", shape), [len(shape) - 1], True)
    s = Saturated(g.output(reduced), reduce)
    assert s.fired(LAW) == 0


def test_reduce_innermost_does_not_fire_on_a_rank_one_reduction():
    g = GraphBuilder()
    s = Saturated(g.output(g.call(aten.amax.default, g.input("x", (8,)), [0], True)), reduce)
    assert s.fired(LAW) == 0


def test_reduce_innermost_does_not_fire_on_a_reduction_that_drops_the_dim():
    g = GraphBuilder()
    s = Saturated(g.output(g.call(aten.amax.default, g.input("x", (2, 3, 4)), [2], False)), reduce)
    assert s.fired(LAW) == 0


def test_reduce_innermost_adds_one_reduction_per_reduction_with_the_transpose_laws():
    """With the transpose and reshape laws the transposed form only unions back into its own class (the law
    can match terms that then merge with the original): saturation ends with two Reduce terms, the original
    and the transposed one, and the transpose back is also a reshape."""
    g = GraphBuilder()
    x = g.input("x", (1, 6, 5, 4))
    reduced = g.call(aten.amax.default, g.call(aten.neg.default, x), [3], True)
    s = Saturated(g.output(g.call(aten.sub.Tensor, x, reduced)), reduce, transpose, reshape)
    assert s.result.stop_reason == StopReason.SATURATED
    reductions = [term for terms in s.view.candidates.values() for term in terms if term.op == "Reduce"]
    assert sorted(term.attrs[1] for term in reductions) == [2, 3]
    assert any(term.op == "Reshape" for term in s.terms_of(reduced))


def test_reduce_innermost_stays_linear_on_hundreds_of_same_parameter_reductions():
    """300 REDUCE_MAX over the innermost axis of same-shaped inputs feeding 37 concats: one match per reduction
    (the query joins one reduction with its operand's shape), a handful of iterations, and at most 12 new
    rows per reduction (its transposed operand, reduction and transpose back, and their analysis rows)."""
    s, _concats, loaded_size = saturated_stress_graph("reduce", reduce)
    assert s.result.stop_reason == StopReason.SATURATED
    assert s.result.iterations <= 3
    assert s.fired(LAW) == 300
    assert s.enode_count <= loaded_size + 12 * 300


def extraction_of_the_transposed_form(s: Saturated, innermost: int):
    """The extraction that takes every reduction over an axis other than innermost (a reduction there costs 100)."""

    def cost(_eclass: str, term: Term) -> float:
        return 100.0 if term.op == "Reduce" and term.attrs[1] == innermost else 1.0

    return bridge_fx.to_fx(s.loaded, extract_greedy(s.view.candidates, cost), s.view.class_of_node)


# a dim is 1 one time in seven and the reduction a sum (which the law leaves alone) one time in five, so that most
# cases meet the guard and some do not. measured: the law fires in 64 of 100 cases; the share stated is 0.2 less
@law_fires_in(0.44, LAW)
@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=st.data(), shape=st.lists(st.sampled_from([1] + [2, 3, 4] * 2), min_size=2, max_size=4).map(tuple), dtype=st.sampled_from([torch.int8, torch.int16, torch.int32]))
def test_reduce_innermost_is_sound(data, shape, dtype):
    """Over int8/int16 full range (int32: the accumulator range of eqsat.soundness); for a max or min with the
    dims the guard needs, the law fired and the extraction that takes the transposed form agrees too."""
    g = GraphBuilder()
    x = g.call(aten.view_copy.default, g.input("x", shape, dtype), list(shape))  # an ATen view: new nodes are written as ATen
    reduction = data.draw(st.sampled_from(["aten-amax", "aten-amin"] * 2 + ["aten-sum"]))
    innermost = len(shape) - 1
    reduced = REDUCTIONS[reduction](g, x, innermost)
    s = Saturated(g.output(g.call(aten.sub.Tensor, x, reduced)), reduce, transpose, reshape)
    if shape[-1] > 1 and shape[-2] > 1 and reduction != "aten-sum":
        assert s.fired(LAW) >= 1
        transposed = extraction_of_the_transposed_form(s, innermost)
        (written,) = [node for node in transposed.graph.nodes if node.target == reduced.target]
        assert written.args[1] == [innermost - 1]
        for seed in range(2):
            assert_bit_identical(s.graph_module, transposed, seed=seed)
    s.assert_every_extraction_agrees()
