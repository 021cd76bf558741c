"""What every op file reads from an FX node: target names, static shapes, literal shapes, axes; the dialect a
graph is in and the slots its output node returns."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import executorch.backends.arm.tosa.dialect  # noqa: F401  (registers the tosa ops)
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.backend._ops import BackendOpOverload
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from torch import fx
from torch.fx.node import map_aggregate

TOSA = exir_ops.backend.tosa
"""The TOSA dialect's ops (`TOSA.TRANSPOSE.default`)."""




class Dialect(StrEnum):
    """The ops an Arm pipeline graph holds: edge ATen before `ExirToTosaPass` (while ATen data movement is
    still present), the TOSA dialect after it. The bridge writes new nodes in the dialect it was given."""

    ATEN = "aten"
    TOSA = "tosa"


_OP_NAMES: dict[Any, str] = {}


def op_name(target: Any) -> str:
    """The dotted name of an FX target: 'tosa.TRANSPOSE.default', 'aten.cat.default'.

    Each target is named once (loading, pricing and writing back a graph ask again for every node)."""
    try:
        return _OP_NAMES[target]
    except KeyError:
        name = _OP_NAMES[target] = _op_name(target)
        return name
    except TypeError:  # an unhashable target
        return _op_name(target)


def _op_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, (EdgeOpOverload, BackendOpOverload)):
        return str(target._op)
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', repr(target))}"


POOL_KERNEL_ARG = {"tosa.MAX_POOL2D.default": 1, "tosa.AVG_POOL2D.default": 3}
"""The position of the kernel among a TOSA dialect pooling's arguments."""
POOL_WINDOW_META = "tosa_pool_window"
"""Where a pooling read from a TOSA flatbuffer keeps its kernel (the operator's attribute is not among its args)."""


def pool_window(node: Any) -> tuple[int, int] | None:
    """The window (kernel height, width) of a pooling node; None for any other node."""
    position = POOL_KERNEL_ARG.get(op_name(node.target))
    if position is not None and len(node.args) > position:
        return tuple(int(k) for k in node.args[position])
    return node.meta.get(POOL_WINDOW_META)


def tensor_val(node: Any) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def static_shape(node: Any) -> tuple[int, ...] | None:
    val = tensor_val(node)
    if val is None or not all(isinstance(d, int) for d in val.shape):
        return None
    return tuple(int(d) for d in val.shape)


def const_shape_values(arg: Any) -> tuple[int, ...] | None:
    """The literal ints of a CONST_SHAPE node or of a plain int list."""
    if isinstance(arg, fx.Node):
        if op_name(arg.target) != "tosa.CONST_SHAPE.default":
            return None
        arg = arg.args[0]
    if isinstance(arg, (list, tuple)) and all(isinstance(v, int) for v in arg):
        return tuple(int(v) for v in arg)
    return None


def normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def node_args(node: fx.Node) -> list[fx.Node]:
    """The FX nodes among a node's args and kwargs, in order."""
    found: list[fx.Node] = []
    map_aggregate((node.args, node.kwargs), lambda a: found.append(a) if isinstance(a, fx.Node) else a)
    return found


def output_node(graph: fx.Graph) -> fx.Node:
    """The graph's output node; ValueError when it has none."""
    found = next((n for n in reversed(graph.nodes) if n.op == "output"), None)
    if found is None:
        raise ValueError("the graph has no output node")
    return found


def output_slots(graph: fx.Graph) -> list[Any]:
    """What the graph returns, one entry per slot: FX returns a tuple or list of values, or one bare value (one slot)."""
    returned = output_node(graph).args[0]
    return list(returned) if isinstance(returned, (list, tuple)) else [returned]
