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
tests/rules/test_<module>.py, plus the mutant's own extras) in one
`pytest -x`, restores the file, and records whether a test failed (killed)
or all passed (survived). Every test of those files runs unless one fails
first; only the order is the mutant's own, cheapest likely killer first:

  1. the unit tests (fires, does not fire) of the mutant's law: the tests
     whose name holds one of its `focus` strings (the law's name, in test
     names, by the convention of tests/rules/);
  2. the soundness properties (a name holding `sound`) among those;
  3. the other unit tests of the files, then 4. their other soundness
     properties (the whole of each file, as before, for a mutant that
     survives 1 and 2).

A kill counts only if the killing test passes on the unmutated tree: the
killing tests run once more at the end, unmutated, and a mutant whose killer
fails there too is reported as an error, not a kill.

Time bound: each mutant's pytest may use CPU_LIMIT_S seconds of CPU time
(RLIMIT_CPU on the pytest process; `--cpu-limit`), past which it is stopped
and the mutant counts as a timeout, never as a kill. CPU time, not wall
clock, so the bound does not move with the machine's other load: the same
mutant on the same tree is judged the same on an idle or a busy machine. A
wall-clock backstop (WALL_BACKSTOP times the CPU limit) only catches a test
that hangs without computing.

Why not mutmut or cosmic-ray: they mutate Python operators and constants
anywhere in a module, blind to which line is a law's guard. Most of their
mutants here would be docstrings, names, or rewrites of the rule-building
Python that egglog rejects at import, and a dropped fact of a query (the
commonest real bug of a law) is not one of their operators. The list below is
the laws' own failure modes, small enough to read and to keep.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import resource
import shutil
import signal
import threading
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mutants.md"
CPU_LIMIT_S = 600
"""CPU seconds per mutant: a surviving mutant runs all of its files, and tests/rules/test_rescale.py, the largest,
takes 185 CPU seconds unmutated (measured: `/usr/bin/time -v pytest tests/rules/test_rescale.py`, user + system;
347 s wall clock on the loaded machine). Three times that leaves room for a mutant that makes saturation slower."""

