"""Bridge unit tests on hand-built FX graphs: read, load, write back."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.arm.tosa.specification import TosaLoweringContext, TosaSpecification
from executorch.exir.dialects._ops import ops as exir_ops

from hypothesis import given, settings

from eqsat import bridge_fx, fuzz, rules
from eqsat.soundness import Saturated, law_fires_in
from eqsat.extract.egraph_view import EGraphView
from eqsat.extract.greedy import extract_greedy
from eqsat.ops.nodes import Dialect, output_slots
from eqsat.ops.rescale import scales_of
from tests.graphs import GraphBuilder, assert_bit_identical

aten = torch.ops.aten
TOSA = exir_ops.backend.tosa
U55_SPEC = TosaSpecification.create_from_string("TOSA-1.0+INT+int16+int4+u55")


def round_trip(graph_module, union_program: str = ""):
    """Load, optionally union extra terms in (raw egglog), extract by element count, write back."""
    loaded = bridge_fx.to_egraph(graph_module)
    if union_program:
        loaded.egraph._run_program(*loaded.egraph._egraph.parse_program(union_program))
    view = EGraphView.of(loaded.egraph, len(loaded.nodes))

    def cost(eclass, term):
        known = view.types.get(eclass)
        return 1.0 + (0 if known is None else torch.Size(known.shape).numel())

    selection = extract_greedy(view.candidates, cost)
    return loaded, view, bridge_fx.to_fx(loaded, selection, view.class_of_node)


def classes_of(graph_module, *names, merge_duplicates=False):
    loaded = bridge_fx.to_egraph(graph_module, merge_duplicates=merge_duplicates)
    view = EGraphView.of(loaded.egraph, len(loaded.nodes))
    by_name = {n.name: i for i, n in enumerate(loaded.nodes)}
    return [view.class_of_node[by_name[name]] for name in names]


@pytest.mark.parametrize("alias", [aten.cat.default, aten.concat.default, aten.concatenate.default])
def test_every_concat_alias_is_the_same_term(alias):
    g = GraphBuilder()
    x, y = g.input("x", (1, 4, 2)), g.input("y", (1, 3, 2))
    reference = g.call(aten.cat.default, [x, y], 1)
    aliased = g.call(alias, [x, y], 1)
    gm = g.output(reference, aliased)
    first, second = classes_of(gm, reference.name, aliased.name)
    assert first == second


def test_tosa_concat_is_the_same_term_as_aten_cat():
    g = GraphBuilder()
    x, y = g.input("x", (1, 4, 2)), g.input("y", (1, 3, 2))
    with TosaLoweringContext(U55_SPEC):
        tosa_concat = g.call(TOSA.CONCAT.default, [x, y], axis=1)
    aten_cat = g.call(aten.cat.default, [x, y], -2)
    gm = g.output(tosa_concat, aten_cat)
    first, second = classes_of(gm, tosa_concat.name, aten_cat.name)
    assert first == second


def test_round_trip_without_rewrites_reuses_every_node_with_its_meta():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    t = g.call(aten.permute_copy.default, x, [0, 2, 3, 1])
    s = g.call(aten.slice_copy.Tensor, t, 3, 0, 1)
    c = g.call(aten.cat.default, [s, s], 3)
    v = g.call(aten.view_copy.default, c, [1, 3, 4, 2])
    r = g.call(aten.relu.default, v)
    t.meta["debug_handle"] = 7
    gm = g.output(r)
    _, _, rebuilt = round_trip(gm)
    assert [n.name for n in rebuilt.graph.nodes] == [n.name for n in gm.graph.nodes]
    new_t = next(n for n in rebuilt.graph.nodes if n.name == t.name)
    assert new_t.meta["debug_handle"] == 7 and new_t.meta["stack_trace"] == t.meta["stack_trace"]
    assert_bit_identical(gm, rebuilt)


def test_duplicate_output_slots_stay_distinct_slots():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    y = g.call(aten.neg.default, x)
    gm = g.output(y, y, x)
    _, _, rebuilt = round_trip(gm)
    slots = output_slots(rebuilt.graph)
    assert len(slots) == 3 and slots[0] is slots[1] and slots[2].op == "placeholder"
    assert_bit_identical(gm, rebuilt)


def test_multi_output_op_and_getitem_round_trip():
    g = GraphBuilder()
    x = g.input("x", (2, 6), torch.float32)
    values_and_indices = g.call(aten.max.dim, x, 1)
    values, indices = g.getitem(values_and_indices, 0), g.getitem(values_and_indices, 1)
    gm = g.output(indices, values)
    _, _, rebuilt = round_trip(gm)
    assert sum(n.target is aten.max.dim for n in rebuilt.graph.nodes) == 1
    assert_bit_identical(gm, rebuilt)


def test_identical_pure_opaque_ops_merge_on_request_and_placeholders_never():
    g = GraphBuilder()
    x, y = g.input("x", (2, 3)), g.input("y", (2, 3))
    a, b = g.call(aten.cumsum.default, x, 0), g.call(aten.cumsum.default, x, 0)
    gm = g.output(a, b, y)
    class_a, class_b, class_x, class_y = classes_of(gm, a.name, b.name, x.name, y.name, merge_duplicates=True)
    assert class_a == class_b
    assert class_x != class_y
    class_a, class_b = classes_of(gm, a.name, b.name)
    assert class_a != class_b


def test_opaque_ops_with_different_arguments_do_not_merge():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    a, b = g.call(aten.clamp.default, x, -1, 5), g.call(aten.clamp.default, x, -1, 6)
    gm = g.output(a, b)
    class_a, class_b = classes_of(gm, a.name, b.name, merge_duplicates=True)
    assert class_a != class_b


def test_constants_and_get_attr_round_trip():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    weight = g.constant("weight", torch.arange(6, dtype=torch.int8).reshape(2, 3))
    gm = g.output(g.call(aten.add.Tensor, x, weight))
    _, _, rebuilt = round_trip(gm)
    assert any(n.op == "get_attr" and n.target == "weight" for n in rebuilt.graph.nodes)
    assert_bit_identical(gm, rebuilt)


def test_tosa_slice_reads_its_const_shape_operands():
    g = GraphBuilder()
    x = g.input("x", (1, 8, 8, 16))
    with TosaLoweringContext(U55_SPEC):
        start = g.call(TOSA.CONST_SHAPE.default, [0, 0, 0, 0])
        size = g.call(TOSA.CONST_SHAPE.default, [1, 8, 8, 8])
        sliced = g.call(TOSA.SLICE.default, x, start, size)
    gm = g.output(sliced)
    loaded = bridge_fx.to_egraph(gm)
    assert loaded.terms[loaded.index_of[sliced]] == bridge_fx.Term(
        "Slice", (loaded.index_of[x],), ((0, 0, 0, 0), (1, 8, 8, 8))
    )
    with TosaLoweringContext(U55_SPEC):
        _, _, rebuilt = round_trip(gm)
    assert [n.name for n in rebuilt.graph.nodes] == [n.name for n in gm.graph.nodes]


def _double_transpose(builder_call):
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    first = builder_call(g, x, [0, 2, 3, 1])
    second = builder_call(g, first, [0, 3, 1, 2])
    return g, x, second


def test_new_nodes_are_built_in_the_aten_dialect_with_val():
    g, x, second = _double_transpose(lambda g, x, p: g.call(aten.permute_copy.default, x, p))
    gm = g.output(g.call(aten.neg.default, second))
    loaded, _, rebuilt = round_trip(gm, "(union (Node 2) (Transpose (Node 0) (vec-of 0 1 2 3)))")
    assert loaded.dialect is Dialect.ATEN
    permutes = [n for n in rebuilt.graph.nodes if n.target is aten.permute_copy.default]
    assert len(permutes) == 1 and permutes[0].args[1] == [0, 1, 2, 3]
    assert tuple(permutes[0].meta["val"].shape) == (1, 2, 3, 4)
    assert_bit_identical(gm, rebuilt)


def test_new_nodes_are_built_in_the_tosa_dialect_with_val_and_qparams():
    def tosa_transpose(g, x, perm):
        with TosaLoweringContext(U55_SPEC):
            node = g.call(TOSA.TRANSPOSE.default, x, perm)
        node.meta["output_qparams"] = {0: "qparams of x"}
        return node

    g, x, second = _double_transpose(tosa_transpose)
    x.meta["output_qparams"] = {0: "qparams of x"}
    gm = g.output(second)
    with TosaLoweringContext(U55_SPEC):
        loaded, _, rebuilt = round_trip(gm, "(union (Node 2) (Reshape (Node 0) (vec-of 1 2 3 4)))")
    assert loaded.dialect is Dialect.TOSA
    reshapes = [n for n in rebuilt.graph.nodes if n.target == TOSA.RESHAPE.default]
    assert len(reshapes) == 1 and not any(n.target == TOSA.TRANSPOSE.default for n in rebuilt.graph.nodes)
    assert tuple(reshapes[0].meta["val"].shape) == (1, 2, 3, 4)
    assert reshapes[0].meta["output_qparams"] == {0: "qparams of x"}
    shape_operand = reshapes[0].args[1]
    assert shape_operand.target == TOSA.CONST_SHAPE.default and shape_operand.args[0] == [1, 2, 3, 4]


def _qparams(scale: float, zp: int):
    from executorch.backends.arm._passes.quant_args import QuantArgs

    return QuantArgs(scale, zp, -128, 127, torch.int8)


def _concat_with_qparams(make_concat, first, second, output):
    g = GraphBuilder()
    x, y = g.input("x", (1, 4, 2)), g.input("y", (1, 3, 2))
    x.meta["output_qparams"], y.meta["output_qparams"] = {0: first}, {0: second}
    joined = make_concat(g, x, y)
    joined.meta["input_qparams"] = {0: first}  # what FoldAndAnnotateQParamsPass leaves (_merge_qparams keeps the first)
    joined.meta["output_qparams"] = {0: output}
    gm = g.output(joined)
    loaded = bridge_fx.to_egraph(gm)
    return loaded.terms[loaded.index_of[joined]]


CONCATS = {
    "edge-aten-cat": lambda g, x, y: g.call(aten.cat.default, [x, y], 1),
    "tosa-concat": lambda g, x, y: _tosa_concat(g, x, y),
}


def _tosa_concat(g, x, y):
    with TosaLoweringContext(U55_SPEC):
        return g.call(TOSA.CONCAT.default, [x, y], axis=1)


@pytest.mark.parametrize("dialect", sorted(CONCATS))
def test_concat_with_shared_qparams_is_data_movement(dialect):
    q = _qparams(0.1, 3)
    assert _concat_with_qparams(CONCATS[dialect], q, q, q).op == "Concat"


@pytest.mark.parametrize("dialect", sorted(CONCATS))
@pytest.mark.parametrize("which", ["first", "second"])
def test_concat_whose_inputs_have_other_qparams_is_opaque(dialect, which):
    shared, other = _qparams(0.1, 3), _qparams(0.2, 3)
    first, second = (other, shared) if which == "first" else (shared, other)
    assert _concat_with_qparams(CONCATS[dialect], first, second, shared).op == "Opaque"


def _classes_of_adds_with_input_qparams(first, second):
    """The e-classes of two edge-ATen adds of the same operands, merging duplicates, with these input qparams."""
    g = GraphBuilder()
    x, y = g.input("x", (1, 4, 2)), g.input("y", (1, 4, 2))
    a, b = g.call(aten.add.Tensor, x, y), g.call(aten.add.Tensor, x, y)
    for node, input_qparams in ((a, first), (b, second)):
        node.meta["input_qparams"] = {0: input_qparams, 1: input_qparams}
        node.meta["output_qparams"] = {0: _qparams(0.1, 3)}
    return classes_of(g.output(a, b), a.name, b.name, merge_duplicates=True)


def test_ops_that_differ_only_in_input_qparams_do_not_merge():
    # on edge ATen ops the input qparams say how each int8 operand is dequantized: another value
    first, second = _classes_of_adds_with_input_qparams(_qparams(0.1, 3), _qparams(0.2, 3))
    assert first != second
    first, second = _classes_of_adds_with_input_qparams(_qparams(0.1, 3), _qparams(0.1, 3))
    assert first == second


def _duplicate_rescales():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    with TosaLoweringContext(U55_SPEC):
        a = g.call(TOSA.RESCALE.default, x, torch.int32, [0.25], 1, 0)
        b = g.call(TOSA.RESCALE.default, x, torch.int32, [0.25], 1, 0)
    return g.output(a, b), a, b


def test_rescale_is_read_with_the_serializer_multipliers_and_shifts():
    gm, a, _ = _duplicate_rescales()
    loaded = bridge_fx.to_egraph(gm)
    term = loaded.terms[loaded.index_of[a]]
    assert term.op == "Rescale" and term.attrs[:5] == ("torch.int32", (1 << 30,), (32,), 1, 0)
    assert scales_of((1 << 30,), (32,)) == [0.25]


def test_duplicate_input_rescales_stay_apart_even_when_duplicates_merge():
    gm, a, b = _duplicate_rescales()
    assert classes_of(gm, a.name, b.name)[0] != classes_of(gm, a.name, b.name)[1]
    first, second = classes_of(gm, a.name, b.name, merge_duplicates=True)
    assert first != second


def _duplicate_difference():
    """x - mean computed twice, as the Arm backend lowers a layer norm: input RESCALEs, SUB, output RESCALE."""
    g = GraphBuilder()
    x, mean = g.input("x", (1, 4, 8)), g.input("mean", (1, 4, 1))
    with TosaLoweringContext(U55_SPEC):
        def difference():
            wide_x = g.call(TOSA.RESCALE.default, x, torch.int32, [0.5], 0, 0)
            wide_mean = g.call(TOSA.RESCALE.default, mean, torch.int32, [0.5], 0, 0)
            return g.call(TOSA.RESCALE.default, g.call(TOSA.SUB.default, wide_x, wide_mean), torch.int8, [0.25], 0, 0)

        first, second = difference(), difference()
    return g.output(first, second), first, second


def test_duplicate_ops_on_duplicate_input_rescales_merge_on_request():
    gm, first, second = _duplicate_difference()
    nodes = list(gm.graph.nodes)[:-1]  # x, mean, then per difference: 2 input RESCALEs, SUB, output RESCALE
    assert bridge_fx.duplicate_pairs(nodes) == [(4, 8), (5, 9)]  # the SUBs and the output RESCALEs, not the input RESCALEs
    a, b = classes_of(gm, first.name, second.name)
    assert a != b
    a, b = classes_of(gm, first.name, second.name, merge_duplicates=True)
    assert a == b


def test_duplicate_reshapes_of_input_rescales_stay_apart_even_when_duplicates_merge():
    """x * s and y * s with the scalar s rescaled and reshaped once per MUL: Vela removes each reshape and fuses its
    rescale into the MUL reading it, so merging the reshapes would share one rescale between both MULs."""
    g = GraphBuilder()
    x, y, s = g.input("x", (1, 4, 8)), g.input("y", (1, 4, 8)), g.input("s", (1,))
    with TosaLoweringContext(U55_SPEC):
        def scaled(v):
            wide = g.call(TOSA.RESCALE.default, v, torch.int32, [0.5], 0, 0)
            scalar = g.call(TOSA.RESHAPE.default, g.call(TOSA.RESCALE.default, s, torch.int32, [1.0], 0, 0), g.const_shape([1, 1, 1]))
            return g.call(TOSA.RESCALE.default, g.call(TOSA.MUL.default, wide, scalar), torch.int8, [0.25], 0, 0)

        first, second = scaled(x), scaled(y)
    gm = g.output(first, second)
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    reshapes = [n.name for n in nodes if n.target == TOSA.RESHAPE.default]
    assert [(nodes[i].target, nodes[j].target) for i, j in bridge_fx.duplicate_pairs(nodes)] == [(TOSA.CONST_SHAPE.default,) * 2]
    a, b = classes_of(gm, *reshapes, merge_duplicates=True)
    assert a != b


def test_tosa_pad_reads_its_const_shape_padding_and_writes_a_new_pad_back():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    x.meta["output_qparams"] = {0: "qparams of x"}
    with TosaLoweringContext(U55_SPEC):
        padded = g.call(TOSA.PAD.default, x, g.const_shape([0, 0, 1, 0, 0, 2, 3, 1]), value=-7)
        t = g.call(TOSA.TRANSPOSE.default, padded, [0, 3, 1, 2])
    gm = g.output(t)
    loaded = bridge_fx.to_egraph(gm)
    assert loaded.terms[loaded.index_of[padded]] == bridge_fx.Term("Pad", (loaded.index_of[x],), ((0, 0, 1, 0, 0, 2, 3, 1), -7))
    union = "(union (Node 3) (Pad (Transpose (Node 0) (vec-of 0 3 1 2)) (vec-of 0 0 3 1 1 0 0 2) -7))"
    with TosaLoweringContext(U55_SPEC):
        _, _, rebuilt = round_trip(gm, union)
    pads = [n for n in rebuilt.graph.nodes if n.target == TOSA.PAD.default]
    assert len(pads) == 1 and pads[0].args[0].target == TOSA.TRANSPOSE.default
    assert pads[0].args[1].target == TOSA.CONST_SHAPE.default and pads[0].args[1].args[0] == [0, 0, 3, 1, 1, 0, 0, 2]
    assert pads[0].kwargs == {"value": -7} and tuple(pads[0].meta["val"].shape) == (1, 8, 3, 5)
    assert pads[0].meta["output_qparams"] == {0: "qparams of x"}


def test_aten_constant_pad_nd_reads_as_full_rank_pairs_and_writes_back_bit_identical():
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4))
    padded = g.call(aten.constant_pad_nd.default, x, [1, 2, 0, 1], 5)
    gm = g.output(g.call(aten.permute_copy.default, padded, [2, 0, 1]))
    loaded = bridge_fx.to_egraph(gm)
    assert loaded.terms[loaded.index_of[padded]] == bridge_fx.Term("Pad", (loaded.index_of[x],), ((0, 0, 0, 1, 1, 2), 5))
    _, _, rebuilt = round_trip(gm, "(union (Node 2) (Pad (Transpose (Node 0) (vec-of 2 0 1)) (vec-of 1 2 0 0 0 1) 5))")
    pads = [n for n in rebuilt.graph.nodes if n.target is aten.constant_pad_nd.default]
    assert len(pads) == 1 and pads[0].args[1:] == ([0, 1, 0, 0, 1, 2], 5)
    assert_bit_identical(gm, rebuilt)


@pytest.mark.parametrize("reason, pad, value", [("crops", [-1, 0], 0), ("fractional-value", [1, 0], 0.5)])
def test_aten_constant_pad_nd_that_is_not_a_pad_stays_opaque(reason, pad, value):
    g = GraphBuilder()
    x = g.input("x", (2, 3), torch.float32)
    padded = g.call(aten.constant_pad_nd.default, x, pad, value)
    loaded = bridge_fx.to_egraph(g.output(padded))
    assert loaded.terms[loaded.index_of[padded]].op == "Opaque", reason


def test_tosa_table_is_a_table_term_and_a_new_table_copies_the_original():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    lut = g.constant("lut", torch.arange(-128, 128, dtype=torch.int8).flip(0).contiguous())
    with TosaLoweringContext(U55_SPEC):
        looked_up = g.call(TOSA.TABLE.default, x, lut)
        looked_up.meta["output_qparams"] = {0: "qparams of the table"}
        t = g.call(TOSA.TRANSPOSE.default, looked_up, [0, 2, 3, 1])
    gm = g.output(t)
    loaded = bridge_fx.to_egraph(gm)
    term = loaded.terms[loaded.index_of[looked_up]]
    assert term.op == "Table" and term.args == (loaded.index_of[x], loaded.index_of[lut])
    key = term.attrs[0]
    with TosaLoweringContext(U55_SPEC):
        _, _, rebuilt = round_trip(gm, f'(union (Node 3) (Table "{key}" (Transpose (Node 0) (vec-of 0 2 3 1)) (Node 1)))')
    tables = [n for n in rebuilt.graph.nodes if n.target == TOSA.TABLE.default]
    assert len(tables) == 1 and tables[0].args[0].target == TOSA.TRANSPOSE.default and tables[0].args[1].op == "get_attr"
    assert tuple(tables[0].meta["val"].shape) == (1, 3, 4, 2)
    assert tables[0].meta["output_qparams"] == {0: "qparams of the table"}


def test_an_aten_slice_is_read_from_keywords_and_defaults_alike():
    g = GraphBuilder()
    x = g.input("x", (1, 6, 4))
    by_position = g.call(aten.slice_copy.Tensor, x, 1, 2, 5)
    by_keyword = g.call(aten.slice_copy.Tensor, x, dim=1, start=2, end=5)
    defaults = g.call(aten.slice_copy.Tensor, x, end=1)  # dim 0, start 0
    gm = g.output(g.call(aten.cat.default, [by_position, by_keyword], 2), defaults)
    loaded = bridge_fx.to_egraph(gm)
    term = lambda node: loaded.terms[loaded.index_of[node]]  # noqa: E731
    assert term(by_position) == term(by_keyword) == bridge_fx.Term("Slice", (loaded.index_of[x],), ((0, 2, 0), (1, 3, 4)))
    assert term(defaults) == bridge_fx.Term("Slice", (loaded.index_of[x],), ((0, 0, 0), (1, 6, 4)))


def test_an_aten_slice_with_a_step_stays_opaque_however_the_step_is_given():
    g = GraphBuilder()
    x = g.input("x", (1, 6, 4))
    positional = g.call(aten.slice_copy.Tensor, x, 1, 0, 6, 2)
    keyword = g.call(aten.slice_copy.Tensor, x, dim=1, step=2)
    gm = g.output(positional, keyword)
    loaded = bridge_fx.to_egraph(gm)
    assert {loaded.terms[loaded.index_of[n]].op for n in (positional, keyword)} == {"Opaque"}
    _, _, rebuilt = round_trip(gm)
    assert_bit_identical(gm, rebuilt)


def test_a_graph_with_a_side_effect_nothing_reads_comes_back_untouched_with_the_reason():
    import eqsat

    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    there = g.call(aten.permute_copy.default, x, [0, 2, 3, 1])
    back = g.call(aten.permute_copy.default, there, [0, 3, 1, 2])
    g.graph.call_function(torch.ops.aten._assert_scalar.default, (True, "a check"))
    gm = g.output(g.call(aten.neg.default, back))
    with pytest.warns(RuntimeWarning, match="side effects"):
        result, report = eqsat.optimize(gm, target="ethos-u55-128")
    assert result is gm and "_assert_scalar" in report.fallback
    assert any(n.target == torch.ops.aten._assert_scalar.default for n in result.graph.nodes)


# ---------------------------------------------------------------- special TOSA dtypes (INT48, INT4, ...)

INT48 = bridge_fx.TosaSpecialDtype.INT48


def rescaled_accumulator(moved: str, int48: bool):
    """An int32 accumulator (marked INT48, as an a16w8 convolution's output is, when int48) -> RESCALE to int16 -> moved."""
    g = GraphBuilder()
    acc = g.input("acc", (1, 2, 3, 4), torch.int32)
    if int48:
        acc.meta[bridge_fx.TosaSpecialDtype.meta_key()] = INT48
    with TosaLoweringContext(U55_SPEC):
        r = g.call(TOSA.RESCALE.default, acc, torch.int16, [0.25], 0, 0)
        if moved == "transpose":
            out = g.call(TOSA.TRANSPOSE.default, r, [0, 3, 1, 2])
        elif moved == "slice":
            out = g.call(TOSA.SLICE.default, r, g.const_shape([0, 1, 0, 0]), g.const_shape([1, 1, 3, 4]))
        else:
            out = g.call(TOSA.RESHAPE.default, r, g.const_shape([1, 6, 4]))
    return g.output(out), r


@pytest.mark.parametrize("moved", ["transpose", "slice", "reshape"])
def test_data_movement_moves_onto_an_int32_accumulator(moved):
    """The unmarked twin of the next test: the rule fires, putting the data movement on the accumulator."""
    from eqsat.rules.rescale import rescale
    from eqsat.soundness import Saturated, law_fires_in

    gm, r = rescaled_accumulator(moved, int48=False)
    with TosaLoweringContext(U55_SPEC):
        s = Saturated(gm, rescale)
    assert s.fired(f"{moved}-through-rescale") == 1


@pytest.mark.parametrize("moved", ["transpose", "slice", "reshape"])
def test_no_rule_moves_data_movement_onto_an_int48_tensor(moved):
    """A RESCALE reading an INT48 tensor is read as opaque: moving the data movement above it would permute,
    slice or reshape the packed INT48 accumulator (upstream: `_node_or_inputs_are_int48`)."""
    from eqsat.rules.rescale import rescale
    from eqsat.soundness import Saturated, law_fires_in

    gm, r = rescaled_accumulator(moved, int48=True)
    loaded = bridge_fx.to_egraph(gm)
    assert loaded.terms[loaded.index_of[r]].op == "Opaque"
    with TosaLoweringContext(U55_SPEC):
        s = Saturated(gm, rescale)
    assert s.fired(f"{moved}-through-rescale") == 0


def test_a_node_with_a_special_operand_or_value_is_opaque_but_shape_operands_are_not_special():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    bias = g.input("bias", (1, 2, 3, 4), torch.int32)
    bias.meta[bridge_fx.TosaSpecialDtype.meta_key()] = INT48
    with TosaLoweringContext(U55_SPEC):
        reads_int48 = g.call(TOSA.ADD.default, g.call(TOSA.CAST.default, x, torch.int32), bias)
        packed = g.call(TOSA.TRANSPOSE.default, x, [0, 2, 3, 1])
        packed.meta[bridge_fx.TosaSpecialDtype.meta_key()] = bridge_fx.TosaSpecialDtype.INT4
        plain = g.call(TOSA.RESHAPE.default, x, g.const_shape([6, 4]))
    loaded = bridge_fx.to_egraph(g.output(reads_int48, packed, plain))
    assert [loaded.terms[loaded.index_of[n]].op for n in (reads_int48, packed, plain)] == ["Opaque", "Opaque", "Reshape"]


def test_a_new_node_standing_in_for_an_int48_node_keeps_the_mark():
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4), torch.int32)
    with TosaLoweringContext(U55_SPEC):
        twice = g.call(TOSA.RESHAPE.default, g.call(TOSA.RESHAPE.default, x, g.const_shape([6, 4])), g.const_shape([4, 6]))
    twice.meta[bridge_fx.TosaSpecialDtype.meta_key()] = INT48
    gm = g.output(twice)
    loaded = bridge_fx.to_egraph(gm)
    out = loaded.index_of[twice]
    with TosaLoweringContext(U55_SPEC):
        _, _, rebuilt = round_trip(gm, f"(union (Node {out}) (Reshape (Node 0) (vec-of 4 6)))")
    reshapes = [n for n in rebuilt.graph.nodes if n.target == TOSA.RESHAPE.default]
    assert len(reshapes) == 1 and reshapes[0].args[0].op == "placeholder"
    assert reshapes[0].meta[bridge_fx.TosaSpecialDtype.meta_key()] == INT48


