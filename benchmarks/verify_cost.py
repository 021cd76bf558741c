"""What `verify="vela"` costs: lowering time with eqsat installed, with and without the Vela check.

    .venv/bin/python -m benchmarks.verify_cost [--models NAME ...] [--targets T ...]

For each zoo model and target, the same quantized program is lowered three
times: stock, with eqsat (verify="none"), and with eqsat and verify="vela".
The check lowers a delegate to TOSA a second time without eqsat and compiles
both with Vela, but only when eqsat changed the delegate. Printed: the
lowering seconds, the check's extra time as a share of the stock lowering,
and which graph the check kept. Wall-clock numbers on this machine: a
benchmark, never a test.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import eqsat
from benchmarks.zoo import ZOO
from eqsat import lowering

DEFAULT_MODELS = ("shufflenet-v2", "conformer-block", "attention-permute", "mobilenet-v1-025-vww", "tds-conv1d")


def lowering_seconds(program, target: str, workdir: Path, **options) -> tuple[float, list]:
    """The seconds one lowering of program takes, with eqsat installed with options (none: stock), and its reports."""
    if options:
        eqsat.install(**options)
    try:
        lowered = lowering.lower(copy.deepcopy(program), target, workdir=workdir)
        return lowered.seconds, eqsat.last_reports() if options else []
    finally:
        eqsat.uninstall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=list(ZOO))
    parser.add_argument("--targets", nargs="+", default=["ethos-u55-128", "ethos-u85-256"])
    arguments = parser.parse_args()
    print("| model | target | stock s | eqsat s | eqsat + verify s | verify's extra / stock | kept |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name in arguments.models:
        for target in arguments.targets:
            module, inputs = ZOO[name].build()
            program = lowering.quantize(module, inputs, target)
            with tempfile.TemporaryDirectory() as scratch:
                root = Path(scratch)
                stock, _ = lowering_seconds(program, target, root / "stock")
                plain, _ = lowering_seconds(program, target, root / "eqsat", verify="none")
                checked, reports = lowering_seconds(program, target, root / "verified", verify="vela")
            kept = ", ".join(r.verification["kept"] if r.verification else "unchanged" for r in reports) or "no delegate"
            print(f"| {name} | {target} | {stock:.1f} | {plain:.1f} | {checked:.1f} | {100 * (checked - plain) / stock:+.0f}% | {kept} |")


if __name__ == "__main__":
    main()
