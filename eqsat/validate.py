"""Bit-exact equivalence of TOSA graphs, judged by the TOSA reference model.

Translation validation (DESIGN.md section 5): an optimized graph must give
the same output bits as the original on the same random inputs. Both graphs
run in `tosa_reference_model`, which executes a serialized TOSA graph exactly
as the TOSA specification defines it.

Every run of the reference model in the project goes through
`run_reference_model`, which keeps the model from attaching a debugger to
this process when a graph fails an ERROR_IF or REQUIRE (see there).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import tosa_reference_model
from tosa.DType import DType
from tosa.TosaGraph import TosaGraph

from eqsat.errors import EqsatError

if TYPE_CHECKING:  # importing eqsat.lowering loads all of executorch
    from eqsat.lowering import Lowered

_NUMPY_DTYPES = {
    DType.BOOL: np.dtype(np.bool_),
    DType.INT8: np.dtype(np.int8),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.INT64: np.dtype(np.int64),
    DType.FP16: np.dtype(np.float16),
    DType.FP32: np.dtype(np.float32),
}
_DTYPE_NAMES = {value: name for name, value in vars(DType).items() if name.isupper()}

# Wide integer inputs are drawn from the int16 range: in quantized graphs
# they are accumulators or indices, and extreme values would only overflow.
_WIDE_INTEGER_RANGE = (-(2**15), 2**15 - 1)


# tosa-tools' reference model prints a backtrace on a failed ERROR_IF or
# REQUIRE: func_print_backtrace (reference_model/src/func_debug.cc) forks a
# child that execs `gdb --batch -ex "attach <pid>" -ex bt` when gdb is on PATH,
# about a minute per refused graph. It returns at once, without forking, when
# this variable is set; it reads it with getenv at that moment.
_NO_BACKTRACE_VARIABLE = "TOSA_MODEL_NO_BACKTRACE"
# Serializes the runs of this process, so that one run cannot unset the
# variable while another is still in the reference model.
_REFERENCE_MODEL_LOCK = threading.Lock()


class ReferenceModelError(RuntimeError):
    """The TOSA reference model did not run a graph to a valid result."""


class SignatureMismatchError(ValueError):
    """Two graphs, or a graph and its inputs, disagree on the input signature."""


class NotEquivalentError(EqsatError):
    """Two graphs gave different output bits on the same inputs."""


class TensorSpec(NamedTuple):
    """Name, shape and numpy dtype of one graph input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


def tosa_inputs(tosa_flatbuffer: bytes) -> list[TensorSpec]:
    """Return `(name, shape, dtype)` per input of the graph, in the order it takes them.

    These are the inputs of the main block (region 0, block 0); dtypes are
    numpy dtypes, and a TOSA dtype without one raises ValueError.
    """
    return _block_tensors(tosa_flatbuffer, "Inputs")


def tosa_outputs(tosa_flatbuffer: bytes) -> list[TensorSpec]:
    """Return the outputs of the graph's main block, in the order it gives them."""
    return _block_tensors(tosa_flatbuffer, "Outputs")


def random_inputs(tosa_flatbuffer: bytes, seed: int) -> list[np.ndarray]:
    """Return one random array per graph input, the same for the same seed.

    Integers are uniform over the full range of int8 and int16, and over the
    int16 range for wider integers; booleans are fair coin flips; floats are
    standard normal.
    """
    generator = np.random.default_rng(seed)
    return [_random_array(generator, spec) for spec in tosa_inputs(tosa_flatbuffer)]


