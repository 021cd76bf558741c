"""Fitting the cost model's per-family linear models to measured calibration samples.

Motivation
----------
`eqsat.extract.vela_cost.VelaCalibratedCost` prices an op as a linear
function of features of its configuration, with one set of coefficients for
each family and target. This module finds those coefficients from the
samples that `eqsat.calibration.calibrate` measured with Vela. It describes each
sample through `vela_cost.op_config`, the same function the cost model uses,
so fitting and pricing always agree on families and features.

Overview
--------
1. `observations` turns one measured sample into observations (family,
   features, cycles) of one measure: Vela's NPU cycles, its memory-access
   cycles (the largest access column of a layer) or its `Op Cycles` (the
   larger of the two, what `cycles_total` adds up). A sample gives the
   cycles of the whole graph, or, for a context, the cycles of the role that
   the context is about. Some families
   only document:
   - `isolated/` families are ops measured alone that are priced in context
     (fused, folded, written in place);
   - `context/` families are what one context costs.
2. `fit` fits every single-op family twice by non-negative least squares:
   on the NPU cycles with its form's features (`form_of`), and on the
   access cycles as the largest of one or more linear pieces
   (`access_forms_of`, `fit_max_of_linear`); the cost model
   prices an op as the larger of the two, as Vela does per layer. A
   `COMPUTED` family (Ethos-U85 transposes) is not fitted: eqsat computes
   both as Vela's estimator does, and the samples only score it.
   Contexts are fitted on `Op Cycles`. Each sample is weighted by 1/cycles, so small and
   large shapes count alike. The UNWEIGHTED families average over contexts
   and are fitted unweighted.
3. RESCALE, CLAMP and the int32 ADD/SUB/MUL are fitted jointly on whole
   `module` graphs (`fit_jointly`), on their `Op Cycles`: in those graphs,
   Vela's fusion decides which op pays.
4. `quality` gives the fit quality (n, R², mean absolute % error).
   `transpose_feasibility` lists the large transposes that were probed and
   whether Vela ran each one.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

import numpy as np

from eqsat.ir import TensorType, Term, with_window
from eqsat.ops import concat, reduce, transpose
from eqsat.extract import vela_cost
from eqsat.calibration.graphs import Sample, conv_geometry, deserialize_node
from eqsat.extract.vela_cost import OpConfig, op_config

_PASS_KINDS = ("021", "102", "210", "120", "201")
FORMS = {
    # Ethos-U55: every pass is a 1x1 pooling; its cost depends on which axes it swaps.
    "u55:transpose": ("one", "passes", *(f"moved_{k}" for k in _PASS_KINDS), *(f"rows_{k}" for k in _PASS_KINDS)),
    "concat": ("inputs", "elements", "rows"),
    # a whole-tensor MemoryCopy: its rows, the 16-byte bricks it writes, and its height
    "copy": ("one", "elements", "rows", "bricks", "height"),
    # Ethos-U85 copying a slice and writing it transposed in the same pass.
    "slice_transpose": ("one", "moved", "padded_in", "padded_out", "rows_in", "rows_out"),
    # Vela's own estimate over the block configuration its search picks (vela_cost.conv_block_features), and the
    # weights it streams in from flash or DRAM (memory modes whose constants are not in SRAM).
    "conv2d": ("one", "block_cycles", "weights"),
    "depthwise_conv2d": ("one", "block_cycles", "weights"),
    "matmul": ("one", "macs", "elements", "in_elements"),
    "avg_pool2d": ("one", "elements", "in_elements", "in_elements_global"),
    "max_pool2d": ("one", "elements", "in_elements", "in_elements_global"),
    # Ethos-U55: output microblocks, and those times the window's positions (a step each).
    "u55:max_pool2d": ("one", "microblocks", "microblock_steps"),
    "reduce_sum": ("one", "elements", "in_elements", "in_elements_last", "in_batched_elements"),
    "reduce_max": ("one", "elements", "in_elements", "in_elements_last", "in_batched_elements"),
    "resize": ("one", "elements", "in_elements"),
}
DEFAULT_FORM = ("one", "elements", "rows")
ACCESS_FEATURES = {
    "transpose": ("padded_out", "rows_out", "rows_in"),
    "conv2d": ("feature_map_bytes", "weight_reads", "scale_reads"),
    "depthwise_conv2d": ("feature_map_bytes", "weight_reads", "scale_reads"),
    "matmul": ("out_channels",),
    "max_pool2d": ("in_elements",),
}
"""Features the access model of a family adds to its NPU form: a transpose's writes and reads, a
convolution's feature maps, weights and per-channel bias and scale (on Ethos-U55 read from flash with the weights: a
1x1 conv of 8 -> 160 channels takes 1058 NPU and 2256 access cycles), a pooling's input reads (its
Ethos-U55 NPU form counts only output microblocks)."""
NPU_ONLY = ("block_cycles",)
"""Features of an NPU form that its access model leaves out: Vela's NPU estimate says nothing of the bytes a layer moves."""
SRAM_ONLY_FEATURES = ("feature_map_bytes", "weight_reads")
"""Access features that only the SRAM's access model is fitted on: every memory mode eqsat prices keeps the arena in
SRAM (vela.ini `arena_mem_area`), and where constants live in flash or DRAM, Vela streams a convolution's weights
into SRAM once and reads them again from there per OFM block position (regor `MeasureAccessCycles`,
`weightStagingMemory`). Fitted on flash too, the few flash-bound samples of Ethos-U55-128 gave feature-map and
re-read coefficients that priced its spatial convolutions at up to 3.9 times Vela's cycles (held-out MAPE 47%)."""
ACCESS_PIECES = {
    # A transpose pass that writes less than a 16-byte brick per position has access cycles that grow with its
    # output plane times the plane's longer side: on Ethos-U85 (3, 9216) -> (9216, 3) costs 3110400 access
    # cycles (0.0366 per unit of that feature) and (3, 96, 96) -> (96, 96, 3) 43200 (0.0488), while their NPU
    # cycles are about 74000 each. Ethos-U85 transposes take the access cycles Vela computes instead (COMPUTED);
    # Ethos-U55 and the slice copies Ethos-U85 writes transposed keep it.
    "transpose": (("narrow_hw_max",),),
    "slice_transpose": (("narrow_hw_max",),),
}
"""Further linear pieces of a family's access model: it predicts the largest of its pieces."""
COMPUTED = {
    # Ethos-U85 transposes: the NPU and SRAM access cycles of each pass as Vela's estimator computes them
    # (blocks.u85_transpose_cycles), equal to Vela on most calibration samples. A fit would trade those for the
    # few it misses: on Ethos-U85-2048 it gave 0.94 x block_npu + 11, 5% off every exact pass.
    "u85:transpose": ("block_npu", "block_access"),
}
"""Families taken as computed, not fitted: their (NPU feature, access feature), each with coefficient 1 (the access
piece in SRAM, where every memory mode eqsat prices keeps the feature maps); the samples only score them."""


