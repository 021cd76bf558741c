"""Extraction: choose one term per e-class so that the graph is cheapest under the cost model.

The greedy extractor is fast and always runs. When the part of the e-graph
reachable from the outputs is small enough, the exact ILP runs too, under a
time limit, and wins if it is cheaper; if it times out, greedy's answer stands.
"""

from __future__ import annotations

from dataclasses import dataclass

from eqsat.ir import Term
from eqsat.extract._gc import paused_gc
from eqsat.extract.greedy import Selection, TermCost, dag_cost, extract_greedy, reachable_candidates
from eqsat.extract.ilp import extract_ilp

EXTRACTORS = ("greedy", "ilp", "auto")

ILP_TERM_LIMIT = 4000
"""The ILP runs only when the outputs reach at most this many candidate terms."""


@dataclass(frozen=True)
class Extraction:
    selection: Selection
    cost: float
    extractor: str


def extract(
    candidates: dict[str, list[Term]],
    roots: list[str],
    term_cost: TermCost,
    *,
    extractor: str = "auto",
    ilp_time_limit: float = 1.0,
) -> Extraction:
    """The cheapest selection found for the roots; every e-class with a finite term gets one.

    extractor: "greedy", "ilp" (exact, falls back to greedy on time-out) or
    "auto" (ilp when the reachable e-graph is small).
    """
    if extractor not in EXTRACTORS:
        raise ValueError(f"extractor must be one of {EXTRACTORS}, not {extractor!r}")
    with paused_gc():
        return _extract(candidates, roots, term_cost, extractor, ilp_time_limit)


def _extract(candidates: dict[str, list[Term]], roots: list[str], term_cost: TermCost, extractor: str, ilp_time_limit: float) -> Extraction:
    selection = extract_greedy(candidates, term_cost)
    missing = [r for r in roots if r not in selection]
    if missing:
        raise ValueError(f"no finite-cost term for root classes {missing}")
    best = Extraction(selection, dag_cost(selection, roots, term_cost), "greedy")
    if extractor == "greedy" or (extractor == "auto" and _term_count(candidates, roots) > ILP_TERM_LIMIT):
        return best
    exact = extract_ilp(candidates, roots, term_cost, time_limit=ilp_time_limit, hint=selection)
    if exact is None:
        return best
    merged = {**selection, **exact}
    cost = dag_cost(merged, roots, term_cost)
    return Extraction(merged, cost, "ilp") if cost < best.cost else best



def _term_count(candidates: dict[str, list[Term]], roots: list[str]) -> int:
    return sum(len(candidates[c]) for c in reachable_candidates(candidates, roots))
