"""The cost model: what one e-node costs on a target, in estimated inference cycles (Vela's `cycles_total`).

Rules never mention cost; this file alone decides extraction.

Per-node costs cannot see one context that matters: Vela 5.1 runs a RESHAPE
as a MemoryCopy instead of removing it when something else reads its input
(a graph output counts as a reader), whatever computes that input, another
RESHAPE included. Measured on both targets with hand-built TOSA graphs: a
reshape read by two CLAMPs, SLICEs or TRANSPOSEs is removed; a reshape whose
output a CLAMP (or a SLICE) and k RESHAPEs read is k copies, one per reshape
reader, also when that reshape reads another reshape (conformer-block, U85:
a (1, 32, 12, 8) reshape read by two reshapes, 3608 + 3608 cycles). Not
modelled: two chains of two reshapes that read one CLAMP are one copy, not
two. On the zoo: on tds-conv1d (U55) exactly the 3 of 14 reshapes this picks
were copies, 10552 of 102464 NPU cycles; on conformer-block,
emg-recurrent-decoder and shufflenet-v2 the reshapes read by several slices
or transposes were not.
`reshape_copies` prices that on a whole graph: the original one, and the
extracted one before the pass accepts it.

A second context: Ethos-U85 folds a TRANSPOSE into the output write of the
convolution in front of it (the layer is named after the transpose's output
and no layer is left for the convolution's own write; calibration measures
this on every target, `VelaCalibratedCost.folds_transpose_into_producer`).
It does so only when the transpose is the one reader of the convolution's
output. It folds a transpose of one pass into the MemoryCopy of a SLICE in
front of it in the same way. `folded_transposes` prices that: such a transpose costs nothing, and
the slice's copy that writes it is priced by its own calibration family
(`slice_transpose/int8`, measured on a grid of slices and one-pass permutations,
`transposing_slice_copies`). On
a small model whose conv output was also returned as it was, a rewrite that
gave that output a second reader cost +63% cycles_total on U85.

A third context: Vela runs an int8 TABLE as the activation of the op in
front of it (a `LUT` layer of 0 cycles) when that op is a RESCALE (alone, or
the output scaling of an ADD, MUL or convolution) or a TRANSPOSE, and the
TABLE is its one reader. In front of a CLAMP (itself an activation), a SLICE,
a graph input, or an op whose output has another reader, the TABLE runs as
its own layer. Measured the same on both targets (`fused_tables`); on
emg-gru-gesture all 51 TABLEs are fused.

A fourth: Vela folds a SLICE into the read of the op after it (a CLAMP, an
elementwise op, a RESCALE, a TABLE, a CONCAT, a convolution), but copies it
(a MemoryCopy of its output) when one of its readers is a TRANSPOSE, a SLICE
or a RESHAPE, or when it is a graph output; a RESHAPE that only adds or
drops leading 1s is the same tensor to Vela, and the slice is judged by that
reshape's readers. Measured the same on both targets (`slice_prices`); the slice family's fit, which per term averages
these contexts (303 cycles on Ethos-U55 for any slice), cannot tell them
apart: on emg-gru-gesture (U55) Vela copies 16 of its 64 slices (226 cycles
each) and folds the rest. A batched slice (leading dimensions beyond HWC) is
folded the same way, and copied one leading index at a time: measured on both
targets, a (1, 48, 2, 7, 8) slice read by a CONCAT, a CLAMP or a RESCALE has no
layer of its own, and read by a RESHAPE it is 48 MemoryCopy layers
(band-split-frontend); read by a convolution it is copied too (bandwise-mlp).

A fifth: an input RESCALE (per tensor, into int32) is fused by Vela into
the op that reads it, if that op is its only reader and one Vela fuses
into (ADD, SUB, MUL; on U55 an ADD or SUB only as the eighth context says).
When several ops read one, it runs
alone and its readers run without it: merging
every duplicate op of tds-conv1d, input rescales included, cost +18.8%
cycles_total on U55 (a shared (1, 64, 32) rescale: a 3072-cycle standalone
rescale, and its MUL reader 2560 + 2560 instead of 2048 fused: 6144 more;
the calibrated standalone int8 -> int32 rescale of that shape is 6282).
`shared_input_rescales` prices that standalone rescale. An op that reads one
input rescale on both operands (x * x, the variance of a layer norm) reads
it twice, which Vela treats as two readers: the rescale runs alone.
An input rescale also runs alone when the op reading it has a plain int32
operand (no input rescale writes it; `VelaCalibratedCost.input_rescale_beside_int32`):
on Ethos-U85 a layer of its own that computes the op too, which costs 0 (a
(1, 16) ADD: 101 cycles, a (1, 64, 32) one 3456, against 4 and 512 for the
ADD of two rescaled operands); on Ethos-U55 a rescale alone in front of the
op's own pass (a (1, 64, 32) MUL: 10752 cycles with its output rescale,
against 2048). `shared_input_rescales` prices it as well.

A sixth follows from it: a MUL whose input rescale runs alone keeps its
int32 inputs, and Vela cannot fuse its output RESCALE either, which then runs
alone too (`unfused_output_rescales`). Measured on both targets with
hand-built graphs (tests/extract/test_cost.py) and on the zoo: every layer
norm's x * x in tds-conv1d, conformer-block, attention-permute,
mobilevit-patch-attention, bandwise-mlp and emg-gru-gesture runs its input
and output rescales as layers of their own (on Ethos-U55 a (1, 64, 32)
square: 2560 + 2560 cycles, and 3072 for the rescale in front of it; on
Ethos-U85 1920 + 5632). On Ethos-U85 the output rescales of ADD and SUB stay
fused there, unless something else reads the op's int32 output too (another
op, another RESCALE, a graph output): then the ADD, SUB or MUL writes int32
and each output rescale reading it runs alone. Measured with hand-built
graphs: a (1, 64, 32) ADD costs 512 cycles on Ethos-U85 with its rescale
fused, and 512 + 5824 when the sum is also returned
(`vela_cost.OUTPUT_RESCALE_ALONE_BESIDE_READER`). On tds-conv1d (U85) a layer
norm's affine ADD is read by its output rescale and by the residual ADD: a
5824-cycle rescale that the model had priced fused. Ethos-U55 runs such an
ADD or SUB unfused, with all its rescales (the eighth context below).

A seventh: a RESHAPE of an int32 accumulator that alone reads its producer and
is read only by RESCALEs is removed, the RESCALE fused into the producer
(`removed_accumulator_reshapes`); with another reader of the producer it is
copied and the RESCALE runs alone, as the model prices int32 data movement.

An eighth, on Ethos-U55 (`VelaCalibratedCost.fuses_add_sub`): Vela fuses an
ADD or SUB with its input and output RESCALEs into one pass (3072 cycles for
(1, 64, 32)) only when both operands are input rescales that it alone reads,
one scaling by exactly 2^19 and the other by less (the pair the Arm backend
emits for inputs of different scales; inputs of equal scales get 2^19 twice),
and one output RESCALE alone reads its int32 output. Otherwise each of its
rescales runs as a layer of its own (16384 cycles: 3072 + 2560 per input
rescale, 2560 for the op, 2560 for its output rescale): a softmax's x - max(x),
whose operands share a scale, and a residual ADD whose int32 sum another ADD
also reads (tds-conv1d). `unfused_add_subs` finds them, and `rescales_alone`
prices their rescales with the others. Not modelled: an output RESCALE whose
scale is a power of two stays fused (the hand-built (1 << 30, 49) one).

A ninth: Vela runs a TRANSPOSE that alone reads a RESHAPE which only adds or
drops unit axes in the reshape's input shape (regor
`GraphIrOptimiser::CanonicaliseReshapeTransposePattern`), and its passes
follow that shape: behind a (4, 16, 256, 1) -> (4, 16, 256) reshape, a
(0, 2, 1) transpose is five passes (222452 cycles on Ethos-U85), not one
(12800); an Arm backend rank-5 permute/view test case came out 16.6% slower
for it (`transposes_behind_unit_reshapes`).

`graph_cost` is the one function that prices a graph: every live term once,
and these contexts. The pipeline's acceptance and the local search call it.

Only configurations (target, system config, memory mode, vela.ini) with a
calibration file of their own are priced (`cost_model_for`); any other is
refused with the command that calibrates it, so a report never states a cost
in a unit it does not have, nor in another configuration's.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Mapping, Protocol

from eqsat.configuration import Configuration
from eqsat.ir import Graph, TensorType, Term
from eqsat.extract import vela_cost
from eqsat.extract.greedy import reachable


class CostModel(Protocol):
    target: str
    unit: str
    folds_transpose_into_producer: bool

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

    def standalone_rescale(self, accumulator: TensorType | None) -> float:
        """The cost of an output RESCALE of the int32 accumulator run alone (not fused into the op writing it)."""

    def input_rescale_beside_int32(self, reader: Term, source: TensorType | None, out: TensorType | None) -> float:
        """The cost of an input RESCALE run alone because reader's other operand is a plain int32 tensor, and of
        whatever of reader Vela computes in that layer rather than in reader's own."""

    def output_rescale_beside_reader(self, accumulator: TensorType | None) -> float | None:
        """The cost of an output RESCALE of the int32 accumulator run alone because something else reads the
        accumulator too (None: the target's calibration prices it)."""

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
    if not path.exists():
        calibrated = ", ".join(c.describe() for c in vela_cost.calibrations())
        raise UncalibratedTargetError(
            f"no cost-model calibration for {configuration.describe()}: run `{configuration.calibrate_command()}` "
            f"(about 10 minutes on 2 cores; calibrated: {calibrated})"
        )
    data = json.loads(path.read_text())
    recorded = vela_cost.recorded_configuration(data)
    if recorded != configuration:
        raise UncalibratedTargetError(f"{path.name} calibrates {recorded.describe()}, not {configuration.describe()}: run `{configuration.calibrate_command()}`")
    model = vela_cost.VelaCalibratedCost(configuration.target, path=path, data=data)
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


