"""`eqsat calibrate`: fit the cost model to the pinned Vela, one target at a time.

Motivation
----------
The cost model must predict what Vela will charge for a graph, and Vela's
charges differ by target and by context (DESIGN §1). This module measures
them: it builds small TOSA graphs with `tosa_serializer` (single ops, and the
small contexts in which Vela fuses), compiles them with the pinned Vela for
the target through `eqsat.vela.estimate`, attributes each layer's NPU cycles
to the op it came from, and fits the per-family linear models that
`eqsat.extract.vela_cost.VelaCalibratedCost` evaluates.

Overview
--------
1. `grid(target, split)` lists the `Sample`s: a kind and its parameters.
   Single ops: `transpose` (ranks 1-6, int8/int16/int32, random and common
   permutations), `concat` (arity 2-6, every axis), `slice`, `rescale`
   (int8<->int32, int16, per tensor and per channel), `binary` (int32
   ADD/SUB/MUL), `clamp`, `table`, and the opaque compute ops the rules never
   rewrite (`conv2d`, `depthwise_conv2d`, `matmul`, pools, reductions,
   `resize`). Contexts: `ctx_slice` (a slice in front of a conv, an
   add, a clamp, a transpose, a concat), `ctx_concat` (convs feeding a
   concat), `ctx_reshape`, `ctx_transpose_conv`, `ctx_chain` (rescaled
   ADD/SUB/MUL chains), and `module`: bundles of small torch blocks
   (layer norm, softmax, residual conv, MLP, gate) that the real Arm backend
   lowers, for the contexts hand-built graphs do not reproduce.
   "fit" samples are fitted; "heldout" samples (another seed, never a fit
   shape) only score the fit; "probe" samples are large transposes that show
   which ones Vela rejects on Ethos-U55.
2. `measure` compiles them, several samples per TOSA graph (independent
   subgraphs whose tensors carry the prefix `s<i>_`), in `jobs` parallel
   Vela processes (each `module` bundle in its own lowering process), and
   appends one JSON line per sample to `<workdir>/<target>/samples.jsonl`.
   Samples already there are skipped, so an interrupted calibration resumes.
   A graph that Vela rejects, or whose layers cannot be attributed to one
   sample each, is bisected down to single samples.
3. `fit` turns each measured sample into observations (family, features,
   cycles) with `vela_cost.op_config`, the function the cost model uses, and
   fits every family by non-negative least squares, weighting each sample by
   1/cycles so that small and large shapes count alike. RESCALE, CLAMP and
   the int32 ADD/SUB/MUL are fitted jointly on whole `module` graphs
   (`fit_jointly`): there, Vela's fusion decides who pays.
4. `calibrate` writes eqsat/extract/calibration/<target>.json with the Vela
   version, target, system config, memory mode, the coefficients, the fit
   quality (R², mean absolute % error) and the transposes Vela rejected.

Layer attribution: Vela names a layer after the tensor it writes (an op's
output, `<input>_int32` or `<input>/lut` for a pass it inserted in front of
an op, `#<id>` for intermediate passes). A layer goes to the op producing
the named tensor, or to the first consumer of the tensor whose name it
extends, and a `#` layer to the next named layer's op. Batching does not
change a sample's cycles (checked on one sample of every kind, batched
against alone, on both targets, when this module was written).

`write_report` (eqsat calibrate --report) scores the models on held-out
shapes and on the whole zoo models.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import json
import math
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tosa_serializer as ts

from eqsat.bridge_fx import TensorType, Term
from eqsat.extract import vela_cost
from eqsat.extract.vela_cost import FORMAT_VERSION, OpConfig, op_config

DEFAULT_WORKDIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eqsat" / "calibration"
"""Where measured samples are cached (one JSONL file per target), so a calibration resumes."""
DEFAULT_TARGETS = ("ethos-u55-128", "ethos-u85-256")
BATCH_SIZE = 8
TOSA_VERSION = (1, 0)  # what the Arm backend emits for Ethos-U (TOSA-1.0+INT)

_DTYPES = {"int8": ts.DType.INT8, "int16": ts.DType.INT16, "int32": ts.DType.INT32}


@dataclass(frozen=True, eq=False)
class Sample:
    """One micro-benchmark: a kind of graph and its parameters (JSON-able)."""

    kind: str
    params: dict
    split: str = "fit"

    @property
    def key(self) -> str:
        return json.dumps({"kind": self.kind, **self.params}, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- TOSA graphs


class _Graph:
    """A TosaSerializer that names every tensor of sample i `s<i>_...` and records which op writes/reads it."""

    def __init__(self) -> None:
        self.tosa = ts.TosaSerializer(
            "", targetMajor=TOSA_VERSION[0], targetMinor=TOSA_VERSION[1], targetPatch=0, targetDraft=False
        )
        self.prefix = ""
        self.count = 0
        self.producer: dict[str, str] = {}
        self.consumer: dict[str, str] = {}

    def _name(self, stem: str) -> str:
        self.count += 1
        return f"{self.prefix}{stem}{self.count}"

    def input(self, shape, dtype: str) -> str:
        name = self._name("in")
        self.tosa.addInputTensor(ts.TosaSerializerTensor(name, list(shape), _DTYPES[dtype], data=None))
        return name

    def const(self, shape, dtype, values) -> str:
        name = self._name("c")
        self.tosa.addConst(list(shape), _DTYPES[dtype] if isinstance(dtype, str) else dtype, values, name=name)
        return name

    def shape_const(self, values) -> str:
        name = self._name("s")
        self.tosa.addConst([len(values)], ts.DType.SHAPE, list(values), name=name)
        return name

    def op(self, role: str, op, inputs: list[str], shape, dtype: str, attribute=None) -> str:
        name = self._name("t")
        self.tosa.currRegion.currBasicBlock.addTensor(name, list(shape), _DTYPES[dtype])
        self.tosa.addOperator(op, inputs=inputs, outputs=[name], attributes=attribute or ts.TosaSerializerAttribute())
        self.producer[name] = role
        for tensor in inputs:
            self.consumer.setdefault(tensor, role)
        return name

    def output(self, name: str) -> None:
        self.tosa.addOutputTensor(self.tosa.currRegion.currBasicBlock.tensors[name])


def _attr(method: str, *args, **kwargs):
    attribute = ts.TosaSerializerAttribute()
    getattr(attribute, method)(*args, **kwargs)
    return attribute


SCALES = {"unit": (1 << 30, 30), "add": (1 << 30, 11), "mul_out": (2117365449, 37), "add_out": (1 << 30, 49), "requant": (1493072213, 31)}
"""(multiplier, shift) pairs as the Arm backend emits them: unit scale, the 2^19 input scaling of
ADD/SUB, a MUL output scale, an ADD output scale, a generic requantization."""


def _rescale(g: _Graph, role: str, x: str, shape, source: str, dest: str, scale: str, channels: int = 1, zero_points: tuple[int, int] = (0, 0)) -> str:
    multiplier, shift = SCALES[scale]
    inputs = [
        x,
        g.const([channels], "int32", [multiplier] * channels),
        g.const([channels], "int8", [shift] * channels),
        g.const([1], source, [zero_points[0]]),
        g.const([1], dest, [zero_points[1]]),
    ]
    attribute = _attr(
        "RescaleAttribute",
        scale32=True,
        rounding_mode=ts.RoundingMode.SINGLE_ROUND,
        per_channel=channels > 1,
        input_unsigned=False,
        output_unsigned=False,
    )
    return g.op(role, ts.Op.RESCALE, inputs, shape, dest, attribute)


def _clamp(g: _Graph, role: str, x: str, shape, dtype: str) -> str:
    width = {"int8": 1, "int16": 2, "int32": 4}[dtype]
    low, high = (-100).to_bytes(width, "little", signed=True), (100).to_bytes(width, "little", signed=True)
    attribute = _attr("ClampAttribute", list(low), list(high), nan_mode=ts.NanPropagationMode.PROPAGATE)
    return g.op(role, ts.Op.CLAMP, [x], shape, dtype, attribute)


def _binary(g: _Graph, role: str, op: str, x: str, y: str, shape) -> str:
    if op == "MUL":
        return g.op(role, ts.Op.MUL, [x, y, g.const([1], "int8", [0])], shape, "int32", _attr("MulAttribute"))
    return g.op(role, getattr(ts.Op, op), [x, y], shape, "int32", _attr(f"{op.capitalize()}Attribute"))


def _window(size: int, k: int, stride: int, pad_before: int) -> tuple[int, int]:
    """(pad_after, output size) so that TOSA's exact-division check holds: (size + pads - k) % stride == 0."""
    pad_after = pad_before
    remainder = (size + pad_before + pad_after - k) % stride
    pad_after += (stride - remainder) % stride if remainder > pad_after else -remainder
    return pad_after, (size + pad_before + pad_after - k) // stride + 1


def conv_geometry(h: int, w: int, k: int, stride: int, same: bool = True) -> tuple[list[int], int, int]:
    """TOSA pad [top, bottom, left, right] and output (H, W) of a k x k window ('same' padding, or none)."""
    before = k // 2 if same else 0
    bottom, oh = _window(h, k, stride, before)
    right, ow = _window(w, k, stride, before)
    return [before, bottom, before, right], oh, ow


