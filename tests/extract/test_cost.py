"""Whole-graph context of the cost model: reshapes that Vela keeps as a MemoryCopy."""

import pytest
import tosa_serializer as ts

from eqsat.ir import TensorType, Term
from eqsat.calibration.graphs import _attr, _binary, _clamp, _Graph, _rescale
from eqsat.extract.cost import folded_transposes, graph_cost, reshape_copies, term_costs
from eqsat.extract.vela_cost import VelaCalibratedCost
from eqsat.vela import estimate

TYPE = TensorType((1, 64, 32), "torch.int8")


def leaf(name: str) -> Term:
    return Term("Opaque", (), (name,))


def unary(name: str, x: str) -> Term:
    return Term("Elementwise", (x,), (name,))


def reshape(x: str) -> Term:
    return Term("Reshape", (x,), ((1, 1, 64, 32),))


@pytest.fixture(params=["ethos-u55-128", "ethos-u85-256"])
def model(request):
    return VelaCalibratedCost(request.param)


def copies(graph, roots, model):
    return reshape_copies(graph, roots, lambda _value: TYPE, model)


def test_a_reshape_between_single_readers_is_free(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "b": unary("CLAMP#2", "r")}
    assert copies(graph, ["b"], model) == 0


def test_a_reshape_whose_input_has_another_reader_is_a_copy(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "b": unary("CLAMP#2", "r"), "c": unary("CLAMP#3", "a")}
    assert copies(graph, ["b", "c"], model) == pytest.approx(model.memory_copy(TYPE))
    assert model.memory_copy(TYPE) > 0


def test_a_reshape_read_twice_is_free_unless_a_reader_is_a_reshape(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "b": unary("CLAMP#2", "r")}
    assert copies(graph, ["b", "r"], model) == 0
    graph["s"] = reshape("r")
    assert copies(graph, ["b", "s"], model) == pytest.approx(model.memory_copy(TYPE))


def test_a_reshape_of_a_reshape_is_folded_even_with_fan_out(model):
    graph = {"x": leaf("x"), "a": unary("CLAMP#1", "x"), "r": reshape("a"), "s": reshape("r"), "b": unary("CLAMP#2", "s"), "c": unary("CLAMP#3", "r")}
    assert copies(graph, ["b", "c"], model) == pytest.approx(model.memory_copy(TYPE))  # r is copied, s is not


READERS = {
    "clamp": lambda value: unary("CLAMP", value),
    "slice": lambda value: Term("Slice", (value,), ((0, 0, 0), (1, 32, 32))),
    "transpose": lambda value: Term("Transpose", (value,), ((0, 2, 1),)),
    "reshape": lambda value: Term("Reshape", (value,), ((64, 32),)),
}


def _tosa_reader(g: _Graph, kind: str, value: str, shape: list[int]) -> str:
    if kind == "clamp":
        return _clamp(g, kind, value, shape, "int8")
    if kind == "slice":
        return g.op(kind, ts.Op.SLICE, [value, g.shape_const([0] * len(shape)), g.shape_const([1, 32, 32])], [1, 32, 32], "int8", _attr("SliceAttribute"))
    if kind == "transpose":
        return g.op(kind, ts.Op.TRANSPOSE, [value], [shape[0], shape[2], shape[1]], "int8", _attr("TransposeAttribute", [0, 2, 1]))
    return g.op(kind, ts.Op.RESHAPE, [value, g.shape_const([64, 32])], [64, 32], "int8", _attr("ReshapeAttribute"))


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
@pytest.mark.parametrize(
    "input_readers, output_readers",
    [((), ("clamp",)), ((), ("clamp", "clamp")), ((), ("slice", "slice")), ((), ("transpose", "transpose")),
     ((), ("clamp", "reshape")), ((), ("slice", "reshape")), (("clamp",), ("clamp",)), (("transpose",), ("clamp",))],
)
def test_reshape_copies_match_the_memory_copies_vela_runs(target, input_readers, output_readers):
    """CLAMP -> RESHAPE (1, 8, 8, 32) -> (1, 64, 32), with other readers of the reshape's input and output."""
    g, graph = _Graph(), {"x": leaf("x"), "a": unary("CLAMP", "x"), "r": Term("Reshape", ("a",), ((1, 64, 32),))}
    a = _clamp(g, "a", g.input([1, 8, 8, 32], "int8"), [1, 8, 8, 32], "int8")
    r = g.op("r", ts.Op.RESHAPE, [a, g.shape_const([1, 64, 32])], [1, 64, 32], "int8", _attr("ReshapeAttribute"))
    for i, kind in enumerate(input_readers):
        g.output(_clamp(g, kind, a, [1, 8, 8, 32], "int8"))
        graph[f"in{i}"] = unary("CLAMP", "a")
    for i, kind in enumerate(output_readers):
        g.output(_tosa_reader(g, kind, r, [1, 64, 32]))
        graph[f"out{i}"] = READERS[kind]("r")
    roots = [v for v in graph if v.startswith(("in", "out"))]
    vela_copies = [layer for layer in estimate(g.tosa.serialize(), target).layers if layer.operator == "MemoryCopy" and layer.source_operator == "Reshape"]
    model = VelaCalibratedCost(target)
    assert len(vela_copies) == round(copies(graph, roots, model) / model.memory_copy(TYPE))


