"""The `eqsat` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.zoo import ZOO
from eqsat import bench
from eqsat.pipeline import ACCELERATORS


def _bench(arguments: argparse.Namespace) -> int:
    models = arguments.models or list(ZOO)
    unknown = sorted(set(models) - set(ZOO))
    if unknown:
        print(f"eqsat bench: unknown model(s) {unknown}; known: {', '.join(ZOO)}", file=sys.stderr)
        return 2
    rows = bench.run(models, arguments.targets, arguments.out, fresh=arguments.fresh)
    bench.write_results(rows, arguments.out)
    print(bench.markdown_table(rows))
    print(f"results: {arguments.out / 'results.md'}, {arguments.out / 'results.json'}, charts in {arguments.out}")
    complete = len(rows) == len(models) * len(arguments.targets)
    return 0 if complete and all(r["bit_exact"] for r in rows) else 1


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="eqsat", description="Equality saturation for the ExecuTorch Arm backend")
    commands = top.add_subparsers(dest="command", required=True)
    bench_command = commands.add_parser("bench", help="Vela cycles before/after eqsat on the model zoo")
    bench_command.add_argument("--models", nargs="+", help="zoo model names (default: all)")
    bench_command.add_argument("--targets", nargs="+", default=list(bench.DEFAULT_TARGETS), choices=ACCELERATORS)
    bench_command.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="results directory")
    bench_command.add_argument("--fresh", action="store_true", help="rerun rows that already have results")
    bench_command.set_defaults(handler=_bench)
    return top


def main(argv: list[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    return arguments.handler(arguments)


if __name__ == "__main__":
    sys.exit(main())
