"""CONCAT of the parts along axis. TOSA `CONCAT(xs, axis=)`, edge ATen `cat`/`concat`/`concatenate(xs, dim)`.

A concat whose inputs are quantized differently from its output requantizes: it is not read as a Concat.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import TOSA, Dialect, normalize_axis, static_shape
from eqsat.ops._op import Op, Writer, vec


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


def read(node: fx.Node, index: Callable[[fx.Node], int], key) -> Term | None:
    parts = node.args[0]
    axis = node.kwargs.get("axis", node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0))
    shape = static_shape(node)
    if shape is None or not parts or requantizes_inputs(node):
        return None
    return Term("Concat", tuple(index(p) for p in parts), (normalize_axis(axis, len(shape)),))


def output_shape(shapes: list[tuple[int, ...]], axis: int) -> tuple[int, ...]:
    return tuple(sum(s[axis] for s in shapes) if d == axis else n for d, n in enumerate(shapes[0]))


def fact_row(i: int, term: Term) -> tuple[str, list]:
    return f"Concat_{len(term.args)}", [i, *term.args, term.attrs[0]]


def load_rule(n: int) -> tuple[list[str], str]:
    xs = [f"x{k}" for k in range(n)]
    return [*xs, "axis"], f"(Concat {vec([f'(Node {x})' for x in xs])} axis)"


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    if out.dialect == Dialect.TOSA:
        node = out.call(TOSA.CONCAT.default, (operands,), {"axis": term.attrs[0]})
    else:
        node = out.call(out.aten("cat", "default"), (operands, term.attrs[0]), {})
    out.keep_special_dtype(node)
    out.inherit_input_qparams(node, operands)
    return node


def reference(xs: list[torch.Tensor], axis: int) -> torch.Tensor:
    return torch.cat(xs, axis)


OP = Op(
    name="Concat",
    targets=frozenset({"tosa.CONCAT.default", "aten.cat.default", "aten.concat.default", "aten.concatenate.default"}),
    read=read,
    fact_row=fact_row,
    load_rule=load_rule,
    emit=emit,
    output_shape=lambda term, inputs: output_shape(inputs, term.attrs[0]),
    reference={"tosa.CONCAT.default": reference},
    moves_data=True,
)