WALL_BACKSTOP = 4
"""The wall-clock limit, as a multiple of the CPU limit: only for a pytest that hangs without using CPU."""

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
    focus: tuple[str, ...] = field(default=())
    """Parts of test names (the law's name, in snake case): the tests likeliest to kill the mutant, run first."""

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
        focus=("rescale_rescale_exact",),
    ),
    Mutant(
        "reshape-per-channel-drops-same-last-dim",
        RULES + "rescale.py",
        "        *same_last_dim(s, shape(x)),\n",
        "",
        "a reshape that changes the last dim moves below a per-channel rescale: the channels no longer line up",
        focus=("reshape_through_per_channel_rescale", "data_movement_through_per_channel_rescale"),
    ),
    Mutant(
        "slice-per-channel-drops-same-last-dim",
        RULES + "rescale.py",
        "        *same_last_dim(size, shape(x)),\n",
        "",
        "a slice that cuts the channels keeps every channel's multiplier: channel j of the slice is rescaled as channel j of x",
        focus=("slice_through_per_channel_rescale", "slice_of_channels", "data_movement_through_per_channel_rescale"),
    ),
    Mutant(
        "transpose-per-channel-drops-keeps-last-axis",
        RULES + "rescale.py",
        "        *keeps_last_axis(p),\n",
        "",
        "a transpose that moves the channel axis moves below a per-channel rescale: other elements get channel c's scale",
        focus=("transpose_through_per_channel_rescale", "data_movement_through_per_channel_rescale"),
    ),
    Mutant(
        "transpose-through-rescale-drops-per-tensor",
        RULES + "rescale.py",
        "        x.transpose(p).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n        *is_per_tensor(m),\n",
        "        x.transpose(p).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n",
        "a per-channel rescale moves below any transpose as if it were per-tensor",
        focus=("transpose_through", "data_movement_through"),
    ),
    Mutant(
        "reshape-through-rescale-drops-per-tensor",
        RULES + "rescale.py",
        "        x.reshape(s).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n        *is_per_tensor(m),\n",
        "        x.reshape(s).rescale(out_dtype, m, sh, in_zp, out_zp, tag),\n",
        "a per-channel rescale moves below a reshape that changes the last dim",
        focus=("reshape_through", "data_movement_through"),
    ),
    Mutant(
        "channel-window-reads-first-dim",
        RULES + "rescale.py",
        "        eq(first).to(start[last]),\n",
        "        eq(first).to(start[0]),\n",
        "the window of multipliers starts at the box's start on dim 0, not on the channel (last) dim",
        focus=("slice_of_channels",),
    ),
    Mutant(
        "channel-window-off-by-one",
        RULES + "analysis.py",
        "        eq(element).to(v[axis + k]),\n",
        "        eq(element).to(v[axis + k + 1]),\n",
        "the window of a sliced per-channel rescale takes the multipliers one channel to the right",
        RESCALE_TESTS,
        focus=("slice_of_channels",),
    ),
    Mutant(
        "fused-shift-adds-the-exponent",
        RULES + "rescale.py",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent), in_zp, out_zp, tag),\n",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] + exponent), in_zp, out_zp, tag),\n",
        "the fused rescale divides by 2^k instead of multiplying",
        focus=("rescale_rescale_exact",),
    ),
    Mutant(
        "fused-shift-off-by-one",
        RULES + "rescale.py",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent), in_zp, out_zp, tag),\n",
        "            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent - 1), in_zp, out_zp, tag),\n",
        "the fused rescale scales by twice the product of the two",
        focus=("rescale_rescale_exact",),
    ),
    Mutant(
        "fusion-drops-int32-intermediate",
        RULES + "rescale.py",
        "            eq(dtype(x)).to(String(narrow)),\n            eq(mid_dtype).to(String(INT32)),\n            eq(mid_out_zp).to(i64(0)),\n            eq(mid_in_zp).to(i64(0)),\n            *is_exact_power_of_two_scaling(m, sh, exponent),\n            *is_per_tensor(m2),\n",
        "            eq(dtype(x)).to(String(narrow)),\n            eq(mid_out_zp).to(i64(0)),\n            eq(mid_in_zp).to(i64(0)),\n            *is_exact_power_of_two_scaling(m, sh, exponent),\n            *is_per_tensor(m2),\n",
        "a first rescale to int8/int16 clamps; the fused rescale does not",
        focus=("rescale_rescale_exact", "rescale_per_channel_rescale_exact"),
    ),
    Mutant(
        "fusion-of-a-non-integer-scale",
        RULES + "guards.py",
        "        eq(multipliers[0] % (i64(1) << shifts[0])).to(i64(0)),\n",
        "",
        "a first scale like 1.5 fuses as 2^0: its fraction is lost",
        RESCALE_TESTS,
        focus=("rescale_rescale_exact", "rescale_per_channel_rescale_exact"),
    ),
    Mutant(
        "fusion-of-a-non-power-of-two",
        RULES + "guards.py",
        "        eq(factor & (factor - 1)).to(i64(0)),\n",
        "",
        "a first scale of 3 fuses as 2^log2(3) = 2",
        RESCALE_TESTS,
        focus=("rescale_rescale_exact", "rescale_per_channel_rescale_exact"),
    ),
    Mutant(
        "fused-per-channel-shifts-off-by-one",
        RULES + "rescale.py",
        "    return shifts.map(UnstableFn[i64, i64](i64.__add__, i64(0) - exponent))\n",
        "    return shifts.map(UnstableFn[i64, i64](i64.__add__, i64(1) - exponent))\n",
        "each fused per-channel shift is one too large: every channel halves",
        focus=("rescale_per_channel_rescale_exact",),
    ),
    Mutant(
        "identity-drops-equal-zero-points",
        RULES + "guards.py",
        "    return [eq(out_dtype).to(x_dtype), eq(in_zp).to(out_zp), *is_exact_one(multipliers, shifts)]\n",
        "    return [eq(out_dtype).to(x_dtype), *is_exact_one(multipliers, shifts)]\n",
        "a rescale by 1 that moves the zero point is taken for the identity",
        RESCALE_TESTS,
        focus=("rescale_identity",),
    ),
    Mutant(
        "identity-of-half-scale",
        RULES + "guards.py",
        "    return [*is_per_tensor(multipliers), eq(multipliers[0]).to(i64(1) << shifts[0])]\n",
        "    return [*is_per_tensor(multipliers), eq(multipliers[0]).to(i64(1) << (shifts[0] - 1))]\n",
        "a rescale by 1/2 is taken for the identity",
        RESCALE_TESTS,
        focus=("rescale_identity",),
    ),
    Mutant(
        "per-channel-identity-drops-equal-zero-points",
        RULES + "rescale.py",
        "        eq(in_zp).to(out_zp),\n        *is_exact_one_per_channel(m, sh),\n",
        "        *is_exact_one_per_channel(m, sh),\n",
        "a per-channel rescale by 1 that moves the zero point is taken for the identity",
        focus=("per_channel_rescale_identity",),
    ),
    Mutant(
        "concat-of-per-channel-rescales-along-channels",
        RULES + "guards.py",
        "    return [axis + 1 < dims.length() + i64(2) - multipliers.length().min(i64(2))]\n",
        "    return [axis + 1 < dims.length() + i64(2) - multipliers.length().min(i64(1))]\n",
        "per-channel rescales hoist out of a concat along the channel axis: the concat has twice the channels",
        RESCALE_TESTS,
        focus=("concat_of", "data_movement_through_per_channel_rescale"),
    ),
    Mutant(
        "keeps-last-axis-reads-first",
        RULES + "guards.py",
        "    return [i64(0) < perm.length(), eq(perm[perm.length() - 1]).to(perm.length() - 1)]\n",
        "    return [i64(0) < perm.length(), eq(perm[0]).to(i64(0))]\n",
        "a transpose that keeps dim 0 in place, not the channel axis, moves below a per-channel rescale",
        RESCALE_TESTS,
        focus=("transpose_through_per_channel_rescale", "data_movement_through_per_channel_rescale"),
    ),
    Mutant(
        "same-last-dim-compares-first",
        RULES + "guards.py",
        "    return [i64(0) < a.length(), i64(0) < b.length(), eq(a[a.length() - 1]).to(b[b.length() - 1])]\n",
        "    return [i64(0) < a.length(), i64(0) < b.length(), eq(a[0]).to(b[0])]\n",
        "a reshape or slice that keeps the first dim, not the channels, moves below a per-channel rescale",
        RESCALE_TESTS,
        focus=("reshape_through_per_channel_rescale", "slice_through_per_channel_rescale", "data_movement_through_per_channel_rescale"),
    ),
    # ------------------------------------------------------------ transpose algebra
    Mutant(
        "transpose-compose-swapped",
        RULES + "transpose.py",
        "x.transpose(q.map(p.__getitem__))",
        "x.transpose(p.map(q.__getitem__))",
        "two transposes compose as q∘p instead of p∘q",
        focus=("transpose_compose", "inverse_transposes", "transpose_laws_are_sound"),
    ),
    Mutant(
        "transpose-through-binary-drops-same-shape",
        RULES + "transpose.py",
        "        eq(shape(left)).to(shape(right)),\n",
        "",
        "a transpose moves into both operands of a broadcast: the broadcast operand is transposed to another shape",
        focus=("binary", "transpose_laws_are_sound"),
    ),
    Mutant(
        "transpose-through-pad-keeps-padding",
        RULES + "transpose.py",
        "        eq(moved).to(paired_perm(p, p.length()).map(padding.__getitem__)),\n",
        "        eq(moved).to(padding),\n",
        "the padding of a transposed pad is not permuted: each dim gets another dim's padding",
        focus=("transpose_through_pad", "constant_pad"),
    ),
    Mutant(
        "transpose-through-slice-unpermuted-box",
        RULES + "transpose.py",
        "        x.transpose(p).slice(p.map(start.__getitem__), p.map(size.__getitem__)),\n",
        "        x.transpose(p).slice(start, p.map(size.__getitem__)),\n",
        "the box's start is not permuted with the transpose",
        focus=("transpose_through_slice", "slice_through_transpose_is_sound"),
    ),
    Mutant(
        "slice-through-transpose-permutes-forward",
        RULES + "transpose.py",
        "        x.slice(inverse.map(start.__getitem__), inverse.map(size.__getitem__)).transpose(p),\n",
        "        x.slice(p.map(start.__getitem__), p.map(size.__getitem__)).transpose(p),\n",
        "the box is mapped through p instead of its inverse (wrong for every perm that is not its own inverse)",
        focus=("slice_moves_through_a_transpose", "slice_through_transpose"),
    ),
    Mutant(
        "transpose-hoist-keeps-axis",
        RULES + "transpose.py",
        "        eq(source_axis).to(p[axis]),\n",
        "        eq(source_axis).to(axis),\n",
        "the hoisted concat joins along the transposed axis number, not the source's",
        focus=("hoist", "concat", "transpose_laws_are_sound"),
    ),
    Mutant(
        "unit-dims-order-flipped",
        RULES + "transpose.py",
        "big[i] * big[j] * (perm[i] - perm[j]).max(0).min(1)",
        "big[i] * big[j] * (perm[j] - perm[i]).max(0).min(1)",
        "a transpose that reorders dims larger than 1 is taken for a reshape (and an order-keeping one is not)",
        focus=("unit_dims", "reorders_big_dims", "transpose_laws_are_sound"),
    ),
    Mutant(
        "transpose-through-reduce-inverse-axis",
        RULES + "transpose.py",
        "        Tensor.reduce(reduce_key, x.transpose(p), new_axis),\n        index_below(p.length(), new_axis),\n        eq(p[new_axis]).to(axis),\n",
        "        Tensor.reduce(reduce_key, x.transpose(p), new_axis),\n        index_below(p.length(), new_axis),\n        eq(p[axis]).to(new_axis),\n",
        "the reduced axis is mapped through p instead of its inverse",
        focus=("transpose_through_reduce", "transpose_through_tosa_reduce"),
    ),
    # ------------------------------------------------------------ concat and slice
    Mutant(
        "slice-of-concat-inside-keeps-offset",
        RULES + "concat_slice.py",
        "        eq(inner_start).to(start.set(axis, begin - offset)),\n",
        "        eq(inner_start).to(start),\n",
        "a box inside input i of a concat is read at the concat's coordinates, not the input's",
        focus=("slice_of_concat",),
    ),
    Mutant(
        "within-one-input-off-by-one",
        RULES + "guards.py",
        "    return [offset <= begin, begin + length <= offset + extent]\n",
        "    return [offset <= begin, begin + length <= offset + extent + 1]\n",
        "a box that reads one element past input i of a concat is taken as inside it",
        ("tests/rules/test_concat_slice.py",),
        focus=("slice_of_concat",),
    ),
    Mutant(
        "slice-slice-drops-inner-start",
        RULES + "concat_slice.py",
        "            *[eq(total).to(start[d] + outer_start[d]) for d, total in enumerate(sums)],\n",
        "            *[eq(total).to(outer_start[d]) for d, total in enumerate(sums)],\n",
        "a slice of a slice forgets the inner slice's start",
        focus=("slice_slice", "concat_slice_laws_are_sound"),
    ),
    Mutant(
        "adjacent-slices-keep-first-size",
        RULES + "concat_slice.py",
        "        eq(merged_size).to(size.set(axis, total)),\n",
        "        eq(merged_size).to(size),\n",
        "a run of adjacent slices merges into the first slice alone",
        focus=("concat_of_adjacent_slices", "concat_slice_laws_are_sound"),
    ),
    Mutant(
        "concat-flatten-repeats-nested",
        RULES + "concat_slice.py",
        "        eq(rest).to(trailing_parts(parts, first + 1)),\n",
        "        eq(rest).to(trailing_parts(parts, first)),\n",
        "the flattened concat keeps the nested concat after its inputs",
        focus=("concat_flatten", "concat_slice_laws_are_sound"),
    ),
    Mutant(
        "concat-extends-wrong-last",
        RULES + "concat_slice.py",
        "        eq(last).to(parts[parts.length() - 1]),",
        "        eq(last).to(parts[parts.length() - 2]),",
        "the extended concat appends the second-to-last input again",
        focus=("concat_extends_concat", "concat_prefixes"),
    ),
    Mutant(
        "slice-exact-at-origin",
        RULES + "guards.py",
        "    return [eq(size).to(input_shape), eq(start).to(zeros_like(size).set(axis, offset))]\n",
        "    return [eq(size).to(input_shape), eq(start).to(zeros_like(size))]\n",
        "any box the size of input i is taken for input i, wherever it starts",
        ("tests/rules/test_concat_slice.py",),
        focus=("slice_of_concat_exact", "slice_of_concat_laws_are_sound"),
    ),
    # ------------------------------------------------------------ slice pushdown
    Mutant(
        "slice-through-binary-drops-same-shape",
        RULES + "slice_pushdown.py",
        "        eq(shape(a)).to(shape(b)),\n",
        "",
        "a slice moves into both operands of a broadcast",
        focus=("binary", "slice_pushdown_laws_are_sound"),
    ),
    Mutant(
        "slice-through-reshape-drops-whole-rows",
        RULES + "slice_pushdown.py",
        "        eq(extent % source_inner).to(i64(0)),\n",
        "",
        "a cut that ends inside a row of x's dim moves through the reshape",
        focus=("reshape",),
    ),
    Mutant(
        "slice-inside-pad-reads-after-padding",
        RULES + "guards.py",
        "    return Vec(*[start[i] - padding[2 * i] for i in range(rank)])\n",
        "    return Vec(*[start[i] - padding[2 * i + 1] for i in range(rank)])\n",
        "a box of a pad is shifted by the padding after each dim, not before",
        ("tests/rules/test_slice_pushdown.py",),
        focus=("slice_inside_pad", "pad_and_table"),
    ),
    # ------------------------------------------------------------ reshape, rank lowering, views, reduce
    Mutant(
        "reshape-identity-drops-shape",
        RULES + "reshape.py",
        "    yield law(\"reshape-identity\", x.reshape(s), x, eq(s).to(shape(x)))\n",
        "    yield law(\"reshape-identity\", x.reshape(s), x)\n",
        "every reshape is taken for the identity",
        focus=("reshape_identity", "reshape_laws_are_sound"),
    ),
    Mutant(
        "reshape-through-table-drops-mac-shape",
        RULES + "reshape.py",
        "        *table_operand_is_not_batched_mac_shape(s),\n",
        "",
        "a reshape gives a TABLE an [N,1,1,C] operand, N > 1, which Vela miscompiles (MLBEDSW-11805)",
        focus=("reshape_through_table",),
    ),
    Mutant(
        "transpose-merge-drops-adjacency",
        RULES + "transpose_rank.py",
        "        eq(p[i + 1]).to(p[i] + 1),\n",
        "",
        "two output dims that are not adjacent in the input are merged",
        focus=("transpose_merge", "adjacent_dim", "transpose_rank_lowering_is_sound"),
    ),
    Mutant(
        "transpose-drop-unit-dim-drops-unit",
        RULES + "transpose_rank.py",
        "        *is_unit_dim(dims, j),\n",
        "",
        "a dim longer than 1 is dropped as if it were a unit dim",
        focus=("drop_unit_dim", "nchw", "transpose_rank_lowering_is_sound"),
    ),
    Mutant(
        "split-perm-output-shape-unpermuted",
        RULES + "transpose_view.py",
        "        eq(out).to(p.map(s.__getitem__)),\n",
        "        eq(out).to(s),\n",
        "the split transpose is reshaped back to the unpermuted shape",
        focus=("split_at_source_boundary", "merging_reshape", "transpose_view_laws_are_sound"),
    ),
    Mutant(
        "peel-leading-dim-keeps-perm",
        RULES + "transpose_view.py",
        "        eq(rest).to(p.map(front_position(lead, p.length()).__getitem__)),\n",
        "        eq(rest).to(p),\n",
        "the second factor of a peeled transpose is the whole perm again, not the rest after the moved dim",
        focus=("peel", "transpose_view_laws_are_sound"),
    ),
    # (Dropping its start[j + 1] == 0 instead is an equivalent mutant: an in-bounds box as long as dim j + 1 starts at 0.)
    Mutant(
        "slice-merge-whole-inner-dim-drops-whole-size",
        RULES + "slice_concat_rank.py",
        "        eq(size[j + 1]).to(dims[j + 1]),\n",
        "",
        "a box that starts at 0 but cuts dim j + 1 is merged as if whole along it: the lowered slice reads all of dim j + 1",
        focus=("slice_merge_whole_inner_dim", "band_selection", "slice_concat_rank_lowering_is_sound"),
    ),
    Mutant(
        "slice-merge-unit-outer-dim-drops-unit",
        RULES + "slice_concat_rank.py",
        "        eq(size[j]).to(i64(1)),\n",
        "",
        "a box wider than one index along dim j is merged as if it were one index wide",
        focus=("slice_merge_unit_outer_dim", "one_index_wide", "slice_concat_rank_lowering_is_sound"),
    ),
    Mutant(
        "reshape-through-concat-wrong-axis",
        RULES + "analysis.py",
        "        eq(new_shape[new_axis]).to(dims[axis]),\n",
        "",
        "a reshape of a concat whose axis is not one dim of the new shape becomes a concat of reshapes",
        ("tests/rules/test_reshape_concat.py",),
        focus=("reshape_through_concat",),
    ),
    Mutant(
        "reduce-innermost-swap-is-not-a-permutation",
        RULES + "reduce.py",
        "        eq(swap).to(dims.length().range().set(axis, axis - 1).set(axis - 1, axis)),\n",
        "        eq(swap).to(dims.length().range().set(axis, axis - 1)),\n",
        "the transpose around the moved reduction repeats a dim instead of swapping the last two",
        focus=("reduce_innermost",),
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
        if not mutant.focus:
            problems.append(f"{mutant.name}: no focus")
        test_names = set()
        for test in mutant.tests:
            path = root / test.split("::")[0]
            test_names |= set(re.findall(r"^def (test_\w+)", path.read_text(), re.MULTILINE)) if path.is_file() else set()
        problems += [f"{mutant.name}: focus {part!r} names no test of {' '.join(mutant.tests)}" for part in mutant.focus if not any(part in n for n in test_names)]
    return problems


@dataclass
class Outcome:
    mutant: Mutant
    status: str
    """killed (a test failed), survived (every test passed), timeout, or error (pytest could not run the tests)."""
    cpu_s: float
    wall_s: float
    killer: str
    """The first failing test, for a killed mutant."""


SOUND = "sound"
"""A test whose name holds this is a soundness property (slow: a hundred drawn graphs); the others are unit tests."""


def pytest_addoption(parser) -> None:
    """This module is also the pytest plugin that orders a mutant's tests (`-p benchmarks.mutants --mutant-focus ...`)."""
    parser.addoption("--mutant-focus", action="append", default=[], help="run first the tests whose name holds this (repeatable)")


def pytest_collection_modifyitems(config, items) -> None:
    """Focus unit tests, focus soundness properties, other unit tests, other soundness properties; file order within each."""
    focus = config.getoption("--mutant-focus")
    if focus:
        items.sort(key=lambda item: (not any(part in item.name for part in focus), SOUND in item.name))


@dataclass(frozen=True)
class Run:
    code: int | None
    """pytest's exit code; None when the CPU limit or its wall-clock backstop stopped it."""
    output: str
    cpu_s: float
    """User + system CPU seconds of the pytest process."""
    wall_s: float


def pytest(tree: Path, arguments: list[str], cpu_limit_s: float) -> Run:
    """Run pytest inside tree (so tree's eqsat is imported) under a CPU-time limit."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *arguments]
    began = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as log:
        child = subprocess.Popen(command, cwd=tree, stdout=log, stderr=subprocess.STDOUT)
        limit = max(int(cpu_limit_s), 1)  # past it SIGXCPU stops the child; SIGKILL 5 CPU seconds later
        resource.prlimit(child.pid, resource.RLIMIT_CPU, (limit, limit + 5))
        backstop = threading.Timer(cpu_limit_s * WALL_BACKSTOP, child.kill)
        backstop.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            backstop.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    stopped = child.returncode in (-signal.SIGXCPU, -signal.SIGKILL)
    return Run(None if stopped else child.returncode, output, usage.ru_utime + usage.ru_stime, time.monotonic() - began)


def run_tests(tree: Path, mutant: Mutant, cpu_limit_s: float) -> tuple[str, Run, str]:
    """The mutant's tests, its focus first, in one `pytest -x`: (status, the run, first failing test)."""
    focus = [argument for part in mutant.focus for argument in ("--mutant-focus", part)]
    done = pytest(tree, ["-x", "-p", "benchmarks.mutants", *focus, *mutant.tests], cpu_limit_s)
    if done.code is None:
        return "timeout", done, ""
    if done.code == 1:
        failed = re.search(r"^FAILED (\S+)", done.output, re.MULTILINE)
        return "killed", done, failed.group(1) if failed else ""
    if done.code != 0:
        return "error", done, (done.output.strip().splitlines() or [""])[-1]
    return "survived", done, ""


def confirm_killers(tree: Path, outcomes: list["Outcome"], cpu_limit_s: float) -> None:
    """Run every killing test once on the unmutated tree; a mutant whose killer fails there is an error, not a kill."""
    killers = sorted({o.killer for o in outcomes if o.status == "killed" and o.killer})
    if not killers:
        return
    done = pytest(tree, ["-rf", *killers], cpu_limit_s)
    failing = set(re.findall(r"^FAILED (\S+)", done.output, re.MULTILINE))
    if done.code not in (0, 1):
        failing = set(killers)  # pytest could not run them all: no kill is confirmed
    print(f"killing tests on the unmutated tree: {len(killers) - len(failing)} of {len(killers)} pass ({done.wall_s:.0f} s)", flush=True)
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


def run(mutants: tuple[Mutant, ...], cpu_limit_s: float, jobs: int, on_outcome) -> list[Outcome]:
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
                status, done, killer = run_tests(tree, mutant, cpu_limit_s)
            finally:
                path.write_text(original_text)
            with lock:
                outcomes.append(Outcome(mutant, status, done.cpu_s, done.wall_s, killer))
                print(f"{mutant.name}: {status} in {done.cpu_s:.0f} CPU s ({done.wall_s:.0f} s wall) {killer}", flush=True)
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
        confirm_killers(trees[0], outcomes, cpu_limit_s)
    order = {m.name: i for i, m in enumerate(mutants)}
    return sorted(outcomes, key=lambda o: order[o.mutant.name])


def table(outcomes: list[Outcome], total_s: float, declared: int, cpu_limit_s: float) -> str:
    killed = sum(o.status == "killed" for o in outcomes)
    lines = [
        "# Mutation check of the rewrite laws",
        "",
        "Produced by `python -m benchmarks.mutants` (benchmarks/mutants.py: the mutants, why each is wrong, and how they run).",
        f"{len(outcomes)} of {declared} mutants run, {killed} killed; {total_s / 60:.1f} min wall clock so far (this machine, shared).",
        f"Each mutant's tests run in one `pytest -x`, its law's tests first, within {cpu_limit_s:.0f} CPU seconds (else: timeout, not a kill);",
        "each killing test passes on the unmutated tree.",
        "",
        "| mutant | file | status | first failing test | CPU s | wall s | why the mutant is wrong |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for o in outcomes:
        m = o.mutant
        lines.append(f"| {m.name} | {m.file.removeprefix(RULES)} | {o.status} | {o.killer.removeprefix('tests/rules/') or '-'} | {o.cpu_s:.0f} | {o.wall_s:.0f} | {m.why} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutants", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants (the table is not written)")
    parser.add_argument("--list", action="store_true", help="check the list against the tree and print it; run nothing")
    parser.add_argument("--cpu-limit", type=float, default=CPU_LIMIT_S, help=f"CPU seconds per mutant, past which it is a timeout (default {CPU_LIMIT_S})")
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
            RESULTS.write_text(table(sorted(outcomes, key=lambda o: chosen.index(o.mutant)), time.monotonic() - began, len(chosen), args.cpu_limit))

    outcomes = run(chosen, args.cpu_limit, args.jobs, record)
    total_s = time.monotonic() - began
    record(outcomes)
    survivors = [o.mutant.name for o in outcomes if o.status != "killed"]
    print(f"{len(outcomes) - len(survivors)} of {len(outcomes)} killed in {total_s / 60:.1f} min" + (f"; not killed: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
