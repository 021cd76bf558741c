"""FX ⇄ e-graph translation.

`to_egraph` reads an FX graph of the Arm pipeline into an egglog e-graph, and
`to_fx` writes a chosen set of e-nodes back as an FX graph.

The bridge loops over the op registry (`eqsat.ops.REGISTRY`: which FX targets
are which terms, their fact rows and emitters) and knows nothing about rules
or costs.

Loading is bulk (DESIGN §3): each node becomes one row of a fact table, written
to a TSV file and read with egglog's `input`; one generated rule per table
then builds the terms, unions them with the node handles `Node(i)` and deletes
the row (so the e-graph the extractor reads stays small). Vectors are only ever built
inside those rules, where egglog builds them cheaply.

Back-translation reuses every original FX node whose term was chosen
unchanged (keeping all its meta) and builds new nodes in the dialect the graph
was given: TOSA dialect after `ExirToTosaPass`, edge ATen before it.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Iterable, Iterator

import torch
from egglog import EGraph
from executorch.backends.arm.tosa.mapping import TosaSpecialDtype
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx._lazy_graph_module import _LazyGraphModule  # GraphModule that generates its code on first use
from torch.fx.node import map_aggregate

from eqsat import ops, terms
from eqsat.ir import KEY_MARK, Graph, TensorType, Term
from eqsat.ops import vec
from eqsat.ops.nodes import TOSA, Dialect, op_name, output_node, output_slots, static_shape, tensor_val

# ---------------------------------------------------------------- terms


def tensor_type(node: fx.Node) -> TensorType | None:
    """The static type of an FX node's tensor value, or None for dynamic shapes and non-tensors."""
    shape = static_shape(node)
    return None if shape is None else TensorType(shape, str(node.meta["val"].dtype))


def special_dtype(node: Any) -> TosaSpecialDtype | None:
    """The TOSA dtype a node's value is stored in when torch cannot spell it (INT48, INT4, FP4/FP6 payloads), else None.

    Passes mark such a node with the `TosaSpecialDtype` meta key; its fake tensor
    only says int32/int8/uint8. SHAPE (CONST_SHAPE operands) is not a stored
    tensor and is not special here.
    """
    marked = node.meta.get(TosaSpecialDtype.meta_key()) if isinstance(node, fx.Node) else None
    return marked if isinstance(marked, TosaSpecialDtype) and marked != TosaSpecialDtype.SHAPE else None


def touches_special_dtype(node: fx.Node) -> bool:
    """Whether node's value or one of its operands is stored in a special TOSA dtype (see special_dtype).

    The bridge reads such a node as opaque, so that no rule moves data movement
    onto such a tensor or changes its shape: its packed layout is not the one its
    fake tensor describes (upstream's PropagateViewCopyPermute pass refuses the
    same moves, `_node_or_inputs_are_int48`), and a RESCALE of an INT48 operand
    uses 16-bit multipliers that the Rescale term does not model.
    """
    return special_dtype(node) is not None or any(special_dtype(a) is not None for a in node.all_input_nodes)


# ---------------------------------------------------------------- loading


@dataclass
class Loaded:
    """An FX graph read into an e-graph.

    `nodes[i]` is the FX node behind `Node(i)`, `terms[i]` the term it was read
    as (args are node indices), `outputs` the node index of each output slot
    (None for a non-node slot, kept as `output_literals`), and `prototypes`
    the FX node that each opaque or elementwise key was read from.
    """

    egraph: EGraph | None
    """None once the e-graph was reset for another graph (eqsat.soundness.Saturated on the scratch e-graph)."""
    graph_module: fx.GraphModule
    nodes: list[fx.Node]
    terms: list[Term]
    outputs: list[int | None]
    output_literals: list[Any]
    prototypes: dict[str, fx.Node]
    dialect: Dialect
    index_of: dict[fx.Node, int] = field(default_factory=dict)
    merged_duplicates: int = 0
    """How many nodes were put in the e-class of an earlier node computing the same value (merge_duplicates)."""

    def read_graph(self) -> Read:
        """The graph as the module's read_graph reads it (duplicates merged or not: merging unions e-classes, it reads no node differently)."""
        return Read(self.nodes, self.terms, [i for i in self.outputs if i is not None])


