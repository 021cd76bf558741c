"""The cost model: what one e-node costs on a target, in estimated inference cycles (Vela's `cycles_total`).

Rules never mention cost; this file alone decides extraction.

Per-node costs cannot see one context that matters: Vela 5.1 runs a RESHAPE
as a MemoryCopy instead of removing it when something else reads its input,
or when its output has several readers and one of them is another RESHAPE;
a reshape that reads another reshape is never copied (the chain folds into
its first). Measured on both targets with hand-built TOSA graphs (a reshape
read by two CLAMPs, SLICEs or TRANSPOSEs is removed; read by a CLAMP and a
RESHAPE it is copied), and on the zoo: on tds-conv1d (U55) exactly the 3 of
14 reshapes this picks were copies, 10552 of 102464 NPU cycles; on
conformer-block, emg-recurrent-decoder and shufflenet-v2 the reshapes read by
several slices or transposes were not.
`reshape_copies` prices that on a whole graph: the original one, and the
extracted one before the pass accepts it.

A second context: Ethos-U85 folds a TRANSPOSE into the output write of the
convolution in front of it (the layer is named after the transpose's output
and no layer is left for the convolution's own write; calibration measures
this on every target, `VelaCalibratedCost.folds_transpose_into_producer`).
It does so only when the transpose is the one reader of the convolution's
output. `folded_transposes` prices that: such a transpose costs nothing. On
a small model whose conv output was also returned as it was, a rewrite that
gave that output a second reader cost +63% cycles_total on U85.

A third: an input RESCALE (per tensor, into int32) is fused by Vela into
the op that reads it, if that op is its only reader and one Vela fuses
into (U85: ADD, SUB, MUL; U55: MUL). When several ops read one, it runs
alone and its readers run without it: merging
every duplicate op of tds-conv1d, input rescales included, cost +18.8%
cycles_total on U55 (a shared (1, 64, 32) rescale: a 3072-cycle standalone
rescale, and its MUL reader 2560 + 2560 instead of 2048 fused: 6144 more;
the calibrated standalone int8 -> int32 rescale of that shape is 6282).
`shared_input_rescales` prices that standalone rescale.

`graph_cost` is the one function that prices a graph: every live term once,
and both contexts. The pipeline's acceptance and the local search call it.

Only targets with a calibration file are priced (`cost_model_for`); any
other target is refused with the command that calibrates it, so a report
never states a cost in a unit it does not have.
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from typing import Callable, Hashable, Iterable, Mapping, Protocol

from eqsat.ir import TensorType, Term
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

    def fuses_input_rescale_into(self, op: str) -> bool:
        """Whether the target fuses an input RESCALE into the elementwise op (ADD, SUB, MUL) that alone reads it."""

    def standalone_input_rescale(self, source: TensorType | None, out: TensorType | None) -> float:
        """The cost of an input RESCALE from source to out run alone (not fused into the op reading it)."""


class UncalibratedTargetError(ValueError):
    """The target has no calibration file: its costs would be guesses in no unit."""


def cost_model_for(target: str) -> CostModel:
    """The Vela-calibrated cost model of target, from eqsat/extract/calibration/<target>.json.

    Raises UncalibratedTargetError, naming the command that calibrates target, when there is none.
    """
    if not vela_cost.has_calibration(target):
        raise UncalibratedTargetError(
            f"no cost-model calibration for {target}: run `eqsat calibrate --target {target}` "
            f"(about 10 minutes on 2 cores; calibrated: {', '.join(vela_cost.calibrated_targets())})"
        )
    model = vela_cost.VelaCalibratedCost(target)
    _warn_once_if_vela_differs(target, model.data["vela_version"])
    return model


_warned_versions: set[tuple[str, str, str]] = set()


def _warn_once_if_vela_differs(target: str, calibrated: str) -> None:
    """A warning, once per process and target, when the installed Vela is not the one target was fitted on."""
    installed = vela_cost.vela_version()
    if installed != calibrated and (target, calibrated, installed) not in _warned_versions:
        _warned_versions.add((target, calibrated, installed))
        message = (
            f"eqsat: the cost model of {target} was fitted on Vela {calibrated}, but Vela {installed} is installed; "
            f"its estimates may no longer rank graphs as this Vela does: run `eqsat calibrate --target {target}`"
        )
        logging.getLogger("eqsat").warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def term_costs(model: CostModel, types: Mapping[Hashable, TensorType]) -> Callable[[Hashable, Term], float]:
    """The cost of an e-class's term under model, with types[c] the type of e-class c (absent: unknown).

    Memoized on what the model reads (op, attributes, output and operand
    types): the e-graph of a network repeats the same few op configurations
    across many classes, and the extractor prices each e-node.
    """
    memo: dict[tuple, float] = {}
    type_of = types.get

    def term_cost(eclass: Hashable, term: Term) -> float:
        out, args = type_of(eclass), tuple(map(type_of, term.args))
        key = (term.op, term.attrs, out, args)
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = model.cost(term, out, list(args))
            return value

    return term_cost


def reshape_copies(
    graph: dict[Hashable, Term],
    roots: Iterable[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
) -> float:
    """What the RESHAPEs of graph that Vela keeps as MemoryCopy cost (see the module docstring).

    graph maps each value to the term computing it (operands are values of graph or leaves); roots are
    the graph outputs, each a reader of its value.
    """
    readers = Counter(roots)
    read_by_reshape: set[Hashable] = set()
    for term in graph.values():
        readers.update(term.args)
        if term.op == "Reshape":
            read_by_reshape.add(term.args[0])

    def copied(value: Hashable, term: Term) -> bool:
        if term.op != "Reshape":
            return False
        source = graph.get(term.args[0])
        if source is not None and source.op == "Reshape":  # a chain of reshapes is folded into its first
            return False
        return readers[term.args[0]] > 1 or (readers[value] > 1 and value in read_by_reshape)

    return sum(model.memory_copy(type_of(value)) for value, term in graph.items() if copied(value, term))


def _is_input_rescale(term: Term, out: TensorType | None) -> bool:
    """A per-tensor RESCALE into int32: the input scaling of the ADD, SUB or MUL that reads it."""
    if term.op == "Rescale":
        return term.attrs[0] == "torch.int32" and len(term.attrs[1]) == 1
    return term.op == "Elementwise" and _opaque_name(term) == "RESCALE" and out is not None and out.dtype == "torch.int32"


def shared_input_rescales(
    graph: dict[Hashable, Term],
    roots: Iterable[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
) -> float:
    """What the input RESCALEs of graph that several ops read cost on top of their price (see the module docstring).

    Vela fuses an input RESCALE into the ADD, SUB or MUL that reads it, when that op is its only reader and
    the target fuses into that op (`fuses_input_rescale_into`); a shared one runs alone: priced as the
    standalone RESCALE it becomes, when one of its readers would have fused it.
    """
    readers: dict[Hashable, set] = {value: set() for value in graph}
    for value in roots:
        readers.setdefault(value, set()).add(("output", value))
    for value, term in graph.items():
        for arg in set(term.args):
            readers.setdefault(arg, set()).add(value)

    def fusing(reader) -> bool:
        term = graph.get(reader)
        return term is not None and term.op == "Elementwise" and model.fuses_input_rescale_into(_opaque_name(term))

    return sum(
        model.standalone_input_rescale(type_of(term.args[0]), type_of(value))
        for value, term in graph.items()
        if len(readers[value]) > 1 and _is_input_rescale(term, type_of(value)) and any(map(fusing, readers[value]))
    )


FOLDED_PERMUTATIONS = frozenset({(0, 3, 1, 2)})
"""The transposes calibration saw folded: a CONV2D's NHWC output written as NCHW (ctx_transpose_conv).
Others are not assumed folded: taking a MATMUL's output or a rank-3 transpose for free cost
attention-permute a 12.8% win on Ethos-U85 that Vela measured."""


def _opaque_name(term: Term) -> str:
    key = term.attrs[0] if term.attrs and isinstance(term.attrs[0], str) else ""
    return vela_cost.short_op_name(key.split("#", 1)[0])


def _is_convolution_output(graph: dict[Hashable, Term], value: Hashable) -> bool:
    """value is a convolution's output, after its per-channel output RESCALE if it has one."""
    term = graph.get(value)
    if term is None:
        return False
    if (term.op == "Rescale" and len(term.attrs[1]) > 1) or (term.op == "Opaque" and _opaque_name(term) == "RESCALE"):
        term = graph.get(term.args[0]) if term.args else None
    return term is not None and term.op == "Opaque" and _opaque_name(term) in ("CONV2D", "convolution")


