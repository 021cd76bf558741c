"""eqsat.rules.reshape_concat: the law fires, does not fire where its guard fails, stays bounded, and is sound."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.ir import Term
from eqsat.rules import StopReason
from eqsat.rules.reshape import reshape
from eqsat.rules.reshape_concat import reshape_concat
from eqsat.rules.transpose import transpose
from tests.graphs import GraphBuilder
from tests.rules.harness import Saturated, saturated_stress_graph

aten = torch.ops.aten
view = aten.view_copy.default


def fired(s: Saturated) -> int:
    """Matches of reshape-through-concat."""
    return sum(count for name, count in s.result.rule_matches.items() if name == "reshape-through-concat")


def test_reshape_through_concat_fires_and_the_conv1d_reshapes_cancel():
    """4-D -> 3-D views, a concat along the 3-D last axis, a view back to 4-D: the concat of the 4-D tensors
    along the 4-D last axis is in the class."""
    g = GraphBuilder()
    a, b = g.input("a", (1, 1, 8, 3)), g.input("b", (1, 1, 8, 5))
    joined = g.call(aten.cat.default, [g.call(view, a, [1, 8, 3]), g.call(view, b, [1, 8, 5])], 2)
    out = g.call(view, joined, [1, 1, 8, 8])
    s = Saturated(g.output(out), reshape_concat, reshape)
    assert fired(s) >= 1
    assert Term("Concat", (s.class_of(a), s.class_of(b)), (3,)) in s.terms_of(out)


def test_reshape_through_concat_fires_when_the_dims_after_the_axis_merge():
    g = GraphBuilder()
    a, b = g.input("a", (2, 3, 4)), g.input("b", (2, 5, 4))
    out = g.call(view, g.call(aten.cat.default, [a, b], 1), [2, 8, 2, 2])
    s = Saturated(g.output(out), reshape_concat, reshape)
    assert fired(s) == 1
    (moved,) = [term for term in s.terms_of(out) if term.op == "Concat"]
    assert moved.attrs == (1,)
    shapes = [[term.attrs[0] for term in s.view.candidates[part] if term.op == "Reshape"] for part in moved.args]
    assert shapes == [[(2, 3, 2, 2)], [(2, 5, 2, 2)]]


def test_reshape_through_concat_does_not_fire_when_the_reshape_splits_the_axis():
    g = GraphBuilder()
    a, b = g.input("a", (1, 8, 3)), g.input("b", (1, 8, 5))
    out = g.call(view, g.call(aten.cat.default, [a, b], 2), [1, 8, 2, 4])
    s = Saturated(g.output(out), reshape_concat, reshape)
    assert fired(s) == 0


def test_reshape_through_concat_does_not_fire_when_the_reshape_merges_the_axis_with_an_outer_dim():
    g = GraphBuilder()
    a, b = g.input("a", (2, 3, 4)), g.input("b", (2, 5, 4))
    out = g.call(view, g.call(aten.cat.default, [a, b], 1), [16, 4])
    s = Saturated(g.output(out), reshape_concat, reshape)
    assert fired(s) == 0


def test_reshape_through_concat_stays_linear_on_hundreds_of_same_shape_reshapes():
    """300 RESHAPEs 4-D -> 3-D of same-shaped inputs feeding 37 concats, each reshaped back to 4-D: the law
    reads a concat's inputs from a lookup built one input at a time, one match per concat, a few iterations,
    and at most 10 new rows per concat input (its reshape, its analysis rows and the lookup's partial lists:
    measured 8.05)."""
    s, concats, loaded_size = saturated_stress_graph("reshaped-concat", reshape_concat)
    assert s.result.stop_reason == StopReason.SATURATED
    assert s.result.iterations <= 4
    assert fired(s) == concats
    assert s.enode_count <= loaded_size + 10 * (300 + concats)


def reshaped(dims: list[int], choice: int) -> list[int]:
    """dims as they are, merged into one dim, or with a unit dim in front or behind."""
    if choice == 1 and dims:
        return [math.prod(dims)]
    if choice == 2:
        return [1, *dims]
    if choice == 3:
        return [*dims, 1]
    return list(dims)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    data=st.data(),
    base=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    extents=st.lists(st.integers(1, 3), min_size=2, max_size=3),
    dtype=st.sampled_from([torch.int8, torch.int16, torch.int32]),
)
def test_reshape_through_concat_is_sound(data, base, extents, dtype):
    """Concats of 2-3 inputs along any axis, reshaped so the axis stays one dim (the dims before and after it
    kept, merged, or given a unit dim), over each dtype's range: the law fired and every extraction agrees."""
    axis = data.draw(st.integers(0, len(base) - 1))
    g = GraphBuilder()
    parts = [g.input(f"x{i}", tuple(base[:axis] + [n] + base[axis + 1 :]), dtype) for i, n in enumerate(extents)]
    before = reshaped(base[:axis], data.draw(st.integers(0, 3)))
    after = reshaped(base[axis + 1 :], data.draw(st.integers(0, 3)))
    target = before + [sum(extents)] + after
    out = g.call(aten.neg.default, g.call(view, g.call(aten.cat.default, parts, axis), target))
    s = Saturated(g.output(out), reshape_concat, reshape, transpose)
    assert fired(s) >= 1
    s.assert_every_extraction_agrees()