def test_term_costs_prices_each_configuration_once_and_as_the_model_does(model):
    calls = []

    class Counting:
        unit = model.unit

        def cost(self, term, out, args):
            calls.append(term)
            return model.cost(term, out, args)

    types = {"x": TYPE, "y": TYPE, "a": TYPE, "b": TYPE, "r": TensorType((1, 1, 64, 32), "torch.int8")}
    term_cost = term_costs(Counting(), types)
    same_op_on_other_operands = [("a", unary("CLAMP#1", "x")), ("b", unary("CLAMP#1", "y"))]
    for eclass, term in [*same_op_on_other_operands, ("r", reshape("a")), ("a", unary("CLAMP#1", "x"))]:
        assert term_cost(eclass, term) == model.cost(term, types[eclass], [types[a] for a in term.args])
    assert calls == [unary("CLAMP#1", "x"), reshape("a")]
    assert term_cost("q", leaf("q")) == model.cost(leaf("q"), None, [])  # unknown types are priced as unknown


NHWC = TensorType((1, 8, 8, 16), "torch.int8")


def conv_then_transpose(second_reader: bool, producer: str = "CONV2D", perm=(0, 3, 1, 2)) -> tuple[dict, list[str]]:
    """producer -> per-channel RESCALE -> TRANSPOSE, the RESCALE's output also returned when second_reader."""
    graph = {
        "x": leaf("x"),
        "w": leaf("w"),
        "conv": Term("Opaque", ("x", "w"), (f"tosa.{producer}.default#1",)),
        "rescale": Term("Rescale", ("conv",), ("torch.int8", (3, 5), (30, 30), 0, 0, "")),
        "t": Term("Transpose", ("rescale",), (perm,)),
    }
    return graph, ["t", "rescale"] if second_reader else ["t"]


@pytest.mark.parametrize("target, folds", [("ethos-u55-128", False), ("ethos-u85-256", True)])
def test_a_transpose_that_alone_reads_a_convolution_is_folded_where_vela_folds_it(target, folds):
    model = VelaCalibratedCost(target)
    assert model.folds_transpose_into_producer == folds
    alone, roots = conv_then_transpose(second_reader=False)
    assert folded_transposes(alone, roots, model) == (["t"] if folds else [])
    shared, roots = conv_then_transpose(second_reader=True)
    assert folded_transposes(shared, roots, model) == []
    transpose = model.cost(alone["t"], NHWC, [NHWC])
    priced = graph_cost(alone, ["t"], lambda _value: NHWC, model)
    assert graph_cost(shared, ["t", "rescale"], lambda _value: NHWC, model) - priced == pytest.approx(transpose if folds else 0.0)


@pytest.mark.parametrize("producer, perm", [("MATMUL", (0, 3, 1, 2)), ("CONV2D", (0, 2, 1, 3))])
def test_only_the_fold_calibration_measured_is_assumed(producer, perm):
    """A CONV2D's output written NCHW was measured folded; a MATMUL's output, or another permutation, was not."""
    graph, roots = conv_then_transpose(second_reader=False, producer=producer, perm=perm)
    assert folded_transposes(graph, roots, VelaCalibratedCost("ethos-u85-256")) == []


@pytest.mark.parametrize("target, folds", [("ethos-u55-128", False), ("ethos-u85-256", True)])
def test_vela_writes_a_convolution_output_transposed_only_where_the_calibration_says_so(target, folds):
    from eqsat.calibration.graphs import Sample, build_tosa

    graph, layouts = build_tosa([Sample("ctx_transpose_conv", {"h": 8, "w": 8, "c": 16, "order": "after"})])
    names = [layer.name for layer in estimate(graph, target).layers]
    (transposed,) = [t for t, role in layouts[0].producer.items() if role == "transpose"]
    assert all(name == transposed for name in names) == folds, names  # no layer writes the convolution's own output


WIDE = TensorType((1, 64, 32), "torch.int32")


def input_rescale(x: str, tag: int) -> Term:
    return Term("Rescale", (x,), ("torch.int32", (1 << 30,), (31,), 0, 0, tag))


