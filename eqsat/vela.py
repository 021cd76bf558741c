"""Run the pinned Vela on one TOSA flatbuffer and read its cost estimates.

Vela is the judge of cost (DESIGN.md section 6). `estimate` compiles a TOSA
graph with exactly the flags the Arm backend uses for the target, plus
`--verbose-performance`, and reads back what Vela 5.1 writes to its output
directory:

- `<network>_summary_<system config>.csv`: one row with the network totals,
  among them `cycles_npu` and `cycles_total` (the inference estimate);
- `<network>_per-layer.csv`: one row per operation Vela scheduled, with the
  header `Original Operator,NNG Operator,Target,Staging Usage,Peak% (Staging),
  Op Cycles,Network% (cycles),NPU,SRAM AC,DRAM AC,OnFlash AC,OffFlash AC,
  MAC Count,Network% (MAC),Util% (MAC),Name`. Vela writes it without quoting,
  and only the last column, `Name`, can hold arbitrary text.

The operator counts appear only in the summary Vela prints
(`CPU operators = 0 (0.0%)`, `NPU operators = 5 (100.0%)`).

Vela runs in a subprocess: its C++ core can print, or die, outside Python's
control, and a rejected graph then surfaces as a non-zero exit with Vela's own
message on stderr.
"""

import contextlib
import csv
import io
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from eqsat.configuration import Configuration
from eqsat.lowering import vela_flags

_NETWORK = "network"
_ACCESS_COLUMNS = ("SRAM AC", "DRAM AC", "OnFlash AC", "OffFlash AC")
_PER_LAYER_COLUMNS = ("Original Operator", "NNG Operator", "Target", "Op Cycles", "NPU", *_ACCESS_COLUMNS, "Name")
_OPERATOR_COUNT = re.compile(r"^(CPU|NPU) operators = (\d+)", re.MULTILINE)


class VelaError(RuntimeError):
    """Vela rejected a graph, or its output was not what this module reads."""


@dataclass(frozen=True)
class LayerCycles:
    """Vela's estimate for one operation it runs on the NPU.

    `name` is Vela's name for the operation (its output tensor, or `#<id>`
    for operations Vela inserted itself). `operator` is the operation Vela
    runs; `source_operator` is the TOSA operator it came from, or None when
    Vela does not say. `cycles_npu` is the NPU estimate (column `NPU`);
    `cycles_access` is the largest of its memory-access estimates (columns
    `SRAM AC`, `DRAM AC`, `OnFlash AC`, `OffFlash AC`); `cycles_total` is
    the estimate once memory access is taken into account (column
    `Op Cycles`, the larger of the two). `cycles_sram`, `cycles_dram` and
    `cycles_flash` are the access estimates of each memory (flash: the larger
    of `OnFlash AC` and `OffFlash AC`); `cycles_access` is their largest.
    """

    name: str
    operator: str
    source_operator: str | None
    cycles_npu: int
    cycles_total: int
    cycles_access: int = 0
    cycles_sram: int = 0
    cycles_dram: int = 0
    cycles_flash: int = 0


@dataclass(frozen=True)
class VelaEstimate:
    """Vela's cost estimate for one TOSA graph.

    `cycles_npu` and `cycles_total` are the network totals of Vela's summary.
    `layers` lists the NPU operations in Vela's order; with Vela 5.1 the sums
    of their `cycles_npu` and `cycles_total` equal the network totals exactly.
    An operation that Vela fused into its neighbour keeps its own layer, with
    0 cycles, so `layers` can be longer than `npu_ops`. `npu_ops` and
    `cpu_ops` are Vela's operator counts, which count a fused group once.
    """

    cycles_npu: int
    cycles_total: int
    layers: list[LayerCycles]
    npu_ops: int
    cpu_ops: int


