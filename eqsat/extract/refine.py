"""Local search on whole-graph cost: the contexts that per-term costs cannot see.

Extraction prices every term on its own, so it cannot see what depends on the
graph around a term, like a RESHAPE that Vela keeps as a MemoryCopy because
its input has another reader (eqsat.extract.cost.reshape_copies). On
tds-conv1d (U55) the extracted graph was cheaper term by term but dearer as a
whole, so the pass had to reject all of it.

`refine` starts from an extracted selection and changes one e-class's term at
a time, keeping each change that lowers the whole-graph cost, until a round
over the graph changes nothing or the time budget is spent. Every state it
visits is acyclic (a term is taken only if its operands do not reach its own
class), so the result is a valid graph, never dearer than where it started.
"""

from __future__ import annotations

import time
from typing import Callable

from eqsat.ir import Term
from eqsat.extract.greedy import Selection, reachable

GraphCost = Callable[[Selection], float]
"""The cost of computing the roots with a selection, context included."""


def refine(
    selection: Selection,
    candidates: dict[str, list[Term]],
    roots: list[str],
    graph_cost: GraphCost,
    *,
    seconds: float = 1.0,
) -> tuple[Selection, float]:
    """A selection at most as costly as `selection` under graph_cost, and its cost."""
    deadline = time.monotonic() + seconds
    current = dict(selection)
    best = graph_cost(current)
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for eclass in reachable(current, roots):
            for term in candidates.get(eclass, ()):
                if term == current[eclass] or not _acyclic_with(current, eclass, term):
                    continue
                previous, current[eclass] = current[eclass], term
                cost = graph_cost(current)
                if cost < best:
                    best, changed = cost, True
                else:
                    current[eclass] = previous
            if time.monotonic() >= deadline:
                break
    return current, best


def _acyclic_with(selection: Selection, eclass: str, term: Term) -> bool:
    """True when choosing term for eclass keeps the selection acyclic (and every operand computable)."""
    if any(arg not in selection for arg in term.args):
        return False
    return eclass not in reachable(selection, list(term.args))
