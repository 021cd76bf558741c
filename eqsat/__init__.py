"""eqsat: equality saturation for the ExecuTorch Arm (Ethos-U) backend.

    import eqsat
    eqsat.install(target="ethos-u55-128")        # every Arm lowering after this runs eqsat
    gm, report = eqsat.optimize(graph_module, target="ethos-u85-256")
"""

from eqsat.arm_pass import EqsatPass, install, last_reports, uninstall
from eqsat.errors import EqsatError
from eqsat.pipeline import ACCELERATORS, Options, optimize
from eqsat.report import Report

__all__ = [
    "ACCELERATORS",
    "EqsatError",
    "EqsatPass",
    "Options",
    "Report",
    "install",
    "last_reports",
    "optimize",
    "uninstall",
]