def _conv(g: _Graph, role: str, x: str, params: dict) -> tuple[str, list[int]]:
    h, w, cin, cout, k, stride = (params[n] for n in ("h", "w", "cin", "cout", "k", "stride"))
    pad, oh, ow = conv_geometry(h, w, k, stride)
    inputs = [
        x,
        g.const([cout, k, k, cin], "int8", np.ones((cout, k, k, cin), dtype=np.int8)),
        g.const([cout], "int32", np.zeros(cout, dtype=np.int32)),
        g.const([1], "int8", [0]),
        g.const([1], "int8", [0]),
    ]
    attribute = _attr("Conv2dAttribute", pad=pad, stride=[stride] * 2, dilation=[1, 1], local_bound=False, acc_type=ts.DType.INT32)
    out_shape = [1, oh, ow, cout]
    acc = g.op(role, ts.Op.CONV2D, inputs, out_shape, "int32", attribute)
    return _rescale(g, role, acc, out_shape, "int32", "int8", "mul_out", channels=cout), out_shape


def _build_sample(g: _Graph, sample: Sample) -> None:
    p, kind = sample.params, sample.kind
    if kind == "transpose":
        x = g.input(p["shape"], p["dtype"])
        out_shape = [p["shape"][i] for i in p["perm"]]
        g.output(g.op("op", ts.Op.TRANSPOSE, [x], out_shape, p["dtype"], _attr("TransposeAttribute", list(p["perm"]))))
    elif kind == "concat":
        xs = [g.input(s, p["dtype"]) for s in p["shapes"]]
        out_shape = list(p["shapes"][0])
        out_shape[p["axis"]] = sum(s[p["axis"]] for s in p["shapes"])
        g.output(g.op("op", ts.Op.CONCAT, xs, out_shape, p["dtype"], _attr("ConcatAttribute", p["axis"])))
    elif kind == "slice":
        x = g.input(p["shape"], p["dtype"])
        inputs = [x, g.shape_const(p["start"]), g.shape_const(p["size"])]
        g.output(g.op("op", ts.Op.SLICE, inputs, p["size"], p["dtype"], _attr("SliceAttribute")))
    elif kind == "rescale":
        x = g.input(p["shape"], p["source"])
        channels = p["shape"][-1] if p["per_channel"] else 1
        g.output(_rescale(g, "op", x, p["shape"], p["source"], p["dest"], p["scale"], channels))
    elif kind == "clamp":
        g.output(_clamp(g, "op", g.input(p["shape"], p["dtype"]), p["shape"], p["dtype"]))
    elif kind == "table":
        x = g.input(p["shape"], p["dtype"])
        if p["dtype"] == "int8":
            table, out_dtype = g.const([256], "int8", np.arange(-128, 128, dtype=np.int8)), "int8"
        else:
            table, out_dtype = g.const([513], "int16", np.zeros(513, dtype=np.int16)), "int32"
        g.output(g.op("op", ts.Op.TABLE, [x, table], p["shape"], out_dtype, _attr("TableAttribute")))
    elif kind == "binary":
        x, y = g.input(p["shape"], "int32"), g.input(p["shape"], "int32")
        g.output(_binary(g, "op", p["op"], x, y, p["shape"]))
    elif kind == "ctx_chain":
        # int8 -> [RESCALE x2 -> ADD|SUB|MUL -> RESCALE] x len -> (CLAMP) -> int8, as InsertRescalePass leaves
        # a quantized residual/layer-norm chain: nonzero zero points, second operands possibly broadcast.
        shape = p["shape"]
        x = g.input(shape, "int8")
        for step, (op, other) in enumerate(zip(p["ops"], p["others"])):
            in_scale, out_scale = ("unit", "mul_out") if op == "MUL" else ("add", "add_out")
            y = g.const(other, "int8", np.full(other, 3, dtype=np.int8)) if p.get("const") else g.input(other, "int8")
            a = _rescale(g, f"rescale_in{step}a", x, shape, "int8", "int32", in_scale, zero_points=(p["zp"], 0))
            b = _rescale(g, f"rescale_in{step}b", y, other, "int8", "int32", in_scale, zero_points=(-p["zp"], 0))
            z = _binary(g, f"op{step}", op, a, b, shape)
            x = _rescale(g, f"rescale_out{step}", z, shape, "int32", "int8", out_scale, zero_points=(0, p["zp"]))
        g.output(_clamp(g, "clamp", x, shape, "int8") if p["clamp"] else x)
    elif kind == "ctx_slice":
        x = g.input(p["shape"], "int8")
        s = g.op("slice", ts.Op.SLICE, [x, g.shape_const(p["start"]), g.shape_const(p["size"])], p["size"], "int8", _attr("SliceAttribute"))
        if p["consumer"] == "conv2d":
            _, h, w, c = p["size"]
            out, _ = _conv(g, "consumer", s, {"h": h, "w": w, "cin": c, "cout": 16, "k": 1, "stride": 1})
        elif p["consumer"] == "add":
            r = _rescale(g, "consumer", s, p["size"], "int8", "int32", "add", zero_points=(-5, 0))
            z = _binary(g, "consumer", "ADD", r, r, p["size"])
            out = _rescale(g, "consumer", z, p["size"], "int32", "int8", "add_out")
        elif p["consumer"] == "transpose":
            out = g.op("consumer", ts.Op.TRANSPOSE, [s], [p["size"][i] for i in (0, 3, 1, 2)], "int8", _attr("TransposeAttribute", [0, 3, 1, 2]))
        elif p["consumer"] == "concat":
            other = g.input(p["size"], "int8")
            out_shape = list(p["size"])
            out_shape[3] *= 2
            out = g.op("consumer", ts.Op.CONCAT, [s, other], out_shape, "int8", _attr("ConcatAttribute", 3))
        else:
            out = _clamp(g, "consumer", s, p["size"], "int8")
        g.output(out)
    elif kind == "ctx_concat":  # NPU producers (1x1 convs) feeding a concat: Vela may write in place
        parts = []
        for shape in p["shapes"]:
            x = g.input([1, shape[1], shape[2], 8], "int8")
            y, _ = _conv(g, "producer", x, {"h": shape[1], "w": shape[2], "cin": 8, "cout": shape[3], "k": 1, "stride": 1})
            parts.append(y)
        out_shape = list(p["shapes"][0])
        out_shape[p["axis"]] = sum(shape[p["axis"]] for shape in p["shapes"])
        g.output(g.op("concat", ts.Op.CONCAT, parts, out_shape, "int8", _attr("ConcatAttribute", p["axis"])))
    elif kind == "ctx_reshape":
        x = g.input(p["shape"], "int8")
        pre = _clamp(g, "pre", x, p["shape"], "int8")
        r = g.op("reshape", ts.Op.RESHAPE, [pre, g.shape_const(p["new_shape"])], p["new_shape"], "int8", _attr("ReshapeAttribute"))
        g.output(_clamp(g, "post", r, p["new_shape"], "int8"))
    elif kind == "ctx_transpose_conv":
        h, w, c = p["h"], p["w"], p["c"]
        conv = {"h": h, "w": w, "cin": c, "cout": c, "k": 1, "stride": 1}
        if p["order"] == "before":  # NCHW input transposed to NHWC, then a conv
            x = g.input([1, c, h, w], "int8")
            t = g.op("transpose", ts.Op.TRANSPOSE, [x], [1, h, w, c], "int8", _attr("TransposeAttribute", [0, 2, 3, 1]))
            out, _ = _conv(g, "consumer", t, conv)
        else:  # a conv, then NHWC transposed to NCHW
            x = g.input([1, h, w, c], "int8")
            y, _ = _conv(g, "producer", x, conv)
            out = g.op("transpose", ts.Op.TRANSPOSE, [y], [1, c, h, w], "int8", _attr("TransposeAttribute", [0, 3, 1, 2]))
        g.output(out)
    elif kind == "conv2d":
        x = g.input([1, p["h"], p["w"], p["cin"]], "int8")
        g.output(_conv(g, "op", x, p)[0])
    elif kind == "depthwise_conv2d":
        h, w, c, k, stride = (p[n] for n in ("h", "w", "c", "k", "stride"))
        pad, oh, ow = conv_geometry(h, w, k, stride)
        out_shape = [1, oh, ow, c]
        x = g.input([1, h, w, c], "int8")
        inputs = [
            x,
            g.const([k, k, c, 1], "int8", np.ones((k, k, c, 1), dtype=np.int8)),
            g.const([c], "int32", np.zeros(c, dtype=np.int32)),
            g.const([1], "int8", [0]),
            g.const([1], "int8", [0]),
        ]
        attribute = _attr("DepthwiseConv2dAttribute", pad=pad, stride=[stride] * 2, dilation=[1, 1], local_bound=False, acc_type=ts.DType.INT32)
        acc = g.op("op", ts.Op.DEPTHWISE_CONV2D, inputs, out_shape, "int32", attribute)
        g.output(_rescale(g, "op", acc, out_shape, "int32", "int8", "mul_out", channels=c))
    elif kind == "matmul":
        n, h, c, w = (p[k] for k in ("n", "h", "c", "w"))
        a, b = g.input([n, h, c], "int8"), g.input([n, c, w], "int8")
        inputs = [a, b, g.const([1], "int8", [0]), g.const([1], "int8", [0])]
        acc = g.op("op", ts.Op.MATMUL, inputs, [n, h, w], "int32", _attr("MatMulAttribute"))
        g.output(_rescale(g, "op", acc, [n, h, w], "int32", "int8", "mul_out"))
    elif kind in ("avg_pool2d", "max_pool2d"):
        _, h, w, c = p["shape"]
        k, stride = p["k"], p["stride"]
        pad, oh, ow = conv_geometry(h, w, k, stride, same=False)
        out_shape = [1, oh, ow, c]
        x = g.input(p["shape"], "int8")
        if kind == "avg_pool2d":
            attribute = _attr("AvgPool2dAttribute", kernel=[k, k], stride=[stride] * 2, pad=pad, acc_type=ts.DType.INT32)
            inputs = [x, g.const([1], "int8", [0]), g.const([1], "int8", [0])]
            g.output(g.op("op", ts.Op.AVG_POOL2D, inputs, out_shape, "int8", attribute))
        else:
            attribute = _attr("MaxPool2dAttribute", kernel=[k, k], stride=[stride] * 2, pad=pad, nan_mode=ts.NanPropagationMode.PROPAGATE)
            g.output(g.op("op", ts.Op.MAX_POOL2D, [x], out_shape, "int8", attribute))
    elif kind in ("reduce_sum", "reduce_max"):
        dtype = "int32" if kind == "reduce_sum" else "int8"
        out_shape = list(p["shape"])
        out_shape[p["axis"]] = 1
        x = g.input(p["shape"], dtype)
        if kind == "reduce_sum":
            s = g.op("op", ts.Op.REDUCE_SUM, [x], out_shape, "int32", _attr("ReduceSumAttribute", p["axis"]))
            g.output(_rescale(g, "op", s, out_shape, "int32", "int8", "mul_out"))
        else:
            attribute = _attr("ReduceMaxAttribute", p["axis"], nan_mode=ts.NanPropagationMode.PROPAGATE)
            g.output(g.op("op", ts.Op.REDUCE_MAX, [x], out_shape, "int8", attribute))
    elif kind == "resize":
        _, h, w, c = p["shape"]
        x = g.input(p["shape"], "int8")
        inputs = [x, g.shape_const([4, 2, 4, 2]), g.shape_const([-1, -1]), g.shape_const([1, 1])]  # as the Arm backend emits 2x nearest
        g.output(g.op("op", ts.Op.RESIZE, inputs, [1, 2 * h, 2 * w, c], "int8", _attr("ResizeAttribute", ts.ResizeMode.NEAREST)))
    else:
        raise ValueError(f"unknown calibration sample kind {kind!r}")


