"""Fixtures shared by the test modules."""

import json
import shutil

import pytest

from eqsat.extract import vela_cost


@pytest.fixture
def calibrations_without(tmp_path, monkeypatch):
    """calibrations_without(name, ...): the shipped calibration files but those of the named configurations
    (Configuration.name), for a test of what eqsat does with a configuration that has none, whichever are shipped."""

    def leave_out(*names: str) -> None:
        folder = tmp_path / "calibration-without"
        folder.mkdir()
        for path in vela_cost.CALIBRATION_DIR.glob("*.json"):
            if path.stem not in names:
                shutil.copy(path, folder / path.name)
        monkeypatch.setattr(vela_cost, "CALIBRATION_DIR", folder)

    return leave_out


def _doubled(value):
    """value with every fitted coefficient ("coef") doubled."""
    if isinstance(value, dict):
        return {k: [2 * c for c in v] if k == "coef" else _doubled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_doubled(v) for v in value]
    return value


@pytest.fixture
def other_calibration(tmp_path, monkeypatch):
    """A calibration folder with the shipped ethos-u55-128 file and one for ethos-u55-128 with memory mode Sram_Only:
    the same models with every coefficient doubled (a fixture, not a measurement), so that a price tells which
    file it came from. Returns that non-default configuration."""
    from eqsat.configuration import Configuration

    configuration = Configuration.of("ethos-u55-128", memory_mode="Sram_Only")
    folder = tmp_path / "calibration-other"
    folder.mkdir()
    shipped = vela_cost.calibration_path("ethos-u55-128")
    shutil.copy(shipped, folder / shipped.name)
    data = json.loads(shipped.read_text())
    data |= configuration.as_data() | {"models": _doubled(data["models"])}
    (folder / f"{configuration.name}.json").write_text(json.dumps(data))
    monkeypatch.setattr(vela_cost, "CALIBRATION_DIR", folder)
    return configuration
