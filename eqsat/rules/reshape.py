"""Reshape algebra: collapse and cancel reshapes, and sink them below unary ops.

Vela removes a RESHAPE as memory-only, so reshapes are free moves: chains
collapse, a reshape to the input's own shape is the input, and a reshape
sinks below a unary elementwise op or a TABLE so that it can meet another
data-movement op.

Transpose rank lowering (a transpose as a reshape around a lower-rank
transpose) is a ruleset of its own: eqsat/rules/transpose_rank.py.

Bounds: each rule joins the matched reshape with its operand and its
operand's shape, keyed on the matched term; none joins two terms that only
share parameters.
"""

from __future__ import annotations

from egglog import String, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.guards import single_operand, table_operand_is_not_batched_mac_shape
from eqsat.terms import Tensor, shape

x = var("x", Tensor)
s, s1, s2 = var("s", Vec[i64]), var("s1", Vec[i64]), var("s2", Vec[i64])
key = var("key", String)
operands = var("operands", Vec[Tensor])

reshape = ruleset(name="reshape")


@reshape.register
def _reshape_algebra():
    # reshape(reshape(x, s1), s2) == reshape(x, s2)
    yield law("reshape-reshape", x.reshape(s1).reshape(s2), x.reshape(s2))
    # reshape(x, s) == x  when s == shape(x)
    yield law("reshape-identity", x.reshape(s), x, eq(s).to(shape(x)))


@reshape.register
def _reshape_through_elementwise():
    # reshape(f(x), s) == f(reshape(x, s))  for a unary elementwise f (this direction only, so it terminates)
    yield law(
        "reshape-through-unary",
        Tensor.elementwise(key, operands).reshape(s),
        Tensor.elementwise(key, Vec(x.reshape(s))),
        *single_operand(operands, x),
    )
    lut = var("lut", Tensor)
    # reshape(table(k, x, lut), s) == table(k, reshape(x, s), lut)  (TABLE is elementwise in x; lut stays) unless s is [N,1,1,C], N > 1
    yield law(
        "reshape-through-table",
        Tensor.table(key, x, lut).reshape(s),
        Tensor.table(key, x.reshape(s), lut),
        *table_operand_is_not_batched_mac_shape(s),
    )
