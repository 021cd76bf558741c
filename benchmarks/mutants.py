"""Mutation check of the rewrite laws: one-line mutants of eqsat/rules/, and which of them the rule tests kill.

    .venv/bin/python -m benchmarks.mutants                       # every mutant; writes benchmarks/results/mutants.md
    .venv/bin/python -m benchmarks.mutants --only NAME [NAME ...] # some mutants (no table written)
    .venv/bin/python -m benchmarks.mutants --list                 # the mutants, checked against the tree, no test run

Why: a law whose test passes with a wrong guard or a wrong index is not
tested. Each mutant below is a law made wrong on purpose, one line of
eqsat/rules/*.py or guards.py changed: a guard dropped, two indices swapped,
a window moved by one, a comparison flipped, a constant changed. Each is
declared as data (file, exact original snippet, replacement, why it is wrong)
so the list stays checkable: a snippet that is no longer in its file exactly
once stops the run (tests/rules/test_mutants.py checks that in the default
suite, without running any mutant).

The script copies the tree to a temporary directory (the working tree is
never written, so a crash never leaves a mutant behind). For each mutant it
applies the mutant there, runs the tests that cover it (the mirrored
tests/rules/test_<module>.py, plus the mutant's own extras) with `pytest -x`
under a timeout, the unit tests (fires, does not fire) first and the
soundness properties (named `*_sound`) only if those all pass, restores the
file, and records whether a test failed (killed) or all passed (survived).
A kill counts only if the killing test passes on the unmutated tree: the
killing tests run once more at the end, unmutated, and a mutant whose killer
fails there too is reported as an error, not a kill.

Why not mutmut or cosmic-ray: they mutate Python operators and constants
anywhere in a module, blind to which line is a law's guard. Most of their
mutants here would be docstrings, names, or rewrites of the rule-building
Python that egglog rejects at import, and a dropped fact of a query (the
commonest real bug of a law) is not one of their operators. The list below is
the laws' own failure modes, small enough to read and to keep.
"""

from __future__ import annotations

import argparse
import queue
import re
import threading
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mutants.md"
TIMEOUT_S = 900
"""Per mutant: the mirrored test file of the largest rules module runs in about 5 minutes unmutated."""

COPIED = ("eqsat", "tests", "benchmarks", "pyproject.toml")
"""What the temporary tree holds: the package and its tests (the results, notebooks and docs are not needed)."""


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    """Path from the repository root."""
    original: str
    """Exact text, found exactly once in file."""
    replacement: str
    why: str
    """What the mutated law gets wrong."""
    extra_tests: tuple[str, ...] = field(default=())
    """Test files or node ids to run besides the mirrored one (the only ones, for guards.py and analysis.py)."""

    @property
    def tests(self) -> tuple[str, ...]:
        module = Path(self.file).stem
        mirrored = f"tests/rules/test_{module}.py"
        return self.extra_tests if module in ("guards", "analysis") else (mirrored, *self.extra_tests)


