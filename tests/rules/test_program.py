"""eqsat.rules._program: the cached program text of the rulesets saturates exactly as egglog-python does."""

from __future__ import annotations

import json

import pytest
from egglog import Vec, i64, ruleset, var
from executorch.backends.arm.tosa.specification import TosaLoweringContext

from eqsat import bridge_fx, fuzz, rules
from eqsat.extract.egraph_view import EGraphView
from eqsat.rules import _program
from eqsat.rules._law import law
from eqsat.rules.guards import is_identity_perm
from eqsat.terms import Tensor
from tests.graphs import RELU_CONCAT, transpose_reshape_chain

NO_CLOCK = rules.Budget(seconds=600)

GRAPH = fuzz.merge([transpose_reshape_chain(24), RELU_CONCAT, transpose_reshape_chain(12, seed=1)])


def saturated(budget: rules.Budget, rewrites=None):
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        loaded = bridge_fx.to_egraph(GRAPH.build())
    result = rules.saturate(loaded.egraph, budget, rewrites)
    return result, EGraphView.of(loaded.egraph, len(loaded.nodes)), rules.enode_count(loaded.egraph), loaded.egraph


@pytest.mark.parametrize(
    "budget, rewrites",
    # no time limit in reach: egglog-python's first iteration also compiles the rules (over 20 s on a loaded machine)
    [(NO_CLOCK, None), (rules.Budget(enodes=2000, seconds=600), None), (NO_CLOCK, ("reshape", "transpose"))],
    ids=["saturated", "enode-limit", "two-rulesets"],
)
def test_the_compiled_program_saturates_as_egglog_python_does(monkeypatch, budget, rewrites):
    rulesets = rules.rulesets_named(rewrites)
    compiled_result, compiled_view, compiled_enodes, egraph = saturated(budget, rulesets)
    assert getattr(egraph, "_eqsat_program", None) is not None
    monkeypatch.setattr(rules, "_runner", lambda egraph, _rewrites: _program.Runner(egraph))
    python_result, python_view, python_enodes, _ = saturated(budget, rulesets)
    assert (compiled_result.iterations, compiled_result.stop_reason) == (python_result.iterations, python_result.stop_reason)
    assert compiled_result.rule_matches == python_result.rule_matches and compiled_result.rule_matches
    assert compiled_enodes == python_enodes
    assert list(compiled_view.candidates.items()) == list(python_view.candidates.items())
    assert compiled_view.class_of_node == python_view.class_of_node
    assert list(compiled_view.types.items()) == list(python_view.types.items())


def test_a_ruleset_outside_the_program_runs_through_egglog_python():
    extra = ruleset(name="test-extra")
    x, p = var("x", Tensor), var("p", Vec[i64])
    # transpose(x, p) == x  when p is the identity permutation (transpose-identity again, under another name)
    extra.register(law("test-transpose-identity", x.transpose(p), x, *is_identity_perm(p)))
    result, _, _, egraph = saturated(rules.Budget(), (*rules.rulesets_named(("transpose", "reshape", "transpose-rank")), extra))
    assert getattr(egraph, "_eqsat_program", None) is None
    assert result.rule_matches["test-transpose-identity"] > 0 and result.rule_matches["transpose-identity"] > 0


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory and no program compiled yet in this process."""
    monkeypatch.setenv(_program.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(_program, "_COMPILED", {})
    return tmp_path / "cache"


def test_a_second_process_reads_the_program_from_the_cache(cache, monkeypatch):
    first = _program.compiled((rules.ANALYSIS,))
    [path] = cache.glob("rules-*.json")
    monkeypatch.setattr(_program, "_COMPILED", {})
    monkeypatch.setattr(_program, "build", lambda rulesets: pytest.fail("compiled again despite the cache"))
    second = _program.compiled((rules.ANALYSIS,))
    assert second.commands == first.commands and second.rule_names == first.rule_names
    assert any("shape-transpose" in command for command in second.commands)


def test_a_change_of_source_compiles_again(cache, monkeypatch):
    _program.compiled((rules.ANALYSIS,))
    monkeypatch.setattr(_program, "_COMPILED", {})
    monkeypatch.setattr(_program, "SOURCE_DIGEST", "edited")
    _program.compiled((rules.ANALYSIS,))
    assert len(list(cache.glob("rules-*.json"))) == 2


def test_a_corrupt_cache_file_is_compiled_again(cache, monkeypatch):
    first = _program.compiled((rules.ANALYSIS,))
    [path] = cache.glob("rules-*.json")
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "commands": ["(rule ((= x"]}))
    monkeypatch.setattr(_program, "_COMPILED", {})
    assert _program.compiled((rules.ANALYSIS,)).commands == first.commands
    assert json.loads(path.read_text())["commands"] == list(first.commands)


def test_an_unwritable_cache_only_costs_the_compilation(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(_program.CACHE_ENV, str(blocker / "cache"))  # a directory under a file cannot be made
    monkeypatch.setattr(_program, "_COMPILED", {})
    assert _program.compiled((rules.ANALYSIS,)).commands


def test_an_empty_cache_setting_turns_the_disk_cache_off(monkeypatch):
    monkeypatch.setenv(_program.CACHE_ENV, "")
    assert _program.cache_directory() is None


def test_commands_split_at_top_level_only():
    text = '(rule ((= x (f "a)(b" 1))) ((g x)) :name "n(1)")\n; (not a command)\n(ruleset r)'
    assert _program.split_commands(text) == ['(rule ((= x (f "a)(b" 1))) ((g x)) :name "n(1)")', "(ruleset r)"]


def saturated_in(egraph):
    """GRAPH loaded into egraph (a fresh one for None), saturated: its e-classes, candidates and rule matches."""
    with TosaLoweringContext(fuzz.TOSA_SPEC):
        loaded = bridge_fx.to_egraph(GRAPH.build(), into=egraph)
    result = rules.saturate(loaded.egraph, rules.Budget())
    view = EGraphView.of(loaded.egraph, len(loaded.nodes))
    return view.class_of_node, view.candidates, view.types, result.iterations, result.rule_matches


def test_the_scratch_egraph_saturates_as_a_fresh_one_run_after_run():
    fresh = saturated_in(None)
    runs = []
    for _ in range(2):
        with rules.scratch_egraph() as scratch:
            runs.append((scratch, saturated_in(scratch)))
    (first, first_run), (second, second_run) = runs
    assert first is second and first._eqsat_program is not None
    assert first_run == fresh and second_run == fresh


def test_the_scratch_egraph_is_empty_after_a_run_however_it_ends():
    with pytest.raises(RuntimeError):
        with rules.scratch_egraph() as scratch:
            saturated_in(scratch)
            assert rules.enode_count(scratch) > 0
            raise RuntimeError("the run failed")
    with rules.scratch_egraph() as again:
        assert again is scratch and rules.enode_count(again) == 0
