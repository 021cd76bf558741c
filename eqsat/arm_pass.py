"""The drop-in pass for the Arm pipeline, and its one-line installation.

`install()` registers one `EqsatPass` with the Arm pass manager's public hook
(`register_pass_insertions_before/after`), so every Arm pipeline built
afterwards runs it. By default it runs just before
`EnsureUniqueOutputNodesPass`, where the graph is pure TOSA with its rescales
inserted; `before="ExirToTosaPass"` runs it on edge ATen data movement instead.

When no target is given, the pass takes it from the Ethos-U compile spec of
the lowering that runs it: the pass manager only sees the TOSA part of the
spec, so `install()` wraps `EthosUBackend.preprocess` to note the accelerator
configuration of each delegate being compiled, and `uninstall()` unwraps it.
The system config, memory mode and vela.ini come from the same spec, unless
the pass was given them (`EqsatPass.options_for`).

What the user names is checked where it is named: `install()` and
`EqsatPass()` raise on an unknown target (UnknownTargetError) or a
configuration without a calibration (UncalibratedTargetError, with the
command that calibrates it). What the pass reads from a compile spec never
fails the lowering: an unknown target, or a configuration eqsat cannot price,
leaves the graph untouched, with the reason in the report's `fallback`.
A lowering with no Ethos-U compile spec (TOSA only, `TosaCompileSpec` with
`TOSAPartitioner`) names no accelerator: there the pass leaves the graph
untouched and its report says why (see `EqsatPass.call`).

With `verify="vela"` the same wrapper checks the pass against Vela, per
delegate: it lowers the delegate to TOSA with eqsat (on a copy of the
program), and if eqsat changed anything, once more without; it compiles both
with the pinned Vela and lowers for real with eqsat on only if that gives
fewer `cycles_total`. The report of the delegate records the choice and both
figures; its `phase_seconds["verify"]` is what the check cost.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import time
from typing import Iterator

from executorch.backends.arm._passes import arm_pass_manager
from executorch.backends.arm._passes.ensure_unique_output_nodes_pass import EnsureUniqueOutputNodesPass
from executorch.backends.arm._passes.exir_to_tosa_pass import ExirToTosaPass
from executorch.backends.arm.ethosu.backend import EthosUBackend
from executorch.backends.arm.ethosu.compile_spec import EthosUCompileSpec
from executorch.backends.arm.tosa.backend import TOSABackend
from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
from executorch.exir.pass_base import ExportPass, PassResult
from torch import fx

from eqsat.configuration import Configuration, vela_flag_values
from eqsat.extract.cost import cost_model_for
from eqsat.pipeline import Options, check_target, logger, run
from eqsat.report import Report, op_counts

INSERTION_POINTS = {
    "EnsureUniqueOutputNodesPass": EnsureUniqueOutputNodesPass,
    "ExirToTosaPass": ExirToTosaPass,
}

_compiling_target: contextvars.ContextVar[str | None] = contextvars.ContextVar("eqsat_target", default=None)
_compiling_flags: contextvars.ContextVar[dict[str, str | None]] = contextvars.ContextVar("eqsat_vela_flags", default={})
"""The target, system config, memory mode and vela.ini of the compile spec being compiled (vela_flag_values)."""
_pass_mode: contextvars.ContextVar[str] = contextvars.ContextVar("eqsat_pass_mode", default="run")
"""How EqsatPass acts: "run" (optimize and report), "rerun" (optimize again, already reported) or "off"."""
_reports: list[Report] = []
_installed: list[EqsatPass] = []
_original_preprocess = EthosUBackend.preprocess


class EqsatPass(ExportPass):
    """Replace the graph by the cheapest equivalent graph the rewrite rules can find.

    Identity: the output graph computes bit-identical outputs. Does not apply
    (returns the graph unchanged) when nothing cheaper is found or anything
    fails; the reason is in the report. Options are those of `eqsat.optimize`.
    keep_inputs: keep a copy of every graph the pass is given, in
    `input_graphs` (for rule authors: the graph exactly as the pipeline hands it over).
    """

    _passes_required_after: set = set()

    def __init__(self, target: str | None = None, *, keep_inputs: bool = False, **options) -> None:
        super().__init__()
        self.target = check_target(target) if target is not None else None
        parsed = Options.from_kwargs(**options)
        if target is not None:
            cost_model_for(parsed.configuration(target))  # an uncalibrated one is refused here, with the command that calibrates it
        self.options = options
        self.reports: list[Report] = []
        self.keep_inputs = keep_inputs
        self.input_graphs: list[fx.GraphModule] = []

    def resolve_target(self) -> str | None:
        """The target given to the pass, else that of the Ethos-U delegate being compiled, else None."""
        return self.target or _compiling_target.get()

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        """Optimize graph_module in place for the resolved target and record the report.

        With no target (no target given, and no Ethos-U delegate being
        compiled, as in a TOSA-only lowering) the graph is left untouched and
        the report's fallback says why, unless the options say strict=True,
        which raises ValueError. Every cost the pass weighs is a Vela
        accelerator's, so with none named there is no cost to lower; a
        default accelerator could make the graph slower on the hardware the
        TOSA is actually meant for.
        """
        mode = _pass_mode.get()
        if mode == "off":
            return PassResult(graph_module, False)
        if self.keep_inputs and mode == "run":
            self.input_graphs.append(copy_graph(graph_module))
        target = self.resolve_target()
        if target is None:
            optimized, report = graph_module, self._untouched_without_target(graph_module)
        else:
            optimized, report = run(graph_module, target, self.options_for(target))
        if mode == "run":
            self.reports.append(report)
            _reports.append(report)
        if optimized is graph_module:
            return PassResult(graph_module, False)
        graph_module.graph = optimized.graph
        graph_module.recompile()
        return PassResult(graph_module, True)

    def options_for(self, target: str) -> Options:
        """The pass's options for a graph compiled for target, with its configuration: each of the system
        config, memory mode and vela.ini as the pass was given it, else as the lowering's compile spec names
        it when that compiles for target, else the target's default (eqsat.configuration)."""
        spec = _compiling_flags.get()
        from_spec = {k: v for k in CONFIGURATION_OPTIONS if (v := spec.get(k)) is not None} if spec.get("target") == target else {}
        given = {k: v for k, v in self.options.items() if not (k in CONFIGURATION_OPTIONS and v is None)}
        return Options.from_kwargs(**(from_spec | given))

    def _untouched_without_target(self, graph_module: fx.GraphModule) -> Report:
        """The report of a run that had no target: the graph as it came, and the reason."""
        reason = (
            "no target: the pass was installed without one and this lowering compiles no Ethos-U "
            "delegate (e.g. TOSA only), so no Vela accelerator prices the graph; install(target=...) names one"
        )
        if Options.from_kwargs(**self.options).strict:
            raise ValueError(f"EqsatPass has {reason}")
        logger.warning("eqsat: kept the unmodified graph because of %s", reason)
        nodes, ops = len(graph_module.graph.nodes), op_counts(graph_module)
        return Report(target="", fx_nodes_before=nodes, fx_nodes_after=nodes, ops_before=ops, ops_after=ops, fallback=reason)


