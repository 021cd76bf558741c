"""A pytest plugin for running upstream's Arm backend tests with eqsat installed (`-p tests.upstream_eqsat_plugin`).

It calls the documented `eqsat.install()` (no target: each Ethos-U lowering names its own, a TOSA-only one
is left untouched) before the tests run, and writes one JSON line per test to the file named by
$EQSAT_UPSTREAM_REPORTS: the test's id and what each of its eqsat runs did (changed, fallback).
"""

from __future__ import annotations

import json
import os

import eqsat

_reported = 0
"""How many of eqsat.last_reports() earlier tests made."""


def pytest_configure(config) -> None:
    eqsat.install()


def pytest_runtest_teardown(item) -> None:
    global _reported
    reports = eqsat.last_reports()
    runs = [{"target": r.target, "changed": r.changed, "fallback": r.fallback} for r in reports[_reported:]]
    _reported = len(reports)
    path = os.environ.get("EQSAT_UPSTREAM_REPORTS")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"test": item.nodeid, "runs": runs}) + "\n")