def run_reference(tosa_flatbuffer: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run the graph in the TOSA reference model and return its outputs.

    Raises SignatureMismatchError if `inputs` do not match the graph's inputs
    in count, shape or dtype, and ReferenceModelError if the reference model
    does not finish with status TOSA_VALID.
    """
    _require_matching_inputs(tosa_inputs(tosa_flatbuffer), inputs)
    outputs, status = run_reference_model(tosa_flatbuffer, inputs)
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise ReferenceModelError(
            f"the TOSA reference model finished with status {status.name}, not TOSA_VALID"
        )
    return outputs


def run_reference_model(
    tosa_flatbuffer: bytes, inputs: list[np.ndarray]
) -> tuple[list[np.ndarray], tosa_reference_model.GraphStatus]:
    """Run the graph in the TOSA reference model and return its outputs and status as it gives them.

    A refused graph (status TOSA_ERROR or TOSA_UNPREDICTABLE) comes back as
    fast as an accepted one: the run sees TOSA_MODEL_NO_BACKTRACE set, so the
    model attaches no debugger. The variable is set only for the call and put
    back as it was; a value the caller set is left alone.
    """
    with _REFERENCE_MODEL_LOCK:
        if _NO_BACKTRACE_VARIABLE in os.environ:
            return tosa_reference_model.run(tosa_flatbuffer, inputs)
        os.environ[_NO_BACKTRACE_VARIABLE] = "1"
        try:
            return tosa_reference_model.run(tosa_flatbuffer, inputs)
        finally:
            del os.environ[_NO_BACKTRACE_VARIABLE]


def assert_equivalent(
    original: bytes,
    optimized: bytes,
    *,
    trials: int = 3,
    seed: int = 0,
) -> None:
    """Require both graphs to give bit-identical outputs on random inputs.

    Both graphs must take the same inputs (count, shape, dtype; names may
    differ), else SignatureMismatchError says how they differ. Trial k runs
    both on `random_inputs(original, seed + k)`. Every output must match in
    count, dtype, shape and bytes, else NotEquivalentError names the first
    differing output.
    """
    _require_same_signature(tosa_inputs(original), tosa_inputs(optimized))
    output_names = [spec.name for spec in tosa_outputs(original)]
    for trial in range(trials):
        inputs = random_inputs(original, seed + trial)
        try:
            _require_identical_outputs(
                run_reference(original, inputs),
                run_reference(optimized, inputs),
                output_names,
            )
        except NotEquivalentError as error:
            error.add_note(f"inputs: random_inputs(original, seed={seed + trial})")
            raise


def assert_lowerings_equivalent(a: Lowered, b: Lowered, **options) -> None:
    """Require two lowerings to have the same delegates, pairwise equivalent.

    Delegate k of `a` is compared with delegate k of `b` by
    `assert_equivalent(..., **options)`.
    """
    if a.delegates != b.delegates:
        raise NotEquivalentError(f"the lowerings have {a.delegates} and {b.delegates} delegates")
    for index, (original, optimized) in enumerate(
        zip(a.tosa_flatbuffers, b.tosa_flatbuffers, strict=True)
    ):
        try:
            assert_equivalent(original, optimized, **options)
        except (NotEquivalentError, SignatureMismatchError) as error:
            error.add_note(f"in delegate {index}")
            raise


def _block_tensors(tosa_flatbuffer: bytes, which: str) -> list[TensorSpec]:
    """Return the specs of the main block's `which` ("Inputs"/"Outputs") tensors."""
    block = TosaGraph.GetRootAsTosaGraph(tosa_flatbuffer, 0).Regions(0).Blocks(0)
    tensors = {
        tensor.Name(): tensor for tensor in (block.Tensors(i) for i in range(block.TensorsLength()))
    }
    names = [getattr(block, which)(i) for i in range(getattr(block, f"{which}Length")())]
    return [_tensor_spec(tensors[name]) for name in names]


def _tensor_spec(tensor) -> TensorSpec:
    """Describe one flatbuffer TosaTensor."""
    name = tensor.Name().decode()
    tosa_dtype = tensor.Type()
    if tosa_dtype not in _NUMPY_DTYPES:
        raise ValueError(
            f"tensor {name} has TOSA dtype {_DTYPE_NAMES.get(tosa_dtype, tosa_dtype)}, "
            f"which has no numpy counterpart here"
        )
    shape = tuple(int(size) for size in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
    return TensorSpec(name, shape, _NUMPY_DTYPES[tosa_dtype])


def _random_array(generator: np.random.Generator, spec: TensorSpec) -> np.ndarray:
    """Draw one array for `spec` as `random_inputs` describes."""
    if spec.dtype == np.bool_:
        return generator.integers(0, 2, size=spec.shape).astype(np.bool_)
    if np.issubdtype(spec.dtype, np.floating):
        return generator.standard_normal(size=spec.shape).astype(spec.dtype)
    if spec.dtype.itemsize <= 2:
        low, high = np.iinfo(spec.dtype).min, np.iinfo(spec.dtype).max
    else:
        low, high = _WIDE_INTEGER_RANGE
    return generator.integers(low, high, size=spec.shape, dtype=spec.dtype, endpoint=True)


def _signature(specs: list[TensorSpec]) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Return what inputs must agree on: shape and dtype, position by position."""
    return [(spec.shape, spec.dtype) for spec in specs]


def _describe(specs: list[TensorSpec]) -> str:
    """Render a signature as `[name: int8[1, 4, 8, 8], ...]`."""
    return "[" + ", ".join(f"{spec.name}: {spec.dtype}{list(spec.shape)}" for spec in specs) + "]"


def _require_same_signature(original: list[TensorSpec], optimized: list[TensorSpec]) -> None:
    """Raise SignatureMismatchError unless both graphs take the same inputs."""
    if _signature(original) != _signature(optimized):
        raise SignatureMismatchError(
            "the graphs take different inputs: original takes "
            f"{_describe(original)}, optimized takes {_describe(optimized)}"
        )


def _require_matching_inputs(specs: list[TensorSpec], inputs: list[np.ndarray]) -> None:
    """Raise SignatureMismatchError unless `inputs` fit the graph's inputs."""
    given = [(tuple(array.shape), array.dtype) for array in inputs]
    if given != _signature(specs):
        rendered = ", ".join(f"{array.dtype}{list(array.shape)}" for array in inputs)
        raise SignatureMismatchError(f"the graph takes {_describe(specs)}, but got [{rendered}]")


def _require_identical_outputs(
    original: list[np.ndarray],
    optimized: list[np.ndarray],
    names: list[str],
) -> None:
    """Raise NotEquivalentError at the first output that differs in any bit."""
    if len(original) != len(optimized):
        raise NotEquivalentError(f"the graphs give {len(original)} and {len(optimized)} outputs")
    for index, (expected, actual) in enumerate(zip(original, optimized)):
        where = f"output {index} ({names[index]})"
        if expected.dtype != actual.dtype or expected.shape != actual.shape:
            raise NotEquivalentError(
                f"{where} is {expected.dtype}{list(expected.shape)} in the original "
                f"but {actual.dtype}{list(actual.shape)} in the optimized graph"
            )
        if expected.tobytes() != actual.tobytes():
            raise NotEquivalentError(_first_difference(where, expected, actual))


def _first_difference(where: str, expected: np.ndarray, actual: np.ndarray) -> str:
    """Describe how two same-shaped arrays with different bytes differ."""
    differing = _differing_elements(expected, actual)
    first = tuple(int(i) for i in np.argwhere(differing)[0])
    return (
        f"{where}: {int(differing.sum())} of {expected.size} elements differ; "
        f"first at {first}: original {expected[first].item()!r}, "
        f"optimized {actual[first].item()!r}"
    )


def _differing_elements(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Return a boolean mask of the elements whose bits differ."""
    as_bytes = np.dtype((np.void, expected.dtype.itemsize))
    return expected.view(as_bytes) != actual.view(as_bytes)


@contextlib.contextmanager
def stdout_silenced() -> Iterator[None]:
    """Silence file descriptor 1, where native code prints outside Python's control: the reference model
    warns there for every graph it loads that the file's TOSA version differs from its own, and the Arm
    backend's lowering prints there too."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
