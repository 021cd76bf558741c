"""Exact DAG extraction as an integer linear program (scipy.optimize.milp / HiGHS).

Variables: one binary per candidate term (chosen or not) and one continuous
topological level per e-class. Constraints:
- every root class chooses a term;
- a chosen term's operand classes choose a term too;
- a class chooses at most one term;
- a chosen term's class sits strictly above its operands' classes in the
  level order (TENSAT's order variables), so the result has no cycle.
Objective: the sum of the chosen terms' costs, i.e. each class paid once.

The solve is bounded by work, not time: HiGHS explores at most `node_limit`
branch-and-bound nodes (a count that, unlike a clock, does not depend on the
machine or its load); if it has not proven a solution by then,
the best feasible one it found is returned, and if it found none the caller
keeps its greedy selection. A wall-clock limit remains as a safety net for
callers with a deadline; a solve it stopped is discarded (its answer would
depend on the clock) and `IlpResult.clock_stopped` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from eqsat.ir import Term
from eqsat.extract.greedy import Selection, TermCost, reachable, reachable_candidates


NODE_LIMIT = 100
"""Branch-and-bound nodes HiGHS may explore (the caller also caps the problem's size, see eqsat.extract)."""


@dataclass(frozen=True)
class IlpResult:
    selection: Selection | None
    clock_stopped: bool = False


def extract_ilp(
    candidates: dict[str, list[Term]],
    roots: list[str],
    term_cost: TermCost,
    *,
    node_limit: int = NODE_LIMIT,
    time_limit: float = math.inf,
    hint: Selection | None = None,
) -> IlpResult:
    """The cheapest acyclic selection for the roots under DAG cost that HiGHS finds within
    node_limit branch-and-bound nodes (None if it finds none, or if time_limit stops it first).

    Only the classes reachable from the roots through some candidate are
    modelled. `hint`, a known selection (e.g. greedy's), bounds the search:
    terms costing more than its total are left out.
    """
    classes = reachable_candidates(candidates, roots)
    budget = math.inf if hint is None else sum(term_cost(c, hint[c]) for c in reachable(hint, roots))
    terms = [
        (eclass, term, cost)
        for eclass in classes
        for term in candidates[eclass]
        if eclass not in term.args  # a term reading its own class is a cycle; the LP relaxation would take it
        and all(a in classes for a in term.args)
        and math.isfinite(cost := term_cost(eclass, term))
        and cost <= budget
    ]
    if not terms:
        return IlpResult(None)
    class_index = {c: i for i, c in enumerate(classes)}
    n_terms, n_classes = len(terms), len(classes)
    level_bound = float(n_classes)

    rows: list[tuple[dict[int, float], float, float]] = []
    chosen_in: dict[str, list[int]] = {c: [] for c in classes}
    for k, (eclass, _, _) in enumerate(terms):
        chosen_in[eclass].append(k)
    for eclass in classes:
        rows.append(({k: 1.0 for k in chosen_in[eclass]}, -np.inf, 1.0))
    for root in dict.fromkeys(roots):  # ordered: HiGHS breaks ties by row order
        rows.append(({k: 1.0 for k in chosen_in[root]}, 1.0, np.inf))
    for k, (eclass, term, _) in enumerate(terms):
        for arg in dict.fromkeys(term.args):
            row = {j: 1.0 for j in chosen_in[arg]}
            row[k] = row.get(k, 0.0) - 1.0
            rows.append((row, 0.0, np.inf))
            # level[eclass] - level[arg] >= 1 - (levels + 1) * (1 - chosen[k])
            big = level_bound + 1.0
            rows.append(
                (
                    {n_terms + class_index[eclass]: 1.0, n_terms + class_index[arg]: -1.0, k: -big},
                    1.0 - big,
                    np.inf,
                )
            )

    matrix = lil_matrix((len(rows), n_terms + n_classes))
    lower, upper = np.empty(len(rows)), np.empty(len(rows))
    for r, (coefficients, low, high) in enumerate(rows):
        for column, value in coefficients.items():
            matrix[r, column] = value
        lower[r], upper[r] = low, high

    objective = np.concatenate([np.array([cost for _, _, cost in terms]), np.zeros(n_classes)])
    integrality = np.concatenate([np.ones(n_terms), np.zeros(n_classes)])
    bounds = Bounds(np.zeros(n_terms + n_classes), np.concatenate([np.ones(n_terms), np.full(n_classes, level_bound)]))
    options: dict = {"node_limit": node_limit}
    if math.isfinite(time_limit):
        options["time_limit"] = max(time_limit, 0.0)
    result = milp(
        objective,
        constraints=LinearConstraint(matrix.tocsr(), lower, upper),
        integrality=integrality,
        bounds=bounds,
        options=options,
    )
    if "Time limit reached" in result.message:
        return IlpResult(None, clock_stopped=True)
    # scipy reports HiGHS's node-limit stop ("Solution limit reached") as an unknown status; x is its best solution
    within_node_limit = result.status == 0 or "Solution limit reached" in result.message
    if not within_node_limit or result.x is None:
        return IlpResult(None)
    return IlpResult({eclass: term for k, (eclass, term, _) in enumerate(terms) if result.x[k] > 0.5})

