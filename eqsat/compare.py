"""Stock lowering against eqsat lowering of one model on one target.

Lowers the model twice through the real Arm pipeline (once as shipped, once
with eqsat installed), then asks Vela for cycles and the TOSA reference model
for bit-exactness. Tests and benchmarks both measure through this module.
"""

from __future__ import annotations

import copy
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tosa.Op import Op
from tosa.TosaGraph import TosaGraph

import eqsat
from eqsat import bridge_fx, bridge_tosa, lowering, validate, vela
from eqsat.configuration import Configuration
from eqsat.extract import vela_cost

DATA_MOVEMENT_OPERATORS = frozenset({"Transpose", "Concat", "Slice", "Reshape", "MemoryCopy", "Pad", "Tile"})
"""Vela per-layer `Original Operator`s that only move data."""

_OP_NAMES = {value: name for name, value in vars(Op).items() if not name.startswith("_")}


@dataclass
class Measurement:
    """What one lowering costs: Vela's estimate summed over delegates, and its TOSA ops."""

    delegates: int
    cpu_ops: list[str]
    cycles_npu: int
    cycles_total: int
    data_movement_cycles: int
    tosa_ops: dict[str, int]
    lowering_seconds: float
    layers: list[dict] = field(default_factory=list)
    """Vela's per-layer figures, delegate after delegate: name, operator, source (the TOSA operator it
    came from), cycles_total (`Op Cycles`), cycles_npu and cycles_access."""
    boundary_transpose_cycles: int = 0
    """The `Op Cycles` of the transpose layers Vela runs for the delegates' boundary transposes (`boundary_transposes`)."""


@dataclass
class Comparison:
    """Stock against eqsat for one model and target."""

    model: str
    target: str
    stock: Measurement
    optimized: Measurement
    reports: list[dict] = field(default_factory=list)
    calibration: str = ""
    """Digest of the cost model's calibration file for the configuration (eqsat.extract.vela_cost.calibration_digest)."""
    configuration: str = ""
    """The configuration's name (eqsat.configuration.Configuration.name): the target, at its default configuration."""
    io_layout: str = "contiguous"
    """The memory format of the model's 4-D inputs and outputs (eqsat.lowering.IO_LAYOUTS), for both lowerings."""
    bit_exact: bool = False
    mismatch: str | None = None

    @property
    def eqsat_seconds(self) -> float:
        return sum(sum(r["phase_seconds"].values()) for r in self.reports)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["eqsat_seconds"] = self.eqsat_seconds
        return data


def tosa_op_counts(tosa_flatbuffer: bytes) -> Counter:
    """How many operators of each kind a TOSA graph has (CONST and CONST_SHAPE included)."""
    block = TosaGraph.GetRootAsTosaGraph(tosa_flatbuffer, 0).Regions(0).Blocks(0)
    return Counter(_OP_NAMES.get(block.Operators(i).Op(), str(block.Operators(i).Op())) for i in range(block.OperatorsLength()))


def boundary_transposes(tosa_flatbuffer: bytes) -> set[str]:
    """The names of a delegate's boundary TRANSPOSEs' outputs (eqsat.ir.Graph.boundary_transposes), as Vela names
    the layers that write them."""
    graph = bridge_fx.read_graph(bridge_tosa.read_flatbuffer(tosa_flatbuffer)[0]).as_ir()
    return {graph.names[value] for value in graph.boundary_transposes()}


def boundary_transpose_cycles(layers: list, boundary: set[str]) -> int:
    """The `Op Cycles` of the transpose layers that write a boundary transpose's output, with the passes Vela runs
    just before such a layer for the same transpose (an unnamed run of transposes: a decomposed transpose)."""
    total, run = 0, 0
    for layer in layers:
        if layer.operator == "Transpose" and layer.name in boundary:
            total, run = total + run + layer.cycles_total, 0
        elif layer.operator == "Transpose" and layer.name.startswith("#"):  # a pass Vela named after no graph tensor
            run += layer.cycles_total
        else:
            run = 0
    return total


def measure(lowered: lowering.Lowered, workdir: Path) -> Measurement:
    """Vela's estimate and the TOSA op counts of every delegate of a lowering."""
    estimates = [vela.estimate(graph, lowered.configuration, workdir=workdir) for graph in lowered.tosa_flatbuffers]
    ops: Counter = Counter()
    for graph in lowered.tosa_flatbuffers:
        ops.update(tosa_op_counts(graph))
    return Measurement(
        delegates=lowered.delegates,
        cpu_ops=lowered.cpu_ops,
        cycles_npu=sum(e.cycles_npu for e in estimates),
        cycles_total=sum(e.cycles_total for e in estimates),
        data_movement_cycles=sum(
            layer.cycles_total for e in estimates for layer in e.layers if layer.source_operator in DATA_MOVEMENT_OPERATORS
        ),
        tosa_ops=dict(sorted(ops.items())),
        lowering_seconds=lowered.seconds,
        boundary_transpose_cycles=sum(
            boundary_transpose_cycles(e.layers, boundary_transposes(graph)) for e, graph in zip(estimates, lowered.tosa_flatbuffers)
        ),
        layers=[
            {
                "name": layer.name,
                "operator": layer.operator,
                "source": layer.source_operator or "(inserted by Vela)",
                "cycles_total": layer.cycles_total,
                "cycles_npu": layer.cycles_npu,
                "cycles_access": layer.cycles_access,
            }
            for e in estimates
            for layer in e.layers
        ],
    )


def compare(
    name: str,
    model: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    target: Configuration | str,
    *,
    workdir: str | Path | None = None,
    quantization: str = "a8w8",
    calibration_inputs: Sequence[tuple[torch.Tensor, ...]] | None = None,
    io_layout: str = "contiguous",
    **options,
) -> Comparison:
    """Lower model for target (a configuration, or a target at its default one) without and with eqsat; measure
    both and check they agree bit for bit.

    quantization, calibration_inputs and io_layout go to lowering.quantize; options go to eqsat.install (e.g.
    accept="always", rules=()).
    """
    configuration = Configuration.resolve(target)
    target = configuration.target
    with tempfile.TemporaryDirectory(prefix="eqsat-compare-") as temporary:
        root = Path(workdir or temporary)
        exported = lowering.quantize(
            model, example_inputs, configuration, quantization=quantization, calibration_inputs=calibration_inputs, io_layout=io_layout
        )
        stock = lowering.lower(copy.deepcopy(exported), configuration, workdir=_fresh(root / "stock"))
        eqsat.install(**options)  # the pass reads the configuration from the compile spec: unpriced ones fall back, with the reason
        try:
            optimized = lowering.lower(exported, configuration, workdir=_fresh(root / "eqsat"))
            reports = [r.as_dict() for r in eqsat.last_reports()]
        finally:
            eqsat.uninstall()
        comparison = Comparison(
            model=name,
            target=target,
            stock=measure(stock, _fresh(root / "vela-stock")),
            optimized=measure(optimized, _fresh(root / "vela-eqsat")),
            reports=reports,
            calibration=vela_cost.calibration_digest(configuration),
            configuration=configuration.name,
            io_layout=io_layout,
        )
        try:
            validate.assert_lowerings_equivalent(stock, optimized)
            comparison.bit_exact = True
        except (validate.NotEquivalentError, validate.SignatureMismatchError) as error:
            comparison.mismatch = str(error)
        return comparison


def _fresh(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=False)
    return directory
