"""FX ⇄ e-graph translation.

`to_egraph` reads an FX graph of the Arm pipeline into an egglog e-graph, and
`to_fx` writes a chosen set of e-nodes back as an FX graph.

The bridge knows the op registry (which FX targets are which terms) and
nothing about rules or costs.

Loading is bulk (DESIGN §3): each node becomes one row of a fact table, written
to a TSV file and read with egglog's `input`; one generated rule per table
then builds the terms, unions them with the node handles `Node(i)` and deletes
the row (so the serialized e-graph stays small). Vectors are only ever built
inside those rules, where egglog builds them cheaply.

Back-translation reuses every original FX node whose term was chosen
unchanged (keeping all its meta) and builds new nodes in the dialect the graph
was given: TOSA dialect after `ExirToTosaPass`, edge ATen before it.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import executorch.backends.arm.tosa.dialect  # noqa: F401  (registers the tosa ops)
import torch
from egglog import EGraph
from executorch.backends.arm.tosa.mapping import TosaSpecialDtype
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.backend._ops import BackendOpOverload
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from torch import fx
from torch.fx.node import map_aggregate

from eqsat.ir import TensorType, Term
from eqsat import terms

TOSA = exir_ops.backend.tosa


# ---------------------------------------------------------------- terms


def tensor_type(node: fx.Node) -> TensorType | None:
    """The static type of an FX node's tensor value, or None for dynamic shapes and non-tensors."""
    shape = _static_shape(node)
    return None if shape is None else TensorType(shape, str(node.meta["val"].dtype))


def op_name(target: Any) -> str:
    """The dotted name of an FX target: 'tosa.TRANSPOSE.default', 'aten.cat.default'."""
    if isinstance(target, str):
        return target
    if isinstance(target, (EdgeOpOverload, BackendOpOverload)):
        return str(target._op)
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', repr(target))}"


def _tensor_val(node: fx.Node) -> torch.Tensor | None:
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _static_shape(node: fx.Node) -> tuple[int, ...] | None:
    val = _tensor_val(node)
    if val is None or not all(isinstance(d, int) for d in val.shape):
        return None
    return tuple(int(d) for d in val.shape)


def _const_shape_values(arg: Any) -> tuple[int, ...] | None:
    """The literal ints of a CONST_SHAPE node or of a plain int list."""
    if isinstance(arg, fx.Node):
        if op_name(arg.target) != "tosa.CONST_SHAPE.default":
            return None
        arg = arg.args[0]
    if isinstance(arg, (list, tuple)) and all(isinstance(v, int) for v in arg):
        return tuple(int(v) for v in arg)
    return None


def _normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# ---------------------------------------------------------------- registry
# A reader turns one FX node into a Term, or returns None when the node does
# not fit the modelled op (then it is read as an opaque term).

Reader = Callable[[fx.Node, Callable[[fx.Node], int]], "Term | None"]