def computed_model(npu: list[Observation], access: list[Observation], features: tuple[str, str]) -> dict:
    """A `COMPUTED` family's model: its features with coefficient 1, scored on the NPU and access samples."""

    def scored(feature: str, observations_: list[Observation]) -> dict:
        x, y = _matrix(observations_, (feature,))
        return quality(x[:, 0] if len(x) else np.zeros(0), y)

    npu_feature, access_feature = features
    piece = {"features": [access_feature], "coef": [1.0], "memory": "sram"}
    return {"features": [npu_feature], "coef": [1.0], **scored(npu_feature, npu), "access": {"pieces": [piece], **scored(access_feature, access)}}


def _form_key(family: str, target: str) -> str:
    """'<generation>:<kind>', the key of a family's forms on target (FORMS, COMPUTED)."""
    return f"{vela_cost.target_family(target)}:{family.split('/', 1)[0]}"


def form_of(family: str, target: str) -> tuple[str, ...]:
    """The features a family's NPU model is fitted on (per target generation where they differ)."""
    kind = family.split("/", 1)[0]
    return FORMS.get(_form_key(family, target), FORMS.get(kind, DEFAULT_FORM))


def access_forms_of(family: str, target: str) -> list[tuple[str, ...]]:
    """The features of each linear piece of a family's memory-access model (it predicts their maximum)."""
    kind = family.split("/", 1)[0]
    form = form_of(family, target)
    first = tuple(f for f in form if f not in NPU_ONLY)
    first += tuple(f for f in ACCESS_FEATURES.get(kind, ()) if f not in first)
    return [first, *ACCESS_PIECES.get(kind, ())]


def _tt(shape, dtype: str) -> TensorType:
    return TensorType(tuple(shape), f"torch.{dtype}")


def _term(op: str, arity: int, attrs: tuple = ()) -> Term:
    return Term(op, tuple(range(arity)), attrs)


