"""Local search on whole-graph cost: the contexts that per-term costs cannot see.

Extraction prices every term on its own, so it cannot see what depends on the
graph around a term, like a RESHAPE that Vela keeps as a MemoryCopy because
its input has another reader (eqsat.extract.layers.copied_reshapes). On
tds-conv1d (U55) the extracted graph was cheaper term by term but dearer as a
whole, so the pass had to reject all of it.

`refine` starts from an extracted selection and changes one e-class's term at
a time, keeping each change that lowers the graph's cost, until a round over
the graph changes nothing or its work bound is spent. Every state it visits is
acyclic (a term is taken only if its operands do not reach its own class), so
the result is a valid graph.

A change is priced by the layers it touches, not by the whole graph
(`RegionCost`, eqsat.extract.cost.region_cost): a core of the e-classes
within WINDOW_HOPS reads of what the change rewires, makes computed or leaves
unread, with the classes that read or are read by it, formed into layers
before and after the change. Far from the change the cut is the same on both
sides, so what it changes cancels and the difference is the change's. Vela's
graph optimiser also decides some things from the graph outputs inward (which
reshapes `CanonicaliseReshapeTransposePattern` reaches), which no window can
see whole; so the whole graph is priced once per round, and a round that
comes out dearer is undone and run again with each change priced whole. The
result is never dearer than where it started, whatever a window misses.

The work bound counts what the search does, not how long it takes, so the
result does not depend on the machine or its load: a pricing is charged the
number of e-classes it forms into layers. A wall-clock limit remains as a
safety net for callers with a deadline; when it stops the search, the result
says so (`clock_stopped`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

from eqsat.ir import Term
from eqsat.extract._gc import paused_gc
from eqsat.extract.greedy import Selection, reachable

GraphCost = Callable[[Selection], float]
"""The cost of computing the roots with a selection, context included."""

RegionCost = Callable[[Selection, list[str], frozenset[str]], float]
"""The cost of the layers of a core of e-classes that a selection computes, the e-classes of a region around it (in
the order given) formed into layers as if they were the whole graph (eqsat.extract.cost.region_cost)."""


WORK_LIMIT = 100_000
"""The search's work bound, in e-classes formed into layers by its pricings. On this machine a class costs about
5 µs priced whole and 8-20 µs in a window (a window's layer formation has a fixed part), so the bound is about 1-2 s:
1.1 s on the zoo's longest search (tv-regnet-x-400mf) and 1.6-2.0 s on the 20,000-node scale graph, where the search
stops at it. On the zoo's 52 graphs for ethos-u55-128 and ethos-u85-256, each search ends at the graph it ends at
with 400,000."""

WINDOW_HOPS = 4
"""How far around a change its pricing looks, in reads (operand to reader, either way). On every candidate change of
the zoo's extracted graphs for ethos-u55-128 and ethos-u85-256 (3,997), a window of 4 reads priced the change as the
whole graph does on 3,964, with the same sign on 31 and the other on 2 (attention-permute: the window's traversal
reaches a reshape the whole graph's does not); windows of 2, 3, 5 and 6 reads gave 3,943, 3,958, 3,966 and 3,964
exact and the same 2 of the other sign, and a wider window costs more classes."""


@dataclass(frozen=True)
class Refinement:
    selection: Selection
    cost: float
    work: int
    clock_stopped: bool


def refine(
    selection: Selection,
    candidates: dict[str, list[Term]],
    roots: list[str],
    graph_cost: GraphCost,
    *,
    region_cost: RegionCost | None = None,
    work_limit: int = WORK_LIMIT,
    seconds: float = math.inf,
) -> Refinement:
    """A selection at most as costly as `selection` under graph_cost, its cost, the work spent, and
    whether the wall-clock safety net (`seconds`) rather than convergence or `work_limit` stopped it.

    With region_cost, each change is priced by the layers around it; without it, by the whole graph. Either way,
    it runs without the cyclic collector, which would scan the whole e-graph's terms every so many of the
    pricings' allocations (half of the time).
    """
    with paused_gc():
        return _refine(selection, candidates, roots, graph_cost, region_cost, work_limit, seconds)


def _refine(
    selection: Selection,
    candidates: dict[str, list[Term]],
    roots: list[str],
    graph_cost: GraphCost,
    region_cost: RegionCost | None,
    work_limit: int,
    seconds: float,
) -> Refinement:
    deadline = time.monotonic() + seconds
    current = dict(selection)
    best = graph_cost(current)
    work = 0
    changed = True
    while changed and work < work_limit:
        start = dict(current)
        if region_cost is None:
            changed, work, clock_stopped, best = _round_priced_whole(current, candidates, roots, graph_cost, best, work, work_limit, deadline)
        else:
            changed, work, clock_stopped, computed = _round_priced_by_regions(current, candidates, roots, region_cost, work, work_limit, deadline)
            if changed:  # the round's changes, priced whole together: kept if they are cheaper
                cost = graph_cost(current)
                work += computed
                if cost < best:
                    best = cost
                else:  # the windows missed what the changes do together: the round again, each change priced whole
                    current, region_cost = start, None
        if clock_stopped:
            return Refinement(current, best, work, clock_stopped=True)
    return Refinement(current, best, work, clock_stopped=False)


def _round_priced_whole(
    current: Selection, candidates: dict[str, list[Term]], roots: list[str], graph_cost: GraphCost, best: float, work: int, work_limit: int, deadline: float
) -> tuple[bool, int, bool, float]:
    """One round over the computed e-classes, each change priced whole: whether one was kept, the work spent so far,
    whether the clock stopped it, and the selection's cost."""
    changed = False
    classes = reachable(current, roots)
    for eclass in classes:
        if work >= work_limit:
            break
        if time.monotonic() >= deadline:
            return changed, work, True, best
        for term in candidates.get(eclass, ()):
            if term == current[eclass] or not _acyclic_with(current, eclass, term):
                continue
            work += len(classes)
            previous, current[eclass] = current[eclass], term
            cost = graph_cost(current)
            if cost < best:
                best, changed = cost, True
            else:
                current[eclass] = previous
    return changed, work, False, best


def _round_priced_by_regions(
    current: Selection, candidates: dict[str, list[Term]], roots: list[str], region_cost: RegionCost, work: int, work_limit: int, deadline: float
) -> tuple[bool, int, bool, int]:
    """One round over the computed e-classes, each change priced by the layers around it (`_Computed.window`):
    whether one was kept, the work spent so far, whether the clock stopped it, and how many classes it computes."""
    changed = False
    computed = _Computed(current, roots)
    work += len(computed.order)
    priced: dict[tuple, float] = {}  # the cost of each window before a change, until one is taken
    for eclass in computed.order:
        if work >= work_limit:
            break
        if time.monotonic() >= deadline:
            return changed, work, True, len(computed.position)
        for term in candidates.get(eclass, ()):
            if eclass not in computed.position or term == current[eclass]:
                continue
            work += computed.reorder_if_stale(current, roots)
            if not computed.acyclic_with(current, eclass, term):
                continue
            change = computed.window(current, eclass, term)
            before = (tuple(change.before), change.core)
            if before not in priced:
                work += len(change.before)
                priced[before] = region_cost(current, change.before, change.core)
            work += len(change.after)
            previous, current[eclass] = current[eclass], term
            if region_cost(current, change.after, change.core) < priced[before]:
                changed = True
                computed.take(current, eclass, previous, change)
                priced.clear()
            else:
                current[eclass] = previous
    return changed, work, False, len(computed.position)


@dataclass(frozen=True)
class _Change:
    """What taking another term for an e-class touches: the e-classes it makes computed (operands first) and leaves
    unread, and the window of e-classes around it, in order, before and after."""

    born: list[str]
    dead: list[str]
    before: list[str]
    after: list[str]
    core: frozenset[str]


class _Computed:
    """The e-classes a selection computes for the roots, each with a position in an order that computes every class
    after its operands, and who reads each; kept up to date as the search takes changes (a change that reads a class
    positioned after its reader leaves the order stale until `reorder_if_stale`)."""

    def __init__(self, selection: Selection, roots: list[str]) -> None:
        self.order = reachable(selection, roots)
        self.position = {eclass: float(i) for i, eclass in enumerate(self.order)}
        self.stale = False
        self.outputs = Counter(roots)
        self.readers: dict[str, Counter[str]] = {}
        for eclass in self.order:
            for arg in selection[eclass].args:
                self.readers.setdefault(arg, Counter())[eclass] += 1

    def reorder_if_stale(self, selection: Selection, roots: list[str]) -> int:
        """Position the classes anew if a change left the order stale; how many classes that walked."""
        if not self.stale:
            return 0
        order = reachable(selection, roots)
        self.position, self.stale = {eclass: float(i) for i, eclass in enumerate(order)}, False
        return len(order)

    def acyclic_with(self, selection: Selection, eclass: str, term: Term) -> bool:
        """True when taking term for eclass keeps the selection acyclic: no operand of term reaches eclass. The walk
        skips a computed class positioned before eclass: what it reaches is positioned before it too."""
        if any(arg not in selection for arg in term.args):
            return False
        at = self.position[eclass]
        seen: set[str] = set()
        stack = list(term.args)
        while stack:
            operand = stack.pop()
            if operand == eclass:
                return False
            if operand not in seen and self.position.get(operand, math.inf) > at:
                seen.add(operand)
                stack.extend(selection[operand].args)
        return True

    def reads(self, eclass: str) -> int:
        """How many times eclass is read: once per operand slot of a computed class, once per root."""
        return sum(self.readers.get(eclass, Counter()).values()) + self.outputs[eclass]

    def window(self, selection: Selection, eclass: str, term: Term) -> _Change:
        """What taking term for eclass touches: the classes it rewires, makes computed or leaves unread, and the
        classes within WINDOW_HOPS reads of them, before and after the change."""
        born = self._born(selection, term)
        dead = self._dead(selection, eclass, term, born)
        born_set, dead_set = set(born), set(dead)
        born_readers: dict[str, list[str]] = {}
        for reader in [*born, eclass]:
            for arg in (term if reader == eclass else selection[reader]).args:
                born_readers.setdefault(arg, []).append(reader)

        def neighbours(value: str) -> Iterator[str]:
            for neighbour in (*selection[value].args, *self.readers.get(value, ()), *born_readers.get(value, ())):
                if neighbour in self.position or neighbour in born_set:
                    yield neighbour

        core = {eclass, *selection[eclass].args, *term.args, *born, *dead}
        frontier = list(core)
        for _ in range(WINDOW_HOPS):
            reached = []
            while frontier:
                for neighbour in neighbours(frontier.pop()):
                    if neighbour not in core:
                        core.add(neighbour)
                        reached.append(neighbour)
            frontier = reached
        region = core.union(*(neighbours(value) for value in core))  # with the classes that read or are read by the core
        inserted = self._born_positions(eclass, born)
        before = sorted((v for v in region if v in self.position), key=lambda v: (self.position[v], v))
        after = sorted(  # by position, then by name: classes born at one class may share a position
            (v for v in region if v in born_set or (v in self.position and v not in dead_set)),
            key=lambda v: (inserted[v] if v in born_set else self.position[v], v),
        )
        return _Change(born, dead, before, after, frozenset(core))

    def take(self, selection: Selection, eclass: str, previous: Term, change: _Change) -> None:
        """Record that eclass now computes selection[eclass] instead of previous."""
        for arg in previous.args:
            self._unread(arg, eclass)
        self.position.update(self._born_positions(eclass, change.born))
        for reader in [*change.born, eclass]:
            for arg in selection[reader].args:
                self.readers.setdefault(arg, Counter())[reader] += 1
        for value in change.dead:
            del self.position[value]
            self.readers.pop(value, None)
            for arg in selection[value].args:
                self._unread(arg, value)
        position = self.position
        self.stale = self.stale or any(position[arg] >= position[reader] for reader in [*change.born, eclass] for arg in selection[reader].args)

    def _unread(self, value: str, reader: str) -> None:
        readers = self.readers[value]
        readers[reader] -= 1
        if readers[reader] <= 0:
            del readers[reader]

    def _born(self, selection: Selection, term: Term) -> list[str]:
        """The classes term reads that are not computed yet, with what they read, operands first."""
        born: list[str] = []
        seen: set[str] = set()
        stack = [(arg, False) for arg in reversed(term.args)]
        while stack:  # depth first, each class listed after its operands
            value, expanded = stack.pop()
            if expanded:
                born.append(value)
            elif value not in seen and value not in self.position:
                seen.add(value)
                stack.append((value, True))
                stack.extend((arg, False) for arg in reversed(selection[value].args))
        return born

    def _dead(self, selection: Selection, eclass: str, term: Term, born: list[str]) -> list[str]:
        """The computed classes that nothing would read once eclass computes term (born reading some)."""
        added = Counter(term.args)
        for value in born:
            added.update(selection[value].args)
        dropped = Counter(selection[eclass].args)
        dead: dict[str, None] = {}
        stack = list(selection[eclass].args)
        while stack:
            value = stack.pop()
            if value in self.position and value not in dead and self.reads(value) - dropped[value] + added[value] <= 0:
                dead[value] = None
                dropped.update(selection[value].args)
                stack.extend(selection[value].args)
        return list(dead)

    def _born_positions(self, eclass: str, born: list[str]) -> dict[str, float]:
        """Positions for born, in order, between eclass and the position before it."""
        at = self.position[eclass]
        return {value: at - 1 + (i + 1) / (len(born) + 1) for i, value in enumerate(born)}


def refine_from(
    starts: tuple[Selection, ...],
    candidates: dict[str, list[Term]],
    roots: list[str],
    graph_cost: GraphCost,
    *,
    seconds: float = math.inf,
    **options,
) -> Refinement:
    """`refine` from each start (each with refine's options: region_cost, work_limit), the cheapest result; on a tie
    the earlier start's. `seconds` bounds them all together.

    Extraction prices terms one by one, so of two starts the cheaper one term
    by term can refine to the dearer whole graph (with the ILP's size cap
    lifted, its pick on emg-gru-gesture refined 2-4% dearer than greedy's)."""
    deadline = time.monotonic() + seconds
    results = [refine(start, candidates, roots, graph_cost, seconds=deadline - time.monotonic(), **options) for start in starts]
    best = min(results, key=lambda r: r.cost)  # the first of equally cheap results
    return Refinement(best.selection, best.cost, sum(r.work for r in results), any(r.clock_stopped for r in results))


def _acyclic_with(selection: Selection, eclass: str, term: Term) -> bool:
    """True when choosing term for eclass keeps the selection acyclic (and every operand computable)."""
    if any(arg not in selection for arg in term.args):
        return False
    seen: set[str] = set()
    stack = list(term.args)
    while stack:  # depth first from the operands, stopping at eclass
        operand = stack.pop()
        if operand == eclass:
            return False
        if operand not in seen:
            seen.add(operand)
            stack.extend(selection[operand].args)
    return True
