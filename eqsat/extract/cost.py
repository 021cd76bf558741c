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

Only targets with a calibration file are priced (`cost_model_for`); any
other target is refused with the command that calibrates it, so a report
never states a cost in a unit it does not have.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Hashable, Iterable, Mapping, Protocol

from eqsat.ir import TensorType, Term
from eqsat.extract import vela_cost


class CostModel(Protocol):
    target: str
    unit: str

    def cost(self, term: Term, out: TensorType | None, args: list[TensorType | None]) -> float:
        """The cost of computing term once, given its output and operand types (None: unknown).

        It reads the term's op and attributes and how many operands it has, never which ones they are.
        """

    def memory_copy(self, tensor: TensorType | None) -> float:
        """The cost of copying tensor once (a RESHAPE that Vela cannot remove)."""


class UncalibratedTargetError(ValueError):
    """The target has no calibration file: its costs would be guesses in no unit."""


def cost_model_for(target: str) -> CostModel:
    """The Vela-calibrated cost model of target, from eqsat/extract/calibration/<target>.json.

    Raises UncalibratedTargetError, naming the command that calibrates target, when there is none.
    """
    if not vela_cost.has_calibration(target):
        raise UncalibratedTargetError(
            f"no cost-model calibration for {target}: run `eqsat calibrate --target {target}` "
            f"(about 45 minutes on 2 cores; calibrated: {', '.join(vela_cost.calibrated_targets())})"
        )
    return vela_cost.VelaCalibratedCost(target)


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
