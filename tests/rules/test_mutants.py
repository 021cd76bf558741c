"""benchmarks/mutants.py: the mutant list is well-formed (every original snippet found exactly once in its file, every
test it names exists), without running a mutant. The run itself is `python -m benchmarks.mutants` (slow)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.mutants import MUTANTS, Mutant, check


def test_every_mutant_is_found_exactly_once_in_its_file():
    assert check() == []


def test_the_list_holds_at_least_30_mutants_and_the_two_the_audit_found():
    names = {m.name for m in MUTANTS}
    assert len(MUTANTS) >= 30
    assert {"fusion-per-channel-first-rescale", "reshape-per-channel-drops-same-last-dim"} <= names


def test_check_reports_a_snippet_no_longer_in_its_file(tmp_path: Path):
    (tmp_path / "rules.py").write_text("a = 1\na = 1\n")
    (tmp_path / "tests" / "rules").mkdir(parents=True)
    (tmp_path / "tests" / "rules" / "test_rules.py").write_text("")
    stale = Mutant("stale", "rules.py", "b = 2\n", "b = 3\n", "")
    twice = Mutant("twice", "rules.py", "a = 1\n", "a = 2\n", "")
    problems = check((stale, twice), root=tmp_path)
    assert problems == ["stale: original snippet found 0 times in rules.py, not once", "twice: original snippet found 2 times in rules.py, not once"]