def sample_config(sample: Sample, target: str) -> OpConfig:
    """The op configuration a sample measures, through the cost model's own `op_config`; a convolution's block
    features for feature maps in NHWC, as a sample reads a graph input and writes a graph output, where `op_config`
    prices one between other NPU ops, in brick format (`vela_cost.conv_block_features`)."""
    p, kind = sample.params, sample.kind

    def opaque(name: str, out: TensorType, args: list[TensorType]) -> OpConfig:
        return op_config(_term("Opaque", len(args), (f"tosa.{name}.default#0",)), out, args, target)

    def elementwise(name: str, out: TensorType, args: list[TensorType]) -> OpConfig:
        return op_config(_term("Elementwise", len(args), (f"tosa.{name}.default#0",)), out, args, target)

    if kind == "transpose":  # the graph's input and output: NHWC, not the brick format op_config prices
        out = _tt(transpose.output_shape(p["shape"], p["perm"]), p["dtype"])
        return vela_cost.transpose_config(_tt(p["shape"], p["dtype"]), out, tuple(p["perm"]), target, brick_in=False, brick_out=False)
    if kind == "concat":
        out = _tt(concat.output_shape(p["shapes"], p["axis"]), p["dtype"])
        args = [_tt(s, p["dtype"]) for s in p["shapes"]]
        return op_config(_term("Concat", len(args), (p["axis"],)), out, args, target)
    if kind == "slice":
        return op_config(_term("Slice", 1, (tuple(p["start"]), tuple(p["size"]))), _tt(p["size"], p["dtype"]), [_tt(p["shape"], p["dtype"])], target)
    if kind in ("clamp",):
        return elementwise("CLAMP", _tt(p["shape"], p["dtype"]), [_tt(p["shape"], p["dtype"])])
    if kind == "table":
        return opaque("TABLE", _tt(p["shape"], "int8" if p["dtype"] == "int8" else "int32"), [_tt(p["shape"], p["dtype"]), _tt([256], p["dtype"])])
    if kind == "binary":
        return elementwise(p["op"], _tt(p["shape"], "int32"), [_tt(p["shape"], "int32")] * 2)
    if kind in ("conv2d", "depthwise_conv2d"):  # the graph's input and output: NHWC, not the brick format op_config prices
        k, depthwise = p["k"], kind == "depthwise_conv2d"
        _, oh, ow = conv_geometry(p["h"], p["w"], k, p["stride"])
        cin, cout = (p["c"], p["c"]) if depthwise else (p["cin"], p["cout"])
        weights = _tt([k, k, cin, 1] if depthwise else [cout, k, k, cin], "int8")
        args, out = [_tt([1, p["h"], p["w"], cin], "int8"), weights, _tt([cout], "int32")], _tt([1, oh, ow, cout], "int32")
        config = opaque(kind.upper(), out, args)
        return OpConfig(config.family, config.features | vela_cost.conv_block_features(args[0], out, weights, (k, k), depthwise, target, brick_in=False, brick_out=False))
    if kind == "matmul":
        args = [_tt([p["n"], p["h"], p["c"]], "int8"), _tt([p["n"], p["c"], p["w"]], "int8")]
        return opaque("MATMUL", _tt([p["n"], p["h"], p["w"]], "int32"), args)
    if kind in ("avg_pool2d", "max_pool2d"):
        _, h, w, c = p["shape"]
        _, oh, ow = conv_geometry(h, w, p["k"], p["stride"], same=False)
        key = with_window(f"tosa.{kind.upper()}.default#0", (p["k"], p["k"]))
        return op_config(_term("Opaque", 1, (key,)), _tt([1, oh, ow, c], "int8"), [_tt(p["shape"], "int8")], target)
    if kind in ("reduce_sum", "reduce_max"):
        dtype = "int32" if kind == "reduce_sum" else "int8"
        return opaque(kind.upper(), _tt(reduce.output_shape(p["shape"], p["axis"]), dtype), [_tt(p["shape"], dtype)])
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


def measured(record: dict, measure: str) -> tuple[dict, float]:
    """A record's cycles of one measure (see calibrate.MEASURES): per role, and in all (none when it was not recorded)."""
    suffix = "" if measure == "npu" else f"_{measure}"
    return record.get(f"roles{suffix}", {}), float(record.get(f"cycles{suffix}", 0))