def detect_dialect(graph_module: fx.GraphModule) -> Dialect:
    """ATen while edge ATen data movement is still present, else TOSA."""
    for node in graph_module.graph.nodes:
        name = op_name(node.target) if node.op == "call_function" else ""
        if name.startswith("aten.") and name in ops.BY_TARGET and ops.BY_TARGET[name].moves_data:
            return Dialect.ATEN
    return Dialect.TOSA


def _key_part(value: Any, ids: dict[fx.Node, int] | None = None) -> str:
    """value as key text; an operand node is "$", or "$<id>" with its value id when ids are given."""
    if isinstance(value, fx.Node):
        return "$" if ids is None else f"${ids[value]}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_key_part(v, ids) for v in value) + "]"
    return repr(value)


def _op_key(node: fx.Node, ids: dict[fx.Node, int] | None = None) -> str:
    """What makes two nodes the same op: target, arguments (operands as "$", or by value id), output type,
    qparams and special dtype. The input qparams count: on edge ATen ops (before ExirToTosaPass) they say
    how each operand is dequantized, so the same op on the same int8 operands with other input qparams
    computes another value."""
    parts = [node.op, op_name(node.target), _key_part(node.args, ids), _key_part(node.kwargs, ids)]
    val = node.meta.get("val")
    parts.append(_key_part(map_aggregate(val, lambda v: (tuple(v.shape), str(v.dtype)) if isinstance(v, torch.Tensor) else v)))
    parts.append(repr(node.meta.get("input_qparams")))
    parts.append(repr(node.meta.get("output_qparams")))
    parts.append(repr(special_dtype(node)))
    return "|".join(parts)


def _opaque_key(node: fx.Node) -> str:
    """The key of an opaque or elementwise term: its op (`_op_key`) and its node's name, so that every node
    is a term of its own; duplicates are merged by union (`duplicate_pairs`)."""
    return f"{_op_key(node)}|{node.name}"


def is_input_rescale(node: fx.Node) -> bool:
    """A per-tensor RESCALE into int32: the input scaling of the ADD, SUB or MUL reading it, which Vela fuses
    into that op, each reader its own."""
    return (
        node.op == "call_function"
        and op_name(node.target) == "tosa.RESCALE.default"
        and len(node.args) > 2
        and node.args[1] == torch.int32
        and len(node.args[2]) == 1
    )


def duplicate_pairs(nodes: list[fx.Node]) -> list[tuple[int, int]]:
    """(i, j), i < j, for every node j that computes the same value as the earlier node i: the same pure op on
    operands of the same values. Nodes are in topological order.

    Input RESCALEs (`is_input_rescale`) are never paired: Vela fuses one into each op that reads it, so a
    shared one runs alone and breaks the fusion of its readers (merging every duplicate of tds-conv1d cost
    +18.8% cycles_total on Ethos-U55). Nor are the RESHAPEs of one: Vela removes such a reshape and fuses the
    rescale into the reshape's reader, so a shared reshape shares the rescale (an attention's q and k, each scaled by
    a scalar's rescale and reshape, on Ethos-U85: 2 x 384 cycles apart, 17430 merged). They still have values, so the
    ops that read duplicates of them pair.
    """
    ids: dict[fx.Node, int] = {}  # each node's value: the index of the first node with its key
    first: dict[str, int] = {}
    fused = set()  # input RESCALEs and the RESHAPEs of them
    pairs = []
    for index, node in enumerate(nodes):
        pure = node.op == "call_function" and not node.is_impure()
        key = _op_key(node, ids) if pure else f"{node.op}|{node.name}"
        first.setdefault(key, index)
        ids[node] = first[key]
        if is_input_rescale(node) or (pure and op_name(node.target) == "tosa.RESHAPE.default" and node.args[0] in fused):
            fused.add(node)
        elif first[key] != index:
            pairs.append((first[key], index))
    return pairs


