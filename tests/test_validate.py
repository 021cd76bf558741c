"""eqsat.validate judges TOSA graphs from real lowerings with the TOSA reference model."""

import os

import numpy as np
import pytest
import torch
import tosa_reference_model

from eqsat.lowering import Lowered, lower, quantize
from eqsat.ops.rescale import multiplier_and_shift
from eqsat.validate import (
    NotEquivalentError,
    ReferenceModelError,
    SignatureMismatchError,
    assert_equivalent,
    assert_lowerings_equivalent,
    random_inputs,
    run_reference,
    run_reference_model,
    tosa_inputs,
)
from tests.tosa_graphs import rescale_graph

TARGET = "ethos-u55-128"
INPUT_SHAPE = (1, 4, 8, 8)


class TwoConv(torch.nn.Module):
    """conv -> relu -> conv, optionally with a concat/slice pair that selects its input."""

    def __init__(self, seed: int, redundant_concat: bool = False) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.first = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.second = torch.nn.Conv2d(8, 4, 3, padding=1)
        self.redundant_concat = redundant_concat

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x))
        if self.redundant_concat:
            y = torch.cat([y, y], dim=1)[:, :8]
        return self.second(y)


def _lowered(model: torch.nn.Module, tmp_path_factory, input_shape=INPUT_SHAPE) -> Lowered:
    example_inputs = (torch.randn(input_shape, generator=torch.Generator().manual_seed(0)),)
    program = quantize(model.eval(), example_inputs, TARGET)
    return lower(program, TARGET, workdir=tmp_path_factory.mktemp("lowering"))


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Lowered:
    return _lowered(TwoConv(seed=0), tmp_path_factory)


@pytest.fixture(scope="module")
def original_again(tmp_path_factory) -> Lowered:
    return _lowered(TwoConv(seed=0), tmp_path_factory)


@pytest.fixture(scope="module")
def with_redundant_concat(tmp_path_factory) -> Lowered:
    return _lowered(TwoConv(seed=0, redundant_concat=True), tmp_path_factory)


@pytest.fixture(scope="module")
def other_weights(tmp_path_factory) -> Lowered:
    return _lowered(TwoConv(seed=1), tmp_path_factory)


@pytest.fixture(scope="module")
def smaller_input(tmp_path_factory) -> Lowered:
    return _lowered(TwoConv(seed=0), tmp_path_factory, input_shape=(1, 4, 4, 4))


@pytest.fixture(scope="module")
def tosa(original) -> bytes:
    return original.tosa_flatbuffers[0]


def test_tosa_inputs_name_shape_and_dtype(tosa):
    ((name, shape, dtype),) = tosa_inputs(tosa)
    assert name
    assert shape == INPUT_SHAPE
    assert dtype == np.int8


def test_random_inputs_span_int8_and_repeat_per_seed(tosa):
    (inputs,) = random_inputs(tosa, seed=3)
    assert inputs.dtype == np.int8 and inputs.shape == INPUT_SHAPE
    assert inputs.min() < -100 and inputs.max() > 100
    assert np.array_equal(random_inputs(tosa, seed=3)[0], inputs)
    assert not np.array_equal(random_inputs(tosa, seed=4)[0], inputs)


def test_run_reference_gives_int8_outputs(tosa):
    (output,) = run_reference(tosa, random_inputs(tosa, seed=0))
    assert output.dtype == np.int8 and output.shape == INPUT_SHAPE


@pytest.fixture
def gdb_calls(tmp_path, monkeypatch):
    """A fake `gdb` first on PATH that appends a line to the returned file each time it runs."""
    calls = tmp_path / "gdb-calls"
    fake_gdb = tmp_path / "bin" / "gdb"
    fake_gdb.parent.mkdir()
    fake_gdb.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n')
    fake_gdb.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_gdb.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("TOSA_MODEL_NO_BACKTRACE", raising=False)
    return calls


def test_a_refused_graph_attaches_no_debugger(gdb_calls):
    # RESCALE of int16 with input zero point 5: ERROR_IF, only int8 may have a nonzero one
    multiplier, shift = multiplier_and_shift(0.5)
    refused = rescale_graph([2, 3], "int16", "int8", [multiplier], [shift], 5, 0).tosa.serialize()
    inputs = [np.zeros((2, 3), dtype=np.int16)]
    # the hazard, called bare: the reference model execs gdb to attach to this process
    _, status = tosa_reference_model.run(refused, inputs)
    if not gdb_calls.exists():
        pytest.skip("here the reference model's child cannot ptrace its parent, so it never reaches gdb")
    assert "attach" in gdb_calls.read_text()
    gdb_calls.unlink()

    _, status = run_reference_model(refused, inputs)
    assert status == tosa_reference_model.GraphStatus.TOSA_ERROR
    with pytest.raises(ReferenceModelError, match="TOSA_ERROR"):
        run_reference(refused, inputs)
    assert not gdb_calls.exists()
    assert "TOSA_MODEL_NO_BACKTRACE" not in os.environ  # set for the call only


def test_run_reference_rejects_inputs_of_the_wrong_dtype(tosa):
    wrong = [array.astype(np.int16) for array in random_inputs(tosa, seed=0)]
    with pytest.raises(SignatureMismatchError, match=r"takes .*int8\[1, 4, 8, 8\].* got \[int16"):
        run_reference(tosa, wrong)


def test_graph_is_equivalent_to_itself(tosa):
    assert_equivalent(tosa, tosa)


def test_two_lowerings_of_one_model_are_equivalent(original, original_again):
    assert_lowerings_equivalent(original, original_again)


def test_structurally_different_graphs_can_be_equivalent(tosa, with_redundant_concat):
    # cat([y, y], dim=1)[:, :8] == y survives lowering as CONCAT + SLICE.
    rewritten = with_redundant_concat.tosa_flatbuffers[0]
    assert rewritten != tosa
    assert_equivalent(tosa, rewritten)


def test_different_weights_are_not_equivalent(tosa, other_weights):
    with pytest.raises(
        NotEquivalentError,
        match=r"output 0 \(.+\): \d+ of 256 elements differ; first at \(\d+, \d+, \d+, \d+\)",
    ):
        assert_equivalent(tosa, other_weights.tosa_flatbuffers[0])


def test_different_weights_make_lowerings_not_equivalent(original, other_weights):
    with pytest.raises(NotEquivalentError) as raised:
        assert_lowerings_equivalent(original, other_weights, trials=1)
    assert "in delegate 0" in raised.value.__notes__


def test_different_input_signatures_are_rejected(tosa, smaller_input):
    with pytest.raises(
        SignatureMismatchError,
        match=r"original takes \[.+: int8\[1, 4, 8, 8\]\], "
        r"optimized takes \[.+: int8\[1, 4, 4, 4\]\]",
    ):
        assert_equivalent(tosa, smaller_input.tosa_flatbuffers[0])