@dataclass(frozen=True)
class Readers:
    """Who reads each value of a graph: `of[v]` the values whose terms read v, once per operand slot, in the
    graph's order (x * x reads x twice); `outputs` how many times the graph returns each value; `counts` the
    two added (values nothing reads are absent). Every context below reads it; a whole-graph evaluation builds
    it once (`readers_of`)."""

    of: dict[Hashable, list[Hashable]]
    outputs: Counter
    counts: dict[Hashable, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        counts = {value: len(reads) for value, reads in self.of.items()}
        for value, times in self.outputs.items():
            counts[value] = counts.get(value, 0) + times
        object.__setattr__(self, "counts", counts)

    def count(self, value: Hashable) -> int:
        """How many times value is read: once per operand slot that reads it, once per graph output."""
        return self.counts.get(value, 0)


def readers_of(graph: dict[Hashable, Term], roots: Iterable[Hashable]) -> Readers:
    """The Readers of graph, whose outputs are roots."""
    of: dict[Hashable, list[Hashable]] = {}
    for value, term in graph.items():
        for arg in term.args:
            if arg in of:
                of[arg].append(value)
            else:
                of[arg] = [value]
    return Readers(of, Counter(roots))


def copied_reshapes(graph: dict[Hashable, Term], readers: Readers) -> list[Hashable]:
    """The RESHAPEs of graph that Vela keeps as MemoryCopy (see the module docstring).

    graph maps each value to the term computing it (operands are values of graph or leaves); the graph
    outputs count among the readers.
    """
    return [value for value, term in graph.items() if term.op == "Reshape" and readers.count(term.args[0]) > 1]


def reshape_copies(
    graph: dict[Hashable, Term],
    readers: Readers,
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
) -> float:
    """What the RESHAPEs of graph that Vela keeps as MemoryCopy cost: each a copy of its input, in the input's shape
    (tds-conv1d, Ethos-U55: a (1, 64, 32) -> (1, 64, 4, 8) reshape is a 3608-cycle copy of the (1, 64, 32) tensor)."""
    return sum(model.memory_copy(type_of(graph[value].args[0])) for value in copied_reshapes(graph, readers))


def _is_input_rescale(term: Term, out: TensorType | None) -> bool:
    """A per-tensor RESCALE into int32: the input scaling of the ADD, SUB or MUL that reads it."""
    if term.op == "Rescale":
        return term.attrs[0] == "torch.int32" and len(term.attrs[1]) == 1
    return term.op == "Elementwise" and _opaque_name(term) == "RESCALE" and out is not None and out.dtype == "torch.int32"


def _is_output_rescale(term: Term, source: TensorType | None, out: TensorType | None) -> bool:
    """A per-tensor RESCALE from int32 to int8 or int16: the output scaling of the op in front of it."""
    narrow = vela_cost.dtype_name(source) == "int32" and vela_cost.dtype_name(out) in ("int8", "int16")
    if term.op == "Rescale":
        return narrow and len(term.attrs[1]) == 1
    return narrow and term.op == "Elementwise" and _opaque_name(term) == "RESCALE"


def _rescale_scale(term: Term) -> float | None:
    """The scale of a per-tensor `Rescale` term (its multiplier over 2^shift); None for an opaque RESCALE."""
    return term.attrs[1][0] / 2.0 ** term.attrs[2][0] if term.op == "Rescale" and len(term.attrs[1]) == 1 else None


def _behind_removed_reshapes(graph: dict[Hashable, Term], readers: Readers, value: Hashable) -> Hashable:
    """What an op reading value reads to Vela: the input of every RESHAPE in between that Vela removes (one whose
    input nothing else reads), so that an input RESCALE behind an int32 RESHAPE is still its reader's input rescale."""
    term = graph.get(value)
    while term is not None and term.op == "Reshape" and term.args and readers.count(term.args[0]) == 1:
        value = term.args[0]
        term = graph.get(value)
    return value


def _readers_behind_removed_reshapes(graph: dict[Hashable, Term], readers: Readers, value: Hashable) -> tuple[list[Hashable], int]:
    """The ops that read value to Vela, through the RESHAPEs it removes (value's one reader), and how many times value
    is read so (graph outputs included)."""
    reads, count = [], 0
    while True:  # along a chain of removed reshapes, each the one reader of the value before
        count += readers.outputs.get(value, 0)
        through = None
        for reader in readers.of.get(value, ()):
            term = graph.get(reader)
            if term is not None and term.op == "Reshape" and readers.count(value) == 1:
                through = reader
            else:
                reads.append(reader)
                count += 1
        if through is None:
            return reads, count
        value = through


def _is_read_once_input_rescale(
    graph: dict[Hashable, Term], readers: Readers, type_of: Callable[[Hashable], TensorType | None], value: Hashable
) -> bool:
    """value is an input RESCALE that one op reads once, through the RESHAPEs Vela removes: one Vela can fuse."""
    return value in graph and _is_input_rescale(graph[value], type_of(value)) and _readers_behind_removed_reshapes(graph, readers, value)[1] == 1


def unfused_add_subs(
    graph: dict[Hashable, Term],
    readers: Readers,
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
) -> set[Hashable]:
    """The ADDs and SUBs of graph that Vela runs as passes of their own, their input and output RESCALEs as layers of
    their own (`fuses_add_sub`, see the module docstring): on Ethos-U55, one whose operands are not both input RESCALEs
    that it alone reads, with the scales of the Arm backend's pair, or whose int32 output is not read by one output
    RESCALE alone."""
    found = set()
    for value, term in graph.items():
        if term.op != "Elementwise" or _opaque_name(term) not in ("ADD", "SUB"):
            continue
        operands = [_behind_removed_reshapes(graph, readers, a) for a in term.args]
        rescaled_alone = all(_is_read_once_input_rescale(graph, readers, type_of, a) for a in operands)
        reads = readers.of.get(value, ())
        output_rescaled_alone = readers.count(value) == 1 and len(reads) == 1 and _is_output_rescale(graph[reads[0]], type_of(value), type_of(reads[0]))
        if not model.fuses_add_sub(tuple(_rescale_scale(graph[a]) for a in operands) if rescaled_alone else None, output_rescaled_alone):
            found.add(value)
    return found


def shared_input_rescales(
    graph: dict[Hashable, Term],
    readers: Readers,
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    unfused: set[Hashable] = frozenset(),
) -> dict[Hashable, float]:
    """What each input RESCALE of graph that Vela runs alone costs on top of its price (see the module docstring).

    Vela fuses an input RESCALE into the ADD, SUB or MUL that reads it, when that op is its only reader and
    the target fuses into that op (`fuses_input_rescale_into`); a shared one runs alone: priced as the
    standalone RESCALE it becomes, when one of its readers would have fused it. One whose reader's other
    operand is a plain int32 tensor runs alone too (`input_rescale_beside_int32`): an operand is plain unless it
    is an input rescale that Vela fuses (read once), behind any RESHAPEs Vela removes. A rescale shared by two MULs
    (a scalar's, which the e-graph shares once a reshape moves in front of it) leaves each MUL a plain int32 operand
    (Ethos-U85, (1, 4, 32, 12): 86 cycles for the shared rescale, 3008 + 5664 per MUL for the other input and
    output rescales, against 384 per MUL with a rescale each). One read by an ADD or SUB that Vela runs unfused
    (unfused, from `unfused_add_subs`) runs alone as well.
    """

    def fusing(reader) -> bool:
        term = graph.get(reader)
        return term is not None and term.op == "Elementwise" and model.fuses_input_rescale_into(_opaque_name(term))

    def fused_operand(value: Hashable) -> bool:
        return _is_read_once_input_rescale(graph, readers, type_of, _behind_removed_reshapes(graph, readers, value))

    prices = {}
    for value, term in graph.items():  # in the graph's order, so that the sum of the prices is the same every run
        if term.op not in ("Rescale", "Elementwise"):  # the ops _is_input_rescale accepts
            continue
        count = readers.count(value)
        if not count or not _is_input_rescale(term, type_of(value)):
            continue
        reads, count = _readers_behind_removed_reshapes(graph, readers, value)
        if count > 1:
            if any(map(fusing, reads)):
                prices[value] = model.standalone_input_rescale(type_of(term.args[0]), type_of(value))
        elif reads and fusing(reads[0]):
            if not all(map(fused_operand, graph[reads[0]].args)):
                prices[value] = model.input_rescale_beside_int32(graph[reads[0]], type_of(term.args[0]), type_of(value))
            elif reads[0] in unfused:
                prices[value] = model.standalone_input_rescale(type_of(term.args[0]), type_of(value))
    return prices


OUTPUT_RESCALE_PRODUCERS = frozenset({"ADD", "SUB", "MUL"})
"""The int32 producers whose output RESCALE is priced as run alone when something else reads their output too, as
measured. A REDUCE_SUM's runs alone too (Ethos-U85: a (1, 64, 32) -> (1, 64, 1) sum costs 652 cycles, and 652 + 240),
but the standalone rescale fit prices that (1, 64, 1) rescale at about 1900 cycles, further from Vela than 0."""


def unfused_output_rescales(
    graph: dict[Hashable, Term],
    readers: Readers,
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    standalone_inputs: Iterable[Hashable],
    unfused: set[Hashable] = frozenset(),
) -> dict[Hashable, float]:
    """What each output RESCALE that Vela runs alone costs on top of its price (see the module docstring), priced as
    the standalone int32 RESCALE it becomes: that of a MUL that reads a standalone input rescale (the MUL keeps int32
    inputs), of an ADD or SUB that Vela runs unfused (unfused, from `unfused_add_subs`), and of an ADD, SUB or MUL
    whose int32 output has another reader, where the target says so (`output_rescale_beside_reader`)."""
    standalone = set(standalone_inputs)
    unfused_ops = set(unfused) | {
        value
        for value, term in graph.items()
        if term.op == "Elementwise"
        and _opaque_name(term) == "MUL"
        and standalone.intersection(_behind_removed_reshapes(graph, readers, arg) for arg in term.args)
    }
    prices = {}
    for value, term in graph.items():
        if term.op not in ("Rescale", "Elementwise"):  # the ops _is_output_rescale accepts
            continue
        producer = graph.get(term.args[0]) if term.args else None
        if producer is None or not _is_output_rescale(term, type_of(term.args[0]), type_of(value)):
            continue
        if term.args[0] in unfused_ops:
            prices[value] = model.standalone_rescale(type_of(term.args[0]))
        elif producer.op == "Elementwise" and _opaque_name(producer) in OUTPUT_RESCALE_PRODUCERS and readers.count(term.args[0]) > 1:
            price = model.output_rescale_beside_reader(type_of(term.args[0]))
            if price is not None:
                prices[value] = price
    return prices


def rescales_alone(
    graph: dict[Hashable, Term],
    readers: Readers,
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
) -> dict[Hashable, float]:
    """What each RESCALE of graph that Vela runs as a layer of its own costs on top of its price: the input rescales
    (`shared_input_rescales`) and the output rescales (`unfused_output_rescales`), with the ADDs and SUBs run unfused
    (`unfused_add_subs`)."""
    unfused = unfused_add_subs(graph, readers, type_of, model)
    inputs = shared_input_rescales(graph, readers, type_of, model, unfused)
    return {**inputs, **unfused_output_rescales(graph, readers, type_of, model, inputs, unfused)}


FOLDED_PERMUTATIONS = frozenset({(0, 3, 1, 2)})
"""The transposes calibration saw folded: a CONV2D's NHWC output written as NCHW (ctx_transpose_conv).
Others are not assumed folded: taking a MATMUL's output or a rank-3 transpose for free cost
attention-permute a 12.8% win on Ethos-U85 that Vela measured."""


def _opaque_name(term: Term) -> str:
    key = term.attrs[0] if term.attrs and isinstance(term.attrs[0], str) else ""
    return vela_cost.short_op_name(key.partition("#")[0])


def _is_convolution_output(graph: dict[Hashable, Term], value: Hashable) -> bool:
    """value is a convolution's output, after its per-channel output RESCALE if it has one."""
    term = graph.get(value)
    if term is None:
        return False
    if (term.op == "Rescale" and len(term.attrs[1]) > 1) or (term.op == "Opaque" and _opaque_name(term) == "RESCALE"):
        term = graph.get(term.args[0]) if term.args else None
    return term is not None and term.op == "Opaque" and _opaque_name(term) in ("CONV2D", "convolution")


def _copied_slice_output(graph: dict[Hashable, Term], value: Hashable, perm: tuple[int, ...], type_of, model: CostModel) -> bool:
    """value is an int8/int16 SLICE's output (which Vela copies for a TRANSPOSE reader) that the transpose
    by perm moves in one pass: the copy writes it transposed."""
    term, out = graph.get(value), type_of(value)
    return (
        term is not None
        and term.op == "Slice"
        and out is not None
        and not vela_cost.is_batched(out)
        and vela_cost.dtype_name(out) in ("int8", "int16")
        and len(vela_cost.transpose_passes(tuple(out.shape), perm, vela_cost.target_family(model.target))) == 1
    )


def folded_transposes(
    graph: dict[Hashable, Term], readers: Readers, model: CostModel, type_of: Callable[[Hashable], TensorType | None]
) -> list[Hashable]:
    """The TRANSPOSEs of graph that Vela folds into the write of the op in front of them.

    On a target that folds, a transpose is folded when it is the one reader of its operand, that operand
    is not a graph output, and it is either a CONV2D's output (after its output RESCALE) written NHWC ->
    NCHW, or a SLICE's output (which Vela copies for a transpose reader) that the transpose moves in one
    pass: measured on Ethos-U85 for rank-2 to rank-4 single-pass permutations (0 cycles for the
    transpose; the copy then costs `transposing_slice_copies`), not for a transpose of several passes
    nor a batched slice.
    """
    if not model.folds_transpose_into_producer:
        return []
    return [
        value
        for value, term in graph.items()
        if term.op == "Transpose"
        and readers.count(term.args[0]) == 1
        and (
            (tuple(term.attrs[0]) in FOLDED_PERMUTATIONS and _is_convolution_output(graph, term.args[0]))
            or _copied_slice_output(graph, term.args[0], tuple(term.attrs[0]), type_of, model)
        )
    ]


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """shape without its unit axes (regor Squeeze, compiler/shape_util.hpp)."""
    return tuple(d for d in shape if d != 1)


def permutation_before_unit_reshape(before: tuple[int, ...], after: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation of shape `before` that moves its non-unit axes as perm moves them in shape `after`
    (the same axes less or more unit ones), its unit axes left in place (regor
    RecalculatePermutationForNonUnitAxes, compiler/graphir_optimiser.cpp)."""
    non_unit_before = [i for i, d in enumerate(before) if d != 1]
    rank_after = {axis: r for r, axis in enumerate(i for i, d in enumerate(after) if d != 1)}
    moved = iter(non_unit_before[rank_after[p]] for p in perm if p in rank_after)
    return tuple(i if d == 1 else next(moved) for i, d in enumerate(before))


def transposes_behind_unit_reshapes(
    graph: dict[Hashable, Term], readers: Readers, type_of: Callable[[Hashable], TensorType | None], model: CostModel
) -> dict[Hashable, float]:
    """What each TRANSPOSE costs that Vela runs in the shape in front of the RESHAPE it reads.

    regor's GraphIrOptimiser::CanonicaliseReshapeTransposePattern (compiler/graphir_optimiser.cpp), before any
    reshape is removed: a RESHAPE that only adds or drops unit axes (equal `squeezed` shapes), whose output one
    TRANSPOSE alone reads (`IsSinglePath`), is moved behind the transpose, and the transpose runs on the
    reshape's input with its permutation recalculated (`permutation_before_unit_reshape`). Its passes follow
    that shape: a (4, 16, 256) transpose by (0, 2, 1) is one pass on Ethos-U85 (12800 cycles), behind a
    (4, 16, 256, 1) -> (4, 16, 256) reshape it is five passes of (4, 16, 256, 1) by (0, 2, 1, 3) (222452 cycles,
    tests/extract/test_cost.py).
    """
    prices = {}
    for value, term in graph.items():
        if term.op != "Transpose" or not term.args:
            continue
        reshape = graph.get(term.args[0])
        if reshape is None or reshape.op != "Reshape" or readers.count(term.args[0]) != 1:
            continue
        source, reshaped = type_of(reshape.args[0]), type_of(term.args[0])
        if source is None or reshaped is None or squeezed(source.shape) != squeezed(reshaped.shape) or source.shape == reshaped.shape:
            continue
        perm = permutation_before_unit_reshape(tuple(source.shape), tuple(reshaped.shape), tuple(term.attrs[0]))
        prices[value] = model.cost(Term("Transpose", (reshape.args[0],), (perm,)), type_of(value), [source])
    return prices


def _is_rescale(term: Term | None) -> bool:
    return term is not None and (term.op == "Rescale" or (term.op in ("Opaque", "Elementwise") and _opaque_name(term) == "RESCALE"))


ACCUMULATING_OPS = frozenset({"Opaque", "Elementwise"})
"""The terms that write an int32 accumulator themselves (a CONV2D, a MATMUL, an ADD, SUB or MUL), not data movement:
a reshape behind an int32 SLICE is copied along with the slice (conformer-block, Ethos-U55: 4448 cycles of copy and
a standalone RESCALE)."""


def removed_accumulator_reshapes(
    graph: dict[Hashable, Term], readers: Readers, type_of: Callable[[Hashable], TensorType | None]
) -> list[Hashable]:
    """The int32 RESHAPEs of graph that Vela removes between an accumulating producer and its output RESCALE.

    A reshape of an int32 tensor is priced as a standalone RESCALE and a MemoryCopy (`VelaCalibratedCost.cost`),
    but when it alone reads the output of an accumulating op (ACCUMULATING_OPS) and only RESCALEs read it, Vela removes it and
    fuses the RESCALE into the producer: measured on both targets for an ADD (1, 8, 16, 8) -> (8, 1, 16, 8) and
    a CONV2D whose output is reshaped to rank 3 or to another channel count, per-tensor or per-channel
    (0 cycles for the reshape, the producer's layer unchanged; bandwise-mlp's one such reshape). A chain of such
    reshapes, each the one reader of the one before, is removed whole: (1, 8, 16, 8) -> (1, 128, 8) -> (128, 8)
    behind an ADD or a CONV2D costs nothing on Ethos-U85.
    """
    outputs, readers = readers.outputs, readers.of

    def int32_reshape(value: Hashable) -> bool:
        return value in graph and graph[value].op == "Reshape" and value not in outputs and vela_cost.dtype_name(type_of(value)) == "int32"

    def removed(value: Hashable) -> bool:
        first = value
        while int32_reshape(graph[first].args[0]) and readers.get(graph[first].args[0]) == [first]:
            first = graph[first].args[0]
        producer = graph[first].args[0]
        last = value
        while len(readers.get(last, [])) == 1 and int32_reshape(readers[last][0]):
            last = readers[last][0]
        return (
            producer in graph
            and graph[producer].op in ACCUMULATING_OPS
            and bool(graph[producer].args)
            and producer not in outputs
            and readers.get(producer) == [first]
            and bool(readers.get(last))
            and all(_is_rescale(graph[r]) for r in readers[last])
        )

    return [value for value, term in graph.items() if term.op == "Reshape" and int32_reshape(value) and removed(value)]


def transposing_slice_copies(
    graph: dict[Hashable, Term], folded: Iterable[Hashable], type_of: Callable[[Hashable], TensorType | None], model: CostModel
) -> dict[Hashable, float]:
    """What the SLICE copy costs that writes a folded transpose (`folded_transposes`) in front of it, as calibrated
    (`folded_transpose_copy`): neither the plain copy nor the transpose alone (a (1, 16, 16, 32) slice transposed
    by (0, 3, 1, 2) on Ethos-U85: 4272 cycles, the plain copy's fit 7752). Without that calibration, the plain copy."""
    prices = {}
    for value in folded:
        source = graph[value].args[0]
        sliced = type_of(source)
        if graph.get(source) is not None and graph[source].op == "Slice" and sliced is not None:
            price = model.folded_transpose_copy(sliced, tuple(graph[value].attrs[0]))
            if price is not None:
                prices[source] = price
    return prices


TABLE_FUSING_PRODUCERS = frozenset({"Rescale", "Transpose"})
"""The ops whose output write Vela fuses an int8 TABLE into, as measured (see the module docstring);
an opaque RESCALE counts as a Rescale."""


def _fuses_table(term: Term | None) -> bool:
    return term is not None and (term.op in TABLE_FUSING_PRODUCERS or (term.op in ("Opaque", "Elementwise") and _opaque_name(term) == "RESCALE"))


def fused_tables(
    graph: dict[Hashable, Term], readers: Readers, type_of: Callable[[Hashable], TensorType | None]
) -> list[Hashable]:
    """The int8 TABLEs of graph that Vela runs as the activation of the op in front of them, at 0 cycles:
    the TABLE is the one reader of a RESCALE's or TRANSPOSE's output that is not a graph output."""
    return [
        value
        for value, term in graph.items()
        if term.op == "Table"
        and vela_cost.dtype_name(type_of(term.args[0])) == "int8"
        and readers.count(term.args[0]) == 1
        and _fuses_table(graph.get(term.args[0]))
    ]


SLICE_COPYING_READERS = frozenset({"Transpose", "Slice", "Reshape"})
"""The readers Vela cannot fold a SLICE into, as measured (see the module docstring)."""


BATCHED_SLICE_FOLDING_READERS = frozenset({"Concat", "Elementwise", "Rescale"})
"""The readers Vela folds a batched SLICE (leading dimensions beyond HWC) into, as measured: a CONCAT, a CLAMP,
a RESCALE; it copies one read by a convolution (bandwise-mlp: an (8, 1, 1, 8) slice read by a CONV2D, 8 copies)."""


def _drops_unit_dims_only(source: TensorType | None, target: TensorType | None) -> bool:
    """A reshape that only adds or drops leading 1s: the same tensor in Vela's padded 4-D shapes."""

    def core(t: TensorType) -> tuple[int, ...]:
        dims = list(t.shape)
        while dims and dims[0] == 1:
            dims.pop(0)
        return tuple(dims)

    return source is not None and target is not None and core(source) == core(target)


def slice_prices(
    graph: dict[Hashable, Term], readers: Readers, type_of: Callable[[Hashable], TensorType | None], model: CostModel
) -> dict[Hashable, float]:
    """What each int8/int16 SLICE of graph costs in its context: a MemoryCopy of its output if a reader
    cannot read through it (or it is a graph output), else 0. A RESHAPE that only adds or drops leading
    1s is seen through (its readers read the slice). A batched slice (leading dimensions beyond HWC) is
    folded only into BATCHED_SLICE_FOLDING_READERS, and copied one leading index at a time (`batched_copies`);
    int32 ones keep the model's price."""

    def copied(value: Hashable, batched: bool) -> bool:
        if readers.outputs.get(value):
            return True
        for reader in readers.of.get(value, ()):
            term = graph[reader]
            if term.args[0] != value:  # the copying readers read the slice as their first operand
                continue
            if term.op == "Reshape" and _drops_unit_dims_only(type_of(value), type_of(reader)):
                if copied(reader, batched):
                    return True
            elif term.op in SLICE_COPYING_READERS or (batched and term.op not in BATCHED_SLICE_FOLDING_READERS):
                return True
        return False

    prices = {}
    for value, term in graph.items():
        out = type_of(value)
        if term.op != "Slice" or out is None or vela_cost.dtype_name(out) not in ("int8", "int16"):
            continue
        prices[value] = model.batched_copies(out) if copied(value, vela_cost.is_batched(out)) else 0.0
    return prices


CONCAT_IN_PLACE_PRODUCERS = frozenset({"Opaque", "Elementwise", "Rescale", "Table", "Reduce"})
"""The ops that Vela lets write their output straight into a concat's output, as measured: a convolution, a RESIZE, a
CLAMP, a RESCALE. A TRANSPOSE, a SLICE, a CONCAT, a RESHAPE and a graph input are copied."""


def concat_prices(
    graph: dict[Hashable, Term], readers: Readers, type_of: Callable[[Hashable], TensorType | None], model: CostModel
) -> dict[Hashable, float]:
    """What each int8/int16 CONCAT of graph costs in its context: a MemoryCopy of each input that its producer cannot
    write in place, as Vela does. An input is written in place when a CONCAT_IN_PLACE_PRODUCERS op computes it, the
    concat is its one reader, it is not a graph output and it is not batched; behind a RESHAPE it is copied, even one
    that only drops a leading 1 (emg-branch-fusion: two (1, 1, 32, k) -> (1, 32, k) inputs, 500 and 936 cycles).
    Measured the same on both targets: two 1x1 convolutions concatenated along any axis cost nothing more;
    an input that is also returned, is a graph input, or comes from a TRANSPOSE, SLICE or CONCAT costs one
    MemoryCopy (unet-skip, Ethos-U55: a RESIZE written in place, the shared skip connection copied, 4480 cycles;
    the concat family's fit, 13932, averages over contexts). A batched output changes nothing for its unbatched
    inputs: eight (1, 1, 1, 16) RESCALE or CLAMP outputs stacked into (8, 1, 1, 16) are written in place, eight
    RESHAPEs of them are 8 copies (emg-gru-gesture's stacked GRU states). A RESCALE behind a RESHAPE is copied too, also
    when Vela removes that reshape and fuses the RESCALE into the convolution in front of it (emg-branch-fusion, Ethos-U85:
    (1, 1, 32, k) int32 -> (1, 32, k) -> RESCALE -> CONCAT, 337 and 370 cycles). A batched input (leading dimensions beyond
    HWC) is copied one leading index at a time whatever computes it (`batched_copies`): two (2, 4, 4, 16) CLAMP
    outputs concatenated along any axis are 4 copies. int32 concats keep the model's price."""

    def in_place(value: Hashable, part: TensorType) -> bool:
        term = graph.get(value)
        return (
            term is not None
            and term.op in CONCAT_IN_PLACE_PRODUCERS
            and bool(term.args)
            and readers.count(value) == 1
            and not readers.outputs.get(value)
            and not vela_cost.is_batched(part)
            and not (_is_rescale(term) and graph.get(term.args[0]) is not None and graph[term.args[0]].op == "Reshape")
        )

    prices = {}
    for value, term in graph.items():
        if term.op != "Concat":
            continue
        parts = [type_of(a) for a in term.args]
        if any(t is None for t in (type_of(value), *parts)) or vela_cost.dtype_name(type_of(value)) not in ("int8", "int16"):
            continue
        prices[value] = sum(model.batched_copies(t) for a, t in zip(term.args, parts) if not in_place(a, t))
    return prices


def _contexts(
    graph: dict[Hashable, Term],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None,
) -> tuple[dict[Hashable, Term], Readers, Callable[[Hashable, Term], float], set, dict[Hashable, float], dict[Hashable, float]]:
    """The terms the roots read, their readers, the term pricer (the model's cost with the types of type_of by default), and the
    contexts Vela prices differently: the values that cost nothing, the prices of slices and concats in their context,
    the extra cost of the rescales Vela runs alone (`rescales_alone`)."""
    if term_cost is None:
        term_cost = lambda value, term: model.cost(term, type_of(value), [type_of(a) for a in term.args])  # noqa: E731
    live = {value: graph[value] for value in reachable(graph, roots)}
    readers = readers_of(live, roots)
    folded = folded_transposes(live, readers, model, type_of)
    free = {*folded, *fused_tables(live, readers, type_of), *removed_accumulator_reshapes(live, readers, type_of)}
    in_context = slice_prices(live, readers, type_of, model) | transposing_slice_copies(live, folded, type_of, model)
    in_context |= {v: price for v, price in transposes_behind_unit_reshapes(live, readers, type_of, model).items() if v not in free}
    in_context |= concat_prices(live, readers, type_of, model)
    return live, readers, term_cost, free, in_context, rescales_alone(live, readers, type_of, model)


def value_costs(
    graph: dict[Hashable, Term],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None = None,
) -> dict[Hashable, float]:
    """What each value that the roots read costs, in the contexts Vela prices differently (reshapes kept
    as copies or removed between an accumulator and its RESCALE, transposes folded into their producer,
    TABLEs fused into theirs, slices folded or copied, concat inputs written in place or copied, input rescales
    read more than once and the output rescales of the MULs that read them).

    graph maps each value to the term computing it (every operand is a value of graph); roots are
    the graph outputs. term_cost(value, term) defaults to the model's cost with the types of type_of.
    """
    live, readers, term_cost, free, in_context, shared = _contexts(graph, roots, type_of, model, term_cost)
    costs = {value: 0.0 if value in free else term_cost(value, term) for value, term in live.items()}
    costs.update(in_context)
    for value, extra in shared.items():
        costs[value] += extra
    for value in copied_reshapes(live, readers):
        costs[value] += model.memory_copy(type_of(live[value].args[0]))
    return costs


def graph_cost(
    graph: dict[Hashable, Term],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None = None,
) -> float:
    """What a graph costs: every term that the roots read, once, in the contexts Vela prices differently
    (the sum of value_costs; the reshape copies added last).
    """
    live, readers, term_cost, free, in_context, shared = _contexts(graph, roots, type_of, model, term_cost)
    total = sum(term_cost(value, term) for value, term in live.items() if value not in free and value not in in_context)
    return total + sum(in_context.values()) + sum(shared.values()) + reshape_copies(live, readers, type_of, model)


def priced(graph: Graph, model: CostModel) -> float:
    """What graph costs (graph_cost of its terms, each op configuration priced once)."""
    types = {value: t for value, t in enumerate(graph.types) if t is not None}
    return graph_cost(dict(enumerate(graph.terms)), graph.outputs, types.get, model, term_costs(model, types))
