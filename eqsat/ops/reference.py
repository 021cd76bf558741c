"""The exact reference evaluator: runs a TOSA-dialect (or edge ATen) FX graph on integer tensors.

Each TOSA op runs as its registry file specifies it (integers throughout, the
specification's REQUIREs and ERROR_IFs checked: a violated one raises `RequireViolation`);
a TOSA op without reference semantics raises NotImplementedError, and every
other op (ATen) runs as itself. The fuzzer and the rule tests both use it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import fx
from torch.fx.node import map_aggregate

from eqsat.ops import REGISTRY
from eqsat.ops.nodes import op_name, output_slots

SEMANTICS: dict[str, Callable[..., Any]] = {
    "tosa.CONST_SHAPE.default": lambda values: list(values),  # a shape operand, not a tensor op
    **{target: semantics for op in REGISTRY.values() for target, semantics in op.reference.items()},
}
"""Exact semantics of every TOSA target the registry defines, by target name."""


def evaluate(graph_module: fx.GraphModule, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The graph's outputs on inputs, computed exactly."""
    env: dict[fx.Node, Any] = {}
    feed = iter(inputs)
    for node in graph_module.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(feed)
        elif node.op == "get_attr":
            env[node] = getattr(graph_module, node.target)
        elif node.op == "call_function":
            env[node] = compute(node, env.__getitem__)
        elif node.op == "output":
            return [map_aggregate(slot, lambda a: env[a] if isinstance(a, fx.Node) else a) for slot in output_slots(graph_module.graph)]
    raise ValueError("graph has no output node")


def compute(node: fx.Node, value_of: Callable[[fx.Node], Any]) -> Any:
    """The value of one call_function node, given the value of each node it reads (value_of)."""
    args, kwargs = map_aggregate((node.args, node.kwargs), lambda a: value_of(a) if isinstance(a, fx.Node) else a)
    name = op_name(node.target)
    if name.startswith("tosa.") and name not in SEMANTICS:
        raise NotImplementedError(f"no exact semantics for {name}")
    return SEMANTICS.get(name, node.target)(*args, **kwargs)
