"""Greedy DAG-aware extraction over the e-graph's candidate terms (eqsat.extract.egraph_view).

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
from itertools import count
from typing import Callable, Iterator

from eqsat.ir import Term
from eqsat.extract._gc import paused_gc

Selection = dict[str, Term]
TermCost = Callable[[str, Term], float]


def extract_greedy(candidates: dict[str, list[Term]], term_cost: TermCost) -> Selection:
    """The cheapest term of every e-class under amortised bottom-up cost."""
    term_class: list[str] = []
    terms: list[Term] = []
    unsettled: list[int] = []  # per term, how many distinct operand classes have no cost yet
    users: dict[str, list[int]] = defaultdict(list)  # per class, the terms reading it
    for eclass, class_terms in candidates.items():
        for term in class_terms:
            operands = dict.fromkeys(term.args)  # ordered: ties break the same way in every process
            for arg in operands:
                users[arg].append(len(terms))
            term_class.append(eclass)
            terms.append(term)
            unsettled.append(len(operands))
    sharing = {arg: len({term_class[t] for t in readers}) for arg, readers in users.items()}
    share: dict[str, float] = {}  # a settled class's cost divided among the classes reading it
    selection: Selection = {}
    frontier: list[tuple[float, int, int]] = []  # (total, offer order, term)
    offers = count()

    def offer(index: int) -> None:
        term = terms[index]
        total = term_cost(term_class[index], term) + sum([share[a] for a in term.args])
        if total < math.inf:
            heapq.heappush(frontier, (total, next(offers), index))

    for index, operands in enumerate(unsettled):
        if not operands:
            offer(index)
    while frontier:
        total, _, index = heapq.heappop(frontier)
        eclass = term_class[index]
        if eclass in selection:
            continue
        selection[eclass] = terms[index]
        readers = users.get(eclass, ())
        if readers:
            share[eclass] = total / sharing[eclass]
        for reader in readers:
            unsettled[reader] -= 1
            if not unsettled[reader] and term_class[reader] not in selection:
                offer(reader)
    return selection


def reachable(selection: Selection, roots: list[str]) -> list[str]:
    """The e-classes a selection computes for the roots, operands first (depth first, operands left to right).

    The walk keeps an iterator per e-class on its path, which the cyclic collector would scan on every
    collection (five times slower on a 30,000-class chain), so it runs without it; the pass is paused anyway.
    """
    with paused_gc():
        return _reachable(selection, roots)


def _reachable(selection: Selection, roots: list[str]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()
    for root in roots:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(selection[root].args))]
        while stack:
            eclass, operands = stack[-1]
            for operand in operands:
                if operand not in seen:
                    seen.add(operand)
                    stack.append((operand, iter(selection[operand].args)))
                    break
            else:
                stack.pop()
                order.append(eclass)
    return order


def dag_cost(selection: Selection, roots: list[str], term_cost: TermCost) -> float:
    """The cost of computing the roots with selection, each e-class once."""
    return sum(term_cost(c, selection[c]) for c in reachable(selection, roots))


def reachable_candidates(candidates: dict[str, list[Term]], roots: list[str]) -> list[str]:
    """The e-classes some choice of terms could need for the roots."""
    return list(walk_candidates(candidates, roots))


def walk_candidates(candidates: dict[str, list[Term]], roots: list[str]) -> Iterator[str]:
    """reachable_candidates, yielded as the walk finds them (a caller may stop early)."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        eclass = stack.pop()
        if eclass in seen or eclass not in candidates:
            continue
        seen.add(eclass)
        yield eclass
        stack.extend(a for term in candidates[eclass] for a in term.args)