RULES = "eqsat/rules/"
RESCALE_TESTS = ("tests/rules/test_rescale.py",)
MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------ rescale algebra and its guards
    Mutant(
        "fusion-per-channel-first-rescale",
        RULES + "guards.py",
        "        *is_per_tensor(multipliers),\n        eq(multipliers[0] % (i64(1) << shifts[0])).to(i64(0)),\n",
        "        eq(multipliers[0] % (i64(1) << shifts[0])).to(i64(0)),\n",
        "a per-channel first rescale fuses with channel 0's exponent: channels 1.. come out scaled wrong",
        RESCALE_TESTS,
    ),
    Mutant(
        "reshape-per-channel-drops-same-last-dim",
        RULES + "rescale.py",
        "        *same_last_dim(s, shape(x)),\n",
        "",
        "a reshape that changes the last dim moves below a per-channel rescale: the channels no longer line up",
    ),
    Mutant(
        "slice-per-channel-drops-same-last-dim",
        RULES + "rescale.py",
        "        *same_last_dim(size, shape(x)),\n",
        "",
        "a slice that cuts the channels keeps every channel's multiplier: channel j of the slice is rescaled as channel j of x",
    ),
    Mutant(
        "transpose-per-channel-drops-keeps-last-axis",
        RULES + "rescale.py",
        "        *keeps_last_axis(p),\n",
        "",
        "a transpose that moves the channel axis moves below a per-channel rescale: other elements get channel c's scale",
    ),
    Mutant(
        "transpose-through-rescale-drops-per-tensor",
        RULES + "rescale.py",
        "        x.transpose(p).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n        *is_per_tensor(m),\n",
        "        x.transpose(p).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n",
        "a per-channel rescale moves below any transpose as if it were per-tensor",
    ),
    Mutant(
        "reshape-through-rescale-drops-per-tensor",
        RULES + "rescale.py",
        "        x.reshape(s).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n        *is_per_tensor(m),\n",
        "        x.reshape(s).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n",
        "a per-channel rescale moves below a reshape that changes the last dim",
    ),
    Mutant(
        "channel-window-reads-first-dim",
        RULES + "rescale.py",
        "        eq(first).to(start[last]),\n",
        "        eq(first).to(start[0]),\n",
        "the window of multipliers starts at the box's start on dim 0, not on the channel (last) dim",
    ),
    Mutant(
        "channel-window-off-by-one",
        RULES + "analysis.py",
        "        eq(element).to(v[axis + k]),\n",
        "        eq(element).to(v[axis + k + 1]),\n",
        "the window of a sliced per-channel rescale takes the multipliers one channel to the right",
        RESCALE_TESTS,
    ),
    Mutant(
        "fused-shift-adds-the-exponent",
        RULES + "rescale.py",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent), in_zp, out_zp, tag),\n",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] + exponent), in_zp, out_zp, tag),\n",
        "the fused rescale divides by 2^k instead of multiplying",
    ),
    Mutant(
        "fused-shift-off-by-one",
        RULES + "rescale.py",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent), in_zp, out_zp, tag),\n",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent - 1), in_zp, out_zp, tag),\n",
        "the fused rescale scales by twice the product of the two",
    ),
    Mutant(
        "fusion-drops-int32-intermediate",
        RULES + "rescale.py",
        "            eq(dtype(x)).to(String(narrow)),\n            eq(mid_dtype).to(String(INT32)),\n            eq(mid_out_zp).to(i64(0)),\n            eq(mid_in_zp).to(i64(0)),\n            *is_exact_power_of_two_scaling(m, sh, exponent),\n            *is_per_tensor(m2),\n",
        "            eq(dtype(x)).to(String(narrow)),\n            eq(mid_out_zp).to(i64(0)),\n            eq(mid_in_zp).to(i64(0)),\n            *is_exact_power_of_two_scaling(m, sh, exponent),\n            *is_per_tensor(m2),\n",
        "a first rescale to int8/int16 clamps; the fused rescale does not",
    ),
    Mutant(
        "fusion-of-a-non-integer-scale",
        RULES + "guards.py",
        "        eq(multipliers[0] % (i64(1) << shifts[0])).to(i64(0)),\n",
        "",
        "a first scale like 1.5 fuses as 2^0: its fraction is lost",
        RESCALE_TESTS,
    ),
    Mutant(
        "fusion-of-a-non-power-of-two",
        RULES + "guards.py",
        "        eq(factor & (factor - 1)).to(i64(0)),\n",
        "",
        "a first scale of 3 fuses as 2^log2(3) = 2",
        RESCALE_TESTS,
    ),
    Mutant(
        "fused-per-channel-shifts-off-by-one",
        RULES + "rescale.py",
        "    return shifts.map(UnstableFn[i64, i64](i64.__add__, i64(0) - exponent))\n",
        "    return shifts.map(UnstableFn[i64, i64](i64.__add__, i64(1) - exponent))\n",
        "each fused per-channel shift is one too large: every channel halves",
    ),
    Mutant(
        "identity-drops-equal-zero-points",
        RULES + "guards.py",
        "    return [eq(out_dtype).to(x_dtype), eq(in_zp).to(out_zp), *is_exact_one(multipliers, shifts)]\n",
        "    return [eq(out_dtype).to(x_dtype), *is_exact_one(multipliers, shifts)]\n",
        "a rescale by 1 that moves the zero point is taken for the identity",
        RESCALE_TESTS,
    ),
    Mutant(
        "identity-of-half-scale",
        RULES + "guards.py",
        "    return [*is_per_tensor(multipliers), eq(multipliers[0]).to(i64(1) << shifts[0])]\n",
        "    return [*is_per_tensor(multipliers), eq(multipliers[0]).to(i64(1) << (shifts[0] - 1))]\n",
        "a rescale by 1/2 is taken for the identity",
        RESCALE_TESTS,
    ),
    Mutant(
        "per-channel-identity-drops-equal-zero-points",
        RULES + "rescale.py",
        "        eq(in_zp).to(out_zp),\n        *is_exact_one_per_channel(m, sh),\n",
        "        *is_exact_one_per_channel(m, sh),\n",
        "a per-channel rescale by 1 that moves the zero point is taken for the identity",
    ),
    Mutant(
        "concat-of-per-channel-rescales-along-channels",
        RULES + "guards.py",
        "    return [axis + 1 < dims.length() + i64(2) - multipliers.length().min(i64(2))]\n",
        "    return [axis + 1 < dims.length() + i64(2) - multipliers.length().min(i64(1))]\n",
        "per-channel rescales hoist out of a concat along the channel axis: the concat has twice the channels",
        RESCALE_TESTS,
    ),
    Mutant(
        "keeps-last-axis-reads-first",
        RULES + "guards.py",
        "    return [i64(0) < perm.length(), eq(perm[perm.length() - 1]).to(perm.length() - 1)]\n",
        "    return [i64(0) < perm.length(), eq(perm[0]).to(i64(0))]\n",
        "a transpose that keeps dim 0 in place, not the channel axis, moves below a per-channel rescale",
        RESCALE_TESTS,
    ),
    Mutant(
        "same-last-dim-compares-first",
        RULES + "guards.py",
        "    return [i64(0) < a.length(), i64(0) < b.length(), eq(a[a.length() - 1]).to(b[b.length() - 1])]\n",
        "    return [i64(0) < a.length(), i64(0) < b.length(), eq(a[0]).to(b[0])]\n",
        "a reshape or slice that keeps the first dim, not the channels, moves below a per-channel rescale",
        RESCALE_TESTS,
    ),
    # ------------------------------------------------------------ transpose algebra
    Mutant(
        "transpose-compose-swapped",
        RULES + "transpose.py",
        "x.transpose(q.map(p.__getitem__))",
        "x.transpose(p.map(q.__getitem__))",
        "two transposes compose as q∘p instead of p∘q",
    ),
    Mutant(
        "transpose-through-binary-drops-same-shape",
        RULES + "transpose.py",
        "        eq(shape(left)).to(shape(right)),\n",
        "",
        "a transpose moves into both operands of a broadcast: the broadcast operand is transposed to another shape",
    ),
    Mutant(
        "transpose-through-pad-keeps-padding",
        RULES + "transpose.py",
        "        eq(moved).to(paired_perm(p, p.length()).map(padding.__getitem__)),\n",
        "        eq(moved).to(padding),\n",
        "the padding of a transposed pad is not permuted: each dim gets another dim's padding",
    ),
    Mutant(
        "transpose-through-slice-unpermuted-box",
        RULES + "transpose.py",
        "        x.transpose(p).slice(p.map(start.__getitem__), p.map(size.__getitem__)),\n",
        "        x.transpose(p).slice(start, p.map(size.__getitem__)),\n",
        "the box's start is not permuted with the transpose",
    ),
    Mutant(
        "slice-through-transpose-permutes-forward",
        RULES + "transpose.py",
        "        x.slice(inverse.map(start.__getitem__), inverse.map(size.__getitem__)).transpose(p),\n",
        "        x.slice(p.map(start.__getitem__), p.map(size.__getitem__)).transpose(p),\n",
        "the box is mapped through p instead of its inverse (wrong for every perm that is not its own inverse)",
    ),
    Mutant(
        "transpose-hoist-keeps-axis",
        RULES + "transpose.py",
        "        eq(source_axis).to(p[axis]),\n",
        "        eq(source_axis).to(axis),\n",
        "the hoisted concat joins along the transposed axis number, not the source's",
    ),
    Mutant(
        "unit-dims-order-flipped",
        RULES + "transpose.py",
        "big[i] * big[j] * (perm[i] - perm[j]).max(0).min(1)",
        "big[i] * big[j] * (perm[j] - perm[i]).max(0).min(1)",
        "a transpose that reorders dims larger than 1 is taken for a reshape (and an order-keeping one is not)",
    ),
    Mutant(
        "transpose-through-reduce-inverse-axis",
        RULES + "transpose.py",
        "        Tensor.reduce(reduce_key, x.transpose(p), new_axis),\n        index_below(p.length(), new_axis),\n        eq(p[new_axis]).to(axis),\n",
        "        Tensor.reduce(reduce_key, x.transpose(p), new_axis),\n        index_below(p.length(), new_axis),\n        eq(p[axis]).to(new_axis),\n",
        "the reduced axis is mapped through p instead of its inverse",
    ),
    # ------------------------------------------------------------ concat and slice
    Mutant(
        "slice-of-concat-inside-keeps-offset",
        RULES + "concat_slice.py",
        "        eq(inner_start).to(start.set(axis, begin - offset)),\n",
        "        eq(inner_start).to(start),\n",
        "a box inside input i of a concat is read at the concat's coordinates, not the input's",
    ),
    Mutant(
        "within-one-input-off-by-one",
        RULES + "guards.py",
        "    return [offset <= begin, begin + length <= offset + extent]\n",
        "    return [offset <= begin, begin + length <= offset + extent + 1]\n",
        "a box that reads one element past input i of a concat is taken as inside it",
        ("tests/rules/test_concat_slice.py",),
    ),
    Mutant(
        "slice-slice-drops-inner-start",
        RULES + "concat_slice.py",
        "            *[eq(total).to(start[d] + outer_start[d]) for d, total in enumerate(sums)],\n",
        "            *[eq(total).to(outer_start[d]) for d, total in enumerate(sums)],\n",
        "a slice of a slice forgets the inner slice's start",
    ),
    Mutant(
        "adjacent-slices-keep-first-size",
        RULES + "concat_slice.py",
        "        eq(merged_size).to(size.set(axis, total)),\n",
        "        eq(merged_size).to(size),\n",
        "a run of adjacent slices merges into the first slice alone",
    ),
    Mutant(
        "concat-flatten-repeats-nested",
        RULES + "concat_slice.py",
        "        eq(rest).to(trailing_parts(parts, first + 1)),\n",
        "        eq(rest).to(trailing_parts(parts, first)),\n",
        "the flattened concat keeps the nested concat after its inputs",
    ),
    Mutant(
        "concat-extends-wrong-last",
        RULES + "concat_slice.py",
        "        eq(last).to(parts[parts.length() - 1]),",
        "        eq(last).to(parts[parts.length() - 2]),",
        "the extended concat appends the second-to-last input again",
    ),
    Mutant(
        "slice-exact-at-origin",
        RULES + "guards.py",
        "    return [eq(size).to(input_shape), eq(start).to(zeros_like(size).set(axis, offset))]\n",
        "    return [eq(size).to(input_shape), eq(start).to(zeros_like(size))]\n",
        "any box the size of input i is taken for input i, wherever it starts",
        ("tests/rules/test_concat_slice.py",),
    ),
    # ------------------------------------------------------------ slice pushdown
    Mutant(
        "slice-through-binary-drops-same-shape",
        RULES + "slice_pushdown.py",
        "        eq(shape(a)).to(shape(b)),\n",
        "",
        "a slice moves into both operands of a broadcast",
    ),
    Mutant(
        "slice-through-reshape-drops-whole-rows",
        RULES + "slice_pushdown.py",
        "        eq(extent % source_inner).to(i64(0)),\n",
        "",
        "a cut that ends inside a row of x's dim moves through the reshape",
    ),
    Mutant(
        "slice-inside-pad-reads-after-padding",
        RULES + "guards.py",
        "    return Vec(*[start[i] - padding[2 * i] for i in range(rank)])\n",
        "    return Vec(*[start[i] - padding[2 * i + 1] for i in range(rank)])\n",
        "a box of a pad is shifted by the padding after each dim, not before",
        ("tests/rules/test_slice_pushdown.py",),
    ),
    # ------------------------------------------------------------ reshape, rank lowering, views, reduce
    Mutant(
        "reshape-identity-drops-shape",
        RULES + "reshape.py",
        "    yield law(\"reshape-identity\", x.reshape(s), x, eq(s).to(shape(x)))\n",
        "    yield law(\"reshape-identity\", x.reshape(s), x)\n",
        "every reshape is taken for the identity",
    ),
    Mutant(
        "reshape-through-table-drops-mac-shape",
        RULES + "reshape.py",
        "        *table_operand_is_not_batched_mac_shape(s),\n",
        "",
        "a reshape gives a TABLE an [N,1,1,C] operand, N > 1, which Vela miscompiles (MLBEDSW-11805)",
    ),
    Mutant(
        "transpose-merge-drops-adjacency",
        RULES + "transpose_rank.py",
        "        eq(p[i + 1]).to(p[i] + 1),\n",
        "",
        "two output dims that are not adjacent in the input are merged",
    ),
    Mutant(
        "transpose-drop-unit-dim-drops-unit",
        RULES + "transpose_rank.py",
        "        *is_unit_dim(dims, j),\n",
        "",
        "a dim longer than 1 is dropped as if it were a unit dim",
    ),
    Mutant(
        "split-perm-output-shape-unpermuted",
        RULES + "transpose_view.py",
        "        eq(out).to(p.map(s.__getitem__)),\n",
        "        eq(out).to(s),\n",
        "the split transpose is reshaped back to the unpermuted shape",
    ),
    Mutant(
        "peel-leading-dim-keeps-perm",
        RULES + "transpose_view.py",
        "        eq(rest).to(p.map(front_position(lead, p.length()).__getitem__)),\n",
        "        eq(rest).to(p),\n",
        "the second factor of a peeled transpose is the whole perm again, not the rest after the moved dim",
    ),
    Mutant(
        "slice-merge-whole-inner-dim-drops-start",
        RULES + "slice_concat_rank.py",
        "        eq(start[j + 1]).to(i64(0)),\n",
        "",
        "a box that starts inside dim j + 1 is taken as whole along it",
    ),
    Mutant(
        "slice-merge-unit-outer-dim-drops-unit",
        RULES + "slice_concat_rank.py",
        "        eq(size[j]).to(i64(1)),\n",
        "",
        "a box wider than one index along dim j is merged as if it were one index wide",
    ),
    Mutant(
        "reshape-through-concat-wrong-axis",
        RULES + "analysis.py",
        "        eq(new_shape[new_axis]).to(dims[axis]),\n",
        "",
        "a reshape of a concat whose axis is not one dim of the new shape becomes a concat of reshapes",
        ("tests/rules/test_reshape_concat.py",),
    ),
    Mutant(
        "reduce-innermost-swap-is-not-a-permutation",
        RULES + "reduce.py",
        "        eq(swap).to(dims.length().range().set(axis, axis - 1).set(axis - 1, axis)),\n",
        "        eq(swap).to(dims.length().range().set(axis, axis - 1)),\n",
        "the transpose around the moved reduction repeats a dim instead of swapping the last two",
    ),
)


