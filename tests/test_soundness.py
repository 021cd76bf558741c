"""eqsat.soundness: a sound ruleset passes, a wrong law is caught on real tensors."""

from __future__ import annotations

import pytest
import torch
from egglog import Vec, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.transpose import transpose
from eqsat.soundness import Saturated, Unsound
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
    with pytest.raises(Unsound, match="extraction"):
        saturated.assert_every_extraction_agrees()