@dataclass
class _Layout:
    """What _build_sample wrote for one sample: which op (role) writes and first reads each tensor."""

    producer: dict[str, str] = field(default_factory=dict)
    consumer: dict[str, str] = field(default_factory=dict)


def build_tosa(samples: list[Sample]) -> tuple[bytes, list[_Layout]]:
    """One TOSA flatbuffer holding every sample as an independent subgraph, and each sample's layout."""
    g = _Graph()
    layouts = []
    for i, sample in enumerate(samples):
        g.prefix, g.count, g.producer, g.consumer = f"s{i}_", 0, {}, {}
        _build_sample(g, sample)
        layouts.append(_Layout(dict(g.producer), dict(g.consumer)))
    return g.tosa.serialize(), layouts


# ---------------------------------------------------------------- measuring


def _attribute(layers, layouts: list[_Layout]) -> list[dict[str, int]] | None:
    """Cycles per sample and role, from Vela's per-layer list; None if a layer cannot be attributed."""
    per_sample: list[dict[str, int]] = [{} for _ in layouts]
    pending = 0
    for layer in layers:
        match = re.match(r"s(\d+)_", layer.name)
        if match is None:
            if len(layouts) > 1 and not layer.name.startswith("#"):
                return None  # e.g. a constant Vela rescaled ahead of time: whose is it?
            pending += layer.cycles_npu
            continue
        index = int(match.group(1))
        if index >= len(layouts):
            return None
        role = _role_of(layer.name, layouts[index])
        if role is None:
            if len(layouts) > 1:
                return None
            role = "unattributed"
        per_sample[index][role] = per_sample[index].get(role, 0) + layer.cycles_npu + pending
        pending = 0
    return None if pending else per_sample


def _role_of(name: str, layout: _Layout) -> str | None:
    if name in layout.producer:
        return layout.producer[name]
    stems = [t for t in (*layout.producer, *layout.consumer) if name.startswith(t) and name[len(t)] in "_/"]
    if not stems:
        return None
    stem = max(stems, key=len)
    return layout.consumer.get(stem) or layout.producer.get(stem)


def _record(sample: Sample, target: str, version: str, status: str, roles: dict | None = None, error: str = "") -> dict:
    record = {"key": sample.key, "kind": sample.kind, "params": sample.params, "split": sample.split, "target": target, "vela": version, "status": status}
    if roles is not None:
        record["roles"] = roles
        record["cycles"] = sum(roles.values())
    if error:
        record["error"] = error[-300:]
    return record


def measure_batch(samples: list[Sample], target: str, version: str) -> list[dict]:
    """Compile samples together with Vela for target; fall back to one graph per sample when needed."""
    from eqsat.vela import VelaError, estimate

    if len(samples) > 1:
        graph, layouts = build_tosa(samples)
        try:
            result = estimate(graph, target)
            attributed = _attribute(result.layers, layouts) if result.cpu_ops == 0 else None
        except VelaError:
            attributed = None
        if attributed is not None:
            return [_record(s, target, version, "ok", roles) for s, roles in zip(samples, attributed)]
        if len(samples) > 2:  # bisect: one bad sample should not cost a compile per sample
            half = len(samples) // 2
            return measure_batch(samples[:half], target, version) + measure_batch(samples[half:], target, version)
    records = []
    for sample in samples:
        graph, layouts = build_tosa([sample])
        try:
            result = estimate(graph, target)
        except VelaError as error:
            records.append(_record(sample, target, version, "rejected", error=str(error)))
            continue
        if result.cpu_ops:
            records.append(_record(sample, target, version, "cpu", error=f"{result.cpu_ops} operators on the CPU"))
            continue
        attributed = _attribute(result.layers, layouts)
        roles = attributed[0] if attributed is not None else {"op": result.cycles_npu}
        records.append(_record(sample, target, version, "ok", roles))
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
        if record.get("vela") == version:
            records[record["key"]] = record
    return records


def measure(samples: list[Sample], target: str, workdir: Path, *, jobs: int = 2, batch_size: int = BATCH_SIZE, progress: bool = True) -> dict[str, dict]:
    """Measure every sample not yet in workdir's cache for target; returns all records by key."""
    from tqdm import tqdm

    version = vela_cost.vela_version()
    cache_path = Path(workdir) / target / "samples.jsonl"
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    records = load_cache(cache_path, version)
    todo = [s for s in {s.key: s for s in samples}.values() if s.key not in records]
    # Large transposes are slow to compile and may be rejected: they go one per graph.
    blocks = [s for s in todo if s.kind == "module"]
    single = [s for s in todo if s.split == "probe"]
    batched = [s for s in todo if s.split != "probe" and s.kind != "module"]
    batches = [[s] for s in blocks] + [batched[i : i + batch_size] for i in range(0, len(batched), batch_size)] + [[s] for s in single]
    with (
        tqdm(total=len(todo), desc=f"calibrate {target}", unit="sample", disable=not progress) as bar,
        concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
        cache_path.open("a") as cache,
    ):
        futures = [pool.submit(measure_block if batch[0].kind == "module" else measure_batch, batch, target, version) for batch in batches]
        for future in concurrent.futures.as_completed(futures):
            for record in future.result():
                records[record["key"]] = record
                cache.write(json.dumps(record) + "\n")
            cache.flush()
            bar.update(len(future.result()))
    return records



# ---------------------------------------------------------------- contexts from the Arm backend
# Vela's fusion of RESCALE, CLAMP and elementwise ops depends on zero points, scales and neighbours that
# hand-built graphs do not reproduce faithfully. These small torch blocks (not the zoo models) are lowered
# by the real Arm backend; the graph eqsat sees at its insertion point and Vela's cycles for the TOSA the
# backend emits give whole-graph observations for the joint fit.


def _bundle(params: dict):
    """(module, example inputs) running several independent context blocks: one lowering for all of them."""
    import torch
    from torch import nn

    parts = [_block(block) for block in params["blocks"]]

    class Bundle(nn.Module):
        def __init__(self):
            super().__init__()
            self.parts = nn.ModuleList(module for module, _ in parts)
            self.arity = [len(inputs) for _, inputs in parts]

        def forward(self, *inputs):
            outputs, start = [], 0
            for module, arity in zip(self.parts, self.arity):
                outputs.append(module(*inputs[start : start + arity]))
                start += arity
            return tuple(outputs)

    return Bundle().eval(), tuple(x for _, inputs in parts for x in inputs)


