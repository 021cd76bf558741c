"""Layer formation: the layers Vela runs for a candidate graph.

Vela does not run a TOSA graph op by op. Its graph optimiser (regor
compiler/graphir_optimiser.cpp) removes reshapes, turns slices and concats into
MemoryCopy ops and moves those copies into the ops around them, and fuses
RESCALEs into their producers or consumers; its scheduler
(compiler/scheduler_packing.cpp, `SchedulerPacking::PackOperations`) then packs
an activation (a CLAMP or a TABLE) or, on Ethos-U85, a TRANSPOSE into the op in
front of it. What a graph costs is what these layers cost, so the cost model
prices layers, not ops: `form_layers` turns a candidate graph into the layers
Vela would run, and `eqsat.extract.cost.layer_cycles` prices each one.

Each decision is one function below. Its docstring cites the regor function
whose condition it follows and what was measured with hand-built graphs
(tests/extract/test_layers.py checks each against Vela, where it applies and
where it does not). Every op that no decision touches runs as a layer of its
own (`LayerKind.OP`), priced from its term as calibrated (eqsat.extract.vela_cost).

A layer that a decision adds beside an op's own layer (a RESCALE that runs
alone) is priced as what Vela's layer costs beyond the op's calibrated share:
the RESCALE families are fitted jointly on whole blocks (eqsat/calibration/fit.py),
where the share of a fused rescale is what its term costs.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Callable, Hashable, Iterable, NamedTuple

from eqsat.ir import TensorType, Term, op_of
from eqsat.extract import vela_cost
from eqsat.extract.greedy import reachable

if TYPE_CHECKING:
    from eqsat.extract.cost import CostModel


class LayerKind(StrEnum):
    """What a layer of Vela's runs; `eqsat.extract.cost.layer_cycles` prices each kind."""

    OP = "op"
    """The op's own layer (or chain of passes), priced from its term."""
    TRANSPOSE_IN_SHAPE = "transpose in another shape"
    """A TRANSPOSE run in another input shape or permutation (moved in front of a reshape, merged with another);
    args: (the permutation, the input's type)."""
    RESHAPE_COPY = "reshape copy"
    """A MemoryCopy of a RESHAPE's input; args: (the input's type,)."""
    COPY = "copy"
    """A MemoryCopy of a SLICE's output or of a CONCAT input, one per leading index beyond HWC; args: (its type,)."""
    TRANSPOSING_COPY = "transposing copy"
    """A SLICE's MemoryCopy that also writes the TRANSPOSE behind it; args: (the slice's type, the permutation)."""
    ELEMENTWISE_PASS = "elementwise pass"
    """An ADD, SUB or MUL run as an elementwise pass of its own (Ethos-U55); args: (whether it reads int32 operands,
    whether a CLAMP is fused into it)."""
    INPUT_RESCALE_ALONE = "input rescale alone"
    """An input RESCALE (into int32) that no op fuses; args: (its source type, its type)."""
    INPUT_RESCALE_BESIDE_INT32 = "input rescale beside int32"
    """An input RESCALE whose reader's other operand is a plain int32 tensor; args: (the reader's term, source type, type)."""
    OUTPUT_RESCALE_ALONE = "output rescale alone"
    """An output RESCALE (from int32) that no producer fuses; args: (the int32 accumulator's type,)."""
    CHAINED_OP = "chained op"
    """An ADD, SUB or MUL chained into a convolution's op group (Ethos-U85): what it adds to the convolution's
    layer; args: (the convolution's value, whether its input and the group's output are in brick format)."""
    BOUNDARY_TRANSPOSE = "boundary transpose"
    """A TRANSPOSE that reads a graph input or writes a graph output, that side in NHWC; args: (whether it reads
    brick format, whether it writes it)."""
    CLAMP_ALONE = "clamp alone"
    """A CLAMP that no op fuses as its activation, run as a 1x1 pooling; args: (its type, whether it reads and whether
    it writes brick format: not a graph input, not a graph output)."""
    REDUCE_TRANSPOSE = "reduce transpose"
    """The TRANSPOSE regor puts in front of a REDUCE_SUM over another axis than the innermost; args: (its 3D input's
    type, whether it reads brick format, whether it writes it)."""
    REDUCE_OVER_CHANNELS = "reduce over channels"
    """That REDUCE_SUM, run over the innermost axis of the transposed 3D tensor; args: (that tensor's type, the
    output's type)."""
    CONVOLUTION = "convolution"
    """A CONV2D or DEPTHWISE_CONV2D (Ethos-U85) whose input or written output is stored in NHWC; args: (whether
    each is in brick format,)."""
    TRANSPOSED_WRITE = "transposed write"
    """A TRANSPOSE fused into a convolution's op group (Ethos-U85): what writing the convolution's output so
    transposed adds to its layer; args: (the convolution's value, the permutation of its height, width and channels,
    whether its input and the transposed output are in brick format)."""


class Layer(NamedTuple):
    value: Hashable
    """The value whose op the layer runs or copies (Vela names most layers after the tensor they write)."""
    kind: LayerKind
    args: tuple = ()
    """What the layer's price reads beyond the value's own term (see LayerKind)."""


@dataclass(frozen=True)
class Readers:
    """Who reads each value of a graph: `of[v]` the values whose terms read v, once per operand slot, in the
    graph's order (x * x reads x twice); `outputs` how many times the graph returns each value; `counts` the
    two added (values nothing reads are absent)."""

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


@dataclass(frozen=True)
class LiveGraph:
    """What every decision reads: the terms the graph outputs read (each value to the term computing it; operands are
    values of it or leaves), who reads them, their types, and the target's cost model (for what the target fuses)."""

    terms: dict[Hashable, Term]
    readers: Readers
    type_of: Callable[[Hashable], TensorType | None]
    model: CostModel
    entered_from_outside: tuple[Hashable, ...] = ()
    """In a region of a larger graph (`eqsat.extract.cost.region_cost`): its values that only the rest of the graph
    reads, where a traversal from the graph outputs enters it (`_canonicalised_transposes`)."""

    @classmethod
    def of(cls, graph: dict[Hashable, Term], roots: list[Hashable], type_of: Callable[[Hashable], TensorType | None], model: CostModel) -> LiveGraph:
        """The part of graph that roots read."""
        live = {value: graph[value] for value in reachable(graph, roots)}
        return cls(live, readers_of(live, roots), type_of, model)


# ---------------------------------------------------------------- helpers the decisions share


def opaque_name(term: Term) -> str:
    """The short TOSA name of an opaque or elementwise term's op ("" for other terms)."""
    key = term.attrs[0] if term.attrs and isinstance(term.attrs[0], str) else ""
    return vela_cost.short_op_name(op_of(key))


def is_rescale(term: Term | None) -> bool:
    return term is not None and (term.op == "Rescale" or (term.op in ("Opaque", "Elementwise") and opaque_name(term) == "RESCALE"))


def is_input_rescale(term: Term, out: TensorType | None) -> bool:
    """A per-tensor RESCALE into int32: the input scaling of the ADD, SUB or MUL that reads it."""
    if term.op == "Rescale":
        return term.attrs[0] == "torch.int32" and len(term.attrs[1]) == 1
    return term.op == "Elementwise" and opaque_name(term) == "RESCALE" and out is not None and out.dtype == "torch.int32"


def is_output_rescale(term: Term, source: TensorType | None, out: TensorType | None) -> bool:
    """A per-tensor RESCALE from int32 to int8 or int16: the output scaling of the op in front of it."""
    narrow = vela_cost.dtype_name(source) == "int32" and vela_cost.dtype_name(out) in ("int8", "int16")
    if term.op == "Rescale":
        return narrow and len(term.attrs[1]) == 1
    return narrow and term.op == "Elementwise" and opaque_name(term) == "RESCALE"


def rescale_scale(term: Term) -> float | None:
    """The scale of a per-tensor `Rescale` term (its multiplier over 2^shift); None for an opaque RESCALE."""
    return term.attrs[1][0] / 2.0 ** term.attrs[2][0] if term.op == "Rescale" and len(term.attrs[1]) == 1 else None


def behind_removed_reshapes(g: LiveGraph, value: Hashable) -> Hashable:
    """What an op reading value reads to Vela: the input of every RESHAPE in between that Vela removes (one whose
    input nothing else reads), so that an input RESCALE behind an int32 RESHAPE is still its reader's input rescale."""
    term = g.terms.get(value)
    while term is not None and term.op == "Reshape" and term.args and g.readers.count(term.args[0]) == 1:
        value = term.args[0]
        term = g.terms.get(value)
    return value


def readers_behind_removed_reshapes(g: LiveGraph, value: Hashable) -> tuple[list[Hashable], int]:
    """The ops that read value to Vela, through the RESHAPEs it removes (value's one reader), and how many times value
    is read so (graph outputs included)."""
    reads, count = [], 0
    while True:  # along a chain of removed reshapes, each the one reader of the value before
        count += g.readers.outputs.get(value, 0)
        through = None
        for reader in g.readers.of.get(value, ()):
            term = g.terms.get(reader)
            if term is not None and term.op == "Reshape" and g.readers.count(value) == 1:
                through = reader
            else:
                reads.append(reader)
                count += 1
        if through is None:
            return reads, count
        value = through


def is_read_once_input_rescale(g: LiveGraph, value: Hashable) -> bool:
    """value is an input RESCALE that one op reads once, through the RESHAPEs Vela removes: one Vela can fuse."""
    return value in g.terms and is_input_rescale(g.terms[value], g.type_of(value)) and readers_behind_removed_reshapes(g, value)[1] == 1


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """shape without its unit axes (regor Squeeze, compiler/shape_util.hpp)."""
    return tuple(d for d in shape if d != 1)


