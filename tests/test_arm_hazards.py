"""Arm hazards (docs/arm_hazards.md) guarded on real lowerings: eqsat installed, the real pipeline, Vela, the TOSA reference model."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch
from tosa.DType import DType
from tosa.TosaGraph import TosaGraph

from eqsat import lowering
from eqsat.compare import _OP_NAMES, compare

def operators(tosa_flatbuffer: bytes):
    """(op name, [(input dtype, input shape)]) for every operator of the main block; a shape operand (CONST_SHAPE) is (None, ())."""
    block = TosaGraph.GetRootAsTosaGraph(tosa_flatbuffer, 0).Regions(0).Blocks(0)
    tensors = {}
    for i in range(block.TensorsLength()):
        tensor = block.Tensors(i)
        tensors[tensor.Name()] = (tensor.Type(), tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ())
    for i in range(block.OperatorsLength()):
        op = block.Operators(i)
        yield _OP_NAMES.get(op.Op(), str(op.Op())), [tensors.get(op.Inputs(k), (None, ())) for k in range(op.InputsLength())]


def readers_of_int48(lowered: lowering.Lowered) -> Counter:
    """How many operators of each kind read an INT48 tensor, over all delegates."""
    return Counter(name for graph in lowered.tosa_flatbuffers for name, inputs in operators(graph) if any(t == DType.INT48 for t, _ in inputs))


def batched_mac_table_operands(lowered: lowering.Lowered) -> list[tuple[int, ...]]:
    """The [N, 1, 1, C] operands, N > 1, of the TABLEs of a lowering (MLBEDSW-11805)."""
    return [
        shape
        for graph in lowered.tosa_flatbuffers
        for name, inputs in operators(graph)
        if name == "TABLE"
        for _, shape in inputs[:1]
        if len(shape) == 4 and shape[0] > 1 and shape[1] == 1 and shape[2] == 1
    ]


# ---------------------------------------------------------------- INT48 accumulators (a16w8)


class A16W8ConvsWithDataMovement(torch.nn.Module):
    """Two convolutions with permutes, reshapes and slices around them; a16w8 makes each accumulate into INT48."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = self.conv1(x).permute(0, 2, 3, 1).reshape(1, 64, 8)[:, :32, :]
        y = self.conv2(y.reshape(1, 4, 8, 8).permute(0, 3, 1, 2))
        return y[:, :, 1:3, :].permute(0, 2, 1, 3)


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_no_data_movement_reaches_an_int48_accumulator(target, tmp_path):
    """Every RESCALE here reads a convolution's INT48 accumulator. Without the bridge's guard,
    reshape- and slice-through-per-channel-rescale fire on them (measured on ethos-u55-128: 9 and 6 matches)."""
    torch.manual_seed(0)
    comparison = compare(
        "a16w8-convs", A16W8ConvsWithDataMovement().eval(), (torch.randn(1, 4, 8, 8),), target, workdir=tmp_path, quantization="a16w8"
    )
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.stock.cycles_total > 0 and comparison.optimized.cycles_total > 0  # Vela compiled both
    fired = Counter()
    for report in comparison.reports:
        fired.update(report["rules_fired"])
    assert not [name for name in fired if "rescale" in name]
    for ops in (comparison.stock.tosa_ops, comparison.optimized.tosa_ops):
        assert ops["CONV2D"] == 2 and ops["RESCALE"] == 2


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_only_convolutions_and_their_rescales_read_int48_after_eqsat(target, tmp_path):
    import eqsat

    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 8, 8),)
    exported = lowering.quantize(A16W8ConvsWithDataMovement().eval(), inputs, target, quantization="a16w8")
    eqsat.install(target)
    try:
        lowered = lowering.lower(exported, target, workdir=tmp_path)
    finally:
        eqsat.uninstall()
    assert readers_of_int48(lowered) == Counter({"CONV2D": 2, "RESCALE": 2})


# ---------------------------------------------------------------- TABLE on a batched MAC output (MLBEDSW-11805)


class BatchedLinearSigmoid(torch.nn.Module):
    """linear (a 1x1 CONV2D on [4, 1, 1, 16]) -> sigmoid (a TABLE on [4, 16]) -> reshape [4, 1, 1, 16].

    Upstream keeps the TABLE on [4, 16]; moving the reshape above it would give the TABLE
    the [4, 1, 1, 16] output of the convolution, which Vela miscompiles on Ethos-U85."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).reshape(4, 1, 1, 16)


def test_no_table_is_given_a_batched_mac_shaped_operand_on_u85(tmp_path):
    """Without the guard, reshape-through-table fires once here (the cost model then keeps the stock graph)."""
    torch.manual_seed(0)
    model, inputs = BatchedLinearSigmoid().eval(), (torch.randn(4, 16),)
    comparison = compare("batched-linear-sigmoid", model, inputs, "ethos-u85-256", workdir=tmp_path / "compare")
    assert comparison.bit_exact, comparison.mismatch
    assert all(report["rules_fired"].get("reshape-through-table", 0) == 0 for report in comparison.reports)

    import eqsat

    eqsat.install("ethos-u85-256")
    try:
        lowered = lowering.lower(lowering.quantize(model, inputs, "ethos-u85-256"), "ethos-u85-256", workdir=tmp_path / "lowered")
    finally:
        eqsat.uninstall()
    assert batched_mac_table_operands(lowered) == []


ZERO_SIZE_LOWERING = """
import tempfile, pathlib, torch
from eqsat import lowering

class PermuteAdd(torch.nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 1) + 1

exported = lowering.quantize(PermuteAdd().eval(), (torch.randn(1, 0, 4),), "ethos-u55-128")
lowering.lower(exported, "ethos-u55-128", workdir=pathlib.Path(tempfile.mkdtemp()))
"""


@pytest.mark.slow
def test_the_stock_pipeline_crashes_vela_on_a_zero_size_tensor():
    """Why eqsat refuses zero-size tensors (docs/arm_hazards.md): the stock lowering, without eqsat, delegates one and Vela segfaults."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    repository = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", ZERO_SIZE_LOWERING], capture_output=True, text=True, cwd=repository, env={**os.environ, "PYTHONPATH": str(repository)})
    assert done.returncode == -signal.SIGSEGV, done.stderr[-2000:]