# ---------------------------------------------------------------- why an op is left opaque

OpaqueReason = bridge_fx.OpaqueReason


def sorted_requantized_concat():
    """cat(x, y) whose inputs have other qparams (so it requantizes them) -> sort -> getitem, and a permute of x:
    three ops left opaque, one read as its term."""
    shared, other = _qparams(0.1, 3), _qparams(0.2, 3)
    g = GraphBuilder()
    x, y = g.input("x", (1, 4, 2)), g.input("y", (1, 3, 2))
    x.meta["output_qparams"], y.meta["output_qparams"] = {0: shared}, {0: other}
    joined = g.call(aten.cat.default, [x, y], 1)
    joined.meta["input_qparams"], joined.meta["output_qparams"] = {0: shared}, {0: shared}
    values = g.getitem(g.call(aten.sort.default, joined, 2), 0)
    return g, x, values


def test_each_op_left_opaque_is_listed_with_why():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    g, x, values = sorted_requantized_concat()
    wide = g.call(aten.neg.default, x)
    wide.meta[bridge_fx.TosaSpecialDtype.meta_key()] = INT48
    unknown = g.call(aten.abs.default, x)
    del unknown.meta["val"]
    dynamic = g.call(aten.view_copy.default, x, [8])
    dynamic.meta["val"] = FakeTensorMode(shape_env=ShapeEnv()).from_tensor(torch.empty(8, dtype=torch.int8), static_shapes=False)
    moved = g.call(aten.permute_copy.default, x, [0, 2, 1])
    gm = g.output(values, wide, unknown, dynamic, moved)
    assert bridge_fx.read_graph(gm).opaque_reasons() == {
        "_operator.getitem": {OpaqueReason.UNSUPPORTED_OP: 1},
        "aten.abs.default": {OpaqueReason.NO_TENSOR_VALUE: 1},
        "aten.cat.default": {OpaqueReason.UNSUPPORTED_ARGUMENTS: 1},
        "aten.neg.default": {OpaqueReason.UNSUPPORTED_DTYPE: 1},
        "aten.sort.default": {OpaqueReason.UNSUPPORTED_OP: 1},
        "aten.view_copy.default": {OpaqueReason.DYNAMIC_SHAPE: 1},
    }


