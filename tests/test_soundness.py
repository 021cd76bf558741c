"""eqsat.soundness: a sound ruleset passes, a wrong law is caught on real tensors."""

from __future__ import annotations

import pytest
import torch
from egglog import Vec, i64, ruleset, var
from hypothesis import given, settings
from hypothesis import strategies as st

from eqsat.rules._law import law
from eqsat.rules.transpose import transpose
from eqsat.soundness import LawDidNotFire, Saturated, Unsound, fired_share, law_fires_in
from eqsat.terms import Tensor
from tests.graphs import GraphBuilder

permute = torch.ops.aten.permute_copy.default
x, p, q = var("x", Tensor), var("p", Vec[i64]), var("q", Vec[i64])

wrong = ruleset(name="wrong")
# WRONG: transpose(transpose(x, p), q) == transpose(x, q)  -- forgets p
wrong.register(law("transpose-forget-inner", x.transpose(p).transpose(q), x.transpose(q)))


def twice_permuted():
    g = GraphBuilder()
    there = g.call(permute, g.input("x", (2, 3, 4)), [1, 2, 0])
    return g.output(g.call(permute, there, [0, 2, 1]))


def test_a_sound_ruleset_passes():
    saturated = Saturated(twice_permuted(), transpose)
    assert saturated.fired("transpose-compose") >= 1
    saturated.assert_every_extraction_agrees()


def test_a_wrong_law_is_caught():
    saturated = Saturated(twice_permuted(), wrong)
    assert saturated.fired("transpose-forget-inner") == 1
    with pytest.raises(Unsound, match="disagrees with its class"):
        saturated.assert_every_extraction_agrees()


def test_fired_share_counts_cases_and_generated_families():
    cases = [{"transpose-through-pad-3": 2}, {"transpose-through-pad-4": 0, "other": 1}, {"transpose-through-padding": 1}, {}]
    assert fired_share(cases, "transpose-through-pad") == 0.25
    assert fired_share([], "transpose-through-pad") == 0.0


@given(st.permutations(range(3)))
@settings(max_examples=5, deadline=None, database=None)
def permuted_twice(perm):
    g = GraphBuilder()
    there = g.call(permute, g.input("x", (2, 3, 4)), list(perm))
    Saturated(g.output(g.call(permute, there, [0, 2, 1])), transpose).assert_every_extraction_agrees()


def test_a_law_that_fires_in_every_case_meets_its_share():
    law_fires_in(1.0, "transpose-compose")(permuted_twice)()


def test_a_law_that_fires_in_no_generated_case_fails_its_share():
    with pytest.raises(LawDidNotFire, match="transpose-forget-inner fired in 0% of 5 saturated cases"):
        law_fires_in(0.1, "transpose-forget-inner")(permuted_twice)()