def check(mutants: tuple[Mutant, ...] = MUTANTS, root: Path = ROOT) -> list[str]:
    """Every way the list is ill-formed: a snippet not found exactly once in its file, a replacement equal to its
    original, a duplicated name, a test path that does not exist."""
    problems = []
    names = [m.name for m in mutants]
    problems += [f"{name}: declared twice" for name in sorted({n for n in names if names.count(n) > 1})]
    for mutant in mutants:
        path = root / mutant.file
        if not path.is_file():
            problems.append(f"{mutant.name}: no file {mutant.file}")
            continue
        found = path.read_text().count(mutant.original)
        if found != 1:
            problems.append(f"{mutant.name}: original snippet found {found} times in {mutant.file}, not once")
        if mutant.original == mutant.replacement:
            problems.append(f"{mutant.name}: the replacement is the original")
        if not mutant.tests:
            problems.append(f"{mutant.name}: no tests to run")
        problems += [f"{mutant.name}: no test file {t}" for t in mutant.tests if not (root / t.split("::")[0]).is_file()]
    return problems


@dataclass
class Outcome:
    mutant: Mutant
    status: str
    """killed (a test failed), survived (every test passed), timeout, or error (pytest could not run the tests)."""
    seconds: float
    killer: str
    """The first failing test, for a killed mutant."""


