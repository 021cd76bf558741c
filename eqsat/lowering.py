"""Drive the stock ExecuTorch Arm / Ethos-U lowering for a torch model.

`quantize` and `lower` do what a user of the Arm backend does: int8 (or
int16-activation, int8-weight) PT2E quantization with `EthosUQuantizer`, then `to_edge_transform_and_lower` with
`EthosUPartitioner`. `lower` also collects the TOSA flatbuffer that each
delegate handed to Vela, so that a lowering can be costed (`eqsat.vela`) and
checked bit-exactly (`eqsat.validate`).

This module installs nothing: to lower with the eqsat pass, call
`eqsat.install(...)` before `lower()` and `eqsat.uninstall()` after it.
"""

import contextlib
import copy
import io
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
from executorch.backends.arm.quantizer import (
    EthosUQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.tosa.backend import arm_get_first_delegation_tag
from executorch.exir import EdgeProgramManager, to_edge_transform_and_lower
from executorch.exir.delegate import executorch_call_delegate
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from eqsat.configuration import Configuration

# Ops that stay outside the delegates in every int8 lowering: the delegate
# calls, the tuple unpacking of their results, and the (de)quantization at the
# delegate boundaries (any overload of these two ops).
_GLUE_OPS = frozenset({"executorch_call_delegate", "getitem"})
_BOUNDARY_QUANT_OPS = frozenset(
    {
        "quantized_decomposed.quantize_per_tensor",
        "quantized_decomposed.dequantize_per_tensor",
    }
)


@dataclass
class Lowered:
    """The result of one Ethos-U lowering.

    `tosa_flatbuffers[k]` is the TOSA graph of the k-th delegate, in the order
    the delegates run in the lowered program. `cpu_ops` names the ops left
    outside the delegates, in graph order, apart from the delegate calls,
    `getitem` and per-tensor (de)quantization. `seconds` is the wall time of
    `to_edge_transform_and_lower`, Vela included. `configuration` is what the
    compile spec compiled for (target, system config, memory mode, vela.ini).
    """

    target: str
    tosa_flatbuffers: list[bytes]
    delegates: int
    cpu_ops: list[str]
    edge: EdgeProgramManager
    seconds: float
    configuration: Configuration


def compile_spec(configuration: Configuration | str) -> EthosUCompileSpec:
    """The Ethos-U compile spec of a configuration (a target alone: the spec's defaults)."""
    if isinstance(configuration, str):
        return EthosUCompileSpec(configuration)
    return EthosUCompileSpec(
        configuration.target,
        system_config=configuration.system_config,
        memory_mode=configuration.memory_mode,
        config_ini=configuration.config_ini,
    )


def vela_flags(configuration: Configuration | str) -> list[str]:
    """Return the Vela command-line flags that the configuration's compile spec builds.

    These are the flags the Arm backend compiles every delegate with: the
    accelerator configuration, the config ini, the output format, and the
    system configuration and memory mode (for a target alone, those the spec
    picks by default).
    """
    return list(compile_spec(configuration).compiler_flags)


QUANTIZATION_CONFIGS = {
    "a8w8": get_symmetric_quantization_config,
    "a16w8": get_symmetric_a16w8_quantization_config,
}
"""The `quantization=` choices of `quantize`: int8 activations and weights, or int16 activations and int8
weights (convolutions then accumulate into INT48 tensors)."""


IO_LAYOUTS = ("contiguous", "channels_last")
"""How a model's 4-D inputs and outputs are laid out in memory when it is exported: "contiguous" (NCHW, as torch
tensors come) or "channels_last" (NHWC). ExecuTorch keeps a delegate's inputs and outputs in the dim order of the
exported program (the Arm backend's NormalizeDelegateIOLayoutPass), and the NPU computes in NHWC: a contiguous
image costs the delegate a TRANSPOSE at each 4-D boundary, which no rewrite inside the delegate can remove; a
channels-last one costs none, and whoever feeds the program supplies NHWC data."""


def _in_layout(tensors: tuple, io_layout: str) -> tuple:
    """tensors with every 4-D tensor in io_layout's memory format (others as they are)."""
    if io_layout == "contiguous":
        return tensors
    return tuple(t.to(memory_format=torch.channels_last) if isinstance(t, torch.Tensor) and t.dim() == 4 else t for t in tensors)


def quantize(
    model: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    target: Configuration | str,
    *,
    quantization: str = "a8w8",
    calibration_inputs: Sequence[tuple[torch.Tensor, ...]] | None = None,
    io_layout: str = "contiguous",
) -> torch.export.ExportedProgram:
    """Quantize `model` for `target` and export it, ready for `lower`.

    Uses the symmetric configuration of `EthosUQuantizer` named by
    `quantization` (see QUANTIZATION_CONFIGS), calibrated on each input tuple
    of `calibration_inputs` (default: `example_inputs` alone). `model` must be
    in eval mode: exporting in training mode would bake dropout and
    batch-norm updates into the graph. With io_layout "channels_last" (IO_LAYOUTS) a copy of the model and its
    4-D inputs are channels-last when exported, so the program takes and returns NHWC images.
    """
    if model.training:
        raise ValueError("quantize() needs a model in eval mode; call model.eval()")
    if quantization not in QUANTIZATION_CONFIGS:
        raise ValueError(f"quantization must be one of {sorted(QUANTIZATION_CONFIGS)}, not {quantization!r}")
    if io_layout not in IO_LAYOUTS:
        raise ValueError(f"io_layout must be one of {', '.join(IO_LAYOUTS)}, not {io_layout!r}")
    if io_layout == "channels_last":
        model = copy.deepcopy(model).to(memory_format=torch.channels_last)
        example_inputs = _in_layout(example_inputs, io_layout)
        calibration_inputs = [_in_layout(sample, io_layout) for sample in calibration_inputs or ()]
    quantizer = EthosUQuantizer(compile_spec(target))
    quantizer.set_global(QUANTIZATION_CONFIGS[quantization]())
    graph_module = torch.export.export(model, example_inputs).module(check_guards=False)
    prepared = prepare_pt2e(graph_module, quantizer)
    for sample in calibration_inputs or (example_inputs,):
        prepared(*sample)
    return torch.export.export(convert_pt2e(prepared), example_inputs)


def lower(
    exported_program: torch.export.ExportedProgram,
    target: Configuration | str,
    *,
    workdir: str | Path,
) -> Lowered:
    """Lower `exported_program` for `target` (a configuration, or a target with its
    default configuration) with the stock Ethos-U flow.

    The Arm backend dumps its intermediate artifacts (TOSA files, Vela input
    and output) to `workdir`, which must not already hold TOSA files from an
    earlier lowering. Vela's printed summary is swallowed; if the lowering
    fails, the swallowed text is attached to the exception as a note.
    """
    workdir = Path(workdir)
    _require_no_tosa_artifacts(workdir)
    configuration = Configuration.resolve(target)
    spec = compile_spec(configuration).dump_intermediate_artifacts_to(str(workdir))
    start = time.perf_counter()
    with _stdout_kept_for_errors():
        edge = to_edge_transform_and_lower(exported_program, partitioner=[EthosUPartitioner(spec)])
    seconds = time.perf_counter() - start
    graph_module = edge.exported_program().graph_module
    tags = _delegation_tags(graph_module)
    return Lowered(
        target=configuration.target,
        tosa_flatbuffers=[_tosa_artifact(workdir, tag).read_bytes() for tag in tags],
        delegates=len(tags),
        cpu_ops=_cpu_ops(graph_module),
        edge=edge,
        seconds=seconds,
        configuration=configuration,
    )


def _require_no_tosa_artifacts(workdir: Path) -> None:
    """Refuse a workdir whose old TOSA files could be mistaken for new ones."""
    stale = sorted(path.name for path in workdir.glob("output*.tosa"))
    if stale:
        raise ValueError(
            f"{workdir} already holds TOSA artifacts of an earlier lowering "
            f"({', '.join(stale)}); lower into an empty directory"
        )


@contextlib.contextmanager
def _stdout_kept_for_errors() -> Iterator[None]:
    """Swallow stdout, but attach it to any exception that escapes."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            yield
    except Exception as error:
        if captured.getvalue():
            error.add_note(f"stdout before the failure:\n{captured.getvalue()}")
        raise


def _delegation_tags(graph_module: torch.fx.GraphModule) -> list[str]:
    """Return the delegation tag of each delegate call, in graph order.

    The partitioner numbers tags in its own order (for a chain of delegates
    it is the reverse of execution order), so the tag is read from the
    lowered module that each call runs.
    """
    tags = []
    for node in graph_module.graph.nodes:
        if node.target is not executorch_call_delegate:
            continue
        lowered_module = getattr(graph_module, node.args[0].target)
        tag = arm_get_first_delegation_tag(lowered_module.original_module.graph_module)
        if not tag:
            raise RuntimeError(f"delegate {node.args[0].target} has no delegation tag")
        tags.append(tag)
    return tags


def _tosa_artifact(workdir: Path, tag: str) -> Path:
    """Return the TOSA file that the Arm backend dumped for delegate `tag`.

    The backend names it `output_<tag>_<tosa spec>.tosa`.
    """
    matches = list(workdir.glob(f"output_{tag}_*.tosa"))
    if len(matches) != 1:
        raise RuntimeError(
            f"expected one TOSA artifact for delegate {tag} in {workdir}, "
            f"found {len(matches)}: {[path.name for path in matches]}"
        )
    return matches[0]


def _cpu_ops(graph_module: torch.fx.GraphModule) -> list[str]:
    """Return the names of the call_function nodes left outside the delegates."""
    names = (_op_name(node) for node in graph_module.graph.nodes if node.op == "call_function")
    return [name for name in names if not _is_boundary_op(name)]


def _is_boundary_op(name: str) -> bool:
    """Tell whether an op is delegate glue or per-tensor (de)quantization."""
    overload_packet = name.rpartition(".")[0]
    return name in _GLUE_OPS or overload_packet in _BOUNDARY_QUANT_OPS


def _op_name(node: torch.fx.Node) -> str:
    """Return a readable name for a node's target, e.g. `aten.sort.default`."""
    target = node.target
    if hasattr(target, "_op"):  # an edge-dialect EdgeOpOverload
        return str(target._op)
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__name__", str(target))