def estimate(
    tosa_flatbuffer: bytes,
    target: Configuration | str,
    *,
    workdir: str | Path | None = None,
) -> VelaEstimate:
    """Compile `tosa_flatbuffer` with Vela for `target` and return its estimate.

    `target` is a configuration (eqsat.configuration), or a target alone for its
    default configuration. Uses the flags of its `EthosUCompileSpec` (the
    system config, memory mode and vela.ini included: eqsat.lowering.vela_flags),
    so the estimate is the one the Arm backend would see. The result is deterministic for given bytes.
    Vela's files go to a fresh `vela-*` directory under `workdir`, which is
    kept, or to a temporary directory when `workdir` is None.

    Raises VelaError with Vela's message when Vela rejects the graph.
    """
    with _run_directory(workdir) as run_dir:
        network = run_dir / f"{_NETWORK}.tosa"
        network.write_bytes(tosa_flatbuffer)
        output_dir = run_dir / "output"
        stdout = _run_vela(
            [
                *vela_flags(target),
                "--verbose-performance",
                f"--output-dir={output_dir}",
                str(network),
            ]
        )
        cycles_npu, cycles_total = _read_summary(output_dir)
        npu_ops, cpu_ops = _operator_counts(stdout)
        return VelaEstimate(
            cycles_npu=cycles_npu,
            cycles_total=cycles_total,
            layers=_read_per_layer(output_dir / f"{_NETWORK}_per-layer.csv"),
            npu_ops=npu_ops,
            cpu_ops=cpu_ops,
        )


def tensor_formats(tosa_flatbuffer: bytes, target: Configuration | str, *, workdir: str | Path | None = None) -> dict[str, str]:
    """The layout Vela stores each tensor of its schedule in, by tensor name: "NHWC" or "NHCWB16" (brick format).

    Read from Vela's debug database (`debug_tables`, table `tensors`: regor's `Scheduler::UpdateSchedulerTensor`
    decides each format). Tensors that Vela fuses away (an activation's input, a removed reshape's output) have no
    row."""
    (tensors,) = debug_tables(tosa_flatbuffer, target, ["tensors"], workdir=workdir)
    return {row["name"]: row["format"] for row in tensors}


def debug_tables(tosa_flatbuffer: bytes, target: Configuration | str, names: list[str], *, workdir: str | Path | None = None) -> list[list[dict[str, str]]]:
    """The rows of tables of the debug database Vela writes with `--enable-debug-db` (`<network>_debug.xml`), compiled
    with `estimate`'s flags: e.g. `perf` (each layer's cycles and its access cycles per memory), `perf_debug` (its
    shapes, formats, encoded weight bytes and bytes moved per memory), `perf_debug_main` (its block configuration),
    `tensors` (each tensor's format). Rows of one layer share their `id` across tables."""
    with _run_directory(workdir) as run_dir:
        network = run_dir / f"{_NETWORK}.tosa"
        network.write_bytes(tosa_flatbuffer)
        output_dir = run_dir / "output"
        _run_vela([*vela_flags(target), "--enable-debug-db", f"--output-dir={output_dir}", str(network)])
        path = output_dir / f"{_NETWORK}_debug.xml"
        if not path.exists():
            raise VelaError(f"Vela wrote no debug database {path.name}")
        tables = {table.get("name"): table.text or "" for table in ElementTree.parse(path).getroot().iter("table")}
        if missing := [name for name in names if name not in tables]:
            raise VelaError(f"no {', '.join(missing)} table in {path.name}")
        return [list(csv.DictReader(io.StringIO(tables[name].strip()))) for name in names]


