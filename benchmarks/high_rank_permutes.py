"""The Arm backend's rank-5/6 permute/view cases, lowered stock and with eqsat: Vela's cycles and the prediction.

    .venv/bin/python -m benchmarks.high_rank_permutes [--targets T ...] [--cases K ...] [--out FILE]

executorch's `backends/arm/test/misc/test_high_rank_permute_view_invariants.py` builds ten models, each a
convolution followed by a chain of rank-5/6 permutes and views (`_build_high_rank_permute_cases`). Each is lowered
for each target through the real Arm pipeline without and with eqsat (`eqsat.compare.compare`): Vela's
`cycles_total` of both, the cost model's estimate of the graph eqsat was given and of the one it returned, whether
their signs agree, and bit-exactness under the TOSA reference model. The table goes to `--out` (issue 26 §3: none
slower, every change predicted in Vela's sign); `tests/test_high_rank_permutes.py` asserts the same per case
(marked slow).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eqsat import bench
from eqsat.compare import Comparison, compare

CASES = range(10)
TARGETS = ("ethos-u55-128", "ethos-u85-256")


def measure_case(case: int, target: str) -> Comparison:
    from executorch.backends.arm.test.misc import test_high_rank_permute_view_invariants as upstream

    built = upstream._build_high_rank_permute_cases()[f"high_rank_permute_fuzz_case_{case}"]
    inputs = bench.calibration_inputs("case", built.inputs, None)
    return compare(f"high_rank_permute_fuzz_case_{case}", built.module, built.inputs, target, calibration_inputs=inputs)


def row(case: int, target: str, comparison: Comparison) -> str:
    stock, optimized = comparison.stock.cycles_total, comparison.optimized.cycles_total
    predicted_before = sum(r["cost_before"] for r in comparison.reports)
    predicted_after = sum(r["cost_after"] for r in comparison.reports)
    vela_change = f"{optimized:,} ({optimized / stock - 1:+.1%})" if optimized != stock else f"{optimized:,}"
    predicted = f"{predicted_before:,.0f} → {predicted_after:,.0f}" if any(r["changed"] for r in comparison.reports) else "unchanged"
    agrees = {True: "yes", False: "**no**", None: "-"}[bench.predicted_direction_agrees(comparison.as_dict())]
    exact = "yes" if comparison.bit_exact else f"**no**: {comparison.mismatch[:60]}"
    return f"| {case} | {target} | {stock:,} | {vela_change} | {predicted} | {agrees} | {exact} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.high_rank_permutes", description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=list(TARGETS))
    parser.add_argument("--cases", nargs="+", type=int, default=list(CASES), choices=list(CASES))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/high_rank_permutes.md"))
    arguments = parser.parse_args(argv)
    lines = [
        "# The Arm backend's rank-5/6 permute/view cases (issue 26)",
        "",
        f"Written by `python -m benchmarks.high_rank_permutes` ({__doc__.splitlines()[0][:-1].lower()}). \"stock\" and",
        "\"eqsat\" are Vela's `cycles_total` of the two lowerings; \"predicted\" is the cost model's estimate of the graph",
        "eqsat was given and of the one it returned; \"sign\" says whether the predicted change has Vela's sign.",
        "",
        "| case | target | stock | eqsat | predicted | sign | bit-exact |",
        "|---|---|---:|---:|---|---|---|",
    ]
    slower = disagreeing = 0
    for target in arguments.targets:
        for case in arguments.cases:
            comparison = measure_case(case, target)
            lines.append(row(case, target, comparison))
            print(lines[-1], flush=True)
            slower += comparison.optimized.cycles_total > comparison.stock.cycles_total
            disagreeing += bench.predicted_direction_agrees(comparison.as_dict()) is False
    lines += ["", f"Slower: {slower}. Predicted in the other sign: {disagreeing}.", ""]
    arguments.out.write_text("\n".join(lines))
    return 1 if slower or disagreeing else 0


if __name__ == "__main__":
    raise SystemExit(main())
