"""`python -m benchmarks`: the model zoo through `eqsat bench`, Vela before and after, per target.

    python -m benchmarks [--models NAME ...] [--targets T ...] [--memory-mode M] [--system-config S] [--io-layout L ...] [--out DIR] [--fresh]

The zoo is data handed to eqsat: each model goes by its builder spec
(`benchmarks.zoo.<module>:<function>`), as a user's model would.
"""

import argparse
import sys
from pathlib import Path

from benchmarks.zoo import ZOO
from eqsat import bench
from eqsat.cli import configuration_arguments, configuration_of, io_layout_argument
from eqsat.configuration import ACCELERATORS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(ZOO), metavar="NAME", help=f"zoo models (default: all): {', '.join(ZOO)}")
    parser.add_argument("--targets", nargs="+", default=list(bench.DEFAULT_TARGETS), choices=ACCELERATORS)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="results directory (default benchmarks/results)")
    parser.add_argument("--fresh", action="store_true", help="rerun rows that already have results")
    configuration_arguments(parser, "of every target")
    io_layout_argument(parser)
    arguments = parser.parse_args(argv)
    models = {name: ZOO[name].spec for name in arguments.models or ZOO}
    configurations = [configuration_of(arguments, t) for t in arguments.targets]
    return bench.main(models, configurations, arguments.out, fresh=arguments.fresh, io_layouts=tuple(arguments.io_layout))


if __name__ == "__main__":
    sys.exit(main())
