"""Shared checks for rule tests: the package's soundness checker and law-firing share (eqsat.soundness), re-exported, the
stress graphs every rule that joins same-shaped terms is tested on, and lookups of the terms a saturated e-class holds."""

from __future__ import annotations

from egglog import Ruleset

from eqsat import bridge_fx
from eqsat.ir import Term
from eqsat.rules import enode_count
from eqsat.soundness import BUDGET, Saturated, law_fires_in
from eqsat.stress_graphs import arity_groups, same_parameter_graph
from tests.graphs import tosa_lowering

__all__ = ["BUDGET", "Saturated", "law_fires_in", "saturated_stress_graph", "sliced", "terms"]

STRESS_COUNT = 300
"""How many same-parameter terms a stress graph has (eqsat.stress_graphs)."""


def saturated_stress_graph(kind: str, rules: Ruleset, keep_egraph: bool = False) -> tuple[Saturated, int, int]:
    """STRESS_COUNT same-parameter terms of kind feeding concats of 2..16 inputs, saturated with rules (its e-graph
    kept when keep_egraph): the saturated graph, how many concats it has, and how many e-nodes loading it made."""
    with tosa_lowering():
        graph_module = same_parameter_graph(kind, STRESS_COUNT)
    loaded_size = enode_count(bridge_fx.to_egraph(graph_module).egraph)
    return Saturated(graph_module, rules, keep_egraph=keep_egraph), len(arity_groups(STRESS_COUNT)), loaded_size


def terms(s: Saturated, eclass: str, op: str) -> list[Term]:
    """The terms of eclass whose op is op."""
    return [term for term in s.view.candidates[eclass] if term.op == op]


def sliced(s: Saturated, eclass: str) -> set[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(input class, start, size) of every slice in eclass."""
    return {(t.args[0], *t.attrs) for t in terms(s, eclass, "Slice")}
