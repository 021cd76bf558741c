"""Check rewrite rules sound on real tensors.

A graph is loaded into an e-graph and saturated with some rulesets. Then many
random extractions (random costs pick random members of every e-class) are
written back to FX and run on random inputs; each must match the original
graph bit for bit. A law that equates two unequal terms puts them in one
e-class, so some extraction picks the wrong one and differs.

The graph must be runnable eagerly on real tensors (ATen or edge ATen ops,
with FakeTensor `val` meta on every node, as `torch.export` and `to_edge`
produce): TOSA-dialect graphs of the Arm pipeline have no eager kernels.

    saturated = Saturated(graph_module, my_ruleset)
    saturated.fired("my-law")               # how often the law matched
    saturated.assert_every_extraction_agrees()

A property test that draws its graphs states how often its law must fire, so
that a guard rejecting every generated case cannot pass unnoticed:

    @law_fires_in(0.5, "my-law")            # outside @given: checked once all cases ran
    @given(...)
    def test_my_law_is_sound(...):
        Saturated(...).assert_every_extraction_agrees()
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import torch
from egglog import Ruleset
from torch import fx

from eqsat import bridge_fx, rules
from eqsat.ir import Term
from eqsat.extract.egraph_view import EGraphView
from eqsat.extract.greedy import extract_greedy

BUDGET = rules.Budget(iterations=12, enodes=20_000, seconds=30.0)
"""Saturation limits for soundness checks: small graphs, so generous in time, tight in size."""


class Unsound(AssertionError):
    """An extraction of the saturated e-graph computes something else than the original graph."""


def random_inputs(graph_module: fx.GraphModule, seed: int = 0) -> list[torch.Tensor]:
    """Random tensors for the placeholders, deterministic per seed: int8 and int16 over their full range,
    int32 over [-2^15, 2^15) (float: normal).

    An int32 tensor here is an accumulator, and TOSA's RESCALE REQUIREs |value| < 2^(shift - 1): a
    scale of at most 2^14, the largest in these graphs, has shift >= 16, so 2^15 keeps every draw in
    the domain where the rewrites must agree.
    """
    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for node in graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta["val"]
        if val.dtype.is_floating_point:
            inputs.append(torch.randn(tuple(val.shape), generator=generator, dtype=val.dtype))
        else:
            low, high = (-(2**15), 2**15) if val.dtype == torch.int32 else (torch.iinfo(val.dtype).min, torch.iinfo(val.dtype).max + 1)
            inputs.append(torch.randint(low, high, tuple(val.shape), generator=generator, dtype=val.dtype))
    return inputs


def assert_bit_identical(a: fx.GraphModule, b: fx.GraphModule, seed: int = 0) -> None:
    """Both graphs give the same outputs, bit for bit, on the same random inputs; else raise Unsound."""
    inputs = random_inputs(a, seed)
    out_a, out_b = a(*inputs), b(*inputs)
    if len(out_a) != len(out_b):
        raise Unsound(f"{len(out_a)} outputs became {len(out_b)}")
    for slot, (x, y) in enumerate(zip(out_a, out_b)):
        if x.dtype != y.dtype or x.shape != y.shape:
            raise Unsound(f"output {slot}: {x.dtype}{list(x.shape)} became {y.dtype}{list(y.shape)}")
        if not torch.equal(x, y):
            raise Unsound(f"output {slot} differs on random inputs (seed {seed})")


_case_logs: list[list[dict[str, int]]] = []
"""The rule matches of every Saturated built while a law_fires_in test runs (one list per running test)."""


class Saturated:
    """A graph loaded into an e-graph and saturated with some rulesets (under BUDGET)."""

    def __init__(self, graph_module: fx.GraphModule, *rulesets: Ruleset, merge_duplicates: bool = False) -> None:
        self.graph_module = graph_module
        self.loaded = bridge_fx.to_egraph(graph_module, merge_duplicates=merge_duplicates)
        self.result = rules.saturate(self.loaded.egraph, BUDGET, rewrites=tuple(rulesets))
        self.result.rule_matches["merge-duplicates"] += self.loaded.merged_duplicates
        self.view = EGraphView.of(self.loaded.egraph, len(self.loaded.nodes))
        for log in _case_logs:
            log.append(self.result.rule_matches)

    def fired(self, law: str) -> int:
        """How many times the rule named law matched."""
        return self.result.rule_matches.get(law, 0)

    def class_of(self, node: fx.Node) -> str:
        """The e-class of an FX node of the original graph."""
        return self.view.class_of_node[self.loaded.index_of[node]]

    def terms_of(self, node: fx.Node) -> list[Term]:
        """Every term in the e-class of an FX node of the original graph."""
        return self.view.candidates[self.class_of(node)]

    def random_selection(self, seed: int) -> dict[str, Term]:
        """A term for each e-class, chosen by random costs."""

        def cost(eclass: str, term: Term) -> float:  # the same in every process: no hash() of strings
            digest = hashlib.blake2b(repr((seed, eclass, term)).encode(), digest_size=8).digest()
            return int.from_bytes(digest, "little") / 2**64

        return extract_greedy(self.view.candidates, cost)

    def random_extraction(self, seed: int) -> fx.GraphModule:
        """One graph equivalent to the original under the rules, chosen by random costs."""
        return bridge_fx.to_fx(self.loaded, self.random_selection(seed), self.view.class_of_node, types=self.view.types)

    def assert_every_extraction_agrees(self, extractions: int = 12, input_seeds: int = 2) -> None:
        """Raise Unsound unless every random extraction matches the original on every input seed."""
        for seed in range(extractions):
            extracted = self.random_extraction(seed)
            for input_seed in range(input_seeds):
                try:
                    assert_bit_identical(self.graph_module, extracted, seed=input_seed)
                except Unsound as error:
                    raise Unsound(f"extraction {seed}: {error}\n{extracted.graph}") from None


def fired_share(cases: list[dict[str, int]], law: str) -> float:
    """The share of cases (rule-match counts, one per saturated graph) in which law fired.

    law is a rule name or the name of a generated family: "transpose-through-pad"
    counts "transpose-through-pad" and "transpose-through-pad-3" alike.
    """
    def fired(matches: dict[str, int]) -> bool:
        return any(count > 0 and (name == law or name.startswith(law + "-")) for name, count in matches.items())

    return sum(map(fired, cases)) / len(cases) if cases else 0.0


class LawDidNotFire(AssertionError):
    """A property test's law fired in fewer of its cases than the test states."""


def law_fires_in(share: float, *laws: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a property test (above its @given) so that, once all its cases ran, each of laws must
    have fired in at least share of the graphs it saturated (Saturated instances); else LawDidNotFire.

    share is the test's statement of how often its generator reaches the law (measured share minus a
    margin); a test that saturates no graph at all fails too.
    """

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> None:
            cases: list[dict[str, int]] = []
            _case_logs.append(cases)
            try:
                test(*args, **kwargs)
            finally:
                _case_logs.remove(cases)
            for law in laws:
                measured = fired_share(cases, law)
                if measured < share:
                    raise LawDidNotFire(f"{law} fired in {measured:.0%} of {len(cases)} saturated cases, the test states at least {share:.0%}")

        return run

    return decorate
