"""Hand-built FX graphs for bridge tests, with FakeTensor `val` meta like the Arm pipeline's.

The bit-exact comparison lives in eqsat.soundness and is re-exported here.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.node import map_aggregate

from eqsat import bridge_fx
from eqsat.soundness import assert_bit_identical, random_inputs

__all__ = ["GraphBuilder", "assert_bit_identical", "random_inputs"]


class GraphBuilder:
    """Builds a GraphModule node by node, computing each node's meta['val']."""

    def __init__(self) -> None:
        self.graph = fx.Graph()
        self.root = torch.nn.Module()
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def input(self, name: str, shape: tuple[int, ...], dtype: torch.dtype = torch.int8) -> fx.Node:
        node = self.graph.placeholder(name)
        with self.fake_mode:
            node.meta["val"] = torch.empty(shape, dtype=dtype)
        return node

    def constant(self, name: str, value: torch.Tensor) -> fx.Node:
        self.root.register_buffer(name, value)
        node = self.graph.get_attr(name)
        node.meta["val"] = self.fake_mode.from_tensor(value)
        return node

    def call(self, target: Any, *args: Any, **kwargs: Any) -> fx.Node:
        node = self.graph.call_function(target, args, kwargs)
        fake_args, fake_kwargs = map_aggregate((args, kwargs), lambda a: a.meta["val"] if isinstance(a, fx.Node) else a)
        if bridge_fx.op_name(target) == "tosa.CONST_SHAPE.default":
            node.meta["val"] = list(args[0])
        else:
            with self.fake_mode:
                node.meta["val"] = target(*fake_args, **fake_kwargs)
        node.meta["stack_trace"] = f"built by test: {node.name}"
        return node

    def getitem(self, node: fx.Node, index: int) -> fx.Node:
        item = self.graph.call_function(operator.getitem, (node, index))
        item.meta["val"] = node.meta["val"][index]
        return item

    def output(self, *slots: Any) -> fx.GraphModule:
        self.graph.output(tuple(slots))
        return fx.GraphModule(self.root, self.graph)
