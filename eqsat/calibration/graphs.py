"""The graphs calibration measures: hand-built TOSA, and torch blocks that the Arm backend lowers.

Motivation
----------
What Vela charges for an op depends on the op and on the context in which Vela
fuses it (DESIGN §1). To measure this, calibration needs small graphs. Every
layer that Vela reports for such a graph must trace back to the op that
caused it. This module builds those graphs. `eqsat.calibration.calibrate`
compiles them with Vela, and eqsat/calibration/grid.py chooses their
shapes.

Overview
--------
A `Sample` is a kind and its parameters. Its `key` identifies it in the
sample cache and in the calibration file's grid digest.

- `build_tosa` writes samples with `tosa_serializer` in the TOSA that the Arm
  backend emits for Ethos-U (TOSA-1.0+INT). It puts several samples in one
  flatbuffer as independent subgraphs whose tensors carry the prefix `s<i>_`.
  It also returns each sample's `Layout`: for each tensor, which op (role)
  writes it and which op reads it first. Kinds:
  - single ops: `transpose`, `concat`, `concat_copy` (two graph inputs: one whole-tensor MemoryCopy each),
    `batched_concat` (5-D, copied per leading index), `slice`, `rescale` (int8<->int32,
    int16, per tensor and per channel), `binary` (int32 ADD/SUB/MUL), `clamp`,
    `table`, and the opaque compute ops that the rules never rewrite
    (`conv2d`, `depthwise_conv2d`, `matmul`, pools, reductions, `resize`; a
    `reduce_sum` with `source="int8"` reads an int8 tensor rescaled to int32,
    as the Arm backend lowers a sum);
  - contexts: `ctx_slice` (a slice in front of a conv, an add, a clamp, a
    transpose or a concat), `ctx_concat` (convs feeding a concat),
    `ctx_reshape`, `ctx_transpose_conv`, `ctx_slice_transpose` (a slice
    read only by a transpose), and `ctx_chain` (rescaled ADD/SUB/MUL chains).
- `module` samples are bundles of small torch blocks (layer norm, softmax,
  residual conv, MLP, gate) that the real Arm backend lowers. They cover the
  contexts that hand-built graphs do not reproduce. `context_bundle` builds
  the torch module for one bundle. `serialize_node` and `deserialize_node`
  convert between the nodes that eqsat saw in the bundle and the JSON form
  that the sample cache stores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import tosa_serializer as ts

from eqsat.ir import TensorType, Term
from eqsat.ops import concat, reduce, transpose

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
        weights = {"weights": WEIGHTS} if self.kind in WEIGHTED_KINDS else {}
        return json.dumps({"kind": self.kind, **self.params, **weights}, sort_keys=True, separators=(",", ":"))


WEIGHTS = "gaussian-int8-per-channel"
"""How the convolution weights of a sample are drawn, part of the sample's key: Vela compresses weights,
so their values change the flash traffic (all-ones weights compressed so well that a 1x1 conv of
256 -> 160 channels read 0.16 access cycles per weight on Ethos-U55, while the same layer of a zoo
model with its real weights read 1.06). Each output channel is scaled to the full int8 range on its
own, as the Arm quantizer's per-channel symmetric quantization does, so a channel with few weights
uses the range as evenly (and compresses as little) as in a real layer."""
WEIGHTED_KINDS = frozenset({"conv2d", "depthwise_conv2d", "ctx_transpose_conv", "ctx_slice"})


def _weights(shape: list[int], channel_axis: int = 0) -> np.ndarray:
    """Weights as a quantized layer has them: Gaussian, symmetric int8 per output channel using the full range, seeded by the shape."""
    rng = np.random.default_rng(int(np.prod(shape)) * 31 + len(shape))
    values = rng.normal(size=shape)
    other = tuple(a for a in range(len(shape)) if a != channel_axis)
    return np.clip(np.round(values * 127 / np.abs(values).max(axis=other, keepdims=True)), -127, 127).astype(np.int8)


def _bias(channels: int) -> np.ndarray:
    return np.random.default_rng(channels).integers(-(2**12), 2**12, size=channels, dtype=np.int32)


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
    """A CONV2D (params: h, w, cin, cout, k, stride) with its per-channel output RESCALE to int8."""
    acc, out_shape = conv_accumulator(g, role, x, params)
    return _rescale(g, role, acc, out_shape, "int32", "int8", "mul_out", channels=params["cout"]), out_shape


def conv_accumulator(g: _Graph, role: str, x: str, params: dict) -> tuple[str, list[int]]:
    """A CONV2D's int32 output, without its output RESCALE, and its shape."""
    h, w, cin, cout, k, stride = (params[n] for n in ("h", "w", "cin", "cout", "k", "stride"))
    pad, oh, ow = conv_geometry(h, w, k, stride)
    inputs = [
        x,
        g.const([cout, k, k, cin], "int8", _weights([cout, k, k, cin])),
        g.const([cout], "int32", _bias(cout)),
        g.const([1], "int8", [0]),
        g.const([1], "int8", [0]),
    ]
    attribute = _attr("Conv2dAttribute", pad=pad, stride=[stride] * 2, dilation=[1, 1], local_bound=False, acc_type=ts.DType.INT32)
    out_shape = [1, oh, ow, cout]
    return g.op(role, ts.Op.CONV2D, inputs, out_shape, "int32", attribute), out_shape


