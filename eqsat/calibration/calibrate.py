"""`eqsat calibrate`: fit the cost model to the pinned Vela, one target at a time.

Motivation
----------
The cost model must predict what Vela will charge for a graph, and Vela's
charges differ by target and by context (DESIGN §1). This module measures
them: it builds small TOSA graphs with `tosa_serializer` (single ops, and the
small contexts in which Vela fuses), compiles them with the pinned Vela for
the target through `eqsat.vela.estimate`, attributes each layer's cycles
(NPU, memory access and `Op Cycles`) to the op it came from, and fits the per-family linear models that
`eqsat.extract.vela_cost.VelaCalibratedCost` evaluates.

Overview
--------
1. `calibration_grid.grid(target, split)` lists the `Sample`s: a kind and
   its parameters. The graphs that each kind stands for are described in
   eqsat/calibration/graphs.py: single ops, hand-built contexts, and
   `module` bundles of torch blocks that the Arm backend lowers.
2. `measure` compiles the samples, several per TOSA graph (as independent
   subgraphs whose tensors carry the prefix `s<i>_`), in `jobs` parallel Vela
   processes. Each `module` bundle is lowered in its own process
   (`python -m eqsat.calibration.calibrate block ...`, see `lower_block`).
   `measure` appends one JSON line per sample to
   `<workdir>/<target>/samples.jsonl`. Samples already there are skipped, so
   an interrupted calibration resumes. A graph that Vela rejects, or whose
   layers cannot each be attributed to one sample, is bisected down to
   single samples.
3. `calibration_fit.fit` turns the measured samples into observations and
   fits every family (eqsat/calibration/fit.py).
4. `calibrate` writes the configuration's calibration file
   (eqsat/extract/calibration/<target>.json for a target's default
   configuration, `vela_cost.calibration_path`) with the Vela
   version, the target, the system config, the memory mode, the vela.ini, the
   coefficients, the fit quality (R², mean absolute % error) and the
   transposes that Vela rejected.

Layer attribution: Vela names a layer after the tensor it writes. That is an
op's output, `<input>_int32` or `<input>/lut` for a pass that Vela inserted
in front of an op, or `#<id>` for an intermediate pass. A layer goes to the
op that produces the named tensor, or else to the first consumer of the
tensor whose name it extends. A `#` layer goes to the op of the next named
layer. Batching does not change a sample's cycles. This was checked when this
module was written, on one sample of every kind, batched and alone, on both
targets.

`eqsat calibrate --report` (eqsat/calibration/report.py) scores the
models on held-out shapes and on the whole zoo models.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Iterator

from eqsat.configuration import Configuration, Generation
from eqsat.extract import vela_cost
from eqsat.calibration.fit import fit, folds_transpose_into_producer, transpose_feasibility
from eqsat.calibration.graphs import Layout, Sample, build_tosa, context_bundle, serialize_node
from eqsat.calibration.grid import grid
from eqsat.extract.vela_cost import FORMAT_VERSION

DEFAULT_WORKDIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eqsat" / "calibration"
"""Where measured samples are cached (one JSONL file per configuration, under its Configuration.name), so a calibration resumes."""
BATCH_SIZE = 8


# ---------------------------------------------------------------- measuring


MEASURES = {"npu": "cycles_npu", "access": "cycles_access", "total": "cycles_total", "sram": "cycles_sram", "dram": "cycles_dram", "flash": "cycles_flash"}
"""What a sample records of each layer: Vela's NPU cycles, its memory-access cycles (the largest
access column), its `Op Cycles` (the larger of the two, what `cycles_total` adds up) and the
access cycles of each memory (SRAM, DRAM, flash)."""


def _attribute(layers, layouts: list[Layout], measure: str = "npu") -> list[dict[str, int]] | None:
    """One measure's cycles per sample and role, from Vela's per-layer list; None if a layer cannot be attributed."""
    column = MEASURES[measure]
    per_sample: list[dict[str, int]] = [{} for _ in layouts]
    pending = 0
    for layer in layers:
        cycles = getattr(layer, column)
        match = re.match(r"s(\d+)_", layer.name)
        if match is None:
            if len(layouts) > 1 and not layer.name.startswith("#"):
                return None  # e.g. a constant Vela rescaled ahead of time: whose is it?
            pending += cycles
            continue
        index = int(match.group(1))
        if index >= len(layouts):
            return None
        role = _role_of(layer.name, layouts[index])
        if role is None:
            if len(layouts) > 1:
                return None
            role = "unattributed"
        per_sample[index][role] = per_sample[index].get(role, 0) + cycles + pending
        pending = 0
    return None if pending else per_sample


def _attribute_all(layers, layouts: list[Layout]) -> list[dict[str, dict[str, int]]] | None:
    """Every measure's cycles per sample and role ({measure: {role: cycles}}); None if a layer cannot be attributed."""
    by_measure = {m: _attribute(layers, layouts, m) for m in MEASURES}
    if any(v is None for v in by_measure.values()):
        return None
    return [{m: by_measure[m][i] for m in MEASURES} for i in range(len(layouts))]


