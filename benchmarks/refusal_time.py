"""How long the TOSA reference model takes to refuse a graph, with and without eqsat's guard.

    .venv/bin/python -m benchmarks.refusal_time [--repeats N] [--skip-bare]

One RESCALE of int16 with input zero point 5 fails an ERROR_IF (only int8 may
have a nonzero input zero point). It runs through `validate.run_reference_model`
(no debugger is attached), once as an accepted graph (zero point 0) for
comparison, and once bare through `tosa_reference_model.run`, where the model
attaches gdb for a backtrace if gdb is on PATH. Wall-clock seconds on this
machine: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import shutil
import time

import numpy as np
import tosa_reference_model

from eqsat.calibration.graphs import _Graph, _rescale
from eqsat.validate import run_reference_model, stdout_silenced


def rescale_graph(input_zero_point: int) -> bytes:
    """One int16 -> int8 RESCALE of a [2, 3] tensor with the given input zero point."""
    graph = _Graph()
    x = graph.input([2, 3], "int16")
    graph.output(_rescale(graph, "rescale", x, [2, 3], "int16", "int8", "unit", zero_points=(input_zero_point, 0)))
    return graph.tosa.serialize()


def seconds(run, graph: bytes) -> tuple[float, str]:
    """Wall-clock seconds of one run of graph, and the status it finished with."""
    inputs = [np.zeros((2, 3), dtype=np.int16)]
    start = time.perf_counter()
    with stdout_silenced():
        _, status = run(graph, inputs)
    return time.perf_counter() - start, status.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each guarded case (default 3)")
    parser.add_argument("--skip-bare", action="store_true", help="leave out the bare refusal (about a minute with gdb)")
    args = parser.parse_args(argv)
    accepted, refused = rescale_graph(0), rescale_graph(5)
    print(f"gdb on PATH: {shutil.which('gdb') or 'no'}")
    cases = [("accepted, run_reference_model", run_reference_model, accepted, args.repeats)]
    cases.append(("refused, run_reference_model", run_reference_model, refused, args.repeats))
    if not args.skip_bare:
        cases.append(("refused, bare tosa_reference_model.run", tosa_reference_model.run, refused, 1))
    for label, run, graph, repeats in cases:
        timings = [seconds(run, graph) for _ in range(repeats)]
        print(f"{label}: {timings[0][1]}, " + ", ".join(f"{t:.4f} s" for t, _ in timings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
