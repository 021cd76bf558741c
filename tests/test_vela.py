"""eqsat.vela runs the pinned Vela on real TOSA flatbuffers from the Arm backend."""

import pytest
import torch

from eqsat.lowering import lower, quantize
from eqsat.vela import VelaError, estimate
from tests.graphs import TwoConv

TARGETS = ["ethos-u55-128", "ethos-u85-256"]


@pytest.fixture(scope="module", params=TARGETS)
def lowered_tosa(request, tmp_path_factory) -> tuple[bytes, str]:
    """The TOSA flatbuffer of TwoConv's only delegate, and its target."""
    target = request.param
    torch.manual_seed(0)
    example_inputs = (torch.randn(1, 4, 8, 8),)
    program = quantize(TwoConv().eval(), example_inputs, target)
    lowered = lower(program, target, workdir=tmp_path_factory.mktemp("lowering"))
    return lowered.tosa_flatbuffers[0], target


def test_estimate_counts_positive_cycles(lowered_tosa):
    result = estimate(*lowered_tosa)
    assert result.cycles_npu > 0
    assert result.cycles_total >= result.cycles_npu
    assert result.npu_ops > 0
    assert result.cpu_ops == 0


def test_estimate_is_deterministic(lowered_tosa):
    assert estimate(*lowered_tosa) == estimate(*lowered_tosa)


def test_layer_cycles_add_up_to_the_network_totals(lowered_tosa):
    result = estimate(*lowered_tosa)
    assert sum(layer.cycles_npu for layer in result.layers) == result.cycles_npu
    assert sum(layer.cycles_total for layer in result.layers) == result.cycles_total


def test_fused_operations_are_listed_with_their_own_layer(lowered_tosa):
    result = estimate(*lowered_tosa)
    assert len(result.layers) >= result.npu_ops
    assert all(layer.cycles_npu >= 0 for layer in result.layers)


def test_layers_name_the_tosa_operators_they_came_from(lowered_tosa):
    layers = estimate(*lowered_tosa).layers
    convolutions = [layer for layer in layers if layer.source_operator == "Conv2D"]
    assert len(convolutions) == 2
    assert all(layer.operator == "Conv2D" and layer.name for layer in convolutions)


def test_estimate_keeps_vela_output_in_workdir(lowered_tosa, tmp_path):
    estimate(*lowered_tosa, workdir=tmp_path)
    (run_dir,) = tmp_path.glob("vela-*")
    assert (run_dir / "output" / "network_per-layer.csv").exists()


def test_garbage_flatbuffer_raises_vela_error():
    with pytest.raises(VelaError, match="Vela failed .*Compilation failed"):
        estimate(b"\x14\x00\x00\x00TOSA" + bytes(range(256)), "ethos-u55-128")


def test_truncated_flatbuffer_raises_vela_error(lowered_tosa):
    tosa_flatbuffer, target = lowered_tosa
    with pytest.raises(VelaError, match="TOSA FB Reader error"):
        estimate(tosa_flatbuffer[: len(tosa_flatbuffer) // 2], target)
