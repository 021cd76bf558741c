"""Extraction on hand-made e-graphs: DAG cost, shared subterms, several outputs, cycles, ILP vs greedy."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.ir import Term
from eqsat.extract import ILP_TERM_LIMIT, extract
from eqsat.extract.greedy import dag_cost, extract_greedy, reachable
from eqsat.extract.ilp import extract_ilp, extract_optimal
from tests.extract.strategies import cyclic_egraphs

LEAF = Term("Opaque", (), ("x",))


def elements_cost(sizes: dict[str, float]):
    """Each term costs the size of its class (a transpose or slice writes its output)."""
    return lambda eclass, term: 0.0 if term.op == "Opaque" and not term.args else 1.0 + sizes[eclass]


def shared_transpose_egraph(slices: int):
    """x -> T -> slice_i for i < slices, where each slice_i also equals T(slice_i(x))."""
    candidates = {"x": [LEAF], "T": [Term("Transpose", ("x",), ((1, 0),))]}
    sizes = {"x": 64.0, "T": 64.0}
    for i in range(slices):
        candidates[f"s{i}"] = [
            Term("Slice", ("T",), ((0, 8 * i), (8, 8))),
            Term("Transpose", (f"sx{i}",), ((1, 0),)),
        ]
        candidates[f"sx{i}"] = [Term("Slice", ("x",), ((8 * i, 0), (8, 8)))]
        sizes[f"s{i}"] = sizes[f"sx{i}"] = 8.0
    return candidates, sizes, [f"s{i}" for i in range(slices)]


def test_tree_cost_greedy_pays_the_shared_transpose_once_per_use():
    candidates, sizes, roots = shared_transpose_egraph(8)
    selection = extract_greedy(candidates, elements_cost(sizes))
    assert all(selection[r].op == "Transpose" for r in roots)


def test_dag_extraction_keeps_one_shared_transpose():
    candidates, sizes, roots = shared_transpose_egraph(8)
    cost = elements_cost(sizes)
    result = extract(candidates, roots, cost)
    assert result.extractor == "ilp"
    assert all(result.selection[r].op == "Slice" for r in roots)
    assert "T" in reachable(result.selection, roots)
    greedy = extract_greedy(candidates, cost)
    assert result.cost < dag_cost(greedy, roots, cost)


def test_several_outputs_share_one_choice_per_class():
    candidates, sizes, roots = shared_transpose_egraph(3)
    result = extract(candidates, roots + roots[:1], elements_cost(sizes))
    needed = reachable(result.selection, roots)
    assert len(needed) == len(set(needed))
    assert result.cost == dag_cost(result.selection, roots, elements_cost(sizes))


def test_extraction_never_returns_a_cycle():
    # a == f(b) or leaf; b == g(a): choosing f(b) for a and g(a) for b would be a cycle.
    candidates = {
        "a": [Term("Elementwise", ("b",), ("f",)), LEAF],
        "b": [Term("Elementwise", ("a",), ("g",))],
    }
    cost = lambda eclass, term: 0.0 if term is LEAF else 1.0  # noqa: E731
    for extractor in ("greedy", "ilp"):
        result = extract(candidates, ["b"], cost, extractor=extractor)
        assert result.selection["a"] == LEAF
        order = reachable(result.selection, ["b"])
        assert order.index("a") < order.index("b")


def test_ilp_gives_up_gracefully_when_no_term_is_finite():
    candidates = {"a": [Term("Elementwise", ("a",), ("loop",))]}
    assert extract_ilp(candidates, ["a"], lambda c, t: 1.0).selection is None


@st.composite
def random_egraphs(draw):
    """Small random acyclic-by-index e-graphs: class i's terms use classes < i."""
    count = draw(st.integers(2, 7))
    candidates = {"c0": [LEAF]}
    for i in range(1, count):
        terms = []
        for k in range(draw(st.integers(1, 3))):
            args = tuple(f"c{j}" for j in draw(st.lists(st.integers(0, i - 1), min_size=1, max_size=2)))
            terms.append(Term("Elementwise", args, (f"op{i}.{k}",)))
        candidates[f"c{i}"] = terms
    costs = {(c, t): draw(st.integers(1, 9)) for c, ts in candidates.items() for t in ts}
    roots = [f"c{count - 1}"] + draw(st.lists(st.sampled_from(list(candidates)), max_size=2))
    return candidates, lambda c, t: 0.0 if t is LEAF else float(costs[(c, t)]), roots


@settings(max_examples=60, deadline=None)
@given(random_egraphs())
def test_ilp_is_never_worse_than_greedy(egraph):
    candidates, cost, roots = egraph
    greedy = extract(candidates, roots, cost, extractor="greedy")
    exact = extract(candidates, roots, cost, extractor="ilp")
    assert exact.cost <= greedy.cost + 1e-9


def tree_egraph(depth: int):
    """Every class is used once, so tree cost and DAG cost agree."""
    candidates = {"leaf": [LEAF]}
    previous = "leaf"
    for i in range(depth):
        candidates[f"c{i}"] = [Term("Elementwise", (previous,), ("cheap",)), Term("Elementwise", (previous,), ("dear",))]
        previous = f"c{i}"
    return candidates, previous


def test_ilp_and_greedy_agree_when_nothing_is_shared():
    candidates, root = tree_egraph(6)
    cost = lambda c, t: 0.0 if t is LEAF else (1.0 if t.attrs == ("cheap",) else 5.0)  # noqa: E731
    greedy = extract(candidates, [root], cost, extractor="greedy")
    exact = extract(candidates, [root], cost, extractor="ilp")
    assert math.isclose(greedy.cost, exact.cost) and greedy.cost == 6.0