CONFIGURATION_OPTIONS = ("system_config", "memory_mode", "config_ini")


def copy_graph(graph_module: fx.GraphModule) -> fx.GraphModule:
    """A new graph module with a copy of the graph (node meta shallow-copied), sharing the attributes."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(graph_module.graph, {}))
    return fx.GraphModule(graph_module, graph)


@functools.wraps(_original_preprocess)
def _preprocess_noting_target(edge_program, compile_specs):
    spec = EthosUCompileSpec._from_list(compile_specs)
    token = _compiling_target.set(spec.target)
    flags_token = _compiling_flags.set(vela_flag_values(spec.compiler_flags) | {"target": spec.target})
    try:
        if any(p.options.get("verify", "none") == "vela" for p in _installed):
            keep = _verify_with_vela(edge_program, spec)
            with _mode("rerun" if keep else "off"):  # the rewrite is deterministic: "rerun" gives the verified graph
                return _original_preprocess(edge_program, compile_specs)
        return _original_preprocess(edge_program, compile_specs)
    finally:
        _compiling_target.reset(token)
        _compiling_flags.reset(flags_token)


@contextlib.contextmanager
def _mode(mode: str) -> Iterator[None]:
    """Set how EqsatPass acts for the duration of a with-block."""
    token = _pass_mode.set(mode)
    try:
        yield
    finally:
        _pass_mode.reset(token)


def _tosa(edge_program, spec: EthosUCompileSpec) -> bytes:
    """The delegate's TOSA flatbuffer, lowered from a copy of edge_program (no artifacts dumped)."""
    tosa_spec = TosaCompileSpec(spec.tosa_spec)
    tosa_spec.set_pass_pipeline_config(spec._get_pass_pipeline_config())
    return TOSABackend._preprocess(copy.deepcopy(edge_program), tosa_spec).processed_bytes


