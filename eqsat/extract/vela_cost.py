"""The Vela-calibrated cost model: estimated inference cycles per e-node, per configuration.

Vela decides what a graph costs, and it decides differently on each target (Ethos-U55 runs a transpose as a
chain of 3D axis swaps, Ethos-U85 most of them natively; a RESCALE in front of an ADD is fused on U85 and costs
two passes on U55): a cost model extraction can trust has to follow Vela's estimator where the source shows how,
and be measured where it does not.

`op_config` is the one place that turns a term into its *family* (`transpose/int8`, `conv2d`, `binary/ADD`, ...)
and features (elements, passes, MACs, the block cycles regor's estimator computes, ...); calibration
(eqsat/calibration/) uses the same function on the graphs it measures, so fitting and prediction cannot drift
apart. Per family it fits an NPU model and an access model (the largest of one linear model per memory), and
`op_cycles` charges the larger of the two, as each of Vela's layers costs `Op Cycles`. What regor's estimator
computes is taken as computed: Ethos-U85 transpose passes (`blocks.u85_transpose_cycles`), convolutions' NPU
cycles over their block configuration and their access cycles (`conv_access_cycles`; with the constants off the
SRAM, `_priced` and eqsat.extract.weights), Ethos-U55 elementwise passes and MemoryCopies. `VelaCalibratedCost(configuration)` reads the configuration's own
calibration file (eqsat/extract/calibration/<target>[.<system config>.<memory mode>].json) and prices a `Term`
from its output and operand types alone; whole graphs are priced layer by layer (eqsat.extract.cost).

docs/cost_model.md says what each op costs, what is computed and what fitted, and which configurations are
infeasible (`math.inf`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

from eqsat.configuration import ACCELERATORS, Configuration, Generation
from eqsat.extract import blocks
from eqsat.extract.weights import WeightReads, encoded_scale_bytes, encoded_weight_bytes
from eqsat.ir import MAX_RANK, Graph, TensorType, Term, op_of, window_of

CALIBRATION_DIR = Path(__file__).parent / "calibration"
FORMAT_VERSION = 2
"""2: a family carries an "access" model beside its NPU model, and contexts and joint families are in `Op Cycles`."""
U55_TRANSPOSE_MAX_PRODUCT = 2**16
"""DecomposePermuteForU55Pass._MAX_PRODUCT: below it every U55 transpose runs."""


def calibration_path(configuration: Configuration | str) -> Path:
    """Where the calibration of a configuration (a target alone: its default configuration) is:
    <target>.json for a target's default configuration, <Configuration.name>.json for any other."""
    if isinstance(configuration, str):
        configuration = Configuration.of(configuration)
    return CALIBRATION_DIR / f"{configuration.name}.json"


def has_calibration(configuration: Configuration | str) -> bool:
    return calibration_path(configuration).exists()


def recorded_configuration(data: dict) -> Configuration:
    """The configuration a calibration file's data was measured on."""
    return Configuration(data["target"], data.get("system_config", ""), data.get("memory_mode", ""), data.get("config", ""))


def calibrations() -> dict[Configuration, Path]:
    """Every calibration file, by the configuration it records."""
    return {recorded_configuration(json.loads(path.read_text())): path for path in sorted(CALIBRATION_DIR.glob("*.json"))}


def calibrated_configurations() -> list[Configuration]:
    """The configurations a calibration file prices (one that records its configuration under that configuration's
    `calibration_path`), each target's default first, in Vela's order of targets."""
    priced = [c for c, path in calibrations().items() if c.target in ACCELERATORS and path == calibration_path(c)]
    return sorted(priced, key=lambda c: (ACCELERATORS.index(c.target), not c.is_default, c.name))


class OtherConfigurationError(ValueError):
    """A calibration file asked to price a configuration it was not measured on."""


def calibration_digest(configuration: Configuration | str) -> str:
    """A short hash of a configuration's calibration file ("" when it is not calibrated)."""
    path = calibration_path(configuration)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else ""


def target_family(target: str) -> Generation:
    """U55 or U85: the two Ethos-U architectures Vela's compiler has. Ethos-U65 is a U55: regor's
    ArchEthosU65 derives from ArchEthosU55 and keeps its performance model (architecture/ethosu65/ethos_u65.hpp),
    and the Arm backend lowers it with the U55 TOSA subset (EthosUCompileSpec._tosa_spec_for_target)."""
    return Generation.U85 if target.startswith("ethos-u85") else Generation.U55


# ---------------------------------------------------------------- transposes


def canonical_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """Drop the leading unit axes that stay in place, if that leaves rank 3 (one 3D pass).

    Vela 5.1 decomposes a transpose whose leading unit axes would leave rank 4
    or more at its full rank: (1, 32, 3, 4, 8) with perm (0, 2, 3, 1, 4) runs
    as 10 passes on Ethos-U85, the count of the 5D decomposition, not the 6 of
    the 4D one. (1, 4, 8, 16) with perm (0, 2, 1, 3) runs as one 3D pass.
    """
    leading = 0
    while leading < len(shape) and shape[leading] == 1 and perm[leading] == leading:
        leading += 1
    if len(shape) > 3 and len(shape) - leading <= 3:
        drop = len(shape) - 3
        return list(shape[drop:]), [p - drop for p in perm[drop:]]
    return list(shape), list(perm)


def is_noop_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> bool:
    """True when the permutation keeps the order of the non-unit axes: a reshape in disguise."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _swap_axes(shape: list[int], a: int, b: int, ops: list) -> None:
    """Append the 3D swaps that exchange axes a < b of shape; shape is updated in place.

    Follows regor's SwapAxes (compiler/scheduler_decompose.cpp): the two axes are swapped in one 3D pass
    when the shape has at most three axes, or when both are among its innermost three and every outer axis
    is 1 (`shape.AxisProduct(0, -3) == 1`); otherwise the shape is viewed as 3D around the axes and the
    swap becomes up to five passes.
    """
    n = len(shape)
    if n <= 3 or (a >= n - 3 and math.prod(shape[: n - 3]) == 1):
        offset = n - 3  # the innermost three axes, padded with leading 1s below rank 3
        inner = [1] * (-offset) + shape[max(0, offset) :]
        perm3 = [0, 1, 2]
        perm3[a - offset], perm3[b - offset] = perm3[b - offset], perm3[a - offset]
        ops.append((tuple(inner), tuple(perm3)))
        shape[a], shape[b] = shape[b], shape[a]
        return
    if (a, b) == (0, 1):
        _swap_axes([shape[0], shape[1], math.prod(shape[2:])], 0, 1, ops)
        shape[a], shape[b] = shape[b], shape[a]
        return
    if (a, b) == (n - 2, n - 1):
        _swap_axes([math.prod(shape[: n - 2]), shape[n - 2], shape[n - 1]], 1, 2, ops)
        shape[a], shape[b] = shape[b], shape[a]
        return
    if a != 0:
        _swap_axes([math.prod(shape[:a]), shape[a], math.prod(shape[a + 1 :])], 0, 1, ops)
        shape[:] = [shape[a]] + shape[:a] + shape[a + 1 :]
        _swap_axes(shape, 0, b, ops)
        _swap_axes([shape[0], math.prod(shape[1 : a + 1]), math.prod(shape[a + 1 :])], 0, 1, ops)
        shape[:] = shape[1 : a + 1] + [shape[0]] + shape[a + 1 :]
        return
    if b != n - 1:
        _swap_axes([math.prod(shape[:b]), shape[b], math.prod(shape[b + 1 :])], 1, 2, ops)
        shape[:] = shape[:b] + shape[b + 1 :] + [shape[b]]
        _swap_axes(shape, 0, n - 1, ops)
        _swap_axes([math.prod(shape[:b]), math.prod(shape[b : n - 1]), shape[n - 1]], 1, 2, ops)
        shape[:] = shape[:b] + [shape[-1]] + shape[b : n - 1]
        return
    _swap_axes([shape[0], math.prod(shape[1 : n - 1]), shape[n - 1]], 0, 2, ops)
    shape[0], shape[-1] = shape[-1], shape[0]


def transpose_passes(shape: tuple[int, ...], perm: tuple[int, ...], generation: Generation) -> list[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """The 3D transpose passes Vela runs for one TRANSPOSE: [(3D input shape, 3D permutation)].

    Follows Vela 5.1's regor, compiler/scheduler_decompose.cpp: a transpose runs as one pass when its
    permutation moves only the innermost three axes and every outer axis is 1 (`DecomposeTranspose` asks
    for no decomposition: any such permutation on Ethos-U85, a single swap on Ethos-U55,
    `EthosU55Constraints::OperatorQuery`); otherwise `DecomposeTranspose` sorts the axes by selection,
    in the shape the transpose has in the graph (its rank-5/6 shape, unit axes included; graphir_optimiser.cpp
    `RearrangeTranspose` drops no unit axis, as both targets answer `Native` to its query), each swap
    becoming up to five 3D passes (`SwapAxes`). A transpose behind a RESHAPE that only adds or drops unit
    axes runs in the reshape's input shape (`eqsat.extract.layers.transposes_as_vela_runs_them`).
    Not followed: int32 H <-> C swaps on Ethos-U55, which `SwapAxesIn3D` runs as three swaps.
    """
    if is_noop_transpose(shape, perm):
        return []
    canon_shape, canon_perm = canonical_transpose(shape, perm)
    if len(canon_shape) <= 3:
        pad = 3 - len(canon_shape)
        shape3 = tuple([1] * pad + canon_shape)
        perm3 = tuple(list(range(pad)) + [p + pad for p in canon_perm])
        moved = [i for i in range(3) if perm3[i] != i]
        if generation == Generation.U85 or len(moved) == 2:
            return [(shape3, perm3)]
    order = [0] * len(canon_perm)
    for i, p in enumerate(canon_perm):
        order[p] = i
    work, passes = list(canon_shape), []
    for axis in range(len(order)):
        if order[axis] == axis:
            continue
        i = next(i for i in range(axis + 1, len(order)) if order[i] == axis)
        _swap_axes(work, axis, i, passes)
        order[axis], order[i] = order[i], order[axis]
    return passes


def violates_u55_worst_case(shape: tuple[int, ...]) -> bool:
    """The Arm backend's sufficient condition for a U55 transpose, negated.

    Some product of max(1, rank-2) dimensions exceeds 2^16
    (executorch DecomposePermuteForU55Pass._violates_u55_worst_case_constraint).
    """
    import itertools

    k = max(1, len(shape) - 2)
    return any(math.prod(c) > U55_TRANSPOSE_MAX_PRODUCT for c in itertools.combinations(shape, k))


# ---------------------------------------------------------------- op configurations


@dataclass(frozen=True)
class OpConfig:
    """The calibration family of one op configuration and the features its cost depends on.

    `fixed` is a cost decided without calibration (0 for free ops, inf for
    ops the target cannot run); `family` and `features` are used otherwise.
    `transpose` holds (shape, perm, dtype) when feasibility must be checked.
    """

    family: str
    features: dict[str, float] = field(default_factory=dict)
    fixed: float | None = None
    transpose: tuple | None = None
    passes: tuple[dict[str, float], ...] = ()
    """The features of each of Vela's passes for this op, when it runs as several (a transpose); they add up to `features`."""