def _block(params: dict):
    """(module, example inputs) of one context block."""
    import torch
    from torch import nn

    torch.manual_seed(params.get("seed", 0))
    n, d = params.get("n", 16), params.get("d", 32)
    block = params["block"]
    if block == "layer_norm":
        return nn.LayerNorm(d).eval(), (torch.randn(1, n, d),)
    if block == "softmax":
        heads = params.get("heads", 1)

        class Softmax(nn.Module):
            def forward(self, x):
                return torch.softmax(x * 0.5, dim=-1)

        return Softmax().eval(), (torch.randn(params.get("batch", 1), heads, n, n),)
    if block == "residual":

        class Residual(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(d, d, 3, padding=1)

            def forward(self, x):
                return torch.relu(self.conv(x) + x)

        return Residual().eval(), (torch.randn(1, d, n, n),)
    if block == "mlp":

        class Mlp(nn.Module):
            def __init__(self):
                super().__init__()
                self.up, self.down, self.norm = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)

            def forward(self, x):
                return self.norm(x + self.down(nn.functional.gelu(self.up(x))))

        return Mlp().eval(), (torch.randn(1, n, d),)
    if block == "gate":

        class Gate(nn.Module):
            def forward(self, x, y):
                return x * torch.sigmoid(y) - 0.5 * x

        return Gate().eval(), (torch.randn(1, n, d), torch.randn(1, n, d))
    raise ValueError(f"unknown context block {block!r}")


def _module_grid(target: str, scale: float) -> list[Sample]:
    """Bundles of context blocks, 4 blocks per bundle (one Arm lowering each)."""
    rng = random.Random(f"module-{target_seed(target)}")
    blocks = []
    for i in range(max(4, round(48 * scale))):
        block = ("layer_norm", "softmax", "layer_norm", "mlp", "gate", "residual", "softmax", "layer_norm")[i % 8]
        params = {"block": block, "n": rng.choice((16, 32, 64, 128)), "d": rng.choice((16, 32, 64)), "seed": i}
        if block == "softmax":
            params.update(heads=rng.choice((1, 2, 4)), n=rng.choice((16, 32, 64)))
            if i >= 24:  # a batch of attention maps (Vela splits per leading index)
                params["batch"] = 2
        if block == "residual":
            params.update(n=rng.choice((8, 16)), d=rng.choice((16, 32)))
        blocks.append(params)
    return [Sample("module", {"blocks": blocks[i : i + 4]}, "fit") for i in range(0, len(blocks), 4)]


def _serialize_node(term: Term, out: TensorType | None, args: list[TensorType | None]) -> list:
    tt = lambda t: None if t is None else [list(t.shape), t.dtype]  # noqa: E731
    return [term.op, len(term.args), json.loads(json.dumps(term.attrs)), tt(out), [tt(a) for a in args]]


def _deserialize_node(node: list) -> tuple[Term, TensorType | None, list[TensorType | None]]:
    op, arity, attrs, out, args = node
    tt = lambda t: None if t is None else TensorType(tuple(t[0]), t[1])  # noqa: E731
    if op in ("Transpose", "Reshape"):
        attrs = (tuple(attrs[0]),)
    elif op == "Slice":
        attrs = (tuple(attrs[0]), tuple(attrs[1]))
    elif op == "Rescale":
        attrs = tuple(tuple(a) if isinstance(a, list) else a for a in attrs)
    else:
        attrs = tuple(attrs)
    return Term(op, tuple(range(arity)), attrs), tt(out), [tt(a) for a in args]


def lower_block(params: dict, target: str) -> dict:
    """Lower one bundle of context blocks with eqsat installed (no rules); the nodes eqsat saw and Vela's cycles_npu."""
    import tempfile

    import eqsat
    from eqsat import bridge_fx, lowering, pipeline, vela

    nodes: list = []
    original = pipeline.original_cost

    def recording(loaded, model):
        for node in loaded.nodes:
            if node.users or node.op == "placeholder":
                term = loaded.terms[loaded.index_of[node]]
                args = [bridge_fx.tensor_type(loaded.nodes[a]) for a in term.args]
                nodes.append(_serialize_node(term, bridge_fx.tensor_type(node), args))
        return original(loaded, model)

    module, inputs = _bundle(params)
    program = lowering.quantize(module, inputs, target)
    pipeline.original_cost = recording
    eqsat.install(target=target, rules=())
    try:
        with tempfile.TemporaryDirectory(prefix="eqsat-calibrate-") as directory:
            lowered = lowering.lower(program, target, workdir=directory)
    finally:
        eqsat.uninstall()
        pipeline.original_cost = original
    cycles = sum(vela.estimate(graph, target).cycles_npu for graph in lowered.tosa_flatbuffers)
    return {"nodes": nodes, "cycles": cycles, "cpu_ops": lowered.cpu_ops}


def measure_block(samples: list[Sample], target: str, version: str) -> list[dict]:
    """Lower one context block in a fresh process (the Arm backend keeps global state)."""
    import subprocess
    import tempfile

    (sample,) = samples
    with tempfile.TemporaryDirectory(prefix="eqsat-calibrate-") as directory:
        out = Path(directory) / "block.json"
        worker = subprocess.run(
            [sys.executable, "-m", "eqsat.extract.calibrate", "block", json.dumps(sample.params), target, str(out)],
            capture_output=True,
            text=True,
        )
        if worker.returncode != 0 or not out.exists():
            return [_record(sample, target, version, "rejected", error=worker.stderr.strip()[-300:])]
        result = json.loads(out.read_text())
    if result["cpu_ops"]:
        return [_record(sample, target, version, "cpu", error=f"on the CPU: {result['cpu_ops']}")]
    record = _record(sample, target, version, "ok", {"graph": result["cycles"]})
    record["nodes"] = result["nodes"]
    return [record]

# ---------------------------------------------------------------- grids


def _shape(rng: random.Random, rank: int, low: int = 16, high: int = 32768, dims=(1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 48, 64)) -> list[int]:
    while True:
        shape = [rng.choice(dims) for _ in range(rank)]
        if low <= math.prod(shape) <= high:
            return shape


def _perm(rng: random.Random, rank: int) -> list[int]:
    while True:
        perm = list(range(rank))
        rng.shuffle(perm)
        if perm != sorted(perm) or rank == 1:
            return perm


def _dtype(rng: random.Random, allowed=("int8", "int8", "int8", "int16", "int32")) -> str:
    return rng.choice(allowed)


def _nhwc(rng: random.Random, high: int = 32768) -> list[int]:
    while True:
        shape = [1, rng.choice((1, 2, 4, 7, 8, 12, 16, 24, 32)), rng.choice((1, 2, 4, 7, 8, 12, 16, 24, 32)), rng.choice((3, 8, 16, 24, 32, 48, 64, 96))]
        if 16 <= math.prod(shape) <= high:
            return shape


