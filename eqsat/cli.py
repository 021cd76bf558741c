"""The `eqsat` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from eqsat import bench
from eqsat.configuration import ACCELERATORS, Configuration
from eqsat.lowering import IO_LAYOUTS
from eqsat.pipeline import Options


def configuration_arguments(command: argparse.ArgumentParser, what: str) -> None:
    """--system-config, --memory-mode and --config-ini: the configuration Vela compiles for, as
    EthosUCompileSpec(target, system_config=..., memory_mode=..., config_ini=...) names it."""
    command.add_argument("--system-config", metavar="NAME", help=f"the vela.ini system config {what} (default: the compile spec's for each target)")
    command.add_argument("--memory-mode", metavar="NAME", help=f"the vela.ini memory mode {what} (default: the compile spec's for each target)")
    command.add_argument("--config-ini", metavar="PATH", help="the vela.ini that names them (default: Arm/vela.ini, installed with Vela)")


def io_layout_argument(command: argparse.ArgumentParser) -> None:
    """--io-layout: the memory format of the models' 4-D inputs and outputs (eqsat.lowering.IO_LAYOUTS), one or both."""
    command.add_argument(
        "--io-layout",
        nargs="+",
        choices=IO_LAYOUTS,
        default=["contiguous"],
        help="export 4-D inputs and outputs contiguous (NCHW, default) and/or channels_last (NHWC: no boundary TRANSPOSEs "
        "in the delegate; the program then takes and returns NHWC data); both: measured side by side",
    )


def configuration_of(arguments: argparse.Namespace, target: str) -> Configuration:
    return Configuration.of(target, arguments.system_config, arguments.memory_mode, arguments.config_ini)


def _bench(arguments: argparse.Namespace) -> int:
    models = {}
    try:
        for spec in arguments.model:
            bench.load_builder(spec)
            models[spec.rpartition(":")[2]] = spec
        if arguments.calibration_inputs is not None:
            bench.load_calibration_inputs(arguments.calibration_inputs)
    except bench.ModelSpecError as error:
        print(f"eqsat bench: {error}", file=sys.stderr)
        return 2
    status = bench.main(
        models,
        [configuration_of(arguments, t) for t in arguments.targets],
        arguments.out,
        fresh=arguments.fresh,
        quantization=arguments.quant,
        calibration_path=arguments.calibration_inputs,
        io_layouts=tuple(arguments.io_layout),
    )
    rows = json.loads((arguments.out / "results.json").read_text()) if (arguments.out / "results.json").exists() else []
    for row in rows:
        if row["model"] in models and row["stock"].get("layers"):
            print(bench.where_cycles_went(row))
    return status


def _calibrate(arguments: argparse.Namespace) -> int:
    from eqsat.calibration import calibrate, report as calibration_report
    from eqsat.extract import vela_cost

    arguments.workdir = arguments.workdir or calibrate.DEFAULT_WORKDIR
    if not arguments.target and not arguments.report:
        print("eqsat calibrate: give --target T (to calibrate) and/or --report", file=sys.stderr)
        return 2
    configurations = [configuration_of(arguments, t) for t in arguments.target or []]
    for configuration in configurations:
        try:
            calibrate.check_configuration(configuration)
        except ValueError as error:
            print(f"eqsat calibrate: {configuration.describe()}: {error}", file=sys.stderr)
            return 2
    for configuration in configurations:
        data = calibrate.calibrate(configuration, workdir=arguments.workdir, jobs=arguments.jobs, scale=arguments.scale, families=arguments.families)
        statuses = ", ".join(f"{count} {status}" for status, count in sorted(data["grid"]["statuses"].items()))
        print(f"{configuration.describe()}: {statuses} in {data['seconds'] / 60:.1f} min -> {vela_cost.calibration_path(configuration)}")
    if arguments.report:
        results = arguments.results or [Path("benchmarks/results")]
        out = arguments.out or results[0] / "calibration_report.md"
        reported = configurations or vela_cost.calibrated_configurations()
        path = calibration_report.write_report(reported, out, results, arguments.workdir, jobs=arguments.jobs)
        print(f"report: {path}")
    return 0