ACCUMULATOR_MOVES = frozenset({"Transpose", "Concat", "Slice", "Reshape"})
"""Data movement that, on an int32 tensor, sits between an accumulating producer and its output RESCALE."""

FREE = OpConfig("free", fixed=0.0)
INFEASIBLE = OpConfig("infeasible", fixed=math.inf)

BINARY_OPS = {"ADD": "ADD", "SUB": "SUB", "MUL": "MUL", "add": "ADD", "sub": "SUB", "mul": "MUL"}
PROXY_OPS = {
    "CONV2D": "conv2d",
    "DEPTHWISE_CONV2D": "depthwise_conv2d",
    "MATMUL": "matmul",
    "AVG_POOL2D": "avg_pool2d",
    "MAX_POOL2D": "max_pool2d",
    "REDUCE_SUM": "reduce_sum",
    "REDUCE_MAX": "reduce_max",
    "RESIZE": "resize",
}
ATEN_CLAMPS = frozenset({"clamp", "relu", "hardtanh"})
INPUT_RESCALE_FUSING_OPS = frozenset({"ADD", "SUB", "MUL"})
"""The elementwise ops into which Vela fuses an input RESCALE (int8 -> int32) that only they read, on both targets
(on Ethos-U55 an ADD's or SUB's only as `VelaCalibratedCost.fuses_add_sub` says)."""
ADD_SUB_FUSED_INPUT_SCALE = {Generation.U55: 2.0**19}
"""The target generations on which Vela fuses an ADD or SUB with its input RESCALEs only when one of them scales by
exactly this and the other by less: what the Arm backend emits for two inputs of different scales (each rescaled to
2^20 times its share of twice the larger scale). Measured on Ethos-U55 (tests/extract/test_layers.py): a (1, 64, 32) ADD
of rescales by 2^19 and by 0.25-0.99 x 2^19 (or 0.001 x) is one 3072-cycle pass; by 2^19 and 2^19, 1.01-4 x 2^19, or
two scales both below 2^19 (2^18 and 0.7 x 2^18, 2^17 and 2^17) its rescales run alone (3072 + 2560 each), then the
ADD (2560) and its output RESCALE (2560): 16384 cycles."""

OUTPUT_RESCALE_ALONE_BESIDE_READER = frozenset({Generation.U85})
"""The target generations on which the model prices an output RESCALE of an ADD, SUB or MUL as run alone when something
else reads the op's int32 output too (another op, another RESCALE, a graph output): the op writes int32 and each of
its output rescales becomes a layer of its own. Measured on Ethos-U85 (tests/extract/test_layers.py): a (1, 64, 32)
ADD of two rescaled int8 tensors costs 512 cycles with its output rescale fused, and 512 + 5824 when the int32 sum
is also returned. On Ethos-U55 such an ADD or SUB runs unfused with all its rescales (`fuses_add_sub`); a U55 MUL whose
int32 output has another reader is not modelled."""

OUTPUT_SHIFT_FUSED_BEHIND_INT32 = frozenset({Generation.U55})
"""The target generations on which an output RESCALE that only shifts is fused into an elementwise op that reads int32
(regor `EthosU55Constraints`' `SupportedOFMQuant`, `layers.output_rescales_alone`). Ethos-U85's constraints allow it for
a MUL only, and Vela was measured running such rescales alone there (tests/extract/test_layers.py)."""


def dtype_name(t: TensorType | None) -> str:
    """'int8' for torch.int8; 'int8' when unknown."""
    if t is None or t.dtype is None:
        return "int8"
    return t.dtype.removeprefix("torch.")


def elements(t: TensorType | None) -> int:
    return math.prod(t.shape) if t is not None else 1


def rows(t: TensorType | None) -> float:
    """Number of innermost vectors: elements over the innermost dimension."""
    if t is None or not t.shape:
        return 1.0
    return elements(t) / max(1, t.shape[-1])


def is_batched(t: TensorType | None) -> bool:
    """More than one 3D (HWC) slice: Vela splits the op per leading index and fuses less across it."""
    return t is not None and len(t.shape) > 3 and math.prod(t.shape[:-3]) > 1


def _basic(t: TensorType | None) -> dict[str, float]:
    n = float(elements(t))
    return {"one": 1.0, "elements": n, "rows": rows(t), "batched_elements": n if is_batched(t) else 0.0}


def _bytes(t: TensorType | None) -> int:
    return {"int8": 1, "int16": 2, "int32": 4}.get(dtype_name(t), 1)


def _ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def width_depth(shape: tuple[int, ...]) -> tuple[int, int]:
    """The W and C of shape in Vela's 4-D padding (regor Shape::WC, 1 where the shape has no such axis): a tensor
    whose writer and readers see different ones is stored in NHWC (`layers.stored_in_nhwc`)."""
    padded = (1, 1, *shape)
    return padded[-2], padded[-1]


def _brick_between(written: tuple[tuple[int, ...], tuple[int, ...]], read: tuple[int, ...]) -> bool:
    """The tensor one pass of a decomposed transpose writes (its input shape and permutation) and the next reads in
    shape read is in brick format: both see it with the same width and depth (`width_depth`)."""
    shape3, perm3 = written
    return width_depth(tuple(shape3[p] for p in perm3)) == width_depth(tuple(read))