def _build_sample(g: _Graph, sample: Sample) -> None:
    p, kind = sample.params, sample.kind
    if kind == "transpose":
        x = g.input(p["shape"], p["dtype"])
        out_shape = transpose.output_shape(p["shape"], p["perm"])
        g.output(g.op("op", ts.Op.TRANSPOSE, [x], out_shape, p["dtype"], _attr("TransposeAttribute", list(p["perm"]))))
    elif kind == "concat":
        xs = [g.input(s, p["dtype"]) for s in p["shapes"]]
        out_shape = concat.output_shape(p["shapes"], p["axis"])
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
        out_shape = concat.output_shape(p["shapes"], p["axis"])
        g.output(g.op("concat", ts.Op.CONCAT, parts, out_shape, "int8", _attr("ConcatAttribute", p["axis"])))
    elif kind == "ctx_reshape":
        x = g.input(p["shape"], "int8")
        pre = _clamp(g, "pre", x, p["shape"], "int8")
        r = g.op("reshape", ts.Op.RESHAPE, [pre, g.shape_const(p["new_shape"])], p["new_shape"], "int8", _attr("ReshapeAttribute"))
        g.output(_clamp(g, "post", r, p["new_shape"], "int8"))
    elif kind == "concat_copy":  # two graph inputs concatenated: Vela copies each into the output, one MemoryCopy each
        xs = [g.input(p["shape"], p["dtype"]) for _ in range(2)]
        out_shape = concat.output_shape([p["shape"]] * 2, p["axis"])
        g.output(g.op("op", ts.Op.CONCAT, xs, out_shape, p["dtype"], _attr("ConcatAttribute", p["axis"])))
    elif kind == "batched_concat":  # inputs with leading dimensions beyond HWC: Vela copies each one leading index at a time
        xs = [g.input(shape, "int8") for shape in p["shapes"]]
        g.output(g.op("op", ts.Op.CONCAT, xs, concat.output_shape(p["shapes"], p["axis"]), "int8", _attr("ConcatAttribute", p["axis"])))
    elif kind == "ctx_slice_transpose":  # a slice read only by a transpose: on Ethos-U85 the transpose is written by the slice's copy
        x = _clamp(g, "pre", g.input(p["shape"], "int8"), p["shape"], "int8")
        s = g.op("slice", ts.Op.SLICE, [x, g.shape_const([0] * len(p["shape"])), g.shape_const(p["size"])], p["size"], "int8", _attr("SliceAttribute"))
        out_shape = transpose.output_shape(p["size"], p["perm"])
        g.output(g.op("transpose", ts.Op.TRANSPOSE, [s], out_shape, "int8", _attr("TransposeAttribute", list(p["perm"]))))
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
            g.const([k, k, c, 1], "int8", _weights([k, k, c, 1], channel_axis=2)),
            g.const([c], "int32", _bias(c)),
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
        out_shape = reduce.output_shape(p["shape"], p["axis"])
        x = g.input(p["shape"], p.get("source", dtype))
        if p.get("source") == "int8":
            x = _rescale(g, "op", x, p["shape"], "int8", "int32", "unit", zero_points=(-26, 0))
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
class Layout:
    """What _build_sample wrote for one sample: which op (role) writes and first reads each tensor."""

    producer: dict[str, str] = field(default_factory=dict)
    consumer: dict[str, str] = field(default_factory=dict)


def build_tosa(samples: list[Sample]) -> tuple[bytes, list[Layout]]:
    """One TOSA flatbuffer holding every sample as an independent subgraph, and each sample's layout."""
    g = _Graph()
    layouts = []
    for i, sample in enumerate(samples):
        g.prefix, g.count, g.producer, g.consumer = f"s{i}_", 0, {}, {}
        _build_sample(g, sample)
        layouts.append(Layout(dict(g.producer), dict(g.consumer)))
    return g.tosa.serialize(), layouts


# ---------------------------------------------------------------- contexts from the Arm backend
# Vela's fusion of RESCALE, CLAMP and elementwise ops depends on zero points, scales and neighbours that
# hand-built graphs do not reproduce faithfully. These small torch blocks (not the zoo models) are lowered
# by the real Arm backend; the graph eqsat sees at its insertion point and Vela's cycles for the TOSA the
# backend emits give whole-graph observations for the joint fit.


def context_bundle(params: dict):
    """(module, example inputs) running several independent context blocks: one lowering for all of them."""
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


def serialize_node(term: Term, out: TensorType | None, args: list[TensorType | None]) -> list:
    """The JSON form of one node eqsat saw: [op, arity, attrs, output type, argument types]."""
    tt = lambda t: None if t is None else [list(t.shape), t.dtype]  # noqa: E731
    return [term.op, len(term.args), json.loads(json.dumps(term.attrs)), tt(out), [tt(a) for a in args]]


def deserialize_node(node: list) -> tuple[Term, TensorType | None, list[TensorType | None]]:
    """The term and types of a node in `serialize_node`'s JSON form."""
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
