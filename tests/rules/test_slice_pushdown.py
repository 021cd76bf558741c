"""eqsat.rules.slice_pushdown: one test per law that it fires, one where its guard fails, and soundness."""

from __future__ import annotations

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.ir import Term
from eqsat.rules.reshape import reshape
from eqsat.rules.slice_pushdown import slice_pushdown
from eqsat.rules.transpose import transpose
from tests.graphs import GraphBuilder, tosa_lowering, tosa_pad, tosa_slice, tosa_table
from tests.rules.harness import Saturated, law_fires_in, sliced, terms
from tests.rules.strategies import data_movement_graphs, many_slices_after, slice_copy

aten = torch.ops.aten
TOSA = exir_ops.backend.tosa
view, permute, neg, add = aten.view_copy.default, aten.permute_copy.default, aten.neg.default, aten.add.Tensor


def test_slice_moves_through_a_unary_op():
    g = GraphBuilder()
    x = g.input("x", (4, 5))
    cut = g.call(slice_copy, g.call(neg, x), 1, 1, 3)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-unary") >= 1
    inner = [t.args[0] for t in terms(s, s.class_of(cut), "Elementwise")]
    assert any((s.class_of(x), (0, 1), (4, 2)) in sliced(s, c) for c in inner)


def test_slice_does_not_move_through_an_opaque_op():
    g = GraphBuilder()
    x = g.input("x", (4, 5))
    cut = g.call(slice_copy, g.call(aten.cumsum.default, x, 1), 1, 1, 3)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-unary") == 0
    assert s.fired("slice-through-binary") == 0


def test_slice_moves_through_a_binary_op_of_equal_shapes():
    g = GraphBuilder()
    x, y = g.input("x", (4, 5)), g.input("y", (4, 5))
    cut = g.call(slice_copy, g.call(add, x, y), 0, 2, 4)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-binary") >= 1
    (summed,) = terms(s, s.class_of(cut), "Elementwise")
    assert (s.class_of(x), (2, 0), (2, 5)) in sliced(s, summed.args[0])
    assert (s.class_of(y), (2, 0), (2, 5)) in sliced(s, summed.args[1])


def test_slice_does_not_move_through_a_binary_op_that_broadcasts():
    g = GraphBuilder()
    x, bias = g.input("x", (4, 5)), g.input("bias", (1, 5))
    cut = g.call(slice_copy, g.call(add, x, bias), 0, 2, 4)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-binary") == 0
    assert terms(s, s.class_of(cut), "Elementwise") == []


def test_slice_of_whole_rows_moves_through_a_merging_reshape():
    g = GraphBuilder()
    x = g.input("x", (4, 3, 2))
    cut = g.call(slice_copy, g.call(view, x, [12, 2]), 0, 6, 12)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-reshape") >= 1
    (moved,) = terms(s, s.class_of(cut), "Reshape")
    assert moved.attrs == ((6, 2),)
    assert (s.class_of(x), (2, 0, 0), (2, 3, 2)) in sliced(s, moved.args[0])


def test_slice_moves_through_a_reshape_that_adds_unit_dims():
    g = GraphBuilder()
    x = g.input("x", (3, 4))
    cut = g.call(slice_copy, g.call(view, x, [1, 3, 1, 4]), 3, 1, 3)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-reshape") >= 1
    (moved,) = terms(s, s.class_of(cut), "Reshape")
    assert (s.class_of(x), (0, 1), (3, 2)) in sliced(s, moved.args[0])


def test_slice_does_not_move_through_a_reshape_when_it_cuts_a_partial_row():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    cut = g.call(slice_copy, g.call(view, x, [6]), 0, 1, 4)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-reshape") == 0
    assert terms(s, s.class_of(cut), "Reshape") == []


def test_slice_does_not_move_through_a_reshape_when_it_cuts_two_dims():
    g = GraphBuilder()
    x = g.input("x", (2, 12))
    with tosa_lowering():
        start, size = g.call(TOSA.CONST_SHAPE.default, [0, 0, 0]), g.call(TOSA.CONST_SHAPE.default, [1, 3, 2])
        cut = g.call(TOSA.SLICE.default, g.call(view, x, [2, 3, 4]), start, size)
    s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-reshape") == 0
    assert terms(s, s.class_of(cut), "Reshape") == []


def test_slice_of_a_concat_half_reaches_the_concat_through_reshape_and_transpose():
    # DESIGN §1: CONCAT(axis=3) -> RESHAPE(1,64,32) -> TRANSPOSE(0,2,1) -> SLICE(channels 0..15)
    g = GraphBuilder()
    a, b = g.input("a", (1, 8, 8, 16)), g.input("b", (1, 8, 8, 16))
    joined = g.call(aten.cat.default, [a, b], 3)
    flat = g.call(permute, g.call(view, joined, [1, 64, 32]), [0, 2, 1])
    cut = g.call(slice_copy, flat, 1, 0, 16)
    s = Saturated(g.output(cut), slice_pushdown, reshape, transpose)
    assert s.fired("slice-through-reshape") >= 1 and s.fired("slice-through-transpose") >= 1
    reached = {c for c in s.view.candidates for t in terms(s, c, "Slice") if t.args[0] == s.class_of(joined)}
    assert Term("Slice", (s.class_of(joined),), ((0, 0, 0, 0), (1, 8, 8, 16))) in {
        t for c in reached for t in s.view.candidates[c]
    }


# measured: the law fires in 97 of 100 cases; the share stated is 0.2 less
@law_fires_in(0.77, "slice-through-reshape")
@settings(max_examples=100, deadline=None, derandomize=True)
@given(many_slices_after("view"))
def test_slice_through_reshape_is_sound(graph_module):
    Saturated(graph_module, slice_pushdown).assert_every_extraction_agrees()


