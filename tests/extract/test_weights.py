"""eqsat.extract.weights follows regor's weight buffering on Ethos-U55 with the constants in flash (`Shared_Sram`):
over three chained convolutions, each layer is buffered where Vela buffers it, and costs the `Op Cycles` Vela
estimates for it, given Vela's encoded weight size; read from flash, a layer reads its weights and scales once per
OFM block position at flash speed, and from the SRAM (`Sram_Only`), with its feature maps at the SRAM's."""

import dataclasses

import pytest

from eqsat import bridge_fx, bridge_tosa
from eqsat.calibration.graphs import _conv, _Graph
from eqsat.configuration import Configuration, Generation
from eqsat.extract import blocks, cost
from eqsat.extract.layers import Layer, LayerKind, LiveGraph
from eqsat.extract.vela_cost import VelaCalibratedCost
from eqsat.extract.weights import encoded_scale_bytes
from eqsat.vela import debug_tables

ROUNDING = 1e-3
"""Given Vela's encoded weight size, a layer's price is Vela's `Op Cycles` to the cycle but where regor cuts the
weights into slices: it truncates each slice's transfer and NPU cycles, which `WeightReads` prices as shares of the
whole (6700 against 6704 on the sliced first layer below)."""


def _chain(convs: list[dict]) -> bytes:
    g = _Graph()
    y = g.input([1, convs[0]["h"], convs[0]["w"], convs[0]["cin"]], "int8")
    for role, conv in zip(("first", "middle", "last"), convs):
        y, _ = _conv(g, role, y, conv)
    g.output(y)
    return g.tosa.serialize()


def _priced_layers(data: bytes, model: VelaCalibratedCost, weight_bytes: list[int]) -> list[tuple[bool, float]]:
    """Per convolution of the TOSA graph data, in order: whether the model buffers its weights and what it costs,
    after the layer in front of it as `cost.graph_cost` prices it, with Vela's encoded weight size."""
    read = bridge_fx.read_graph(bridge_tosa.read_flatbuffer(data)[0]).as_ir()
    g = LiveGraph.of(dict(enumerate(read.terms)), read.outputs, read.types.__getitem__, model)
    sizes, slack, priced = iter(weight_bytes), None, []
    for layer, cycles in cost._layers_priced(g, cost._default_term_cost(g)):
        term = g.terms[layer.value]
        bricks = layer.args[0] if layer.kind is LayerKind.CONVOLUTION else (True, True)
        reads = model.weight_reads(term, g.type_of(layer.value), [g.type_of(a) for a in term.args], bricks)
        if reads is not None:
            reads = dataclasses.replace(reads, weight_bytes=next(sizes))
            priced.append((reads.buffers(slack or 0.0, slack is None), reads.cycles(slack or 0.0, slack is None)))
        if cycles > 0:
            slack = cycles
    return priced


ROW = dict(h=1, w=64, cin=8, cout=16, k=3, stride=1)
CHAINS = [
    # (target, the three convolutions, whether Vela buffers each one's weights)
    ("ethos-u55-64", [ROW, ROW | dict(cin=16), ROW | dict(cin=16, cout=32, k=1)], [False, True, True]),
    ("ethos-u55-128", [ROW, ROW | dict(cin=16), ROW | dict(cin=16, cout=32, k=1)], [False, False, True]),  # 2x the MACs: the copy shows
    ("ethos-u55-64", [dict(h=8, w=8, cin=64, cout=64, k=1, stride=1)] * 3, [True, True, True]),  # the first in 16-deep slices
    ("ethos-u55-128", [dict(h=8, w=8, cin=32, cout=32, k=3, stride=1)] * 3, [False, False, False]),  # flash-bound
    ("ethos-u55-32", [dict(h=16, w=16, cin=16, cout=16, k=3, stride=1)] * 3, [False, True, True]),
    (Configuration.of("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram"), [dict(h=16, w=16, cin=16, cout=16, k=3, stride=1)] * 3, [False, True, True]),  # DRAM
]


@pytest.mark.parametrize("target, convs, buffered", CHAINS, ids=lambda v: v.name if isinstance(v, Configuration) else str(v))
def test_a_convolutions_weights_are_buffered_where_vela_buffers_them_at_the_cycles_vela_estimates(target, convs, buffered):
    data = _chain(convs)
    perf, details = debug_tables(data, target, ["perf", "perf_debug"])
    rows = [(p, d) for p, d in zip(perf, details) if p["operator"] == "Conv2D"]
    assert [d["weight_buffering"] != "" for _, d in rows] == buffered
    priced = _priced_layers(data, VelaCalibratedCost(target), [int(d["weight_total_bytes"]) for _, d in rows])
    assert [b for b, _ in priced] == buffered
    for (p, _), (_, cycles) in zip(rows, priced):
        assert cycles == pytest.approx(int(p["op_cycles"]), rel=ROUNDING)


