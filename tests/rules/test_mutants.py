"""benchmarks/mutants.py: the mutant list is well-formed (every original snippet found exactly once in its file, every
test and focus it names exists), and a mutant's tests run its law's tests first, without running a mutant. The run
itself is `python -m benchmarks.mutants` (slow)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from benchmarks.mutants import MUTANTS, Mutant, check, pytest_collection_modifyitems


def test_every_mutant_is_found_exactly_once_in_its_file():
    assert check() == []


def test_the_list_holds_at_least_30_mutants_and_the_two_the_audit_found():
    names = {m.name for m in MUTANTS}
    assert len(MUTANTS) >= 30
    assert {"fusion-per-channel-first-rescale", "reshape-per-channel-drops-same-last-dim"} <= names


def test_check_reports_a_snippet_no_longer_in_its_file_and_a_focus_that_names_no_test(tmp_path: Path):
    (tmp_path / "rules.py").write_text("a = 1\na = 1\nc = 3\n")
    (tmp_path / "tests" / "rules").mkdir(parents=True)
    (tmp_path / "tests" / "rules" / "test_rules.py").write_text("def test_law_fires():\n    pass\n")
    stale = Mutant("stale", "rules.py", "b = 2\n", "b = 3\n", "", focus=("law",))
    twice = Mutant("twice", "rules.py", "a = 1\n", "a = 2\n", "", focus=("law_fires",))
    unfocused = Mutant("unfocused", "rules.py", "c = 3\n", "c = 4\n", "", focus=("other_law",))
    problems = check((stale, twice, unfocused), root=tmp_path)
    assert problems == [
        "stale: original snippet found 0 times in rules.py, not once",
        "twice: original snippet found 2 times in rules.py, not once",
        "unfocused: focus 'other_law' names no test of tests/rules/test_rules.py",
    ]


def test_the_focus_runs_first_unit_tests_before_soundness_and_every_test_still_runs():
    names = ["test_a_fires", "test_a_is_sound", "test_law_fires", "test_b_fires", "test_law_is_sound", "test_law_does_not_fire[x]"]
    items = [SimpleNamespace(name=n) for n in names]
    config = SimpleNamespace(getoption=lambda option: ["law"])
    pytest_collection_modifyitems(config, items)
    assert [i.name for i in items] == ["test_law_fires", "test_law_does_not_fire[x]", "test_law_is_sound", "test_a_fires", "test_b_fires", "test_a_is_sound"]
