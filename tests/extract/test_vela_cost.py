"""VelaCalibratedCost prices terms in estimated inference cycles (Vela's cycles_total) from the committed calibration data."""

import json
import math

import pytest
import torch

from eqsat.configuration import ACCELERATORS, Generation
from eqsat.extract import blocks, vela_cost
from eqsat.ir import Graph, TensorType, Term
from eqsat.extract.cost import UncalibratedTargetError, cost_model_for
from eqsat.extract.vela_cost import VelaCalibratedCost, calibration_path, has_calibration, vela_version
from tests.tosa_graphs import vela_layers

TARGETS = ["ethos-u55-128", "ethos-u85-256"]


def tt(shape, dtype="int8"):
    return TensorType(tuple(shape), f"torch.{dtype}")


def transpose(shape, perm, dtype="int8"):
    out = [shape[p] for p in perm]
    return Term("Transpose", (0,), (tuple(perm),)), tt(out, dtype), [tt(shape, dtype)]


@pytest.fixture(scope="module", params=TARGETS)
def model(request):
    return VelaCalibratedCost(request.param)


def test_every_default_target_is_calibrated_with_the_pinned_vela():
    for target in TARGETS:
        data = json.loads(calibration_path(target).read_text())
        assert data["target"] == target
        assert data["vela_version"] == vela_version()
        assert data["system_config"] and data["memory_mode"]


def test_unit_names_the_vela_version(model):
    assert model.unit == f"estimated inference cycles (Vela {vela_version()} cycles_total calibration)"


def test_reshape_is_free(model):
    assert model.cost(Term("Reshape", (0,), ((1, 256, 32),)), tt([1, 256, 32]), [tt([1, 16, 16, 32])]) == 0


def test_leaves_are_free(model):
    assert model.cost(Term("Opaque", (), ("x#0",)), tt([1, 8]), []) == 0
    assert model.cost(Term("Opaque", (), ("tosa.CONST_SHAPE.default#3",)), None, []) == 0


def test_a_transpose_costs_finite_positive_cycles(model):
    cost = model.cost(*transpose([1, 16, 16, 32], [0, 3, 1, 2]))
    assert 0 < cost < math.inf


def test_bigger_transposes_cost_more(model):
    assert model.cost(*transpose([1, 32, 32, 32], [0, 3, 1, 2])) > model.cost(*transpose([1, 8, 8, 32], [0, 3, 1, 2]))


def test_u55_pays_more_than_u85_for_a_rank_5_reversal():
    term = transpose([2, 3, 4, 5, 6], [4, 3, 2, 1, 0])
    assert VelaCalibratedCost("ethos-u55-128").cost(*term) > 0
    assert VelaCalibratedCost("ethos-u85-256").cost(*term) > 0


def test_a_transpose_u55_cannot_run_is_infinite():
    model = VelaCalibratedCost("ethos-u55-128")
    rejected = [json.loads(k) for k, ok in model.data["transpose_feasibility"].items() if not ok]
    assert rejected, "calibration found no transpose that Vela rejects on U55"
    for shape, perm, dtype in rejected:
        assert model.cost(*transpose(shape, perm, dtype)) == math.inf


# pixel_unshuffle(2) of a (1, 12, 270, 480) map, as the Arm backend lowers it for Ethos-U55 (upstream's
# test_pixel_unshuffle_u55_INT[rand_4d_contiguous]): a transpose beyond the worst-case bound that Vela runs
PIXEL_UNSHUFFLE = ([1, 12, 135, 2, 240, 2], [0, 1, 3, 5, 2, 4])


def test_the_given_graphs_own_transposes_run_and_no_other():
    model = VelaCalibratedCost("ethos-u55-128")
    term, out, (x,) = transpose(*PIXEL_UNSHUFFLE)
    assert model.cost(term, out, [x]) == math.inf  # beyond the bound, never calibrated
    given = Graph(["x", "t"], [Term("Opaque", (), ("x#0",)), term], [x, out], [1])
    running = model.running_transposes_of(given)
    assert 0 < running.cost(term, out, [x]) < math.inf
    other = transpose(PIXEL_UNSHUFFLE[0], [0, 1, 3, 2, 5, 4])
    assert running.cost(*other) == model.cost(*other) == math.inf  # another permutation of that shape
    assert model.cost(term, out, [x]) == math.inf  # the calibrated model itself is unchanged


def test_ranks_beyond_the_tosa_profile_are_infinite(model):
    assert model.cost(*transpose([2] * 7, [6, 5, 4, 3, 2, 1, 0])) == math.inf


def test_conv_output_rescale_is_fused_into_the_conv(model):
    per_channel = Term("Opaque", (0,), ("tosa.RESCALE.default#1",))
    assert model.cost(per_channel, tt([1, 8, 8, 16]), [tt([1, 8, 8, 16], "int32")]) == 0
    conv = Term("Opaque", (0, 1, 2), ("tosa.CONV2D.default#2",))
    args = [tt([1, 8, 8, 16]), tt([16, 3, 3, 16]), tt([16], "int32")]
    assert model.cost(conv, tt([1, 8, 8, 16], "int32"), args) > 0


def test_cost_model_for_uses_the_calibration_where_there_is_one():
    assert has_calibration("ethos-u55-128")
    assert isinstance(cost_model_for("ethos-u55-128"), VelaCalibratedCost)
    assert isinstance(cost_model_for("ethos-u85-256"), VelaCalibratedCost)


def test_an_uncalibrated_target_is_refused_with_the_command_that_calibrates_it(calibrations_without):
    calibrations_without("ethos-u55-32")
    assert not has_calibration("ethos-u55-32")
    with pytest.raises(UncalibratedTargetError, match="eqsat calibrate --target ethos-u55-32"):
        cost_model_for("ethos-u55-32")