def observations(record: dict, target: str, measure: str = "npu") -> list[Observation]:
    """What one measured sample says about the model families, in one measure (documentation-only
    families start with 'isolated/' or 'context/')."""
    if record["status"] != "ok":
        return []
    sample = Sample(record["kind"], record["params"], record["split"])
    (roles, total), p, key = measured(record, measure), sample.params, sample.key
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
    if kind == "concat_copy":  # two whole-tensor copies of one shape
        features = {name: 2 * value for name, value in vela_cost.copy_features(_tt(p["shape"], p["dtype"])).items()}
        return [Observation(f"copy/{p['dtype']}", features, total, key)]
    if kind == "batched_concat":  # per input, one copy of its HWC block per leading index
        blocks = [vela_cost.batched_copy_features(_tt(shape, "int8")) for shape in p["shapes"]]
        features = {name: sum(b[name] for b in blocks) for name in blocks[0]}
        return [Observation("batched_copy/int8", features, total, key)]
    if kind == "ctx_slice_transpose":  # the slice's copy and the transpose written by it, as one op
        config = vela_cost.slice_transpose_config(_tt(p["size"], "int8"), tuple(p["perm"]), target)
        return [Observation(config.family, config.features, float(roles.get("slice", 0) + roles.get("transpose", 0)), key)]
    if kind in ("ctx_chain", "module"):
        return []  # fitted jointly, see fit_jointly
    if kind in ("ctx_reshape", "ctx_transpose_conv"):
        role = {"ctx_slice": "slice", "ctx_reshape": "reshape", "ctx_transpose_conv": "transpose"}[kind]
        detail = p.get("consumer") or p.get("order") or ""
        return [Observation(f"context/{role}-{detail}".rstrip("-"), {"one": 1.0}, float(roles.get(role, 0)), key)]
    config = sample_config(sample, target)
    if config.fixed is not None:
        return []
    if kind == "reduce_sum" and p["axis"] != len(p["shape"]) - 1 and p["shape"][p["axis"]] > 1:
        # regor sums another axis than the innermost behind a transpose, which layer formation prices on its own
        # (eqsat.extract.layers.reduce_sums_over_channels): the family is fitted on innermost sums alone
        return [Observation("isolated/reduce_sum/other-axis", config.features, total, key)]
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


MAX_FIT_ROUNDS = 20


SEED = 2.0
"""How far the first piece of a max-of-linear model must underestimate a sample for it to seed the others."""


def fit_max_of_linear(observations_: list[Observation], forms: list[tuple[str, ...]], weighted: bool = True) -> dict:
    """Fit y = max over pieces k of (coef_k · features_k), each piece by NNLS on the samples it explains.

    The first piece is fitted on all samples; the samples it underestimates by more than half (by more than a
    factor SEED) seed the other pieces; then each sample goes to the piece that predicts most for it, and the pieces
    are refitted, until the assignment settles (at most MAX_FIT_ROUNDS rounds, deterministic).
    """
    if len(forms) == 1:
        one = fit_family(observations_, forms[0], weighted)
        return {"pieces": [{"features": one["features"], "coef": one["coef"]}], **{k: one[k] for k in ("n", "r2", "mape")}}
    xs = [_matrix(observations_, form)[0] for form in forms]
    y = _matrix(observations_, forms[0])[1]
    first = np.array(fit_family(observations_, forms[0], weighted)["coef"])
    assign = np.where(y > SEED * (xs[0] @ first), 1, 0)
    for _ in range(MAX_FIT_ROUNDS):
        coefs = []
        for k, form in enumerate(forms):
            mine = [o for o, a in zip(observations_, assign) if a == k]
            coefs.append(np.array(fit_family(mine, form, weighted)["coef"]) if mine else np.zeros(len(form)))
        predictions = np.array([x @ c for x, c in zip(xs, coefs)])
        settled = np.argmax(predictions, axis=0)
        if np.array_equal(settled, assign):
            break
        assign = settled
    pieces = [{"features": list(form), "coef": [float(c) for c in coef]} for form, coef in zip(forms, coefs)]
    return {"pieces": pieces, **quality(predictions.max(axis=0), y)}


MEMORIES = ("sram", "dram", "flash")
"""The memories whose access cycles Vela estimates per layer; an op's access cycles are the largest of them."""


MIN_BINDING = 5


