"""The cost model: what a candidate graph costs on a target, in estimated inference cycles (Vela's `cycles_total`).

Rules never mention cost; this module alone decides extraction. A graph costs
what the layers Vela runs for it cost (`eqsat.extract.layers.form_layers`:
which ops Vela fuses, removes, copies or runs alone, each decision following
regor's graph optimiser and scheduler), and each layer costs its `Op Cycles`
as calibrated for the configuration (`layer_cycles`, eqsat.extract.vela_cost).
`graph_cost` is the one function that prices a graph: the pipeline's
acceptance, the local search and the calibration report call it.
`region_cost` prices the layers around one change the local search tries,
with the same layer formation and prices on part of the graph.

Extraction prices e-nodes one by one (`term_costs`): an e-node's price cannot
see its neighbours, which is what the local search (eqsat.extract.refine)
adds back by pricing whole candidate graphs.

Only configurations (target, system config, memory mode, vela.ini) with a
calibration file of their own are priced (`cost_model_for`); any other is
refused with the command that calibrates it, so a report never states a cost
in a unit it does not have, nor in another configuration's.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Callable, Container, Hashable, Iterator, Mapping, Protocol

from eqsat.configuration import Configuration, unpriceable
from eqsat.ir import Graph, TensorType, Term
from eqsat.extract import vela_cost
from eqsat.extract.layers import Layer, LayerKind, LiveGraph, form_layers, readers_of
from eqsat.extract.weights import WeightReads


class CostModel(Protocol):
    target: str
    unit: str
    folds_transpose_into_producer: bool
    buffers_weights: bool
    """Whether the target may copy a convolution's weights into the SRAM before running it (`weight_reads`)."""

    def cost(self, term: Term, out: TensorType | None, args: list[TensorType | None]) -> float:
        """The cost of computing term once, given its output and operand types (None: unknown).

        It reads the term's op and attributes and how many operands it has, never which ones they are.
        """

    def memory_copy(self, tensor: TensorType | None) -> float:
        """The cost of copying tensor once (a RESHAPE that Vela cannot remove)."""

    def batched_copies(self, tensor: TensorType | None) -> float:
        """The cost of copying tensor one leading index (beyond HWC) at a time, as Vela copies a batched tensor."""

    def folded_transpose_copy(self, sliced: TensorType, perm: tuple[int, ...]) -> float | None:
        """The cost of a SLICE's copy of sliced that also writes it transposed by perm (None: not calibrated)."""

    def fuses_input_rescale_into(self, op: str) -> bool:
        """Whether the target fuses an input RESCALE into the elementwise op (ADD, SUB, MUL) that alone reads it."""

    def fuses_add_sub(self, scales: tuple[float | None, ...] | None, output_rescaled_alone: bool) -> bool:
        """Whether the target runs an ADD or SUB as one pass with its rescales fused, given its input rescales' scales
        (None: its operands are not both input rescales that it alone reads) and whether one output rescale alone
        reads it."""

    def standalone_input_rescale(self, source: TensorType | None, out: TensorType | None) -> float:
        """The cost of an input RESCALE from source to out run alone (not fused into the op reading it)."""

    def standalone_rescale(self, accumulator: TensorType | None, per_channel: bool = False) -> float:
        """The cost of an output RESCALE of the int32 accumulator run alone (not fused into the op writing it)."""

    def input_rescale_beside_int32(self, reader: Term, source: TensorType | None, out: TensorType | None) -> float:
        """The cost of an input RESCALE run alone because reader's other operand is a plain int32 tensor, and of
        whatever of reader Vela computes in that layer rather than in reader's own."""

    def binary_op(self, term: Term, out: TensorType | None, args: list[TensorType | None], reads_int32: bool, clamped: bool) -> float:
        """The cost of an ADD, SUB or MUL term whose pass reads int32 operands (its input rescales run alone) or not,
        and has a CLAMP fused into it or not."""

    def chained_op(self, primary: Term, out: TensorType | None, args: list[TensorType | None], bricks: tuple[bool, bool]) -> float:
        """What an ADD, SUB or MUL chained into the op group of the convolution primary adds to that group's layer, its
        input and the group's output in brick format or NHWC as bricks says."""

    def convolution(self, term: Term, out: TensorType | None, args: list[TensorType | None], bricks: tuple[bool, bool]) -> float:
        """The cost of a convolution term whose input or written output is stored in NHWC (bricks: whether each is in
        brick format)."""

    def boundary_transpose(self, term: Term, out: TensorType | None, args: list[TensorType | None], brick_in: bool, brick_out: bool) -> float:
        """The cost of a TRANSPOSE term that reads a graph input (not brick_in) or writes a graph output (not
        brick_out), that side stored as the graph's inputs and outputs are."""

    def standalone_clamp(self, out: TensorType | None, brick_in: bool = True, brick_out: bool = True) -> float:
        """The cost of a CLAMP to out that no op fuses as its activation (a layer of its own), reading and writing
        brick format (NHCWB16, between two NPU ops) or NHWC (a graph input or output)."""

    def transposed_write(
        self, primary: Term, out: TensorType | None, args: list[TensorType | None], transpose: tuple[int, int, int], bricks: tuple[bool, bool]
    ) -> float:
        """What writing the convolution primary's output transposed by transpose (of its height, width and channels)
        adds to its layer, its input and the transposed output in brick format or NHWC as bricks says."""

    def weight_reads(self, term: Term, out: TensorType | None, args: list[TensorType | None], bricks: tuple[bool, bool] = (True, True)) -> WeightReads | None:
        """Where the target reads a convolution term's weights from, when that depends on the layer in front of it
        (`eqsat.extract.weights.WeightReads`); None when it does not (its price is its term's)."""

    def running_transposes_of(self, graph: Graph) -> CostModel:
        """This model, for which every transpose configuration that graph has runs on the target (the graph the
        pass is given: its transposes run if it does)."""


