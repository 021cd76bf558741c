"""Hand-built FX graphs for tests: the builder lives in eqsat.graph_builder, the bit-exact comparison in
eqsat.soundness; both are re-exported here, beside the small builders and fuzzer graph specs several test files share."""

import random

import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from torch import fx

from eqsat.fuzz import GraphSpec, Step
from eqsat.graph_builder import GraphBuilder
from eqsat.ops.nodes import TOSA
from eqsat.soundness import assert_bit_identical, random_inputs

__all__ = [
    "GraphBuilder",
    "RELU_CONCAT",
    "TwoConv",
    "assert_bit_identical",
    "permute_graph",
    "random_inputs",
    "tosa_lowering",
    "tosa_pad",
    "tosa_slice",
    "tosa_table",
    "transpose_reshape_chain",
]

aten = torch.ops.aten


def tosa_lowering() -> TosaLoweringContext:
    """The context TOSA dialect ops compute their meta in: the TOSA 1.0 INT profile."""
    return TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT"))


def tosa_slice(g: GraphBuilder, x: fx.Node, start: list[int], size: list[int]) -> fx.Node:
    return g.call(TOSA.SLICE.default, x, g.const_shape(start), g.const_shape(size))


def tosa_pad(g: GraphBuilder, x: fx.Node, padding: list[int], value: int) -> fx.Node:
    return g.call(TOSA.PAD.default, x, g.const_shape(padding), value=value)


def tosa_table(g: GraphBuilder, x: fx.Node, seed: int = 0) -> fx.Node:
    """An int8 TABLE whose lookup table is a permutation of the int8 values, drawn from seed."""
    lut = torch.randperm(256, generator=torch.Generator().manual_seed(seed)).sub(128).to(torch.int8)
    return g.call(TOSA.TABLE.default, x, g.constant(f"lut{seed}", lut))


class TwoConv(torch.nn.Module):
    """conv -> relu -> conv on a (1, 4, H, W) input; everything in it is delegable to Ethos-U."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.second = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def permute_graph():
    """x (1, 2, 3, 4) -> NCHW-to-NHWC permute -> neg."""
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    y = g.call(aten.permute_copy.default, x, [0, 2, 3, 1])
    return g.output(g.call(aten.neg.default, y))


CHAIN_SHAPE = (1, 2, 1, 3, 1, 2)


def transpose_reshape_chain(length: int, seed: int = 0) -> GraphSpec:
    """Alternating rank-6 transposes and reshapes over unit dims: nearly every transpose and reshape law applies
    everywhere, and unbudgeted saturation takes 10 iterations and ~7,000 e-nodes at length 40."""
    rng = random.Random(seed)
    steps, shape = [], CHAIN_SHAPE
    for i in range(length):
        if i % 2 == 0:
            perm = rng.sample(range(6), 6)
            steps.append(Step("transpose", (i,), (tuple(perm),)))
            shape = tuple(shape[p] for p in perm)
        else:
            shape = tuple(rng.sample(shape, 6))
            steps.append(Step("reshape", (i,), (shape,)))
    return GraphSpec((CHAIN_SHAPE,), tuple(steps), (length,))


RELU_CONCAT = GraphSpec(
    inputs=((1, 3, 2, 2), (1, 3, 2, 2)),
    steps=(Step("clamp", (0,), (-7, 127)), Step("concat", (2, 1), (1,)), Step("transpose", (3,), ((0, 2, 3, 1),))),
    outputs=(4,),
)
"""CLAMP(x, zp, 127) ++ y under the shared zero point -7, then NCHW -> NHWC."""
