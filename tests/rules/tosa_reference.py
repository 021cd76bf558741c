"""Reference semantics of the TOSA ops the rules touch (RESCALE, PAD, TABLE and data movement), to run TOSA-dialect FX graphs on real tensors.

RESCALE follows the TOSA 1.0 specification exactly (scale32, SINGLE_ROUND,
signed): int64 products, the rounding right shift, zero points, saturation,
and the spec's REQUIREs (a violated one raises: a law that builds an illegal
rescale fails its test). Multipliers and shifts are the ones the Arm
serializer derives from the float scales.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import fx

from eqsat import bridge_fx
from tests.graphs import random_inputs

RANGES = {torch.int8: (-128, 127), torch.int16: (-32768, 32767), torch.int32: (-(2**31), 2**31 - 1)}


def tosa_rescale(x: torch.Tensor, out_dtype: torch.dtype, scales: list[float], in_zp: int, out_zp: int) -> torch.Tensor:
    multipliers, shifts = bridge_fx.rescale_multipliers(scales)
    value = x.numpy().astype(np.int64) - in_zp
    m = np.array(multipliers, dtype=np.int64)  # broadcasts along the last (channel) axis, or per tensor
    s = np.array(shifts, dtype=np.int64)
    assert ((2 <= s) & (s <= 62)).all(), "REQUIRE 2 <= shift <= 62"
    assert (value >= -(np.int64(1) << (s - 1))).all() and (value < (np.int64(1) << (s - 1))).all(), "REQUIRE value range"
    product = value * m  # |value| < 2^31, m < 2^31: no int64 overflow
    result = (product + (np.int64(1) << (s - 1))) >> s  # arithmetic shift: floor
    assert (result >= -(2**31)).all() and (result <= 2**31 - 1).all(), "REQUIRE result fits int32"
    low, high = RANGES[out_dtype]
    return torch.from_numpy(np.clip(result + out_zp, low, high)).to(out_dtype)


def tosa_pad(x: torch.Tensor, padding: list[int], *, value) -> torch.Tensor:
    """TOSA PAD: padding is one (before, after) pair per dim, first dim first."""
    pairs = [padding[i : i + 2] for i in range(0, len(padding), 2)]
    return torch.nn.functional.pad(x, [v for pair in reversed(pairs) for v in pair], value=value)


def tosa_table(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """TOSA TABLE for int8: out = table[x + 128] (the int16 form interpolates; the tests do not use it)."""
    if x.dtype != torch.int8 or table.dtype != torch.int8 or tuple(table.shape) != (256,):
        raise NotImplementedError(f"TABLE reference for int8 only, got {x.dtype} with a {table.dtype}{list(table.shape)} table")
    return table[x.to(torch.int64) + 128]


class TosaReference(fx.Interpreter):
    def call_function(self, target, args, kwargs):
        name = bridge_fx.op_name(target)
        if name == "tosa.RESCALE.default":
            return tosa_rescale(*args)
        if name == "tosa.CONST_SHAPE.default":
            return list(args[0])
        if name == "tosa.TRANSPOSE.default":
            return args[0].permute(list(args[1])).contiguous()
        if name == "tosa.RESHAPE.default":
            return args[0].reshape(list(args[1]))
        if name == "tosa.SLICE.default":
            x, start, size = args
            return x[tuple(slice(b, b + n) for b, n in zip(start, size))].contiguous()
        if name == "tosa.PAD.default":
            return tosa_pad(*args, **kwargs)
        if name == "tosa.TABLE.default":
            return tosa_table(*args)
        if name == "tosa.CONCAT.default":
            return torch.cat(args[0], dim=kwargs["axis"])
        return super().call_function(target, args, kwargs)


def run(graph_module: fx.GraphModule, inputs: list[torch.Tensor]) -> tuple:
    return TosaReference(graph_module).run(*inputs)


def is_legal(graph_module: fx.GraphModule) -> bool:
    """The graph meets every TOSA REQUIRE on the test inputs (generators only draw legal originals)."""
    try:
        for input_seed in range(2):
            run(graph_module, random_inputs(graph_module, input_seed))
    except AssertionError:
        return False
    return True


def assert_every_extraction_agrees(saturated, extractions: int = 6) -> None:
    """Like Saturated.assert_every_extraction_agrees, with TOSA ops run by the reference."""
    for seed in range(extractions):
        candidate = saturated.random_extraction(seed)
        for input_seed in range(2):
            inputs = random_inputs(saturated.graph_module, input_seed)
            for a, b in zip(run(saturated.graph_module, inputs), run(candidate, inputs)):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert torch.equal(a, b)