# binary first (drawn most often): a slice right after a binary op is slice-through-binary's match, 7 of 100 cases
#   when binary came last. measured: the rarest of these laws (slice-through-binary) fires in 63 of 100 cases; the
#   share stated is 0.2 less
@law_fires_in(0.43, "slice-through-reshape", "slice-through-unary", "slice-through-binary")
@settings(max_examples=100, deadline=None, derandomize=True)
@given(data_movement_graphs(("binary", "view", "unary", "permute", "view"), slice_after_each=True))
def test_slice_pushdown_laws_are_sound(graph_module):
    Saturated(graph_module, slice_pushdown).assert_every_extraction_agrees()


# four laws, each the op before a slice: transposes and binary ops listed twice and first, and three to six steps.
#   measured: the rarest of these laws (slice-through-reshape) fires in 53 of 100 cases; the share stated is 0.2 less
@law_fires_in(0.33, "slice-through-unary", "slice-through-reshape", "slice-through-binary", "slice-through-transpose")
@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    data_movement_graphs(
        ("permute", "binary", "view", "unary", "permute", "binary", "view", "cat"), slice_after_each=True, length=(3, 6)
    )
)
def test_slice_pushdown_laws_are_sound_with_the_reshape_and_transpose_laws(graph_module):
    Saturated(graph_module, slice_pushdown, reshape, transpose).assert_every_extraction_agrees()


# ---------------------------------------------------------------- PAD and TABLE


def test_slice_inside_pad_fires_and_reads_the_unpadded_input():
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (1, 4, 5, 3))
        cut = tosa_slice(g, tosa_pad(g, x, [0, 0, 1, 1, 2, 0, 0, 0], 0), [0, 2, 2, 1], [1, 3, 4, 2])
        s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-inside-pad-4") == 1
    assert (s.class_of(x), (0, 1, 0, 1), (1, 3, 4, 2)) in sliced(s, s.class_of(cut))


@pytest.mark.parametrize(
    "reason, start, size",
    [("reads-padding-before", [0, 0, 2, 0], [1, 3, 4, 3]), ("reads-padding-after", [0, 2, 2, 0], [1, 4, 4, 3])],
)
def test_slice_inside_pad_does_not_fire_when_the_box_reads_padding(reason, start, size):
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (1, 4, 5, 3))
        cut = tosa_slice(g, tosa_pad(g, x, [0, 0, 1, 1, 2, 0, 0, 0], 0), start, size)
        s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-inside-pad-4") == 0, reason
    assert not any(args[0] == s.class_of(x) for args in sliced(s, s.class_of(cut))), reason


def test_slice_through_table_fires_and_keeps_the_lookup_table():
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (4, 5))
        looked_up = tosa_table(g, x)
        cut = tosa_slice(g, looked_up, [1, 0], [2, 5])
        s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-table") == 1
    tables = terms(s, s.class_of(cut), "Table")
    assert [t.args[1] for t in tables] == [s.class_of(looked_up.args[1])]
    assert (s.class_of(x), (1, 0), (2, 5)) in sliced(s, tables[0].args[0])


def test_slice_through_table_does_not_fire_on_a_table_of_a_slice():
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (4, 5))
        looked_up = tosa_table(g, tosa_slice(g, x, [1, 0], [2, 5]))
        s = Saturated(g.output(looked_up), slice_pushdown)
    assert s.fired("slice-through-table") == 0


@pytest.mark.parametrize("size", [[1, 1, 1, 8], [2, 1, 2, 8]])
def test_slice_through_table_fires_when_the_box_is_not_batched_mac_shaped(size):
    """[1, 1, 1, C] (N == 1) and [N, 1, 2, C] are not the MLBEDSW-11805 shape."""
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (4, 1, 2, 8))
        cut = tosa_slice(g, tosa_table(g, x), [0, 0, 0, 0], size)
        s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-table") == 1


def test_slice_through_table_does_not_fire_when_the_table_would_read_batched_mac_shape():
    """slice(table(x (4, 1, 1, 8)), size [2, 1, 1, 8]) would give the TABLE a [2, 1, 1, 8] operand: MLBEDSW-11805."""
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (4, 1, 1, 8))
        cut = tosa_slice(g, tosa_table(g, x), [1, 0, 0, 0], [2, 1, 1, 8])
        s = Saturated(g.output(cut), slice_pushdown)
    assert s.fired("slice-through-table") == 0
    assert not terms(s, s.class_of(cut), "Table")


# measured: the rarest of these laws (slice-inside-pad) fires in 54 of 100 cases; the share stated is 0.2 less
@law_fires_in(0.34, "slice-inside-pad", "slice-through-table")
@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple))
def test_slice_through_pad_and_table_is_sound(data, shape):
    """Random boxes (inside the unpadded input or not) of a pad, and of a table, with the reshape and transpose laws."""
    from tests.rules import tosa_reference

    rank = len(shape)
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", shape)
        padding = data.draw(st.lists(st.integers(0, 2), min_size=2 * rank, max_size=2 * rank))
        padded = tosa_pad(g, x, padding, data.draw(st.integers(-128, 127)))
        outputs = []
        for source in (padded, tosa_table(g, padded), tosa_table(g, x, seed=1)):
            dims = tuple(source.meta["val"].shape)
            start = [data.draw(st.integers(0, d - 1)) for d in dims]
            size = [data.draw(st.integers(1, d - b)) for d, b in zip(dims, start)]
            outputs.append(tosa_slice(g, source, start, size))
        s = Saturated(g.output(*outputs), slice_pushdown, transpose, reshape)
        tosa_reference.assert_every_extraction_agrees(s)