class OpaqueReason(StrEnum):
    """Why read_node read an op (a call_function node) as an opaque term, which no rule looks into."""

    UNSUPPORTED_OP = "unsupported op"
    """No op of the registry reads its target."""
    UNSUPPORTED_DTYPE = "unsupported dtype"
    """It or an operand is stored in a special TOSA dtype (INT48, INT4, ...: touches_special_dtype)."""
    NO_TENSOR_VALUE = "no tensor value"
    """Its `val` meta is not one tensor (several outputs, or no meta)."""
    DYNAMIC_SHAPE = "dynamic shape"
    """Its value is a tensor of symbolic shape."""
    UNSUPPORTED_ARGUMENTS = "unsupported arguments"
    """Its op's reader refused its arguments (a CONCAT that requantizes its inputs, an unsigned per-channel RESCALE, ...)."""


def opaque_reason(node: fx.Node) -> OpaqueReason:
    """Why read_node read node, an op, as opaque: the first of OpaqueReason's conditions that holds. read_node
    asks the registry only for a known target without a special dtype; the op's reader refused the rest, and a
    refusal is put down to the node's value when that is not a tensor of static shape, else to its arguments."""
    if op_name(node.target) not in ops.BY_TARGET:
        return OpaqueReason.UNSUPPORTED_OP
    if touches_special_dtype(node):
        return OpaqueReason.UNSUPPORTED_DTYPE
    if tensor_val(node) is None:
        return OpaqueReason.NO_TENSOR_VALUE
    if static_shape(node) is None:
        return OpaqueReason.DYNAMIC_SHAPE
    return OpaqueReason.UNSUPPORTED_ARGUMENTS


def read_node(node: fx.Node, index: Callable[[fx.Node], int], keys: dict[str, str]) -> Term:
    """The term for one FX node, read by the op registered for its target; unknown ops become opaque."""
    name = op_name(node.target)

    def key() -> str:
        return keys.setdefault(_opaque_key(node), f"{name}{KEY_MARK}{len(keys)}")

    op = ops.BY_TARGET.get(name) if node.op == "call_function" and not touches_special_dtype(node) else None
    term = op.read(node, index, key) if op is not None else None
    return term if term is not None else ops.OPAQUE.read(node, index, key)


def _load_rule(table: str) -> tuple[str, str]:
    """The declaration of a fact table ("<op>_<n>") and the rule that builds its terms."""
    op, n = table.rsplit("_", 1)
    cols, body = ops.REGISTRY[op].load_rule(int(n))
    sorts = ["i64"] + ["String" if c == "key" else "i64" for c in cols]
    declaration = f"(relation Load{table} ({' '.join(sorts)}))"
    row = f"(Load{table} out {' '.join(cols)})"
    rule = f"(rule ({row}) ((union (Node out) {body}) (delete {row})) :ruleset load)"
    return declaration, rule


WIDEST_TABLE = 64
"""The most values a row of a bulk-load table holds. egglog compiles a table's load rule with one variable per
column, and compiling one grows faster than its width: EfficientNet-B0's per-channel RESCALEs of up to 1152
channels (tables of up to 2310 columns) took 33 s to load in a fresh process, against under 3 s with each wider
row loaded as a program of its own (`_load_command`; all of them as one program ran out of 24 GB in egglog's
parser). The zoo's widest rows (128 channels, 262 columns) are wider than this too."""


def _load_command(table: str, row: list) -> str:
    """The load rule of table applied to one row, as a command of its own: the rule's term, its column variables
    replaced by the row's values (strings quoted)."""
    op, n = table.rsplit("_", 1)
    cols, body = ops.REGISTRY[op].load_rule(int(n))
    values = dict(zip(["out", *cols], row))

    def literal(match: re.Match) -> str:
        name = match.group(0)
        if name not in values:
            return name
        value = values[name]
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"' if name == "key" else str(value)

    return f"(union (Node {row[0]}) {re.sub(r'[A-Za-z_][A-Za-z0-9_]*', literal, body)})"