@settings(max_examples=80, deadline=None)
@given(cyclic_egraphs())
def test_ilp_on_egraphs_with_cycles_is_acyclic_and_never_worse_than_greedy(egraph):
    # level rows are written only between classes of one strongly connected component
    candidates, costs, _, roots = egraph
    cost = lambda c, t: costs[(c, t)]  # noqa: E731
    greedy = extract(candidates, roots, cost, extractor="greedy")
    exact = extract(candidates, roots, cost, extractor="ilp")
    assert exact.cost <= greedy.cost
    for eclass in reachable(exact.selection, roots):
        assert eclass not in reachable(exact.selection, list(exact.selection[eclass].args)), f"{eclass} reads itself"


# ---------------------------------------------------------------- extract_optimal (offline, benchmarks.optimality)


def brute_force_optimum(candidates, roots, cost) -> float:
    """The cheapest acyclic selection's DAG cost, by trying every choice of one term per class."""
    classes = list(candidates)
    best = math.inf
    for choice in itertools.product(*(candidates[c] for c in classes)):
        selection = dict(zip(classes, choice))
        try:
            order = reachable(selection, roots)
        except KeyError:
            continue
        if any(eclass in reachable(selection, list(selection[eclass].args)) for eclass in order):
            continue
        best = min(best, dag_cost(selection, roots, cost))
    return best


def test_optimal_cuts_the_cycle_the_relaxation_takes():
    # a == f(b) or leaf, b == g(a) or leaf, f and g free: without acyclicity, a = f(b), b = g(a) costs 0
    candidates = {
        "a": [Term("Elementwise", ("b",), ("f",)), Term("Opaque", (), ("la",))],
        "b": [Term("Elementwise", ("a",), ("g",)), Term("Opaque", (), ("lb",))],
    }
    cost = lambda eclass, term: 0.0 if term.op == "Elementwise" else (10.0 if eclass == "a" else 7.0)  # noqa: E731
    optimum = extract_optimal(candidates, ["a"], cost)
    assert optimum.proven and optimum.rounds == 2  # one cut, then an acyclic optimum: no branch and bound on level rows
    assert optimum.cost == 7.0 and optimum.bound == 7.0
    assert optimum.selection == {"a": candidates["a"][0], "b": candidates["b"][1]}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cyclic_egraphs())
def test_optimal_is_the_cheapest_acyclic_selection(egraph):
    candidates, costs, _, roots = egraph
    cost = lambda c, t: costs[(c, t)]  # noqa: E731
    optimum = extract_optimal(candidates, roots, cost)
    assert optimum.proven
    assert math.isclose(optimum.cost, brute_force_optimum(candidates, roots, cost))
    assert optimum.cost <= extract(candidates, roots, cost).cost + 1e-9
    for eclass in reachable(optimum.selection, roots):
        assert eclass not in reachable(optimum.selection, list(optimum.selection[eclass].args)), f"{eclass} reads itself"


def test_extraction_starts_refinement_from_the_ilp_pick_and_from_greedy():
    candidates, sizes, roots = shared_transpose_egraph(8)
    cost = elements_cost(sizes)
    greedy = extract(candidates, roots, cost, extractor="greedy")
    exact = extract(candidates, roots, cost, extractor="ilp")
    assert greedy.starts == (greedy.selection,)
    assert exact.extractor == "ilp" and exact.starts == (exact.selection, greedy.selection)


class _CountingCandidates(dict):
    """Candidates that count how many e-classes' terms were read."""

    reads = 0

    def __getitem__(self, eclass):
        self.reads += 1
        return super().__getitem__(eclass)


def test_auto_decides_against_the_ilp_without_walking_a_large_egraph():
    """A chain of 10,000 e-classes of one term each: auto decides for greedy after reading ILP_TERM_LIMIT + 1
    classes, not all of them, and extracts the same graph as greedy."""
    candidates = _CountingCandidates({f"c{i}": [Term("Neg", (f"c{i - 1}",) if i else (), ())] for i in range(10_000)})
    cost = lambda eclass, term: 1.0  # noqa: E731
    auto = extract(candidates, ["c9999"], cost, extractor="auto")
    reads_by_auto = candidates.reads
    assert auto.extractor == "greedy"
    assert auto.selection == extract(dict(candidates), ["c9999"], cost, extractor="greedy").selection
    assert reads_by_auto == 2 * ILP_TERM_LIMIT + 1  # the last class is not expanded; greedy reads the items


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_reachable_is_the_depth_first_post_order_of_the_selection(data):
    """Operands before their readers, each e-class once, operands visited left to right from each root in
    turn: the order that refinement and the cost contexts walk (compared with the recursive definition)."""
    size = data.draw(st.integers(1, 30))
    selection = {
        f"c{i}": Term("Op", tuple(f"c{data.draw(st.integers(0, i - 1))}" for _ in range(data.draw(st.integers(0, 3)) if i else 0)), ())
        for i in range(size)
    }
    roots = data.draw(st.lists(st.sampled_from(sorted(selection)), min_size=1, max_size=4))
    expected: list[str] = []

    def visit(eclass: str) -> None:
        if eclass in expected:
            return
        for operand in selection[eclass].args:
            visit(operand)
        if eclass not in expected:
            expected.append(eclass)

    for root in roots:
        visit(root)
    assert reachable(selection, roots) == expected
