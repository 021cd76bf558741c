"""Upstream's Arm backend tests, run plain and with eqsat installed: do they end the same?

    .venv/bin/python -m benchmarks.upstream_tests [--cases N] [--out FILE]

The ExecuTorch wheel ships the Arm backend's own tests (`executorch/backends/arm/test/`). From each file
in SELECTION (or `--files`), this takes the first test function of each of the TOSA, Ethos-U55 and Ethos-U85
integer pipelines (`..._tosa_INT`, `..._u55_INT`, `..._u85_INT`; int8 only, no 16a8w, a8w4 or int32
variants), its first `--cases` parametrizations, and runs them twice in
pytest subprocesses: plain, and with `eqsat.install()` (tests/upstream_eqsat_plugin.py). Ethos-U tests
compile through Vela and stop where upstream marks them: without a Corstone FVP they are xfails. Both runs
have TOSA_MODEL_NO_BACKTRACE set, so the TOSA reference model attaches no debugger to a refused graph.
It writes a table of both outcomes per test, with what eqsat did, to `--out`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = Path(importlib.util.find_spec("executorch.backends.arm").submodule_search_locations[0]) / "test"
SELECTION = (
    "misc/test_transpose_counts.py",
    "misc/test_high_rank_permute_view_invariants.py",
    "misc/test_reshape_permute_5d_regression.py",
    "ops/test_permute.py",
    "ops/test_cat.py",
    "ops/test_slice.py",
    "ops/test_view.py",
    "ops/test_split.py",
    "ops/test_squeeze.py",
    "ops/test_unsqueeze.py",
    "ops/test_add.py",
    "ops/test_mul.py",
    "ops/test_mean_dim.py",
    "ops/test_softmax.py",
    "ops/test_layer_norm.py",
    "ops/test_conv2d.py",
    "ops/test_multihead_attention.py",
)
PIPELINE_FUNCTION = re.compile(r"_(tosa|u55|u85)_INT$")
"""The test functions of the three integer pipelines (the group names the pipeline)."""
VARIANT = re.compile(r"16a8w|a16w8|a8w4|int32|_i32")
"""Function names of the other quantizations, left out."""


def selected_tests(cases: int, files: tuple[str, ...] = SELECTION) -> list[str]:
    """The node ids to run (relative to UPSTREAM): per file and pipeline, the first int8 test function's
    first `cases` parametrizations."""
    listing = _pytest(["--collect-only", "-q", *(str(UPSTREAM / f) for f in files)], env=_environment())
    chosen: dict[tuple[str, str], str] = {}  # (file, pipeline) -> its first function
    per_function: dict[str, list[str]] = {}
    for line in listing.stdout.splitlines():
        function = line.strip().split("[", 1)[0]
        pipeline = PIPELINE_FUNCTION.search(function)
        if "::" not in function or pipeline is None or VARIANT.search(function):
            continue
        if chosen.setdefault((function.split("::")[0], pipeline.group(1)), function) == function:
            per_function.setdefault(function, []).append(line.strip())
    return [test for tests in per_function.values() for test in tests[:cases]]


def run(tests: list[str], with_eqsat: bool, workdir: Path) -> tuple[dict[str, str], dict[str, list], float]:
    """Run tests in one pytest process; each test's outcome, eqsat's runs per test (with_eqsat) and the seconds."""
    junit, reports = workdir / "junit.xml", workdir / "eqsat_reports.jsonl"
    arguments = [f"--junitxml={junit}", "-q", "-p", "no:cacheprovider", *(str(UPSTREAM / test) for test in tests)]
    if with_eqsat:
        arguments[:0] = ["-p", "tests.upstream_eqsat_plugin"]
    started = time.perf_counter()
    _pytest(arguments, env=_environment(EQSAT_UPSTREAM_REPORTS=str(reports)))
    seconds = time.perf_counter() - started
    runs = {}
    if reports.exists():
        for line in reports.read_text().splitlines():
            record = json.loads(line)
            runs[record["test"]] = record["runs"]
    return _outcomes(junit), runs, seconds


def _environment(**extra: str) -> dict[str, str]:
    environment = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1", **extra)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    return environment


def _pytest(arguments: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    # rootdir: upstream's own, so that its conftest.py and node ids apply; our pyproject's addopts do not
    command = [sys.executable, "-m", "pytest", f"--rootdir={UPSTREAM}", "-c", os.devnull, *arguments]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def _outcomes(junit: Path) -> dict[str, str]:
    """passed, failed, error, skipped or xfailed per test, from pytest's JUnit XML."""
    outcomes = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname').replace('.', '/')}.py::{case.get('name')}"
        children = {child.tag: child for child in case}
        if "failure" in children:
            outcome = "failed"
        elif "error" in children:
            outcome = "error"
        elif "skipped" in children:
            outcome = "xfailed" if children["skipped"].get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        outcomes[name] = outcome
    return outcomes


def compare(cases: int, files: tuple[str, ...] = SELECTION) -> dict:
    """Both runs of the selection, side by side."""
    tests = selected_tests(cases, files)
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as eqsat_dir, ThreadPoolExecutor(2) as pool:
        plain = pool.submit(run, tests, False, Path(plain_dir))
        with_eqsat = pool.submit(run, tests, True, Path(eqsat_dir))
        (plain_outcomes, _, plain_seconds), (eqsat_outcomes, runs, eqsat_seconds) = plain.result(), with_eqsat.result()
    return {
        "tests": tests,
        "plain": plain_outcomes,
        "eqsat": eqsat_outcomes,
        "runs": runs,
        "seconds": {"plain": plain_seconds, "eqsat": eqsat_seconds},
    }


def _what_eqsat_did(runs: list[dict]) -> str:
    if not runs:
        return "not run (nothing delegated, or failed before the pass)"
    return "; ".join(
        f"{run['target'] or 'no target'}: " + ("changed" if run["changed"] else f"kept ({run['fallback'] or 'nothing cheaper'})")
        for run in runs
    )


def markdown(result: dict, command: str) -> str:
    """The comparison as a results page."""
    plain, with_eqsat = result["plain"], result["eqsat"]
    runs = result["runs"]
    names = sorted(set(plain) | set(with_eqsat))
    differing = [name for name in names if plain.get(name) != with_eqsat.get(name)]
    lines = [
        "# Upstream's Arm backend tests, plain and with eqsat installed",
        "",
        f"Produced by `{command}` (executorch {_executorch_version()}).",
        f"{len(names)} tests; {len(differing)} end differently. "
        f"Plain run {result['seconds']['plain']:.0f} s, with eqsat {result['seconds']['eqsat']:.0f} s, side by side on 2 shared cores.",
        "",
        "| test | plain | with eqsat | what eqsat did |",
        "|---|---|---|---|",
    ]
    for name in names:
        lines.append(f"| `{name}` | {plain.get(name, 'not run')} | {with_eqsat.get(name, 'not run')} | {_what_eqsat_did(runs.get(name, []))} |")
    return "\n".join(lines) + "\n"


def _executorch_version() -> str:
    from importlib.metadata import version

    return version("executorch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1, help="parametrizations per test function (default 1)")
    parser.add_argument("--files", nargs="+", default=SELECTION, metavar="FILE", help="upstream test files, relative to its test folder")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/upstream_tests.md")
    args = parser.parse_args(argv)
    result = compare(args.cases, tuple(args.files))
    command = "python -m benchmarks.upstream_tests" + ("" if args.cases == 1 else f" --cases {args.cases}")
    if tuple(args.files) != SELECTION:
        command += " --files " + " ".join(args.files)
    args.out.write_text(markdown(result, command))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