def _shape_row(i: int, node: fx.Node) -> tuple[str, list] | None:
    shape = static_shape(node)
    if shape is None:
        return None
    return f"Shape_{len(shape)}", [i, str(tensor_val(node).dtype), *shape]


def _shape_rule(table: str) -> tuple[str, str]:
    n = int(table.rsplit("_", 1)[1])
    dims = [f"d{k}" for k in range(n)]
    declaration = f"(relation Load{table} (i64 String {' '.join(['i64'] * n)}))"
    row = f"(Load{table} out dt {' '.join(dims)})"
    rule = f"(rule ({row}) ((set (shape (Node out)) {vec(dims)}) (set (dtype (Node out)) dt) (delete {row})) :ruleset load)"
    return declaration, rule


def _write_tables(rows: dict[str, list[list]], directory: str) -> dict[str, str]:
    paths = {}
    for table, table_rows in rows.items():
        path = os.path.join(directory, f"{table}.tsv")
        with open(path, "w") as f:
            f.writelines("\t".join(str(v) for v in row) + "\n" for row in table_rows)
        paths[table] = path
    return paths


def _loaded_nodes(graph: fx.Graph) -> Iterator[fx.Node]:
    return (n for n in graph.nodes if n.op != "output")


@dataclass
class Read:
    """An FX graph as terms, without an e-graph: `terms[i]` is `nodes[i]` read (args are node indices),
    `outputs` the node index of each output slot that is a node."""

    nodes: list[fx.Node]
    terms: list[Term]
    outputs: list[int]

    def graph(self) -> dict[int, Term]:
        return dict(enumerate(self.terms))

    def type_of(self, index: int) -> TensorType | None:
        return tensor_type(self.nodes[index])

    def as_ir(self) -> Graph:
        """The graph as plain data, with the names of its nodes."""
        return Graph([n.name for n in self.nodes], self.terms, [tensor_type(n) for n in self.nodes], self.outputs)

    def opaque_reasons(self) -> dict[str, dict[OpaqueReason, int]]:
        """For each op read as opaque, how many of its nodes were, for each reason (opaque_reason); by op name."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for node, term in zip(self.nodes, self.terms):
            if term.op == ops.OPAQUE.name and node.op == "call_function":
                counts[op_name(node.target)][opaque_reason(node)] += 1
        return {op: dict(sorted(reasons.items())) for op, reasons in sorted(counts.items())}


def read_graph(graph_module: fx.GraphModule) -> Read:
    """Every node of graph_module as a term, as to_egraph reads it: what a graph costs is priced from this."""
    nodes = list(_loaded_nodes(graph_module.graph))
    index_of = {n: i for i, n in enumerate(nodes)}
    keys: dict[str, str] = {}
    terms_read = [read_node(n, index_of.__getitem__, keys) for n in nodes]
    slots = output_slots(graph_module.graph)
    return Read(nodes, terms_read, [index_of[s] for s in slots if isinstance(s, fx.Node)])


CHECKPOINT_EVERY = 256
"""Nodes read or written between two calls of a caller's checkpoint."""


def _checkpointed(items: Iterable, checkpoint: Callable[[], None] | None) -> Iterator:
    """The items, calling checkpoint (which may raise to stop the caller) every CHECKPOINT_EVERY of them."""
    for k, item in enumerate(items):
        if checkpoint is not None and k % CHECKPOINT_EVERY == 0:
            checkpoint()
        yield item


ZERO_SIZE_REFUSAL = "the graph has zero-size tensors, which TOSA cannot represent (every dimension must be at least 1)"
"""The reason a graph with a zero-size dimension is refused (returned untouched)."""


