"""Hand-built FX graphs for tests: the builder lives in eqsat.graph_builder, the bit-exact comparison in
eqsat.soundness; both are re-exported here, beside the small builders several test files share."""

import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from torch import fx

from eqsat.graph_builder import GraphBuilder
from eqsat.ops.nodes import TOSA
from eqsat.soundness import assert_bit_identical, random_inputs

__all__ = [
    "GraphBuilder",
    "TwoConv",
    "assert_bit_identical",
    "random_inputs",
    "tosa_lowering",
    "tosa_pad",
    "tosa_slice",
    "tosa_table",
]


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