def test_the_pass_refuses_an_uncalibrated_target_at_install_and_falls_back_inside_a_lowering(calibrations_without):
    import eqsat

    calibrations_without("ethos-u85-512")
    from tests.graphs import GraphBuilder

    with pytest.raises(UncalibratedTargetError):
        eqsat.EqsatPass("ethos-u85-512")
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    gm = g.output(g.call(torch.ops.aten.permute_copy.default, x, [0, 2, 3, 1]))
    with pytest.warns(RuntimeWarning, match="eqsat calibrate --target ethos-u85-512"):
        result, report = eqsat.optimize(gm, target="ethos-u85-512")
    assert result is gm and "eqsat calibrate --target ethos-u85-512" in report.fallback


@pytest.mark.parametrize("op", ["Transpose", "Reshape"])
def test_moving_an_int32_accumulator_costs_more_than_moving_int8(model, op):
    """Alone, Vela transposes int32 faster than int8 on U55; between a producer and its RESCALE it does not."""
    term = Term(op, (0,), ((0, 2, 1),) if op == "Transpose" else ((1, 32, 64),))
    int8 = model.cost(term, tt([1, 32, 64]), [tt([1, 64, 32])])
    accumulator = model.cost(term, tt([1, 32, 64], "int32"), [tt([1, 64, 32], "int32")])
    assert accumulator > int8 + model.standalone_rescale(tt([1, 32, 64], "int32")) / 2


def test_a_batched_slice_pays_one_copy_per_leading_index(model):
    term = Term("Slice", (0,), ((0, 0, 0, 0), (256, 1, 1, 32)))
    batched = model.cost(term, tt([256, 1, 1, 32]), [tt([256, 1, 1, 96])])
    flat = model.cost(Term("Slice", (0,), ((0, 0, 0), (1, 256, 32))), tt([1, 256, 32]), [tt([1, 256, 96])])
    assert batched >= model.batched_copies(tt([256, 1, 1, 32])) > 10 * flat


def test_a_batched_concat_pays_one_copy_per_leading_index_of_each_input(model):
    parts = [tt([1, 48, 2, 3, 8]), tt([1, 48, 2, 3, 16])]
    batched = model.cost(Term("Concat", (0, 1), (4,)), tt([1, 48, 2, 3, 24]), parts)
    flat = model.cost(Term("Concat", (0, 1), (3,)), tt([1, 96, 3, 24]), [tt([1, 96, 3, 8]), tt([1, 96, 3, 16])])
    assert batched == pytest.approx(model.batched_copies(parts[0]) + model.batched_copies(parts[1]))
    assert model.batched_copies(parts[0]) == model.batched_copies(tt([48, 2, 3, 8]))  # 48 copies of a (2, 3, 8) block either way
    assert model.batched_copies(tt([1, 1, 2, 3, 8])) == model.memory_copy(tt([1, 1, 2, 3, 8]))  # not batched: one plain copy
    assert batched > 2 * flat


@pytest.mark.parametrize("target", TARGETS)
def test_vela_copies_a_5d_slice_and_each_5d_concat_input_once_per_leading_index(target):
    from eqsat.calibration.graphs import Sample, build_tosa
    from eqsat.vela import estimate

    shapes = [[1, 6, 2, 3, 8], [1, 6, 2, 3, 8]]
    concat, _ = build_tosa([Sample("concat", {"shapes": shapes, "axis": 4, "dtype": "int8"})])
    band, _ = build_tosa([Sample("slice", {"shape": [1, 6, 2, 8, 4], "start": [0, 0, 0, 2, 0], "size": [1, 6, 2, 3, 4], "dtype": "int8"})])
    assert len(estimate(concat, target).layers) == 2 * 6
    assert len(estimate(band, target).layers) == 6


U55_COPY_GRAPHS = [
    ("concat", {"shapes": [[1, 4, 6, 24], [1, 4, 6, 3], [1, 4, 6, 16]], "axis": 3, "dtype": "int8"}),
    ("concat", {"shapes": [[1, 3, 24, 7, 5, 7], [1, 3, 1, 7, 5, 7]], "axis": 2, "dtype": "int8"}),  # 3 x 24 and 3 x 1 copies
    ("slice", {"shape": [3, 16, 4, 5], "start": [0, 0, 0, 3], "size": [3, 13, 2, 2], "dtype": "int8"}),
    ("slice", {"shape": [4, 8], "start": [0, 5], "size": [4, 3], "dtype": "int8"}),
]