def _role_of(name: str, layout: Layout) -> str | None:
    if name in layout.producer:
        return layout.producer[name]
    stems = [t for t in (*layout.producer, *layout.consumer) if name.startswith(t) and name[len(t)] in "_/"]
    if not stems:
        return None
    stem = max(stems, key=len)
    return layout.consumer.get(stem) or layout.producer.get(stem)


def _record(sample: Sample, target: str, version: str, status: str, measured: dict | None = None, error: str = "") -> dict:
    """One cache line. `measured` is {measure: {role: cycles}}: `roles`/`cycles` hold the NPU cycles,
    `roles_access`/`cycles_access` and `roles_total`/`cycles_total` the other measures."""
    record = {"key": sample.key, "kind": sample.kind, "params": sample.params, "split": sample.split, "target": target, "vela": version, "status": status}
    if measured is not None:
        for measure, roles in measured.items():
            suffix = "" if measure == "npu" else f"_{measure}"
            record[f"roles{suffix}"] = roles
            record[f"cycles{suffix}"] = sum(roles.values())
    if error:
        record["error"] = error[-300:]
    return record


def measure_batch(samples: list[Sample], configuration: Configuration, version: str) -> list[dict]:
    """Compile samples together with Vela for configuration; fall back to one graph per sample when needed."""
    from eqsat.vela import VelaError, estimate

    if len(samples) > 1:
        graph, layouts = build_tosa(samples)
        try:
            result = estimate(graph, configuration)
            attributed = _attribute_all(result.layers, layouts) if result.cpu_ops == 0 else None
        except VelaError:
            attributed = None
        if attributed is not None:
            return [_record(s, configuration.target, version, "ok", roles) for s, roles in zip(samples, attributed)]
        if len(samples) > 2:  # bisect: one bad sample should not cost a compile per sample
            half = len(samples) // 2
            return measure_batch(samples[:half], configuration, version) + measure_batch(samples[half:], configuration, version)
    records = []
    for sample in samples:
        graph, layouts = build_tosa([sample])
        try:
            result = estimate(graph, configuration)
        except VelaError as error:
            records.append(_record(sample, configuration.target, version, "rejected", error=str(error)))
            continue
        if result.cpu_ops:
            records.append(_record(sample, configuration.target, version, "cpu", error=f"{result.cpu_ops} operators on the CPU"))
            continue
        attributed = _attribute_all(result.layers, layouts)
        if attributed is not None:
            measured = attributed[0]
        else:
            access = sum(layer.cycles_access for layer in result.layers)
            measured = {"npu": {"op": result.cycles_npu}, "access": {"op": access}, "total": {"op": result.cycles_total}}
            measured.update({m: {"op": sum(getattr(layer, MEASURES[m]) for layer in result.layers)} for m in ("sram", "dram", "flash")})
        records.append(_record(sample, configuration.target, version, "ok", measured))
    return records


