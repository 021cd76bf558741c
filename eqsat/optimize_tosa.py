"""`eqsat optimize`: one TOSA flatbuffer read, optimized for a target, written back, costed by Vela and
checked bit for bit against the original with the TOSA reference model.

The file goes through `eqsat.bridge_tosa` into the FX graph the pass sees inside a lowering, and through
`eqsat.pipeline.optimize` (the same rules, cost model, budgets and fallback). The optimized file is kept only
if Vela estimates fewer `cycles_total` for it than for the original (as `verify="vela"` decides in a
lowering); otherwise the original bytes are written unchanged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from eqsat import bridge_tosa, validate, vela
from eqsat.pipeline import Options, optimize
from eqsat.report import Report

TosaFileError = bridge_tosa.TosaFileError


@dataclass
class Optimized:
    """What `optimize_file` did: the bytes to write, Vela's cycles_total before and after, the pass's report,
    whether eqsat's rewrite was kept (and why not), and the reference model's verdict."""

    flatbuffer: bytes
    cycles_before: int
    cycles_after: int
    report: Report
    kept: bool
    reason: str | None
    trials: int
    mismatch: str | None = None
    operators_before: Counter = field(default_factory=Counter)
    operators_after: Counter = field(default_factory=Counter)
    """How many TOSA operators of each kind IN and the written graph have (CONST and CONST_SHAPE included)."""

    def operator_changes(self) -> dict[str, tuple[int, int]]:
        """(before, after) of each kind of operator whose count changed."""
        kinds = sorted(set(self.operators_before) | set(self.operators_after))
        return {k: (self.operators_before[k], self.operators_after[k]) for k in kinds if self.operators_before[k] != self.operators_after[k]}

    @property
    def bit_exact(self) -> bool:
        return self.mismatch is None


def optimize_file(data: bytes, target: str, *, trials: int = 3, seed: int = 0, **options) -> Optimized:
    """Optimize a TOSA flatbuffer for target; options go to eqsat.optimize (time_limit=..., rules=...,
    system_config=..., memory_mode=..., config_ini=...: the configuration Vela compiles it for, both times).

    Raises TosaFileError when the file cannot be read (not TOSA, another version or profile, control flow)
    or Vela cannot compile it.
    """
    graph_module, parsed = bridge_tosa.read_flatbuffer(data)
    optimized, report = optimize(graph_module, target, **options)
    configuration = Options.from_kwargs(**options).configuration(target)
    try:
        before = vela.estimate(data, configuration).cycles_total
    except vela.VelaError as error:
        raise TosaFileError(f"Vela cannot compile it for {target}: {error}") from None
    candidate, reason = data, report.fallback or ("no cheaper graph found" if not report.changed else None)
    if report.changed:
        try:
            candidate = bridge_tosa.write_flatbuffer(optimized, parsed)
        except ValueError as error:
            reason = f"the optimized graph cannot be written as TOSA: {error}"
    after = before
    if candidate is not data:
        try:
            after = vela.estimate(candidate, configuration).cycles_total
        except vela.VelaError as error:
            candidate, reason = data, f"Vela rejected the optimized graph: {error}"
        else:
            if after >= before:
                candidate, after, reason = data, before, f"Vela estimated {after} cycles_total for it, not fewer than {before}"
    result = Optimized(
        candidate,
        before,
        after,
        report,
        kept=candidate is not data,
        reason=reason,
        trials=trials,
        operators_before=Counter(o.op for o in parsed.operators),
        operators_after=Counter(o.op for o in bridge_tosa.parse(candidate).operators),
    )
    try:
        with validate.stdout_silenced():  # the reference model's version warning, per graph
            validate.assert_equivalent(data, candidate, trials=trials, seed=seed)
    except (validate.NotEquivalentError, validate.ReferenceModelError, ValueError) as error:
        result.mismatch = f"{type(error).__name__}: {error}"  # ValueError: the reference model refused a graph
    return result