def _read_transpose(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    x, perm = node.args[0], node.args[1]
    rank = len(perm)
    return Term("Transpose", (index(x),), (tuple(_normalize_axis(p, rank) for p in perm),))


def _output_qparams(node: Any) -> Any:
    qparams = node.meta.get("output_qparams") if isinstance(node, fx.Node) else None
    return qparams.get(0) if isinstance(qparams, dict) else None


def requantizes_inputs(node: fx.Node) -> bool:
    """Whether a concat's inputs are quantized differently from its output, so it is not pure data movement.

    The Arm quantizer shares one qspec across a cat's inputs and output, but
    FoldAndAnnotateQParamsPass keeps only the first input's qparams for the
    whole list (`_merge_qparams`), so the node's own input_qparams cannot show
    a mismatch: compare each input producer's output_qparams (and the folded
    input_qparams) with the concat's output_qparams. Unknown qparams are no
    evidence of a mismatch.
    """
    out = _output_qparams(node)
    if out is None:
        return False
    folded = node.meta.get("input_qparams")
    seen = [_output_qparams(part) for part in node.args[0]]
    if isinstance(folded, dict):
        seen.extend(folded.values())
    return any(q is not None and q != out for q in seen)


def _read_concat(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    parts = node.args[0]
    axis = node.kwargs.get("axis", node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0))
    shape = _static_shape(node)
    if shape is None or not parts or requantizes_inputs(node):
        return None
    return Term("Concat", tuple(index(p) for p in parts), (_normalize_axis(axis, len(shape)),))


def _read_tosa_slice(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    start, size = _const_shape_values(node.args[1]), _const_shape_values(node.args[2])
    if start is None or size is None:
        return None
    return Term("Slice", (index(node.args[0]),), (start, size))


def _read_aten_slice(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """aten slice_copy(self, dim=0, start=None, end=None, step=1), arguments given by position or keyword;
    a step other than 1 stays opaque."""
    arguments = {"dim": 0, "start": None, "end": None, "step": 1, **dict(zip(("self", "dim", "start", "end", "step"), node.args)), **node.kwargs}
    x, dim, start, step = arguments["self"], arguments["dim"], arguments["start"], arguments["step"]
    in_shape, out_shape = _static_shape(x), _static_shape(node)
    if in_shape is None or out_shape is None or step != 1:
        return None
    dim = _normalize_axis(dim, len(in_shape))
    begin = 0 if start is None else min(max(start + in_shape[dim] if start < 0 else start, 0), in_shape[dim])
    starts = tuple(begin if d == dim else 0 for d in range(len(in_shape)))
    return Term("Slice", (index(x),), (starts, out_shape))


def _read_reshape(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    shape = _static_shape(node)
    if shape is None:
        return None
    return Term("Reshape", (index(node.args[0]),), (shape,))


def _integral(value: Any) -> int | None:
    """value as an int if it is a whole number (a pad constant), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value != int(value):
        return None
    return int(value)


def _read_tosa_pad(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """TOSA PAD(x, CONST_SHAPE [before_0, after_0, ...], value=v) with a whole-number pad value."""
    x, padding = node.args[0], _const_shape_values(node.args[1]) if len(node.args) > 1 else None
    value = _integral(node.kwargs.get("value", 0))
    shape = _static_shape(x) if isinstance(x, fx.Node) else None
    if padding is None or value is None or shape is None or len(padding) != 2 * len(shape) or min(padding, default=0) < 0:
        return None
    return Term("Pad", (index(x),), (padding, value))


def _read_aten_pad(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """aten constant_pad_nd(x, [last_before, last_after, ...], value): pairs from the last dim backwards; no cropping."""
    x, pad = node.args[0], node.args[1]
    value = _integral(node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0))
    shape = _static_shape(x) if isinstance(x, fx.Node) else None
    if shape is None or value is None or not isinstance(pad, (list, tuple)) or len(pad) % 2 or len(pad) > 2 * len(shape):
        return None
    if not all(isinstance(v, int) and v >= 0 for v in pad):
        return None
    pairs = [pad[i : i + 2] for i in range(0, len(pad), 2)][::-1]
    padding = (0, 0) * (len(shape) - len(pairs)) + tuple(int(v) for pair in pairs for v in pair)
    return Term("Pad", (index(x),), (padding, value))


RESCALE_DTYPES = ("torch.int8", "torch.int16", "torch.int32")


def rescale_multipliers(scales: list[float]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The TOSA multipliers and shifts the Arm serializer derives from float scales (scale32), or None if it cannot."""
    from executorch.backends.arm.operators.op_tosa_rescale import _compute_multiplier_and_shift

    try:
        multipliers, shifts = _compute_multiplier_and_shift([float(v) for v in scales], 32)
    except (AssertionError, ValueError, OverflowError):
        return None
    return tuple(multipliers), tuple(shifts)


def rescale_scales(multipliers: tuple[int, ...], shifts: tuple[int, ...]) -> list[float]:
    """The float scales that serialize back to exactly these multipliers and shifts (multiplier * 2^-shift)."""
    return [math.ldexp(m, -s) for m, s in zip(multipliers, shifts)]


def _read_rescale(node: fx.Node, index: Callable[[fx.Node], int]) -> Term | None:
    """A signed scale32 RESCALE; unsigned variants and unknown dtypes stay elementwise/opaque."""
    if len(node.args) < 5:
        return None
    x, out_dtype, scales, in_zp, out_zp = node.args[:5]
    unsigned = any(node.kwargs.get(k, False) for k in ("input_unsigned", "output_unsigned")) or any(node.args[5:7])
    x_val, shape = _tensor_val(x) if isinstance(x, fx.Node) else None, _static_shape(node)
    if unsigned or x_val is None or shape is None or str(x_val.dtype) not in RESCALE_DTYPES:
        return None
    if str(out_dtype) not in RESCALE_DTYPES or not scales or (len(scales) > 1 and (not shape or len(scales) != shape[-1])):
        return None
    exact = rescale_multipliers(list(scales))
    if exact is None:
        return None
    return Term("Rescale", (index(x),), (str(out_dtype), exact[0], exact[1], int(in_zp), int(out_zp), index(node)))


MODELLED_OPS: dict[str, Reader] = {
    "tosa.TRANSPOSE.default": _read_transpose,
    "aten.permute_copy.default": _read_transpose,
    "tosa.CONCAT.default": _read_concat,
    "aten.cat.default": _read_concat,
    "aten.concat.default": _read_concat,
    "aten.concatenate.default": _read_concat,
    "tosa.SLICE.default": _read_tosa_slice,
    "aten.slice_copy.Tensor": _read_aten_slice,
    "tosa.RESHAPE.default": _read_reshape,
    "aten.view_copy.default": _read_reshape,
    "tosa.RESCALE.default": _read_rescale,
    "tosa.PAD.default": _read_tosa_pad,
    "aten.constant_pad_nd.default": _read_aten_pad,
}
"""FX targets read as data-movement terms."""

ELEMENTWISE_OPS = frozenset(
    {
        "tosa.ADD.default",
        "tosa.SUB.default",
        "tosa.MUL.default",
        "tosa.CLAMP.default",
        "tosa.CAST.default",
        "aten.add.Tensor",
        "aten.sub.Tensor",
        "aten.mul.Tensor",
        "aten.clamp.default",
        "aten.relu.default",
        "aten.neg.default",
        "aten.abs.default",
        "aten.bitwise_not.default",
        "aten.maximum.default",
        "aten.minimum.default",
    }
)
"""FX targets read as `Elementwise`: each output element depends only on the
operands' elements at the same broadcast position."""


REDUCE_OPS = frozenset(
    {
        "tosa.REDUCE_SUM.default",
        "tosa.REDUCE_MAX.default",
        "tosa.REDUCE_MIN.default",
        "aten.sum.dim_IntList",
        "aten.amax.default",
        "aten.amin.default",
    }
)
"""FX targets read as `Reduce`: one axis, the reduced dim kept with size 1."""


def reduce_axis(node: fx.Node) -> int | None:
    """The single kept-dim axis a reduction node reduces, or None if it is not of that form."""
    x, shape = node.args[0], _static_shape(node)
    if not isinstance(x, fx.Node) or shape is None or _static_shape(x) is None:
        return None
    if op_name(node.target).startswith("tosa."):
        axis = node.kwargs.get("axis", node.args[1] if len(node.args) > 1 else None)
    else:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if not keepdim or not isinstance(dims, (list, tuple)) or len(dims) != 1:
            return None
        axis = dims[0]
    if not isinstance(axis, int) or len(shape) != len(_static_shape(x)):
        return None
    return _normalize_axis(axis, len(shape))


def with_reduce_axis(node: fx.Node, axis: int) -> tuple[tuple, dict]:
    """The args and kwargs of a copy of reduction node that reduces axis instead."""
    args, kwargs = list(node.args), dict(node.kwargs)
    if op_name(node.target).startswith("tosa."):
        if "axis" in kwargs:
            kwargs["axis"] = axis
        else:
            args[1] = axis
    elif "dim" in kwargs:
        kwargs["dim"] = [axis]
    else:
        args[1] = [axis]
    return tuple(args), kwargs


TABLE_OPS = frozenset({"tosa.TABLE.default"})
"""FX targets read as `Table`: an elementwise lookup of the first operand in the second (a constant)."""


def _is_table(node: fx.Node) -> bool:
    return (
        op_name(node.target) in TABLE_OPS
        and len(node.args) == 2
        and not node.kwargs
        and all(isinstance(a, fx.Node) for a in node.args)
        and _static_shape(node) is not None
        and _static_shape(node.args[0]) == _static_shape(node)
    )


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
    return special_dtype(node) is not None or any(special_dtype(a) is not None for a in _node_args(node))


def _is_per_tensor_rescale(node: fx.Node) -> bool:
    return op_name(node.target) == "tosa.RESCALE.default" and len(node.args[2]) == 1


# ---------------------------------------------------------------- loading


@dataclass
class Loaded:
    """An FX graph read into an e-graph.

    `nodes[i]` is the FX node behind `Node(i)`, `terms[i]` the term it was read
    as (args are node indices), `outputs` the node index of each output slot
    (None for a non-node slot, kept as `output_literals`), and `prototypes`
    the FX node that each opaque or elementwise key was read from.
    """

    egraph: EGraph
    graph_module: fx.GraphModule
    nodes: list[fx.Node]
    terms: list[Term]
    outputs: list[int | None]
    output_literals: list[Any]
    prototypes: dict[str, fx.Node]
    dialect: str
    index_of: dict[fx.Node, int] = field(default_factory=dict)


def detect_dialect(graph_module: fx.GraphModule) -> str:
    """'aten' while edge ATen data movement is still present, else 'tosa'."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and op_name(node.target).startswith("aten.") and (
            op_name(node.target) in MODELLED_OPS
        ):
            return "aten"
    return "tosa"


def _key_part(value: Any) -> str:
    if isinstance(value, fx.Node):
        return "$"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_key_part(v) for v in value) + "]"
    return repr(value)


def _opaque_key(node: fx.Node, merge_duplicates: bool) -> str:
    """What makes two nodes the same op: target, non-tensor args, output type.

    Impure ops, placeholders and get_attr nodes are unique by name, and so is
    every node unless merge_duplicates: then identical pure ops on the same
    inputs become one term (common-subexpression elimination).
    """
    parts = [node.op, op_name(node.target), _key_part(node.args), _key_part(node.kwargs)]
    val = node.meta.get("val")
    parts.append(_key_part(map_aggregate(val, lambda v: (tuple(v.shape), str(v.dtype)) if isinstance(v, torch.Tensor) else v)))
    parts.append(repr(node.meta.get("output_qparams")))
    parts.append(repr(special_dtype(node)))
    if not merge_duplicates or node.op != "call_function" or node.is_impure():
        parts.append(node.name)
    return "|".join(parts)


def _node_args(node: fx.Node) -> list[fx.Node]:
    """The FX nodes among a node's args and kwargs, in order."""
    found: list[fx.Node] = []
    map_aggregate((node.args, node.kwargs), lambda a: found.append(a) if isinstance(a, fx.Node) else a)
    return found


def read_node(
    node: fx.Node, index: Callable[[fx.Node], int], keys: dict[str, str], merge_duplicates: bool = False
) -> Term:
    """The term for one FX node, via the registry; unknown ops become opaque."""
    name = op_name(node.target)
    if node.op == "call_function" and touches_special_dtype(node):
        key = keys.setdefault(_opaque_key(node, merge_duplicates), f"{name}#{len(keys)}")
        return Term("Opaque", tuple(index(a) for a in _node_args(node)), (key,))
    if node.op == "call_function" and name in MODELLED_OPS and _tensor_val(node) is not None:
        term = MODELLED_OPS[name](node, index)
        if term is not None and term.op == "Rescale" and merge_duplicates:
            return Term(term.op, term.args, (*term.attrs[:5], 0))  # one tag: identical rescales share a term
        if term is not None:
            return term
    full_key = _opaque_key(node, merge_duplicates)
    key = keys.setdefault(full_key, f"{name}#{len(keys)}")
    if node.op == "call_function" and name in REDUCE_OPS and (axis := reduce_axis(node)) is not None:
        return Term("Reduce", (index(node.args[0]),), (key, axis))
    if node.op == "call_function" and _is_table(node):
        return Term("Table", (index(node.args[0]), index(node.args[1])), (key,))
    is_elementwise = node.op == "call_function" and (name in ELEMENTWISE_OPS or _is_per_tensor_rescale(node))
    op = "Elementwise" if is_elementwise and _tensor_val(node) is not None else "Opaque"
    return Term(op, tuple(index(a) for a in _node_args(node)), (key,))


def _fact_row(i: int, term: Term) -> tuple[str, list]:
    """The fact table and the row that load term `i`."""
    if term.op == "Transpose":
        return f"Transpose_{len(term.attrs[0])}", [i, *term.args, *term.attrs[0]]
    if term.op == "Concat":
        return f"Concat_{len(term.args)}", [i, *term.args, term.attrs[0]]
    if term.op == "Slice":
        return f"Slice_{len(term.attrs[0])}", [i, *term.args, *term.attrs[0], *term.attrs[1]]
    if term.op == "Reshape":
        return f"Reshape_{len(term.attrs[0])}", [i, *term.args, *term.attrs[0]]
    if term.op == "Reduce":
        return "Reduce_1", [i, term.attrs[0], *term.args, term.attrs[1]]
    if term.op == "Pad":
        padding, value = term.attrs
        return f"Pad_{len(padding)}", [i, *term.args, *padding, value]
    if term.op == "Table":
        return "Table_2", [i, term.attrs[0], *term.args]
    if term.op == "Rescale":
        out_dtype, multipliers, shifts, in_zp, out_zp, tag = term.attrs
        return f"Rescale_{len(multipliers)}", [i, *term.args, out_dtype, *multipliers, *shifts, in_zp, out_zp, tag]
    return f"{term.op}_{len(term.args)}", [i, term.attrs[0], *term.args]


def _vec(names: list[str]) -> str:
    return f"(vec-of {' '.join(names)})" if names else "(vec-empty)"


def _build_rule(table: str) -> tuple[str, str]:
    """The declaration of a fact table and the rule that builds its terms."""
    op, n = table.rsplit("_", 1)
    n = int(n)
    xs = [f"x{k}" for k in range(n)]
    refs = [f"(Node {x})" for x in xs]
    if op == "Transpose":
        cols, body = ["x0", *[f"p{k}" for k in range(n)]], f"(Transpose (Node x0) {_vec([f'p{k}' for k in range(n)])})"
    elif op == "Concat":
        cols, body = [*xs, "axis"], f"(Concat {_vec(refs)} axis)"
    elif op == "Slice":
        starts, sizes = [f"s{k}" for k in range(n)], [f"z{k}" for k in range(n)]
        cols, body = ["x0", *starts, *sizes], f"(Slice (Node x0) {_vec(starts)} {_vec(sizes)})"
    elif op == "Reshape":
        dims = [f"d{k}" for k in range(n)]
        cols, body = ["x0", *dims], f"(Reshape (Node x0) {_vec(dims)})"
    elif op == "Reduce":
        cols, body = ["key", "x0", "axis"], "(Reduce key (Node x0) axis)"
    elif op == "Pad":
        pads = [f"p{k}" for k in range(n)]
        cols, body = ["x0", *pads, "value"], f"(Pad (Node x0) {_vec(pads)} value)"
    elif op == "Table":
        cols, body = ["key", "x0", "x1"], "(Table key (Node x0) (Node x1))"
    elif op == "Rescale":
        ms, ss = [f"m{k}" for k in range(n)], [f"s{k}" for k in range(n)]
        cols, body = ["x0", "key", *ms, *ss, "izp", "ozp", "tag"], f"(Rescale (Node x0) key {_vec(ms)} {_vec(ss)} izp ozp tag)"
    else:
        cols, body = ["key", *xs], f"({op} key {_vec(refs)})"
    sorts = ["i64"] + ["String" if c == "key" else "i64" for c in cols]
    declaration = f"(relation Load{table} ({' '.join(sorts)}))"
    row = f"(Load{table} out {' '.join(cols)})"
    rule = f"(rule ({row}) ((union (Node out) {body}) (delete {row})) :ruleset load)"
    return declaration, rule


def _shape_row(i: int, node: fx.Node) -> tuple[str, list] | None:
    shape = _static_shape(node)
    if shape is None:
        return None
    return f"Shape_{len(shape)}", [i, str(_tensor_val(node).dtype), *shape]


def _shape_rule(table: str) -> tuple[str, str]:
    n = int(table.rsplit("_", 1)[1])
    dims = [f"d{k}" for k in range(n)]
    declaration = f"(relation Load{table} (i64 String {' '.join(['i64'] * n)}))"
    row = f"(Load{table} out dt {' '.join(dims)})"
    rule = f"(rule ({row}) ((set (shape (Node out)) {_vec(dims)}) (set (dtype (Node out)) dt) (delete {row})) :ruleset load)"
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


def read_graph(graph_module: fx.GraphModule) -> Read:
    """Every node of graph_module as a term, as to_egraph reads it: what a graph costs is priced from this."""
    nodes = list(_loaded_nodes(graph_module.graph))
    index_of = {n: i for i, n in enumerate(nodes)}
    keys: dict[str, str] = {}
    terms_read = [read_node(n, index_of.__getitem__, keys, False) for n in nodes]
    output_node = next(n for n in graph_module.graph.nodes if n.op == "output")
    slots = list(output_node.args[0]) if isinstance(output_node.args[0], (list, tuple)) else [output_node.args[0]]
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
    graph_module: fx.GraphModule, *, merge_duplicates: bool = False, checkpoint: Callable[[], None] | None = None
) -> Loaded:
    """Read every node of the graph into a fresh e-graph, in bulk.

    merge_duplicates: let identical pure opaque and elementwise ops share one
    term. Off by default: Vela fuses a RESCALE into each consumer separately,
    so merging duplicates can cost cycles (measured +18 % on one U55 model).
    checkpoint: called every CHECKPOINT_EVERY nodes and before the bulk load; it
    may raise to abandon loading (the pass's deadline).
    """
    output_node = next((n for n in graph_module.graph.nodes if n.op == "output"), None)
    if output_node is None:
        raise ValueError("the graph has no output node")
    effects = [n for n in graph_module.graph.nodes if n.op == "call_function" and not n.users and n.is_impure()]
    if effects:  # write-back emits what the outputs read: these would be lost
        names = ", ".join(f"{n.name} ({op_name(n.target)})" for n in effects[:3])
        raise ValueError(f"the graph has nodes with side effects that nothing reads: {names}")
    empty = [n for n in graph_module.graph.nodes if (shape := _static_shape(n)) is not None and 0 in shape]
    if empty:  # TOSA requires every dimension >= 1; Vela 5.1 crashes on such a graph (docs/arm_hazards.md)
        names = ", ".join(f"{n.name} {list(_static_shape(n))}" for n in empty[:3])
        raise ValueError(f"{ZERO_SIZE_REFUSAL}: {names}")
    nodes = list(_loaded_nodes(graph_module.graph))
    index_of = {n: i for i, n in enumerate(nodes)}
    keys: dict[str, str] = {}
    terms_read = [read_node(n, index_of.__getitem__, keys, merge_duplicates) for n in _checkpointed(nodes, checkpoint)]
    prototypes: dict[str, fx.Node] = {}
    for node, term in zip(nodes, terms_read):
        if term.op in ("Opaque", "Elementwise", "Reduce", "Table"):
            prototypes.setdefault(term.attrs[0], node)

    rows: dict[str, list[list]] = defaultdict(list)
    shape_rows: dict[str, list[list]] = defaultdict(list)
    for i, (node, term) in enumerate(zip(nodes, terms_read)):
        table, row = _fact_row(i, term)
        rows[table].append(row)
        if (shape_row := _shape_row(i, node)) is not None:
            shape_rows[shape_row[0]].append(shape_row[1])

    if checkpoint is not None:
        checkpoint()
    egraph = EGraph()
    terms.declare(egraph)
    program = ["(ruleset load)"]
    for table in rows:
        program.extend(_build_rule(table))
    for table in shape_rows:
        program.extend(_shape_rule(table))
    with tempfile.TemporaryDirectory(prefix="eqsat-load-") as directory:
        paths = _write_tables({**rows, **shape_rows}, directory)
        program.extend(f'(input Load{table} "{path}")' for table, path in paths.items())
        program.append("(run load 1)")
        egraph._run_program(*egraph._egraph.parse_program("\n".join(program)))

    slots = list(output_node.args[0]) if isinstance(output_node.args[0], (list, tuple)) else [output_node.args[0]]
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
    )


# ---------------------------------------------------------------- writing back


INHERITED_META = ("stack_trace", "nn_module_stack", "debug_handle", "delegation_tag", "from_node", "custom")
"""Meta a new node takes from the original node it stands in for."""


class _Emitter:
    """Builds the FX graph for a selection of e-nodes, one class at a time."""

    def __init__(
        self, loaded: Loaded, selection: dict[str, Term], class_of_node: list[str], checkpoint: Callable[[], None] | None = None
    ):
        self.loaded = loaded
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
        tosa_dialect = loaded.dialect == "tosa"
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
        if term.op in ("Opaque", "Elementwise", "Table"):
            return self._emit_from_prototype(term)
        if term.op == "Reduce":
            return self._emit_reduce(term)
        return self._emit_data_movement(term, self._source_node(eclass, term), eclass)

    def _copy_original(self, original: fx.Node) -> fx.Node:
        return self.graph.node_copy(
            original, lambda arg: self.emit(self.class_of_node[self.loaded.index_of[arg]])
        )

    def _emit_from_prototype(self, term: Term) -> fx.Node:
        prototype = self.loaded.prototypes[term.attrs[0]]
        operands = iter(self.emit(a) for a in term.args)
        node = self.graph.node_copy(prototype, lambda _arg: next(operands))
        self._set_val(node)
        return node

    def _emit_reduce(self, term: Term) -> fx.Node:
        prototype = self.loaded.prototypes[term.attrs[0]]
        x = self.emit(term.args[0])
        node = self.graph.node_copy(prototype, lambda _arg: x)
        node.args, node.kwargs = with_reduce_axis(node, term.attrs[1])
        self._set_val(node)
        return node

    def _source_node(self, eclass: str, term: Term) -> fx.Node:
        """An original node whose meta (stack trace, module, qparams) the new node inherits."""
        return self.first_node_of_class.get(eclass) or self.emitted[term.args[0]]

    def _call(self, target: Any, args: tuple, kwargs: dict, source: fx.Node) -> fx.Node:
        node = self.graph.call_function(target, args, kwargs)
        node.meta.update({key: source.meta[key] for key in INHERITED_META if key in source.meta})
        self._set_val(node)
        return node

    def _set_val(self, node: fx.Node) -> None:
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

    def _emit_data_movement(self, term: Term, source: fx.Node, eclass: str) -> fx.Node:
        operands = [self.emitted[a] for a in term.args]
        x = operands[0]
        if term.op == "Transpose":
            perm = list(term.attrs[0])
            if self.loaded.dialect == "tosa":
                node = self._call(TOSA.TRANSPOSE.default, (x, perm), {}, source)
            else:
                node = self._call(self._aten("permute_copy", "default"), (x, perm), {}, source)
        elif term.op == "Concat":
            if self.loaded.dialect == "tosa":
                node = self._call(TOSA.CONCAT.default, (operands,), {"axis": term.attrs[0]}, source)
            else:
                node = self._call(self._aten("cat", "default"), (operands, term.attrs[0]), {}, source)
        elif term.op == "Slice" and self.slices_as_tosa:
            start, size = term.attrs
            node = self._call(
                TOSA.SLICE.default,
                (x, self._const_shape(start, source), self._const_shape(size, source)),
                {},
                source,
            )
        elif term.op == "Slice":
            node = self._aten_slices(x, term.attrs, source)
        elif term.op == "Rescale":
            out_dtype, multipliers, shifts, in_zp, out_zp, _tag = term.attrs
            args = (x, getattr(torch, out_dtype.removeprefix("torch.")), rescale_scales(multipliers, shifts), in_zp, out_zp)
            node = self._call(TOSA.RESCALE.default, args, {}, source)
            original = self.first_node_of_class.get(eclass)
            for key in ("input_qparams", "output_qparams"):
                if original is not None and key in original.meta:
                    node.meta[key] = original.meta[key]
            self._keep_special_dtype(node, eclass)
            return node
        elif term.op == "Pad":
            node = self._emit_pad(x, term.attrs, source)
        elif term.op == "Reshape":
            shape = self._const_shape(term.attrs[0], source) if self.shapes_as_const_shape else list(term.attrs[0])
            target = TOSA.RESHAPE.default if self.loaded.dialect == "tosa" else self._aten("view_copy", "default")
            node = self._call(target, (x, shape), {}, source)
        else:
            raise ValueError(f"no emitter for {term.op}")
        self._keep_special_dtype(node, eclass)
        qparams = x.meta.get("output_qparams")
        if qparams is not None and node is not x:
            node.meta["input_qparams"] = {k: qparams.get(0) for k in range(len(operands))} if isinstance(qparams, dict) else {}
            node.meta["output_qparams"] = qparams
        return node

    def _keep_special_dtype(self, node: fx.Node, eclass: str) -> None:
        """A new node standing in for an original node stored in a special TOSA dtype (INT48, ...) is stored in it too.

        The reader keeps rules off such tensors, so this is a second line of defence, not the guard itself.
        """
        original = self.first_node_of_class.get(eclass)
        if original is not None and (marked := special_dtype(original)) is not None:
            node.meta[TosaSpecialDtype.meta_key()] = marked

    def _emit_pad(self, x: fx.Node, attrs: tuple, source: fx.Node) -> fx.Node:
        """TOSA PAD with a new CONST_SHAPE padding, or aten constant_pad_nd (pairs from the last dim backwards)."""
        padding, value = attrs
        constant = float(value) if x.meta["val"].dtype.is_floating_point else int(value)
        if self.pads_as_tosa:
            return self._call(TOSA.PAD.default, (x, self._const_shape(padding, source)), {"value": constant}, source)
        pairs = [list(padding[i : i + 2]) for i in range(0, len(padding), 2)][::-1]
        flat = [v for pair in pairs for v in pair]
        return self._call(self._aten("constant_pad_nd", "default"), (x, flat, constant), {}, source)

    def _aten_slices(self, x: fx.Node, box: tuple, source: fx.Node) -> fx.Node:
        """One slice_copy per dimension the box cuts (the input itself if it cuts none)."""
        start, size = box
        full = tuple(x.meta["val"].shape)
        for dim, (begin, extent) in enumerate(zip(start, size)):
            if (begin, extent) != (0, full[dim]):
                x = self._call(self._aten("slice_copy", "Tensor"), (x, dim, begin, begin + extent), {}, source)
        return x

    def finish(self) -> fx.GraphModule:
        slots = [
            self.emit(self.class_of_node[i]) if i is not None else literal
            for i, literal in zip(self.loaded.outputs, self.loaded.output_literals)
        ]
        original_output = next(n for n in self.loaded.graph_module.graph.nodes if n.op == "output")
        packed = type(original_output.args[0])(slots) if isinstance(original_output.args[0], (list, tuple)) else slots[0]
        output = self.graph.output(packed)
        output.meta.update(original_output.meta)
        self.graph.eliminate_dead_code()
        self.graph.lint()
        return fx.GraphModule(self.loaded.graph_module, self.graph)


def to_fx(
    loaded: Loaded, selection: dict[str, Term], class_of_node: list[str], *, checkpoint: Callable[[], None] | None = None
) -> fx.GraphModule:
    """Write the selected e-nodes back as a new GraphModule.

    `selection` maps each needed e-class to its chosen term (args are e-class
    ids); `class_of_node[i]` is the e-class of `Node(i)`. Placeholders are all
    kept, in their original order, because the program signature names them.
    checkpoint: called every CHECKPOINT_EVERY nodes written and before FX
    finishes the graph (dead-code elimination, lint, code generation); it may
    raise to abandon the write-back (the pass's deadline).
    """
    emitter = _Emitter(loaded, selection, class_of_node, checkpoint)
    emitter.placeholders()
    for i in loaded.outputs:
        if i is not None:
            emitter.emit(class_of_node[i])  # in finish's order; finish then only assembles the output
    if checkpoint is not None:
        checkpoint()
    return emitter.finish()