@pytest.mark.parametrize("target", ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256"])
@pytest.mark.parametrize("kind, params", U55_COPY_GRAPHS, ids=str)
def test_an_ethos_u55_graph_of_int8_copies_is_priced_at_velas_cycles_total(target, kind, params):
    """Concats of graph inputs and slices of one, each a MemoryCopy per input (per leading index beyond HWC): the
    layer model prices the graph at exactly Vela's `cycles_total` (`blocks.u55_memory_copy_cycles`); the joint fit
    of `copy/int8` it replaces missed unet-skip's two concat copies by +46% and +91% on Ethos-U55-64."""
    from eqsat import bridge_fx, bridge_tosa
    from eqsat.calibration.graphs import Sample, build_tosa
    from eqsat.extract.cost import priced
    from eqsat.vela import estimate

    data, _ = build_tosa([Sample(kind, params)])
    graph = bridge_fx.read_graph(bridge_tosa.read_flatbuffer(data)[0]).as_ir()
    assert priced(graph, cost_model_for(target)) == estimate(data, target).cycles_total


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "shape, perm",
    [
        ((1, 32, 3, 4, 8), (0, 2, 3, 1, 4)),  # the conformer's q/k/v split: 5D decomposition, not 4D
        ((1, 4, 8, 16, 2), (0, 2, 1, 4, 3)),
        ((1, 4, 8, 16), (0, 2, 1, 3)),  # N=1 dropped: one 3D pass
        ((1, 1, 4, 8, 16), (0, 1, 3, 2, 4)),
        ((2, 16, 4, 16, 12), (1, 3, 4, 2, 0)),
        ((1, 1, 4, 8, 16), (1, 0, 4, 3, 2)),  # the outer axes are 1 once swapped: the H <-> C swap is one 3D pass
        ((16, 16, 4, 16, 1), (2, 1, 3, 0, 4)),  # high_rank_permute_fuzz_case_1 of the Arm backend's tests
    ],
)
def test_transpose_passes_match_the_layers_vela_runs(target, shape, perm):
    from eqsat.calibration.graphs import Sample, build_tosa
    from eqsat.extract.vela_cost import target_family, transpose_passes
    from eqsat.vela import estimate

    graph, _ = build_tosa([Sample("transpose", {"shape": list(shape), "perm": list(perm), "dtype": "int8"})])
    assert len(estimate(graph, target).layers) == len(transpose_passes(shape, perm, target_family(target)))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_a_pad_term_costs_what_the_opaque_pad_it_was_read_as_cost(model, dtype):
    x, out = tt([1, 6, 6, 8], dtype), tt([1, 8, 8, 8], dtype)
    opaque = Term("Opaque", (0, 1), ("tosa.PAD.default#3",))
    pad = Term("Pad", (0,), ((0, 0, 1, 1, 1, 1, 0, 0), 0))
    assert model.cost(pad, out, [x]) == model.cost(opaque, out, [x, None]) > 0


@pytest.mark.parametrize("dtype, out_dtype", [("int8", "int8"), ("int16", "int32")])
def test_a_table_term_costs_what_the_opaque_table_it_was_read_as_cost(model, dtype, out_dtype):
    args = [tt([1, 8, 8, 16], dtype), tt([256 if dtype == "int8" else 513], dtype)]
    opaque = Term("Opaque", (0, 1), ("tosa.TABLE.default#4",))
    table = Term("Table", (0, 1), ("tosa.TABLE.default#4",))
    assert model.cost(table, tt([1, 8, 8, 16], out_dtype), args) == model.cost(opaque, tt([1, 8, 8, 16], out_dtype), args) > 0


IMAGE_INPUT_TRANSPOSES = [((1, 3, 96, 96), (0, 2, 3, 1)), ((3, 9216), (1, 0)), ((3, 96, 96), (1, 2, 0))]
"""A 3-channel image's NCHW -> NHWC transpose at the graph input, and its rank-lowered forms."""


@pytest.mark.parametrize("target", TARGETS)
def test_an_image_input_transpose_and_its_rank_lowered_forms_are_ranked_as_vela_ranks_them(target):
    """Every pair whose cycles_total Vela tells apart by more than a quarter is ordered the same way."""
    model = VelaCalibratedCost(target)
    forms = IMAGE_INPUT_TRANSPOSES
    vela = [vela_layers(shape, perm, target).cycles_total for shape, perm in forms]
    priced = [model.cost(*transpose(shape, perm)) for shape, perm in forms]
    for i in range(len(forms)):
        for j in range(len(forms)):
            if vela[i] > 1.25 * vela[j]:
                assert priced[i] > priced[j], (forms[i], forms[j], vela, priced)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "shape, perm",
    [((3, 1024), (1, 0)), ((4, 2048), (1, 0)), ((1, 16, 16, 32), (0, 3, 1, 2)), ((32, 32, 32), (1, 2, 0)), ((2, 16, 32, 8), (0, 2, 3, 1))],
)
def test_a_transpose_is_priced_memory_bound_where_vela_says_so(target, shape, perm):
    estimate = vela_layers(shape, perm, target)
    access, npu = sum(layer.cycles_access for layer in estimate.layers), estimate.cycles_npu
    assert max(access, npu) > 1.25 * min(access, npu), f"a case Vela does not tell apart: NPU {npu}, access {access}"
    assert VelaCalibratedCost(target).is_memory_bound(*transpose(shape, perm)) == (access > npu)