def load_cache(path: Path, version: str) -> dict[str, dict]:
    """The measured samples in a JSONL cache, by key (lines of other Vela versions and torn lines are ignored)."""
    records: dict[str, dict] = {}
    if not path.exists():
        return records
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("vela") != version or record.get("status") == "ok" and "cycles_total" not in record:  # older lines lack the memory measures
            continue
        if record.get("kind") == "module" and record.get("status") == "ok" and "operands" not in record:  # nor which node reads which
            continue
        records[record["key"]] = record
    return records


def measure(samples: list[Sample], configuration: Configuration, workdir: Path, *, jobs: int = 2, batch_size: int = BATCH_SIZE, progress: bool = True) -> dict[str, dict]:
    """Measure every sample not yet in workdir's cache for configuration; returns all records by key."""
    from tqdm import tqdm

    version = vela_cost.vela_version()
    cache_path = Path(workdir) / configuration.name / "samples.jsonl"
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    records = load_cache(cache_path, version)
    todo = [s for s in {s.key: s for s in samples}.values() if s.key not in records]
    # Large transposes are slow to compile and may be rejected: they go one per graph.
    blocks = [s for s in todo if s.kind == "module"]
    single = [s for s in todo if s.split == "probe"]
    batched = [s for s in todo if s.split != "probe" and s.kind != "module"]
    batches = [batched[i : i + batch_size] for i in range(0, len(batched), batch_size)] + [[s] for s in blocks] + [[s] for s in single]
    with (
        tqdm(total=len(todo), desc=f"calibrate {configuration.name}", unit="sample", disable=not progress) as bar,
        concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
        cache_path.open("a") as cache,
    ):
        futures = [pool.submit(measure_block if batch[0].kind == "module" else measure_batch, batch, configuration, version) for batch in batches]
        for future in concurrent.futures.as_completed(futures):
            for record in future.result():
                records[record["key"]] = record
                cache.write(json.dumps(record) + "\n")
            cache.flush()
            bar.update(len(future.result()))
    return records


# ---------------------------------------------------------------- context blocks, lowered by the Arm backend in a worker process


@contextlib.contextmanager
def graphs_at_eqsat_position() -> Iterator[list]:
    """Every Arm pipeline built inside the with-block keeps a copy of each graph at the point where the
    installed pass would run (`arm_pass.INSERTION_POINTS`' default), and changes nothing.

    Calibration measures a target before eqsat can price it, so it captures the graphs with this pass,
    not with `EqsatPass` (which refuses a target without a calibration)."""
    from executorch.backends.arm._passes import arm_pass_manager
    from executorch.backends.arm._passes.ensure_unique_output_nodes_pass import EnsureUniqueOutputNodesPass
    from executorch.exir.pass_base import ExportPass, PassResult

    from eqsat.arm_pass import copy_graph

    graphs: list = []

    class KeepGraph(ExportPass):
        _passes_required_after: set = set()

        def call(self, graph_module):
            graphs.append(copy_graph(graph_module))
            return PassResult(graph_module, False)

    keeper = KeepGraph()
    arm_pass_manager.register_pass_insertions_before(EnsureUniqueOutputNodesPass, [keeper])
    try:
        yield graphs
    finally:
        for registered in arm_pass_manager._registered_pass_insertions.values():
            registered.before_passes[:] = [p for p in registered.before_passes if p is not keeper]


