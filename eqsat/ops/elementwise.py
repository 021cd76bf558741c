"""Ops whose output element depends only on the operands' elements at the same (broadcast) position.

Read as `Elementwise`, keyed like an opaque op (the key names the op and its
other arguments); a new one is a copy of the node its key was read from, on
new operands. A per-tensor RESCALE that is not read as a Rescale term is read
as elementwise by `ops.rescale`.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from eqsat.ir import Term
from eqsat.ops.nodes import node_args, tensor_val
from eqsat.ops._op import Op, Writer, keyed_fact_row, keyed_load_rule, require

TARGETS = frozenset(
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


def read(node: fx.Node, index: Callable[[fx.Node], int], key: Callable[[], str]) -> Term | None:
    if tensor_val(node) is None:
        return None
    return Term("Elementwise", tuple(index(a) for a in node_args(node)), (key(),))


def output_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The broadcast shape of the operands (numpy's rule, which TOSA's elementwise ops follow)."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    return tuple(max(dims) if min(dims) != 0 else 0 for dims in zip(*padded))


def emit(out: Writer, term: Term, operands: list[fx.Node]) -> fx.Node:
    return out.copy_prototype(term.attrs[0], operands)


def _int32_arithmetic(combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], name: str) -> Callable[..., torch.Tensor]:
    def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """TOSA ADD/SUB on int32 with broadcasting; the result must fit int32 (apply_add_s/apply_sub_s's REQUIRE)."""
        if a.dtype != torch.int32 or b.dtype != torch.int32:
            raise NotImplementedError(f"TOSA {name} reference for int32 operands only, got {a.dtype} and {b.dtype}")
        wide = combine(a.to(torch.int64), b.to(torch.int64))
        require(bool(((wide >= -(2**31)) & (wide <= 2**31 - 1)).all()), f"the {name} result fits int32")
        return wide.to(torch.int32)

    return reference


def _mul(a: torch.Tensor, b: torch.Tensor, *, shift: int = 0) -> torch.Tensor:
    """TOSA MUL to int32 with broadcasting: int8/int16 operands multiply exactly (shift 0); int32 operands
    multiply in 64 bits, round by shift and must fit int32 (the spec's REQUIRE)."""
    if a.dtype != b.dtype or a.dtype not in (torch.int8, torch.int16, torch.int32):
        raise NotImplementedError(f"TOSA MUL reference for equal integer operand types only, got {a.dtype} and {b.dtype}")
    require(a.dtype == torch.int32 or shift == 0, "shift == 0 for 8- and 16-bit operands")
    product = a.to(torch.int64) * b.to(torch.int64)
    if shift > 0:
        product = (product + (1 << (shift - 1))) >> shift
    require(bool(((product >= -(2**31)) & (product <= 2**31 - 1)).all()), "the MUL result fits int32")
    return product.to(torch.int32)


def _clamp(x: torch.Tensor, low, high, *, nan_mode: str = "PROPAGATE") -> torch.Tensor:
    return x.clamp(low, high)


def _cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """TOSA CAST between integer types: sign-extends when widening, keeps the low bits when narrowing."""
    if x.dtype.is_floating_point or dtype.is_floating_point:
        raise NotImplementedError(f"CAST reference between integer types only, got {x.dtype} -> {dtype}")
    return x.to(dtype)


OP = Op(
    name="Elementwise",
    targets=TARGETS,
    read=read,
    fact_row=keyed_fact_row,
    load_rule=keyed_load_rule("Elementwise"),
    emit=emit,
    output_shape=lambda term, inputs: output_shape(inputs),
    reference={
        "tosa.ADD.default": _int32_arithmetic(torch.add, "ADD"),
        "tosa.SUB.default": _int32_arithmetic(torch.sub, "SUB"),
        "tosa.MUL.default": _mul,
        "tosa.CLAMP.default": _clamp,
        "tosa.CAST.default": _cast,
    },
    keyed=True,
)