def to_egraph(
    graph_module: fx.GraphModule,
    *,
    merge_duplicates: bool = False,
    checkpoint: Callable[[], None] | None = None,
    into: EGraph | None = None,
) -> Loaded:
    """Read every node of the graph into a fresh e-graph, in bulk.

    into: an empty e-graph that declares the term language (eqsat.terms.declare) to load into instead:
    the pass's (eqsat.rules.scratch_egraph) has the rules already added.

    merge_duplicates: put nodes that compute the same value in one e-class
    (`duplicate_pairs`: every pure op but the input RESCALEs that Vela fuses
    into each reader), so that extraction computes each value once.
    checkpoint: called every CHECKPOINT_EVERY nodes and before the bulk load; it
    may raise to abandon loading (the pass's deadline).
    """
    slots = output_slots(graph_module.graph)
    effects = [n for n in graph_module.graph.nodes if n.op == "call_function" and not n.users and n.is_impure()]
    if effects:  # write-back emits what the outputs read: these would be lost
        names = ", ".join(f"{n.name} ({op_name(n.target)})" for n in effects[:3])
        raise ValueError(f"the graph has nodes with side effects that nothing reads: {names}")
    empty = [n for n in graph_module.graph.nodes if (shape := static_shape(n)) is not None and 0 in shape]
    if empty:  # TOSA requires every dimension >= 1; Vela 5.1 crashes on such a graph (docs/arm_hazards.md)
        names = ", ".join(f"{n.name} {list(static_shape(n))}" for n in empty[:3])
        raise ValueError(f"{ZERO_SIZE_REFUSAL}: {names}")
    nodes = list(_loaded_nodes(graph_module.graph))
    index_of = {n: i for i, n in enumerate(nodes)}
    keys: dict[str, str] = {}
    terms_read = [read_node(n, index_of.__getitem__, keys) for n in _checkpointed(nodes, checkpoint)]
    prototypes: dict[str, fx.Node] = {}
    for node, term in zip(nodes, terms_read):
        if ops.REGISTRY[term.op].keyed:
            prototypes.setdefault(term.attrs[0], node)

    rows: dict[str, list[list]] = defaultdict(list)
    shape_rows: dict[str, list[list]] = defaultdict(list)
    wide: list[str] = []
    for i, (node, term) in enumerate(zip(nodes, terms_read)):
        table, row = ops.REGISTRY[term.op].fact_row(i, term)
        if len(row) > WIDEST_TABLE:
            wide.append(_load_command(table, row))
        else:
            rows[table].append(row)
        if (shape_row := _shape_row(i, node)) is not None:
            shape_rows[shape_row[0]].append(shape_row[1])

    if checkpoint is not None:
        checkpoint()
    egraph = into if into is not None else EGraph()
    if into is None:
        terms.declare(egraph)
    program = ["(ruleset load)"]
    for table in rows:
        program.extend(_load_rule(table))
    for table in shape_rows:
        program.extend(_shape_rule(table))
    pairs = duplicate_pairs(nodes) if merge_duplicates else []
    with tempfile.TemporaryDirectory(prefix="eqsat-load-") as directory:
        paths = _write_tables({**rows, **shape_rows}, directory)
        program.extend(f'(input Load{table} "{path}")' for table, path in paths.items())
        program.append("(run load 1)")
        program.extend(f"(union (Node {i}) (Node {j}))" for i, j in pairs)
        egraph._run_program(*egraph._egraph.parse_program("\n".join(program)))
    for command in _checkpointed(wide, checkpoint):  # one program each: egglog's parser grows with a program's size
        egraph._run_program(*egraph._egraph.parse_program(command))

    outputs = [index_of[s] if isinstance(s, fx.Node) else None for s in slots]
    return Loaded(
        egraph=egraph,
        graph_module=graph_module,
        nodes=nodes,
        terms=terms_read,
        outputs=outputs,
        output_literals=slots,
        prototypes=prototypes,
        dialect=detect_dialect(graph_module),
        index_of=index_of,
        merged_duplicates=len(pairs),
    )


# ---------------------------------------------------------------- writing back