@contextlib.contextmanager
def _run_directory(workdir: str | Path | None) -> Iterator[Path]:
    """Yield an empty directory for one Vela run."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="vela-") as temporary:
            yield Path(temporary)
    else:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix="vela-", dir=workdir))


def _run_vela(arguments: list[str]) -> str:
    """Run Vela's command line with `arguments` and return what it printed."""
    completed = subprocess.run(
        [sys.executable, "-m", "ethosu.vela", *arguments],
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0:
        raise VelaError(
            f"Vela failed (exit status {completed.returncode}): "
            f"{_vela_message(completed.stderr, completed.stdout)}"
        )
    return completed.stdout


def _vela_message(stderr: str, stdout: str) -> str:
    """Return the part of Vela's output that says why it failed.

    That is the final exception of a Python traceback, otherwise all of
    stderr, otherwise all of stdout (where Vela prints its own errors).
    """
    lines = stderr.strip().splitlines()
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
    if tracebacks:
        after_frames = lines[tracebacks[-1] + 1 :]
        exception = next(
            (i for i, line in enumerate(after_frames) if not line.startswith(" ")),
            0,
        )
        return "\n".join(after_frames[exception:])
    return stderr.strip() or stdout.strip()


def _read_summary(output_dir: Path) -> tuple[int, int]:
    """Return (cycles_npu, cycles_total) from Vela's summary CSV."""
    summaries = list(output_dir.glob(f"{_NETWORK}_summary_*.csv"))
    if len(summaries) != 1:
        raise VelaError(f"expected one Vela summary CSV in {output_dir}, found {len(summaries)}")
    with summaries[0].open(newline="") as summary:
        rows = list(csv.DictReader(summary))
    if len(rows) != 1:
        raise VelaError(f"expected one row in {summaries[0]}, found {len(rows)}")
    try:
        return _cycles(rows[0]["cycles_npu"]), _cycles(rows[0]["cycles_total"])
    except KeyError as missing:
        raise VelaError(f"{summaries[0]} has no column {missing}") from None


def _read_per_layer(path: Path) -> list[LayerCycles]:
    """Return the NPU rows of Vela's per-layer CSV, in file order."""
    if not path.exists():
        raise VelaError(f"Vela wrote no per-layer performance file {path.name}")
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    missing = [column for column in _PER_LAYER_COLUMNS if column not in header]
    if missing or header[-1] != "Name":
        raise VelaError(f"unexpected per-layer header in {path.name}: {lines[0]}")
    rows = [line.split(",", len(header) - 1) for line in lines[1:] if line]
    malformed = [fields for fields in rows if len(fields) != len(header)]
    if malformed:
        raise VelaError(
            f"per-layer row with {len(malformed[0])} of {len(header)} fields in {path.name}"
        )
    records = [dict(zip(header, fields)) for fields in rows]
    return [_layer(record) for record in records if record["Target"] == "NPU"]


def _layer(row: dict[str, str]) -> LayerCycles:
    """Build one LayerCycles from a per-layer CSV row."""
    source_operator = row["Original Operator"]
    return LayerCycles(
        name=row["Name"],
        operator=row["NNG Operator"],
        source_operator=None if source_operator == "N/A" else source_operator,
        cycles_npu=_cycles(row["NPU"]),
        cycles_total=_cycles(row["Op Cycles"]),
        cycles_access=max(_cycles(row[column]) for column in _ACCESS_COLUMNS),
        cycles_sram=_cycles(row["SRAM AC"]),
        cycles_dram=_cycles(row["DRAM AC"]),
        cycles_flash=max(_cycles(row["OnFlash AC"]), _cycles(row["OffFlash AC"])),
    )


def _cycles(text: str) -> int:
    """Parse a cycle count that Vela may print as `96` or `96.0`."""
    value = float(text)
    if not value.is_integer():
        raise VelaError(f"cycle count {text!r} is not a whole number")
    return int(value)


def _operator_counts(stdout: str) -> tuple[int, int]:
    """Return (npu_ops, cpu_ops) from the summary Vela printed."""
    counts = dict(_OPERATOR_COUNT.findall(stdout))
    if set(counts) != {"CPU", "NPU"}:
        raise VelaError("Vela printed no 'CPU/NPU operators = N' summary lines")
    return int(counts["NPU"]), int(counts["CPU"])
