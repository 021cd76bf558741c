"""Hypothesis strategies several rule tests share: new shapes for a reshape, and graphs of data movement
(reshapes, transposes, slices, elementwise ops, concats) for the soundness properties."""

from __future__ import annotations

import math
import random

import torch
from hypothesis import strategies as st

from tests.graphs import GraphBuilder

aten = torch.ops.aten
view, permute, neg = aten.view_copy.default, aten.permute_copy.default, aten.neg.default
slice_copy = aten.slice_copy.Tensor


def _factorizations(n: int, rank: int) -> list[tuple[int, ...]]:
    """Every shape of the given rank with n elements."""
    if rank == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in _factorizations(n // d, rank - 1)]


@st.composite
def reshaped_shapes(
    draw, shape: tuple[int, ...], kinds: tuple[str, ...] = ("merge", "split", "unit", "any")
) -> list[int]:
    """A new shape for a reshape: merge adjacent dims, split a dim, add or drop a size-1 dim, or any refactorization."""
    rank = len(shape)
    kind = draw(st.sampled_from(kinds))
    if kind == "merge" and rank >= 2:
        i = draw(st.integers(0, rank - 2))
        j = draw(st.integers(i + 2, rank))
        return [*shape[:i], math.prod(shape[i:j]), *shape[j:]]
    if kind == "split" and rank <= 4:
        i = draw(st.integers(0, rank - 1))
        a = draw(st.sampled_from([d for d in range(1, shape[i] + 1) if shape[i] % d == 0]))
        return [*shape[:i], a, shape[i] // a, *shape[i + 1 :]]
    if kind == "unit":
        units = [i for i, d in enumerate(shape) if d == 1]
        if units and rank >= 2 and draw(st.booleans()):
            drop = draw(st.sampled_from(units))
            return [d for i, d in enumerate(shape) if i != drop]
        if rank <= 4:
            i = draw(st.integers(0, rank))
            return [*shape[:i], 1, *shape[i:]]
    new_rank = draw(st.integers(1, 5))
    return list(draw(st.sampled_from(_factorizations(math.prod(shape), new_rank))))


@st.composite
def slice_boxes(draw, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(dim, begin, end) of a non-empty slice: anywhere, on whole rows (multiples of a divisor of the
    dim), or a whole number of rows at any offset. Often of the largest dim (where a reshape merged)."""
    largest = max(range(len(shape)), key=shape.__getitem__)
    dim = draw(st.sampled_from([largest, *[d for d, n in enumerate(shape) if n > 1]]))
    extent = shape[dim]
    step = draw(st.sampled_from([d for d in range(2, extent + 1) if extent % d == 0] or [1]))
    kind = draw(st.sampled_from(["any", "rows", "shifted rows"]))
    if kind == "rows":
        begin = step * draw(st.integers(0, extent // step - 1))
        return dim, begin, draw(st.sampled_from(range(begin + step, extent + 1, step)))
    if kind == "shifted rows":
        length = step * draw(st.integers(1, extent // step))
        begin = draw(st.sampled_from(range(extent - length + 1)))
        return dim, begin, begin + length
    begin = draw(st.sampled_from(range(extent)))
    return dim, begin, draw(st.sampled_from(range(begin + 1, extent + 1)))


@st.composite
def data_movement_graphs(draw, steps: tuple[str, ...], slice_after_each: bool = False, length: tuple[int, int] = (2, 5)):
    """x -> a chain of `length` (two to five) reshapes, transposes, slices, unary and binary ops and concats (ranks
    1-5), each step's kind drawn from steps (a kind listed twice is drawn more often; hypothesis draws the first
    most often).

    "view-back" is a reshape and a reshape back (reshape-reshape meets it, then reshape-identity), "permute-back" a
    transpose and its inverse (transpose-compose, then transpose-identity).
    With slice_after_each, a slice follows a step three times in four, so that slices meet every kind of op.
    """
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    g = GraphBuilder()
    value = g.input("x", shape)
    for step in range(draw(st.integers(*length))):
        shape = tuple(value.meta["val"].shape)
        kind = draw(st.sampled_from(steps))
        if kind == "view":
            value = g.call(view, value, draw(reshaped_shapes(shape)))
        elif kind == "view-back":
            value = g.call(view, g.call(view, value, draw(reshaped_shapes(shape))), list(shape))
        elif kind == "permute":
            value = g.call(permute, value, list(draw(st.permutations(range(len(shape))))))
        elif kind == "permute-back":
            perm = list(draw(st.permutations(range(len(shape)))))
            value = g.call(permute, g.call(permute, value, perm), [perm.index(d) for d in range(len(shape))])
        elif kind == "slice":
            value = g.call(aten.slice_copy.Tensor, value, *draw(slice_boxes(shape)))
        elif kind == "unary":
            value = g.call(draw(st.sampled_from([neg, aten.bitwise_not.default])), value)
        elif kind == "binary":
            other = g.input(f"y{step}", shape) if draw(st.booleans()) else g.call(neg, value)
            value = g.call(aten.add.Tensor, value, other)
        elif kind == "cat":
            other = g.input(f"y{step}", shape) if draw(st.booleans()) else g.call(aten.bitwise_not.default, value)
            value = g.call(aten.cat.default, [value, other], draw(st.integers(0, len(shape) - 1)))
        if slice_after_each and draw(st.sampled_from(["slice"] * 3 + ["none"])) == "slice":
            value = g.call(aten.slice_copy.Tensor, value, *draw(slice_boxes(tuple(value.meta["val"].shape))))
    return g.output(value)


def random_box(rnd: random.Random, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(dim, begin, end) of a non-empty slice, uniformly: anywhere, or a whole number of rows of some length."""
    dim = rnd.randrange(len(shape))
    extent = shape[dim]
    if rnd.random() < 0.5:
        begin = rnd.randrange(extent)
        return dim, begin, rnd.randrange(begin + 1, extent + 1)
    step = rnd.choice([d for d in range(1, extent + 1) if extent % d == 0])
    length = step * rnd.randrange(1, extent // step + 1)
    if rnd.random() < 0.5:
        begin = rnd.randrange(extent - length + 1)
    else:
        begin = step * rnd.randrange((extent - length) // step + 1)
    return dim, begin, begin + length


@st.composite
def many_slices_after(draw, op: str):
    """x -> one reshape or transpose -> twelve slices, each an output, with boxes drawn uniformly."""
    rank = draw(st.integers(1, 5 if op == "permute" else 4))
    g = GraphBuilder()
    x = g.input("x", tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))))
    if op == "view":
        new_shape = draw(reshaped_shapes(tuple(x.meta["val"].shape), ("merge", "merge", "split", "unit", "any")))
        moved = g.call(view, x, new_shape)
    else:
        moved = g.call(permute, x, list(draw(st.permutations(range(rank)))))
    shape, rnd = tuple(moved.meta["val"].shape), draw(st.randoms(use_true_random=False))
    return g.output(*[g.call(slice_copy, moved, *random_box(rnd, shape)) for _ in range(12)])