INHERITED_META = ("stack_trace", "nn_module_stack", "debug_handle", "delegation_tag", "from_node", "custom")
"""Meta a new node takes from the original node it stands in for."""


class _Emitter:
    """Builds the FX graph for a selection of e-nodes, one class at a time.

    A new node's `val` meta is a FakeTensor made from its e-class's type when the
    e-graph knows it (`types`), in the graph's fake mode; otherwise FX runs the
    op on its operands' FakeTensors (about ten times slower: 0.2-0.7 ms a node).
    """

    def __init__(
        self,
        loaded: Loaded,
        selection: dict[str, Term],
        class_of_node: list[str],
        checkpoint: Callable[[], None] | None = None,
        types: dict[str, TensorType] | None = None,
    ):
        self.loaded = loaded
        self.types = types or {}
        fakes = (n.meta.get("val") for n in loaded.graph_module.graph.nodes)
        self.fake = next((v for v in fakes if isinstance(v, FakeTensor)), None)
        self.checkpoint = checkpoint
        self.written = 0
        self.selection = selection
        self.class_of_node = class_of_node
        self.graph = fx.Graph()
        self.emitted: dict[str, fx.Node] = {}
        self.original_term = {}
        self.first_node_of_class: dict[str, fx.Node] = {}
        for i, term in enumerate(loaded.terms):
            self.first_node_of_class.setdefault(class_of_node[i], loaded.nodes[i])
            as_classes = term.with_args(tuple(class_of_node[a] for a in term.args))
            self.original_term.setdefault((class_of_node[i], as_classes), loaded.nodes[i])
        targets = {op_name(n.target) for n in loaded.graph_module.graph.nodes if n.op == "call_function"}
        self.uses_edge_ops = any(isinstance(n.target, EdgeOpOverload) for n in loaded.graph_module.graph.nodes)
        tosa_dialect = loaded.dialect == Dialect.TOSA
        self.slices_as_tosa = tosa_dialect or "tosa.SLICE.default" in targets
        self.shapes_as_const_shape = tosa_dialect or "tosa.CONST_SHAPE.default" in targets
        self.pads_as_tosa = tosa_dialect or "tosa.PAD.default" in targets

    def placeholders(self) -> None:
        for node in self.loaded.nodes:
            if node.op == "placeholder":
                self.emitted[self.class_of_node[self.loaded.index_of[node]]] = self.graph.node_copy(node)

    def emit(self, eclass: str) -> fx.Node:
        """The FX node computing eclass, emitting its operands first (iteratively)."""
        stack = [eclass]
        while stack:
            current = stack[-1]
            if current in self.emitted:
                stack.pop()
                continue
            missing = [a for a in self.selection[current].args if a not in self.emitted]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            if self.checkpoint is not None and self.written % CHECKPOINT_EVERY == 0:
                self.checkpoint()
            self.written += 1
            self.emitted[current] = self._emit_one(current, self.selection[current])
        return self.emitted[eclass]

    def _emit_one(self, eclass: str, term: Term) -> fx.Node:
        original = self.original_term.get((eclass, term))
        if original is not None:
            return self._copy_original(original)
        operands = [self.emitted[a] for a in term.args]
        return ops.REGISTRY[term.op].emit(_Writing(self, eclass, term), term, operands)

    def _copy_original(self, original: fx.Node) -> fx.Node:
        return self.graph.node_copy(
            original, lambda arg: self.emit(self.class_of_node[self.loaded.index_of[arg]])
        )

    def _call(self, target: Any, args: tuple, kwargs: dict, source: fx.Node, known: TensorType | None) -> fx.Node:
        """A new node computing one tensor, of type `known` when that is known."""
        node = self.graph.call_function(target, args, kwargs)
        node.meta.update({key: source.meta[key] for key in INHERITED_META if key in source.meta})
        self._set_val(node, known)
        return node

    def _set_val(self, node: fx.Node, known: TensorType | None) -> None:
        if known is not None and known.dtype is not None and self.fake is not None:
            dtype = getattr(torch, known.dtype.removeprefix("torch."))
            meta = torch.empty(known.shape, dtype=dtype, device="meta")
            node.meta["val"] = FakeTensor(self.fake.fake_mode, meta, self.fake.device)
            return
        fake_args, fake_kwargs = map_aggregate(
            (node.args, node.kwargs), lambda a: a.meta["val"] if isinstance(a, fx.Node) else a
        )
        node.meta["val"] = node.target(*fake_args, **fake_kwargs)

    def _aten(self, name: str, overload: str) -> Any:
        packet = getattr(exir_ops.edge.aten if self.uses_edge_ops else torch.ops.aten, name)
        return getattr(packet, overload)

    def _const_shape(self, values: tuple[int, ...], source: fx.Node) -> fx.Node:
        node = self.graph.call_function(TOSA.CONST_SHAPE.default, (list(values),))
        node.meta.update({key: source.meta[key] for key in INHERITED_META if key in source.meta})
        node.meta["val"] = list(values)
        node.meta[TosaSpecialDtype.meta_key()] = TosaSpecialDtype.SHAPE
        return node

    def _keep_special_dtype(self, node: fx.Node, eclass: str) -> None:
        """A new node standing in for an original node stored in a special TOSA dtype (INT48, ...) is stored in it too.

        The reader keeps rules off such tensors, so this is a second line of defence, not the guard itself.
        """
        original = self.first_node_of_class.get(eclass)
        if original is not None and (marked := special_dtype(original)) is not None:
            node.meta[TosaSpecialDtype.meta_key()] = marked

    def finish(self) -> fx.GraphModule:
        slots = [
            self.emit(self.class_of_node[i]) if i is not None else literal
            for i, literal in zip(self.loaded.outputs, self.loaded.output_literals)
        ]
        original_output = output_node(self.loaded.graph_module.graph)
        packed = type(original_output.args[0])(slots) if isinstance(original_output.args[0], (list, tuple)) else slots[0]
        output = self.graph.output(packed)
        output.meta.update(original_output.meta)
        self.graph.eliminate_dead_code()
        self.graph.lint()
        # Lazy: Python code is generated when the module is first called or its code read, not here. The
        # pass's caller (EqsatPass) recompiles the module it copies this graph into anyway, and generating
        # the code of a 28,000-node graph twice took about a second.
        return _LazyGraphModule(self.loaded.graph_module, self.graph)