def test_the_report_says_why_each_op_was_left_opaque_in_its_text_and_its_json():
    import json

    import eqsat

    g, x, values = sorted_requantized_concat()
    gm = g.output(values, g.call(aten.permute_copy.default, x, [0, 2, 1]))
    _, report = eqsat.optimize(gm)
    assert report.fallback is None
    assert report.opaque_reasons == bridge_fx.read_graph(gm).opaque_reasons()
    assert report.opaque_reasons["aten.cat.default"] == {OpaqueReason.UNSUPPORTED_ARGUMENTS: 1}
    opaque_lines = [line for line in str(report).splitlines() if "left opaque" in line]
    assert opaque_lines == [
        "  left opaque: _operator.getitem (1 unsupported op)",
        "  left opaque: aten.cat.default (1 unsupported arguments)",
        "  left opaque: aten.sort.default (1 unsupported op)",
    ]
    data = json.loads(json.dumps(report.as_dict()))
    assert data["opaque_reasons"]["aten.sort.default"] == {"unsupported op": 1}
    assert (data["dialect"], data["stop_reason"]) == (report.dialect, report.stop_reason) == ("aten", "saturated")


def _vals(graph_module):
    return {
        n.name: (type(v), v.fake_mode, v.device, tuple(v.shape), v.dtype, v.stride())
        for n in graph_module.graph.nodes
        if isinstance(v := n.meta.get("val"), torch.Tensor)
    }


