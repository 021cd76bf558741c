"""eqsat.lowering drives the real Arm / Ethos-U pipeline, Vela included."""

import pytest
import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec

from eqsat.lowering import Lowered, lower, quantize, vela_flags
from eqsat.validate import tosa_inputs
from tests.graphs import TwoConv

TARGETS = ["ethos-u55-128", "ethos-u85-256"]
INPUT_SHAPE = (1, 4, 8, 8)


class SortBetweenConvs(TwoConv):
    """TwoConv's convolutions with a sort for the relu between them; the Ethos-U partitioner rejects aten.sort."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.sort(self.first(x), dim=3).values)


def _lowered(model_class: type[torch.nn.Module], target: str, workdir) -> Lowered:
    torch.manual_seed(0)
    model = model_class().eval()
    example_inputs = (torch.randn(INPUT_SHAPE),)
    return lower(quantize(model, example_inputs, target), target, workdir=workdir)


@pytest.fixture(scope="module", params=TARGETS)
def two_conv(request, tmp_path_factory) -> Lowered:
    return _lowered(TwoConv, request.param, tmp_path_factory.mktemp("two_conv"))


@pytest.fixture(scope="module", params=TARGETS)
def sort_between_convs(request, tmp_path_factory) -> Lowered:
    return _lowered(SortBetweenConvs, request.param, tmp_path_factory.mktemp("sort"))


def test_delegable_model_lowers_to_one_delegate(two_conv):
    assert two_conv.delegates == 1
    assert len(two_conv.tosa_flatbuffers) == 1
    assert two_conv.cpu_ops == []


def test_lowering_keeps_its_tosa_flatbuffers_and_timing(two_conv):
    assert two_conv.tosa_flatbuffers[0][4:8] == b"TOSA"  # flatbuffer file identifier
    assert two_conv.target in TARGETS
    assert two_conv.seconds > 0
    assert two_conv.edge.exported_program() is not None


def test_unsupported_op_splits_the_model_into_two_delegates(sort_between_convs):
    assert sort_between_convs.delegates == 2
    assert len(sort_between_convs.tosa_flatbuffers) == 2
    assert sort_between_convs.cpu_ops == ["aten.sort.default"]


def test_delegates_come_in_execution_order(sort_between_convs):
    first, second = sort_between_convs.tosa_flatbuffers
    assert [spec.shape for spec in tosa_inputs(first)] == [INPUT_SHAPE]
    assert [spec.shape for spec in tosa_inputs(second)] == [(1, 8, 8, 8)]


def test_lowering_prints_nothing(tmp_path, capfd):
    _lowered(TwoConv, "ethos-u55-128", tmp_path)
    assert "Network summary" not in capfd.readouterr().out


def test_lower_refuses_a_workdir_with_old_tosa_files(tmp_path):
    (tmp_path / "output_tag0_TOSA-1.0+INT.tosa").write_bytes(b"old")
    with pytest.raises(ValueError, match="earlier lowering"):
        _lowered(TwoConv, "ethos-u55-128", tmp_path)


def test_quantize_refuses_a_model_in_training_mode():
    with pytest.raises(ValueError, match="eval mode"):
        quantize(TwoConv(), (torch.randn(INPUT_SHAPE),), "ethos-u55-128")


@pytest.mark.parametrize("target", TARGETS)
def test_vela_flags_are_the_compile_spec_flags(target):
    flags = vela_flags(target)
    assert flags == EthosUCompileSpec(target).compiler_flags
    assert f"--accelerator-config={target}" in flags
    assert {flag.split("=")[0] for flag in flags} >= {
        "--config",
        "--system-config",
        "--memory-mode",
    }


def test_vela_flags_pick_the_default_u55_system():
    assert "--system-config=Ethos_U55_High_End_Embedded" in vela_flags("ethos-u55-128")
    assert "--memory-mode=Shared_Sram" in vela_flags("ethos-u55-128")
