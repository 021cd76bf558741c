"""Shared checks for rule tests: does a law fire, and is every extraction equivalent.

Soundness is checked on real tensors: after saturation, many random
extractions (random costs pick random members of every e-class) are written
back to FX and run on random inputs; each must match the original graph bit
for bit. A law that equates two unequal terms makes some extraction differ.
"""

from __future__ import annotations

import random

from egglog import Ruleset
from torch import fx

from eqsat import bridge_fx, rules
from eqsat.extract.egraph_view import EGraphView
from eqsat.extract.greedy import extract_greedy
from tests.graphs import assert_bit_identical

BUDGET = rules.Budget(iterations=12, enodes=20_000, seconds=30.0)


class Saturated:
    """A graph loaded and saturated with some rulesets."""

    def __init__(self, graph_module: fx.GraphModule, *rulesets: Ruleset) -> None:
        self.graph_module = graph_module
        self.loaded = bridge_fx.to_egraph(graph_module)
        self.result = rules.saturate(self.loaded.egraph, BUDGET, rewrites=tuple(rulesets))
        self.view = EGraphView.of(self.loaded.egraph, len(self.loaded.nodes))

    def fired(self, law: str) -> int:
        return self.result.rule_matches.get(law, 0)

    def class_of(self, node: fx.Node) -> str:
        return self.view.class_of_node[self.loaded.index_of[node]]

    def terms_of(self, node: fx.Node) -> list[bridge_fx.Term]:
        return self.view.candidates[self.class_of(node)]

    def random_extraction(self, seed: int) -> fx.GraphModule:
        salt = random.Random(seed).random()

        def cost(eclass: str, term: bridge_fx.Term) -> float:
            return random.Random(hash((salt, eclass, term))).random()

        selection = extract_greedy(self.view.candidates, cost)
        return bridge_fx.to_fx(self.loaded, selection, self.view.class_of_node)

    def assert_every_extraction_agrees(self, extractions: int = 12) -> None:
        for seed in range(extractions):
            for input_seed in range(2):
                assert_bit_identical(self.graph_module, self.random_extraction(seed), seed=input_seed)
