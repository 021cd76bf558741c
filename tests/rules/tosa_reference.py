"""The rule tests run TOSA-dialect FX graphs with the registry's exact reference evaluator (`eqsat.ops.reference`,
the one the fuzzer uses: RESCALE with the TOSA specification's REQUIREs and ERROR_IFs, a violated one raises).

Inputs aim at the edges (`edge_inputs`): each integer element is, with equal odds, uniform over the input's range,
one end of that range, or a zero point of a RESCALE reading the input or one next to it. The range is the dtype's
whole range when the original graph accepts it (int32 included: [-2^31, 2^31)), else the largest power of two
[-2^b, 2^b) on which the original meets every REQUIRE (a RESCALE of a wide or scaled-up input allows fewer bits):
so a law is checked on the domain where the graph means something, up to its edges, and the rewritten graphs must
accept the same inputs.

`as_tosa` writes an ATen data-movement graph in the TOSA dialect (RESHAPE and SLICE with CONST_SHAPE operands,
TRANSPOSE, CONCAT), so one generator exercises both forms a law reads.
"""

from __future__ import annotations

import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from executorch.exir.dialects._ops import ops as exir_ops
from torch import fx

from eqsat.ops import RequireViolation
from eqsat.ops.nodes import Dialect, op_name, output_slots
from eqsat.ops.reference import evaluate
from eqsat.soundness import Saturated, check_every_enode
from tests.graphs import GraphBuilder

TOSA = exir_ops.backend.tosa
SMALLEST_RANGE_BITS = 7
"""The narrowest input range tried, [-2^7, 2^7): a graph that refuses even that is not a legal original."""


def zero_points_of(graph_module: fx.GraphModule) -> dict[fx.Node, set[int]]:
    """For each placeholder, the input zero points of the RESCALEs that read it."""
    found: dict[fx.Node, set[int]] = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and op_name(node.target) == "tosa.RESCALE.default" and node.args[0].op == "placeholder":
            found.setdefault(node.args[0], set()).add(int(node.args[3]))
    return found


def draw_edges(shape: tuple[int, ...], dtype: torch.dtype, bits: int, zero_points: set[int], generator: torch.Generator) -> torch.Tensor:
    """A tensor over [-2^bits, 2^bits) ∩ dtype's range: a third uniform, a third at the two ends, a third on or next to a zero point."""
    low, high = max(torch.iinfo(dtype).min, -(2**bits)), min(torch.iinfo(dtype).max, 2**bits - 1)
    special = torch.tensor(sorted({low, high} | {v for zp in zero_points | {0} for v in (zp - 1, zp, zp + 1) if low <= v <= high}), dtype=torch.int64)
    uniform = torch.randint(low, high + 1, shape, generator=generator, dtype=torch.int64)
    ends = torch.where(torch.randint(0, 2, shape, generator=generator).bool(), low, high)
    near_zero_points = special[torch.randint(0, len(special), shape, generator=generator)]
    kind = torch.randint(0, 3, shape, generator=generator)
    return torch.where(kind == 0, uniform, torch.where(kind == 1, ends, near_zero_points)).to(dtype)


def edge_inputs(graph_module: fx.GraphModule, seed: int) -> list[torch.Tensor] | None:
    """Inputs at the edges of the widest range (see the module header) that the original graph accepts, or None when it
    accepts none. Deterministic per seed."""
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    zero_points = zero_points_of(graph_module)
    widest = max(torch.iinfo(n.meta["val"].dtype).bits - 1 for n in placeholders)
    for bits in range(widest, SMALLEST_RANGE_BITS - 1, -1):
        generator = torch.Generator().manual_seed(seed)
        inputs = [draw_edges(tuple(n.meta["val"].shape), n.meta["val"].dtype, bits, zero_points.get(n, set()), generator) for n in placeholders]
        try:
            evaluate(graph_module, inputs)
        except RequireViolation:
            continue
        return inputs
    return None


def is_legal(graph_module: fx.GraphModule) -> bool:
    """The original graph accepts some input range (generators draw only legal originals)."""
    return all(edge_inputs(graph_module, seed) is not None for seed in range(2))


def assert_every_extraction_agrees(saturated, input_seeds: int = 2) -> int:
    """Every e-node of the saturated e-graph agrees with its e-class (soundness.check_every_enode, which also
    compares the number of outputs) on edge_inputs, the widest boundary inputs the original accepts: then every
    extraction computes what the original does. Returns the e-nodes evaluated per draw."""
    draws = [edge_inputs(saturated.graph_module, seed) for seed in range(input_seeds)]
    assert all(d is not None for d in draws), "the original graph refuses every input range"
    return check_every_enode(saturated.loaded, saturated.view, draws)

ATEN = torch.ops.aten


def as_tosa(graph_module: fx.GraphModule) -> fx.GraphModule:
    """The graph with each ATen view, permute, slice and cat written as TOSA RESHAPE, TRANSPOSE, SLICE and CONCAT
    (shapes and boxes as CONST_SHAPE operands, as the Arm backend emits them); other ops kept. Call inside a
    TosaLoweringContext."""
    g = GraphBuilder()
    built: dict[fx.Node, fx.Node] = {}
    for node in graph_module.graph.nodes:
        args = fx.node.map_arg(node.args, built.__getitem__)
        if node.op == "placeholder":
            built[node] = g.input(node.name, tuple(node.meta["val"].shape), node.meta["val"].dtype)
        elif node.op == "output":
            return g.output(*fx.node.map_arg(output_slots(graph_module.graph), built.__getitem__))
        elif node.target == ATEN.view_copy.default:
            built[node] = g.call(TOSA.RESHAPE.default, args[0], g.const_shape(list(args[1])))
        elif node.target == ATEN.permute_copy.default:
            built[node] = g.call(TOSA.TRANSPOSE.default, args[0], list(args[1]))
        elif node.target == ATEN.slice_copy.Tensor:
            shape = list(node.args[0].meta["val"].shape)
            dim, begin, end = args[1] % len(shape), args[2], min(args[3], shape[args[1]])
            start, size = [0] * len(shape), list(shape)
            start[dim], size[dim] = begin, end - begin
            built[node] = g.call(TOSA.SLICE.default, args[0], g.const_shape(start), g.const_shape(size))
        elif node.target == ATEN.cat.default:
            built[node] = g.call(TOSA.CONCAT.default, list(args[0]), axis=args[1] % node.meta["val"].dim())
        else:
            built[node] = g.call(node.target, *args, **node.kwargs)
    raise ValueError("graph has no output node")


def assert_sound_in(dialect: Dialect, graph_module: fx.GraphModule, *rulesets) -> None:
    """Saturate the ATen graph_module with rulesets, as drawn or written in TOSA (as_tosa), and check every extraction
    on edge_inputs with the exact reference (which runs ATen ops as themselves)."""
    with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT+int16")):  # int16 data movement: the extension
        graph_module = as_tosa(graph_module) if dialect == Dialect.TOSA else graph_module
        assert_every_extraction_agrees(Saturated(graph_module, *rulesets))