def _assert_write_back_vals_from_types_equal_fx_propagation(graph_module, seeds: int = 4):
    """Random extractions of the saturated graph, written back with the e-graph's types and without."""
    saturated = Saturated(graph_module, *rules.REWRITES)
    for seed in range(seeds):
        args = (saturated.loaded, saturated.random_selection(seed), saturated.view.class_of_node)
        from_types, propagated = bridge_fx.to_fx(*args, types=saturated.view.types), bridge_fx.to_fx(*args)
        assert _vals(from_types) == _vals(propagated)
        new_nodes = {n.name for n in from_types.graph.nodes} - {n.name for n in graph_module.graph.nodes}
        if new_nodes:
            yield new_nodes


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(fuzz.graph_specs())
def test_write_back_vals_from_the_egraph_types_equal_fx_propagation_on_tosa_graphs(spec):
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        list(_assert_write_back_vals_from_types_equal_fx_propagation(spec.build()))


def test_write_back_vals_from_the_egraph_types_equal_fx_propagation_on_aten_graphs():
    g = GraphBuilder()
    x = g.input("x", (2, 4, 6, 5))
    moved = g.call(aten.permute_copy.default, g.call(aten.neg.default, x), [0, 2, 3, 1])
    joined = g.call(aten.cat.default, [g.call(aten.permute_copy.default, moved, [0, 3, 1, 2]), x], 1)
    cut = g.call(aten.slice_copy.Tensor, g.call(aten.slice_copy.Tensor, joined, 1, 2, 6), 2, 1, 5)
    gm = g.output(g.call(aten.view_copy.default, cut, [2, 4, 20]))
    written = [n for new in _assert_write_back_vals_from_types_equal_fx_propagation(gm, seeds=8) for n in new]
    assert written, "no extraction wrote a new node: the test compared nothing"


