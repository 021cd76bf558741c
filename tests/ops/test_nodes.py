"""eqsat.ops.nodes: what every op file reads from an FX node."""

from __future__ import annotations

import torch

from eqsat.ops import nodes
from eqsat.ops.nodes import TOSA, op_name


def test_op_name_names_each_target_once(monkeypatch):
    """Loading, pricing and writing back a graph ask for the name of every node's target, again and again: each
    target is named once, an unhashable one every time."""
    named = []
    real = nodes._op_name
    monkeypatch.setattr(nodes, "_op_name", lambda target: named.append(target) or real(target))
    monkeypatch.setattr(nodes, "_OP_NAMES", {})
    for _ in range(3):
        assert op_name(TOSA.TRANSPOSE.default) == "tosa.TRANSPOSE.default"
        assert op_name(torch.ops.aten.cat.default) == "aten.cat.default"
    assert named == [TOSA.TRANSPOSE.default, torch.ops.aten.cat.default]
    unhashable = [1]
    op_name(unhashable)
    op_name(unhashable)
    assert named[2:] == [unhashable, unhashable]
