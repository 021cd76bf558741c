"""What the registry holds for one modelled op: an `Op`, and the `Writer` its emitter writes FX through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from torch import fx

from eqsat.ir import TensorType, Term
from eqsat.ops.nodes import Dialect

Reader = Callable[[fx.Node, Callable[[fx.Node], int], Callable[[], str]], "Term | None"]
"""read(node, index, key): node as a term (args are `index` of its operand nodes), or None when
the node does not fit the op (it is then read as opaque). key() names the op
for keyed terms (Opaque, Elementwise, Reduce, Table); it is only called by readers that use it."""


class Writer(Protocol):
    """What an emitter writes a new FX node through (the bridge's write-back, bound to the e-class being written).

    dialect is the graph's (TOSA or ATen); slices_as_tosa, shapes_as_const_shape and pads_as_tosa say which form the
    graph already uses. call() adds a node that takes the meta of the node it stands in for and gets its
    FakeTensor value, built from the type it `computes` (default: the e-class's type, which the e-graph
    knows; an emitter that writes a term as several nodes names the type of each intermediate one);
    copy_prototype() copies the node a key was read from onto new operands.
    """

    dialect: Dialect
    slices_as_tosa: bool
    shapes_as_const_shape: bool
    pads_as_tosa: bool
    original: fx.Node | None
    """The first original node of the e-class being written, if it had one."""

    def call(self, target: Any, args: tuple, kwargs: dict, computes: TensorType | None = None) -> fx.Node: ...

    def const_shape(self, values: tuple[int, ...]) -> fx.Node: ...

    def aten(self, name: str, overload: str) -> Any: ...

    def copy_prototype(self, key: str, operands: list[fx.Node], edit: Callable[[fx.Node], None] | None = None) -> fx.Node: ...

    def keep_special_dtype(self, node: fx.Node) -> None: ...

    def inherit_input_qparams(self, node: fx.Node, operands: list[fx.Node]) -> None: ...


@dataclass(frozen=True)
class Op:
    """Everything eqsat knows about one modelled op, under the name of its term constructor (`Term.op`).

    targets: the FX targets `read` reads, in both dialects (TOSA and edge ATen);
    fact_row(i, term): the fact table ("<op>_<n>") and row that load term i into the e-graph;
    load_rule(n): the columns of table "<op>_<n>" after the node index, and the term they build (egglog);
    emit(writer, term, operands): the FX node(s) computing a new term;
    output_shape(term, input shapes): the static shape of its value (None for opaque ops: only their node knows it);
    reference: exact semantics of its TOSA targets (integers, REQUIREs checked), by target name;
    keyed: its term's first attribute is a key naming the node it was read from, and a new term is a
    copy of that node (the prototype);
    moves_data: it is data movement, written in the dialect of the graph (edge ATen targets mean ATen).
    """

    name: str
    targets: frozenset[str]
    read: Reader
    fact_row: Callable[[int, Term], tuple[str, list]]
    load_rule: Callable[[int], tuple[list[str], str]]
    emit: Callable[[Writer, Term, list[fx.Node]], fx.Node]
    output_shape: Callable[[Term, list[tuple[int, ...]]], tuple[int, ...] | None] = lambda term, inputs: None
    reference: dict[str, Callable[..., Any]] = field(default_factory=dict)
    keyed: bool = False
    moves_data: bool = False


class RequireViolation(ValueError):
    """An op on which the TOSA specification's REQUIRE (its result is unpredictable: the reference model
    says TOSA_UNPREDICTABLE) or ERROR_IF (the graph is invalid: TOSA_ERROR) fails."""


def require(condition: bool, what: str) -> None:
    """Raise RequireViolation unless condition holds (what: the REQUIRE, in words)."""
    if not condition:
        raise RequireViolation(f"REQUIRE {what}")


def error_if(condition: bool, what: str) -> None:
    """Raise RequireViolation if condition holds (what: the ERROR_IF, in words)."""
    if condition:
        raise RequireViolation(f"ERROR_IF {what}")


def vec(names: list[str]) -> str:
    """An egglog vector literal of the named values."""
    return f"(vec-of {' '.join(names)})" if names else "(vec-empty)"


def keyed_load_rule(op: str) -> Callable[[int], tuple[list[str], str]]:
    """The load rule of a term built as (op key (vec-of operands...)): Opaque and Elementwise."""

    def load_rule(n: int) -> tuple[list[str], str]:
        xs = [f"x{k}" for k in range(n)]
        return ["key", *xs], f"({op} key {vec([f'(Node {x})' for x in xs])})"

    return load_rule


def keyed_fact_row(i: int, term: Term) -> tuple[str, list]:
    return f"{term.op}_{len(term.args)}", [i, term.attrs[0], *term.args]