def _grid(target: str, split: str, scale: float) -> list[Sample]:
    rng = random.Random(f"{split}-{target_seed(target)}")
    n = lambda count: max(1, round(count * scale))  # noqa: E731
    samples: list[Sample] = []
    add = lambda kind, **params: samples.append(Sample(kind, params, split))  # noqa: E731

    common_4d = ([0, 3, 1, 2], [0, 2, 3, 1], [0, 2, 1, 3], [0, 1, 3, 2], [0, 3, 2, 1], [3, 1, 2, 0])
    for i in range(n(240)):
        rank = rng.choice((1, 2, 3, 3, 4, 4, 4, 5, 6))
        shape = _shape(rng, rank)
        perm = list(rng.choice(common_4d)) if rank == 4 and i % 3 == 0 else _perm(rng, rank)
        add("transpose", shape=shape, perm=perm, dtype=_dtype(rng))
    for _ in range(n(60)):
        rank, arity = rng.choice((1, 2, 3, 4, 4, 5, 6)), rng.choice((2, 2, 3, 4, 5, 6))
        axis = rng.randrange(rank)
        base = _shape(rng, rank, high=8192)
        shapes = [base[:axis] + [rng.choice((1, 2, 3, 8, 16, 24))] + base[axis + 1 :] for _ in range(arity)]
        add("concat", shapes=shapes, axis=axis, dtype=_dtype(rng))
    for _ in range(n(40)):
        rank = rng.choice((1, 2, 3, 4, 4, 5, 6))
        shape = _shape(rng, rank, low=32)
        size = [rng.randint(1, d) for d in shape]
        start = [rng.randint(0, d - s) for d, s in zip(shape, size)]
        add("slice", shape=shape, start=start, size=size, dtype=_dtype(rng))
    for _ in range(n(30)):
        source, dest = rng.choice((("int8", "int32"), ("int32", "int8"), ("int8", "int8"), ("int32", "int8"), ("int16", "int32"), ("int32", "int16")))
        per_channel = source == "int32" and rng.random() < 0.5
        scaling = "unit" if source != "int32" and rng.random() < 0.5 else ("add" if source != "int32" else "mul_out")
        add("rescale", shape=_nhwc(rng), source=source, dest=dest, per_channel=per_channel, scale=scaling)
    for _ in range(n(16)):
        add("clamp", shape=_shape(rng, rng.choice((2, 3, 4))), dtype=rng.choice(("int8", "int16")))
    for _ in range(n(16)):
        add("table", shape=_shape(rng, rng.choice((2, 3, 4))), dtype=rng.choice(("int8", "int8", "int16")))
    for _ in range(n(9)):
        add("binary", op=rng.choice(("ADD", "SUB", "MUL")), shape=_shape(rng, rng.choice((2, 3, 4))))
    for i in range(n(72)):
        rank = rng.choice((2, 3, 3, 4, 4, 4))
        shape = _shape(rng, rank, low=64)
        if rank == 4 and i % 4 == 0:  # a batch of heads, as in attention
            shape[0] = rng.choice((2, 4))
        ops = [rng.choice(("ADD", "SUB", "MUL", "MUL")) for _ in range(rng.choice((1, 2, 3)))]
        others = [[d if rng.random() < 0.7 else 1 for d in shape] if rng.random() < 0.4 else list(shape) for _ in ops]
        add("ctx_chain", shape=shape, ops=ops, others=others, zp=rng.choice((0, -26, -128, 3)), clamp=rng.random() < 0.3)
    for i in range(n(20)):
        shape = _nhwc(rng)
        axis = rng.choice((1, 2, 3, 3))
        size = list(shape)
        size[axis] = max(1, shape[axis] // 2)
        start = [0, 0, 0, 0]
        start[axis] = rng.choice((0, shape[axis] - size[axis]))
        add("ctx_slice", shape=shape, start=start, size=size, consumer=("conv2d", "add", "clamp", "transpose", "concat")[i % 5])
    for _ in range(n(6)):
        shape = _nhwc(rng)
        add("ctx_reshape", shape=shape, new_shape=[1, shape[1] * shape[2], shape[3]])
    for i in range(n(8)):
        add("ctx_transpose_conv", h=rng.choice((4, 8, 16)), w=rng.choice((4, 8, 16)), c=rng.choice((8, 16, 32)), order=("before", "after")[i % 2])
    for _ in range(n(40)):
        k = rng.choice((1, 1, 3, 3, 5))
        add("conv2d", h=rng.choice((4, 8, 16, 32)), w=rng.choice((4, 8, 16, 32)), cin=rng.choice((3, 8, 16, 32, 64)), cout=rng.choice((8, 16, 32, 64)), k=k, stride=rng.choice((1, 1, 2)))
    for _ in range(n(12)):  # fully connected layers: a 1x1 conv over few positions, weight-bound
        add("conv2d", h=1, w=rng.choice((1, 1, 2, 4)), cin=rng.choice((8, 64, 128, 160, 256)), cout=rng.choice((8, 64, 128, 160, 256)), k=1, stride=1)
    for i in range(n(24)):
        axis, arity = rng.choice((1, 2, 3, 3)), rng.choice((2, 2, 3, 4))
        base = _nhwc(rng, high=16384)
        parts = [[base[j] if j != axis else rng.choice((1, 4, 8, 16, 32)) for j in range(4)] for _ in range(arity)]
        add("ctx_concat", shapes=parts, axis=axis)
    for _ in range(n(20)):
        add("depthwise_conv2d", h=rng.choice((4, 8, 16, 32)), w=rng.choice((4, 8, 16, 32)), c=rng.choice((8, 16, 32, 64)), k=rng.choice((3, 3, 5)), stride=rng.choice((1, 2)))
    for _ in range(n(16)):
        add("matmul", n=rng.choice((1, 2, 4)), h=rng.choice((8, 16, 32, 64)), c=rng.choice((8, 16, 32, 64)), w=rng.choice((8, 16, 32, 64)))
    for kind in ("avg_pool2d", "max_pool2d"):
        for _ in range(n(8)):
            k, shape = rng.choice((2, 3)), [1, 1, 1, 1]
            while min(shape[1:3]) < k:  # Vela 5.1 crashes on a window larger than its input
                shape = _nhwc(rng, high=65536)
            add(kind, shape=shape, k=k, stride=rng.choice((1, 2)))
    for kind in ("reduce_sum", "reduce_max"):
        for i in range(n(16)):
            shape = _nhwc(rng, high=65536)
            if i % 3 == 0:  # softmax over the last axis of a batch of attention heads
                shape = [rng.choice((2, 4)), rng.choice((1, 4)), rng.choice((16, 32, 64)), rng.choice((16, 32, 64))]
            add(kind, shape=shape, axis=rng.choice((1, 2, 3, 3)))
    for _ in range(n(6)):
        add("resize", shape=_nhwc(rng, high=8192))
    return samples


def _probe_grid(target: str, scale: float) -> list[Sample]:
    """Large transposes near Ethos-U55's limits: which ones does Vela reject?"""
    rng = random.Random(f"probe-{target_seed(target)}")
    samples = []
    for _ in range(max(1, round(24 * scale))):
        rank = rng.choice((3, 4, 4, 5))
        shape = _shape(rng, rank, low=70000, high=1_500_000, dims=(1, 2, 3, 8, 64, 200, 300, 600, 1000))
        samples.append(Sample("transpose", {"shape": shape, "perm": _perm(rng, rank), "dtype": rng.choice(("int8", "int32"))}, "probe"))
    return samples


def target_seed(target: str) -> str:
    """Grids depend on the target generation only, so all U55 (all U85) configurations measure the same shapes."""
    return vela_cost.target_family(target)


def grid(target: str, split: str = "fit", scale: float = 1.0) -> list[Sample]:
    """The samples of one split ("fit", "heldout" or "probe"); held-out shapes never repeat fit shapes."""
    if split == "probe":
        return _probe_grid(target, scale)
    if split == "fit":
        return _grid(target, "fit", scale) + _module_grid(target, scale)
    fit_keys = {s.key for s in _grid(target, "fit", scale)}
    return [s for s in _grid(target, "heldout", 0.25 * scale) if s.key not in fit_keys]


# ---------------------------------------------------------------- observations and fitting

_PASS_KINDS = ("021", "102", "210", "120", "201")
FORMS = {
    # Ethos-U55: every pass is a 1x1 pooling; its cost depends on which axes it swaps.
    "u55:transpose": ("one", "passes", *(f"moved_{k}" for k in _PASS_KINDS), *(f"rows_{k}" for k in _PASS_KINDS)),
    # Ethos-U85: native passes whose cost follows brick-aligned reads and writes.
    "u85:transpose": ("one", "passes", "moved", "padded_in", "padded_out", "rows_in", "rows_out"),
    "concat": ("inputs", "elements", "rows"),
    "conv2d": ("one", "macs", "elements", "in_elements", "weights"),
    "depthwise_conv2d": ("one", "macs", "elements", "in_elements", "weights"),
    "matmul": ("one", "macs", "elements", "in_elements"),
    "avg_pool2d": ("one", "elements", "in_elements"),
    "max_pool2d": ("one", "elements", "in_elements"),
    "reduce_sum": ("one", "elements", "in_elements", "in_elements_last", "in_batched_elements"),
    "reduce_max": ("one", "elements", "in_elements", "in_elements_last", "in_batched_elements"),
    "resize": ("one", "elements", "in_elements"),
}
DEFAULT_FORM = ("one", "elements", "rows")


def form_of(family: str, target: str) -> tuple[str, ...]:
    """The features a family's model is fitted on (per target generation where they differ)."""
    kind = family.split("/", 1)[0]
    return FORMS.get(f"{vela_cost.target_family(target)}:{kind}", FORMS.get(kind, DEFAULT_FORM))


def _tt(shape, dtype: str) -> TensorType:
    return TensorType(tuple(shape), f"torch.{dtype}")


def _term(op: str, arity: int, attrs: tuple = ()) -> Term:
    return Term(op, tuple(range(arity)), attrs)


def sample_config(sample: Sample, target: str) -> OpConfig:
    """The op configuration a sample measures, through the cost model's own `op_config`."""
    p, kind = sample.params, sample.kind

    def opaque(name: str, out: TensorType, args: list[TensorType]) -> OpConfig:
        return op_config(_term("Opaque", len(args), (f"tosa.{name}.default#0",)), out, args, target)

    def elementwise(name: str, out: TensorType, args: list[TensorType]) -> OpConfig:
        return op_config(_term("Elementwise", len(args), (f"tosa.{name}.default#0",)), out, args, target)

    if kind == "transpose":
        out = _tt([p["shape"][i] for i in p["perm"]], p["dtype"])
        return op_config(_term("Transpose", 1, (tuple(p["perm"]),)), out, [_tt(p["shape"], p["dtype"])], target)
    if kind == "concat":
        out = list(p["shapes"][0])
        out[p["axis"]] = sum(s[p["axis"]] for s in p["shapes"])
        args = [_tt(s, p["dtype"]) for s in p["shapes"]]
        return op_config(_term("Concat", len(args), (p["axis"],)), _tt(out, p["dtype"]), args, target)
    if kind == "slice":
        return op_config(_term("Slice", 1, (tuple(p["start"]), tuple(p["size"]))), _tt(p["size"], p["dtype"]), [_tt(p["shape"], p["dtype"])], target)
    if kind in ("clamp",):
        return elementwise("CLAMP", _tt(p["shape"], p["dtype"]), [_tt(p["shape"], p["dtype"])])
    if kind == "table":
        return opaque("TABLE", _tt(p["shape"], "int8" if p["dtype"] == "int8" else "int32"), [_tt(p["shape"], p["dtype"]), _tt([256], p["dtype"])])
    if kind == "binary":
        return elementwise(p["op"], _tt(p["shape"], "int32"), [_tt(p["shape"], "int32")] * 2)
    if kind == "conv2d":
        k = p["k"]
        _, oh, ow = conv_geometry(p["h"], p["w"], k, p["stride"])
        args = [_tt([1, p["h"], p["w"], p["cin"]], "int8"), _tt([p["cout"], k, k, p["cin"]], "int8"), _tt([p["cout"]], "int32")]
        return opaque("CONV2D", _tt([1, oh, ow, p["cout"]], "int32"), args)
    if kind == "depthwise_conv2d":
        k = p["k"]
        _, oh, ow = conv_geometry(p["h"], p["w"], k, p["stride"])
        args = [_tt([1, p["h"], p["w"], p["c"]], "int8"), _tt([k, k, p["c"], 1], "int8"), _tt([p["c"]], "int32")]
        return opaque("DEPTHWISE_CONV2D", _tt([1, oh, ow, p["c"]], "int32"), args)
    if kind == "matmul":
        args = [_tt([p["n"], p["h"], p["c"]], "int8"), _tt([p["n"], p["c"], p["w"]], "int8")]
        return opaque("MATMUL", _tt([p["n"], p["h"], p["w"]], "int32"), args)
    if kind in ("avg_pool2d", "max_pool2d"):
        _, h, w, c = p["shape"]
        _, oh, ow = conv_geometry(h, w, p["k"], p["stride"], same=False)
        return opaque(kind.upper(), _tt([1, oh, ow, c], "int8"), [_tt(p["shape"], "int8")])
    if kind in ("reduce_sum", "reduce_max"):
        dtype = "int32" if kind == "reduce_sum" else "int8"
        out = list(p["shape"])
        out[p["axis"]] = 1
        return opaque(kind.upper(), _tt(out, dtype), [_tt(p["shape"], dtype)])
    if kind == "resize":
        _, h, w, c = p["shape"]
        return opaque("RESIZE", _tt([1, 2 * h, 2 * w, c], "int8"), [_tt(p["shape"], "int8")])
    raise ValueError(f"no configuration for sample kind {kind!r}")


@dataclass(frozen=True)
class Observation:
    family: str
    features: dict
    cycles: float
    key: str


def observations(record: dict, target: str) -> list[Observation]:
    """What one measured sample says about the model families (documentation-only families start with 'isolated/' or 'context/')."""
    if record["status"] != "ok":
        return []
    sample = Sample(record["kind"], record["params"], record["split"])
    p, roles, total, key = sample.params, record["roles"], float(record["cycles"]), sample.key
    kind = sample.kind
    if kind == "rescale":
        shape = _tt(p["shape"], p["dest"])
        basic = {"one": 1.0, "elements": float(math.prod(p["shape"])), "rows": vela_cost.rows(shape)}
        family = f"rescale/{p['source']}->{p['dest']}"
        if (p["source"], p["dest"]) in (("int8", "int32"), ("int16", "int32")) or p["source"] == "int32" and p["dest"] in ("int8", "int16"):
            family = "isolated/" + family + ("/per-channel" if p["per_channel"] else "")
        return [Observation(family, basic, total, key)]
    if kind == "binary":
        config = sample_config(sample, target)
        return [Observation("isolated/" + config.family, config.features, total, key)]
    if kind == "ctx_concat":
        config = sample_config(Sample("concat", {"shapes": p["shapes"], "axis": p["axis"], "dtype": "int8"}), target)
        return [Observation(config.family, config.features, float(roles.get("concat", 0)), key)]
    if kind in ("slice", "clamp", "concat"):  # priced in context (folded, fused, written in place); alone they only document
        config = sample_config(sample, target)
        return [Observation("isolated/" + config.family, config.features, total, key)]
    if kind == "ctx_slice":
        config = sample_config(Sample("slice", {"shape": p["shape"], "start": p["start"], "size": p["size"], "dtype": "int8"}), target)
        return [
            Observation(config.family, config.features, float(roles.get("slice", 0)), key),
            Observation(f"context/slice-{p['consumer']}", {"one": 1.0}, float(roles.get("slice", 0)), key),
        ]
    if kind in ("ctx_chain", "module"):
        return []  # fitted jointly, see fit_jointly
    if kind in ("ctx_reshape", "ctx_transpose_conv"):
        role = {"ctx_slice": "slice", "ctx_reshape": "reshape", "ctx_transpose_conv": "transpose"}[kind]
        detail = p.get("consumer") or p.get("order") or ""
        return [Observation(f"context/{role}-{detail}".rstrip("-"), {"one": 1.0}, float(roles.get(role, 0)), key)]
    config = sample_config(sample, target)
    if config.fixed is not None:
        return []
    return [Observation(config.family, config.features, total, key)]


def _matrix(observations_: list[Observation], form: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[o.features.get(f, 0.0) for f in form] for o in observations_], dtype=float)
    y = np.array([o.cycles for o in observations_], dtype=float)
    return x, y


