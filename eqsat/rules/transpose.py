"""Transpose algebra: identity, composition, and propagation through elementwise ops.

A transpose that meets its inverse cancels through composition and identity;
propagation moves a transpose across the ops between it and its inverse
(decomposed norms, rescales, activations) so that the two can meet.
"""

from __future__ import annotations

from egglog import String, Vec, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.guards import is_identity_perm, same_length, single_operand
from eqsat.terms import Tensor

x = var("x", Tensor)
p, q = var("p", Vec[i64]), var("q", Vec[i64])
key = var("key", String)
operands = var("operands", Vec[Tensor])

transpose = ruleset(name="transpose")


@transpose.register
def _transpose_algebra():
    # transpose(x, p) == x  when p is the identity permutation
    yield law("transpose-identity", x.transpose(p), x, *is_identity_perm(p))
    # transpose(transpose(x, p), q) == transpose(x, p∘q), where (p∘q)[i] = p[q[i]]
    yield law("transpose-compose", x.transpose(p).transpose(q), x.transpose(q.map(p.__getitem__)), *same_length(p, q))


@transpose.register
def _transpose_through_elementwise():
    # transpose(f(x), p) == f(transpose(x, p))  for a unary elementwise f
    yield law(
        "transpose-through-unary",
        Tensor.elementwise(key, operands).transpose(p),
        Tensor.elementwise(key, Vec(x.transpose(p))),
        *single_operand(operands, x),
    )
