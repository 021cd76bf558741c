"""A read-only view of an e-graph, decoded into `Term`s.

egglog's `freeze` gives every function table of the e-graph, row by row: a
constructor's row is one e-node, its inputs and its output (its e-class) as
egglog values. This module turns the rows of the tensor constructors into
`Term`s whose args are e-class ids, finds the class of each `Node(i)` handle,
and reads the `shape` and `dtype` analysis, so the extractors and the cost
model never touch egglog.

The tables are read directly rather than through egglog's JSON serialization
(DESIGN §3): on an e-graph of 800k e-nodes, serializing, parsing and decoding
the JSON took about 30 s; reading the tables takes about 7 s (benchmarks/scale.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter
from typing import Callable

from egglog import EGraph, bindings

from eqsat.ir import TensorType, Term
from eqsat.extract._gc import paused_gc

HANDLES = frozenset({"Node", "Element"})
"""Tensor constructors that are never extracted (eqsat.terms marks them unextractable): every other
function whose output is a Tensor is an op of the term language, decoded whatever it is."""


@dataclass
class EGraphView:
    """Tensor e-classes with their candidate terms.

    `candidates[c]` lists the distinct terms of e-class c (args are e-class
    ids), `class_of_node[i]` is the e-class of `Node(i)`, and `types[c]` the
    static shape and dtype of e-class c where the analysis knows them.
    """

    candidates: dict[str, list[Term]]
    class_of_node: list[str]
    types: dict[str, TensorType]
    enode_count: int

    @classmethod
    def of(cls, egraph: EGraph, node_count: int) -> EGraphView:
        """The view of egraph's current tables (read with `freeze`, no JSON round trip)."""
        with paused_gc():
            return cls.from_tables(egraph._egraph, node_count)

    @classmethod
    def from_tables(cls, raw: bindings.EGraph, node_count: int) -> EGraphView:
        """Decode the function tables of a low-level egglog e-graph.

        Each row of a tensor constructor is one e-node; its output value is
        its e-class. Operands of sort Tensor (or Vec of Tensor) become the
        term's args, every other operand an attribute, in declaration order.
        E-classes are named as egglog's JSON serializer names them
        ("Tensor-<id>"), and rows are read in table order, which is the
        serializer's node order, so extraction breaks ties as it always did.
        """
        to_i64, to_vec = raw.value_to_i64, raw.value_to_vec
        # each value is decoded once; a decoder is the memo's own lookup, so a value seen before costs no Python call
        eclass = _Memo(lambda value: f"Tensor-{to_i64(value)}").__getitem__
        ints = _Memo(lambda value: tuple([to_i64(v) for v in to_vec(value)])).__getitem__
        classes = _Memo(lambda value: tuple([eclass(v) for v in to_vec(value)])).__getitem__

        readers = {"Tensor": eclass, "tensors": classes, "ints": ints, "i64": to_i64, "String": raw.value_to_string}
        functions = raw.freeze().functions
        candidates: dict[str, list[Term]] = defaultdict(list)
        for op, function in functions.items():
            if function.output_sort != "Tensor" or op in HANDLES:
                continue
            kinds = [_operand_kind(sort) for sort in function.input_sorts]
            decoders = [readers[kind] for kind in kinds]
            args_of, attrs_of = _operand_splitter(kinds)
            for row in function.rows:
                operands = [decode(value) for decode, value in zip(decoders, row.inputs)]
                candidates[eclass(row.output)].append(Term(op, args_of(operands), attrs_of(operands)))

        class_of_node: list[str | None] = [None] * node_count
        for row in functions["Node"].rows:
            class_of_node[to_i64(row.inputs[0])] = eclass(row.output)
        missing = [i for i, c in enumerate(class_of_node) if c is None]
        if missing:
            raise ValueError(f"e-graph lost the handles of nodes {missing[:5]}")
        dtypes = {eclass(row.inputs[0]): raw.value_to_string(row.output) for row in functions["dtype"].rows}
        types = {}
        for row in functions["shape"].rows:
            tensor = eclass(row.inputs[0])
            types[tensor] = TensorType(ints(row.output), dtypes.get(tensor))
        return cls(dict(candidates), class_of_node, types, sum(len(v) for v in candidates.values()))


class _Memo(dict):
    """decode(key) for each key looked up, computed on the first lookup."""

    def __init__(self, decode: Callable):
        super().__init__()
        self._decode = decode

    def __missing__(self, key):
        value = self[key] = self._decode(key)
        return value


def _operand_splitter(kinds: list[str]) -> tuple[Callable[[list], tuple], Callable[[list], tuple]]:
    """Two functions of a row's decoded operands: its term's args (its tensor operands in order, or the
    tensors of its one Vec of tensors) and its attrs (every other operand, in order)."""
    tensor_positions = [i for i, kind in enumerate(kinds) if kind in ("Tensor", "tensors")]
    attrs_of = _items_at([i for i, kind in enumerate(kinds) if kind not in ("Tensor", "tensors")])
    if "tensors" not in kinds:
        return _items_at(tensor_positions), attrs_of
    if tensor_positions == [kinds.index("tensors")]:
        return itemgetter(tensor_positions[0]), attrs_of
    raise ValueError(f"no decoding for a constructor whose tensor operands are {kinds}: one Vec of tensors or only single tensors")


def _items_at(positions: list[int]) -> Callable[[list], tuple]:
    """The items of a list at these positions, as a tuple."""
    if len(positions) == 1:
        (position,) = positions
        return lambda items: (items[position],)
    return itemgetter(*positions) if positions else lambda items: ()


def _operand_kind(sort: str) -> str:
    """How an operand of this egglog sort is decoded: "Tensor", "tensors", "ints", "i64" or "String"."""
    if sort in ("Tensor", "i64", "String"):
        return sort
    if sort.startswith("egglog.builtins.Vec["):
        return "tensors" if sort.endswith("Tensor]") else "ints"
    raise ValueError(f"no decoding for operands of sort {sort}")