UNWEIGHTED = ("slice/", "concat/")
"""Families that average over contexts (fused in some, not in others): fitted unweighted, so they predict the mean."""


def fit_family(observations_: list[Observation], form: tuple[str, ...], weighted: bool = True) -> dict:
    """Non-negative least squares of cycles on the form's features, each sample weighted by 1/cycles (unless not weighted)."""
    from scipy.optimize import nnls

    x, y = _matrix(observations_, form)
    weight = 1.0 / np.maximum(y, max(1.0, 0.05 * float(np.median(y)) if len(y) else 1.0)) if weighted else np.ones(len(y))
    if float(y.max(initial=0.0)) == 0.0:
        coef = np.zeros(len(form))
    else:
        coef, _ = nnls(x * weight[:, None], y * weight)
    return {"features": list(form), "coef": [float(c) for c in coef], **quality(x @ coef, y)}


def quality(predicted: np.ndarray, measured: np.ndarray) -> dict:
    """n, R² and mean absolute % error (over samples with nonzero measured cycles)."""
    residual = float(((measured - predicted) ** 2).sum())
    spread = float(((measured - measured.mean()) ** 2).sum()) if len(measured) else 0.0
    nonzero = measured > 0
    mape = float(np.mean(np.abs(predicted[nonzero] - measured[nonzero]) / measured[nonzero]) * 100) if nonzero.any() else 0.0
    return {"n": int(len(measured)), "r2": 1.0 - residual / spread if spread > 0 else (1.0 if residual == 0 else 0.0), "mape": mape}


JOINT_FORMS = {
    "rescale_in/int8": ("elements", "batched_elements"),
    "rescale_out/int8": ("elements", "batched_elements"),
    "binary/ADD": ("elements", "broadcast_elements"),
    "binary/SUB": ("elements", "broadcast_elements"),
    "binary/MUL": ("elements", "rows", "broadcast_elements"),
    "clamp/int8": ("elements",),
}
"""Families priced from whole graphs the Arm backend emitted (`module` bundles): Vela fuses each rescale
or clamp into one neighbour or the other, or into none, depending on zero points, scales and neighbours.
Hand-built `ctx_chain` graphs fuse far more than real ones; they are measured and scored, not fitted."""


def chain_configs(sample: Sample, target: str) -> list[OpConfig]:
    """The op configurations of a ctx_chain sample, through `op_config`."""
    p = sample.params
    shape = p["shape"]

    def elementwise(name: str, out: TensorType, args: list[TensorType]) -> OpConfig:
        return op_config(_term("Elementwise", len(args), (f"tosa.{name}.default#0",)), out, args, target)

    configs = []
    for op, other in zip(p["ops"], p["others"]):
        configs.append(elementwise("RESCALE", _tt(shape, "int32"), [_tt(shape, "int8")]))
        configs.append(elementwise("RESCALE", _tt(other, "int32"), [_tt(other, "int8")]))
        configs.append(elementwise(op, _tt(shape, "int32"), [_tt(shape, "int32"), _tt(other, "int32")]))
        configs.append(elementwise("RESCALE", _tt(shape, "int8"), [_tt(shape, "int32")]))
    if p["clamp"]:
        configs.append(elementwise("CLAMP", _tt(shape, "int8"), [_tt(shape, "int8")]))
    return configs


def _joint_row(configs: list[OpConfig], columns: list[tuple[str, str]]) -> np.ndarray:
    row = np.zeros(len(columns))
    index = {c: i for i, c in enumerate(columns)}
    for config in configs:
        for feature in JOINT_FORMS.get(config.family, ()):
            row[index[(config.family, feature)]] += config.features.get(feature, 0.0)
    return row


