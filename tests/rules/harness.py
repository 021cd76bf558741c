"""Shared checks for rule tests: the package's soundness checker (eqsat.soundness), re-exported."""

from eqsat.soundness import BUDGET, Saturated

__all__ = ["BUDGET", "Saturated"]