def lower_block(params: dict, configuration: Configuration) -> dict:
    """Lower one bundle of context blocks; the nodes at eqsat's position and Vela's cycles per measure."""
    import tempfile

    from eqsat import bridge_fx, lowering, vela

    module, inputs = context_bundle(params)
    program = lowering.quantize(module, inputs, configuration)
    with graphs_at_eqsat_position() as input_graphs, tempfile.TemporaryDirectory(prefix="eqsat-calibrate-") as directory:
        lowered = lowering.lower(program, configuration, workdir=directory)
    nodes: list = []
    operands: list[list[int]] = []  # per node, the positions in nodes of its operands
    outputs: list[int] = []  # the positions in nodes of the graph outputs
    for graph_module in input_graphs:
        read = bridge_fx.read_graph(graph_module)
        position: dict[int, int] = {}
        for i, (node, term) in enumerate(zip(read.nodes, read.terms)):
            if node.users or node.op == "placeholder":
                position[i] = len(nodes)
                nodes.append(serialize_node(term, read.type_of(i), [read.type_of(a) for a in term.args]))
                operands.append([position[a] for a in term.args])
        outputs += [position[i] for i in read.outputs]
    estimates = [vela.estimate(graph, configuration) for graph in lowered.tosa_flatbuffers]
    cycles = {
        "npu": sum(e.cycles_npu for e in estimates),
        "access": sum(layer.cycles_access for e in estimates for layer in e.layers),
        "total": sum(e.cycles_total for e in estimates),
        **{m: sum(getattr(layer, MEASURES[m]) for e in estimates for layer in e.layers) for m in ("sram", "dram", "flash")},
    }
    return {"nodes": nodes, "operands": operands, "outputs": outputs, "cycles": cycles, "cpu_ops": lowered.cpu_ops}


def measure_block(samples: list[Sample], configuration: Configuration, version: str) -> list[dict]:
    """Lower one context block in a fresh process (the Arm backend keeps global state)."""
    import subprocess
    import tempfile

    (sample,) = samples
    with tempfile.TemporaryDirectory(prefix="eqsat-calibrate-") as directory:
        out = Path(directory) / "block.json"
        worker = subprocess.run(
            [sys.executable, "-m", "eqsat.calibration.calibrate", "block", json.dumps(sample.params), json.dumps(configuration.as_data()), str(out)],
            capture_output=True,
            text=True,
        )
        if worker.returncode != 0 or not out.exists():
            return [_record(sample, configuration.target, version, "rejected", error=worker.stderr.strip()[-300:])]
        result = json.loads(out.read_text())
    if result["cpu_ops"]:
        return [_record(sample, configuration.target, version, "cpu", error=f"on the CPU: {result['cpu_ops']}")]
    record = _record(sample, configuration.target, version, "ok", {m: {"graph": c} for m, c in result["cycles"].items()})
    record |= {"nodes": result["nodes"], "operands": result["operands"], "outputs": result["outputs"]}
    return [record]


# ---------------------------------------------------------------- the calibration file


def check_configuration(configuration: Configuration) -> None:
    """ValueError unless the configuration's vela.ini files name its system config and memory mode, and eqsat can
    price it (`configuration.unpriceable`)."""
    from eqsat.configuration import read_vela_ini, unpriceable

    ini = read_vela_ini(configuration)
    for kind, value in (("System_Config", configuration.system_config), ("Memory_Mode", configuration.memory_mode)):
        if not ini.has_section(f"{kind}.{value}"):
            known = sorted(s.partition(".")[2] for s in ini.sections() if s.startswith(kind + "."))
            raise ValueError(f"{configuration.config_ini} has no {kind} {value}; it has {', '.join(known)}")
    reason = unpriceable(configuration)
    if reason:
        raise ValueError(f"cannot calibrate {configuration.describe()}: {reason}")


def in_families(family: str, families: list[str]) -> bool:
    """Whether a fitted family is one of families, each a family name or the op kind before its '/' ("binary")."""
    return any(family == f or family.startswith(f + "/") for f in families)