def transpose_config(
    x: TensorType | None, out: TensorType | None, perm: tuple[int, ...], target: str, brick_in: bool = True, brick_out: bool = True
) -> OpConfig:
    """A TRANSPOSE's family and features, per pass of Vela's decomposition (`transpose_passes`). On Ethos-U85 a
    pass carries the NPU and access cycles Vela's estimator computes for it (`blocks.u85_transpose_cycles`), its
    input and output stored as Vela stores a tensor between two NPU ops: in brick format (NHCWB16), unless brick
    is False (NHWC: a graph's input and output, brick_in and brick_out). A tensor between two passes is in brick
    format when both see it with the same width and depth, else NHWC (`_brick_between`): a (1, 16, 8, 2, 64)
    transpose by (0, 2, 1, 3, 4) is five passes that Vela runs at 60166 cycles on Ethos-U85-256, so priced."""
    if x is None:
        return OpConfig(f"transpose/{dtype_name(out)}", {"one": 1.0, "passes": 1.0, "moved": float(elements(out))})
    if len(x.shape) > MAX_RANK:
        return INFEASIBLE
    if is_noop_transpose(x.shape, perm):
        return FREE
    n = float(elements(x))
    passes = []
    decomposed = transpose_passes(x.shape, perm, target_family(target))
    for i, (shape3, perm3) in enumerate(decomposed):
        out3 = [shape3[p] for p in perm3]
        kind = "".join(map(str, perm3))
        passes.append(
            {
                "one": 1.0 if i == 0 else 0.0,
                "passes": 1.0,
                "moved": n,
                "elements": n if i == 0 else 0.0,
                f"moved_{kind}": n,  # elements a pass of this kind moves
                f"rows_{kind}": n / max(1, shape3[2]),  # innermost vectors it reads
                "rows_in": n / max(1, shape3[2]),
                "rows_out": n / max(1, out3[2]),
                "padded_in": n / max(1, shape3[2]) * _ceil_to(shape3[2], 16),  # brick-aligned reads
                "padded_out": n / max(1, out3[2]) * _ceil_to(out3[2], 16),  # brick-aligned writes
                # a write narrower than a 16-byte brick: the output plane times its longer side
                "narrow_hw_max": float(out3[0] * out3[1] * max(out3[0], out3[1])) if out3[2] * _bytes(x) < 16 else 0.0,
            }
        )
        if target_family(target) == Generation.U85:
            reads_brick = brick_in if i == 0 else _brick_between(decomposed[i - 1], shape3)
            writes_brick = brick_out if i == len(decomposed) - 1 else _brick_between((shape3, perm3), decomposed[i + 1][0])
            npu, access = blocks.u85_transpose_cycles(target, shape3, perm3, _bytes(x), reads_brick, writes_brick)
            passes[-1].update(block_npu=float(npu), block_access=float(access))
    features: dict[str, float] = {}
    for part in passes:
        for name, value in part.items():
            features[name] = features.get(name, 0.0) + value
    return OpConfig(f"transpose/{dtype_name(x)}", features, transpose=(tuple(x.shape), tuple(perm), dtype_name(x)), passes=tuple(passes))


def batched_copy_features(tensor: TensorType) -> dict[str, float]:
    """Copying tensor one leading index (beyond HWC) at a time: the copies' count, elements and rows, summed."""
    count = float(math.prod(tensor.shape[:-3])) if len(tensor.shape) > 3 else 1.0
    block = TensorType(tuple(tensor.shape[-3:]), tensor.dtype)
    return {"one": count, "elements": count * elements(block), "rows": count * rows(block)}


def copy_features(tensor: TensorType | None) -> dict[str, float]:
    """A whole-tensor MemoryCopy of tensor: its elements, its innermost rows, the 16-byte bricks those rows fill, and
    its height in Vela's NHWC shape (a (1, 32, 1, 16) copy costs 646 cycles on Ethos-U85, a (1, 1, 32, 16) one 370)."""
    n = float(elements(tensor))
    shape = tensor.shape if tensor is not None else ()
    inner = shape[-1] if shape else 1
    height = float(shape[-3]) if len(shape) >= 3 else 1.0
    return {"one": 1.0, "elements": n, "rows": rows(tensor), "bricks": rows(tensor) * math.ceil(inner * _bytes(tensor) / 16), "height": height}


def slice_transpose_config(sliced: TensorType, perm: tuple[int, ...], target: str) -> OpConfig:
    """The family and features of a SLICE's MemoryCopy that writes its output transposed by perm in one pass
    (Ethos-U85 folds such a transpose into the copy): the features of the transpose's one pass."""
    (features,) = transpose_config(sliced, None, perm, target).passes
    keep = ("one", "moved", "padded_in", "padded_out", "rows_in", "rows_out", "narrow_hw_max")
    return OpConfig(f"slice_transpose/{dtype_name(sliced)}", {name: features[name] for name in keep})


def _concat_config(out: TensorType | None, args: list[TensorType | None]) -> OpConfig:
    parts = [a for a in args if a is not None]
    if len(parts) != len(args) or not parts:
        return OpConfig(f"concat/{dtype_name(out)}", {"inputs": float(len(args)), "elements": float(elements(out)), "rows": rows(out)})
    return OpConfig(
        f"concat/{dtype_name(parts[0])}",
        {"inputs": float(len(parts)), "elements": float(sum(elements(a) for a in parts)), "rows": float(sum(rows(a) for a in parts))},
    )


MAX_STRIDE = 3
"""The largest convolution stride the NPU runs; Vela runs a convolution with a larger stride as one
convolution per output row or column along that axis."""