class UncalibratedTargetError(ValueError):
    """The configuration has no calibration file: its costs would be guesses in no unit, or another configuration's."""


def cost_model_for(configuration: Configuration | str) -> CostModel:
    """The Vela-calibrated cost model of a configuration (a target alone: its default configuration), from
    its file in eqsat/extract/calibration/ (vela_cost.calibration_path).

    Raises UncalibratedTargetError, naming the command that calibrates it, when there is none, or when the
    file records another configuration: a configuration is never priced with another's numbers.
    """
    if isinstance(configuration, str):
        configuration = Configuration.of(configuration)
    path = vela_cost.calibration_path(configuration)
    if not path.exists() and (reason := unpriceable(configuration)):
        raise UncalibratedTargetError(f"no cost-model calibration for {configuration.describe()}: {reason}")
    if not path.exists():
        calibrated = ", ".join(c.describe() for c in vela_cost.calibrations())
        raise UncalibratedTargetError(
            f"no cost-model calibration for {configuration.describe()}: run `{configuration.calibrate_command()}` "
            f"(about 10 minutes on 2 cores; calibrated: {calibrated})"
        )
    try:
        model = vela_cost.VelaCalibratedCost(configuration)
    except vela_cost.OtherConfigurationError as error:
        raise UncalibratedTargetError(f"{error}: run `{configuration.calibrate_command()}`") from None
    _warn_once_if_vela_differs(configuration, model.data["vela_version"])
    return model


_warned_versions: set[tuple[Configuration, str, str]] = set()


def _warn_once_if_vela_differs(configuration: Configuration, calibrated: str) -> None:
    """A warning, once per process and configuration, when the installed Vela is not the one it was fitted on."""
    installed = vela_cost.vela_version()
    if installed != calibrated and (configuration, calibrated, installed) not in _warned_versions:
        _warned_versions.add((configuration, calibrated, installed))
        message = (
            f"eqsat: the cost model of {configuration.describe()} was fitted on Vela {calibrated}, but Vela {installed} is installed; "
            f"its estimates may no longer rank graphs as this Vela does: run `{configuration.calibrate_command()}`"
        )
        logging.getLogger("eqsat").warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def term_costs(model: CostModel, types: Mapping[Hashable, TensorType]) -> Callable[[Hashable, Term], float]:
    """The cost of an e-class's term under model, with types[c] the type of e-class c (absent: unknown).

    Memoized on what the model reads (op, attributes, output and operand
    types): the e-graph of a network repeats the same few op configurations
    across many classes, and the extractor prices each e-node. The last term
    priced for each e-class is remembered as it is (the same object): the
    local search prices the selected terms again on every evaluation.
    """
    memo: dict[tuple, float] = {}
    last: dict[Hashable, tuple[Term, float]] = {}
    type_of = types.get

    def term_cost(eclass: Hashable, term: Term) -> float:
        priced = last.get(eclass)
        if priced is not None and priced[0] is term:  # a graph-cost evaluation prices the selected term again
            return priced[1]
        out, args = type_of(eclass), tuple(map(type_of, term.args))
        key = (term.op, term.attrs, out, args)
        try:
            value = memo[key]
        except KeyError:
            value = memo[key] = model.cost(term, out, list(args))
        last[eclass] = (term, value)
        return value

    return term_cost