def twice(spec: fuzz.GraphSpec) -> fuzz.GraphSpec:
    """spec's steps done a second time over the same inputs, the outputs of both returned."""
    inputs, steps = len(spec.inputs), len(spec.steps)

    def moved(k: int) -> int:
        return k if k < inputs else k + steps

    copy = tuple(fuzz.Step(s.op, tuple(moved(k) for k in s.operands), s.attrs) for s in spec.steps)
    return fuzz.GraphSpec(spec.inputs, spec.steps + copy, spec.outputs + tuple(map(moved, spec.outputs)), spec.dtypes)


# measured: nodes merge in 20 of 20 graphs; the share stated is 0.2 less
@law_fires_in(0.8, "merge-duplicates")
@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(fuzz.graph_specs().map(twice))
def test_merging_duplicates_is_sound_on_int8_and_int16_tosa_graphs(spec):
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        original = spec.build()
        saturated = Saturated(original, merge_duplicates=True)
        for seed in range(4):
            extracted = saturated.random_extraction(seed)
            for trial in range(2):
                inputs = fuzz.random_full_range_inputs(original, trial)
                assert all(torch.equal(a, b) for a, b in zip(fuzz.evaluate(original, inputs), fuzz.evaluate(extracted, inputs), strict=True))


def _wide_graph():
    """A per-channel RESCALE of 48 channels (102 values in its load row) and a CONCAT of 70 inputs, beside narrow ops."""
    g = GraphBuilder()
    x = g.input("x", (1, 2, 4, 48))
    with TosaLoweringContext(U55_SPEC):
        r = g.call(TOSA.RESCALE.default, x, torch.int8, [0.25 + k / 1024 for k in range(48)], 3, -2)
        parts = [g.call(aten.slice.Tensor, r, 3, k % 48, k % 48 + 1) for k in range(70)]
        c = g.call(aten.cat.default, parts, 3)
    return g.output(c, r)


