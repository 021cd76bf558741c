"""Shared builders of the calibration-report tests: a graph as a bench row keeps it, and the row itself, written
as `eqsat bench` writes it."""

import json

from eqsat.configuration import Configuration
from eqsat.ir import Graph, TensorType, Term

TARGET = "ethos-u55-128"
INT8 = TensorType((1, 8, 8, 16), "torch.int8")


def conv_graph() -> Graph:
    """input -> CONV2D -> per-channel RESCALE -> TRANSPOSE, as the Arm backend names them."""
    terms = [
        Term("Opaque", (), ("x",)),
        Term("Opaque", (), ("w",)),
        Term("Opaque", (0, 1), ("tosa.CONV2D.default#1",)),
        Term("Rescale", (2,), ("torch.int8", (3, 5), (30, 30), 0, 0, "")),
        Term("Transpose", (3,), ((0, 3, 1, 2),)),
    ]
    types = [INT8, TensorType((16, 3, 3, 16), "torch.int8"), INT8._replace(dtype="torch.int32"), INT8, TensorType((1, 16, 8, 8), "torch.int8")]
    return Graph(["x", "w", "tosa_conv2d_default", "tosa_rescale_default", "tosa_transpose_default"], terms, types, [4])


def write_row(
    runs,
    model,
    graph: Graph | None,
    calibration: str,
    cost_before: float = 5.0,
    configuration: Configuration | None = None,
    cycles_total: int = 100,
    io_layout: str = "contiguous",
) -> None:
    """A row as `eqsat bench` writes it (`bench._row_path`, `bench.configuration_name`); Vela's cycles are a fixture."""
    configuration = configuration or Configuration.of(TARGET)
    report = {"cost_before": cost_before, "graph_before": graph.as_data() if graph else None}
    row = {"model": model, "target": configuration.target, "calibration": calibration, "reports": [report], "stock": {"cycles_total": cycles_total, "layers": []}}
    if not configuration.is_default:
        row["configuration"] = configuration.name
    row["io_layout"] = io_layout
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{model}__{configuration.name}{'' if io_layout == 'contiguous' else '__' + io_layout}.json").write_text(json.dumps(row))