def test_a_convolution_reading_its_constants_in_place_reads_its_biases_at_that_memorys_latency():
    """regor's estimator adds each OFM block's bias and scale reads at the latency of the memory they come from
    (`biasCyclesPerBlock`): DRAM's 500 cycles on Ethos_U65_High_End. A convolution Vela leaves reading its constants
    in DRAM runs the NPU cycles `blocks.mac_op_cycles` counts with that latency, exactly; one it buffers, with the
    SRAM's (`WeightReads.npu`, `buffered_npu`)."""
    configuration = Configuration.of("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
    model = VelaCalibratedCost(configuration)
    conv = dict(h=4, w=4, cin=64, cout=64, k=3, stride=1)
    data = _chain([conv] * 3)
    perf, details = debug_tables(data, configuration, ["perf", "perf_debug"])
    rows = [(p, d) for p, d in zip(perf, details) if p["operator"] == "Conv2D"]
    read = bridge_fx.read_graph(bridge_tosa.read_flatbuffer(data)[0]).as_ir()
    reads = [model.weight_reads(t, read.types[v], [read.types[a] for a in t.args]) for v, t in enumerate(read.terms)]
    reads = [r for r in reads if r is not None]
    assert len(rows) == len(reads) == 3 and all(d["weight_buffering"] == "" for _, d in rows)
    middle = reads[1]  # brick format in and out, as regor stores a tensor between two NPU ops
    assert middle.npu == int(rows[1][0]["npu_cycles"])
    assert middle.npu > middle.buffered_npu


@pytest.mark.parametrize("target", ["ethos-u55-64", "ethos-u55-256"])
def test_a_convolution_read_from_flash_reads_its_weights_and_scales_there_once_per_block_position(target):
    """Unbuffered, a convolution's flash access cycles are its encoded weights and scales (`encoded_scale_bytes`) over
    flash's bandwidth, once per OFM block position (`blocks.element_access`): exactly Vela's."""
    conv = dict(h=8, w=8, cin=40, cout=40, k=3, stride=1)
    perf, details = debug_tables(_chain([conv] * 3), target, ["perf", "perf_debug"])
    flash = blocks.constants_memory_of(Configuration.of(target))
    kernel = blocks.Kernel(3, 3, 1, 1)
    read = [(p, d) for p, d in zip(perf, details) if p["operator"] == "Conv2D" and d["weight_buffering"] == ""]
    assert read
    for p, d in read:
        access = blocks.element_access(target, (8, 8, 40), (8, 8, 40), kernel, False, d["ifm_format"] == "NHCWB16", d["ofm_format"] == "NHCWB16")
        constants = access.refetches * (int(d["weight_total_bytes"]) + encoded_scale_bytes(Generation.U55, 40, access.scales))
        assert int(p["OffChipFlash_ac"]) == int(constants / flash.bandwidth)


def test_with_the_constants_in_the_sram_a_convolution_reads_everything_at_the_srams_bandwidth():
    """`Sram_Only`: nothing is buffered, and a layer's SRAM access cycles are its feature maps, weights and scales over
    the SRAM's bandwidth (`vela_cost.conv_access_cycles`), exactly Vela's given its encoded weight size."""
    configuration = Configuration.of("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Sram_Only")
    conv = dict(h=16, w=16, cin=24, cout=24, k=3, stride=1)
    perf, details = debug_tables(_chain([conv] * 3), configuration, ["perf", "perf_debug"])
    kernel = blocks.Kernel(3, 3, 1, 1)
    rows = [(p, d) for p, d in zip(perf, details) if p["operator"] == "Conv2D"]
    assert len(rows) == 3 and all(d["weight_buffering"] == "" for _, d in rows)
    model = VelaCalibratedCost(configuration)
    read = bridge_fx.read_graph(bridge_tosa.read_flatbuffer(_chain([conv] * 3))[0]).as_ir()
    assert all(model.weight_reads(t, read.types[v], [read.types[a] for a in t.args]) is None for v, t in enumerate(read.terms))
    for p, d in rows:
        ifm = ofm = (16, 16, 24)
        access = blocks.element_access("ethos-u55-128", ifm, ofm, kernel, False, d["ifm_format"] == "NHCWB16", d["ofm_format"] == "NHCWB16")
        constants = access.refetches * (int(d["weight_total_bytes"]) + encoded_scale_bytes(Generation.U55, 24, access.scales))
        assert int(p["Sram_ac"]) == int((access.feature_maps + constants) / blocks.sram_of("ethos-u55-128").bandwidth)


def test_a_convolution_costs_more_where_the_layer_in_front_hides_less_of_its_weight_copy():
    """The same buffered convolution after a longer layer costs less: its copy hides under that layer
    (`cost.graph_cost` prices each layer after the one in front)."""
    model = VelaCalibratedCost("ethos-u55-64")
    read = bridge_fx.read_graph(bridge_tosa.read_flatbuffer(_chain([ROW | dict(cin=16)] * 3))[0]).as_ir()
    g = LiveGraph.of(dict(enumerate(read.terms)), read.outputs, read.types.__getitem__, model)
    value = next(v for v, t in g.terms.items() if model.weight_reads(t, g.type_of(v), [g.type_of(a) for a in t.args]) is not None)
    term = g.terms[value]
    reads = model.weight_reads(term, g.type_of(value), [g.type_of(a) for a in term.args])
    assert reads.buffers(2000.0) and reads.buffers(5000.0)
    short, long = (cost.layer_cycles(Layer(value, LayerKind.OP), g, None, slack) for slack in (2000.0, 5000.0))
    assert (short, long) == (reads.buffered(2000.0), reads.buffered(5000.0))
    assert long < short < reads.npu + reads.transfer(reads.constant_bytes)