def graph_configs(record: dict, target: str) -> list[OpConfig]:
    """Every op configuration of a whole-graph sample (ctx_chain or module)."""
    if record["kind"] == "ctx_chain":
        return chain_configs(Sample(record["kind"], record["params"]), target)
    return [op_config(*_deserialize_node(node), target) for node in record["nodes"]]


def _predict(models: dict[str, dict], config: OpConfig) -> float:
    if config.fixed is not None:
        return 0.0 if math.isinf(config.fixed) else config.fixed
    model = models.get(config.family) or models.get(config.family.split("/", 1)[0] + "/int8")
    if model is None:
        return 0.0
    return sum(c * config.features.get(f, 0.0) for f, c in zip(model["features"], model["coef"]))


JOINT_SHRINK = 0.05


def fit_jointly(records: list[dict], target: str, known: dict[str, dict]) -> dict[str, dict]:
    """Fit JOINT_FORMS' families together: a graph's cycles = the sum of its ops' costs (NNLS, weights 1/cycles).

    Ops of other families are priced with the `known` single-op models and subtracted first.
    """
    from scipy.optimize import nnls

    graphs = [r for r in records if r["kind"] == "module" and r["status"] == "ok" and r["split"] == "fit"]
    if not graphs:
        return {}
    columns = [(family, feature) for family, form in JOINT_FORMS.items() for feature in form]
    configs = [graph_configs(r, target) for r in graphs]
    x = np.array([_joint_row(c, columns) for c in configs])
    offset = np.array([sum(_predict(known, k) for k in c if k.family not in JOINT_FORMS) for c in configs])
    y = np.array([float(r["cycles"]) for r in graphs])
    weight = 1.0 / np.maximum(y, 1.0)
    a, b = x * weight[:, None], np.maximum(y - offset, 0.0) * weight
    # Whole-graph totals do not say which of two ops that always occur together is the expensive one;
    # a weak pull of the per-element coefficients towards each other (JOINT_SHRINK: the weighted error
    # that a difference of one cycle per element costs) keeps NNLS from loading all cost on one family.
    per_element = [i for i, (_, feature) in enumerate(columns) if feature == "elements"]
    pulls = []
    for i, j in itertools.combinations(per_element, 2):
        row = np.zeros(len(columns))
        row[i], row[j] = JOINT_SHRINK, -JOINT_SHRINK
        pulls.append(row)
    if pulls:
        a, b = np.vstack([a, np.array(pulls)]), np.concatenate([b, np.zeros(len(pulls))])
    coef, _ = nnls(a, b)
    fit_quality = quality(x @ coef + offset, y)
    models = {}
    for family, form in JOINT_FORMS.items():
        used = [i for i, (f, _) in enumerate(columns) if f == family]
        present = int((x[:, used].sum(axis=1) > 0).sum())
        source = f"joint over {len(graphs)} graphs lowered by the Arm backend"
        models[family] = {"features": list(form), "coef": [float(coef[i]) for i in used], **fit_quality, "n": present, "fit": source}
    return models


def fit(records: list[dict], target: str) -> dict[str, dict]:
    """Fitted models by family, from the fit-split records."""
    by_family: dict[str, list[Observation]] = {}
    for record in records:
        if record["split"] != "fit":
            continue
        for o in observations(record, target):
            by_family.setdefault(o.family, []).append(o)
    models = {}
    for family, obs in sorted(by_family.items()):
        if family.startswith("context/"):
            y = np.array([o.cycles for o in obs])
            models[family] = {"features": ["one"], "coef": [float(y.mean())], "n": len(obs), "r2": None, "mape": None, "max": float(y.max())}
            continue
        models[family] = fit_family(obs, form_of(family, target), weighted=not family.startswith(UNWEIGHTED))
    models.update(fit_jointly(records, target, models))
    return models


def transpose_feasibility(records: list[dict]) -> dict[str, bool]:
    """Transposes Vela was asked to run outside the always-supported region, and whether it did."""
    found = {}
    for record in records:
        if record["kind"] != "transpose" or not vela_cost.violates_u55_worst_case(tuple(record["params"]["shape"])):
            continue
        p = record["params"]
        found[json.dumps([p["shape"], p["perm"], p["dtype"]])] = record["status"] == "ok"
    return dict(sorted(found.items()))


def _system_config(target: str) -> dict[str, str]:
    from eqsat.lowering import vela_flags

    flags = dict(f.lstrip("-").split("=", 1) for f in vela_flags(target) if "=" in f)
    return {"accelerator_config": flags.get("accelerator-config", target), "system_config": flags.get("system-config", ""), "memory_mode": flags.get("memory-mode", ""), "config": flags.get("config", "")}


def calibrate(target: str, *, workdir: Path = DEFAULT_WORKDIR, jobs: int = 2, scale: float = 1.0, out: Path | None = None, progress: bool = True, samples: list[Sample] | None = None) -> dict:
    """Measure target's grid (resuming from workdir), fit, and write the calibration file; returns its data."""
    started = time.perf_counter()
    if samples is None:
        samples = grid(target, "fit", scale) + grid(target, "heldout", scale)
        if vela_cost.target_family(target) == "u55":
            samples += grid(target, "probe", scale)
    records = measure(samples, target, workdir, jobs=jobs, progress=progress)
    wanted = {s.key for s in samples}
    measured = [r for k, r in records.items() if k in wanted]
    models = {f: m for f, m in fit(measured, target).items()}
    statuses: dict[str, int] = {}
    for record in measured:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    data = {
        "format_version": FORMAT_VERSION,
        "target": target,
        "vela_version": vela_cost.vela_version(),
        **_system_config(target),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "grid": {"scale": scale, "samples": len(samples), "statuses": statuses, "digest": hashlib.sha256("\n".join(sorted(wanted)).encode()).hexdigest()[:16]},
        "seconds": round(time.perf_counter() - started, 1),
        "models": models,
        "transpose_feasibility": transpose_feasibility(measured),
        "rejected": sorted(r["key"] for r in measured if r["status"] != "ok"),
    }
    path = Path(out) if out is not None else vela_cost.calibration_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


# ---------------------------------------------------------------- scoring


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def heldout_scores(target: str, workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2, scale: float = 1.0, progress: bool = False) -> dict[str, dict]:
    """Per family, on held-out shapes (measured now if not cached): n, Spearman rank correlation and mean abs % error.

    Whole chains (`ctx_chain`) are scored on their total cycles, as `chain`.
    """
    model = vela_cost.VelaCalibratedCost(target, probe_vela=False)
    samples = grid(target, "heldout", scale)
    records = measure(samples, target, workdir, jobs=jobs, progress=progress)
    pairs: dict[str, list[tuple[float, float]]] = {}
    for sample in samples:
        record = records.get(sample.key)
        if record is None or record["status"] != "ok":
            continue
        if sample.kind == "ctx_chain":
            predicted = sum(model.cost_of(c) for c in chain_configs(sample, target))
            pairs.setdefault("chain (rescale, binary, clamp)", []).append((predicted, float(record["cycles"])))
            continue
        for o in observations(record, target):
            if o.family.startswith(("isolated/", "context/")) or o.family not in model.data["models"]:
                continue
            pairs.setdefault(o.family, []).append((model.cost_of(OpConfig(o.family, o.features)), o.cycles))
    scores = {}
    for family, values in sorted(pairs.items()):
        predicted, measured = np.array([v[0] for v in values]), np.array([v[1] for v in values])
        scores[family] = {"n": len(values), "spearman": spearman(predicted, measured), "mape": quality(predicted, measured)["mape"]}
    return scores


# ---------------------------------------------------------------- the report


REPORT_PATH = Path("benchmarks/results/calibration_report.md")


def zoo_row(model_name: str, target: str) -> dict:
    """One zoo model on one target: the cost model's estimate at eqsat's insertion point against Vela.

    Lowers the model with eqsat installed without rules (so the graph is the stock one) and sums the
    reports' `cost_before` over delegates; Vela's cycles_npu is for the TOSA of that same lowering.
    """
    import tempfile

    import eqsat
    from benchmarks.zoo import ZOO
    from eqsat import lowering, vela

    module, inputs = ZOO[model_name].build()
    program = lowering.quantize(module, inputs, target)
    eqsat.install(target=target, rules=())
    try:
        with tempfile.TemporaryDirectory(prefix="eqsat-calibrate-") as directory:
            lowered = lowering.lower(program, target, workdir=directory)
        reports = [r.as_dict() for r in eqsat.last_reports()]
    finally:
        eqsat.uninstall()
    estimates = [vela.estimate(graph, target) for graph in lowered.tosa_flatbuffers]
    return {
        "model": model_name,
        "target": target,
        "predicted": sum(r["cost_before"] for r in reports if r["cost_before"] is not None),
        "vela_cycles_npu": sum(e.cycles_npu for e in estimates),
        "delegates": lowered.delegates,
        "runs": len(reports),
        "cost_unit": reports[0]["cost_unit"] if reports else "",
        "calibration": calibration_digest(target),
    }


def calibration_digest(target: str) -> str:
    path = vela_cost.calibration_path(target)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else ""