def _optimize(arguments: argparse.Namespace) -> int:
    from eqsat import optimize_tosa

    def refuse(message: str) -> int:
        print(f"eqsat optimize: {arguments.input}: {message}", file=sys.stderr)
        return 2

    try:
        data = arguments.input.read_bytes()
    except OSError as error:
        return refuse(error.strerror or str(error))
    try:
        result = optimize_tosa.optimize_file(
            data,
            arguments.target,
            trials=arguments.trials,
            seed=arguments.seed,
            time_limit=arguments.time_limit,
            system_config=arguments.system_config,
            memory_mode=arguments.memory_mode,
            config_ini=arguments.config_ini,
        )
    except optimize_tosa.TosaFileError as error:
        return refuse(str(error))
    change = (result.cycles_after - result.cycles_before) / result.cycles_before if result.cycles_before else 0.0
    print(f"eqsat optimize: {arguments.input} for {configuration_of(arguments, arguments.target).describe()}")
    changes = ", ".join(f"{op} {before} -> {after}" for op, (before, after) in result.operator_changes().items())
    print(f"  TOSA operators: {sum(result.operators_before.values())} before, {sum(result.operators_after.values())} after" + (f" ({changes})" if changes else ""))
    print(f"  Vela cycles_total: {result.cycles_before} before, {result.cycles_after} after ({change:+.1%})")
    if not result.kept:
        print(f"  original graph kept: {result.reason}")
    if not result.bit_exact:
        print(f"  MISMATCH under the TOSA reference model: {result.mismatch}")
        return 1
    print(f"  TOSA reference model: bit-exact on {result.trials} seeded random inputs (seed {arguments.seed})")
    arguments.output.write_bytes(result.flatbuffer)
    print(f"  wrote {arguments.output}")
    return 0


def _fuzz(arguments: argparse.Namespace) -> int:
    from eqsat import fuzz

    started = time.monotonic()
    targets = tuple(configuration_of(arguments, target) for target in arguments.target or fuzz.TARGETS)
    stop_at = None if arguments.seconds is None else time.time() + arguments.seconds
    result = fuzz.run_parallel(arguments.n, arguments.seed, targets, arguments.jobs, stop_at=stop_at)
    seconds = time.monotonic() - started
    for failure in result.failures:
        print(f"MISMATCH\n{failure}\n")
    for gave_up in result.gave_up:
        print(f"GAVE UP (not a failure: the pass kept the graph at its budget)\n{gave_up}\n")
    print(
        f"eqsat fuzz: {result.graphs} graphs checked (shrinking included), {len(result.failures)} failure(s), "
        f"{len(result.gave_up)} graph(s) the pass gave up on at its budget, {seconds:.0f} s"
    )
    print(result.markdown())
    unreached = result.unreached(fuzz.LAW_SHARE)
    if unreached:
        print(f"laws that fired in less than {fuzz.LAW_SHARE:.0%} of the graphs of a dtype: {', '.join(unreached)}")
    if arguments.markdown is not None:
        command = "python -m eqsat.cli fuzz " + " ".join(sys.argv[sys.argv.index("fuzz") + 1 :]) if "fuzz" in sys.argv else "eqsat fuzz"
        with open(arguments.markdown, "a") as out:
            out.write(
                f"\n## {result.graphs} graphs, each optimized for {' and '.join(t.name for t in targets)}, seed {arguments.seed}"
                f"{f' (jobs: seeds {arguments.seed}..{arguments.seed + arguments.jobs - 1})' if arguments.jobs > 1 else ''}\n\n"
                f"    {command}\n\n"
                f"Mismatches: {len(result.failures)}. Graphs the pass gave up on at its budget: {len(result.gave_up)}. Wall time: {seconds / 60:.0f} min {seconds % 60:.0f} s"
                f"{f' (stopped at the --seconds limit: fewer graphs than --n {arguments.n})' if result.graphs < arguments.n else ''}.\n"
                f"Laws under {fuzz.LAW_SHARE:.0%} of the graphs of a dtype: {', '.join(f'`{u}`' for u in unreached) or 'none'}.\n\n"
                f"{result.markdown()}\n"
            )
        print(f"  appended the table to {arguments.markdown}")
    return 1 if result.failures else 0


