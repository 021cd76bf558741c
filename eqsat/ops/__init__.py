"""The op registry: everything eqsat knows about each modelled op, one file per op.

Each file holds, for its op, the FX targets in both dialects (TOSA and edge
ATen), how a node is read into an `ir.Term`, the fact rows and load rule that
put the term into the e-graph, how a new term is emitted back into FX, and
the op's exact reference semantics (TOSA specification, REQUIREs and ERROR_IFs checked).
`REGISTRY` maps each term constructor (`Term.op`) to its `Op`; `BY_TARGET`
maps each FX target name to the op that reads it. The bridge, the reference
evaluator (`ops.reference`) and the tests loop over them.

Adding an op is one file here, its constructor in `eqsat.terms`, and its laws.
"""

from __future__ import annotations

from eqsat.ops import concat, elementwise, opaque, pad, reduce, reshape, rescale, slice, table, transpose
from eqsat.ops.nodes import op_name
from eqsat.ops._op import Op, RequireViolation, Writer, vec

REGISTRY: dict[str, Op] = {
    module.OP.name: module.OP
    for module in (transpose, concat, slice, reshape, pad, rescale, table, reduce, elementwise, opaque)
}
"""Every modelled op, by the name of its term constructor."""

BY_TARGET: dict[str, Op] = {target: op for op in REGISTRY.values() for target in op.targets}
"""The op that reads each FX target (a node it does not fit is read as opaque)."""

OPAQUE = REGISTRY["Opaque"]

__all__ = ["BY_TARGET", "OPAQUE", "REGISTRY", "Op", "RequireViolation", "Writer", "op_name", "vec"]
