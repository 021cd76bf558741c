"""eqsat.extract.blocks follows regor's block search and estimator: a lone convolution's NPU cycles in Vela are what
`mac_op_cycles` computes over the block configuration `block_config` picks (on Ethos-U55 where Vela does not buffer the
weights: it adds their first transfer from flash, which `mac_op_cycles` leaves to the fit), and a lone Ethos-U85
transpose pass's NPU and access cycles are what `u85_transpose_cycles` computes."""

import pytest

from eqsat.calibration.graphs import Sample, build_tosa, conv_geometry
from eqsat.extract import blocks
from eqsat.vela import estimate


def vela_npu_cycles(kind, target, params):
    graph, _ = build_tosa([Sample(kind, params)])
    return estimate(graph, target).cycles_npu


def estimated(kind, target, p, brick=False):
    depthwise = kind == "depthwise_conv2d"
    cin, cout = (p["c"], p["c"]) if depthwise else (p["cin"], p["cout"])
    _, oh, ow = conv_geometry(p["h"], p["w"], p["k"], p["stride"])
    kernel = blocks.Kernel(p["k"], p["k"], p["stride"], p["stride"])
    return blocks.mac_op_cycles(target, (p["h"], p["w"], cin), (oh, ow, cout), kernel, depthwise, brick)


LONE_CONVOLUTIONS = [
    ("ethos-u85-256", "conv2d", dict(h=8, w=8, cin=16, cout=17, k=1, stride=1)),  # one channel over a 16-deep block
    ("ethos-u85-256", "conv2d", dict(h=32, w=32, cin=16, cout=16, k=3, stride=1)),
    ("ethos-u85-512", "depthwise_conv2d", dict(h=16, w=16, c=17, k=3, stride=1)),
    ("ethos-u85-1024", "conv2d", dict(h=16, w=16, cin=33, cout=16, k=3, stride=2)),  # one channel over a 32-deep IFM block
    ("ethos-u85-1024", "conv2d", dict(h=16, w=16, cin=1, cout=32, k=3, stride=1)),  # 2:4 sparse weights
    ("ethos-u85-2048", "conv2d", dict(h=16, w=16, cin=64, cout=64, k=1, stride=1)),
    ("ethos-u85-2048", "conv2d", dict(h=16, w=16, cin=64, cout=65, k=1, stride=1)),
    ("ethos-u55-32", "depthwise_conv2d", dict(h=8, w=8, c=4, k=3, stride=2)),
    ("ethos-u55-32", "depthwise_conv2d", dict(h=8, w=8, c=5, k=3, stride=2)),  # one channel over a 4-deep microblock
    ("ethos-u55-64", "conv2d", dict(h=1, w=16, cin=32, cout=9, k=1, stride=1)),
    ("ethos-u55-128", "conv2d", dict(h=2, w=8, cin=40, cout=24, k=1, stride=1)),
    ("ethos-u55-256", "conv2d", dict(h=1, w=8, cin=33, cout=16, k=1, stride=1)),  # 1x4 microblocks over one row
]


