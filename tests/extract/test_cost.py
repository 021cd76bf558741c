"""Whole-graph context of the cost model: reshapes that Vela keeps as a MemoryCopy."""

import pytest

from eqsat.bridge_fx import TensorType, Term
from eqsat.extract.cost import ElementTrafficCost, reshape_copies, term_costs
from eqsat.extract.vela_cost import VelaCalibratedCost

TYPE = TensorType((1, 64, 32), "torch.int8")


def leaf(name: str) -> Term:
    return Term("Opaque", (), (name,))


def unary(name: str, x: str) -> Term:
    return Term("Elementwise", (x,), (name,))


def reshape(x: str) -> Term:
    return Term("Reshape", (x,), ((1, 1, 64, 32),))


@pytest.fixture(params=["ethos-u55-128", "ethos-u85-256"])
def model(request):
    return VelaCalibratedCost(request.param)


def copies(graph, roots, model):
    return reshape_copies(graph, roots, lambda _value: TYPE, model)


def test_a_reshape_between_single_readers_is_free(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "b": unary("CLAMP#2", "r")}
    assert copies(graph, ["b"], model) == 0


def test_a_reshape_whose_input_has_another_reader_is_a_copy(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "b": unary("CLAMP#2", "r"), "c": unary("CLAMP#3", "a")}
    assert copies(graph, ["b", "c"], model) == pytest.approx(model.memory_copy(TYPE))
    assert model.memory_copy(TYPE) > 0


def test_a_reshape_read_twice_is_a_copy(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "b": unary("CLAMP#2", "r")}
    assert copies(graph, ["b", "r"], model) == pytest.approx(model.memory_copy(TYPE))


def test_the_uncalibrated_model_prices_a_copy_by_elements():
    graph = {"x": leaf("x"), "r": reshape("x"), "b": unary("CLAMP#2", "r")}
    assert copies(graph, ["b", "x"], ElementTrafficCost("ethos-u55-32")) == 1 + 64 * 32


def test_a_reshape_of_a_reshape_is_folded_even_with_fan_out(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "s": reshape("r"), "b": unary("CLAMP#2", "s"), "c": unary("CLAMP#3", "r")}
    assert copies(graph, ["b", "c"], model) == pytest.approx(model.memory_copy(TYPE))  # r is copied, s is not


def test_term_costs_prices_each_configuration_once_and_as_the_model_does(model):
    calls = []

    class Counting:
        unit = model.unit

        def cost(self, term, out, args):
            calls.append(term)
            return model.cost(term, out, args)

    types = {"x": TYPE, "y": TYPE, "a": TYPE, "b": TYPE, "r": TensorType((1, 1, 64, 32), "torch.int8")}
    term_cost = term_costs(Counting(), types)
    same_op_on_other_operands = [("a", unary("CLAMP#1", "x")), ("b", unary("CLAMP#1", "y"))]
    for eclass, term in [*same_op_on_other_operands, ("r", reshape("a")), ("a", unary("CLAMP#1", "x"))]:
        assert term_cost(eclass, term) == model.cost(term, types[eclass], [types[a] for a in term.args])
    assert calls == [unary("CLAMP#1", "x"), reshape("a")]
    assert term_cost("q", leaf("q")) == model.cost(leaf("q"), None, [])  # unknown types are priced as unknown
