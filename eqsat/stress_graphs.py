"""Graphs with hundreds of same-parameter terms, for the rule-scaling tests and the stress benchmark.

A rule whose query joins k atoms of one table that share their parameters does
about n^k work on n such terms (DESIGN §3, "k-way self-joins explode"). Each
graph here holds `count` terms of one kind with identical parameters, feeding
concats of 2 to 16 inputs (arity cycling through 2..16), so that such a rule
would meet n^k candidate matches while the true matches stay few. TOSA-dialect
ops: build them inside a TosaLoweringContext.
"""

from __future__ import annotations

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch import fx

from eqsat.graph_builder import GraphBuilder

TOSA = exir_ops.backend.tosa

KINDS = ("rescale", "transpose", "table", "slice", "adjacent-slice", "nested-concat", "reduce", "reshaped-concat")


def arity_groups(count: int, low: int = 2, high: int = 16) -> list[range]:
    """Consecutive index ranges covering 0..count-1 with lengths cycling low, low + 1, ..., high (the last may be shorter, never below low)."""
    groups, begin, arity = [], 0, low
    while begin + low <= count:
        end = min(begin + arity, count)
        groups.append(range(begin, end))
        begin, arity = end, low + (arity - low + 1) % (high - low + 1)
    return groups


def same_parameter_graph(kind: str, count: int, low: int = 2, high: int = 16) -> fx.GraphModule:
    """count terms of one kind with identical parameters, feeding concats of low..high inputs (outputs: the concats).

    - rescale: RESCALE(x_i, int32, scale 0.25, zp 1 -> 0), concats along axis 1;
    - transpose: TRANSPOSE(x_i, [0, 2, 3, 1]), concats along the last axis, each also transposed back;
    - table: TABLE(x_i, one shared lookup table), concats along axis 1;
    - slice: `count` slices of one tensor, each group concatenated in reverse order (a circular shift does so),
      so adjacent slices never meet in order;
    - adjacent-slice: the same slices, each group concatenated in order (a run of adjacent slices);
    - nested-concat: `count` concats of two inputs each, the groups of them concatenated along the same axis;
    - reduce: REDUCE_MAX(x_i, innermost axis), concats along axis 1;
    - reshaped-concat: RESHAPE(x_i, (1, 4, 3)) of (1, 1, 4, 3) inputs, concats along the last axis, each reshaped back to 4-D.
    """
    g = GraphBuilder()
    groups = arity_groups(count, low, high)
    outputs = []
    if kind == "rescale":
        terms = [g.call(TOSA.RESCALE.default, g.input(f"x{i}", (1, 4)), torch.int32, [0.25], 1, 0) for i in range(count)]
        outputs = [g.call(TOSA.CONCAT.default, [terms[i] for i in group], axis=1) for group in groups]
    elif kind == "transpose":
        terms = [g.call(TOSA.TRANSPOSE.default, g.input(f"x{i}", (1, 2, 3, 4)), [0, 2, 3, 1]) for i in range(count)]
        for group in groups:
            joined = g.call(TOSA.CONCAT.default, [terms[i] for i in group], axis=3)
            outputs += [joined, g.call(TOSA.TRANSPOSE.default, joined, [0, 3, 1, 2])]
    elif kind == "table":
        lut = g.constant("lut", torch.arange(-128, 128, dtype=torch.int8).flip(0).contiguous())
        terms = [g.call(TOSA.TABLE.default, g.input(f"x{i}", (1, 4)), lut) for i in range(count)]
        outputs = [g.call(TOSA.CONCAT.default, [terms[i] for i in group], axis=1) for group in groups]
    elif kind in ("slice", "adjacent-slice"):
        x = g.input("x", (1, 4 * count))
        terms = [g.call(TOSA.SLICE.default, x, g.const_shape((0, 4 * i)), g.const_shape((1, 4))) for i in range(count)]
        order = reversed if kind == "slice" else list
        outputs = [g.call(TOSA.CONCAT.default, [terms[i] for i in order(group)], axis=1) for group in groups]
    elif kind == "nested-concat":
        terms = [g.call(TOSA.CONCAT.default, [g.input(f"a{i}", (1, 4)), g.input(f"b{i}", (1, 4))], axis=1) for i in range(count)]
        outputs = [g.call(TOSA.CONCAT.default, [terms[i] for i in group], axis=1) for group in groups]
    elif kind == "reduce":
        terms = [g.call(TOSA.REDUCE_MAX.default, g.input(f"x{i}", (1, 4, 8)), axis=2) for i in range(count)]
        outputs = [g.call(TOSA.CONCAT.default, [terms[i] for i in group], axis=1) for group in groups]
    elif kind == "reshaped-concat":
        terms = [g.call(TOSA.RESHAPE.default, g.input(f"x{i}", (1, 1, 4, 3)), g.const_shape((1, 4, 3))) for i in range(count)]
        for group in groups:
            joined = g.call(TOSA.CONCAT.default, [terms[i] for i in group], axis=2)
            outputs.append(g.call(TOSA.RESHAPE.default, joined, g.const_shape((1, 1, 4, 3 * len(group)))))
    else:
        raise ValueError(f"unknown kind {kind!r}; known: {KINDS}")
    return g.output(*outputs)