def layer_cycles(layer: Layer, g: LiveGraph, term_cost: Callable[[Hashable, Term], float], slack: float | None = None) -> float:
    """What one layer costs: its op's term as calibrated (term_cost), or the calibrated price of what Vela runs. slack:
    the cycles of the layer Vela runs in front of it (None: none), which hide some of a convolution's weight copy
    where the target copies them (`CostModel.weight_reads`)."""
    model, kind, args = g.model, layer.kind, layer.args
    term = g.terms[layer.value]
    if model.buffers_weights and kind in (LayerKind.OP, LayerKind.CONVOLUTION) and term.op == "Opaque":
        bricks = args[0] if kind is LayerKind.CONVOLUTION else (True, True)
        reads = model.weight_reads(term, g.type_of(layer.value), [g.type_of(a) for a in term.args], bricks)
        if reads is not None:
            return reads.cycles(slack or 0.0, first_op=slack is None)
    if kind is LayerKind.OP:
        return term_cost(layer.value, term)
    if kind is LayerKind.TRANSPOSE_IN_SHAPE:
        perm, source, brick_in, brick_out = args
        moved = Term("Transpose", (g.terms[layer.value].args[0],), (perm,))
        return model.boundary_transpose(moved, g.type_of(layer.value), [source], brick_in, brick_out)
    if kind is LayerKind.RESHAPE_COPY:
        return model.memory_copy(*args)
    if kind is LayerKind.COPY:
        return model.batched_copies(*args)
    if kind is LayerKind.TRANSPOSING_COPY:
        price = model.folded_transpose_copy(*args)
        return model.batched_copies(args[0]) if price is None else price  # not calibrated: the plain copy
    if kind is LayerKind.ELEMENTWISE_PASS:
        value = layer.value
        return model.binary_op(g.terms[value], g.type_of(value), [g.type_of(a) for a in g.terms[value].args], *args)
    if kind is LayerKind.INPUT_RESCALE_ALONE:
        return model.standalone_input_rescale(*args)
    if kind is LayerKind.INPUT_RESCALE_BESIDE_INT32:
        return model.input_rescale_beside_int32(*args)
    if kind is LayerKind.OUTPUT_RESCALE_ALONE:
        return model.standalone_rescale(*args)
    if kind is LayerKind.CHAINED_OP:
        primary, bricks = args
        return model.chained_op(g.terms[primary], g.type_of(primary), [g.type_of(a) for a in g.terms[primary].args], bricks)
    if kind is LayerKind.CONVOLUTION:
        value = layer.value
        return model.convolution(g.terms[value], g.type_of(value), [g.type_of(a) for a in g.terms[value].args], *args)
    if kind is LayerKind.BOUNDARY_TRANSPOSE:
        term = g.terms[layer.value]
        return model.boundary_transpose(term, g.type_of(layer.value), [g.type_of(a) for a in term.args], *args)
    if kind is LayerKind.REDUCE_TRANSPOSE:
        x, brick_in, brick_out = args
        transposed = TensorType((x.shape[0], x.shape[2], x.shape[1]), x.dtype)
        return model.boundary_transpose(Term("Transpose", (), ((0, 2, 1),)), transposed, [x], brick_in, brick_out)
    if kind is LayerKind.REDUCE_OVER_CHANNELS:
        term = g.terms[layer.value]
        x, out = args
        return model.cost(Term("Reduce", term.args, (term.attrs[0], 2)), out, [x])
    if kind is LayerKind.CLAMP_ALONE:
        return model.standalone_clamp(*args)
    if kind is LayerKind.TRANSPOSED_WRITE:
        primary, transpose, bricks = args
        return model.transposed_write(g.terms[primary], g.type_of(primary), [g.type_of(a) for a in g.terms[primary].args], transpose, bricks)
    raise ValueError(f"no price for a layer of kind {kind!r}")


