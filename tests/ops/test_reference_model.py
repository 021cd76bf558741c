"""The registry's exact semantics agree with the TOSA reference model, REQUIREs and ERROR_IFs included: where
the strict evaluator raises RequireViolation the reference model finishes TOSA_UNPREDICTABLE or TOSA_ERROR,
and elsewhere their outputs are equal."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
import tosa_reference_model
import tosa_serializer as ts

from eqsat.calibration.graphs import _attr, _Graph
from eqsat.ops import RequireViolation
from eqsat.ops.rescale import multiplier_and_shift, reference as rescale, scales_of
from eqsat.ops.table import reference as table
from eqsat.validate import run_reference_model
from tests.tosa_graphs import rescale_graph

RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1)}
TORCH = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32}


def run_model(graph: _Graph, inputs: list[np.ndarray]) -> np.ndarray | None:
    """The reference model's output, or None when it finishes TOSA_UNPREDICTABLE (a REQUIRE failed) or TOSA_ERROR."""
    outputs, status = run_reference_model(graph.tosa.serialize(), inputs)
    if status in (tosa_reference_model.GraphStatus.TOSA_UNPREDICTABLE, tosa_reference_model.GraphStatus.TOSA_ERROR):
        return None
    assert status == tosa_reference_model.GraphStatus.TOSA_VALID, status
    return outputs[0]


def run_ours(semantics, *args) -> np.ndarray | None:
    try:
        return semantics(*args).numpy()
    except RequireViolation:
        return None


def test_rescale_agrees_with_the_reference_model_and_refuses_what_it_refuses():
    rng = random.Random(0)
    outcomes = {"equal": 0, "refused": 0}
    for _ in range(120):
        source, dest = rng.choice(["int8", "int16", "int32"]), rng.choice(["int8", "int16", "int32"])
        shape = [rng.randint(1, 4), rng.randint(1, 5)]
        channels = rng.choice([1, shape[-1]])
        scales = [math.ldexp(rng.uniform(0.5, 1.0), rng.randint(-20, 16)) for _ in range(channels)]
        multipliers, shifts = zip(*(multiplier_and_shift(s) for s in scales))
        in_zp = rng.randint(-128, 127) if source == "int8" or rng.random() < 0.1 else 0  # ERROR_IF: int8 only
        out_zp = rng.randint(-128, 127) if dest == "int8" or rng.random() < 0.1 else 0
        low, high = RANGES[source]
        x = np.array([[rng.randint(low, high) for _ in range(shape[1])] for _ in range(shape[0])], dtype=source)
        expected = run_model(rescale_graph(shape, source, dest, multipliers, shifts, in_zp, out_zp), [x])
        actual = run_ours(rescale, torch.from_numpy(x), TORCH[dest], scales_of(multipliers, shifts), in_zp, out_zp)
        assert (expected is None) == (actual is None), (source, dest, scales, in_zp, x)
        if expected is not None:
            assert np.array_equal(expected, actual) and actual.dtype == expected.dtype
        outcomes["equal" if expected is not None else "refused"] += 1
    assert min(outcomes.values()) >= 10, outcomes  # both sides of the REQUIREs are exercised


def table_graph(dtype: str, values: np.ndarray) -> _Graph:
    g = _Graph()
    x = g.input([256, 256 if dtype == "int16" else 1], dtype)
    lut = g.const([len(values)], dtype, list(values))
    g.output(g.op("op", ts.Op.TABLE, [x, lut], [256, 256 if dtype == "int16" else 1], "int32" if dtype == "int16" else "int8", _attr("TableAttribute")))
    return g


@pytest.mark.parametrize("dtype, entries, spread", [("int8", 256, 128), ("int16", 513, 10_000), ("int16", 513, 32_768)])
def test_table_agrees_with_the_reference_model_on_every_input(dtype, entries, spread):
    low, high = RANGES[dtype]
    values = np.random.default_rng(entries + spread).integers(max(low, -spread), min(high, spread) + 1, size=entries).astype(dtype)
    x = np.arange(low, high + 1).astype(dtype).reshape(256, -1)
    expected = run_model(table_graph(dtype, values), [x])
    actual = run_ours(table, torch.from_numpy(x), torch.from_numpy(values))
    assert (expected is None) == (actual is None)
    if spread == 32_768:
        assert actual is None  # slopes beyond int16: REQUIRE fails on both
    else:
        assert np.array_equal(expected, actual)