def zoo_rows(targets: list[str], workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2, models: list[str] | None = None, progress: bool = True) -> list[dict]:
    """zoo_row for every model and target, each in its own process, cached per calibration file under workdir."""
    import subprocess

    from tqdm import tqdm

    from benchmarks.zoo import ZOO

    out = Path(workdir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    jobs_list = [(m, t) for t in targets for m in (models or list(ZOO))]

    def row_path(model_name: str, target: str) -> Path:
        return out / f"{model_name}__{target}.json"

    def fresh(model_name: str, target: str) -> bool:
        path = row_path(model_name, target)
        return path.exists() and json.loads(path.read_text()).get("calibration") == calibration_digest(target)

    def run(job: tuple[str, str]) -> tuple[str, str, str]:
        model_name, target = job
        worker = subprocess.run(
            [sys.executable, "-m", "eqsat.extract.calibrate", "zoo", model_name, target, str(row_path(model_name, target))],
            capture_output=True,
            text=True,
        )
        return model_name, target, "" if worker.returncode == 0 else (worker.stderr.strip().splitlines() or ["?"])[-1]

    todo = [j for j in jobs_list if not fresh(*j)]
    with tqdm(total=len(todo), desc="zoo vs Vela", unit="model", disable=not progress) as bar, concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for model_name, target, error in pool.map(run, todo):
            if error:
                print(f"eqsat calibrate: {model_name} on {target} failed: {error}", file=sys.stderr)
            bar.update(1)
    return [json.loads(row_path(*j).read_text()) for j in jobs_list if row_path(*j).exists()]


def _percent(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured if measured else float("nan")


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 5))
    for target, marker in zip(sorted({r["target"] for r in rows}), "os^v"):
        mine = [r for r in rows if r["target"] == target and math.isfinite(r["predicted"])]
        axes.scatter([r["vela_cycles_npu"] for r in mine], [r["predicted"] for r in mine], marker=marker, label=target)
    low = min([r["vela_cycles_npu"] for r in rows] + [1])
    high = max(r["vela_cycles_npu"] for r in rows) if rows else 10
    axes.plot([low, high], [low, high], "k--", linewidth=0.8)
    axes.plot([low, high], [0.9 * low, 0.9 * high], "k:", linewidth=0.5)
    axes.plot([low, high], [1.1 * low, 1.1 * high], "k:", linewidth=0.5)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("Vela cycles_npu (whole model)")
    axes.set_ylabel("cost model estimate (cost_before, summed)")
    axes.set_title("Zoo models: calibrated estimate vs Vela")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def write_report(targets: list[str], workdir: Path = DEFAULT_WORKDIR, *, jobs: int = 2, path: Path = REPORT_PATH, models: list[str] | None = None, progress: bool = True) -> Path:
    """benchmarks/results/calibration_report.md (+ calibration_zoo.png): fit quality, held-out rank correlation, zoo accuracy."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {t: json.loads(vela_cost.calibration_path(t).read_text()) for t in targets}
    heldout = {t: heldout_scores(t, workdir, jobs=jobs) for t in targets}
    rows = zoo_rows(targets, workdir, jobs=jobs, models=models, progress=progress)
    plot_path = path.with_name("calibration_zoo.png")
    if rows:
        _plot(rows, plot_path)

    lines = ["# Cost model calibration against Vela", ""]
    lines += ["Generated by `eqsat calibrate --report`. Data: `eqsat/extract/calibration/<target>.json`.", ""]
    lines += ["| target | Vela | system config | memory mode | samples (ok/all) | calibration time |", "|---|---|---|---|---:|---:|"]
    for t, d in data.items():
        statuses = d["grid"]["statuses"]
        lines.append(f"| {t} | {d['vela_version']} | {d['system_config']} | {d['memory_mode']} | {statuses.get('ok', 0)}/{sum(statuses.values())} | {d['seconds'] / 60:.1f} min |")

    lines += ["", "## Whole models: estimate at eqsat's insertion point vs Vela", ""]
    lines += ["`predicted` is the sum over delegates of the report's `cost_before` (eqsat installed with `rules=()`);",
              "`Vela` is `cycles_npu` of the TOSA the same lowering handed to Vela.", ""]
    lines += ["| model | " + " | ".join(f"{t} predicted | {t} Vela | error" for t in targets) + " |"]
    lines += ["|---|" + "---:|---:|---:|" * len(targets)]
    by_model: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["target"]] = r
    for model_name, per_target in by_model.items():
        cells = []
        for t in targets:
            r = per_target.get(t)
            cells.append(f"{r['predicted']:.0f} | {r['vela_cycles_npu']} | {_percent(r['predicted'], r['vela_cycles_npu']):+.1f}%" if r else "n/a | n/a | n/a")
        lines.append(f"| {model_name} | " + " | ".join(cells) + " |")
    summary = []
    for t in targets:
        errors = [abs(_percent(r["predicted"], r["vela_cycles_npu"])) for r in rows if r["target"] == t and math.isfinite(r["predicted"])]
        if errors:
            within = sum(e <= 10 for e in errors)
            summary.append(f"| {t} | {np.mean(errors):.1f}% | {np.median(errors):.1f}% | {max(errors):.1f}% | {within}/{len(errors)} |")
    lines += ["", "| target | mean abs error | median abs error | max abs error | models within 10% |", "|---|---:|---:|---:|---:|", *summary]
    if rows:
        lines += ["", f"![estimate vs Vela]({plot_path.name})"]

    lines += ["", "## Held-out shapes: rank correlation per family", ""]
    lines += ["Shapes drawn with another seed and never fitted. Spearman ρ between the model's and Vela's cycles; MAPE = mean absolute % error.", ""]
    families = sorted({f for s in heldout.values() for f in s})
    lines += ["| family | " + " | ".join(f"{t} n | {t} ρ | {t} MAPE" for t in targets) + " |", "|---|" + "---:|---:|---:|" * len(targets)]
    for family in families:
        cells = []
        for t in targets:
            score = heldout[t].get(family)
            cells.append(f"{score['n']} | {_fmt(score['spearman'])} | {_fmt(score['mape'], 1)}%" if score else "- | - | -")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")

    lines += ["", "## Fitted models", ""]
    lines += ["cycles = Σ coef × feature, fitted by non-negative least squares weighted by 1/cycles (joint families: over whole graphs).", ""]
    for t, d in data.items():
        lines += [f"### {t}", "", "| family | features (coef) | n | R² | MAPE |", "|---|---|---:|---:|---:|"]
        for family, m in d["models"].items():
            if family.startswith("context/"):
                continue
            terms = ", ".join(f"{f} ({c:.3g})" for f, c in zip(m["features"], m["coef"]) if c)
            lines.append(f"| {family} | {terms or '0'} | {m['n']} | {_fmt(m['r2'])} | {_fmt(m['mape'], 1)}% |")
        lines.append("")

    lines += ["## What Vela did in context", ""]
    lines += ["Mean cycles of the op under test inside a small graph (0 = folded or fused into a neighbour).", ""]
    lines += ["| context | " + " | ".join(targets) + " |", "|---|" + "---:|" * len(targets)]
    contexts = sorted({f for d in data.values() for f in d["models"] if f.startswith("context/")})
    for family in contexts:
        lines.append(f"| {family.removeprefix('context/')} | " + " | ".join(_fmt(data[t]["models"].get(family, {}).get("coef", [None])[0], 1) for t in targets) + " |")

    lines += ["", "## Transposes Vela cannot run", ""]
    for t, d in data.items():
        rejected = [json.loads(k) for k, ok in d["transpose_feasibility"].items() if not ok]
        accepted = sum(d["transpose_feasibility"].values())
        lines.append(f"- **{t}**: of {len(d['transpose_feasibility'])} transposes outside the Arm backend's always-supported region "
                     f"(a product of rank-2 dims above 2^16), Vela ran {accepted} and rejected {len(rejected)}"
                     + (": " + "; ".join(f"{s} perm {p} {dt}" for s, p, dt in rejected) if rejected else "") + ".")
    lines += ["", "## Limits", "", LIMITS, ""]
    path.write_text("\n".join(lines))
    return path


LIMITS = """- The cost model is context-free (it sees one e-node and its operand types). Vela's fusion is not:
  RESCALE, CLAMP and the int32 ADD/SUB/MUL between rescales are priced jointly from whole graphs
  (hand-built chains, and small blocks lowered by the Arm backend), i.e. for the neighbourhoods those
  graphs have. SLICE is priced as measured in front of typical consumers (mostly folded).
- RESHAPE costs 0; a reshape between a graph input and output is a MemoryCopy in Vela.
- CONV2D, DEPTHWISE_CONV2D, MATMUL, pools, reductions and RESIZE are linear proxies on a small grid:
  Vela's block configurations and weight streaming make them ±20-30% per op.
- U55 transposes outside the always-supported region are checked by compiling them once with Vela."""

if __name__ == "__main__":  # worker processes: `block PARAMS TARGET OUT` and `zoo MODEL TARGET OUT`
    command, argument, target_name, out_path = sys.argv[1:5]
    if command == "block":
        Path(out_path).write_text(json.dumps(lower_block(json.loads(argument), target_name)))
    elif command == "zoo":
        Path(out_path).write_text(json.dumps(zoo_row(argument, target_name)))
