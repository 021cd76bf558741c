"""Check rewrite rules sound on real tensors.

A graph is loaded into an e-graph and saturated with some rulesets. Then every
e-node is run, as write-back writes it, on its operands' values under the exact
evaluator (eqsat.ops.reference, REQUIREs included), and must give its e-class's
value bit for bit (`check_every_enode`). A law that equates two unequal terms
puts them in one e-class, so one of them disagrees; and when every e-node
agrees, every extraction computes what the original graph does.

The graph is a TOSA-dialect graph (run by the exact evaluator) or an ATen or
edge ATen one (its ops run as themselves), with FakeTensor `val` meta on every
node, as `torch.export`, `to_edge` and the Arm pipeline produce.

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

import contextlib
import dataclasses
import functools
import hashlib
from collections.abc import Callable
from typing import Any

import torch
from egglog import EGraph, Ruleset
from torch import fx

from eqsat import bridge_fx, rules
from eqsat.errors import EqsatError
from eqsat.ops.nodes import op_name
from eqsat.ops.reference import compute, evaluate
from eqsat.ir import Term
from eqsat.extract.egraph_view import EGraphView
from eqsat.extract.greedy import extract_greedy

BUDGET = rules.Budget(iterations=12, enodes=20_000, seconds=30.0)
"""Saturation limits for soundness checks: small graphs, so generous in time, tight in size."""


class Unsound(EqsatError):
    """An extraction of the saturated e-graph computes something else than the original graph."""


INT32_INPUT_RANGE = (-(2**15), 2**15 - 1)
"""The values an int32 input is drawn from. An int32 tensor here is an accumulator, and TOSA's RESCALE
REQUIREs |value| < 2^(shift - 1): a scale of at most 2^14, the largest in these graphs, has shift >= 16,
so 2^15 keeps every draw in the domain where the rewrites must agree."""


def zero_points_of(graph_module: fx.GraphModule) -> set[int]:
    """The zero points a graph's RESCALEs read and write (with 0): the values next to them are where rounding turns."""
    found = {0}
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and op_name(node.target) == "tosa.RESCALE.default" and len(node.args) >= 5:
            found.update(int(zp) for zp in node.args[3:5])
    return found


def random_inputs(graph_module: fx.GraphModule, seed: int = 0) -> list[torch.Tensor]:
    """Random tensors for the placeholders, deterministic per seed (float: normal).

    An integer tensor draws half its elements uniformly over the dtype's range (int32: INT32_INPUT_RANGE)
    and half from its boundary values: the range's two ends and the values next to them, and each zero
    point of the graph's RESCALEs with its two neighbours (inside the range).
    """
    generator = torch.Generator().manual_seed(seed)
    zero_points = zero_points_of(graph_module)
    inputs = []
    for node in graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta["val"]
        shape = tuple(val.shape)
        if val.dtype.is_floating_point:
            inputs.append(torch.randn(shape, generator=generator, dtype=val.dtype))
            continue
        low, high = INT32_INPUT_RANGE if val.dtype == torch.int32 else (torch.iinfo(val.dtype).min, torch.iinfo(val.dtype).max)
        special = sorted({v for v in (low, low + 1, high - 1, high, *(z + d for z in zero_points for d in (-1, 0, 1))) if low <= v <= high})
        uniform = torch.randint(low, high + 1, shape, generator=generator, dtype=torch.int64)
        boundary = torch.tensor(special)[torch.randint(0, len(special), shape, generator=generator)]
        aimed = torch.randint(0, 2, shape, generator=generator).bool()
        inputs.append(torch.where(aimed, boundary, uniform).to(val.dtype))
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


ENODE_LIMIT = 50_000
"""The most e-nodes check_every_enode evaluates (each once per input draw): past it, TooLarge."""


class TooLarge(Exception):
    """An e-graph with more e-nodes than check_every_enode is allowed to evaluate."""


