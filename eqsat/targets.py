"""`eqsat targets`: every target and configuration eqsat knows, how it is priced, and how well.

One row per target at its compile spec's default configuration, and one per other calibrated
configuration (eqsat.configuration). Each says:
- how it is priced: with its calibration file, or refused, with the reason a lowering's report gives;
- the Vela version its calibration was fitted on;
- its measured error on the zoo: the mean and worst absolute error of the stock graph's estimate against
  Vela's `cycles_total`, read from the summary table of `eqsat calibrate --report`, which scores every calibrated
  configuration on the rows benchmarked on it (<results>/calibration_report.md), where that report scored the
  same configuration with the same Vela version; "not measured" otherwise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from eqsat.configuration import ACCELERATORS, Configuration, unpriceable
from eqsat.extract import vela_cost
from eqsat.extract.cost import UncalibratedTargetError, cost_model_for

REPORT = "calibration_report.md"
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class TargetRow:
    configuration: Configuration
    priced: str
    """"calibrated: <file>" or "refused: <reason>"."""
    vela_version: str
    """The Vela version the calibration was fitted on ("" when there is none)."""
    zoo_error: str


def _markdown_rows(text: str, header: str) -> dict[str, list[str]]:
    """The rows, by first cell, of the markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    if not starts:
        return {}
    rows = {}
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def zoo_errors(report: Path) -> dict[tuple[Configuration, str], str]:
    """The zoo error `eqsat calibrate --report` measured, by (configuration, Vela version) it measured it on.

    The report names a configuration in its first column by Configuration.name (a target alone: its default
    configuration) and gives its Vela version, system config and memory mode in its first table.
    """
    if not report.exists():
        return {}
    text = report.read_text()
    measured = _markdown_rows(text, "| target | Vela | system config | memory mode |")
    errors = _markdown_rows(text, "| target | mean abs error |")
    found = {}
    for name, (mean, _median, worst, within) in ((n, e[:4]) for n, e in errors.items() if len(e) >= 4):
        if name not in measured or len(measured[name]) < 3:
            continue
        vela, system_config, memory_mode = measured[name][:3]
        target = name.partition(".")[0]
        if target not in ACCELERATORS:
            continue
        config_ini = next((c.config_ini for c in vela_cost.calibrations() if c.name == name), None)
        configuration = Configuration.of(target, system_config, memory_mode, config_ini)
        models = re.sub(r"^\d+/", "", within)
        found[configuration, vela] = f"{mean} mean, {worst} worst ({models} models, {report})"
    return found


def rows(results: Path = Path("benchmarks/results")) -> list[TargetRow]:
    """What eqsat knows of each target's default configuration and of each calibrated configuration."""
    configurations = [Configuration.of(t) for t in ACCELERATORS]
    configurations += [c for c in vela_cost.calibrated_configurations() if c not in configurations]
    errors = zoo_errors(results / REPORT)
    found = []
    for configuration in configurations:
        try:
            model = cost_model_for(configuration)
        except UncalibratedTargetError as refusal:
            reason = str(refusal)
            if not vela_cost.has_calibration(configuration):
                reason = unpriceable(configuration) or f"no calibration: run `{configuration.calibrate_command()}`"
            found.append(TargetRow(configuration, f"refused: {reason}", "", NOT_MEASURED))
            continue
        version = model.data["vela_version"]
        path = vela_cost.calibration_path(configuration)
        found.append(TargetRow(configuration, f"calibrated: {path.name}", version, errors.get((configuration, version), NOT_MEASURED)))
    return found


def table(target_rows: list[TargetRow]) -> str:
    """The rows as a markdown table."""
    lines = [
        "| target | system config | memory mode | vela.ini | priced | Vela | zoo error (stock estimate vs cycles_total) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in target_rows:
        c = row.configuration
        lines.append(f"| {c.target} | {c.system_config} | {c.memory_mode} | {c.config_ini} | {row.priced} | {row.vela_version or '-'} | {row.zoo_error} |")
    return "\n".join(lines)


def as_json(target_rows: list[TargetRow]) -> str:
    """The rows as JSON."""
    return json.dumps(
        [{**r.configuration.as_data(), "name": r.configuration.name, "priced": r.priced, "vela_version": r.vela_version, "zoo_error": r.zoo_error} for r in target_rows],
        indent=1,
    )
