"""The cost model: what one e-node costs on a target, in estimated NPU cycles.

Rules never mention cost; this file alone decides extraction.

`ElementTrafficCost` is the interim model, until the Vela-calibrated one
lands: every op costs the elements it writes, except RESHAPE, which Vela
removes as memory-only. It prefers fewer and smaller data movements and is
the same for every target, so its numbers are not Vela cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from eqsat.bridge_fx import TensorType, Term
from eqsat.extract import vela_cost


class CostModel(Protocol):
    target: str
    unit: str

    def cost(self, term: Term, out: TensorType | None, args: list[TensorType | None]) -> float:
        """The cost of computing term once, given its output and operand types (None: unknown)."""


@dataclass(frozen=True)
class ElementTrafficCost:
    target: str
    unit: str = "elements written (uncalibrated)"

    def cost(self, term: Term, out: TensorType | None, args: list[TensorType | None]) -> float:
        if term.op == "Reshape":
            return 1.0
        if term.op == "Opaque" and not term.args:
            return 0.0
        elements = math.prod(out.shape) if out is not None else 1
        return 1.0 + elements


def cost_model_for(target: str) -> CostModel:
    """The cost model used for target: Vela-calibrated when eqsat/extract/calibration/<target>.json exists.

    Targets nobody calibrated (`eqsat calibrate --target T` does) fall back to ElementTrafficCost.
    """
    if vela_cost.has_calibration(target):
        return vela_cost.VelaCalibratedCost(target)
    return ElementTrafficCost(target)
