"""`law`: a named tensor rewrite, so the run report can count it (egglog names rules, not rewrites)."""

from __future__ import annotations

from egglog import Fact, RewriteOrRule, eq, rule, union, var

from eqsat.terms import Tensor


def law(name: str, lhs: Tensor, rhs: Tensor, *conditions: Fact) -> RewriteOrRule:
    """lhs == rhs under conditions, as a rule named name that unions rhs into lhs's e-class."""
    root = var("root", Tensor)
    return rule(eq(root).to(lhs), *conditions, name=name).then(union(root).with_(rhs))
