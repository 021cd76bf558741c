"""Hypothesis strategies several extractor tests share: random e-graphs, cycles included."""

from __future__ import annotations

from hypothesis import strategies as st

from eqsat.ir import Term


@st.composite
def cyclic_egraphs(draw):
    """Random e-graphs whose terms may read any class, their own included; every class also has a leaf term."""
    count = draw(st.integers(2, 7))
    classes = [f"c{i}" for i in range(count)]
    candidates = {}
    for i, eclass in enumerate(classes):
        terms = [Term("Opaque", (), (f"leaf{i}",))]
        for k in range(draw(st.integers(0, 3))):
            args = tuple(draw(st.lists(st.sampled_from(classes), min_size=1, max_size=2)))
            terms.append(Term("Elementwise", args, (f"op{i}.{k}",)))
        candidates[eclass] = terms
    costs = {(c, t): float(draw(st.integers(0, 9))) for c, ts in candidates.items() for t in ts}
    fan_out_penalty = float(draw(st.integers(0, 20)))
    roots = draw(st.lists(st.sampled_from(classes), min_size=1, max_size=3))
    return candidates, costs, fan_out_penalty, roots