def binding(observations_: list[Observation], npu: dict[str, float]) -> list[Observation]:
    """The flash observations where flash binds (its access cycles reach the NPU cycles), if there are
    MIN_BINDING of them, else all. Where it does not bind, Vela may have buffered the weights in SRAM
    ahead of the op and counts only part of their transfer: a 5x5 conv of
    32 -> 32 channels over 32x8 positions reads 1280 of its 25600 weight bytes' flash cycles, and runs 53792
    NPU cycles; a fully connected layer streams all of its weights from flash."""
    found = [o for o in observations_ if o.cycles >= npu.get(o.key, 0.0)]
    return found if len(found) >= MIN_BINDING else observations_


def fit_access(observations_: list[Observation], per_memory: dict[str, list[Observation]], forms: list[tuple[str, ...]], weighted: bool = True) -> dict:
    """The memory-access model of a family: the largest of one model per memory, as Vela takes the largest
    of its per-memory access cycles (on Ethos-U55 a fully connected layer is bound by reading its weights
    from flash, a spatial convolution by its feature maps in SRAM: one linear model mixes the two).

    Each memory's model is `fit_max_of_linear` over forms, fitted on that memory's cycles where it binds
    (`binding`), without the SRAM-only features elsewhere (`SRAM_ONLY_FEATURES`); a memory the family
    never touches adds no piece. Without per-memory samples, the largest access column is fitted.
    Quality is scored against the largest access column.
    """
    used = {m: obs for m, obs in per_memory.items() if obs and max(o.cycles for o in obs) > 0}
    if not used:
        return fit_max_of_linear(observations_, forms, weighted)
    pieces = []
    for memory, obs in used.items():
        own = [tuple(f for f in form if memory == "sram" or f not in SRAM_ONLY_FEATURES) for form in forms]
        pieces += [{**piece, "memory": memory} for piece in fit_max_of_linear(obs, own, weighted)["pieces"]]
    predicted = np.array([max(vela_cost._linear(piece, o.features) for piece in pieces) for o in observations_])
    return {"pieces": pieces, **quality(predicted, np.array([o.cycles for o in observations_]))}


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
    return [op_config(*deserialize_node(node), target) for node in record["nodes"]]


def context_layers(record: dict, target: str, known: dict[str, dict]) -> float | None:
    """What a module sample's layers cost beyond its ops' joint prices, priced with the known models as `cost.graph_cost`
    prices them: the RESCALEs that Vela runs alone (`layers.rescales_alone`: input rescales run alone, and output
    rescales of unfused ops or of an int32 output another op reads too), and each binary op's elementwise pass in its
    context (`layers.elementwise_passes`); None for samples measured without their operands."""
    from eqsat.extract import cost, layers

    if "operands" not in record:
        return None
    nodes = [deserialize_node(node) for node in record["nodes"]]
    graph = {i: Term(term.op, tuple(operands), term.attrs) for i, ((term, _, _), operands) in enumerate(zip(nodes, record["operands"]))}
    types = {i: out for i, (_, out, _) in enumerate(nodes)}
    model = vela_cost.VelaCalibratedCost(target, data={"format_version": vela_cost.FORMAT_VERSION, "target": target, "vela_version": "", "models": known})
    live = layers.LiveGraph(graph, layers.readers_of(graph, record["outputs"]), types.get, model)
    unfused = layers.unfused_add_subs(live)
    price = sum(cost.layer_cycles(layer, live, None) for layer in layers.rescales_alone(live, unfused).values())
    for value, layer in layers.elementwise_passes(live, unfused).items():
        term = graph[value]
        config = op_config(term, types[value], [types[a] for a in term.args], target)
        price += vela_cost.elementwise_pass(config, target, *layer.args)
    return price


def _predict(models: dict[str, dict], config: OpConfig) -> float:
    if config.fixed is not None:
        return 0.0 if math.isinf(config.fixed) else config.fixed
    model = models.get(config.family) or models.get(config.family.split("/", 1)[0] + "/int8")
    if model is None:
        return 0.0
    return vela_cost.op_cycles(model, config)


JOINT_SHRINK = 0.05


