"""The delegate's boundary: which TRANSPOSEs a contiguous 4-D input or output costs, and what Vela runs for them.

The end-to-end check (both layouts lowered, measured and checked bit-exact) is in tests/test_bench.py."""

from eqsat.compare import boundary_transpose_cycles
from eqsat.ir import Graph, TensorType, Term
from eqsat.report import Report
from eqsat.vela import LayerCycles

NCHW, NHWC = TensorType((1, 3, 8, 8), "torch.int8"), TensorType((1, 8, 8, 3), "torch.int8")


def graph(terms: dict[str, Term], outputs: list[str]) -> Graph:
    names = list(terms)
    index = {name: i for i, name in enumerate(names)}
    return Graph(
        names,
        [term.with_args(tuple(index[a] for a in term.args)) for term in terms.values()],
        [NHWC] * len(names),
        [index[o] for o in outputs],
    )


def boundary(g: Graph) -> list[str]:
    return [g.names[v] for v in g.boundary_transposes()]


def test_the_transposes_at_a_graph_input_or_output_are_its_boundary_through_reshapes_alone():
    g = graph(
        {
            "x": Term("Opaque", (), ("x",)),
            "w": Term("Opaque", (), ("w",)),
            "flat": Term("Reshape", ("x",), ((1, 3, 64),)),
            "unflat": Term("Reshape", ("flat",), ((1, 3, 8, 8),)),
            "to_nhwc": Term("Transpose", ("unflat",), ((0, 2, 3, 1),)),
            "conv": Term("Opaque", ("to_nhwc", "w"), ("tosa.CONV2D.default#1",)),
            "inner": Term("Transpose", ("conv",), ((0, 2, 1, 3),)),
            "clamp": Term("Elementwise", ("inner",), ("tosa.CLAMP.default#2",)),
            "to_nchw": Term("Transpose", ("clamp",), ((0, 3, 1, 2),)),
            "out": Term("Reshape", ("to_nchw",), ((1, 3, 64),)),
        },
        ["out"],
    )
    assert boundary(g) == ["to_nhwc", "to_nchw"]


def test_a_transpose_whose_output_is_also_read_inside_is_not_the_boundary():
    g = graph(
        {
            "x": Term("Opaque", (), ("x",)),
            "clamp": Term("Elementwise", ("x",), ("tosa.CLAMP.default#1",)),
            "t": Term("Transpose", ("clamp",), ((0, 3, 1, 2),)),
            "r": Term("Reshape", ("t",), ((1, 3, 64),)),
            "neg": Term("Elementwise", ("t",), ("tosa.NEGATE.default#2",)),
        },
        ["r", "neg"],
    )
    assert boundary(g) == []


def layer(name: str, operator: str, cycles: int) -> LayerCycles:
    return LayerCycles(name=name, operator=operator, source_operator=operator, cycles_npu=cycles, cycles_access=0, cycles_total=cycles)


def test_vela_cycles_of_a_boundary_transpose_include_the_passes_it_was_decomposed_into():
    layers = [
        layer("#12", "Transpose", 5),  # passes of the boundary transpose written to "to_nhwc"
        layer("#13", "Transpose", 7),
        layer("to_nhwc", "Transpose", 11),
        layer("conv", "Conv2D", 1000),
        layer("#20", "Transpose", 13),  # a pass of an inner transpose
        layer("inner", "Transpose", 17),
        layer("to_nchw", "Conv2D", 19),  # folded into the convolution that writes it: no transpose layer of its own
    ]
    assert boundary_transpose_cycles(layers, {"to_nhwc", "to_nchw"}) == 5 + 7 + 11


def test_the_report_names_the_boundary_transposes_it_kept():
    report = Report(target="ethos-u85-256", cost_before=10.0, boundary_transposes={"tosa_transpose_default": 8610.0})
    assert "boundary transposes kept (export channels-last to remove them): tosa_transpose_default (8610)" in str(report)
    assert "boundary" not in str(Report(target="ethos-u85-256", cost_before=10.0))