def test_a_row_too_wide_for_a_load_table_loads_the_same_terms_as_one(monkeypatch):
    """Rows wider than WIDEST_TABLE load as a program each (`_load_command`): the e-graph holds the same terms and
    types as when every row goes through its table."""

    def loaded_terms(widest):
        monkeypatch.setattr(bridge_fx, "WIDEST_TABLE", widest)
        loaded = bridge_fx.to_egraph(_wide_graph())
        view = EGraphView.of(loaded.egraph, len(loaded.nodes))
        node_of = {c: i for i, c in reversed(list(enumerate(view.class_of_node)))}  # a class by its first node
        named = lambda t: (t.op, tuple(node_of.get(a, a) for a in t.args), t.attrs)  # noqa: E731
        by_node = {i: (sorted(map(named, view.candidates[c])), view.types.get(c)) for i, c in enumerate(view.class_of_node)}
        return by_node, sum(len(row) > widest for row in (bridge_fx.ops.REGISTRY[t.op].fact_row(i, t)[1] for i, t in enumerate(loaded.terms)))

    widest = bridge_fx.WIDEST_TABLE
    tables, none_wide = loaded_terms(10**6)
    commands, wide = loaded_terms(widest)
    assert none_wide == 0 and wide == 2  # the RESCALE and the CONCAT
    assert commands == tables
