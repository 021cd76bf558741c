"""Hand-built TOSA flatbuffer graphs (eqsat.calibration.graphs) that several test files run through the reference
model or Vela."""

from __future__ import annotations

import tosa_serializer as ts

from eqsat.calibration.graphs import _attr, _Graph


def rescale_graph(shape, source: str, dest: str, multipliers, shifts, in_zp: int, out_zp: int) -> _Graph:
    """A graph of one RESCALE of shape from source to dest (per channel when given several multipliers and shifts)."""
    g = _Graph()
    x = g.input(shape, source)
    n = len(multipliers)
    inputs = [x, g.const([n], "int32", list(multipliers)), g.const([n], "int8", list(shifts)), g.const([1], source, [in_zp]), g.const([1], dest, [out_zp])]
    attribute = _attr(
        "RescaleAttribute", scale32=True, rounding_mode=ts.RoundingMode.SINGLE_ROUND, per_channel=n > 1, input_unsigned=False, output_unsigned=False
    )
    g.output(g.op("op", ts.Op.RESCALE, inputs, shape, dest, attribute))
    return g


def vela_layers(shape, perm, target):
    """Vela's estimate, per layer, of a graph of one int8 TRANSPOSE of shape by perm on target."""
    from eqsat.calibration.graphs import Sample, build_tosa
    from eqsat.vela import estimate

    graph, _ = build_tosa([Sample("transpose", {"shape": list(shape), "perm": list(perm), "dtype": "int8"})])
    return estimate(graph, target)