STAGES = ("not sound", "sound")
"""pytest -k expressions, run in order until one fails: the unit tests, then the soundness properties."""


def pytest(tree: Path, arguments: list[str], timeout_s: float) -> tuple[int | None, str, float]:
    """Run pytest inside tree (so tree's eqsat is imported): (return code, None on timeout; output; seconds)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *arguments]
    began = time.monotonic()
    try:
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=max(timeout_s, 1))
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - began
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[str, float, str]:
    """The mutant's tests, stage by stage, each with -x: (status, seconds, first failing test)."""
    spent = 0.0
    for stage in STAGES:
        code, output, seconds = pytest(tree, ["-x", "-k", stage, *tests], timeout_s - spent)
        spent += seconds
        if code is None:
            return "timeout", spent, ""
        if code == 1:
            failed = re.search(r"^FAILED (\S+)", output, re.MULTILINE)
            return "killed", spent, failed.group(1) if failed else ""
        if code not in (0, 5):  # 5: no test selected in this stage
            return "error", spent, (output.strip().splitlines() or [""])[-1]
    return "survived", spent, ""


def confirm_killers(tree: Path, outcomes: list["Outcome"], timeout_s: float) -> None:
    """Run every killing test once on the unmutated tree; a mutant whose killer fails there is an error, not a kill."""
    killers = sorted({o.killer for o in outcomes if o.status == "killed" and o.killer})
    if not killers:
        return
    _, output, seconds = pytest(tree, ["-rf", *killers], timeout_s)
    failing = set(re.findall(r"^FAILED (\S+)", output, re.MULTILINE))
    print(f"killing tests on the unmutated tree: {len(killers) - len(failing)} of {len(killers)} pass ({seconds:.0f} s)", flush=True)
    for o in outcomes:
        if o.status == "killed" and (not o.killer or o.killer in failing):
            o.status, o.killer = "error", f"{o.killer or 'no test named'} fails unmutated too"


