"""The term language as plain data: what the bridge reads, the extractors choose and the cost model prices.

No torch, no egglog: the extractors and the cost model import this module,
never the FX bridge.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_RANK = 6
"""The largest tensor rank of the TOSA profile the Arm backend targets (and that Vela compiles)."""


class Term(NamedTuple):
    """One e-node in Python: a constructor of eqsat.terms, its tensor operands and attributes.

    `args` are node indices when the term is read from FX and e-class ids when
    it is read from the e-graph. `attrs` per op:
    Transpose (perm,), Concat (axis,), Slice (start, size), Reshape (shape,),
    Rescale (dtype, multipliers, shifts, in_zp, out_zp, tag), Reduce (key, axis),
    Pad (padding, value), Opaque, Elementwise and Table (key,) (Table's args are
    its input and its lookup table).
    """

    op: str
    args: tuple
    attrs: tuple

    def with_args(self, args: tuple) -> Term:
        return Term(self.op, tuple(args), self.attrs)


class TensorType(NamedTuple):
    """The static shape of a tensor and its dtype as torch spells it ("torch.int8"); dtype None if unknown."""

    shape: tuple[int, ...]
    dtype: str | None