def fit_jointly(records: list[dict], target: str, known: dict[str, dict]) -> dict[str, dict]:
    """Fit JOINT_FORMS' families together: a graph's cycles = the sum of its ops' costs (NNLS, weights 1/cycles).

    Ops of other families are priced with the `known` single-op models and subtracted first, and so are the
    layers that layer formation adds in each graph's context (`context_layers`: the rescales Vela runs alone, and the
    elementwise pass of each binary op where the target runs one, `vela_cost.elementwise_pass`): the joint families
    fit what the rescales, clamps and broadcasts cost beyond them.
    """
    from scipy.optimize import nnls

    graphs = [r for r in records if r["kind"] == "module" and r["status"] == "ok" and r["split"] == "fit"]
    if not graphs:
        return {}
    columns = [(family, feature) for family, form in JOINT_FORMS.items() for feature in form]
    configs = [graph_configs(r, target) for r in graphs]
    x = np.array([_joint_row(c, columns) for c in configs])
    offset = np.array([sum(_predict(known, k) for k in c if k.family not in JOINT_FORMS) for c in configs])
    for i, (record, c) in enumerate(zip(graphs, configs)):
        context = context_layers(record, target, known)
        offset[i] += sum(vela_cost.elementwise_pass(k, target) for k in c) if context is None else context
    y = np.array([measured(r, "total")[1] for r in graphs])
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


def _by_family(records: list[dict], target: str, measure: str) -> dict[str, list[Observation]]:
    by_family: dict[str, list[Observation]] = {}
    for record in records:
        if record["split"] != "fit":
            continue
        for o in observations(record, target, measure):
            by_family.setdefault(o.family, []).append(o)
    return by_family


MIN_SINGLE_PASS = 20


def _single_pass(observations_: list[Observation]) -> list[Observation]:
    """The observations of ops that Vela ran as one pass, if there are MIN_SINGLE_PASS of them.

    The cost model takes the larger of NPU and access cycles per pass; a sum over several passes
    mixes passes bound by either, so only single passes show how access grows within one.
    """
    single = [o for o in observations_ if o.features.get("passes", 1.0) == 1.0]
    return single if len(single) >= MIN_SINGLE_PASS else observations_


def fit(records: list[dict], target: str, kept: dict[str, dict] | None = None) -> dict[str, dict]:
    """Fitted models by family, from the fit-split records.

    A single-op family gets an NPU model and, under "access", a memory-access model; contexts are the
    mean `Op Cycles` of their role. kept: models that stand in for the fitted ones of their families
    (a refit of some families into an existing file), also where the joint fit prices the other ops.
    """
    models = {}
    access = _by_family(records, target, "access")
    by_memory = {memory: _by_family(records, target, memory) for memory in MEMORIES}
    for family, obs in sorted(_by_family(records, target, "npu").items()):
        if family.startswith("context/"):
            continue
        if _form_key(family, target) in COMPUTED:
            models[family] = computed_model(obs, _single_pass(access.get(family, [])), COMPUTED[_form_key(family, target)])
            continue
        weighted = not family.startswith(UNWEIGHTED)
        models[family] = fit_family(obs, form_of(family, target), weighted)
        if family in access:
            npu = {o.key: o.cycles for o in obs}
            per_memory = {memory: _single_pass(found[family]) for memory, found in by_memory.items() if family in found}
            if "flash" in per_memory:
                per_memory["flash"] = binding(per_memory["flash"], npu)
            models[family]["access"] = fit_access(_single_pass(access[family]), per_memory, access_forms_of(family, target), weighted)
    for family, obs in sorted(_by_family(records, target, "total").items()):
        if family.startswith("context/"):
            y = np.array([o.cycles for o in obs])
            models[family] = {"features": ["one"], "coef": [float(y.mean())], "n": len(obs), "r2": None, "mape": None, "max": float(y.max())}
    models.update(kept or {})
    models.update(fit_jointly(records, target, models))
    return dict(sorted(models.items()))


def transpose_feasibility(records: list[dict]) -> dict[str, bool]:
    """Transposes Vela was asked to run outside the always-supported region, and whether it did."""
    found = {}
    for record in records:
        if record["kind"] != "transpose" or not vela_cost.violates_u55_worst_case(tuple(record["params"]["shape"])):
            continue
        p = record["params"]
        found[json.dumps([p["shape"], p["perm"], p["dtype"]])] = record["status"] == "ok"
    return dict(sorted(found.items()))


def folds_transpose_into_producer(records: list[dict]) -> bool:
    """Whether Vela wrote a convolution's output transposed: in every measured conv -> TRANSPOSE context,
    all cycles landed on the transpose's output tensor and none on the convolution's own."""
    after = [r for r in records if r["kind"] == "ctx_transpose_conv" and r["params"]["order"] == "after" and r["status"] == "ok"]
    return bool(after) and all(measured(r, "total")[0].get("producer", 0) == 0 for r in after)