def test_a_different_installed_vela_is_warned_about_once_per_target(monkeypatch):
    import warnings

    from eqsat.extract import cost

    monkeypatch.setattr(cost.vela_cost, "vela_version", lambda: "5.2.0")
    monkeypatch.setattr(cost, "_warned_versions", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cost_model_for("ethos-u55-128")
        cost_model_for("ethos-u55-128")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1
    assert f"fitted on Vela {vela_version_of('ethos-u55-128')}, but Vela 5.2.0" in messages[0]
    assert "eqsat calibrate --target ethos-u55-128" in messages[0]


def vela_version_of(target):
    return json.loads(calibration_path(target).read_text())["vela_version"]


def vela_sample(kind, target, **params):
    from eqsat.calibration.graphs import Sample, build_tosa
    from eqsat.vela import estimate

    graph, _ = build_tosa([Sample(kind, params)])
    return estimate(graph, target)


FULLY_CONNECTED = [dict(h=1, w=1, cin=320, cout=128, k=1, stride=1), dict(h=1, w=4, cin=128, cout=224, k=1, stride=1), dict(h=1, w=2, cin=48, cout=512, k=1, stride=1)]
"""Fully connected layers (1x1 convolutions over few positions) of shapes the calibration grid does not hold."""
FULLY_CONNECTED_TOLERANCE = {"ethos-u55-128": 0.15, "ethos-u85-256": 0.02}
"""Measured with the committed calibration: at most 8.6% off on Ethos-U55 (flash-bound, 6x its NPU cycles;
the old single access model was 60% low there) and 0.0% on Ethos-U85 (NPU-bound; 7% with weight-decoding steps in a
linear model, 22% before)."""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("params", FULLY_CONNECTED, ids=lambda p: f"{p['w']}x{p['cin']}->{p['cout']}")
def test_a_weight_bound_fully_connected_layer_is_priced_near_vela(target, params):
    """On Ethos-U55 such a layer is bound by reading its weights from flash; the model prices each memory apart."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    vela = vela_sample("conv2d", target, **params).cycles_total
    priced = VelaCalibratedCost(target).cost_of(sample_config(Sample("conv2d", params), target))
    assert abs(priced - vela) <= FULLY_CONNECTED_TOLERANCE[target] * vela, (priced, vela)


@pytest.mark.parametrize("in_channels", [8, 16, 24, 32, 48, 128])
def test_ethos_u85_prices_a_fully_connected_layer_by_its_input_depth_as_vela_does(in_channels):
    """A 1x1 convolution to 64 channels at one position on Ethos-U85-256: Vela charges 413 cycles over 8 input channels,
    732 over 16, 1374 over 24 and 32 (kernel-first, 16 channels at a time), 413 over 48 (depth-first, 64 at a time)
    and 734 over 128. The model follows regor's block configuration (`eqsat.extract.blocks`) to within 2%."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target, params = "ethos-u85-256", dict(h=1, w=1, cin=in_channels, cout=64, k=1, stride=1)
    vela = vela_sample("conv2d", target, **params).cycles_total
    priced = VelaCalibratedCost(target).cost_of(sample_config(Sample("conv2d", params), target))
    assert priced == pytest.approx(vela, rel=0.02)


FEW_CHANNELS_U85 = [
    dict(h=1, w=1, cin=28, cout=40, k=1, stride=1),
    dict(h=1, w=1, cin=56, cout=40, k=1, stride=1),
    dict(h=1, w=2, cin=12, cout=72, k=1, stride=1),
    dict(h=1, w=3, cin=24, cout=20, k=1, stride=1),
    dict(h=2, w=6, cin=36, cout=56, k=3, stride=1),
    dict(h=6, w=6, cin=20, cout=24, k=3, stride=1),
]
"""Convolutions over few positions and input depths between Ethos-U85's IFM block depths, of shapes the calibration
grid does not hold. Measured with the committed calibration: at most 0.1% off Vela (with weight-decoding steps in a
linear model: 1-5% for the 1x1 ones, 3% and 25% low for the 3x3 ones; before those steps up to 75% low, and 28 -> 40
channels priced below 56 -> 40)."""


HELD_OUT_TOLERANCE = 0.06
"""The largest held-out error (MAPE) of the conv2d and depthwise_conv2d fits on a target's default configuration,
5.4% (ethos-u85-2048 conv2d; `eqsat calibrate --report`), rounded up."""

ONE_CHANNEL_OVER_A_BLOCK = [
    ("ethos-u55-32", "depthwise_conv2d", dict(h=8, w=8, c=4, k=3, stride=2), dict(h=8, w=8, c=5, k=3, stride=2)),
    ("ethos-u85-512", "depthwise_conv2d", dict(h=16, w=16, c=16, k=3, stride=1), dict(h=16, w=16, c=17, k=3, stride=1)),
    ("ethos-u85-2048", "conv2d", dict(h=16, w=16, cin=64, cout=64, k=1, stride=1), dict(h=16, w=16, cin=64, cout=65, k=1, stride=1)),
]
"""Convolutions whose output fills a block's depth, and the same with one channel more. Vela charges 432 and 808
cycles on Ethos-U55-32 (4-deep microblocks), 2112 and 1868 on Ethos-U85-2048 (another block configuration); the
linear model in MACs priced them 464 and 693, 1534 and 1552 (the wrong way round), and 1194 and 2149 on
Ethos-U85-512 where Vela charges 2688 for 17 channels."""


@pytest.mark.parametrize("target, kind, full, over", ONE_CHANNEL_OVER_A_BLOCK, ids=lambda v: v if isinstance(v, str) else None)
def test_one_channel_over_a_block_is_priced_as_vela_charges_it(target, kind, full, over):
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    model = VelaCalibratedCost(target)
    vela = [vela_sample(kind, target, **p).cycles_total for p in (full, over)]
    priced = [model.cost_of(sample_config(Sample(kind, p), target)) for p in (full, over)]
    for v, c in zip(vela, priced):
        assert c == pytest.approx(v, rel=HELD_OUT_TOLERANCE)
    assert (priced[1] > priced[0]) == (vela[1] > vela[0])


def test_a_convolution_the_linear_model_priced_right_stays_right():
    """A 3x3 convolution of 16 to 16 channels over 32x32 positions on Ethos-U85-256, of many MACs and a full block:
    the linear model in MACs priced it 1.5% over Vela, and the block model prices it within 2%."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target, params = "ethos-u85-256", dict(h=32, w=32, cin=16, cout=16, k=3, stride=1)
    vela = vela_sample("conv2d", target, **params).cycles_total
    assert VelaCalibratedCost(target).cost_of(sample_config(Sample("conv2d", params), target)) == pytest.approx(vela, rel=0.02)


def test_convolutions_over_few_positions_are_priced_near_vela_on_ethos_u85():
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target = "ethos-u85-256"
    model = VelaCalibratedCost(target)
    vela = [vela_sample("conv2d", target, **p).cycles_total for p in FEW_CHANNELS_U85]
    priced = [model.cost_of(sample_config(Sample("conv2d", p), target)) for p in FEW_CHANNELS_U85]
    for params, v, c in zip(FEW_CHANNELS_U85, vela, priced):
        assert abs(c - v) <= 0.02 * v, (params, c, v)
    assert vela[0] > 2 * vela[1] and priced[0] > 2 * priced[1]  # 28 input channels cost more than 56


def test_ethos_u85_sums_the_int8_tensor_a_reduce_sums_input_rescale_widens():
    """The Arm backend lowers a sum as RESCALE int8 -> int32, REDUCE_SUM: Ethos-U85 reads the int8 tensor (the
    rescale's zero point becomes a SUB after the sum) and costs less than half a sum of an int32 input."""
    rescaled = vela_sample("reduce_sum", "ethos-u85-256", shape=[1, 1, 64, 32], axis=3, source="int8")
    plain = vela_sample("reduce_sum", "ethos-u85-256", shape=[1, 1, 64, 32], axis=3)
    assert (rescaled.cycles_total, plain.cycles_total) == (252, 652)
    assert [layer.operator for layer in rescaled.layers] == ["ReduceSum", "Sub"]


LAST_AXIS_SUMS = [[1, 1, 64, 16], [1, 1, 24, 40], [1, 2, 32, 48], [1, 1, 12, 64], [3, 1, 16, 24], [1, 1, 100, 8]]
"""Sums over the channels of shapes the calibration grid does not hold, as the layer norms and softmaxes of
the zoo have them. Measured with the committed calibration: 3-25% over Vela (118-190% over when the U85 fit
measured sums of int32 inputs)."""


@pytest.mark.parametrize("shape", LAST_AXIS_SUMS, ids=str)
def test_a_sum_over_the_channels_is_priced_near_vela_on_ethos_u85(shape):
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    sample = Sample("reduce_sum", {"shape": shape, "axis": 3, "source": "int8"})
    vela = vela_sample("reduce_sum", "ethos-u85-256", **sample.params).cycles_total
    priced = VelaCalibratedCost("ethos-u85-256").cost_of(sample_config(sample, "ethos-u85-256"))
    assert abs(priced - vela) <= 0.30 * vela, (priced, vela)


def test_ethos_u85_runs_depthwise_channels_in_groups_of_16():
    """A 3x3 depthwise convolution over 32x32 positions: 8 and 16 channels cost about the same in Vela, 17 twice
    as much; the model follows (it priced 8 channels at half of 16, and 17 about as 16)."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target = "ethos-u85-256"
    samples = [Sample("depthwise_conv2d", {"h": 32, "w": 32, "c": c, "k": 3, "stride": 1}) for c in (8, 16, 17)]
    assert [vela_sample(s.kind, target, **s.params).cycles_total for s in samples] == [7317, 7522, 14536]
    eight, sixteen, seventeen = (VelaCalibratedCost(target).cost_of(sample_config(s, target)) for s in samples)
    assert sixteen < 1.1 * eight and seventeen > 1.5 * sixteen


DEPTHWISE_U85 = [
    dict(h=24, w=24, c=8, k=3, stride=1),
    dict(h=24, w=24, c=24, k=3, stride=1),
    dict(h=40, w=40, c=16, k=3, stride=2),
    dict(h=12, w=20, c=56, k=3, stride=1),
    dict(h=20, w=20, c=32, k=5, stride=1),
    dict(h=56, w=56, c=16, k=3, stride=1),
    dict(h=28, w=28, c=64, k=3, stride=2),
]
"""Depthwise convolutions of shapes the calibration grid does not hold. Measured with the committed calibration:
0.2% low, and 16% low for the last, bound by SRAM reads that the access model underprices (with channel groups in a
linear model: 27% low to 11% high, mean 11%; before them 32% low to 58% high, mean 24%)."""


@pytest.mark.parametrize("params", DEPTHWISE_U85, ids=lambda p: f"{p['h']}x{p['w']}x{p['c']}k{p['k']}s{p['stride']}")
def test_a_depthwise_convolution_is_priced_near_vela_on_ethos_u85(params):
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target = "ethos-u85-256"
    vela = vela_sample("depthwise_conv2d", target, **params).cycles_total
    priced = VelaCalibratedCost(target).cost_of(sample_config(Sample("depthwise_conv2d", params), target))
    assert abs(priced - vela) <= 0.20 * vela, (priced, vela)


def _mul(shape) -> tuple[Term, TensorType, list[TensorType]]:
    return Term("Elementwise", (0, 1), ("tosa.MUL.default#0",)), tt(shape, "int32"), [tt(shape, "int32")] * 2


def test_a_binary_op_costs_its_computed_elementwise_pass_on_ethos_u55_only():
    from eqsat.extract import blocks
    from eqsat.extract.vela_cost import OpConfig, elementwise_pass, op_config, op_cycles

    for target, has_pass in (("ethos-u55-128", True), ("ethos-u85-256", False)):
        model = VelaCalibratedCost(target)
        term, out, args = _mul([1, 64, 32])
        config = op_config(term, out, args, target)
        joint = op_cycles(model.data["models"]["binary/MUL"], config)
        computed = blocks.u55_elementwise_cycles(target, "MUL", 64 * 32, False, False) if has_pass else 0.0
        assert model.cost(term, out, args) == pytest.approx(joint + computed)
        if has_pass:  # reading int32, its pass runs at the 32-bit rate: 1.25 cycles per element against 1
            assert model.binary_op(term, out, args, True, False) == pytest.approx(joint + 1.25 * 64 * 32)
        assert elementwise_pass(OpConfig("clamp/int8", config.features), target) == 0.0


@pytest.mark.parametrize("shape", [[1, 32, 32, 8], [1, 16, 16, 16], [1, 64, 32]])
def test_a_mul_with_its_rescales_fused_costs_about_what_vela_charges_on_ethos_u55(shape):
    """x, y -> input RESCALEs -> MUL -> output RESCALE: Ethos-U55 fuses the rescales and runs one elementwise pass
    (measured 2048 cycles for (1, 64, 32)), which the model computes as regor's estimator does."""
    from eqsat.calibration.graphs import _binary, _Graph, _rescale
    from eqsat.extract.cost import graph_cost
    from eqsat.vela import estimate

    target = "ethos-u55-128"
    g = _Graph()
    x, y = g.input(shape, "int8"), g.input(shape, "int8")
    a = _rescale(g, "a", x, shape, "int8", "int32", "unit", zero_points=(3, 0))
    b = _rescale(g, "b", y, shape, "int8", "int32", "unit", zero_points=(-5, 0))
    g.output(_rescale(g, "o", _binary(g, "mul", "MUL", a, b, shape), shape, "int32", "int8", "mul_out", zero_points=(0, 7)))
    vela = estimate(g.tosa.serialize(), target).cycles_total
    leaf = lambda name: Term("Opaque", (), (name,))  # noqa: E731
    graph = {"x": leaf("x"), "y": leaf("y")}
    graph |= {"a": Term("Rescale", ("x",), ("torch.int32", (1 << 30,), (30,), 3, 0, 1)), "b": Term("Rescale", ("y",), ("torch.int32", (1 << 30,), (30,), -5, 0, 2))}
    graph |= {"z": Term("Elementwise", ("a", "b"), ("tosa.MUL.default#3",)), "o": Term("Rescale", ("z",), ("torch.int8", (2117365449,), (37,), 0, 7, 4))}
    types = {v: tt(shape, "int8" if v in ("x", "y", "o") else "int32") for v in graph}
    assert graph_cost(graph, ["o"], types.get, VelaCalibratedCost(target)) == pytest.approx(vela, rel=0.05)


def test_a_convolution_with_a_stride_above_three_runs_as_one_per_output_column():
    from eqsat.extract.vela_cost import stride_splits

    assert stride_splits(tt([1, 1, 64, 8]), (1, 8), tt([1, 1, 8, 16], "int32")) == 8
    assert stride_splits(tt([1, 1, 64, 8]), (1, 16), tt([1, 1, 4, 16], "int32")) == 4
    assert stride_splits(tt([1, 32, 32, 8]), (3, 3), tt([1, 16, 16, 16], "int32")) == 1  # stride 2
    assert stride_splits(tt([1, 1, 8, 8]), (1, 8), tt([1, 1, 1, 16], "int32")) == 1  # one output: no stride


@pytest.mark.parametrize("target", TARGETS)
def test_a_convolution_with_stride_eight_costs_about_what_vela_charges(target):
    """A (1, 1, 64, 8) input, a 1x8 kernel of 16 channels, stride 8 (the patch embedding of emg-gru-gesture): Vela
    runs 8 convolutions, and the model, which prices each, comes within 30% of Vela's cycles (one convolution of
    that size alone is a fifth of them)."""
    import tosa_serializer as ts

    from eqsat.calibration.graphs import _attr, _bias, _Graph, _weights
    from eqsat.vela import estimate

    g = _Graph()
    x = g.input([1, 1, 64, 8], "int8")
    inputs = [x, g.const([16, 1, 8, 8], "int8", _weights([16, 1, 8, 8])), g.const([16], "int32", _bias(16)), g.const([1], "int8", [0]), g.const([1], "int8", [0])]
    attribute = _attr("Conv2dAttribute", pad=[0, 0, 0, 0], stride=[1, 8], dilation=[1, 1], local_bound=False, acc_type=ts.DType.INT32)
    g.output(g.op("conv", ts.Op.CONV2D, inputs, [1, 1, 8, 16], "int32", attribute))
    vela = estimate(g.tosa.serialize(), target)
    assert sum(layer.operator == "Conv2D" for layer in vela.layers) == 8
    term = Term("Opaque", (0, 1, 2), ("tosa.CONV2D.default#0",))
    predicted = VelaCalibratedCost(target).cost(term, tt([1, 1, 8, 16], "int32"), [tt([1, 1, 64, 8]), tt([16, 1, 8, 8]), tt([16], "int32")])
    assert predicted == pytest.approx(vela.cycles_total, rel=0.3)


def test_a_global_pool_is_told_apart_from_a_windowed_one():
    from eqsat.extract.vela_cost import op_config

    pool = Term("Opaque", (0,), ("tosa.AVG_POOL2D.default#0",))
    whole = op_config(pool, tt([1, 1, 1, 32]), [tt([1, 25, 5, 32])], "ethos-u55-128").features
    window = op_config(pool, tt([1, 8, 8, 32]), [tt([1, 16, 16, 32])], "ethos-u55-128").features
    assert whole["in_elements_global"] == whole["in_elements"] == 25 * 5 * 32
    assert window["in_elements_global"] == 0.0


@pytest.mark.parametrize("target", TARGETS)
def test_a_global_average_pool_costs_about_what_vela_charges(target):
    """A (1, 25, 5, 32) map averaged to (1, 1, 1, 32), the head of ds-cnn-kws: Vela's pooling cycles grow with the
    window (2736 on Ethos-U55), which the windowed pools of the grid (2x2, 3x3) do not show."""
    import tosa_serializer as ts

    from eqsat.calibration.graphs import _attr, _Graph
    from eqsat.vela import estimate

    g = _Graph()
    x = g.input([1, 25, 5, 32], "int8")
    attribute = _attr("AvgPool2dAttribute", kernel=[25, 5], stride=[1, 1], pad=[0, 0, 0, 0], acc_type=ts.DType.INT32)
    g.output(g.op("pool", ts.Op.AVG_POOL2D, [x, g.const([1], "int8", [0]), g.const([1], "int8", [0])], [1, 1, 1, 32], "int8", attribute))
    vela = estimate(g.tosa.serialize(), target).cycles_total
    predicted = VelaCalibratedCost(target).cost(Term("Opaque", (0,), ("tosa.AVG_POOL2D.default#0",)), tt([1, 1, 1, 32]), [tt([1, 25, 5, 32])])
    assert predicted == pytest.approx(vela, rel=0.35)


def test_ethos_u55_runs_depthwise_channels_in_microblocks_of_8():
    """A 3x3 depthwise convolution over 16x4 positions on Ethos-U55-128: 9 channels cost 56% more than 8 in Vela
    (one more 8-channel output microblock, regor's `s_EthosU55Configs`), 16 channels 94% more; a 5-wide map costs
    90% of a 6-wide one (microblocks 2 positions wide). The model prices each within 1% (the linear model in
    microblocks priced 9 channels 10% above 8)."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target = "ethos-u55-128"
    samples = [Sample("depthwise_conv2d", {"h": 16, "w": w, "c": c, "k": 3, "stride": 1}) for w, c in ((4, 8), (4, 9), (4, 16), (5, 8), (6, 8))]
    vela = [vela_sample(s.kind, target, **s.params).cycles_total for s in samples]
    assert vela == [1088, 1696, 2112, 1440, 1600]
    priced = [VelaCalibratedCost(target).cost_of(sample_config(s, target)) for s in samples]
    assert priced == pytest.approx(vela, rel=0.01)


@pytest.mark.parametrize("target, depth", [("ethos-u55-32", 4), ("ethos-u55-128", 8)])
def test_each_ethos_u55_counts_depthwise_work_in_its_own_microblocks(target, depth):
    """Vela's depthwise cycles jump by half or more one channel past the target's microblock depth (4 on
    Ethos-U55-32, 8 on Ethos-U55-128, regor's `s_EthosU55Configs`: 3x3 over 8x3, 595 -> 1000 and 576 -> 880
    cycles), and grow by under a fifth up to it; the block features (`eqsat.extract.blocks`) step where Vela does."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    samples = [Sample("depthwise_conv2d", {"h": 8, "w": 3, "c": c, "k": 3, "stride": 1}) for c in (depth - 1, depth, depth + 1)]
    below, full, over = (vela_sample(s.kind, target, **s.params).cycles_total for s in samples)
    assert full < 1.2 * below and over > 1.5 * full
    below, full, over = (sample_config(s, target).features["block_cycles"] for s in samples)
    assert full < 1.2 * below and over > 1.5 * full


DEPTHWISE_U55 = [
    dict(h=20, w=5, c=32, k=3, stride=1),
    dict(h=10, w=10, c=24, k=3, stride=1),
    dict(h=14, w=14, c=8, k=3, stride=1),
    dict(h=6, w=6, c=64, k=3, stride=1),
    dict(h=28, w=28, c=16, k=3, stride=2),
    dict(h=40, w=7, c=48, k=3, stride=1),
    dict(h=20, w=20, c=12, k=3, stride=2),
]
"""Depthwise convolutions of shapes the calibration grid does not hold. Measured with the committed calibration on
Ethos-U55-128: 11% low to 0.1% high, mean 5.7%, low where Vela buffers the weights from flash (with microblocks in a
linear model: 36% low to 20% high, mean 21%; before them 49% low to 4% high, mean 25%)."""


def _u55_heldout_errors(kind, shapes):
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    target, model = "ethos-u55-128", VelaCalibratedCost("ethos-u55-128")
    errors = []
    for params in shapes:
        vela = vela_sample(kind, target, **params).cycles_total
        errors.append(model.cost_of(sample_config(Sample(kind, params), target)) / vela - 1)
    return errors


def test_a_depthwise_convolution_is_priced_near_vela_on_ethos_u55():
    errors = _u55_heldout_errors("depthwise_conv2d", DEPTHWISE_U55)
    assert max(abs(e) for e in errors) <= 0.15 and sum(abs(e) for e in errors) / len(errors) <= 0.08, errors


MAX_POOLS_U55 = [dict(shape=s, k=2, stride=2) for s in ([1, 16, 16, 16], [1, 24, 24, 32], [1, 48, 48, 8], [1, 20, 20, 24], [1, 14, 14, 64])]
"""2x2 max pools of shapes the calibration grid does not hold. Measured with the committed calibration on Ethos-U55-128:
27% low to 26% high, mean 16% (priced without the window: 16% low to 40% high, mean 20%; on input and output elements
before the microblocks: 2% low to 69% high, mean 33%)."""


def test_a_max_pool_is_priced_near_vela_on_ethos_u55():
    errors = _u55_heldout_errors("max_pool2d", MAX_POOLS_U55)
    assert max(abs(e) for e in errors) <= 0.30 and sum(abs(e) for e in errors) / len(errors) <= 0.20, errors


MAX_POOLS_3X3_U55 = [dict(shape=s, k=3, stride=st) for s, st in (([1, 28, 28, 16], 2), ([1, 24, 24, 32], 2), ([1, 20, 20, 24], 1), ([1, 14, 14, 64], 2), ([1, 48, 48, 8], 2))]
"""3x3 max pools of shapes the calibration grid does not hold. Measured with the committed calibration on Ethos-U55-128:
1% low to 7% high, priced by the window in their key (`ir.with_window`); priced as 2x2 pools, as when the window was not
in the graph the model sees, 43% to 46% low (Vela takes a step per window position for each output microblock)."""


def test_a_3x3_max_pool_is_priced_by_its_window_near_vela_on_ethos_u55():
    errors = _u55_heldout_errors("max_pool2d", MAX_POOLS_3X3_U55)
    assert max(abs(e) for e in errors) <= 0.12, errors


def test_a_pool_whose_key_carries_no_window_is_priced_as_a_2x2_pool():
    from eqsat.ir import with_window
    from eqsat.extract.vela_cost import DEFAULT_POOL_WINDOW

    model = VelaCalibratedCost("ethos-u55-128")
    x, out = TensorType((1, 16, 16, 16), "torch.int8"), TensorType((1, 8, 8, 16), "torch.int8")

    def price(key: str) -> float:
        return model.cost(Term("Opaque", (0,), (key,)), out, [x])

    assert DEFAULT_POOL_WINDOW == (2, 2)
    assert price("tosa.MAX_POOL2D.default#0") == price(with_window("tosa.MAX_POOL2D.default#0", (2, 2)))
    assert price(with_window("tosa.MAX_POOL2D.default#0", (3, 3))) > 1.5 * price("tosa.MAX_POOL2D.default#0")


MATMULS_U55 = [dict(n=2, h=64, c=8, w=64), dict(n=2, h=64, c=64, w=8), dict(n=16, h=64, c=8, w=64), dict(n=16, h=64, c=64, w=8), dict(n=4, h=48, c=24, w=48), dict(n=12, h=32, c=16, w=32)]
"""Batched matmuls of attention maps: the zoo's (attention-permute, mobilevit-patch-attention: 2 and 16 heads of a
64 x 8 by 8 x 64 product and back) and two shapes the calibration grid does not hold. Measured with the committed
calibration on Ethos-U55-128: 1% low to 6.4% high (fitted on the small maps alone, 5% to 18.4% high: Vela charges
less per output on larger maps)."""


def test_an_attention_sized_matmul_is_priced_near_vela_on_ethos_u55():
    errors = _u55_heldout_errors("matmul", MATMULS_U55)
    assert max(abs(e) for e in errors) <= 0.08, errors


def test_a_standalone_input_rescale_is_priced_once_per_pair_of_types(monkeypatch):
    """Whole-graph costs ask for the same rescales on every evaluation of a local search: the model computes each
    pair of types once and answers the same price after (`vela_cost._memoized`); a model for another graph's
    transposes computes afresh."""
    calls = []
    compute = VelaCalibratedCost.standalone_input_rescale.__wrapped__

    def standalone_input_rescale(self, source, out):
        calls.append((source, out))
        return compute(self, source, out)

    monkeypatch.setattr(VelaCalibratedCost, "standalone_input_rescale", vela_cost._memoized(standalone_input_rescale))
    model = VelaCalibratedCost("ethos-u55-128")
    narrow, wide = TensorType((1, 64, 32), "torch.int8"), TensorType((1, 64, 32), "torch.int32")
    prices = {model.standalone_input_rescale(narrow, wide) for _ in range(3)}
    assert len(prices) == 1 and prices.pop() > 0
    assert calls == [(narrow, wide)]
    running = model.running_transposes_of(Graph([], [], [], []))
    assert running.standalone_input_rescale(narrow, wide) == model.standalone_input_rescale(narrow, wide)
    assert calls == [(narrow, wide)] * 2


U85_COMPUTED_TARGETS = [t for t in ACCELERATORS if vela_cost.target_family(t) == Generation.U85]
"""The Ethos-U85 targets, whose transposes are priced as Vela's estimator computes them."""


@pytest.mark.parametrize("target", U85_COMPUTED_TARGETS)
@pytest.mark.parametrize(
    "shape, perm",
    [
        ((64, 2, 8), (1, 0, 2)),  # one block of the whole map, counted as 32 blocks that each re-read it: access binds
        ((32, 32, 16), (1, 0, 2)),  # square blocks: the input is read about once, the NPU binds
        ((2, 3, 16, 8), (2, 0, 3, 1)),  # several passes, with NHWC tensors between them
    ],
)
def test_an_ethos_u85_transpose_is_priced_as_vela_estimates_it(target, shape, perm):
    """A lone transpose (graph input to output, NHWC): the model's price is Vela's `Op Cycles` to 2%, bound by the
    same side, on every Ethos-U85; between two NPU ops it is priced in brick format."""
    from eqsat.calibration.fit import sample_config
    from eqsat.calibration.graphs import Sample

    layers = vela_layers(shape, perm, target).layers
    model = VelaCalibratedCost(target)
    nhwc = sample_config(Sample("transpose", dict(shape=list(shape), perm=list(perm), dtype="int8")), target)
    assert abs(model.cost_of(nhwc) - sum(layer.cycles_total for layer in layers)) <= 0.02 * sum(layer.cycles_total for layer in layers)
    if len(layers) == 1:
        assert model.is_memory_bound(*transpose(shape, perm)) == (layers[0].cycles_access > layers[0].cycles_npu)
    if blocks.architecture_of(target).cores == 1:  # brick format moves no more than NHWC (a multi-core write of 16 channels per core moves more)
        assert model.cost(*transpose(shape, perm)) <= model.cost_of(nhwc)
