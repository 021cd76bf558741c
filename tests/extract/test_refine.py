"""Local search on whole-graph cost: finds what per-term extraction misses, never dearer, never cyclic."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings

from eqsat.ir import TensorType, Term
from eqsat.extract import extract
from eqsat.extract.layers import LiveGraph, copied_reshapes, readers_of
from eqsat.extract.greedy import reachable
from eqsat.extract.refine import _acyclic_with, refine, refine_from
from tests.extract.strategies import cyclic_egraphs

LEAF = Term("Opaque", (), ("x",))


@dataclass(frozen=True)
class CopyCost:
    """Reshapes are free and copies cost their elements; other ops cost what the table says."""

    costs: dict
    target: str = "test"
    unit: str = "test units"

    def cost(self, term, out, args):
        return self.costs.get(term.attrs[0] if term.op != "Reshape" else "reshape", 0.0)

    def memory_copy(self, tensor):
        return float(tensor.shape[0])


def test_refine_avoids_a_reshape_that_vela_would_copy():
    # a = reshape(x) is free alone, but x has a second reader (b), so Vela copies it (64 cycles);
    # computing a another way (5 cycles) is cheaper for the graph, though dearer for the term.
    candidates = {
        "x": [LEAF],
        "a": [Term("Reshape", ("x",), ((8, 8),)), Term("Elementwise", ("x",), ("copy",))],
        "b": [Term("Elementwise", ("x",), ("neg",))],
    }
    model = CopyCost({"copy": 5.0, "neg": 1.0})
    types = {c: TensorType((64,), "torch.int8") for c in candidates}

    def term_cost(eclass, term):
        return model.cost(term, types[eclass], [])

    def graph_cost(selection):
        live = {c: selection[c] for c in reachable(selection, ["a", "b"])}
        g = LiveGraph(live, readers_of(live, ["a", "b"]), types.get, model)
        return sum(term_cost(c, t) for c, t in live.items()) + sum(model.memory_copy(types[live[c].args[0]]) for c in copied_reshapes(g))

    extracted = extract(candidates, ["a", "b"], term_cost)
    assert extracted.selection["a"].op == "Reshape" and graph_cost(extracted.selection) == 65.0
    refinement = refine(extracted.selection, candidates, ["a", "b"], graph_cost)
    refined, cost = refinement.selection, refinement.cost
    assert refined["a"].attrs == ("copy",) and cost == 6.0 == graph_cost(refined)


@settings(max_examples=80, deadline=None)
@given(cyclic_egraphs())
def test_refine_is_never_dearer_and_never_cyclic(egraph):
    candidates, costs, penalty, roots = egraph

    def graph_cost(selection):
        live = reachable(selection, roots)
        readers = {c: 0 for c in live}
        for c in live:
            for arg in selection[c].args:
                readers[arg] += 1
        return sum(costs[(c, selection[c])] for c in live) + penalty * sum(n > 1 for n in readers.values())

    start = extract(candidates, roots, lambda c, t: costs[(c, t)], extractor="greedy").selection
    refinement = refine(start, candidates, roots, graph_cost)
    refined, cost = refinement.selection, refinement.cost
    assert cost <= graph_cost(start) and cost == graph_cost(refined)
    for eclass in reachable(refined, roots):
        assert eclass not in reachable(refined, list(refined[eclass].args)), f"{eclass} reads itself"


def test_refine_from_keeps_the_start_that_refines_cheapest():
    # r reads a and b; the whole graph costs 5 with p, p, 3 with q, q and 10 mixed: one change at a time,
    # (p, p) is a local optimum, so only the start at (q, q) reaches 3
    p, q = Term("Opaque", (), ("p",)), Term("Opaque", (), ("q",))
    candidates = {"a": [p, q], "b": [p, q], "r": [Term("Elementwise", ("a", "b"), ("add",))]}
    joint = {(p, p): 5.0, (q, q): 3.0, (p, q): 10.0, (q, p): 10.0}

    def graph_cost(selection):
        return joint[(selection["a"], selection["b"])]

    at_p = {"a": p, "b": p, "r": candidates["r"][0]}
    at_q = {"a": q, "b": q, "r": candidates["r"][0]}
    assert refine(at_p, candidates, ["r"], graph_cost).cost == 5.0
    for starts in ((at_p, at_q), (at_q, at_p)):
        result = refine_from(starts, candidates, ["r"], graph_cost)
        assert result.cost == 3.0 and result.selection == at_q
    assert refine_from((at_p,), candidates, ["r"], graph_cost).selection == at_p


def test_the_cycle_check_stops_where_it_finds_the_class():
    """Each candidate term is checked for a cycle through its operands; the walk stops at the class it would close
    the cycle on instead of walking everything the operands read (a chain of 1,000 classes: 2 looked up, not 1,000)."""

    class CountingSelection(dict):
        lookups = 0

        def __getitem__(self, key):
            CountingSelection.lookups += 1
            return super().__getitem__(key)

    chain = CountingSelection(c0=LEAF)
    for i in range(1, 1000):
        chain[f"c{i}"] = Term("Elementwise", (f"c{i - 1}",), ("neg",))
    assert not _acyclic_with(chain, "c998", Term("Elementwise", ("c999",), ("neg",)))
    assert CountingSelection.lookups <= 2
    assert _acyclic_with(chain, "c999", Term("Elementwise", ("c998",), ("neg",)))