def drops_leading_ones_only(source: TensorType | None, target: TensorType | None) -> bool:
    """A reshape that only adds or drops leading 1s: the same tensor in Vela's padded 4-D shapes."""

    def core(t: TensorType) -> tuple[int, ...]:
        dims = list(t.shape)
        while dims and dims[0] == 1:
            dims.pop(0)
        return tuple(dims)

    return source is not None and target is not None and core(source) == core(target)


# ---------------------------------------------------------------- reshapes


def copied_reshapes(g: LiveGraph) -> list[Hashable]:
    """The RESHAPEs that Vela runs as a MemoryCopy of their input rather than removing them.

    regor `GraphIrOptimiser::RemoveReshape` (compiler/graphir_optimiser.cpp) inserts a copy in front of a reshape
    whose input has more than one reader op (and another storage shape, which a reshape that is not the identity
    always has), whatever computes that input (another RESHAPE included), or whose input is a graph input, a graph
    output or a constant while its output is a graph output. A graph output is not a reader: a CLAMP's (1, 64, 32) output that is returned and reshaped to (1, 64, 4, 8) for
    another CLAMP is not copied (Vela 5.1 runs the two CLAMPs alone on both targets). Measured on both targets: a
    reshape read by two CLAMPs, SLICEs or TRANSPOSEs is removed; one whose input a CLAMP (or a SLICE) and k RESHAPEs
    read is k copies, one per reshape reader (conformer-block, U85: a (1, 32, 12, 8) reshape read by two reshapes,
    3608 + 3608 cycles). Not modelled: two chains of two reshapes that read one CLAMP are one copy, not two.
    """

    def graph_io(value: Hashable) -> bool:
        term = g.terms.get(value)
        return term is None or not term.args or bool(g.readers.outputs.get(value))

    def copied(value: Hashable, source: Hashable) -> bool:
        shared = len(set(g.readers.of.get(source, ()))) > 1
        return shared or (graph_io(source) and bool(g.readers.outputs.get(value)))

    return [value for value, term in g.terms.items() if term.op == "Reshape" and copied(value, term.args[0])]


ACCUMULATING_OPS = frozenset({"Opaque", "Elementwise"})
"""The terms that write an int32 accumulator themselves (a CONV2D, a MATMUL, an ADD, SUB or MUL), not data movement:
a reshape behind an int32 SLICE is copied along with the slice (conformer-block, Ethos-U55: 4448 cycles of copy and
a standalone RESCALE)."""


def removed_accumulator_reshapes(g: LiveGraph) -> list[Hashable]:
    """The int32 RESHAPEs that Vela removes between an accumulating producer and its output RESCALE.

    An int32 reshape runs as a MemoryCopy and leaves its RESCALE alone (`VelaCalibratedCost.cost` prices both),
    except when it alone reads the output of an accumulating op (ACCUMULATING_OPS) and only RESCALEs read it: then
    regor's `RemoveReshape` removes it and `GraphIrOptimiser::FuseRescale` fuses the RESCALE into the producer
    (`CanFuseRescaleOnProducer`, compiler/graphir_optimiser.cpp). Measured on both targets for an ADD
    (1, 8, 16, 8) -> (8, 1, 16, 8) and a CONV2D whose output is reshaped to rank 3 or to another channel count,
    per-tensor or per-channel (0 cycles for the reshape, the producer's layer unchanged; bandwise-mlp's one such
    reshape). A chain of such reshapes, each the one reader of the one before, is removed whole:
    (1, 8, 16, 8) -> (1, 128, 8) -> (128, 8) behind an ADD or a CONV2D costs nothing on Ethos-U85.
    """
    terms, outputs, readers = g.terms, g.readers.outputs, g.readers.of

    def int32_reshape(value: Hashable) -> bool:
        return value in terms and terms[value].op == "Reshape" and value not in outputs and vela_cost.dtype_name(g.type_of(value)) == "int32"

    def removed(value: Hashable) -> bool:
        first = value
        while int32_reshape(terms[first].args[0]) and readers.get(terms[first].args[0]) == [first]:
            first = terms[first].args[0]
        producer = terms[first].args[0]
        last = value
        while len(readers.get(last, [])) == 1 and int32_reshape(readers[last][0]):
            last = readers[last][0]
        return (
            producer in terms
            and terms[producer].op in ACCUMULATING_OPS
            and bool(terms[producer].args)
            and producer not in outputs
            and readers.get(producer) == [first]
            and bool(readers.get(last))
            and all(is_rescale(terms[r]) for r in readers[last])
        )

    return [value for value, term in terms.items() if term.op == "Reshape" and int32_reshape(value) and removed(value)]


# ---------------------------------------------------------------- transposes


TRANSPOSE_WRITING_OPS = frozenset({"CONV2D", "DEPTHWISE_CONV2D"})
"""The TOSA ops whose output `folded_transposes` lets Ethos-U85 write transposed: MAC ops (regor
`EthosU85Constraints::SupportsFusedTranspose` takes any order of H, W and C for them) that the model prices as Vela's
estimator computes them (`blocks.mac_op_cycles`), so that the transposed write is computed too. Other producers
keep their transposes as layers of their own: taking a MATMUL's output transposed for free cost attention-permute a
12.8% win on Ethos-U85 that Vela measured."""

FOLDED_ATEN_PERMUTATIONS = frozenset({(0, 3, 1, 2)})
"""At the edge-ATen insertion point, the permutation of an aten convolution's output that calibration saw folded
(ctx_transpose_conv): its NHWC output written as NCHW, taken for free."""


def _convolution_behind(g: LiveGraph, value: Hashable) -> Hashable | None:
    """The convolution whose output value is, after its per-channel output RESCALE if it has one."""
    term = g.terms.get(value)
    if term is None:
        return None
    if ((term.op == "Rescale" and len(term.attrs[1]) > 1) or (term.op == "Opaque" and opaque_name(term) == "RESCALE")) and term.args:
        value = term.args[0]
        term = g.terms.get(value)
    if term is None or term.op != "Opaque" or opaque_name(term) not in (*TRANSPOSE_WRITING_OPS, "convolution"):
        return None
    return value


def _written_permutation(g: LiveGraph, value: Hashable) -> tuple[int, int, int] | None:
    """The permutation of (height, width, channels) that the TRANSPOSE value applies to an unbatched NHWC map in
    one pass (`vela_cost.transpose_passes`): what a producer writing it transposed writes (None: not such a one)."""
    term = g.terms[value]
    x = g.type_of(term.args[0])
    perm = tuple(term.attrs[0])
    if x is None or len(x.shape) != 4 or x.shape[0] != 1 or perm[0] != 0:
        return None
    passes = vela_cost.transpose_passes(tuple(x.shape), perm, vela_cost.target_family(g.model.target))
    if len(passes) != 1 or tuple(passes[0][0]) != tuple(x.shape[1:]):
        return None
    return tuple(passes[0][1])


def _folded_into_convolution(g: LiveGraph, value: Hashable) -> bool:
    """The TRANSPOSE value moves a convolution's output as its op group can write it (`folded_transposes`)."""
    conv = _convolution_behind(g, g.terms[value].args[0])
    if conv is None:
        return False
    if opaque_name(g.terms[conv]) == "convolution":
        return tuple(g.terms[value].attrs[0]) in FOLDED_ATEN_PERMUTATIONS
    return _written_permutation(g, value) is not None


def _copied_slice_output(g: LiveGraph, value: Hashable, perm: tuple[int, ...]) -> bool:
    """value is an int8/int16 SLICE's output (which Vela copies for a TRANSPOSE reader) that the transpose
    by perm moves in one pass: the copy writes it transposed."""
    term, out = g.terms.get(value), g.type_of(value)
    return (
        term is not None
        and term.op == "Slice"
        and out is not None
        and not vela_cost.is_batched(out)
        and vela_cost.dtype_name(out) in ("int8", "int16")
        and len(vela_cost.transpose_passes(tuple(out.shape), perm, vela_cost.target_family(g.model.target))) == 1
    )


def folded_transposes(g: LiveGraph) -> list[Hashable]:
    """The TRANSPOSEs that Vela folds into the write of the op in front of them: no layer of their own.

    regor `SchedulerPacking::PackOperations` and `CanPack` (compiler/scheduler_packing.cpp) pack a TRANSPOSE into
    the op whose output it alone reads (one reader, not a graph output), where the architecture's op group
    accepts it (`EthosU85OpGroup::Fuse`, architecture/ethosu85/ethos_u85.cpp: one transpose, natively supported
    by the primary op, `EthosU85Constraints::SupportsFusedTranspose`; Ethos-U55 fuses none,
    `folds_transpose_into_producer`). Followed here: a CONV2D's or DEPTHWISE_CONV2D's output (after its output
    RESCALE) written in any one-pass order of its height, width and channels (the layer is named after the
    transpose's output; `transposed_convolution_writes` prices the write), and a SLICE's MemoryCopy that a one-pass
    transpose moves, for rank-2 to rank-4 permutations; not a transpose of several passes, nor a batched slice.
    Measured on Ethos-U85 (tests/extract/test_layers.py): all five orders of a convolution's output, five sizes,
    five shapes. On a small model whose conv output was also returned as it was, a rewrite that gave that output a
    second reader cost +63% cycles_total on U85.

    Not followed: a transpose fused into a pooling, a MATMUL or an elementwise op (regor fuses some; each is priced
    as a layer of its own here).
    """
    if not g.model.folds_transpose_into_producer:
        return []
    return [
        value
        for value, term in g.terms.items()
        if term.op == "Transpose"
        and g.readers.count(term.args[0]) == 1
        and (
            _folded_into_convolution(g, value)
            or _copied_slice_output(g, term.args[0], tuple(term.attrs[0]))
        )
    ]