class _Writing:
    """The `eqsat.ops.Writer` of one new e-class: the write-back as an op's emitter sees it."""

    def __init__(self, emitter: _Emitter, eclass: str, term: Term):
        self._emitter, self._eclass, self._term = emitter, eclass, term
        self.dialect = emitter.loaded.dialect
        self.slices_as_tosa = emitter.slices_as_tosa
        self.shapes_as_const_shape = emitter.shapes_as_const_shape
        self.pads_as_tosa = emitter.pads_as_tosa
        self.original = emitter.first_node_of_class.get(eclass)

    def _source(self) -> fx.Node:
        """An original node whose meta (stack trace, module, qparams) the new node inherits."""
        return self.original or self._emitter.emitted[self._term.args[0]]

    def call(self, target: Any, args: tuple, kwargs: dict, computes: TensorType | None = None) -> fx.Node:
        known = computes if computes is not None else self._emitter.types.get(self._eclass)
        return self._emitter._call(target, args, kwargs, self._source(), known)

    def const_shape(self, values: tuple[int, ...]) -> fx.Node:
        return self._emitter._const_shape(values, self._source())

    def aten(self, name: str, overload: str) -> Any:
        return self._emitter._aten(name, overload)

    def copy_prototype(self, key: str, operands: list[fx.Node], edit: Callable[[fx.Node], None] | None = None) -> fx.Node:
        remaining = iter(operands)
        node = self._emitter.graph.node_copy(self._emitter.loaded.prototypes[key], lambda _arg: next(remaining))
        if edit is not None:
            edit(node)
        known = self._emitter.types.get(self._eclass) if isinstance(node.meta.get("val"), torch.Tensor) else None
        self._emitter._set_val(node, known)
        return node

    def keep_special_dtype(self, node: fx.Node) -> None:
        self._emitter._keep_special_dtype(node, self._eclass)

    def inherit_input_qparams(self, node: fx.Node, operands: list[fx.Node]) -> None:
        """A new data-movement node is quantized as its first operand."""
        qparams = operands[0].meta.get("output_qparams")
        if qparams is not None and node is not operands[0]:
            node.meta["input_qparams"] = {k: qparams.get(0) for k in range(len(operands))} if isinstance(qparams, dict) else {}
            node.meta["output_qparams"] = qparams