def folded_transposes(graph: dict[Hashable, Term], roots: Iterable[Hashable], model: CostModel) -> list[Hashable]:
    """The TRANSPOSEs of graph that Vela folds into the write of the convolution in front of them.

    On a target that folds, an NHWC -> NCHW transpose is folded when its operand is a CONV2D's output
    (after its output RESCALE) that nothing else reads and that is not a graph output.
    """
    if not model.folds_transpose_into_producer:
        return []
    readers = Counter(roots)
    for term in graph.values():
        readers.update(term.args)
    return [
        value
        for value, term in graph.items()
        if term.op == "Transpose"
        and tuple(term.attrs[0]) in FOLDED_PERMUTATIONS
        and readers[term.args[0]] == 1
        and _is_convolution_output(graph, term.args[0])
    ]


def graph_cost(
    graph: dict[Hashable, Term],
    roots: list[Hashable],
    type_of: Callable[[Hashable], TensorType | None],
    model: CostModel,
    term_cost: Callable[[Hashable, Term], float] | None = None,
) -> float:
    """What a graph costs: every term that the roots read, once, with the contexts Vela prices differently
    (reshapes kept as copies, transposes folded into their producer, input rescales that several ops read).

    graph maps each value to the term computing it (every operand is a value of graph); roots are
    the graph outputs. term_cost(value, term) defaults to the model's cost with the types of type_of.
    """
    if term_cost is None:
        term_cost = lambda value, term: model.cost(term, type_of(value), [type_of(a) for a in term.args])  # noqa: E731
    live = {value: graph[value] for value in reachable(graph, roots)}
    folded = set(folded_transposes(live, roots, model))
    total = sum(term_cost(value, term) for value, term in live.items() if value not in folded)
    return total + reshape_copies(live, roots, type_of, model) + shared_input_rescales(live, roots, type_of, model)
