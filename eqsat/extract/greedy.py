"""Greedy DAG-aware extraction over the serialized e-graph.

A bottom-up pass (Knuth's generalisation of Dijkstra) gives every e-class its
cheapest term, where a term costs its own cost plus an amortised share of its
operands': an operand class used by k classes charges each 1/k of its cost.
Plain tree cost (k = 1) pays a shared operand once per use, which grows
exponentially on graphs that fork and rejoin and overflows on deep ones. A
class is settled only after all operands of its chosen term are, so the
chosen terms never form a cycle. `dag_cost` then prices a selection the way
the hardware pays for it: each e-class reachable from the roots once.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from typing import Callable

from eqsat.bridge_fx import Term

Selection = dict[str, Term]
TermCost = Callable[[str, Term], float]


def extract_greedy(candidates: dict[str, list[Term]], term_cost: TermCost) -> Selection:
    """The cheapest term of every e-class under amortised bottom-up cost."""
    users: dict[str, list[tuple[str, Term]]] = defaultdict(list)
    for eclass, terms in candidates.items():
        for term in terms:
            for arg in dict.fromkeys(term.args):  # ordered: ties break the same way in every process
                users[arg].append((eclass, term))
    sharing = {arg: len({user_class for user_class, _ in arg_users}) for arg, arg_users in users.items()}
    best: dict[str, float] = {}
    selection: Selection = {}
    frontier: list[tuple[float, int, str, Term]] = []
    tiebreak = 0

    def offer(eclass: str, term: Term) -> None:
        nonlocal tiebreak
        if all(a in best for a in term.args):
            total = term_cost(eclass, term) + sum(best[a] / sharing[a] for a in term.args)
            if math.isfinite(total):
                tiebreak += 1
                heapq.heappush(frontier, (total, tiebreak, eclass, term))

    for eclass, terms in candidates.items():
        for term in terms:
            if not term.args:
                offer(eclass, term)
    while frontier:
        total, _, eclass, term = heapq.heappop(frontier)
        if eclass in best:
            continue
        best[eclass], selection[eclass] = total, term
        for user_class, user_term in users[eclass]:
            if user_class not in best:
                offer(user_class, user_term)
    return selection


def reachable(selection: Selection, roots: list[str]) -> list[str]:
    """The e-classes a selection computes for the roots, operands first."""
    order: list[str] = []
    seen: set[str] = set()
    stack: list[tuple[str, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        eclass, expanded = stack.pop()
        if expanded:
            order.append(eclass)
            continue
        if eclass in seen:
            continue
        seen.add(eclass)
        stack.append((eclass, True))
        stack.extend((a, False) for a in reversed(selection[eclass].args) if a not in seen)
    return order


def dag_cost(selection: Selection, roots: list[str], term_cost: TermCost) -> float:
    """The cost of computing the roots with selection, each e-class once."""
    return sum(term_cost(c, selection[c]) for c in reachable(selection, roots))


def reachable_candidates(candidates: dict[str, list[Term]], roots: list[str]) -> list[str]:
    """The e-classes some choice of terms could need for the roots."""
    seen: dict[str, None] = {}
    stack = list(roots)
    while stack:
        eclass = stack.pop()
        if eclass in seen or eclass not in candidates:
            continue
        seen[eclass] = None
        stack.extend(a for term in candidates[eclass] for a in term.args)
    return list(seen)