SAMPLE_FAMILIES = {"ctx_slice_transpose": "slice_transpose", "concat_copy": "copy", "batched_concat": "batched_copy", "ctx_concat": "concat", "ctx_slice": "slice"}
"""The family a kind of sample is observed as, where it is not the kind's own name (`fit.observations`)."""
JOINT_SAMPLES = frozenset({"ctx_chain", "module"})
"""The kinds of sample that `fit.fit_jointly` fits several families on at once."""


def feeds(sample: Sample, families: list[str]) -> bool:
    """Whether a refit of families needs sample measured: it is observed as one of them, or fitted jointly."""
    return sample.kind in JOINT_SAMPLES or in_families(SAMPLE_FAMILIES.get(sample.kind, sample.kind), families)


def calibrate(
    target: Configuration | str,
    *,
    workdir: Path = DEFAULT_WORKDIR,
    jobs: int = 2,
    scale: float = 1.0,
    out: Path | None = None,
    progress: bool = True,
    samples: list[Sample] | None = None,
    families: list[str] | None = None,
) -> dict:
    """Measure target's grid (resuming from workdir), fit, and write the calibration file; returns its data.

    target is a configuration (eqsat.configuration), or a target alone for its default configuration: the
    file is vela_cost.calibration_path of it, and records it.

    With families, only those families are refitted into target's existing calibration file, which keeps
    every other family (and those of families the grid has no samples of), prices the other ops of the
    joint fit with its kept models, and lists the refit under "refits"; only the grid's samples that feed
    them are measured (`feeds`: a refit of the transposes of an Ethos-U85 measures 486 of its 1293 samples).
    """
    started = time.perf_counter()
    configuration = Configuration.resolve(target)
    target = configuration.target
    if samples is None:
        samples = grid(target, "fit", scale) + grid(target, "heldout", scale)
        if vela_cost.target_family(target) == Generation.U55:
            samples += grid(target, "probe", scale)
        if families:
            samples = [s for s in samples if feeds(s, families)]
    records = measure(samples, configuration, workdir, jobs=jobs, progress=progress)
    wanted = {s.key for s in samples}
    measured = [r for k, r in records.items() if k in wanted]
    existing = json.loads(vela_cost.calibration_path(configuration).read_text()) if families else None
    kept = {f: m for f, m in existing["models"].items() if not in_families(f, families)} if existing else None
    models = fit(measured, target, kept)
    statuses: dict[str, int] = {}
    for record in measured:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    data = {
        "format_version": FORMAT_VERSION,
        "target": target,
        "vela_version": vela_cost.vela_version(),
        "accelerator_config": target,
        **configuration.as_data(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "grid": {"scale": scale, "samples": len(samples), "statuses": statuses, "digest": hashlib.sha256("\n".join(sorted(wanted)).encode()).hexdigest()[:16]},
        "seconds": round(time.perf_counter() - started, 1),
        "models": models,
        "transpose_feasibility": transpose_feasibility(measured),
        "folds_transpose_into_producer": folds_transpose_into_producer(measured),
        "rejected": sorted(r["key"] for r in measured if r["status"] != "ok"),
    }
    path = Path(out) if out is not None else vela_cost.calibration_path(configuration)
    if families:
        if not any(in_families(f, families) for f in models):
            raise ValueError(f"no fitted family in {', '.join(families)}")
        refit = {"families": sorted(families), "created": data["created"], "grid": data["grid"], "vela_version": data["vela_version"]}
        data = existing
        data["models"] = dict(sorted({**data["models"], **{f: m for f, m in models.items() if in_families(f, families)}}.items()))
        data["refits"] = [*data.get("refits", []), refit]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


if __name__ == "__main__":  # worker process: `block PARAMS CONFIGURATION OUT`
    _command, argument, configuration_data, out_path = sys.argv[1:5]
    Path(out_path).write_text(json.dumps(lower_block(json.loads(argument), vela_cost.recorded_configuration(json.loads(configuration_data)))))

