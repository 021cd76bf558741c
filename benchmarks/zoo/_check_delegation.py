"""Check that every zoo model lowers fully to the Ethos-U NPU.

Quantizes each model to int8, lowers it with the Ethos-U partitioner for each
target, and reports the number of delegates, any compute op left on the CPU,
and the CPU seconds quantize+lower took (CPU rather than wall time, so the
figure does not depend on what else the machine is running). Exits non-zero
if any model is not fully delegated.

Usage:
    python -m benchmarks.zoo._check_delegation [MODEL ...] [--targets T ...]
"""

import argparse
import sys
import time
from dataclasses import dataclass

import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
from executorch.backends.arm.quantizer import (
    EthosUQuantizer,
    get_symmetric_quantization_config,
)
from executorch.exir import to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from benchmarks.zoo import ZOO, ModelSpec, get
from eqsat.validate import stdout_silenced

TARGETS = ("ethos-u55-128", "ethos-u85-256")
DELEGATE_CALL = "executorch_call_delegate"
IGNORED_OPS = {
    "quantized_decomposed.quantize_per_tensor.default",
    "quantized_decomposed.dequantize_per_tensor.default",
    "getitem",
    DELEGATE_CALL,
}


@dataclass(frozen=True)
class DelegationResult:
    model: str
    target: str
    delegates: int
    leftover_ops: tuple[str, ...]
    cpu_seconds: float
    error: str | None = None

    @property
    def fully_delegated(self) -> bool:
        return self.error is None and self.delegates > 0 and not self.leftover_ops


def op_name(target: object) -> str:
    return getattr(target, "__name__", str(target))


def lower(
    model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...], target: str
) -> torch.fx.Graph:
    """Quantize `model` to int8 and lower it for `target`; return the edge graph."""
    spec = EthosUCompileSpec(target)
    quantizer = EthosUQuantizer(spec)
    quantizer.set_global(get_symmetric_quantization_config())
    exported = torch.export.export(model, example_inputs).module(check_guards=False)
    prepared = prepare_pt2e(exported, quantizer)
    prepared(*example_inputs)
    quantized = convert_pt2e(prepared)
    program = torch.export.export(quantized, example_inputs)
    edge = to_edge_transform_and_lower(program, partitioner=[EthosUPartitioner(spec)])
    return edge.exported_program().graph


def check(spec: ModelSpec, target: str) -> DelegationResult:
    name = spec.name
    model, example_inputs = spec.build()
    start = time.process_time()
    try:
        with stdout_silenced():
            graph = lower(model, example_inputs, target)
    except Exception as exc:  # report the failure and keep checking the others
        error = f"{type(exc).__name__}: {exc}"
        return DelegationResult(name, target, 0, (), time.process_time() - start, error)
    cpu_seconds = time.process_time() - start
    call_names = [op_name(n.target) for n in graph.nodes if n.op == "call_function"]
    delegates = call_names.count(DELEGATE_CALL)
    leftover = tuple(sorted({c for c in call_names if c not in IGNORED_OPS}))
    return DelegationResult(name, target, delegates, leftover, cpu_seconds)


def format_row(result: DelegationResult) -> str:
    if result.error is not None:
        status = f"ERROR {result.error.splitlines()[0][:120]}"
    elif result.fully_delegated:
        status = "ok"
    else:
        status = "NOT FULLY DELEGATED"
    leftover = ", ".join(result.leftover_ops) or "-"
    return (
        f"{result.model:28} {result.target:15} {result.delegates:>9} "
        f"{result.cpu_seconds:>7.1f}  {leftover:30} {status}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model names (default: all)")
    parser.add_argument("--targets", nargs="+", default=list(TARGETS))
    args = parser.parse_args(argv)

    try:
        specs = [get(name) for name in args.models] or list(ZOO.values())
    except KeyError as exc:
        parser.error(exc.args[0])

    print(
        f"{'model':28} {'target':15} {'delegates':>9} {'cpu s':>7}  "
        f"{'leftover ops':30} status"
    )
    results = []
    for spec in specs:
        for target in args.targets:
            result = check(spec, target)
            results.append(result)
            print(format_row(result), flush=True)

    failures = [r for r in results if not r.fully_delegated]
    print(f"\n{len(results) - len(failures)}/{len(results)} fully delegated")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