def _difference(expected: Any, actual: Any) -> str | None:
    """How actual differs from expected (tensors bit for bit, with dtype and shape; other values by ==), or None."""
    if isinstance(expected, torch.Tensor) != isinstance(actual, torch.Tensor):
        return f"{type(expected).__name__} became {type(actual).__name__}"
    if not isinstance(expected, torch.Tensor):
        return None if expected == actual else f"{expected!r} became {actual!r}"
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return f"{expected.dtype}{list(expected.shape)} became {actual.dtype}{list(actual.shape)}"
    return None if torch.equal(expected, actual) else f"{int((expected != actual).sum())} of {expected.numel()} elements differ"


def check_every_enode(loaded: bridge_fx.Loaded, view: EGraphView, draws: list[list[torch.Tensor]], limit: int = ENODE_LIMIT) -> int:
    """Check a saturated e-graph on each draw of inputs under the exact evaluator (eqsat.ops.reference,
    REQUIREs included); raise Unsound on the first disagreement. Returns how many e-nodes it evaluated per draw.

    Each e-class gets a value once, from the first of its e-nodes whose operands' classes have one
    (iterating to a fixpoint from the inputs); every e-node is then run, as write-back writes it, on
    its operands' class values and must give its class's value bit for bit. Then any extraction computes
    what the original graph does (by induction over its terms), whatever the cost model prefers.
    Also: every node of the original graph (merged duplicates included) has its own value as its
    class's, the outputs agree in count and value, and each class's analysed shape and dtype are its value's.
    """
    if view.enode_count > limit:
        raise TooLarge(f"{view.enode_count} e-nodes, more than the {limit} checked")
    stand_in, written = bridge_fx.write_every_enode(loaded, view.candidates, view.class_of_node, view.types)
    for draw, inputs in enumerate(draws):
        try:
            _check_draw(loaded, view, stand_in, written, inputs)
        except Unsound as error:
            raise Unsound(f"on input draw {draw}: {error}") from None
    return len(written)


def _check_draw(
    loaded: bridge_fx.Loaded, view: EGraphView, stand_in: dict[fx.Node, str], written: list[bridge_fx.WrittenEnode], inputs: list[torch.Tensor]
) -> None:
    """check_every_enode on one draw of inputs."""
    graph_module = loaded.graph_module
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    input_of = {n.target: value for n, value in zip(placeholders, inputs, strict=True)}
    values: dict[str, Any] = {}

    def run(enode: bridge_fx.WrittenEnode) -> Any:
        computed: dict[fx.Node, Any] = {}

        def value_of(node: fx.Node) -> Any:
            return values[stand_in[node]] if node in stand_in else computed[node]

        for node in enode.nodes:
            if node in stand_in:
                continue
            if node.op == "placeholder":
                computed[node] = input_of[node.target]
            elif node.op == "get_attr":
                computed[node] = getattr(graph_module, node.target)
            else:
                try:
                    computed[node] = compute(node, value_of)
                except Exception as error:  # noqa: BLE001 - an e-node that does not run on legal inputs is a finding
                    raise Unsound(f"{enode.term} in {enode.eclass} does not run: {type(error).__name__}: {error}") from None
        return value_of(enode.nodes[-1])

    waiting = written
    while waiting:
        ready = [e for e in waiting if all(c in values for c in e.reads)]
        if not ready:
            break
        waiting = [e for e in waiting if not all(c in values for c in e.reads)]
        for enode in ready:
            value = run(enode)
            if enode.eclass not in values:
                values[enode.eclass] = value
            elif (difference := _difference(values[enode.eclass], value)) is not None:
                raise Unsound(f"{enode.term} in {enode.eclass} disagrees with its class: {difference}")
    if waiting:
        raise Unsound(f"{len(waiting)} e-node(s) read e-classes that no e-node computes from the inputs, e.g. {waiting[0].term}")

    original: dict[fx.Node, Any] = {}
    for i, node in enumerate(loaded.nodes):
        if node.op == "placeholder":
            original[node] = input_of[node.target]
        elif node.op == "get_attr":
            original[node] = getattr(graph_module, node.target)
        else:
            original[node] = compute(node, original.__getitem__)
        if (difference := _difference(original[node], values.get(view.class_of_node[i]))) is not None:
            raise Unsound(f"node {node.name} and its e-class {view.class_of_node[i]} disagree: {difference}")
    expected = evaluate(graph_module, inputs)
    if len(expected) != len(loaded.outputs):
        raise Unsound(f"the graph has {len(expected)} outputs, the e-graph {len(loaded.outputs)}")
    for slot, (want, i) in enumerate(zip(expected, loaded.outputs)):
        if i is not None and (difference := _difference(want, values[view.class_of_node[i]])) is not None:
            raise Unsound(f"output {slot}: {difference}")
    for eclass, known in view.types.items():
        value = values.get(eclass)
        if isinstance(value, torch.Tensor) and (tuple(value.shape) != known.shape or known.dtype not in (None, str(value.dtype))):
            raise Unsound(f"{eclass} is analysed as {known.dtype}{list(known.shape)}, its value is {value.dtype}{list(value.shape)}")