def _targets(arguments: argparse.Namespace) -> int:
    from eqsat import targets

    found = targets.rows(arguments.results)
    print(targets.as_json(found) if arguments.json else targets.table(found))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="eqsat",
        description="Equality saturation for the ExecuTorch Arm backend (Ethos-U55/U65/U85): benchmark it on your models, "
        "optimize a TOSA flatbuffer, calibrate its cost model against Vela, fuzz it. In a lowering script, `eqsat.install()` adds the pass.",
        epilog="examples: eqsat bench --model my_models.py:build_kws; eqsat optimize IN.tosa --target ethos-u55-128 -o OUT.tosa",
    )
    commands = top.add_subparsers(dest="command", required=True)
    bench_command = commands.add_parser(
        "bench",
        help="Vela cycles before/after eqsat on your models",
        description="Quantize each model, lower it for each target without and with eqsat, and compare Vela's "
        "estimates (inference cycles = cycles_total, NPU cycles, data movement) and the outputs under the TOSA "
        "reference model; print where the cycles went per source TOSA op. Writes results.md, results.json and charts "
        "to --out. Exit status 0 when every row was measured and is bit-exact. The built-in zoo runs with "
        "`python -m benchmarks`.",
        epilog="example: eqsat bench --model my_models.py:build_kws --targets ethos-u55-128 --calibration-inputs kws_samples.pt",
    )
    bench_command.add_argument("--model", action="append", required=True, metavar="SPEC", help="FILE.py:FUNCTION or MODULE:FUNCTION returning (torch.nn.Module, example_inputs); repeatable")
    bench_command.add_argument("--targets", nargs="+", default=list(bench.DEFAULT_TARGETS), choices=ACCELERATORS, metavar="TARGET", help=f"Vela accelerator configurations, of {', '.join(ACCELERATORS)} (default: {' '.join(bench.DEFAULT_TARGETS)})")
    bench_command.add_argument(
        "--quant", choices=bench.QUANTIZATIONS, default="a8w8", help="the Arm quantizer configuration: int8 (a8w8) or int16 activations with int8 weights (a16w8); default a8w8"
    )
    bench_command.add_argument(
        "--calibration-inputs",
        type=Path,
        metavar="FILE.pt",
        help="a torch.save'd list of input tuples to calibrate quantization on (default: "
        f"{bench.CALIBRATION_SAMPLES} seeded standard-normal tensors shaped like the example inputs)",
    )
    bench_command.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="results directory (default: benchmarks/results)")
    bench_command.add_argument("--fresh", action="store_true", help="rerun rows that already have results")
    configuration_arguments(bench_command, "of every target")
    io_layout_argument(bench_command)
    bench_command.set_defaults(handler=_bench)
    calibrate_command = commands.add_parser(
        "calibrate",
        help="fit the cost model to Vela micro-benchmarks",
        description="Compile about 1,000 single-op and small-context TOSA graphs with the installed Vela, fit the "
        "per-op cost model (NPU and memory-access cycles) and write eqsat/extract/calibration/TARGET.json (for the "
        "target's default system config and memory mode; TARGET.SYSTEM_CONFIG.MEMORY_MODE.json for another); "
        "--report scores the model against the benchmarked models' Vela cycles_total. Resumable: measured samples "
        "are cached in --workdir.",
        epilog="example: eqsat calibrate --target ethos-u55-64 --jobs 2 && eqsat calibrate --report; "
        "eqsat calibrate --target ethos-u55-128 --memory-mode Sram_Only",
    )
    calibrate_command.add_argument("--target", action="append", choices=ACCELERATORS, metavar="TARGET", help="calibrate this target (repeatable)")
    calibrate_command.add_argument(
        "--report", action="store_true",
        help="write the accuracy report (held-out shapes, benchmarked models), one table per configuration, of the configurations calibrated here, else of every calibrated configuration",
    )
    calibrate_command.add_argument(
        "--results", type=Path, action="append", default=None, metavar="RESULTS",
        help="`eqsat bench` results the report scores: the rows in RESULTS/runs/ and RESULTS/*/runs/ (repeatable; default: benchmarks/results)",
    )
    calibrate_command.add_argument("--out", type=Path, default=None, help="report path (default: RESULTS/calibration_report.md, of the first RESULTS)")
    calibrate_command.add_argument("--jobs", type=int, default=2, help="parallel Vela processes (default: 2)")
    calibrate_command.add_argument("--workdir", type=Path, default=None, help="cache of measured samples, to resume (default: ~/.cache/eqsat/calibration)")
    calibrate_command.add_argument("--scale", type=float, default=1.0, help="grid size factor (default: 1.0)")
    calibrate_command.add_argument(
        "--families", nargs="+", metavar="FAMILY", default=None,
        help="refit only these op families (a name such as conv2d, or a kind such as binary) into the target's existing calibration file, keeping the others",
    )
    configuration_arguments(calibrate_command, "to calibrate for")
    calibrate_command.set_defaults(handler=_calibrate)
    optimize_command = commands.add_parser(
        "optimize",
        help="optimize a TOSA flatbuffer for Vela",
        description="Read a TOSA 1.0 flatbuffer (INT profile, as the Arm backend dumps it with "
        "`EthosUCompileSpec(...).dump_intermediate_artifacts_to(DIR)`), optimize it with eqsat's rules and cost model "
        "for TARGET, and write it to OUT. Operators eqsat does not model pass through unchanged. Prints Vela's "
        "cycles_total before and after; keeps the original graph unless Vela estimates fewer for the rewrite. Checks OUT against "
        "IN bit for bit with the TOSA reference model on seeded random inputs. Exit status 0 when OUT was written, "
        "1 on a mismatch (OUT is not written), 2 for a file it cannot read (not TOSA, another TOSA version or "
        "profile, control flow).",
        epilog="example: eqsat optimize output_tag0_TOSA-1.0+INT.tosa --target ethos-u55-128 -o optimized.tosa",
    )
    optimize_command.add_argument("input", type=Path, metavar="IN.tosa", help="the TOSA flatbuffer to optimize")
    optimize_command.add_argument("--target", required=True, choices=ACCELERATORS, metavar="TARGET", help=f"the Vela accelerator configuration, of {', '.join(ACCELERATORS)}")
    optimize_command.add_argument("-o", "--output", type=Path, required=True, metavar="OUT.tosa", help="where to write the optimized flatbuffer")
    optimize_command.add_argument("--trials", type=int, default=3, help="random inputs the reference model checks (default: 3)")
    optimize_command.add_argument("--seed", type=int, default=0, help="seed of the first random input (default: 0)")
    optimize_command.add_argument("--time-limit", type=float, default=Options().time_limit, help=f"seconds for eqsat's pass, a hard budget (default: {Options().time_limit:g})")
    configuration_arguments(optimize_command, "Vela compiles for")
    optimize_command.set_defaults(handler=_optimize)
    fuzz_command = commands.add_parser(
        "fuzz",
        help="optimize random TOSA graphs and check them bit-exact",
        description="Draw random TOSA-dialect graphs, optimize each with eqsat and compare both graphs bit for bit "
        "with an exact evaluator; print every mismatch shrunk to a Python reproducer. Exit status 1 on a mismatch.",
        epilog="example: eqsat fuzz --n 10000 --seed 1 --target ethos-u85-256; "
        "eqsat fuzz --target ethos-u65-256 --target ethos-u65-512 --memory-mode Shared_Sram",
    )
    fuzz_command.add_argument("--n", type=int, default=500, help="how many random graphs (default: 500)")
    fuzz_command.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    fuzz_command.add_argument(
        "--target",
        action="append",
        choices=ACCELERATORS,
        metavar="TARGET",
        help="optimize for this target (repeatable; default: ethos-u55-128 and ethos-u85-256; each graph for every one)",
    )
    fuzz_command.add_argument("--jobs", type=int, default=1, help="processes, seeds SEED, SEED + 1, ... (default: 1)")
    fuzz_command.add_argument("--seconds", type=float, default=None, help="stop drawing new graphs after this long (default: no limit)")
    fuzz_command.add_argument("--markdown", default=None, metavar="PATH", help="append the per-law table, command line and seed to this file")
    configuration_arguments(fuzz_command, "of every target")
    fuzz_command.set_defaults(handler=_fuzz)
    targets_command = commands.add_parser(
        "targets",
        help="list the targets and configurations eqsat knows, how each is priced, and its measured error",
        description="One row per Vela target at the system config and memory mode its Ethos-U compile spec picks by "
        "default, and one per other calibrated configuration: how eqsat prices it (its calibration file, or refused "
        "with the reason and the command that calibrates it), the Vela version it was fitted on, and its error on the "
        "zoo as `eqsat calibrate --report` measured it (RESULTS/calibration_report.md; 'not measured' otherwise).",
        epilog="example: eqsat targets",
    )
    targets_command.add_argument("--results", type=Path, default=Path("benchmarks/results"), help="where the calibration report is (default: benchmarks/results)")
    targets_command.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    targets_command.set_defaults(handler=_targets)
    return top


def main(argv: list[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    return arguments.handler(arguments)


if __name__ == "__main__":
    sys.exit(main())