def test_an_input_rescale_that_a_mul_and_another_op_read_costs_the_standalone_rescale_it_becomes(model):
    types = {"x": TYPE, "y": TYPE, "wide_x": WIDE, "wide_x2": WIDE, "wide_y": WIDE, "a": WIDE, "b": WIDE}
    shared = {
        "x": leaf("x"),
        "y": leaf("y"),
        "wide_x": input_rescale("x", 2),
        "wide_y": input_rescale("y", 3),
        "a": Term("Elementwise", ("wide_x", "wide_y"), ("tosa.SUB.default#1",)),
        "b": Term("Elementwise", ("wide_x", "wide_y"), ("tosa.MUL.default#2",)),
    }
    private = {**shared, "wide_x2": input_rescale("x", 4), "wide_y2": input_rescale("y", 5)}
    private["b"] = Term("Elementwise", ("wide_x2", "wide_y2"), ("tosa.MUL.default#2",))
    types["wide_y2"] = WIDE
    shared_cost, private_cost = (graph_cost(g, ["a", "b"], types.get, model) for g in (shared, private))
    standalone = model.standalone_input_rescale(TYPE, WIDE)
    assert standalone > 0
    assert shared_cost == pytest.approx(private_cost - 2 * model.cost(input_rescale("x", 4), WIDE, [TYPE]) + 2 * standalone)
    assert shared_cost > private_cost


def test_an_input_rescale_that_only_ops_it_is_not_fused_into_read_costs_nothing_more():
    model = VelaCalibratedCost("ethos-u55-128")  # runs the input rescales of ADD and SUB alone anyway
    graph = {"x": leaf("x"), "wide": input_rescale("x", 1)}
    graph |= {"a": Term("Elementwise", ("wide", "wide"), ("tosa.SUB.default#1",)), "b": Term("Elementwise", ("wide", "wide"), ("tosa.ADD.default#2",))}
    types = {"x": TYPE, "wide": WIDE, "a": WIDE, "b": WIDE}
    assert graph_cost(graph, ["a", "b"], types.get, model) == pytest.approx(sum(model.cost(t, types[v], [types.get(a) for a in t.args]) for v, t in graph.items()))


def test_an_input_rescale_with_one_reader_costs_nothing_more(model):
    graph = {"x": leaf("x"), "wide": input_rescale("x", 1), "a": Term("Elementwise", ("wide", "wide"), ("tosa.MUL.default#1",))}
    types = {"x": TYPE, "wide": WIDE, "a": WIDE}
    assert graph_cost(graph, ["a"], types.get, model) == pytest.approx(sum(model.cost(t, types[v], [types.get(a) for a in t.args]) for v, t in graph.items()))


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
@pytest.mark.parametrize("ops", [("SUB", "ADD"), ("MUL", "MUL"), ("MUL", "SUB")])
def test_sharing_input_rescales_costs_cycles_where_vela_says_so(target, ops):
    """x, y -> input RESCALEs -> two binary ops -> output RESCALEs, with one pair of input rescales shared by
    both ops or one pair per op: graph_cost ranks the two as Vela's cycles_total does (Ethos-U55 fuses the
    input rescales of a MUL only, so there sharing them for an ADD and a SUB is cheaper; the model, which
    prices an unfused input rescale inside its binary op, calls the two equal)."""
    shape = [1, 64, 32]

    def build(shared: bool) -> tuple[int, float]:
        g = _Graph()
        x, y = g.input(shape, "int8"), g.input(shape, "int8")
        graph, roots, wide = {"x": leaf("x"), "y": leaf("y")}, [], None
        for step, op in enumerate(ops):
            scale = "unit" if op == "MUL" else "add"
            tag = 0 if shared else step
            if wide is None or not shared:
                wide = [_rescale(g, f"in{step}{v}", value, shape, "int8", "int32", scale, zero_points=(3, 0)) for v, value in enumerate((x, y))]
            z = _binary(g, f"op{step}", op, wide[0], wide[1], shape)
            g.output(_rescale(g, f"out{step}", z, shape, "int32", "int8", "mul_out" if op == "MUL" else "add_out"))
            for v, value in enumerate(("x", "y")):
                graph[f"wide{v}_{tag}"] = Term("Rescale", (value,), ("torch.int32", (1 << 30,), (30,), 3, 0, 10 * v + tag))
            graph[f"z{step}"] = Term("Elementwise", (f"wide0_{tag}", f"wide1_{tag}"), (f"tosa.{op}.default#{step}",))
            graph[f"out{step}"] = Term("Rescale", (f"z{step}",), ("torch.int8", (1 << 30,), (49,), 0, 0, 20 + step))
            roots.append(f"out{step}")
        types = {v: (TYPE if v in ("x", "y") or v.startswith("out") else WIDE) for v in graph}
        return estimate(g.tosa.serialize(), target).cycles_total, graph_cost(graph, roots, types.get, VelaCalibratedCost(target))

    (vela_shared, model_shared), (vela_private, model_private) = build(True), build(False)
    assert (vela_shared > vela_private) == (model_shared > model_private)
    if vela_shared > vela_private:
        assert model_shared - model_private > 0.2 * (vela_shared - vela_private)