_case_logs: list[list[dict[str, int]]] = []
"""The rule matches of every Saturated built while a law_fires_in test runs (one list per running test)."""


class Saturated:
    """A graph loaded into an e-graph and saturated with some rulesets (under BUDGET), the e-graph read into `view`.

    The e-graph is `into` when given, and a fresh one when keep_egraph is set or some ruleset is not in the schedule's
    compiled program (rules.runs_compiled); either stays as saturated in `loaded.egraph`. Otherwise it is the pass's
    scratch e-graph (rules.scratch_egraph), which holds the compiled rules already: adding them to a fresh e-graph costs
    egglog about 0.13 s of CPU, most of a property test's small example. egglog's push/pop resets it once `view` is
    read, so each graph starts from an empty e-graph, and its e-class ids, rule matches (its own runs' reports) and
    view are those of a fresh one (tests/test_soundness.py); `loaded.egraph` is then None. `enode_count` is the
    saturated e-graph's rows (rules.enode_count), whichever e-graph it was.
    """

    def __init__(
        self,
        graph_module: fx.GraphModule,
        *rulesets: Ruleset,
        merge_duplicates: bool = False,
        budget: rules.Budget = BUDGET,
        into: EGraph | None = None,
        keep_egraph: bool = False,
    ) -> None:
        """into: an empty e-graph to load into (bridge_fx.to_egraph), such as the pass's rules.scratch_egraph().
        keep_egraph: load into a fresh e-graph and keep it, for tests that read the saturated e-graph itself."""
        self.graph_module = graph_module
        reuse = into is None and not keep_egraph and bool(rulesets) and rules.runs_compiled(rulesets)
        with rules.scratch_egraph() if reuse else contextlib.nullcontext(into) as egraph:
            self.loaded = bridge_fx.to_egraph(graph_module, merge_duplicates=merge_duplicates, into=egraph)
            self.result = rules.saturate(self.loaded.egraph, budget, rewrites=tuple(rulesets))
            self.enode_count = rules.enode_count(self.loaded.egraph)
            self.view = EGraphView.of(self.loaded.egraph, len(self.loaded.nodes))
        if reuse and egraph is not None:
            self.loaded = dataclasses.replace(self.loaded, egraph=None)
        self.result.rule_matches["merge-duplicates"] += self.loaded.merged_duplicates
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

    def assert_every_extraction_agrees(self, input_seeds: int = 2) -> int:
        """Raise Unsound unless every e-node agrees with its e-class on random_inputs of every input seed
        (check_every_enode; draw k is seed k): then every extraction computes what the original graph does.
        Returns the e-nodes evaluated per seed."""
        draws = [random_inputs(self.graph_module, input_seed) for input_seed in range(input_seeds)]
        return check_every_enode(self.loaded, self.view, draws)


def fired_share(cases: list[dict[str, int]], law: str) -> float:
    """The share of cases (rule-match counts, one per saturated graph) in which law fired.

    law is a rule name or the name of a generated family: "transpose-through-pad"
    counts "transpose-through-pad" and "transpose-through-pad-3" alike.
    """
    def fired(matches: dict[str, int]) -> bool:
        return any(count > 0 and (name == law or name.startswith(law + "-")) for name, count in matches.items())

    return sum(map(fired, cases)) / len(cases) if cases else 0.0


class LawDidNotFire(EqsatError):
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