def copy_tree(destination: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis", "results", "zoo"))
        else:
            shutil.copy2(source, destination / name)


def run(mutants: tuple[Mutant, ...], timeout_s: float, jobs: int, on_outcome) -> list[Outcome]:
    """Each of `jobs` workers takes mutants from a queue, in its own temporary tree; on_outcome sees each result."""
    problems = check(mutants)
    if problems:
        raise SystemExit("mutant list out of date:\n  " + "\n  ".join(problems))
    todo: queue.Queue[Mutant] = queue.Queue()
    for mutant in mutants:
        todo.put(mutant)
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def work(tree: Path) -> None:
        while True:
            try:
                mutant = todo.get_nowait()
            except queue.Empty:
                return
            path = tree / mutant.file
            original_text = path.read_text()
            path.write_text(original_text.replace(mutant.original, mutant.replacement, 1))
            try:
                status, seconds, killer = run_tests(tree, mutant.tests, timeout_s)
            finally:
                path.write_text(original_text)
            with lock:
                outcomes.append(Outcome(mutant, status, seconds, killer))
                print(f"{mutant.name}: {status} in {seconds:.0f} s {killer}", flush=True)
                on_outcome(outcomes)

    with tempfile.TemporaryDirectory(prefix="eqsat-mutants-") as tmp:
        trees = [Path(tmp) / f"tree{i}" for i in range(jobs)]
        for tree in trees:
            copy_tree(tree)
        workers = [threading.Thread(target=work, args=(tree,)) for tree in trees]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        confirm_killers(trees[0], outcomes, timeout_s)
    order = {m.name: i for i, m in enumerate(mutants)}
    return sorted(outcomes, key=lambda o: order[o.mutant.name])


def table(outcomes: list[Outcome], total_s: float, declared: int) -> str:
    killed = sum(o.status == "killed" for o in outcomes)
    lines = [
        "# Mutation check of the rewrite laws",
        "",
        "Produced by `python -m benchmarks.mutants` (benchmarks/mutants.py: the mutants, why each is wrong, and how they run).",
        f"{len(outcomes)} of {declared} mutants run, {killed} killed; {total_s / 60:.1f} min wall clock so far (this machine, shared).",
        "",
        "| mutant | file | status | first failing test | s | why the mutant is wrong |",
        "|---|---|---|---|---:|---|",
    ]
    for o in outcomes:
        m = o.mutant
        lines.append(f"| {m.name} | {m.file.removeprefix(RULES)} | {o.status} | {o.killer.removeprefix('tests/rules/') or '-'} | {o.seconds:.0f} | {m.why} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutants", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants (the table is not written)")
    parser.add_argument("--list", action="store_true", help="check the list against the tree and print it; run nothing")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help=f"seconds per mutant (default {TIMEOUT_S})")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own temporary tree (default 1)")
    args = parser.parse_args(argv)
    by_name = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.only or () if n not in by_name]
    if unknown:
        parser.error(f"no mutant {', '.join(unknown)}")
    chosen = tuple(by_name[n] for n in args.only) if args.only else MUTANTS
    if args.list:
        problems = check(chosen)
        for m in chosen:
            print(f"{m.name}  ({m.file}; tests: {' '.join(m.tests)})")
        print("\n".join(problems) or f"{len(chosen)} mutants, every snippet found once")
        return 1 if problems else 0
    began = time.monotonic()

    def record(outcomes: list[Outcome]) -> None:  # the table grows as mutants finish: a stopped run leaves what it found
        if not args.only:
            RESULTS.write_text(table(sorted(outcomes, key=lambda o: chosen.index(o.mutant)), time.monotonic() - began, len(chosen)))

    outcomes = run(chosen, args.timeout, args.jobs, record)
    total_s = time.monotonic() - began
    record(outcomes)
    survivors = [o.mutant.name for o in outcomes if o.status != "killed"]
    print(f"{len(outcomes) - len(survivors)} of {len(outcomes)} killed in {total_s / 60:.1f} min" + (f"; not killed: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