@pytest.mark.parametrize("target, kind, params", LONE_CONVOLUTIONS, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_a_lone_convolution_costs_in_vela_what_regors_estimate_over_its_block_configuration_says(target, kind, params):
    assert estimated(kind, target, params) == vela_npu_cycles(kind, target, params)


def test_an_output_depth_one_over_a_block_costs_what_vela_charges_not_what_its_macs_say():
    """On Ethos-U55-32 (4-deep microblocks) a depthwise convolution of 5 channels costs 1.87 times one of 4 in Vela, for
    1.25 times the MACs; on Ethos-U85-2048 a 1x1 convolution to 65 channels costs less than one to 64 (another block)."""
    small, over = (dict(h=8, w=8, c=c, k=3, stride=2) for c in (4, 5))
    assert vela_npu_cycles("depthwise_conv2d", "ethos-u55-32", over) > 1.5 * vela_npu_cycles("depthwise_conv2d", "ethos-u55-32", small)
    assert estimated("depthwise_conv2d", "ethos-u55-32", over) > 1.5 * estimated("depthwise_conv2d", "ethos-u55-32", small)
    full, over = (dict(h=16, w=16, cin=64, cout=c, k=1, stride=1) for c in (64, 65))
    assert vela_npu_cycles("conv2d", "ethos-u85-2048", over) < vela_npu_cycles("conv2d", "ethos-u85-2048", full)
    assert estimated("conv2d", "ethos-u85-2048", over) < estimated("conv2d", "ethos-u85-2048", full)


def test_a_convolution_between_two_others_reads_and_writes_brick_format():
    """Three 1x1 convolutions of 32 channels over 25x5 positions on Ethos-U85-2048: Vela stores the two tensors between
    them in brick format (NHCWB16) and the middle one costs `mac_op_cycles(..., brick=True)`, less than it alone."""
    from eqsat.calibration.graphs import _conv, _Graph

    target, conv = "ethos-u85-2048", dict(h=25, w=5, cin=32, cout=32, k=1, stride=1)
    g = _Graph()
    y = g.input([1, 25, 5, 32], "int8")
    for role in ("first", "middle", "last"):
        y, _ = _conv(g, role, y, conv)
    g.output(y)
    first, middle, last = estimate(g.tosa.serialize(), target).layers
    assert middle.cycles_npu == estimated("conv2d", target, conv, brick=True) < estimated("conv2d", target, conv)


def test_sram_of_reads_the_default_system_configs_sram_from_vela_ini():
    """Ethos-U55's High_End_Embedded SRAM: one 8-byte AXI port at the core clock; Ethos-U85's SYS_DRAM_Mid: two 16-byte
    ports (vela.ini `Sram_ports_used=2`); both with 32-cycle latencies, bursts of 32 and 64 bytes."""
    from eqsat.configuration import Configuration, read_vela_ini

    for target, port_bytes in (("ethos-u55-128", 8), ("ethos-u85-256", 16)):
        configuration = Configuration.of(target)
        section = read_vela_ini(configuration)[f"System_Config.{configuration.system_config}"]
        sram = blocks.sram_of(target)
        assert sram.bandwidth == port_bytes * int(section.get("sram_ports_used", "1")) * float(section["sram_clock_scale"])
        assert (sram.read_latency, sram.write_latency, sram.burst_bytes) == tuple(int(section[f"sram_{k}"]) for k in ("read_latency", "write_latency", "burst_length"))


LONE_TRANSPOSES = [
    # (64, 2, 8) -> (2, 64, 8): one block of the whole map, counted as 32 blocks that each re-read it: access binds
    *(("ethos-u85-" + macs, (64, 2, 8), (1, 0, 2), "int8") for macs in ("128", "256", "512", "1024", "2048")),
    ("ethos-u85-256", (32, 32, 16), (1, 0, 2), "int8"),  # square blocks: the input is read about once, the NPU binds
    ("ethos-u85-2048", (12, 12, 7), (2, 0, 1), "int8"),  # C -> H: a narrow write
    ("ethos-u85-512", (3, 64, 24), (2, 1, 0), "int8"),  # H <-> W at half throughput, on one of two microblocks
    ("ethos-u85-128", (16, 4, 8), (1, 2, 0), "int16"),  # int16 runs on its own microblocks on Ethos-U85-128 and -256
    ("ethos-u85-256", (24, 5, 12), (2, 0, 1), "int32"),
    # rank-2-like maps of thousands of positions: the block is searched under the maximum unpermuted
    ("ethos-u85-512", (2, 1000, 8), (2, 0, 1), "int8"),
    ("ethos-u85-2048", (4, 1000, 3), (0, 2, 1), "int8"),
    ("ethos-u85-2048", (2, 512, 3), (2, 0, 1), "int8"),
]


@pytest.mark.parametrize("target, shape, perm, dtype", LONE_TRANSPOSES, ids=str)
def test_a_lone_ethos_u85_transpose_costs_in_vela_what_regors_estimate_says(target, shape, perm, dtype):
    graph, _ = build_tosa([Sample("transpose", dict(shape=list(shape), perm=list(perm), dtype=dtype))])
    (layer,) = estimate(graph, target).layers
    element_bytes = {"int8": 1, "int16": 2, "int32": 4}[dtype]
    assert blocks.u85_transpose_cycles(target, shape, perm, element_bytes) == (layer.cycles_npu, layer.cycles_access)


def test_the_sram_channels_of_ethos_u85_are_slower_than_the_sram():
    """`ChannelBW` in Vela's SYS_DRAM_Mid: 8 transactions in flight on each of 2 ports, 80% used, 64-byte bursts over a
    32-cycle latency, 80% again: 20.48 bytes per cycle for a read or a write, against the memory's 32; the scale
    channel's 16 read buffers hold 4 bursts: 6.4."""
    sram = blocks.sram_of("ethos-u85-256")
    assert (sram.max_reads, sram.max_writes, sram.ports, sram.bandwidth) == (8, 8, 2, 32.0)
    channels = blocks.MemChannel
    for channel in (channels.IFM, channels.IFM_STREAM, channels.WEIGHT, channels.WRITE):
        assert blocks.channel_bandwidth("ethos-u85-256", channel) == pytest.approx(20.48)
    assert blocks.channel_bandwidth("ethos-u85-256", channels.SCALE) == pytest.approx(6.4)


U55_ELEMENTWISE = [
    # (op, input rescales' scales, CLAMP behind, reads int32): the Arm backend's 2^19 and a smaller scale fuse into an
    # ADD on Ethos-U55, two 2^19 scales do not (its rescales run alone and it reads int32); a MUL fuses unit scales.
    ("ADD", ("add", "unit"), True, False),
    ("ADD", ("add", "unit"), False, False),
    ("ADD", ("add", "add"), True, True),
    ("MUL", ("unit", "unit"), False, False),
    ("MUL", ("unit", "unit"), True, False),
]


@pytest.mark.parametrize("target", ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256"])
@pytest.mark.parametrize("shape", [[1, 32, 32, 8], [1, 6, 10, 24]], ids=str)
@pytest.mark.parametrize("op, scales, clamped, reads_int32", U55_ELEMENTWISE, ids=str)
def test_an_ethos_u55_elementwise_pass_costs_in_vela_what_regors_estimate_says(target, shape, op, scales, clamped, reads_int32):
    """int8 x, y -> input RESCALEs -> ADD or MUL -> output RESCALE (-> CLAMP): the op's pass costs Vela's NPU cycles
    `u55_elementwise_cycles` computes, by what it reads and whether the CLAMP is fused (its last layer of that operator:
    Vela runs an input rescale alone as an ADD and a MUL of its own)."""
    from eqsat.calibration.graphs import _binary, _clamp, _Graph, _rescale

    g = _Graph()
    x, y = g.input(shape, "int8"), g.input(shape, "int8")
    a, b = (_rescale(g, f"in{i}", v, shape, "int8", "int32", scale) for i, (v, scale) in enumerate(zip((x, y), scales)))
    out = _rescale(g, "out", _binary(g, "op", op, a, b, shape), shape, "int32", "int8", "mul_out" if op == "MUL" else "add_out")
    g.output(_clamp(g, "clamp", out, shape, "int8") if clamped else out)
    *_, layer = [layer for layer in estimate(g.tosa.serialize(), target).layers if layer.operator == op.capitalize()]
    elements = shape[1] * shape[2] * shape[3]
    assert layer.cycles_npu == blocks.u55_elementwise_cycles(target, op, elements, reads_int32, clamped)


U55_COPIED = [
    # (shape of each copied block, where the copy comes from): graph inputs concatenated along their depth, a 24-deep
    # row and a 3-deep map (NHWC bursts shorter than the SRAM's), and a convolution's output that is also returned.
    ((16, 16, 16), "concat"),
    ((1, 32, 24), "concat"),
    ((12, 5, 3), "concat"),
    ((8, 8, 8), "returned"),
]


@pytest.mark.parametrize("target", ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256"])
@pytest.mark.parametrize("shape, source", U55_COPIED, ids=str)
def test_an_ethos_u55_memory_copy_costs_in_vela_what_regors_estimate_says(target, shape, source):
    """Vela runs a copied concat input as a MemoryCopy layer (a 1x1 pooling op): its NPU cycles are what
    `u55_memory_copy_cycles` computes over the pooling block config, whether the input is a graph input or a
    convolution's output that is also returned; and it is the layer's whole cost (access takes less)."""
    from eqsat.calibration.graphs import _attr, _conv, _Graph, ts

    h, w, c = shape
    g = _Graph()
    x = g.input([1, h, w, c], "int8")
    if source == "concat":
        g.output(g.op("concat", ts.Op.CONCAT, [x, g.input([1, h, w, c], "int8")], [1, h, w, 2 * c], "int8", _attr("ConcatAttribute", 3)))
    else:
        conv = dict(h=h, w=w, cin=c, cout=c, k=1, stride=1)
        y, _ = _conv(g, "returned", x, conv)
        z, _ = _conv(g, "written_in_place", x, conv)
        g.output(g.op("concat", ts.Op.CONCAT, [y, z], [1, h, w, 2 * c], "int8", _attr("ConcatAttribute", 3)))
        g.output(y)
    copies = [layer for layer in estimate(g.tosa.serialize(), target).layers if layer.operator == "MemoryCopy"]
    assert copies and all(layer.cycles_total == layer.cycles_npu == blocks.u55_memory_copy_cycles(target, shape) for layer in copies)
    assert len(copies) == (2 if source == "concat" else 1)


def _convolution_layers(conv: dict, configuration, column: str) -> list[tuple[dict, blocks.ElementAccess, int]]:
    """Three chained CONV2Ds of conv's parameters, the first reading the graph input, the last writing the graph
    output: per layer Vela runs for one, its row of Vela's debug database (`perf_debug`), what `element_access`
    says it moves in the formats Vela stores its input and output in, and its access cycles in one memory (column:
    `Sram_ac`, `Dram_ac`)."""
    from eqsat.calibration.graphs import _conv, _Graph
    from eqsat.vela import debug_tables

    g = _Graph()
    y = g.input([1, conv["h"], conv["w"], conv["cin"]], "int8")
    for role in ("first", "middle", "last"):
        y, _ = _conv(g, role, y, conv)
    g.output(y)
    perf, details = debug_tables(g.tosa.serialize(), configuration, ["perf", "perf_debug"])
    access = {row["id"]: int(row[column]) for row in perf if row["operator"] == "Conv2D"}
    target = configuration if isinstance(configuration, str) else configuration.target
    kernel = blocks.Kernel(conv["k"], conv["k"], conv["stride"], conv["stride"])
    layers = []
    for row in (r for r in details if r["id"] in access):
        ifm, ofm = (tuple(int(row[f"{t}_shape_{a}"]) for a in "hwc") for t in ("ifm", "ofm"))
        moved = blocks.element_access(target, ifm, ofm, kernel, False, row["ifm_format"] == "NHCWB16", row["ofm_format"] == "NHCWB16")
        layers.append((row, moved, access[row["id"]]))
    assert len(layers) == 3
    return layers


ACCESS_CHAINS = [
    # (target, the three convolutions' common params): the first reads a graph input (NHWC) and the last writes a graph
    # output (NHWC); the tensors between them are in brick format
    ("ethos-u85-128", dict(h=16, w=16, cin=16, cout=16, k=3, stride=1)),
    ("ethos-u85-256", dict(h=25, w=5, cin=32, cout=32, k=1, stride=1)),
    ("ethos-u85-512", dict(h=8, w=8, cin=64, cout=64, k=1, stride=1)),  # weights bind
    ("ethos-u85-1024", dict(h=32, w=32, cin=8, cout=8, k=3, stride=1)),
    ("ethos-u85-2048", dict(h=32, w=32, cin=8, cout=8, k=3, stride=1)),
    ("ethos-u85-2048", dict(h=12, w=40, cin=4, cout=4, k=5, stride=1)),  # narrow NHWC bursts
]


@pytest.mark.parametrize("target, conv", ACCESS_CHAINS, ids=str)
def test_a_convolutions_access_cycles_are_what_regors_estimator_measures(target, conv):
    """Three chained CONV2Ds: each layer's SRAM access cycles in Vela's debug database are what `u85_access_cycles`
    computes from `element_access` over the formats Vela stores its feature maps in (NHWC at the graph's input and
    output, brick format between) and Vela's encoded weight size (`vela_cost.conv_access_cycles` estimates that):
    the IFM, the OFM, the weights and the scales on their own channels, each layer bound by one of them or by the
    memory's bandwidth."""
    channels = blocks.MemChannel
    formats = []
    for row, moved, access in _convolution_layers(conv, target, "Sram_ac"):
        formats.append((row["ifm_format"] == "NHCWB16", row["ofm_format"] == "NHCWB16"))
        transfers = {
            channels.IFM: moved.ifm_bytes,
            channels.WRITE: moved.ofm_bytes,
            channels.WEIGHT: moved.refetches * int(row["weight_total_bytes"]),
            channels.SCALE: moved.refetches * moved.scales * 10,
        }
        assert blocks.u85_access_cycles(target, transfers) == access
    assert formats == [(False, True), (True, True), (True, False)]


@pytest.mark.parametrize("conv", [dict(h=16, w=16, cin=16, cout=16, k=3, stride=1), dict(h=64, w=8, cin=8, cout=8, k=3, stride=1),
                                  dict(h=8, w=8, cin=64, cout=64, k=1, stride=1), dict(h=32, w=32, cin=8, cout=8, k=3, stride=1)], ids=str)
def test_a_convolutions_constants_in_dram_cost_the_access_cycles_regors_estimator_measures(conv):
    """Ethos-U85-128 with `Shared_Sram` keeps the constants in DRAM: each of three chained CONV2Ds reads its scales from
    there once per OFM block position on the slow scale channel, and its weights on the weight channel where the
    scheduler does not buffer them. `vela_cost.off_chip_constant_access_cycles`, given Vela's encoded weight size, is
    Vela's DRAM access cycles where the scales bind or the weights are so read, and above them where buffered weights
    would have bound (an upper bound); the scales bind on most of these layers."""
    from eqsat.configuration import Configuration
    from eqsat.extract import vela_cost

    target = "ethos-u85-128"
    configuration = Configuration.of(target, "Ethos_U85_SYS_DRAM_Mid", "Shared_Sram")
    dram = blocks.constants_memory_of(configuration)
    assert dram.name == "Dram" and blocks.channel_bandwidth(target, blocks.MemChannel.SCALE, dram) == pytest.approx(0.4096)
    assert vela_cost.VelaCalibratedCost(configuration).constants_off_chip == dram
    assert vela_cost.VelaCalibratedCost(target).constants_off_chip is None  # Sram_Only
    bound_by_scales = 0
    for row, moved, access in _convolution_layers(conv, configuration, "Dram_ac"):
        features = {"weight_bytes": moved.refetches * int(row["weight_total_bytes"]), "scale_bytes": moved.refetches * moved.scales * 10}
        computed = vela_cost.off_chip_constant_access_cycles(target, features, dram)
        assert computed >= access
        if int(row["DramWeights_read"] or 0) == features["weight_bytes"]:  # read once per OFM block position
            assert computed == access
        if int(row["DramScales_ac"]) == access:
            bound_by_scales += 1
            assert blocks.u85_access_cycles(target, {blocks.MemChannel.SCALE: features["scale_bytes"]}, dram) == access
    assert bound_by_scales >= 2