def conv_stride(in_size: int, kernel: int, out_size: int) -> int:
    """The stride of one axis of a convolution, read from its sizes (a term does not carry it): the smallest stride
    that maps in_size to out_size with a 'same' (kernel // 2 each side) or no padding, else the ratio of the sizes.
    Where both paddings fit (an 8-wide input, a 5-wide kernel, 4 outputs: stride 2 padded, or 1 not), the smaller
    stride is taken."""
    if out_size <= 1:
        return 1
    for stride in range(1, in_size + 1):
        if out_size in ((in_size + 2 * (kernel // 2) - kernel) // stride + 1, (in_size - kernel) // stride + 1):
            return stride
    return max(1, round(in_size / out_size))


def stride_splits(x: TensorType | None, kernel: tuple[int, int], out: TensorType | None) -> int:
    """How many convolutions Vela runs for one NHWC convolution of x by an (H, W) kernel into out: one per
    output position along each axis whose stride (`conv_stride`) exceeds MAX_STRIDE, else 1.
    Measured on both targets: a (1, 1, 64, 8) input, an 8-wide kernel and stride 8 run as 8 convolutions
    (emg-gru-gesture; 10043 cycles on Ethos-U55 where one convolution of its size costs about 1200)."""
    if x is None or out is None or len(x.shape) != 4 or len(out.shape) != 4:
        return 1
    splits = 1
    for axis, k in zip((1, 2), kernel):
        if conv_stride(x.shape[axis], k, out.shape[axis]) > MAX_STRIDE:
            splits *= out.shape[axis]
    return splits


def _conv_features(out: TensorType | None, args: list[TensorType | None], macs_per_output: float, splits: int = 1) -> dict[str, float]:
    """A convolution's features; run as `splits` convolutions (`stride_splits`), each costs its fixed part
    and streams the weights, biases and scales again."""
    x = args[0] if args else None
    weights = args[1] if len(args) > 1 else None
    return {
        "one": float(splits),
        "macs": float(elements(out)) * macs_per_output,
        "elements": float(elements(out)),
        "in_elements": float(elements(x)),
        "weights": float(elements(weights)) * splits if weights is not None else 0.0,  # streamed from memory once per op
        "out_channels": float(out.shape[-1]) * splits if out is not None and out.shape else 0.0,  # a bias and a scale each, from memory
    }


def fully_connected_shape(positions: int) -> tuple[int, int]:
    """The (height, width) Vela lays `positions` output positions out in when it runs a batched 1x1 convolution
    as a fully connected layer (regor compiler/graphir_optimiser.cpp `RewriteFullyConnected`: "more square H/W
    gives better performance up to a point")."""
    width = max(positions // 16, math.ceil(math.sqrt(positions)))
    while positions % width:
        width += 1
    return positions // width, width


def conv_block_features(
    x: TensorType | None,
    out: TensorType | None,
    weights: TensorType | None,
    kernel: tuple[int, int],
    depthwise: bool,
    target: str,
    brick_in: bool = True,
    brick_out: bool = True,
    transpose: blocks.Shape3 = blocks.UNPERMUTED,
    bias_latency: int | None = None,
) -> dict[str, float]:
    """A CONV2D's or DEPTHWISE_CONV2D's work over the block configuration Vela's search picks for it, for NHWC x and
    out (`eqsat.extract.blocks`, following regor's `FindBlockConfig`): its NPU cycles as Vela's estimator computes
    them (`block_cycles`, `blocks.mac_op_cycles`), the feature-map bytes it moves (`feature_map_bytes`, IFM read
    again per OFM block, in full bursts) and its weights, biases and scales read again per OFM block position
    (`weight_reads`, `scale_reads`; `blocks.element_access`).

    Also its memory-access cycles as Vela's estimator computes them with everything in the SRAM (`access_cycles`,
    `conv_access_cycles`), and on Ethos-U85 those of its op group with an elementwise op chained into it
    (`chained_access_cycles`); and what `weights.WeightReads` reads where the memory mode keeps its constants off
    the SRAM (its encoded weights and scales, `weight_bytes` and `scale_bytes` over all their reads, its IFM reads,
    its refetches and runs, its output depth and OFM block depth).

    Its feature maps are stored as Vela stores those between two NPU ops: in brick format (NHCWB16, regor
    compiler/scheduler.cpp: every feature map not read or written by the CPU, a graph input or output, unless a
    reader or writer needs it linear), unless brick_in (its input) or brick_out (its output) is False (NHWC). A 1x1
    convolution of 32 to 32 channels over 25x5 positions costs 842 cycles between two others on Ethos-U85-2048, 1155
    alone (graph input to output).

    As Vela runs it: a 1x1 convolution of stride 1 over a batch as one convolution over all its positions
    (`fully_connected_shape`); any other once per batch index (scheduler_decompose.cpp, "Decompose Batching"),
    and once per output position along an axis whose stride exceeds MAX_STRIDE (`stride_splits`), each then
    one output position and one kernel wide along that axis; a depthwise convolution with a depth multiplier
    once per multiple (scheduler_decompose.cpp, `depthMultiplier`; one over a single input channel is a CONV2D,
    graphir_optimiser.cpp `RewriteDepthwise`, which `_opaque_config` prices as one).

    transpose: the permutation of its output's (height, width, channels) that a TRANSPOSE fused into its op group
    writes it in (Ethos-U85, `layers.transposed_convolution_writes`; `blocks.mac_op_cycles`); bias_latency: the read
    latency of the memory it reads its biases and scales from (default: the SRAM's; `blocks.mac_op_cycles`)."""
    if x is None or out is None or len(x.shape) != 4 or len(out.shape) != 4:
        return {}
    ifm, ofm, runs = list(x.shape[1:]), list(out.shape[1:]), out.shape[0]
    if depthwise and ofm[2] > ifm[2]:  # a depth multiplier: one depthwise convolution per multiple
        runs, ofm[2] = runs * (ofm[2] // ifm[2]), ifm[2]
    strides = [conv_stride(ifm[axis], k, ofm[axis]) for axis, k in enumerate(kernel)]
    if runs > 1 and kernel == (1, 1) and strides == [1, 1] and not depthwise:
        height, width = fully_connected_shape(runs * ofm[0] * ofm[1])
        ifm, ofm, runs = [height, width, ifm[2]], [height, width, ofm[2]], 1
    for axis, k in enumerate(kernel):
        if strides[axis] > MAX_STRIDE:
            runs *= ofm[axis]
            ifm[axis], ofm[axis], strides[axis] = k, 1, 1
    query = (target, tuple(ifm), tuple(ofm), blocks.Kernel(kernel[0], kernel[1], *strides), depthwise)
    estimate = blocks.mac_op_cycles(*query, brick_in, brick_out, transpose=transpose, bias_latency=bias_latency)
    access = blocks.element_access(*query, brick_in, brick_out, transpose=transpose)
    features = {
        "block_cycles": float(runs * estimate),
        "feature_map_bytes": float(runs * access.feature_maps),
        "weight_reads": float(runs * access.refetches * elements(weights)) if weights is not None else 0.0,
        "scale_reads": float(runs * access.refetches * ofm[2]),
    }
    run_weights = kernel[0] * kernel[1] * (1 if depthwise else ifm[2]) * ofm[2]
    generation = target_family(target)
    weight_bytes = access.refetches * encoded_weight_bytes(generation, run_weights)
    scale_bytes = access.refetches * encoded_scale_bytes(generation, ofm[2], access.scales)
    features |= {
        "access_cycles": float(runs * conv_access_cycles(target, access, weight_bytes, scale_bytes)),
        "weight_bytes": float(runs * weight_bytes),
        "scale_bytes": float(runs * scale_bytes),
        "ifm_bytes": float(runs * access.ifm_bytes),
        "refetches": float(access.refetches),
        "runs": float(runs),
        "ofm_depth": float(ofm[2]),
        "ofm_block_depth": float(blocks.block_config(*query, transpose, brick_out).ofm_block[2]),
    }
    if target_family(target) in ELEMENTWISE_CHAINED and transpose == blocks.UNPERMUTED:  # an elementwise op chained into it
        chained_output = blocks.u85_chained_output_cycles(target, _bytes(x))  # it writes what the convolution reads: int8, or int16 (a16w8)
        # regor estimates the group's NPU cycles over the convolution's own OFM, kept in brick format in the chaining
        # buffer; the chained op writes the group's output (brick_out), which the access side counts
        features["chained_block_cycles"] = float(runs * blocks.mac_op_cycles(*query, brick_in, True, chained_output))
        operand = blocks.chained_operand_bytes(*query, brick_out, tuple(ofm), True)  # its other operand, in brick format
        features["chained_access_cycles"] = float(runs * conv_access_cycles(target, access, weight_bytes, scale_bytes, operand))
    return features


def off_chip_constant_access_cycles(target: str, features: dict[str, float], memory: blocks.Memory) -> int:
    """The access cycles a CONV2D or DEPTHWISE_CONV2D on Ethos-U85 spends in the memory that holds its constants, when
    that is not the SRAM (`Shared_Sram`: DRAM; `MeasureAccessCycles`): its biases and scales read once per OFM block
    position on the scale channel, whose few read buffers make it slow over DRAM's latency (0.41 bytes per cycle on
    Ethos_U85_SYS_DRAM_Mid), and its encoded weights as often on the weight channel (3.28), as Vela reads them where
    its scheduler does not buffer them in the SRAM (`Scheduler::ProposeWeightBuffering`; where it does, their
    transfer overlaps, and the weights bind the layer only if they are many: an upper bound). tds-conv1d's
    transposed-write convolution reads 64 x 160 bytes of scales: 24999 cycles on ethos-u85-128 with `Shared_Sram`,
    4204 with `Sram_Only`. Equal to Vela's DRAM access cycles where the scales bind, on the convolutions of
    tests/extract/test_blocks.py."""
    channels = blocks.MemChannel
    transfers = {channels.WEIGHT: int(features["weight_bytes"]), channels.SCALE: int(features["scale_bytes"])}
    return blocks.u85_access_cycles(target, transfers, memory)


def conv_access_cycles(target: str, access: blocks.ElementAccess, weight_bytes: int, scale_bytes: int, chained_operand: int = 0) -> int:
    """`MeasureAccessCycles` of a CONV2D or DEPTHWISE_CONV2D, everything in the SRAM: its IFM, its OFM (or the chained
    op's), its encoded weights and its biases and scales (weight_bytes, scale_bytes: read once per OFM block position,
    `blocks.element_access`). On Ethos-U55 all of them over the SRAM's bandwidth; on Ethos-U85 each on its own
    channel, and a chained elementwise op's other operand on the IFM stream channel (`blocks.u85_access_cycles`).
    Equal to Vela's SRAM access cycles, given the encoded weight size, on the convolutions of
    tests/extract/test_blocks.py."""
    if target_family(target) is Generation.U55:
        return int((access.feature_maps + weight_bytes + scale_bytes) / blocks.sram_of(target).bandwidth)
    channels = blocks.MemChannel
    transfers = {channels.IFM: access.ifm_bytes, channels.WRITE: access.ofm_bytes, channels.WEIGHT: weight_bytes, channels.SCALE: scale_bytes}
    if chained_operand:
        transfers[channels.IFM_STREAM] = chained_operand
    return blocks.u85_access_cycles(target, transfers)


def ofm_microblock(target: str) -> tuple[int, int, int]:
    """The output microblock (height, width, depth) an Ethos-U55 computes in one step (regor's `s_EthosU55Configs`,
    `blocks.U55_ARCHITECTURES`; Ethos-U65 runs the 256-MAC one): its pooling cycles grow with the microblocks an
    output covers, not with its elements. Ethos-U85 fits do not use it (its 256-MAC one is returned, unused)."""
    return blocks.architecture_of(target if target_family(target) == Generation.U55 else "ethos-u55-256").microblock


def _microblocks(out: TensorType | None, microblock: tuple[int, int, int]) -> int:
    """How many output microblocks cover out's NHWC positions and channels."""
    if out is None or len(out.shape) != 4:
        return elements(out)
    n, h, w, c = out.shape
    return n * math.prod(-(-size // block) for size, block in zip((h, w, c), microblock))


def _microblock_features(out: TensorType | None, kernel_steps: int, target: str) -> dict[str, float]:
    """A pooling's work in Ethos-U55 output microblocks: the microblocks it writes, and those times the steps each
    takes (`kernel_steps`)."""
    microblocks = _microblocks(out, ofm_microblock(target))
    return {"microblocks": float(microblocks), "microblock_steps": float(microblocks * kernel_steps)}


@functools.cache
def short_op_name(name: str) -> str:
    """'CONV2D' for 'tosa.CONV2D.default', 'convolution' for 'aten.convolution.default' (each name worked out once:
    whole-graph costs ask for the same few op names on every evaluation)."""
    return name.split(".")[1] if name.count(".") >= 2 else name


DEFAULT_POOL_WINDOW = (2, 2)
"""The window a pooling whose key carries none (`ir.window_of`) is priced with."""


def _opaque_config(
    name: str,
    out: TensorType | None,
    args: list[TensorType | None],
    target: str,
    window: tuple[int, int] | None = None,
    transpose: blocks.Shape3 = blocks.UNPERMUTED,
    bricks: tuple[bool, bool] = (True, True),
    bias_latency: int | None = None,
) -> OpConfig:
    op = short_op_name(name)
    weight = args[1] if len(args) > 1 else None
    if op == "CONV2D" and weight is not None and len(weight.shape) == 4:  # OHWI
        kernel = (weight.shape[1], weight.shape[2])
        features = _conv_features(out, args, math.prod(weight.shape[1:]), stride_splits(args[0], kernel, out))
        return OpConfig("conv2d", features | conv_block_features(args[0], out, weight, kernel, False, target, *bricks, transpose=transpose, bias_latency=bias_latency))
    if op == "DEPTHWISE_CONV2D" and weight is not None and len(weight.shape) == 4:  # HWCM
        kernel = (weight.shape[0], weight.shape[1])
        features = _conv_features(out, args, math.prod(kernel), stride_splits(args[0], kernel, out))
        if weight.shape[2] == 1 and weight.shape[3] > 1:  # one input channel: a CONV2D to the multiplier's channels
            return OpConfig("conv2d", features | conv_block_features(args[0], out, weight, kernel, False, target, *bricks, transpose=transpose, bias_latency=bias_latency))
        return OpConfig("depthwise_conv2d", features | conv_block_features(args[0], out, weight, kernel, True, target, *bricks, transpose=transpose, bias_latency=bias_latency))
    if op == "MATMUL" and args and args[0] is not None:
        return OpConfig("matmul", _conv_features(out, args, args[0].shape[-1]))
    if op == "convolution" and weight is not None and len(weight.shape) == 4:  # aten: NCHW, weights O, I/groups, KH, KW
        x, kernel = args[0], (weight.shape[2], weight.shape[3])
        nhwc = [None if t is None or len(t.shape) != 4 else TensorType((t.shape[0], t.shape[2], t.shape[3], t.shape[1]), t.dtype) for t in (x, out)]
        depthwise = weight.shape[1] == 1 and weight.shape[0] > 1
        features = _conv_features(out, args, math.prod(weight.shape[1:]), stride_splits(nhwc[0], kernel, nhwc[1]))
        return OpConfig("depthwise_conv2d" if depthwise else "conv2d", features | conv_block_features(*nhwc, weight, kernel, depthwise, target, bias_latency=bias_latency))
    if op in PROXY_OPS:
        x = args[0] if args else None
        n_in = float(elements(x))
        features = {"one": 1.0, "elements": float(elements(out)), "in_elements": n_in, "in_batched_elements": n_in if is_batched(x) else 0.0}
        if x is not None and out is not None and len(x.shape) == len(out.shape) and x.shape:
            features["in_elements_last"] = n_in if x.shape[-1] > 1 and out.shape[-1] == 1 else 0.0  # reduces the channels
        if op in ("AVG_POOL2D", "MAX_POOL2D") and x is not None and out is not None and len(x.shape) == len(out.shape) == 4:
            # a global pool: its window is the whole map, and Vela's pooling cycles grow with the window
            features["in_elements_global"] = n_in if out.shape[1] * out.shape[2] == 1 < x.shape[1] * x.shape[2] else 0.0
            # on Ethos-U55 a pooling takes a step per window position for each output microblock it writes
            features |= _microblock_features(out, math.prod(window or DEFAULT_POOL_WINDOW), target)
        return OpConfig(PROXY_OPS[op], features)
    if op == "RESCALE":
        return _rescale_config(args[0] if args else None, out, per_channel=True)
    if op == "TABLE":
        return OpConfig(f"table/{dtype_name(args[0] if args else out)}", _basic(out))
    if op in ("CONST_SHAPE", "CONST", "IDENTITY"):
        return FREE
    return OpConfig(f"generic/{dtype_name(out)}", _basic(out))


def _rescale_config(x: TensorType | None, out: TensorType | None, per_channel: bool) -> OpConfig:
    source, dest = dtype_name(x), dtype_name(out)
    if source == "int32" and dest in ("int8", "int16"):
        if per_channel:
            return FREE  # the output scaling of the convolution that produced the int32 tensor
        return OpConfig(f"rescale_out/{dest}", _basic(out))
    if source in ("int8", "int16") and dest == "int32" and not per_channel:
        return OpConfig(f"rescale_in/{source}", _basic(out))
    return OpConfig(f"rescale/{source}->{dest}", _basic(out))


def _elementwise_config(name: str, out: TensorType | None, args: list[TensorType | None]) -> OpConfig:
    parts = name.split(".")
    op = parts[1] if len(parts) >= 2 else name
    if op in BINARY_OPS:
        family = f"binary/{BINARY_OPS[op]}"
        features = _basic(out)
        broadcast = any(a is not None and out is not None and tuple(a.shape) != tuple(out.shape) for a in args)
        features["broadcast_elements"] = features["elements"] if broadcast else 0.0
        if parts[0] == "aten":  # before ExirToTosaPass: the rescales around it are not inserted yet
            features["with_input_rescales"] = 2.0
        return OpConfig(family, features)
    if op == "RESCALE":
        return _rescale_config(args[0] if args else None, out, per_channel=False)
    if op == "CLAMP" or op in ATEN_CLAMPS:
        return OpConfig(f"clamp/{dtype_name(out)}", _basic(out))
    return OpConfig(f"generic/{dtype_name(out)}", _basic(out))


def op_config(
    term: Term,
    out: TensorType | None,
    args: list[TensorType | None],
    target: str,
    transpose: blocks.Shape3 = blocks.UNPERMUTED,
    bricks: tuple[bool, bool] = (True, True),
    bias_latency: int | None = None,
) -> OpConfig:
    """The calibration family and features of one term on target (the one place that decides it); a convolution's
    with its output written transposed by transpose, its input and output stored in brick format or NHWC as bricks
    says, its biases and scales read at bias_latency (`conv_block_features`)."""
    if term.op == "Reshape":
        return FREE
    if term.op == "Transpose":
        return transpose_config(args[0] if args else None, out, tuple(term.attrs[0]), target)
    if term.op == "Concat":
        return _concat_config(out, args)
    if term.op == "Slice":
        return OpConfig(f"slice/{dtype_name(out)}", _basic(out))
    if term.op == "Pad":  # priced as when it was read as an opaque PAD: the generic proxy of its output
        return OpConfig(f"generic/{dtype_name(out)}", _basic(out))
    if term.op == "Rescale":  # priced as when it was read as Elementwise (per-tensor) or Opaque (per-channel)
        return _rescale_config(args[0] if args else None, out, per_channel=len(term.attrs[1]) > 1)
    if term.op == "Opaque" and not term.args:
        return FREE
    name = op_of(term.attrs[0])
    if term.op == "Elementwise":
        return _elementwise_config(name, out, args)
    # Reduce and Table: priced as the opaque op they were read from (the key names it)
    return _opaque_config(name, out, args, target, window_of(term.attrs[0]), transpose, bricks, bias_latency)


# ---------------------------------------------------------------- the model


def vela_version() -> str:
    from importlib.metadata import version

    return version("ethos-u-vela")


def _linear(model: dict, features: dict[str, float]) -> float:
    return sum(c * features.get(f, 0.0) for f, c in zip(model["features"], model["coef"]))


def npu_and_access(model: dict, config: OpConfig) -> list[tuple[float, float]]:
    """Per pass of config, a family's fitted NPU cycles and its memory-access cycles: computed where the features
    carry them (`access_cycles`, `conv_block_features`), else the largest of the family's fitted linear pieces, and 0
    for families fitted on `Op Cycles` alone."""
    pieces = model["access"]["pieces"] if "access" in model else []
    return [
        (_linear(model, part), part["access_cycles"] if "access_cycles" in part else max((_linear(p, part) for p in pieces), default=0.0))
        for part in config.passes or (config.features,)
    ]


def op_cycles(model: dict, config: OpConfig) -> float:
    """What a family's fitted model charges for config: per pass, the larger of its NPU and
    memory-access estimates (Vela's `Op Cycles`), summed over the op's passes."""
    return max(0.0, sum(max(npu, access) for npu, access in npu_and_access(model, config)))


REDUCE_SUM_READS_RESCALE_INPUT = frozenset({Generation.U85})
"""The target generations on which a REDUCE_SUM reads the int8 tensor of the input RESCALE it alone reads (regor folds
the rescale into a SUB of the zero point behind the sum; `layers.reduce_sums_over_channels`)."""


ELEMENTWISE_CHAINED = frozenset({Generation.U85})
"""The target generations whose scheduler chains an ADD, SUB or MUL into the convolution in front of it
(`layers.chained_elementwise`, `VelaCalibratedCost.chained_op`). Ethos-U55 has no chaining buffers: its op group
takes one op and an activation (regor `EthosU55OpGroup::Add`)."""

ELEMENTWISE_PASS_ALONE = frozenset({Generation.U55})
"""The target generations on which a binary op in a graph costs the elementwise pass it runs as, computed
(`elementwise_pass`). Ethos-U55 runs each ADD, SUB and MUL as a pass of its own. Ethos-U85 does not: there a pass in
a graph costs half its rate alone (512 cycles for a (1, 64, 32) SUB, 1024 alone) and an ADD behind a convolution is
chained into it at 0 cycles (resnet8), so its joint families price the whole op."""


def elementwise_pass(config: OpConfig, target: str, reads_int32: bool = False, clamped: bool = False) -> float:
    """The NPU cycles of the pass a binary op (ADD, SUB, MUL) runs as on target, where `ELEMENTWISE_PASS_ALONE`; 0 for
    other families and targets. Computed as regor's estimator does (`blocks.u55_elementwise_cycles`), for an op that
    reads int32 operands (reads_int32: an input RESCALE of it runs alone) or its int8 ones with the rescales fused,
    with or without a fused CLAMP (`layers.elementwise_passes` says which); the joint family `binary/OP` prices what
    the op costs beyond that pass. Vela's `Op Cycles` of such a pass is its NPU cycles: its memory access, 3 bytes per
    element fused, is at most a third of them on every Ethos-U55 size."""
    if not config.family.startswith("binary/") or target_family(target) not in ELEMENTWISE_PASS_ALONE:
        return 0.0
    op = config.family.partition("/")[2]
    return float(blocks.u55_elementwise_cycles(target, op, int(config.features["elements"]), reads_int32, clamped))


T = TypeVar("T")


def _memoized(method: Callable[..., T]) -> Callable[..., T]:
    """A pricing method of VelaCalibratedCost, memoized per model on what it reads: each Term's op, attributes and
    operand count, and the other arguments (lists as tuples). Whole-graph costs ask for the same few op configurations
    on every evaluation, and the local search in window after window (a convolution's layer: 24k times in one search
    on tv-regnet-x-400mf)."""

    def key_of(argument):
        if isinstance(argument, Term):
            return (argument.op, argument.attrs, len(argument.args))
        return tuple(argument) if isinstance(argument, list) else argument

    @functools.wraps(method)
    def priced(self, *arguments, **options):
        key = (method.__name__, *map(key_of, arguments), *sorted(options.items()))
        try:
            return self._layer_prices[key]
        except KeyError:
            value = self._layer_prices[key] = method(self, *arguments, **options)
            return value

    return priced


@dataclass
class VelaCalibratedCost:
    """Estimated inference cycles of one e-node on a configuration, from that configuration's Vela calibration file.

    `target` is given as a Configuration, or as a target alone for its default configuration; once built it is the
    target's name and `configuration` the whole configuration. The calibration (data, else the file at path, else
    the configuration's own file, `calibration_path`) must record that configuration (OtherConfigurationError
    otherwise): a configuration is never priced with another's numbers. Data that records no configuration, the
    working models of a fit, prices the target it names at its default configuration.

    docs/cost_model.md says how each op is priced and what the model
    does not see.
    """

    target: str | Configuration
    path: Path | None = None
    unit: str = field(init=False)
    data: dict | None = field(default=None, repr=False)
    """The calibration file's content (default: read from path, or the configuration's calibration file)."""
    configuration: Configuration = field(init=False)
    folds_transpose_into_producer: bool = field(init=False)
    """Vela folds a transpose into the write of the convolution in front of it (see eqsat.extract.cost)."""
    buffers_weights: bool = field(init=False)

    def __post_init__(self) -> None:
        self.configuration = self.target if isinstance(self.target, Configuration) else Configuration.of(self.target)
        self.target = self.configuration.target
        path = Path(self.path or calibration_path(self.configuration))
        source = path.name if self.path or self.data is None else "the calibration data given"
        if self.data is None:
            self.data = json.loads(path.read_text())
        if self.data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: calibration format {self.data.get('format_version')}, expected {FORMAT_VERSION}")
        recorded = recorded_configuration(self.data) if "system_config" in self.data else Configuration.of(self.data["target"])
        if recorded != self.configuration:
            raise OtherConfigurationError(f"{source} calibrates {recorded.describe()}, not {self.configuration.describe()}")
        self.unit = f"estimated inference cycles (Vela {self.data['vela_version']} cycles_total calibration)"
        self._models = self.data["models"]
        self.folds_transpose_into_producer = bool(self.data.get("folds_transpose_into_producer", False))
        constants = blocks.constants_memory_of(self.configuration)
        self.constants_off_chip = None if constants.name == "Sram" else constants
        """The memory that holds the constants when it is not the SRAM, where the feature maps are
        (`off_chip_constant_access_cycles`)."""
        self.buffers_weights = self.constants_off_chip is not None and target_family(self.target) is Generation.U55
        """Vela's scheduler may copy a convolution's weights from where the constants are into the SRAM before running
        it, and eqsat follows its choice (`weight_reads`): on Ethos-U55 with the constants off the SRAM."""
        self._feasibility = {_feasibility_key(*json.loads(k)): v for k, v in self.data.get("transpose_feasibility", {}).items()}
        self._layer_prices: dict[tuple, object] = {}
        """What each method marked `_memoized` said for each op configuration asked for: whole-graph costs ask for the
        same few on every evaluation."""
        self._binary_ops: dict[tuple, float] = {}
        """binary_op of each configuration and context asked for, keyed on the op without its instance (wider than
        `_memoized`'s key: every ADD of one shape shares its price)."""

    def cost(self, term: Term, out: TensorType | None, args: list[TensorType | None]) -> float:
        value = self.cost_of(op_config(term, out, args, self.target))
        if term.op in ("Slice", "Concat") and is_batched(out) and math.isfinite(value):
            # Vela copies a slice, and each input of a concat, with leading dimensions beyond HWC one leading index at a time
            value = max(value, sum(self.batched_copies(t) for t in (args if term.op == "Concat" else [out])))
        if term.op in ACCUMULATOR_MOVES and dtype_name(out) == "int32" and math.isfinite(value):
            value += self.standalone_rescale(out)
            if term.op == "Reshape":  # not removable between a producer and its fused RESCALE: a MemoryCopy
                value += self.memory_copy(out)
        return value

    @_memoized
    def batched_copies(self, tensor: TensorType | None) -> float:
        """Copying tensor one leading index (beyond HWC) at a time: one MemoryCopy of its HWC block per index, computed
        where `memory_copy` computes copies (int8 on Ethos-U55), else as calibrated on 5-D concats
        (`batched_copy/<dtype>`), else the whole-tensor copy's fit per block."""
        if not is_batched(tensor) or self._copies_computed(tensor):
            return self.memory_copy(tensor)
        model = self._models.get(f"batched_copy/{dtype_name(tensor)}")
        if model is not None:
            return op_cycles(model, OpConfig("batched_copy", batched_copy_features(tensor)))
        return math.prod(tensor.shape[:-3]) * self.memory_copy(TensorType(tuple(tensor.shape[-3:]), tensor.dtype))

    def _copies_computed(self, tensor: TensorType | None) -> bool:
        """Whether a copy of tensor is computed as regor's estimator computes it (`blocks.u55_memory_copy_cycles`):
        an int8 copy on Ethos-U55."""
        return tensor is not None and target_family(self.target) is Generation.U55 and dtype_name(tensor) == "int8"

    def memory_copy(self, tensor: TensorType | None) -> float:
        """A MemoryCopy of tensor: on Ethos-U55, int8, as regor's estimator computes it (`blocks.u55_memory_copy_cycles`),
        one copy per leading index beyond HWC; else as calibrated on the copies of concatenated graph inputs
        (`copy/<dtype>`; Vela charges a reshape's, a slice's and a concat input's copy of one shape alike: (1, 8, 8,
        16) int8, 756 cycles on Ethos-U85); without that family, as a SLICE measured alone."""
        if self._copies_computed(tensor):  # one copy of the HWC block per leading index, as Vela splits it
            height, width, depth = (1, 1, 1, *tensor.shape)[-3:]
            return math.prod(tensor.shape[:-3]) * float(blocks.u55_memory_copy_cycles(self.target, (height, width, depth)))
        model = self._models.get(f"copy/{dtype_name(tensor)}")
        if model is not None:
            return op_cycles(model, OpConfig("copy", copy_features(tensor)))
        model = self._models.get(f"isolated/slice/{dtype_name(tensor)}") or self._models.get("isolated/slice/int8")
        if model is None:
            return float(elements(tensor))
        return op_cycles(model, OpConfig("isolated/slice", _basic(tensor)))

    def folded_transpose_copy(self, sliced: TensorType, perm: tuple[int, ...]) -> float | None:
        """A SLICE's MemoryCopy of sliced that also writes it transposed by perm (one pass; folded on Ethos-U85),
        as calibrated (`ctx_slice_transpose`); None when the target has no such family."""
        config = slice_transpose_config(sliced, perm, self.target)
        model = self._models.get(config.family)
        return None if model is None else op_cycles(model, config)

    @_memoized
    def boundary_transpose(self, term: Term, out: TensorType | None, args: list[TensorType | None], brick_in: bool, brick_out: bool) -> float:
        """A TRANSPOSE term that reads a graph input (brick_in False) or writes a graph output (brick_out False):
        its passes priced with that side in NHWC, where Vela keeps a graph's inputs and outputs
        (`layers.transposes_at_graph_io`)."""
        return self.cost_of(transpose_config(args[0] if args else None, out, tuple(term.attrs[0]), self.target, brick_in, brick_out))

    def standalone_clamp(self, out: TensorType | None, brick_in: bool = True, brick_out: bool = True) -> float:
        """A CLAMP to out that no op fuses as its activation (`layers.clamps_alone`): a 1x1 pooling with the CLAMP
        fused, one per leading index beyond HWC, as regor's estimator computes it: on Ethos-U85 an unpermuted
        transpose pass, the larger of its NPU and access cycles (`blocks.u85_transpose_cycles`, reading and writing
        brick format or NHWC as told); on Ethos-U55 an int8 MemoryCopy (`memory_copy`, NHWC); else as measured alone
        (`isolated/clamp/<dtype>`).
        Equal to Vela on a (1, 32, 32, 16) CLAMP of a graph input: 9536 cycles on Ethos-U85-256, 16768 on
        Ethos-U55-128 (the fit of CLAMPs measured alone says 11829 and 24495)."""
        if out is None:
            return 0.0
        if target_family(self.target) is Generation.U85:
            height, width, depth = (1, 1, 1, *out.shape)[-3:]
            pass_ = blocks.u85_transpose_cycles(self.target, (height, width, depth), blocks.UNPERMUTED, _bytes(out), brick_in, brick_out)
            return math.prod(out.shape[:-3]) * float(max(pass_))
        if self._copies_computed(out):
            return self.memory_copy(out)
        model = self._model_for(f"isolated/clamp/{dtype_name(out)}")
        return float(elements(out)) if model is None else op_cycles(model, OpConfig("isolated/clamp", _basic(out)))

    def standalone_rescale(self, accumulator: TensorType | None, per_channel: bool = False) -> float:
        """What an int32 -> int8 RESCALE of accumulator (per tensor, or per channel) costs when Vela cannot fuse it into
        its producer (measured alone)."""
        model = self._models.get("isolated/rescale/int32->int8" + ("/per-channel" if per_channel else ""))
        if model is None:
            return 0.0
        return op_cycles(model, OpConfig("isolated/rescale", _basic(accumulator)))

    def fuses_input_rescale_into(self, op: str) -> bool:
        """Whether Vela can fuse an input RESCALE into the elementwise op (ADD, SUB, MUL) reading it alone, on target
        (measured, tests/extract/test_layers.py; on Ethos-U55 an ADD or SUB also needs what `fuses_add_sub` checks)."""
        return op in INPUT_RESCALE_FUSING_OPS

    def fuses_add_sub(self, scales: tuple[float | None, ...] | None, output_rescaled_alone: bool) -> bool:
        """Whether Vela runs an ADD or SUB as one pass with its input and output RESCALEs fused into it, on target.

        Where `ADD_SUB_FUSED_INPUT_SCALE` restricts it (Ethos-U55), only when both operands are input RESCALEs that
        it alone reads (scales: their scales, None for one whose scale is unknown; None when an operand is no such
        rescale), one scaling by that scale and the other by less, and its int32 output is read by one output
        RESCALE alone (output_rescaled_alone); otherwise its input RESCALEs and its output RESCALE run as layers of
        their own (measured, tests/extract/test_layers.py: also when the ADD's int32 output is a graph output or is read
        by another op or a second RESCALE). Elsewhere always, as far as these contexts go."""
        fused = ADD_SUB_FUSED_INPUT_SCALE.get(target_family(self.target))
        if fused is None:
            return True
        if scales is None or len(scales) != 2 or not output_rescaled_alone:
            return False
        if None in scales:
            return True
        return max(scales) == fused and min(scales) < fused

    @_memoized
    def standalone_input_rescale(self, source: TensorType | None, out: TensorType | None) -> float:
        """An input RESCALE (source -> int32) that Vela cannot fuse into the op reading it (measured alone)."""
        model = self._models.get(f"isolated/rescale/{dtype_name(source)}->int32") or self._models.get("isolated/rescale/int8->int32")
        if model is None:
            return 0.0
        return op_cycles(model, OpConfig("isolated/rescale", _basic(out)))

    def input_rescale_beside_int32(self, reader: Term, source: TensorType | None, out: TensorType | None) -> float:
        """An input RESCALE (source -> out) that the binary op reader reads beside a plain int32 operand (one no input
        RESCALE writes: a graph input, a constant, another op's int32 output, broadcast or not): Vela runs it as a
        layer of its own, the rescale measured alone. Measured with hand-built graphs (tests/extract/test_layers.py):
        - Ethos-U85 computes the op in that layer too (0 cycles for the op), so it costs the op's elementwise pass
          as well: a (1, 64, 32) ADD of a rescaled int8 tensor and an int32 one costs 3456 cycles, the rescale
          alone 1920, the ADD of two rescaled tensors 512;
        - Ethos-U55 runs the op as its own pass, which the op's price holds already (`elementwise_pass`): a
          (1, 64, 32) MUL costs 3072 + 2560 for the rescale, 2560 for the MUL and 2560 for its output rescale
          (`layers.output_rescales_alone`), 10752 in all, against 2048 for the MUL of two rescaled tensors."""
        price = self.standalone_input_rescale(source, out)
        if target_family(self.target) in ELEMENTWISE_PASS_ALONE:
            return price
        config = op_config(reader, out, [out, out], self.target)
        model = self._models.get(f"isolated/{config.family}")
        return price + (op_cycles(model, config) if model is not None else 0.0)

    def binary_op(self, term: Term, out: TensorType | None, args: list[TensorType | None], reads_int32: bool, clamped: bool) -> float:
        """An ADD, SUB or MUL as Vela runs it in its graph: what `cost` charges, with its elementwise pass in the
        context that layer formation found (`elementwise_pass`; `cost` assumes fused int8 operands and no CLAMP)."""
        key = (op_of(term.attrs[0]), out, tuple(args), reads_int32, clamped)  # the op, not its instance tag
        try:
            return self._binary_ops[key]
        except KeyError:
            value = self._binary_ops[key] = self.cost_of(op_config(term, out, args, self.target), reads_int32, clamped)
            return value

    @_memoized
    def chained_op(self, primary: Term, out: TensorType | None, args: list[TensorType | None], bricks: tuple[bool, bool]) -> float:
        """What an ADD, SUB or MUL chained into the convolution primary (its output out, its operands args, its input
        and the group's output in brick format or NHWC as bricks says) adds to the convolution's layer: the layer
        priced with the op's output cycles added to the convolution's (`chained_block_cycles`:
        `EstimateAOCyclesPerElement` sums them over the group) and, where computed, the op's other operand read
        besides (`chained_access_cycles`), less the layer alone."""
        config = op_config(primary, out, args, self.target, bricks=bricks)
        chained = config.features.get("chained_block_cycles")
        if chained is None:
            return 0.0
        access = {"access_cycles": config.features["chained_access_cycles"]} if "chained_access_cycles" in config.features else {}
        return self.cost_of(OpConfig(config.family, config.features | {"block_cycles": chained} | access)) - self.cost_of(config)

    @_memoized
    def convolution(self, term: Term, out: TensorType | None, args: list[TensorType | None], bricks: tuple[bool, bool]) -> float:
        """A CONV2D or DEPTHWISE_CONV2D term whose input or output Vela stores in NHWC (bricks: whether each is in
        brick format; `layers.convolutions_reading_or_writing_nhwc`)."""
        return self.cost_of(op_config(term, out, args, self.target, bricks=bricks))

    @_memoized
    def transposed_write(
        self, primary: Term, out: TensorType | None, args: list[TensorType | None], transpose: blocks.Shape3, bricks: tuple[bool, bool] = (True, True)
    ) -> float:
        """What writing the output of the convolution primary transposed by transpose (a TRANSPOSE fused into its op
        group, `layers.transposed_convolution_writes`) adds to its layer: the layer priced with the block cycles and
        feature-map bytes of that write (`conv_block_features`), less the layer alone; at least 0. Vela's NPU cycles of
        such a write are the computed ones on all 125 groups of tests/extract/test_layers.py, and are below the plain
        convolution's on some (an (8, 32, 32) 1x1 convolution on Ethos-U85-256 writing (0, 2, 3, 1): 4512, alone
        4960); taken as negative, such a price would let extraction prefer a graph for the transposes it adds."""
        plain = op_config(primary, out, args, self.target)
        written = op_config(primary, out, args, self.target, transpose, bricks)
        return max(0.0, self.cost_of(written) - self.cost_of(plain))

    def cost_of(self, config: OpConfig, reads_int32: bool = False, clamped: bool = False) -> float:
        """What config costs; a binary op's elementwise pass reads int32 operands, or has a CLAMP fused, as told."""
        if config.fixed is not None:
            return config.fixed
        if config.transpose is not None and not self.transpose_runs(*config.transpose):
            return math.inf
        model = self._model_for(config.family)
        if model is None:
            return float(config.features.get("elements", 1.0))
        value = op_cycles(model, self._priced(config)) + elementwise_pass(config, self.target, reads_int32, clamped)
        extra = config.features.get("with_input_rescales", 0.0)
        if extra:
            rescale = self._model_for("rescale_in/int8")
            if rescale is not None:
                value += extra * op_cycles(rescale, config)
        return value

    def is_memory_bound(self, term: Term, out: TensorType | None, args: list[TensorType | None]) -> bool:
        """Whether the model prices term by its memory access rather than its NPU cycles (in most of its cycles)."""
        config = op_config(term, out, args, self.target)
        model = self._model_for(config.family) if config.fixed is None else None
        if model is None:
            return False
        passes = npu_and_access(model, self._priced(config))
        return sum(a for n, a in passes if a > n) > sum(n for n, a in passes if a <= n)

    def _priced(self, config: OpConfig) -> OpConfig:
        """config as this configuration prices it: a convolution, where the memory holding its constants is not the
        SRAM (`constants_off_chip`), takes on Ethos-U85 the slower of the two memories, and on Ethos-U55 reads its constants from theirs
        (`weights.WeightReads.unbuffered`: the weights read where they are; `weight_reads` says when Vela buffers them)."""
        features = config.features
        if "access_cycles" not in features or self.constants_off_chip is None:
            return config
        if target_family(self.target) is Generation.U55:
            sram = features["feature_map_bytes"] / blocks.sram_of(self.target).bandwidth
            constants = (features["weight_bytes"] + features["scale_bytes"]) / self.constants_off_chip.bandwidth
            features = features | {"access_cycles": max(sram, constants)}
        else:
            off_chip = float(off_chip_constant_access_cycles(self.target, features, self.constants_off_chip))
            features = features | {k: max(features[k], off_chip) for k in ("access_cycles", "chained_access_cycles") if k in features}
        return OpConfig(config.family, features, config.fixed, config.transpose, config.passes)

    @_memoized
    def weight_reads(self, term: Term, out: TensorType | None, args: list[TensorType | None], bricks: tuple[bool, bool] = (True, True)) -> WeightReads | None:
        """What Vela's choice of where to read a convolution's weights from reads (`weights.WeightReads`), where it
        has one: on Ethos-U55, for a CONV2D or DEPTHWISE_CONV2D run once whose constants the memory mode keeps off the
        SRAM, its input and output in brick format or NHWC as bricks says; else None (the term's `cost` stands). Its
        NPU cycles are those regor's estimator counts (`block_cycles`, the bias reads at the latency of the memory
        they are read from), not the conv2d family's fit: that fit mixes samples Vela buffered with ones it did not."""
        if not self.buffers_weights or term.op != "Opaque":
            return None
        config = op_config(term, out, args, self.target, bricks=bricks)
        features = config.features
        reads = None
        if "refetches" in features and features["runs"] == 1 and not config.passes:
            in_place = op_config(term, out, args, self.target, bricks=bricks, bias_latency=self.constants_off_chip.read_latency)
            reads = WeightReads(
                npu=in_place.features["block_cycles"],
                buffered_npu=features["block_cycles"],
                feature_map_access=features["feature_map_bytes"] / blocks.sram_of(self.target).bandwidth,
                ifm_bytes=int(features["ifm_bytes"]),
                weight_bytes=int(features["weight_bytes"] / features["refetches"]),
                scale_bytes=int(features["scale_bytes"] / features["refetches"]),
                refetches=int(features["refetches"]),
                depth=int(features["ofm_depth"]),
                block_depth=int(features["ofm_block_depth"]),
                constants=self.constants_off_chip,
                sram=blocks.sram_of(self.target),
            )
        return reads

    def _model_for(self, family: str) -> dict | None:
        """The fitted model of family, else of the same op for int8, else the CLAMP proxy."""
        if family in self._models:
            return self._models[family]
        kind = family.split("/", 1)[0]
        for fallback in (f"{kind}/int8", f"isolated/clamp/{family.rsplit('/', 1)[-1]}", "isolated/clamp/int8"):
            if fallback in self._models:
                return self._models[fallback]
        return None

    def running_transposes_of(self, graph: Graph) -> VelaCalibratedCost:
        """This model, for which every TRANSPOSE configuration (shape, permutation, dtype) of graph runs.

        A graph's own transposes run if the graph does: if Vela could not run one, the lowering would fail
        with or without eqsat. So an extracted graph whose transposes each run provably, ran in calibration
        or are the given graph's own, compiles whenever the given one does. The Arm backend keeps a U55
        permute beyond the worst-case bound as it is when Vela compiles it
        (DecomposePermuteForU55Pass._violates_exact_constraint); priced `math.inf` instead, the given graph
        and every equivalent would cost inf, and nothing could be extracted (pixel_unshuffle of a
        (1, 12, 270, 480) map on Ethos-U55: its (1, 12, 135, 2, 240, 2) transpose).
        """
        configs = (
            op_config(term, graph.types[value], [graph.types[a] for a in term.args], self.target)
            for value, term in enumerate(graph.terms)
            if term.op == "Transpose"
        )
        model = copy.copy(self)
        model._feasibility = self._feasibility | {c.transpose: True for c in configs if c.transpose is not None}
        model._layer_prices = {}  # some price transposes: what runs has changed
        return model

    def transpose_runs(self, shape: tuple[int, ...], perm: tuple[int, ...], dtype: str) -> bool:
        """Whether Vela runs this transpose on the NPU of target."""
        if target_family(self.target) != Generation.U55 or not violates_u55_worst_case(shape):
            return True
        return self._feasibility.get(_feasibility_key(shape, perm, dtype), False)


def _feasibility_key(shape, perm, dtype: str) -> tuple:
    return tuple(shape), tuple(perm), dtype
