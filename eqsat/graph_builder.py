"""Hand-built FX graphs with the FakeTensor `val` meta the Arm pipeline gives its nodes.

The fuzzer, the soundness tests and the notebook build graphs with it; a TOSA
op must be called inside a TosaLoweringContext for its meta to be computed.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from executorch.backends.arm.tosa.mapping import TosaSpecialDtype
from executorch.exir.dialects._ops import ops as exir_ops
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.node import map_aggregate


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

    def const_shape(self, values: tuple[int, ...]) -> fx.Node:
        """A TOSA CONST_SHAPE operand, as the Arm backend gives RESHAPE, SLICE and PAD."""
        node = self.graph.call_function(exir_ops.backend.tosa.CONST_SHAPE.default, (list(values),))
        node.meta["val"] = list(values)
        node.meta[TosaSpecialDtype.meta_key()] = TosaSpecialDtype.SHAPE
        return node

    def call(self, target: Any, *args: Any, **kwargs: Any) -> fx.Node:
        node = self.graph.call_function(target, args, kwargs)
        fake_args, fake_kwargs = map_aggregate((args, kwargs), lambda a: a.meta["val"] if isinstance(a, fx.Node) else a)
        if target == exir_ops.backend.tosa.CONST_SHAPE.default:
            node.meta["val"] = list(args[0])
        else:
            with self.fake_mode:
                node.meta["val"] = target(*fake_args, **fake_kwargs)
        node.meta["stack_trace"] = f"built by GraphBuilder: {node.name}"
        return node

    def getitem(self, node: fx.Node, index: int) -> fx.Node:
        item = self.graph.call_function(operator.getitem, (node, index))
        item.meta["val"] = node.meta["val"][index]
        return item

    def output(self, *slots: Any) -> fx.GraphModule:
        self.graph.output(tuple(slots))
        return fx.GraphModule(self.root, self.graph)