def _verify_with_vela(edge_program, spec: EthosUCompileSpec) -> bool:
    """Whether to lower with eqsat's rewrite: True if Vela estimates fewer cycles_total with it than
    without; False if not, or if eqsat changed nothing (then no second lowering is needed).

    The reports of this delegate's runs record the choice (`Report.verification`).
    """
    from eqsat.vela import VelaError, estimate

    first = len(_reports)
    with _mode("run"):
        candidate = _tosa(edge_program, spec)
    reports = _reports[first:]
    if not any(r.changed for r in reports):
        return False
    started = time.perf_counter()
    with _mode("off"):
        original = _tosa(edge_program, spec)
    flags = _compiling_flags.get()  # what the lowering compiles for, whatever eqsat priced for: Vela checks the target
    configuration = Configuration(spec.target, *(flags[k] for k in CONFIGURATION_OPTIONS))
    figures = {}
    for name, graph in (("eqsat", candidate), ("original", original)):
        try:
            figures[name] = estimate(graph, configuration).cycles_total
        except VelaError as error:
            figures[name] = f"Vela rejected it: {error}"
    keep = isinstance(figures["eqsat"], int) and (not isinstance(figures["original"], int) or figures["eqsat"] < figures["original"])
    seconds = time.perf_counter() - started
    for report in reports:
        report.verification = {"kept": "eqsat" if keep else "original", "vela_cycles_total": figures}
        report.phase_seconds["verify"] = seconds / len(reports)
        if not keep:
            report.changed = False
    return keep


def install(
    target: str | None = None, *, before: str = "EnsureUniqueOutputNodesPass", keep_inputs: bool = False, **options
) -> EqsatPass:
    """Add EqsatPass to every Arm pipeline built from now on; returns the pass.

    target: a Vela accelerator configuration (ethos-u55-32 ... ethos-u85-2048),
    or None to take it from the Ethos-U compile spec of each lowering.
    system_config=, memory_mode=, config_ini= (options): the configuration to
    price for; None takes each from the lowering's compile spec.
    before: the pass to run just before ("EnsureUniqueOutputNodesPass" or
    "ExirToTosaPass").
    keep_inputs: the pass keeps a copy of each graph it is given, in
    `input_graphs` (see EqsatPass).
    """
    if before not in INSERTION_POINTS:
        raise ValueError(f"before must be one of {sorted(INSERTION_POINTS)}, not {before!r}")
    uninstall()
    eqsat_pass = EqsatPass(target, keep_inputs=keep_inputs, **options)
    arm_pass_manager.register_pass_insertions_before(INSERTION_POINTS[before], [eqsat_pass])
    EthosUBackend.preprocess = staticmethod(_preprocess_noting_target)
    _installed.append(eqsat_pass)
    _reports.clear()
    return eqsat_pass


def uninstall() -> None:
    """Remove what install() added; pipelines built afterwards run without eqsat."""
    for registered in arm_pass_manager._registered_pass_insertions.values():
        registered.before_passes[:] = [p for p in registered.before_passes if p not in _installed]
    _installed.clear()
    EthosUBackend.preprocess = staticmethod(_original_preprocess)


def last_reports() -> list[Report]:
    """The reports of the runs the installed pass made since install()."""
    return list(_reports)
