"""Exact DAG extraction as an integer linear program (HiGHS 1.12 through highspy).

Variables: one binary per candidate term (chosen or not) and one continuous
topological level per e-class that lies on a cycle of the e-graph. Constraints:
- every root class chooses a term;
- a chosen term's operand classes choose a term too;
- a class chooses at most one term;
- a chosen term's class sits strictly above its operands' classes in the
  level order (TENSAT's order variables), so the result has no cycle. A cycle
  lies inside one strongly connected component of the class graph, so only
  operands in the term's own component get a level row, with the component's
  size as its big-M.
Objective: the sum of the chosen terms' costs, i.e. each class paid once.

HiGHS's primal heuristics are off: at the root they cost more than the rest
of the solve (on emg-global-pool's 149 terms, 0.31 s of CPU with them and
0.13 s without, same answer), and the caller keeps its own selection unless
the ILP's is cheaper, so the ILP need not find a first solution of its own.

The solve is bounded by work, not time: HiGHS explores at most `node_limit`
branch-and-bound nodes (a count that, unlike a clock, does not depend on the
machine or its load); if it has not proven a solution by then,
the best one it holds is returned. A wall-clock limit remains as a safety net
for callers with a deadline; a solve it stopped is discarded (its answer would
depend on the clock) and `IlpResult.clock_stopped` says so.

`extract_optimal` solves the same problem to a proven optimum, for offline
study (benchmarks.optimality): it cuts cycles lazily instead of writing
level rows, whose big-M relaxation bounds the cost no tighter than a
selection with cycles does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import highspy as highs
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from eqsat.ir import Term
from eqsat.extract.greedy import Selection, TermCost, reachable, reachable_candidates


NODE_LIMIT = 100
"""Branch-and-bound nodes HiGHS may explore (the caller also caps the problem's size, see eqsat.extract)."""

_HEURISTICS_OFF = (
    "mip_heuristic_run_feasibility_jump",
    "mip_heuristic_run_rins",
    "mip_heuristic_run_rens",
    "mip_heuristic_run_root_reduced_cost",
    "mip_heuristic_run_shifting",
    "mip_heuristic_run_zi_round",
)


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
    problem = _Problem.of(candidates, roots, term_cost, hint)
    if problem is None:
        return IlpResult(None)
    model = problem.model(problem.rows, problem.level_upper, node_limit, time_limit)
    model.run()
    status = model.getModelStatus()
    if status == highs.HighsModelStatus.kTimeLimit:
        return IlpResult(None, clock_stopped=True)
    # the node limit stops HiGHS with kSolutionLimit; its best solution stands
    if status not in (highs.HighsModelStatus.kOptimal, highs.HighsModelStatus.kSolutionLimit) or not model.getInfo().primal_solution_status:
        return IlpResult(None)
    return IlpResult(problem.selection(model.getSolution().col_value))


@dataclass(frozen=True)
class Optimum:
    """The outcome of `extract_optimal`: the cheapest selection found and its DAG cost (None and inf if none),
    the proven lower bound on any acyclic selection's cost, whether the selection is proven cheapest, and the
    rounds of cycle cuts it took."""

    selection: Selection | None
    cost: float
    bound: float
    proven: bool
    rounds: int


def extract_optimal(
    candidates: dict[str, list[Term]], roots: list[str], term_cost: TermCost, *, round_limit: int = 20, node_limit: int = 5_000
) -> Optimum:
    """The cheapest acyclic selection for the roots under DAG cost, for offline use: proven where the work
    limits allow, else the best found with a proven lower bound.

    The big-M level rows of `extract_ilp` keep its LP relaxation at the value
    of the cheapest selection *with* cycles (dense-conv1d U55, 445 terms: bound
    11.7k, best 28.8k after 2 minutes of branch and bound). So first cycles are
    cut lazily: solve without level rows, and while the selection the roots
    reach has a cycle through the classes S, require that at most |S| - 1 of
    them choose a term reading a class of S (if all did, every class of S
    would read another: a cycle), and solve again. A solution without a
    reachable cycle is optimal for a relaxation, hence proven optimal. After
    round_limit rounds, the level rows are added to the cuts found and branch
    and bound runs within node_limit nodes; its dual bound is the proof.
    """
    problem = _Problem.of(candidates, roots, term_cost, None)
    if problem is None:
        return Optimum(None, math.inf, math.inf, False, 0)
    rows = problem.rows_without_levels()
    bound = -math.inf
    for round_ in range(1, round_limit + 1):
        model = problem.model(rows, [], node_limit=node_limit, time_limit=math.inf)
        model.run()
        if model.getModelStatus() != highs.HighsModelStatus.kOptimal:
            return Optimum(None, math.inf, bound, False, round_)
        bound = model.getInfo().objective_function_value
        selection = problem.selection(model.getSolution().col_value)
        cycles = _reachable_cycles(selection, roots)
        if not cycles:
            return _optimum(selection, roots, term_cost, bound, True, round_)
        rows.extend(problem.cycle_cut(cycle) for cycle in cycles)
    cuts = rows[len(problem.rows_without_levels()) :]
    model = problem.model(problem.rows + cuts, problem.level_upper, node_limit=node_limit, time_limit=math.inf)
    model.run()
    status, info = model.getModelStatus(), model.getInfo()
    if status not in (highs.HighsModelStatus.kOptimal, highs.HighsModelStatus.kSolutionLimit) or not info.primal_solution_status:
        return Optimum(None, math.inf, bound, False, round_limit)
    bound = max(bound, info.mip_dual_bound)
    return _optimum(problem.selection(model.getSolution().col_value), roots, term_cost, bound, status == highs.HighsModelStatus.kOptimal, round_limit)


def _optimum(selection: Selection, roots: list[str], term_cost: TermCost, bound: float, proven: bool, rounds: int) -> Optimum:
    reached = {c: selection[c] for c in reachable(selection, roots)}
    return Optimum(reached, sum(term_cost(c, t) for c, t in reached.items()), bound, proven, rounds)


@dataclass
class _Problem:
    """The ILP over the candidate terms the roots can reach: columns are the terms (binary), then the levels."""

    classes: list[str]
    terms: list[tuple[str, Term, float]]
    chosen_in: list[list[int]]
    class_index: dict[str, int]
    rows: list[tuple[dict[int, float], float, float]]
    """Each class chooses at most one term, each root one, a chosen term's operand classes one, and (level rows)
    a chosen term's class sits above its operands in its strongly connected component."""
    is_level_row: list[bool]
    level_upper: list[float]
    """The upper bound of each level column."""

    @classmethod
    def of(cls, candidates: dict[str, list[Term]], roots: list[str], term_cost: TermCost, hint: Selection | None) -> _Problem | None:
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
            return None
        class_index = {c: i for i, c in enumerate(classes)}
        n_terms, n_classes = len(terms), len(classes)
        chosen_in: list[list[int]] = [[] for _ in classes]
        for k, (eclass, _, _) in enumerate(terms):
            chosen_in[class_index[eclass]].append(k)
        component, component_size = _components(n_classes, [(class_index[e], class_index[a]) for e, t, _ in terms for a in t.args])
        level = {}  # class index -> column of its level, for classes on a cycle
        for i in range(n_classes):
            if component_size[component[i]] > 1:
                level[i] = n_terms + len(level)

        rows: list[tuple[dict[int, float], float, float]] = []
        is_level_row: list[bool] = []
        for members in chosen_in:
            rows.append(({k: 1.0 for k in members}, -np.inf, 1.0))
        for root in dict.fromkeys(roots):  # ordered: HiGHS breaks ties by row order
            rows.append(({k: 1.0 for k in chosen_in[class_index[root]]}, 1.0, np.inf))
        is_level_row.extend([False] * len(rows))
        for k, (eclass, term, _) in enumerate(terms):
            c = class_index[eclass]
            for arg in dict.fromkeys(term.args):
                a = class_index[arg]
                row = {j: 1.0 for j in chosen_in[a]}
                row[k] = row.get(k, 0.0) - 1.0
                rows.append((row, 0.0, np.inf))
                is_level_row.append(False)
                if component[a] == component[c]:
                    # level[eclass] - level[arg] >= 1 - (size + 1) * (1 - chosen[k])
                    big = component_size[component[c]] + 1.0
                    rows.append(({level[c]: 1.0, level[a]: -1.0, k: -big}, 1.0 - big, np.inf))
                    is_level_row.append(True)
        level_upper = [float(component_size[component[i]]) for i in level]
        return cls(classes, terms, chosen_in, class_index, rows, is_level_row, level_upper)

    def rows_without_levels(self) -> list[tuple[dict[int, float], float, float]]:
        return [row for row, is_level in zip(self.rows, self.is_level_row) if not is_level]

    def cycle_cut(self, cycle: list[str]) -> tuple[dict[int, float], float, float]:
        """Of the classes of the cycle, at most len(cycle) - 1 choose a term that reads one of them: if all did,
        every class of the set would read another, and the selection would have a cycle inside it."""
        members = set(cycle)
        row = {}
        for eclass in members:
            for k in self.chosen_in[self.class_index[eclass]]:
                if members.intersection(self.terms[k][1].args):
                    row[k] = 1.0
        return row, -np.inf, len(members) - 1.0

    def model(self, rows: list[tuple[dict[int, float], float, float]], level_upper: list[float], node_limit: int | None, time_limit: float) -> highs.Highs:
        """A HiGHS model of rows over the term columns and len(level_upper) level columns."""
        n_terms = len(self.terms)
        model = highs.Highs()
        model.setOptionValue("output_flag", False)
        if node_limit is not None:
            model.setOptionValue("mip_max_nodes", node_limit)
        for option in _HEURISTICS_OFF:
            model.setOptionValue(option, False)
        if math.isfinite(time_limit):
            model.setOptionValue("time_limit", max(time_limit, 0.0))
        model.passModel(
            _lp(
                objective=[cost for _, _, cost in self.terms] + [0.0] * len(level_upper),
                upper=[1.0] * n_terms + level_upper,
                integral=n_terms,
                rows=rows,
                columns=n_terms + len(level_upper),
            )
        )
        return model

    def selection(self, x) -> Selection:
        return {eclass: term for k, (eclass, term, _) in enumerate(self.terms) if x[k] > 0.5}


def _reachable_cycles(selection: Selection, roots: list[str]) -> list[list[str]]:
    """Cycles of classes (each class's term reads the next) among the classes selection reaches from roots,
    one per back edge of a depth-first search."""
    cycles = []
    state: dict[str, int] = {}  # 1: on the search path, 2: done
    path: list[str] = []
    for root in dict.fromkeys(roots):
        if root in state:
            continue
        stack = [(root, iter(dict.fromkeys(selection[root].args)))]
        state[root], path[:] = 1, [root]
        while stack:
            eclass, operands = stack[-1]
            operand = next(operands, None)
            if operand is None:
                stack.pop()
                path.pop()
                state[eclass] = 2
            elif operand not in state:
                state[operand] = 1
                path.append(operand)
                stack.append((operand, iter(dict.fromkeys(selection[operand].args))))
            elif state[operand] == 1:
                cycles.append(path[path.index(operand) :])
    return cycles


def _components(n_classes: int, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The strongly connected component of each class in the graph of term -> operand edges, and each component's size."""
    if edges:
        sources, targets = zip(*edges)
    else:
        sources, targets = (), ()
    graph = csr_matrix((np.ones(len(edges)), (sources, targets)), shape=(n_classes, n_classes))
    _, component = connected_components(graph, directed=True, connection="strong")
    return component, np.bincount(component, minlength=n_classes)


def _lp(objective: list[float], upper: list[float], integral: int, rows: list[tuple[dict[int, float], float, float]], columns: int):
    """A HiGHS model: minimise objective subject to the rows, 0 <= x <= upper, the first `integral` columns integer."""
    lp = highs.HighsLp()
    lp.num_col_, lp.num_row_ = columns, len(rows)
    lp.col_cost_ = np.array(objective)
    lp.col_lower_ = np.zeros(columns)
    lp.col_upper_ = np.array(upper)
    lp.row_lower_ = np.array([low for _, low, _ in rows])
    lp.row_upper_ = np.array([high for _, _, high in rows])
    starts, indices, values = [0], [], []
    for coefficients, _, _ in rows:
        indices.extend(coefficients)
        values.extend(coefficients.values())
        starts.append(len(indices))
    matrix = lp.a_matrix_
    matrix.format_ = highs.MatrixFormat.kRowwise
    matrix.num_col_, matrix.num_row_ = columns, len(rows)
    matrix.start_, matrix.index_, matrix.value_ = np.array(starts, dtype=np.int32), np.array(indices, dtype=np.int32), np.array(values)
    lp.integrality_ = [highs.HighsVarType.kInteger] * integral + [highs.HighsVarType.kContinuous] * (columns - integral)
    return lp