def transposed_convolution_writes(g: LiveGraph, folded: Iterable[Hashable]) -> dict[Hashable, Layer]:
    """The folded TRANSPOSEs (`folded_transposes`) that a CONV2D or DEPTHWISE_CONV2D writes: each a layer priced as
    what the transposed write adds to the convolution's (`TRANSPOSED_WRITE`, `VelaCalibratedCost.transposed_write`).

    regor searches the op's block configuration in the convolution's orientation, under the block maximum
    unpermuted (`ArchEthosU85::FindBlockConfig`, `Shape::Unpermute`; in brick format a block whose width or height
    becomes the output's depth is 16 of it), and estimates the layer over the written OFM
    (`Scheduler::InitPerfQuery`: the OFM connection's shape, the transpose's), its output unit at the slower of
    its output rate and the transpose's (`EthosU85Performance::GetActivationCyclesPerElement`: half throughput for
    an H <-> W swap). So computed (`blocks.mac_op_cycles`), the layer's NPU cycles are Vela's on all 125 groups of
    tests/extract/test_layers.py (five orders, five shapes, the five Ethos-U85 sizes): an (8, 32, 32) 1x1 convolution
    on Ethos-U85-256 costs 4960 cycles, written (0, 3, 1, 2) 8520, written (0, 2, 3, 1) 4512."""
    layers = {}
    for value in folded:
        conv = _convolution_behind(g, g.terms[value].args[0])
        if conv is not None and opaque_name(g.terms[conv]) in TRANSPOSE_WRITING_OPS:
            bricks = convolution_bricks(g, conv, written_by_group(g, value))
            layers[value] = Layer(value, LayerKind.TRANSPOSED_WRITE, (conv, _written_permutation(g, value), bricks))
    return layers


def stored_in_nhwc(g: LiveGraph, value: Hashable, read_as: Iterable[tuple[int, ...]] = ()) -> bool:
    """Vela stores the tensor value in NHWC, not brick format (NHCWB16): it is, or shares its buffer through the
    RESHAPEs regor removes with, a graph input, a constant or a graph output, or the shapes it is written and read
    in (read_as too) differ in width or depth.

    regor `Scheduler::UpdateSchedulerTensor` (compiler/scheduler.cpp) gives a feature map between two NPU ops brick
    format unless `needsLinearFormat`: set for a tensor a CPU reads or writes (graph inputs and outputs), a constant,
    and a tensor whose producer's and consumers' connection shapes do not all have equal W and C ("Brick format can
    only be used if both shapes have equal W and C"). A RESHAPE `RemoveReshape` removes leaves one tensor read in
    its output's shape, and a SLICE reads its window (`SliceShape`): a (1, 1024, 3) transpose output read as
    (1, 32, 32, 3) is NHWC, a (3, 1024) one read as (1, 3, 1024) brick; a (1, 16, 32, 32) one sliced to 31 columns
    or 16 channels NHWC, to 15 rows brick (tests/extract/test_layers.py, against the formats Vela reports)."""
    root = value
    while (term := g.terms.get(root)) is not None and term.op == "Reshape" and term.args:
        root = term.args[0]
    term = g.terms.get(root)
    if term is None or not term.args:
        return True
    shapes, frontier = {vela_cost.width_depth(tuple(s)) for s in read_as}, [root]
    root_type = g.type_of(root)
    if root_type is not None:
        shapes.add(vela_cost.width_depth(tuple(root_type.shape)))
    while frontier:
        member = frontier.pop()
        if g.readers.outputs.get(member, 0):
            return True
        for reader in g.readers.of.get(member, ()):
            op = g.terms[reader].op
            if op == "Reshape":
                frontier.append(reader)
            elif (t := g.type_of(reader if op == "Slice" else member)) is not None:  # a SLICE reads its window
                shapes.add(vela_cost.width_depth(tuple(t.shape)))
    return len(shapes) > 1


def written_by_group(g: LiveGraph, value: Hashable) -> Hashable:
    """The tensor that the op group writing value writes: value, or the output of the CLAMPs and TABLEs regor fuses
    behind it as activations (each the only reader of the tensor before, which is no graph output; `CanPack`), also
    through the RESHAPEs `RemoveReshape` removes in between. A TRANSPOSE whose fused CLAMP is a graph output writes
    NHWC: 10944 cycles on Ethos-U85-256 for a (1, 32, 16, 32) (0, 2, 1, 3) transpose, 10560 where a convolution
    reads it."""
    while (reader := _only_reader(g, value)) is not None and (
        g.terms[reader].op in ("Table", "Reshape") or opaque_name(g.terms[reader]) in ("CLAMP", "TABLE")
    ):
        value = reader
    return value


def transposes_at_graph_io(g: LiveGraph) -> dict[Hashable, Layer]:
    """The TRANSPOSEs that read or write a tensor Vela stores in NHWC (`stored_in_nhwc`): a graph input or output, or
    a tensor read through a RESHAPE that changes its width or depth; each a layer whose passes read or write that
    side in NHWC (`BOUNDARY_TRANSPOSE`, `VelaCalibratedCost.boundary_transpose`).

    Ethos-U85's transposes are priced as its estimator computes them, and their access cycles depend on the format:
    the (0, 2, 1) transpose of a (1, 3, 1024) reshape of a graph input, read by a reshape back to (1, 32, 32, 3),
    costs 51300 cycles on Ethos-U85-128 (its narrow NHWC writes; so priced, 51300), 9600 priced in brick format
    (tests/extract/test_layers.py). A transpose Vela runs in another shape (`transposes_as_vela_runs_them`) takes
    its formats there.
    """
    layers = {}
    for value, term in g.terms.items():
        if term.op != "Transpose" or not term.args:
            continue
        brick_in, brick_out = not stored_in_nhwc(g, term.args[0]), not stored_in_nhwc(g, written_by_group(g, value))
        if not (brick_in and brick_out):
            layers[value] = Layer(value, LayerKind.BOUNDARY_TRANSPOSE, (brick_in, brick_out))
    return layers


