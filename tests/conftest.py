"""Fixtures shared by the test modules."""

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