def to_fx(
    loaded: Loaded,
    selection: dict[str, Term],
    class_of_node: list[str],
    *,
    checkpoint: Callable[[], None] | None = None,
    types: dict[str, TensorType] | None = None,
) -> fx.GraphModule:
    """Write the selected e-nodes back as a new GraphModule.

    `selection` maps each needed e-class to its chosen term (args are e-class
    ids); `class_of_node[i]` is the e-class of `Node(i)`. Placeholders are all
    kept, in their original order, because the program signature names them.
    checkpoint: called every CHECKPOINT_EVERY nodes written and before FX
    finishes the graph (dead-code elimination, lint, code generation); it may
    raise to abandon the write-back (the pass's deadline).
    types: the e-graph's type of each e-class (EGraphView.types), from which new nodes get their `val`
    meta; without it, FX computes each one from the operands'.
    """
    emitter = _Emitter(loaded, selection, class_of_node, checkpoint, types)
    emitter.placeholders()
    for i in loaded.outputs:
        if i is not None:
            emitter.emit(class_of_node[i])  # in finish's order; finish then only assembles the output
    if checkpoint is not None:
        checkpoint()
    return emitter.finish()


@dataclass
class WrittenEnode:
    """One e-node written alone (`write_every_enode`): its e-class and term, the FX nodes computing it in
    order (its result last), and the e-classes whose stand-ins they read."""

    eclass: str
    term: Term
    nodes: list[fx.Node]
    reads: list[str]


def write_every_enode(
    loaded: Loaded, candidates: dict[str, list[Term]], class_of_node: list[str], types: dict[str, TensorType]
) -> tuple[dict[fx.Node, str], list[WrittenEnode]]:
    """Every e-node of a saturated e-graph written as write-back writes it, each on its own, reading
    one placeholder per e-class that stands in for that class's value (for eqsat.soundness, which runs
    each e-node on its operands' values). Returns the e-class of each stand-in and the written e-nodes."""
    emitter = _Emitter(loaded, {}, class_of_node, types=types)
    stand_in: dict[fx.Node, str] = {}
    first_node = {c: loaded.nodes[i] for i, c in reversed(list(enumerate(class_of_node)))}
    for eclass in dict.fromkeys([*candidates, *class_of_node]):
        node = emitter.graph.placeholder(f"class_{eclass.replace('-', '_')}")
        if eclass in types and types[eclass].dtype is not None and emitter.fake is not None:
            emitter._set_val(node, types[eclass])
        elif eclass in first_node and "val" in first_node[eclass].meta:
            node.meta["val"] = first_node[eclass].meta["val"]
        emitter.emitted[eclass] = node
        stand_in[node] = eclass
    written = []
    for eclass, eclass_terms in candidates.items():
        for term in eclass_terms:
            before = len(emitter.graph.nodes)
            result = emitter._emit_one(eclass, term)
            new = itertools.islice(reversed(emitter.graph.nodes), len(emitter.graph.nodes) - before)
            nodes = list(new)[::-1]
            if not nodes or nodes[-1] is not result:  # an emitter may return an operand as it is
                nodes.append(result)
            reads = [stand_in[n] for node in nodes for n in [node, *node.all_input_nodes] if n in stand_in]
            written.append(WrittenEnode(eclass, term, nodes, list(dict.fromkeys(reads))))
    return stand_in, written