def permutation_before_unit_reshape(before: tuple[int, ...], after: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation of shape `before` that moves its non-unit axes as perm moves them in shape `after`
    (the same axes less or more unit ones), its unit axes left in place (regor
    RecalculatePermutationForNonUnitAxes, compiler/graphir_optimiser.cpp)."""
    non_unit_before = [i for i, d in enumerate(before) if d != 1]
    rank_after = {axis: r for r, axis in enumerate(i for i, d in enumerate(after) if d != 1)}
    moved = iter(non_unit_before[rank_after[p]] for p in perm if p in rank_after)
    return tuple(i if d == 1 else next(moved) for i, d in enumerate(before))


def _kept_transpose(g: LiveGraph, value: Hashable) -> bool:
    """value is computed by a TRANSPOSE that Vela keeps: not one that only reorders unit axes, which regor's
    GraphIrOptimiser::RewriteIdentityTranspose turns into an Identity before any transpose is moved or merged."""
    term = g.terms.get(value)
    if term is None or term.op != "Transpose" or not term.args or g.type_of(term.args[0]) is None:
        return False
    return not vela_cost.is_noop_transpose(tuple(g.type_of(term.args[0]).shape), tuple(term.attrs[0]))


def _sole_reader(g: LiveGraph, value: Hashable) -> Hashable | None:
    """The one op that reads value, if exactly one does (regor Tensor::IsSinglePath: graph outputs are not readers)."""
    reads = g.readers.of.get(value, [])
    return reads[0] if len(reads) == 1 else None


def _only_reader(g: LiveGraph, value: Hashable) -> Hashable | None:
    """The one op that reads value, if nothing else does, not even a graph output (`CanPack`'s single-reader path)."""
    return _sole_reader(g, value) if g.readers.count(value) == 1 else None


def _transpose_moved_in_front_of(g: LiveGraph, value: Hashable) -> Hashable | None:
    """The TRANSPOSE that regor moves in front of the RESHAPE computing value: the one op reading its output, when
    the reshape only adds or drops unit axes (equal `squeezed` shapes; regor CanonicaliseReshapeTransposePattern)."""
    term, transpose = g.terms.get(value), _sole_reader(g, value)
    if term is None or term.op != "Reshape" or transpose is None or not _kept_transpose(g, transpose):
        return None
    source, reshaped = g.type_of(term.args[0]), g.type_of(value)
    if source is None or reshaped is None or squeezed(tuple(source.shape)) != squeezed(tuple(reshaped.shape)):
        return None
    return transpose


def _canonicalised_transposes(g: LiveGraph) -> dict[Hashable, tuple[Hashable, tuple[int, ...], tuple[int, ...]]]:
    """The TRANSPOSEs that regor's GraphIrOptimiser::CanonicaliseReshapeTransposePattern (compiler/graphir_optimiser.cpp)
    moves in front of a RESHAPE, each with the value it then reads, that value's shape and its recalculated permutation.

    The rewrite runs alone in one traversal (GraphOptimiser::RewriteGraph, compiler/graph_optimiser.hpp): depth first
    from the writers of the graph outputs, an op before the ops writing its inputs. A RESHAPE whose output one kept
    TRANSPOSE alone reads (`_transpose_moved_in_front_of`) is replaced: the transpose reads the reshape's input
    (`permutation_before_unit_reshape`) and a new RESHAPE behind it restores its output shape. That new reshape is
    rewritten at once: when one transpose alone reads its output, that transpose moves in front of it too, and so on.
    The traversal goes on from the new reshape, whose input's writer (the moved transpose) it has visited already:
    nothing in front of the replaced reshape is visited from it.
    """
    moved: dict[Hashable, tuple[Hashable, tuple[int, ...], tuple[int, ...]]] = {}
    visited: set = set()
    stack = [*g.entered_from_outside, *g.readers.outputs]  # the writers of the graph outputs, the last one visited first
    while stack:
        value = stack.pop()
        if value in visited or value not in g.terms:
            continue
        visited.add(value)
        transpose = _transpose_moved_in_front_of(g, value)
        if transpose is None:
            stack.extend((moved[value][0],) if value in moved else g.terms[value].args)
            continue
        source = g.terms[value].args[0]
        shape = tuple(g.type_of(source).shape)
        perm = permutation_before_unit_reshape(shape, tuple(g.type_of(value).shape), tuple(g.terms[transpose].attrs[0]))
        moved[transpose] = (source, shape, perm)
        while (reader := _sole_reader(g, transpose)) is not None and _kept_transpose(g, reader):
            written = tuple(shape[p] for p in perm)  # the moved transpose's output, in front of the new reshape
            perm = permutation_before_unit_reshape(written, tuple(g.type_of(transpose).shape), tuple(g.terms[reader].attrs[0]))
            moved[reader] = (transpose, written, perm)
            transpose, shape = reader, written
        stack.append(transpose)
    return moved


def transposes_as_vela_runs_them(g: LiveGraph) -> dict[Hashable, Layer | None]:
    """The TRANSPOSEs that Vela runs in another input shape or permutation than the graph gives them: for each, the
    layer it runs as (`TRANSPOSE_IN_SHAPE`), or None when Vela merges it with the transpose that reads its output
    (whose layer then runs both).

    Two rewrites of regor's GraphIrOptimiser (compiler/graphir_optimiser.cpp), in the order it runs them:
    `CanonicaliseReshapeTransposePattern` moves a transpose in front of a reshape that only adds or drops unit axes
    (`_canonicalised_transposes`; graph outputs are not readers there, and its one traversal does not reach past a
    reshape it replaced); after `RemoveReshape`, `MergeTransposes` merges a transpose into the transpose writing its
    input when that one's output has no other reader and is read in the shape it is written in (directly, or through
    a reshape that the first rewrite removed or that keeps the shape). A chain merges into one transpose in the first
    one's input shape, its permutations composed; composed to the identity it is removed. Measured on both targets:
    behind a (4, 16, 256, 1) -> (4, 16, 256) reshape a (0, 2, 1) transpose is five passes of (4, 16, 256, 1) by
    (0, 2, 1, 3) (222452 cycles on Ethos-U85), not one (12800), also when the reshape is a graph output; two unit
    reshape + transpose pairs in a row are one moved transpose (the later) and one run in its own shape, unless the
    op between them is also a graph output; a transpose, a unit reshape and a transpose are one layer on Ethos-U85
    and two passes on Ethos-U55, none when they compose to the identity; attention-permute's head transposes behind
    reshapes that split an axis are not moved. An Arm backend rank-5 permute/view test case came out 16.6% slower
    when the move was not priced. Not modelled: MergeTransposes keeps both when each has a RESCALE fused into its
    output.
    """
    moved = _canonicalised_transposes(g)
    runs = {}  # each kept transpose: (the value it reads, that value's shape, its permutation), once moved
    for value, term in g.terms.items():
        if value in moved:
            runs[value] = moved[value]
        elif _kept_transpose(g, value):
            runs[value] = (term.args[0], tuple(g.type_of(term.args[0]).shape), tuple(term.attrs[0]))

    def merged_into(value: Hashable) -> Hashable | None:
        """The transpose in front that value is merged with (regor MergeTransposes), if any."""
        source, shape, _perm = runs[value]
        while source in g.terms and g.terms[source].op == "Reshape" and _sole_reader(g, source) is not None:
            source = g.terms[source].args[0]  # RemoveReshape: the reshape's reader reads its input
        if source not in runs or _sole_reader(g, source) is None:
            return None
        _, written_shape, written_perm = runs[source]
        return source if tuple(written_shape[p] for p in written_perm) == shape else None

    earlier = {value: merged_into(value) for value in runs}
    absorbed = {e for e in earlier.values() if e is not None}

    def running(value: Hashable) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The input shape and permutation of the one transpose that value's merged chain runs as."""
        chain = [value]
        while earlier[chain[-1]] is not None:
            chain.append(earlier[chain[-1]])
        _, shape, perm = runs[chain[-1]]
        for later in reversed(chain[:-1]):
            perm = tuple(perm[p] for p in runs[later][2])
        return shape, perm

    def first(value: Hashable) -> Hashable:
        while earlier[value] is not None:
            value = earlier[value]
        return value

    layers: dict[Hashable, Layer | None] = {}
    for value, term in g.terms.items():
        out = g.type_of(value)
        if value in absorbed:
            layers[value] = None
        elif value in runs and out is not None and running(value) != (tuple(g.type_of(term.args[0]).shape), tuple(term.attrs[0])):
            shape, perm = running(value)
            source = runs[first(value)][0]
            brick_in = not stored_in_nhwc(g, source, [shape])
            brick_out = not stored_in_nhwc(g, written_by_group(g, value), [tuple(shape[p] for p in perm)])
            layers[value] = Layer(value, LayerKind.TRANSPOSE_IN_SHAPE, (perm, TensorType(shape, out.dtype), brick_in, brick_out))
    return layers


def reduce_sums_over_channels(g: LiveGraph) -> dict[Hashable, list[Layer]]:
    """The REDUCE_SUMs over another axis than the innermost: each a TRANSPOSE that moves the axis innermost and a
    REDUCE_SUM over it (`REDUCE_TRANSPOSE`, `REDUCE_OVER_CHANNELS`).

    regor `GraphIrOptimiser::RewriteReduceSum` (compiler/graphir_optimiser.cpp) reshapes the input to 3D around the
    axis (`ReshapeTo3DAroundAxis`: the axes before it, it, the axes after it), transposes that (0, 2, 1) and sums
    the channels. The transpose reads what the sum reads: on Ethos-U85 the int8 tensor of a unit-scale input RESCALE that
    the sum alone reads (regor folds the rescale into a SUB of the zero point behind the sum), else the int32 tensor,
    which it writes in NHWC (`UpdateSchedulerTensor`: "Int32 ReduceSum requires linear format"). torchvision's
    MNASNet takes its mean as two such sums, of (1, 3, 3, 1280) over axis 1 and of (1, 1, 3, 1280) over axis 2:
    135000 and 60000 cycles of transposes on Ethos-U85-256, a fifth of the model, which the fitted sum priced at
    5593 and 1924 in all (tests/extract/test_layers.py). Where a convolution writes the summed tensor (behind its
    output RESCALE and the sum's unit-scale input RESCALE) and nothing else reads it, Ethos-U85 folds the transpose into that write
    (`folded_transposes`), priced as `transposed_convolution_writes` prices it: emg-conv1d-stem's sum over
    columns of a (1, 1, 16, 32) convolution output adds 56 cycles to the convolution's 352 on Ethos-U85-256.
    """
    layers = {}
    for value, term in g.terms.items():
        if term.op != "Reduce" or opaque_name(term) != "REDUCE_SUM" or not term.args:
            continue
        x, out = g.type_of(term.args[0]), g.type_of(value)
        axis = term.attrs[1] if len(term.attrs) > 1 else None
        if x is None or out is None or axis is None or axis == len(x.shape) - 1 or x.shape[axis] == 1:
            continue
        read, dtype = term.args[0], x.dtype
        source = g.terms.get(read)
        folds = vela_cost.target_family(g.model.target) in vela_cost.REDUCE_SUM_READS_RESCALE_INPUT
        if folds and source is not None and source.args and rescale_scale(source) == 1.0 and _only_reader(g, read) == value:
            read = source.args[0]
            dtype = g.type_of(read).dtype if g.type_of(read) is not None else dtype
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
        shape3 = TensorType((outer, x.shape[axis], inner), dtype)
        summed = Layer(value, LayerKind.REDUCE_OVER_CHANNELS, (TensorType((outer, inner, x.shape[axis]), x.dtype), TensorType((outer, inner, 1), out.dtype)))
        conv, written = _convolution_behind(g, read), _reduce_written_order(x.shape, axis)
        alone = _only_reader(g, read) == (value if read == term.args[0] else term.args[0])  # `CanPack`: one reader
        if g.model.folds_transpose_into_producer and alone and conv is not None and written is not None and opaque_name(g.terms[conv]) in TRANSPOSE_WRITING_OPS:
            bricks = (convolution_bricks(g, conv, value)[0], True)  # the transposed sum's input, between two NPU ops
            layers[value] = [Layer(value, LayerKind.TRANSPOSED_WRITE, (conv, written, bricks)), summed]  # the convolution writes it transposed
            continue
        brick_out = dtype != "torch.int32"
        layers[value] = [Layer(value, LayerKind.REDUCE_TRANSPOSE, (shape3, not stored_in_nhwc(g, read, [shape3.shape]), brick_out)), summed]
    return layers


def _reduce_written_order(shape: tuple[int, ...], axis: int) -> tuple[int, int, int] | None:
    """The order of (height, width, channels) in which an unbatched map of shape is written by the transpose regor
    puts in front of a sum over axis, where that transpose moves the map's own axes: over columns, the 3D map
    around the axis is the map itself, written with columns and channels swapped. Over rows it merges columns and
    channels (MNASNet's (1, 3, 3, 1280) -> (1, 3, 3840)), which no convolution writes: Vela runs it alone."""
    padded = (1,) * (4 - len(shape)) + tuple(shape)
    return (0, 2, 1) if len(shape) <= 4 and padded[0] == 1 and axis + 4 - len(shape) == 2 else None


# ---------------------------------------------------------------- activations


TABLE_FUSING_PRODUCERS = frozenset({"Rescale", "Transpose"})
"""The ops whose output write Vela fuses an int8 TABLE into, as measured; an opaque RESCALE counts as a Rescale."""


def _fuses_table(term: Term | None) -> bool:
    return term is not None and (term.op in TABLE_FUSING_PRODUCERS or (term.op in ("Opaque", "Elementwise") and opaque_name(term) == "RESCALE"))


def fused_tables(g: LiveGraph) -> list[Hashable]:
    """The int8 TABLEs that Vela runs as the activation of the op in front of them: no layer of their own.

    regor `SchedulerPacking::PackOperations` (compiler/scheduler_packing.cpp) packs an activation (a TABLE is a
    LUT) into the primary op when `CanPack` allows it: the op's output has one reader and one writer and is not a
    graph output. `RemoveReshape` runs before, so a RESHAPE in between that Vela removes (`behind_removed_reshapes`)
    changes nothing. Measured the same on both targets: a TABLE behind a RESCALE (alone, or the output scaling of an
    ADD, MUL or convolution) or a TRANSPOSE is a `LUT` layer of 0 cycles, also with a (1, 16, 16, 32) -> (1, 256, 32)
    reshape in between (emg-recurrent-decoder, U55: a convolution's rescale reshaped to (1, 16) in front of its
    TABLE); behind a CLAMP (itself an activation, `EthosU85OpGroup::Fuse`: no two activations), a SLICE, a graph
    input, an op whose output has another reader, or a reshape Vela copies, it runs as its own layer. On
    emg-gru-gesture all 51 TABLEs are fused.
    """
    return [
        value
        for value, term in g.terms.items()
        if term.op == "Table"
        and vela_cost.dtype_name(g.type_of(term.args[0])) == "int8"
        and g.readers.count(term.args[0]) == 1
        and _fuses_table(g.terms.get(behind_removed_reshapes(g, term.args[0])))
    ]


CLAMP_ALONE_PRODUCERS = frozenset({"Concat", "Slice", "Table"})
"""The producers a CLAMP reading their output is not fused into (`clamps_alone`): no op writes a CONCAT's output
whole, a CLAMP reads through a SLICE, and a TABLE is an activation already."""


def clamps_alone(g: LiveGraph) -> dict[Hashable, Layer]:
    """The CLAMPs that Vela runs as a layer of their own (`CLAMP_ALONE`): every other CLAMP is the activation of the
    op in front of it, with no layer of its own.

    regor `SchedulerPacking::CanPack` (compiler/scheduler_packing.cpp) offers a CLAMP to the op group of the op
    writing its input when the CLAMP alone reads that output (not a graph output; `RemoveReshape` runs before, so a
    RESHAPE Vela removes changes nothing), and the group takes it as its activation unless the group ends in an
    activation already (`EthosU85OpGroup::Fuse`, `EthosU55OpGroup::Add`: no two consecutive activations; a CLAMP or
    a TABLE). A graph input or a constant has no op to fuse into, nor has a CONCAT's output or a SLICE the CLAMP
    reads through (`CLAMP_ALONE_PRODUCERS`). Alone, the CLAMP runs as a 1x1 pooling with the activation fused
    (`ArchEthosU55::UseAvgPoolNop`, `ArchEthosU85::UseAvgPoolNop`), priced as computed
    (`VelaCalibratedCost.standalone_clamp`). Measured on Ethos-U55-128 and Ethos-U85-256 (tests/extract/test_layers.py):
    a (1, 32, 32, 16) CLAMP behind a graph input, a CLAMP, a TABLE, a CONCAT, a SLICE or a convolution whose output is
    also returned costs 16768 and 9536 cycles; behind a convolution, an ADD, a RESCALE, a MAX_POOL2D or a TRANSPOSE, 0.
    It reads and writes brick format (NHCWB16) between NPU ops, but NHWC from a graph input, a CONCAT or a SLICE and
    into a graph output or a CONCAT, as Vela stored them on Ethos-U85-1024 (a (1, 32, 32, 8) CLAMP of a graph input
    into a CONCAT: 4800 cycles, 4032 were its output in brick format).

    Not followed: on Ethos-U55 a CLAMP behind an int16 TRANSPOSE (a DMA op that takes no activation) runs alone.
    """
    layers = {}
    for value, term in g.terms.items():
        if term.op not in ("Opaque", "Elementwise") or opaque_name(term) != "CLAMP" or not term.args:
            continue
        source = behind_removed_reshapes(g, term.args[0])
        producer = g.terms.get(source)
        leaf = producer is None or (producer.op == "Opaque" and not producer.args)
        alone = (
            leaf
            or producer.op in CLAMP_ALONE_PRODUCERS
            or opaque_name(producer) in ("CLAMP", "TABLE")
            or readers_behind_removed_reshapes(g, source)[1] != 1
        )
        if alone:
            brick_in = not leaf and producer.op not in ("Concat", "Slice")
            brick_out = g.readers.outputs.get(value, 0) == 0 and all(g.terms[r].op != "Concat" for r in g.readers.of.get(value, ()))
            layers[value] = Layer(value, LayerKind.CLAMP_ALONE, (g.type_of(value), brick_in, brick_out))
    return layers


# ---------------------------------------------------------------- slices and concats


SLICE_COPYING_READERS = frozenset({"Transpose", "Slice", "Reshape"})
"""The readers Vela cannot fold a SLICE into, as measured (see `copied_slices`)."""


BATCHED_SLICE_FOLDING_READERS = frozenset({"Concat", "Elementwise", "Rescale"})
"""The readers Vela folds a batched SLICE (leading dimensions beyond HWC) into, as measured: a CONCAT, a CLAMP,
a RESCALE; it copies one read by a convolution (bandwise-mlp: an (8, 1, 1, 8) slice read by a CONV2D, 8 copies)."""


def copied_slices(g: LiveGraph) -> list[Hashable]:
    """The int8/int16 SLICEs that Vela runs as a MemoryCopy of their output; every other one is read through by
    its readers and has no layer.

    regor `GraphIrOptimiser::RewriteSlice` makes each SLICE a MemoryCopy, and `MoveSplitSliceToConsumer`
    (compiler/graphir_optimiser.cpp) moves it into the read of each consumer except a RESHAPE (and a TILE, GATHER,
    SCATTER or CPU op), a TRANSPOSE, or one that reads a slice already; a graph output keeps the copy. Measured the
    same on both targets: a slice read by a CLAMP, an elementwise op, a RESCALE, a TABLE, a CONCAT or a convolution
    has no layer; read by a TRANSPOSE, a SLICE or a RESHAPE, or returned, it is copied (emg-gru-gesture, U55:
    16 of its 64 slices copied, 226 cycles each). A RESHAPE that only adds or drops leading 1s is the same tensor
    to Vela: the slice is judged by that reshape's readers. A batched slice (leading dimensions beyond HWC) is
    folded only into BATCHED_SLICE_FOLDING_READERS, and copied one leading index at a time: a (1, 48, 2, 7, 8)
    slice read by a CONCAT, a CLAMP or a RESCALE has no layer, read by a RESHAPE it is 48 MemoryCopy layers
    (band-split-frontend). int32 slices keep their calibrated price (`LayerKind.OP`).
    """

    def copied(value: Hashable, batched: bool) -> bool:
        if g.readers.outputs.get(value):
            return True
        for reader in g.readers.of.get(value, ()):
            term = g.terms[reader]
            if term.args[0] != value:  # the copying readers read the slice as their first operand
                continue
            if term.op == "Reshape" and drops_leading_ones_only(g.type_of(value), g.type_of(reader)):
                if copied(reader, batched):
                    return True
            elif term.op in SLICE_COPYING_READERS or (batched and term.op not in BATCHED_SLICE_FOLDING_READERS):
                return True
        return False

    return [value for value in narrow_slices(g) if copied(value, vela_cost.is_batched(g.type_of(value)))]


def narrow_slices(g: LiveGraph) -> list[Hashable]:
    """The int8 and int16 SLICEs of g: those that Vela copies or reads through; an int32 one keeps its calibrated price."""
    return [
        value
        for value, term in g.terms.items()
        if term.op == "Slice" and g.type_of(value) is not None and vela_cost.dtype_name(g.type_of(value)) in ("int8", "int16")
    ]


def transposing_slice_copies(g: LiveGraph, folded: Iterable[Hashable]) -> dict[Hashable, Layer]:
    """The SLICE copies that also write the folded TRANSPOSE behind them (`folded_transposes`): one layer for both,
    priced as calibrated (`folded_transpose_copy`): neither the plain copy nor the transpose alone (a (1, 16, 16, 32)
    slice transposed by (0, 3, 1, 2) on Ethos-U85: 4272 cycles, the plain copy's fit 7752)."""
    layers = {}
    for value in folded:
        source = g.terms[value].args[0]
        sliced = g.type_of(source)
        if g.terms.get(source) is not None and g.terms[source].op == "Slice" and sliced is not None:
            layers[source] = Layer(source, LayerKind.TRANSPOSING_COPY, (sliced, tuple(g.terms[value].attrs[0])))
    return layers


CONCAT_IN_PLACE_PRODUCERS = frozenset({"Opaque", "Elementwise", "Rescale", "Table", "Reduce"})
"""The ops that Vela lets write their output straight into a concat's output, as measured: a convolution, a RESIZE, a
CLAMP, a RESCALE. A TRANSPOSE, a SLICE, a CONCAT, a RESHAPE and a graph input are copied."""


def copied_concat_inputs(g: LiveGraph) -> dict[Hashable, list[TensorType]]:
    """For each int8/int16 CONCAT, the inputs Vela copies (one MemoryCopy each); its producer writes every other input
    in place, and the concat has no layer of its own.

    regor `GraphIrOptimiser::RewriteConcat` makes a CONCAT one MemoryCopy per input into its slice of the output, and
    `MoveConcatSliceToProducer` (compiler/graphir_optimiser.cpp) lets the input's producer write that slice instead,
    when the input is on a single path (`IsSinglePath`: the concat is its one reader), is not a graph input or
    output, and its producer is not a RESHAPE, a data-layout op (TRANSPOSE), a CPU op, TILE, GATHER or SCATTER, and
    not a non-elementwise op writing a batched (beyond HWC) tensor. Measured the same on both targets: two 1x1
    convolutions concatenated along any axis cost nothing more; an input that is also returned, is a graph input,
    or comes from a TRANSPOSE, SLICE or CONCAT costs one MemoryCopy (unet-skip, Ethos-U55: a RESIZE written in
    place, the shared skip connection copied, 4480 cycles). Behind a RESHAPE an input is copied, even one that only
    drops a leading 1 (emg-branch-fusion: two (1, 1, 32, k) -> (1, 32, k) inputs, 500 and 936 cycles), and so is a
    RESCALE behind a RESHAPE, also when Vela removes that reshape and fuses the RESCALE into the convolution in
    front of it (emg-branch-fusion, Ethos-U85: 337 and 370 cycles). A batched output changes nothing for its
    unbatched inputs: eight (1, 1, 1, 16) RESCALE or CLAMP outputs stacked into (8, 1, 1, 16) are written in place,
    eight RESHAPEs of them are 8 copies (emg-gru-gesture). A batched input is copied one leading index at a time
    whatever computes it: two (2, 4, 4, 16) CLAMP outputs concatenated along any axis are 4 copies. int32 concats
    keep their calibrated price (`LayerKind.OP`).
    """

    def in_place(value: Hashable, part: TensorType) -> bool:
        term = g.terms.get(value)
        return (
            term is not None
            and term.op in CONCAT_IN_PLACE_PRODUCERS
            and bool(term.args)
            and g.readers.count(value) == 1
            and not g.readers.outputs.get(value)
            and not vela_cost.is_batched(part)
            and not (is_rescale(term) and g.terms.get(term.args[0]) is not None and g.terms[term.args[0]].op == "Reshape")
        )

    copied = {}
    for value, term in g.terms.items():
        if term.op != "Concat":
            continue
        out, parts = g.type_of(value), [(a, g.type_of(a)) for a in term.args]
        if out is not None and vela_cost.dtype_name(out) in ("int8", "int16") and all(t is not None for _, t in parts):
            copied[value] = [t for a, t in parts if not in_place(a, t)]
    return copied


# ---------------------------------------------------------------- rescales


def unfused_add_subs(g: LiveGraph) -> set[Hashable]:
    """The ADDs and SUBs that Vela runs as passes of their own, their input and output RESCALEs as layers of their own.

    regor `GraphIrOptimiser::FuseRescale` fuses an ADD's or SUB's input RESCALEs into it only together
    (`CanFuseMultipleRescalesOnConsumer`, compiler/graphir_optimiser.cpp), when the architecture supports the
    resulting quantization (`SupportsQuantization`). On Ethos-U55 (`VelaCalibratedCost.fuses_add_sub`) that holds
    only when both operands are input rescales that it alone reads, one scaling by exactly 2^19 and the other by
    less (the pair the Arm backend emits for inputs of different scales; inputs of equal scales get 2^19 twice),
    and one output RESCALE alone reads its int32 output: 3072 cycles for a (1, 64, 32) ADD fused, else 16384
    (3072 + 2560 per input rescale, 2560 for the op, 2560 for its output rescale): a softmax's x - max(x), and a
    residual ADD whose int32 sum another ADD also reads (tds-conv1d); an output RESCALE that only shifts stays fused
    (`output_rescales_alone`).
    """
    found = set()
    for value, term in g.terms.items():
        if term.op != "Elementwise" or opaque_name(term) not in ("ADD", "SUB"):
            continue
        operands = [behind_removed_reshapes(g, a) for a in term.args]
        rescaled_alone = all(is_read_once_input_rescale(g, a) for a in operands)
        reads = g.readers.of.get(value, ())
        output_rescaled_alone = (
            g.readers.count(value) == 1 and len(reads) == 1 and is_output_rescale(g.terms[reads[0]], g.type_of(value), g.type_of(reads[0]))
        )
        if not g.model.fuses_add_sub(tuple(rescale_scale(g.terms[a]) for a in operands) if rescaled_alone else None, output_rescaled_alone):
            found.add(value)
    return found


def input_rescales_alone(g: LiveGraph, unfused: set[Hashable] = frozenset()) -> dict[Hashable, Layer]:
    """The input RESCALEs (per tensor, into int32) that Vela runs as layers of their own.

    regor `GraphIrOptimiser::FuseRescale` fuses an input RESCALE into the op that reads it
    (`CanFuseRescaleOnConsumer`) only when that op is its one reader and one the target fuses into (ADD, SUB, MUL;
    on Ethos-U55 an ADD or SUB only as `unfused_add_subs` says: one of those runs every rescale alone). Measured:
    - Shared by several readers, it runs alone and its readers run without it (`INPUT_RESCALE_ALONE`): merging
      every duplicate op of tds-conv1d, input rescales included, cost +18.8% cycles_total on U55 (a shared
      (1, 64, 32) rescale: a 3072-cycle standalone rescale, and its MUL reader 2560 + 2560 instead of 2048
      fused). An op reading one input rescale on both operands (x * x, a layer norm's variance) reads it twice.
      A rescale shared by two MULs (a scalar's, which the e-graph shares once a reshape moves in front of it)
      leaves each MUL a plain int32 operand (Ethos-U85, (1, 4, 32, 12): 86 cycles for the shared rescale, 3008 +
      5664 per MUL for the other input and output rescales, against 384 per MUL with a rescale each).
    - Read by an op whose other operand is a plain int32 tensor (no input rescale that Vela fuses writes it,
      behind any RESHAPEs Vela removes), it runs alone too (`INPUT_RESCALE_BESIDE_INT32`): on Ethos-U85 a layer
      that computes the op too ((1, 64, 32) ADD: 3456 cycles against 512 for the ADD of two rescaled operands); on
      Ethos-U55 a rescale alone in front of the op's own pass ((1, 64, 32) MUL: 10752 cycles with its output
      rescale, against 2048).
    """

    def fusing(reader) -> bool:
        term = g.terms.get(reader)
        return term is not None and term.op == "Elementwise" and g.model.fuses_input_rescale_into(opaque_name(term))

    def fused_operand(value: Hashable) -> bool:
        return is_read_once_input_rescale(g, behind_removed_reshapes(g, value))

    layers = {}
    for value, term in g.terms.items():  # in the graph's order, so that the sum of the prices is the same every run
        if term.op not in ("Rescale", "Elementwise"):  # the ops is_input_rescale accepts
            continue
        if not g.readers.count(value) or not is_input_rescale(term, g.type_of(value)):
            continue
        source, out = g.type_of(term.args[0]), g.type_of(value)
        reads, count = readers_behind_removed_reshapes(g, value)
        if count > 1:
            if any(map(fusing, reads)):
                layers[value] = Layer(value, LayerKind.INPUT_RESCALE_ALONE, (source, out))
        elif reads and fusing(reads[0]):
            if not all(map(fused_operand, g.terms[reads[0]].args)):
                layers[value] = Layer(value, LayerKind.INPUT_RESCALE_BESIDE_INT32, (g.terms[reads[0]], source, out))
            elif reads[0] in unfused:
                layers[value] = Layer(value, LayerKind.INPUT_RESCALE_ALONE, (source, out))
    return layers


OUTPUT_RESCALE_PRODUCERS = frozenset({"ADD", "SUB", "MUL"})
"""The int32 producers whose output RESCALE runs alone when something else reads their output too, as measured. A
REDUCE_SUM's runs alone too (Ethos-U85: a (1, 64, 32) -> (1, 64, 1) sum costs 652 cycles, and 652 + 240), but the
standalone rescale fit prices that (1, 64, 1) rescale at about 1900 cycles, further from Vela than 0."""


def output_rescales_alone(g: LiveGraph, inputs_alone: Iterable[Hashable], unfused: set[Hashable] = frozenset()) -> dict[Hashable, Layer]:
    """The output RESCALEs (per tensor, int32 to int8 or int16) that Vela runs as layers of their own.

    regor `GraphIrOptimiser::FuseRescale` fuses an output RESCALE into its producer (`CanFuseRescaleOnProducer`)
    only when it is the producer's one reader (`OutputRescaleCandidate`) and the producer's quantization allows it.
    Measured with hand-built graphs on both targets:
    - a MUL that reads an input rescale run alone keeps its int32 inputs, and its output rescale runs alone too:
      every layer norm's x * x in tds-conv1d, conformer-block, attention-permute, mobilevit-patch-attention,
      bandwise-mlp and emg-gru-gesture (Ethos-U55, (1, 64, 32): 2560 + 2560 cycles, and 3072 for the rescale in
      front of it; Ethos-U85: 1920 + 5632);
    - an ADD or SUB that `unfused_add_subs` runs unfused;
    - but not, on Ethos-U55 (`vela_cost.OUTPUT_SHIFT_FUSED_BEHIND_INT32`), a RESCALE that only shifts
      (`_shifts_only`): regor's `SupportedOFMQuant` fuses that into an
      elementwise op reading int32, and Vela runs such an ADD of two unfused (1, 64, 32) input rescales with its output
      RESCALE by 2^-19 in one 2560-cycle layer (13824 cycles in all), against 2560 + 2560 for an output scale of
      0.695 (16384);
    - on Ethos-U85 (`vela_cost.OUTPUT_RESCALE_ALONE_BESIDE_READER`), an ADD, SUB or MUL whose int32 output
      something else reads too (another op, another RESCALE, a graph output): a (1, 64, 32) ADD costs 512 cycles
      with its rescale fused, and 512 + 5824 when the sum is also returned (tds-conv1d's layer norm affine ADD).
      Ethos-U55 runs such an ADD or SUB unfused, with all its rescales.
    """
    standalone = set(inputs_alone)
    unfused_ops = set(unfused) | {
        value
        for value, term in g.terms.items()
        if term.op == "Elementwise" and opaque_name(term) == "MUL" and standalone.intersection(behind_removed_reshapes(g, arg) for arg in term.args)
    }
    beside_reader = vela_cost.target_family(g.model.target) in vela_cost.OUTPUT_RESCALE_ALONE_BESIDE_READER
    shift_fused = vela_cost.target_family(g.model.target) in vela_cost.OUTPUT_SHIFT_FUSED_BEHIND_INT32
    layers = {}
    for value, term in g.terms.items():
        if term.op not in ("Rescale", "Elementwise"):  # the ops is_output_rescale accepts
            continue
        producer = g.terms.get(term.args[0]) if term.args else None
        if producer is None or not is_output_rescale(term, g.type_of(term.args[0]), g.type_of(value)):
            continue
        alone = (term.args[0] in unfused_ops and not (shift_fused and _shifts_only(term))) or (
            beside_reader
            and producer.op == "Elementwise"
            and opaque_name(producer) in OUTPUT_RESCALE_PRODUCERS
            and g.readers.count(term.args[0]) > 1
        )
        if alone:
            layers[value] = Layer(value, LayerKind.OUTPUT_RESCALE_ALONE, (g.type_of(term.args[0]),))
    return layers


def _shifts_only(term: Term) -> bool:
    """A per-tensor `Rescale` whose multiplier is a power of two: a shift, which regor fuses into an elementwise producer
    that reads int32 (`SupportedOFMQuant`: "Elementwise supports shift-only if input or output is 32-bit")."""
    return term.op == "Rescale" and len(term.attrs[1]) == 1 and math.frexp(term.attrs[1][0])[0] == 0.5


def rescales_behind_folded_transposes(g: LiveGraph, folded: Iterable[Hashable]) -> dict[Hashable, Layer]:
    """The RESCALEs of an int32 tensor (per tensor or per channel) that read a TRANSPOSE folded into the write of the
    convolution in front of it (`folded_transposes`): Vela runs each as a layer of its own.

    regor `GraphIrOptimiser::FuseRescale` (compiler/graphir_optimiser.cpp) fuses a RESCALE onto the op writing its
    input unless `CanFuseRescaleOnProducer` refuses, and that refuses every data-layout op ("Don't fuse to
    dataLayout opTypes"). It runs on the graph before the scheduler packs the TRANSPOSE into the convolution's write
    (`SchedulerPacking::PackOperations`), so a convolution's output RESCALE with a transpose moved in front of it is
    left alone, reading the int32 accumulator (`OUTPUT_RESCALE_ALONE`). The Arm backend's
    high_rank_permute_fuzz_case_0 on Ethos-U85-256: 17,906 cycles with the (0, 2, 1, 3) transpose behind the
    convolution's per-channel RESCALE, 53,650 with it in front (the RESCALE alone 35,744); tests/extract/test_layers.py
    measures both orders. Where the transpose is not folded, it is a layer of its own, which prices the RESCALE
    it leaves unfused (`vela_cost.ACCUMULATOR_MOVES`)."""
    folded = set(folded)
    return {
        value: Layer(value, LayerKind.OUTPUT_RESCALE_ALONE, (g.type_of(term.args[0]), term.op == "Rescale" and len(term.attrs[1]) > 1))
        for value, term in g.terms.items()
        if is_rescale(term) and term.args and term.args[0] in folded and vela_cost.dtype_name(g.type_of(term.args[0])) == "int32"
    }


def rescales_alone(g: LiveGraph, unfused: set[Hashable]) -> dict[Hashable, Layer]:
    """The RESCALEs that Vela runs as layers of their own: the input rescales (`input_rescales_alone`) and the output
    rescales (`output_rescales_alone`), with the ADDs and SUBs run unfused (`unfused_add_subs`)."""
    inputs = input_rescales_alone(g, unfused)
    return {**inputs, **output_rescales_alone(g, inputs, unfused)}


def _fused_clamp(g: LiveGraph, value: Hashable) -> bool:
    """value's one reader is a CLAMP, directly or behind an output RESCALE that alone reads value: the activation
    regor fuses into the op writing value (the CLAMP becomes the op group's second op)."""

    reader = _only_reader(g, value)
    if reader is not None and is_output_rescale(g.terms[reader], g.type_of(value), g.type_of(reader)):
        reader = _only_reader(g, reader)
    return reader is not None and opaque_name(g.terms[reader]) == "CLAMP"


def elementwise_passes(g: LiveGraph, unfused: set[Hashable]) -> dict[Hashable, Layer]:
    """The ADDs, SUBs and MULs that run as elementwise passes of their own (Ethos-U55), with what their pass reads.

    Where `vela_cost.ELEMENTWISE_PASS_ALONE` holds, regor runs each binary op as one elementwise pass, and
    `EthosU55Performance::EstimateAOCyclesPerElement` (architecture/ethosu55/ethos_u55_performance.cpp) prices its
    output unit by what the pass reads and which activation its op group fuses (`blocks.u55_elementwise_cycles`):
    - it reads int32 operands when an input RESCALE of it runs alone: an ADD or SUB that `unfused_add_subs` runs
      unfused, or a MUL with an operand that is not an input rescale it alone reads (behind removed reshapes);
      otherwise the int8 operands the fused rescales read;
    - a CLAMP is fused into it (regor `SchedulerPacking`: the activation after the op, through the output RESCALE
      fused into the op) when it alone reads the op's fused output (`_fused_clamp`).
    Measured: a (1, 32, 32, 8) ADD with a CLAMP behind it costs 49152 cycles on Ethos-U55-32 and 6144 on U55-256;
    without the CLAMP, 49152 and 8192; reading int32, 24576 and 9216.
    """
    if vela_cost.target_family(g.model.target) not in vela_cost.ELEMENTWISE_PASS_ALONE:
        return {}
    layers = {}
    for value, term in g.terms.items():
        op = opaque_name(term) if term.op == "Elementwise" else ""
        if op not in ("ADD", "SUB", "MUL"):
            continue
        if op == "MUL":
            reads_int32 = not all(is_read_once_input_rescale(g, behind_removed_reshapes(g, a)) for a in term.args)
        else:
            reads_int32 = value in unfused
        layers[value] = Layer(value, LayerKind.ELEMENTWISE_PASS, (reads_int32, not reads_int32 and _fused_clamp(g, value)))
    return layers


# ---------------------------------------------------------------- chaining (Ethos-U85)


CHAIN_PRIMARY_OPS = frozenset({"CONV2D", "DEPTHWISE_CONV2D"})
"""The ops whose op group `chained_elementwise` chains an elementwise op into: those the model prices as Vela's
estimator computes them (`blocks.mac_op_cycles`), so that what a chained op adds to them is computed too."""


def _convolution_group_end(g: LiveGraph, value: Hashable) -> Hashable:
    """Where the op group of the convolution writing value ends: behind the output RESCALE (per tensor or per
    channel) that alone reads value, and the CLAMP that alone reads that (fused into the group)."""
    reader = _only_reader(g, value)
    if reader is not None and g.terms[reader].op == "Rescale" and vela_cost.dtype_name(g.type_of(reader)) in ("int8", "int16"):
        value = reader
        reader = _only_reader(g, value)
    if reader is not None and opaque_name(g.terms[reader]) == "CLAMP":
        value = reader
    return value


def chained_elementwise(g: LiveGraph) -> dict[Hashable, tuple[Layer, list[Hashable]]]:
    """The ADDs, SUBs and MULs that Ethos-U85 chains into the convolution in front of them: each with its layer
    (`CHAINED_OP`) and the values whose layers go into the convolution's (its input and output RESCALEs).

    regor `SchedulerPacking::CanPack` (compiler/scheduler_packing.cpp) offers the op group of an op to the op after it
    when that op reads the group's output, which nothing else reads and no graph output is; `EthosU85OpGroup::Chain`
    (architecture/ethosu85/ethos_u85.cpp) accepts an elementwise op whose output has the shape of the group's into a
    group that no TRANSPOSE was fused into. Its input and output RESCALEs are fused into it first
    (`GraphIrOptimiser::FuseRescale`), so here every operand is an input rescale that it alone reads and one output
    rescale alone reads it. Vela then gives the chained op no cycles of its own (`NetworkPerformance::AddToDatabase`
    with an empty result), and the group's layer the output cycles of both ops per element
    (`EthosU85Performance::EstimateAOCyclesPerElement`), which a convolution's MAC cycles often hide
    (`VelaCalibratedCost.chained_op` prices what it adds: `CHAINED_OP`). Measured on the five Ethos-U85 sizes
    (tests/extract/test_layers.py, six shapes each: the group's NPU cycles so computed are Vela's on all 30): a
    (16, 16, 16) ADD behind a 1x1 convolution adds 2048 cycles to it on Ethos-U85-128 and 128 on Ethos-U85-2048;
    behind a 3x3 convolution of 16 channels over (32, 32), 508 on Ethos-U85-128; and it is not chained when the
    convolution's output is also returned.

    Not followed: a chain needs its op right after the group's last in Vela's execution order (an op reading two
    convolutions chains into the one Vela runs last, here into its first operand's); an op chained into another elementwise op
    or into a group that already chains one (priced as run alone); a chain into a pooling, a MemoryCopy or a
    TRANSPOSE (priced as run alone).
    """
    if vela_cost.target_family(g.model.target) not in vela_cost.ELEMENTWISE_CHAINED:
        return {}
    groups = {
        _convolution_group_end(g, value): value
        for value, term in g.terms.items()
        if term.op == "Opaque" and opaque_name(term) in CHAIN_PRIMARY_OPS
    }
    chained: dict[Hashable, tuple[Layer, list[Hashable]]] = {}  # a group's output has one reader: one op chains into it
    for value, term in g.terms.items():
        if term.op != "Elementwise" or opaque_name(term) not in OUTPUT_RESCALE_PRODUCERS:
            continue
        output = _only_reader(g, value)
        if output is None or not is_output_rescale(g.terms[output], g.type_of(value), g.type_of(output)):
            continue
        operands = [behind_removed_reshapes(g, a) for a in term.args]
        if not all(is_read_once_input_rescale(g, a) for a in operands):
            continue  # an op whose rescales run alone (`rescales_alone`) reads int32: not chained here
        for a in operands:
            source = behind_removed_reshapes(g, g.terms[a].args[0])
            primary = groups.get(source)
            if primary is None:
                continue
            if readers_behind_removed_reshapes(g, source)[1] == 1 and drops_leading_ones_only(g.type_of(source), g.type_of(output)):
                bricks = convolution_bricks(g, primary, written_by_group(g, output))
                chained[value] = (Layer(value, LayerKind.CHAINED_OP, (primary, bricks)), [*operands, output])
                break
    return chained


def convolution_bricks(g: LiveGraph, conv: Hashable, written: Hashable) -> tuple[bool, bool]:
    """Whether Vela stores the input of the convolution conv, and the tensor its op group writes, in brick
    format (`stored_in_nhwc`). A SLICE in front of it is read through (regor fuses it into the convolution's read,
    `ifm_slice`): the tensor it slices is the one stored."""
    source = g.terms[conv].args[0]
    if (term := g.terms.get(source)) is not None and term.op == "Slice":
        source = term.args[0]
    return not stored_in_nhwc(g, source), not stored_in_nhwc(g, written)


def convolutions_in_nhwc(g: LiveGraph, chained: dict[Hashable, tuple[Layer, list[Hashable]]], removed: set[Hashable]) -> dict[Hashable, Layer]:
    """The CONV2Ds and DEPTHWISE_CONV2Ds whose input, or the output their op group writes (a chained op's, when one is
    chained into it), Vela stores in NHWC (`convolution_bricks`): each a layer priced in those formats
    (`CONVOLUTION`, `VelaCalibratedCost.convolution`); every other convolution reads and writes brick format.

    The group's output is behind the output RESCALE, also across the int32 reshapes regor removes in front of it
    (removed: `removed_accumulator_reshapes`): fc-autoencoder's last fully connected layer writes the graph output whether its
    reshape stands before or after its RESCALE (3317 cycles on Ethos-U85-256 either way).

    regor's estimator reads an NHWC IFM in bursts of one position's channels and writes an NHWC OFM of up to 16
    channels in bursts of at most 16 bytes per core (`EstimateMemoryTransfer`), over the IFM channel's bandwidth
    rather than the memory's (`MeasureAccessCycles`): resnet8's 3x3 stride-2 convolution of a (32, 32, 8) map that a
    1x1 stride-2 convolution reads as a (31, 31) window costs 2800 cycles on Ethos-U85-2048, 1662 of them NPU
    cycles (tests/extract/test_layers.py)."""
    written_by_chain = {layer.args[0]: written_by_group(g, fused[-1]) for layer, fused in chained.values()}
    layers = {}
    for value, term in g.terms.items():
        if term.op != "Opaque" or opaque_name(term) not in CHAIN_PRIMARY_OPS or not term.args:
            continue
        accumulator = value  # its output RESCALE is fused across the int32 reshapes regor removes
        while (reader := _only_reader(g, accumulator)) in removed:
            accumulator = reader
        written = written_by_chain.get(value) or written_by_group(g, _convolution_group_end(g, accumulator))
        bricks = convolution_bricks(g, value, written)
        if bricks != (True, True):
            layers[value] = Layer(value, LayerKind.CONVOLUTION, (bricks,))
    return layers


# ---------------------------------------------------------------- the layers of a graph


DECISIONS = (
    copied_reshapes,
    removed_accumulator_reshapes,
    folded_transposes,
    transposed_convolution_writes,
    transposes_at_graph_io,
    transposes_as_vela_runs_them,
    reduce_sums_over_channels,
    fused_tables,
    clamps_alone,
    copied_slices,
    transposing_slice_copies,
    copied_concat_inputs,
    unfused_add_subs,
    input_rescales_alone,
    output_rescales_alone,
    rescales_behind_folded_transposes,
    elementwise_passes,
    chained_elementwise,
    convolutions_in_nhwc,
)
"""Every decision `form_layers` takes, in the order docs/cost_model.md lists them (`decisions_markdown`)."""


def form_layers(g: LiveGraph) -> list[Layer]:
    """The layers Vela runs for g, in the graph's order: for each value, what the decisions above make of its op."""
    folded = folded_transposes(g)
    chained = chained_elementwise(g)
    removed = set(removed_accumulator_reshapes(g))
    convolutions = convolutions_in_nhwc(g, chained, removed)
    without_layer = {*folded, *fused_tables(g), *removed, *(v for _, fused in chained.values() for v in fused)}
    slices, copied = set(narrow_slices(g)), set(copied_slices(g))
    transposing = transposing_slice_copies(g, folded)
    written = transposed_convolution_writes(g, folded)
    in_shape = transposes_as_vela_runs_them(g)
    boundary = transposes_at_graph_io(g)
    concat_copies = copied_concat_inputs(g)
    unfused = unfused_add_subs(g)
    alone = rescales_alone(g, unfused) | rescales_behind_folded_transposes(g, folded)
    passes = elementwise_passes(g, unfused)
    clamps = clamps_alone(g)
    reduce_sums = reduce_sums_over_channels(g)
    reshape_copies = set(copied_reshapes(g))
    layers: list[Layer] = []
    for value, term in g.terms.items():
        if value in transposing:
            layers.append(transposing[value])
        elif value in written:
            layers.append(written[value])
        elif value in concat_copies:
            layers.extend(Layer(value, LayerKind.COPY, (part,)) for part in concat_copies[value])
        elif value in slices:
            if value in copied:
                layers.append(Layer(value, LayerKind.COPY, (g.type_of(value),)))
        elif value in without_layer:
            pass
        elif value in in_shape:
            if in_shape[value] is not None:  # None: merged into the transpose reading it
                layers.append(in_shape[value])
        elif value in boundary:
            layers.append(boundary[value])
        elif value in passes:
            layers.append(passes[value])
        elif value in chained:
            layers.append(chained[value][0])
        elif value in clamps:
            layers.append(clamps[value])
        elif value in reduce_sums:
            layers.extend(reduce_sums[value])
        elif value in convolutions:
            layers.append(convolutions[value])
        else:
            layers.append(Layer(value, LayerKind.OP))
        if value in alone:
            layers.append(alone[value])
        if value in reshape_copies:
            layers.append(Layer(value, LayerKind.RESHAPE_COPY, (g.type_of(term.args[0]),)))
    return layers


def decisions_markdown() -> str:
    """The decisions' docstrings as the "Layer formation" section of docs/cost_model.md, so that it cannot go stale
    (tests/extract/test_layers.py compares them; `python -m eqsat.extract.layers` prints it)."""
    import inspect

    parts = [inspect.cleandoc(__doc__).split("\n\n", 1)[1]]
    for decision in DECISIONS:
        summary, _, detail = inspect.cleandoc(decision.__doc__).partition("\n\n")
        parts.append(f"### `{decision.__name__}`\n\n{summary}\n\n{detail}".rstrip())
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(decisions_markdown(), end="")