def _default_term_cost(g: LiveGraph) -> Callable[[Hashable, Term], float]:
    return lambda value, term: g.model.cost(term, g.type_of(value), [g.type_of(a) for a in term.args])


def value_costs(
    graph: dict[Hashable, Term],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None = None,
) -> dict[Hashable, float]:
    """What each value that the roots read costs: the layers Vela runs for it (0 for a value without one).

    graph maps each value to the term computing it (every operand is a value of graph); roots are
    the graph outputs. term_cost(value, term) defaults to the model's cost with the types of type_of.
    """
    g = LiveGraph.of(graph, roots, type_of, model)
    return _total_and_value_costs(g, term_cost or _default_term_cost(g))[1]


def _total_and_value_costs(g: LiveGraph, term_cost: Callable[[Hashable, Term], float]) -> tuple[float, dict[Hashable, float]]:
    """What g costs (summed as graph_cost sums) and what each of its values' layers cost."""
    costs, cycles = dict.fromkeys(g.terms, 0.0), []
    for layer, layer_cost in _layers_priced(g, term_cost):
        costs[layer.value] += layer_cost
        cycles.append(layer_cost)
    return math.fsum(cycles), costs


def _layers_priced(g: LiveGraph, term_cost: Callable[[Hashable, Term], float]) -> Iterator[tuple[Layer, float]]:
    """Each layer of g (`form_layers`) with what it costs, in the order Vela runs them: each after the last one that
    takes cycles (a constant, or an op Vela removes, costs none and runs nothing)."""
    slack = None
    for layer in form_layers(g):
        cycles = layer_cycles(layer, g, term_cost, slack)
        if cycles > 0:
            slack = cycles
        yield layer, cycles


def graph_cost(
    graph: dict[Hashable, Term],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None = None,
) -> float:
    """What a graph costs: the layers Vela runs for the terms the roots read (`form_layers`), each priced once.

    Summed exactly (`math.fsum`), so that two graphs with the same layers cost the same in any order.
    """
    g = LiveGraph.of(graph, roots, type_of, model)
    term_cost = term_cost or _default_term_cost(g)
    return math.fsum(cycles for _, cycles in _layers_priced(g, term_cost))


def region_cost(
    graph: dict[Hashable, Term],
    region: list[Hashable],
    core: Container[Hashable],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None = None,
) -> float:
    """What the layers of the core of a region of a graph cost, the region's values (in the order Vela runs them)
    formed into layers as if they were the whole graph: what a value reads from outside the region is a graph input
    to it, a value only the outside reads is unread, and a traversal from the graph outputs enters the region there.
    The region holds what reads or is read by the core, so that each core value has its operands and readers.

    The local search prices a change so, on the same core around it before and after (eqsat.extract.refine): far
    from the change, the cut is the same on both sides and what it changes cancels."""
    terms = {value: graph[value] for value in region}
    readers = readers_of(terms, [root for root in roots if root in terms])
    entered = tuple(value for value in terms if value not in readers.of and value not in readers.outputs)
    g = LiveGraph(terms, readers, type_of, model, entered)
    term_cost = term_cost or _default_term_cost(g)
    return math.fsum(cycles for layer, cycles in _layers_priced(g, term_cost) if layer.value in core)


def priced(graph: Graph, model: CostModel) -> float:
    """What graph costs (graph_cost of its terms, each op configuration priced once)."""
    return priced_by_value(graph, model)[0]


def priced_by_value(graph: Graph, model: CostModel) -> tuple[float, dict[int, float]]:
    """What graph costs (as `priced`) and what each of its values' layers cost (as `value_costs`), from one
    formation of its layers."""
    types = {value: t for value, t in enumerate(graph.types) if t is not None}
    return _total_and_value_costs(LiveGraph.of(dict(enumerate(graph.terms)), graph.outputs, types.get, model), term_costs(model, types))
