"""The rulesets as egglog program text, cached on disk, and how saturation runs them.

Motivation: egglog-python turns a ruleset into egglog commands by evaluating
every registered rule function and merging declarations, in every process,
before the first graph is optimized. The commands it sends are plain egglog
program text. Without this cache that costs about 1 s per process, so per
lowering: a fresh process that declares the term language, adds the schedule
(about 130 rules) to an empty e-graph and runs one round of each ruleset took
1.1-1.7 s through egglog-python (`Runner`) and 0.2-0.3 s from the cached
program (`CompiledRunner`), on 2 cores shared with other jobs.

Overview: `compiled()` records that text once (an EGraph with
`save_egglog_string`), keeps it in the user cache directory (`EQSAT_CACHE_DIR`,
default `~/.cache/eqsat/rules`) under a key that digests eqsat's whole source and the
egglog and Python versions, and later processes parse it back with egglog's
own parser. A change to any rule, term or guard, or to egglog, gives a new
key, so a stale program is never used; an unwritable, missing or corrupt
cache only costs the rebuild. The text holds what the rulesets add after the
term language (`eqsat.terms.declare`): the analysis functions, the rulesets
and their rules, in the order egglog-python adds them, so an e-graph given the
text behaves as one given the rulesets through egglog-python (same e-classes,
same rule matches). Rules keep their names; rules without one get
egglog-python's numbered names, mapped back to the names its run report gives
them (`Program.rule_names`).

`CompiledRunner` runs such a program on an e-graph; `Runner` runs any ruleset
through egglog-python, for rulesets outside the program. Adding the program
to an e-graph still costs egglog about 0.14 s of CPU (it compiles each rule's
query): the pass pays it once per process (eqsat.rules.scratch_egraph).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from egglog import EGraph, Ruleset, bindings

from eqsat import terms

logger = logging.getLogger("eqsat")

FORMAT = 1
"""The layout of the cache file; part of the key."""

CACHE_ENV = "EQSAT_CACHE_DIR"
"""Environment variable: the cache directory; set but empty turns the disk cache off."""

KEPT_FILES = 8
"""Cache files kept (the most recently written): one per source version, a few checkouts at once."""


@dataclass
class Program:
    """Rulesets compiled to egglog program text, one command per string.

    `rulesets` maps each ruleset's identity to its egglog name, `rule_names`
    each egglog rule name to the name egglog-python reports, `functions` names
    every function the commands declare.
    """

    commands: tuple[str, ...]
    rulesets: dict[str, str]
    rule_names: dict[str, str]
    functions: tuple[str, ...]
    _parsed: list | None = field(default=None, repr=False, compare=False)

    def as_json(self) -> dict[str, Any]:
        return {
            "commands": list(self.commands),
            "rulesets": self.rulesets,
            "rule_names": self.rule_names,
            "functions": list(self.functions),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Program:
        return cls(tuple(data["commands"]), dict(data["rulesets"]), dict(data["rule_names"]), tuple(data["functions"]))

    def parsed(self) -> list:
        """The commands as egglog's binding objects: parsed once per process, reused for every e-graph.

        Each command is parsed on its own: egglog gives every parsed node a
        span holding a copy of its source, so parsing the program in one piece
        takes time and memory quadratic in its length (seconds here).
        """
        if self._parsed is None:
            parser = bindings.EGraph()
            self._parsed = [c for command in self.commands for c in parser.parse_program(command)]
        return self._parsed


def ruleset_key(ruleset: Ruleset) -> str:
    return str(ruleset.__egg_ident__)


def split_commands(text: str) -> list[str]:
    """The top-level s-expressions of egglog program text (string literals and comments respected)."""
    commands, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif char == ";":
            while i < len(text) and text[i] != "\n":
                i += 1
        elif char == "(":
            if depth == 0:
                start = i
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                commands.append(text[start : i + 1])
        i += 1
    if depth != 0:
        raise ValueError("unbalanced egglog program text")
    return commands


def _source_digest() -> str:
    """A digest of what a compiled program depends on: eqsat's source files and the egglog and Python versions."""
    digest = hashlib.sha256(f"{FORMAT}|{metadata.version('egglog')}|{sys.version}".encode())
    package = Path(terms.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


SOURCE_DIGEST = _source_digest()
"""Taken when eqsat.rules is imported, together with the rule modules, so it
describes the rules this process runs even if the files change afterwards."""


def cache_directory() -> Path | None:
    """Where compiled programs are kept, or None when the disk cache is off."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "eqsat" / "rules"


def build(rulesets: tuple[Ruleset, ...]) -> Program:
    """Compile rulesets with egglog-python, recording the program text it sends to egglog."""
    egraph = EGraph(save_egglog_string=True)
    terms.declare(egraph)
    language = egraph._egraph.commands() or ""
    language_functions = set(egraph._state.egg_fn_to_callable_refs)
    for ruleset in rulesets:
        egraph._add_decls(ruleset)
        egraph._state.ruleset_to_egg(ruleset.__egg_ident__)
    recorded = egraph._egraph.commands() or ""
    if not recorded.startswith(language):
        raise RuntimeError("egglog did not record the term language first")
    state = egraph._state
    return Program(
        commands=tuple(split_commands(recorded[len(language) :])),
        rulesets={ruleset_key(r): str(r.__egg_ident__) for r in rulesets},
        rule_names={name: getattr(decl, "name", None) or str(decl) for name, decl in state.rule_name_to_command_decl.items()},
        functions=tuple(sorted(set(state.egg_fn_to_callable_refs) - language_functions)),
    )


def _read(path: Path, key: str) -> Program | None:
    """The program cached at path under key, or None if there is none or it is unusable."""
    try:
        data = json.loads(path.read_text())
        if data.get("key") != key:
            return None
        program = Program.from_json(data)
        program.parsed()
        return program
    except FileNotFoundError:
        return None
    except Exception as error:  # noqa: BLE001 - a bad cache file is rebuilt, never trusted
        logger.info("eqsat: ignoring the cached rules in %s: %s", path, error)
        return None


def _write(path: Path, key: str, program: Program) -> None:
    """Write the cache file atomically and drop the oldest ones; failing only means the next process compiles again."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as f:
            temporary = f.name
            json.dump({"key": key, **program.as_json()}, f)
        os.replace(temporary, path)
        temporary = None
        cached = sorted(path.parent.glob("rules-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in cached[KEPT_FILES:]:
            stale.unlink(missing_ok=True)
    except OSError as error:
        logger.info("eqsat: could not cache the compiled rules in %s: %s", path.parent, error)
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


_COMPILED: dict[str, Program | None] = {}


def compiled(rulesets: tuple[Ruleset, ...]) -> Program | None:
    """The program of rulesets, from this process, the disk cache, or compiled now (and cached).

    None if egglog cannot parse back the text it recorded; then the rulesets
    must run through egglog-python.
    """
    key = hashlib.sha256("|".join([SOURCE_DIGEST, *map(ruleset_key, rulesets)]).encode()).hexdigest()
    if key in _COMPILED:
        return _COMPILED[key]
    directory = cache_directory()
    path = directory / f"rules-{key[:32]}.json" if directory is not None else None
    program = _read(path, key) if path is not None else None
    if program is None:
        program = build(rulesets)
        try:
            program.parsed()
        except Exception as error:  # noqa: BLE001 - egglog-python still runs the rulesets
            logger.warning("eqsat: egglog cannot parse its own program text, rules run through egglog-python: %s", error)
            program = None
        if program is not None and path is not None:
            _write(path, key, program)
    _COMPILED[key] = program
    return program


def _span() -> bindings.RustSpan:
    return bindings.RustSpan("", 0, 0)


def enode_count(egraph: EGraph) -> int:
    """The rows of every function declared in egraph by egglog-python or by a compiled program."""
    program = getattr(egraph, "_eqsat_program", None)
    counted = set(egraph._state.egg_fn_to_callable_refs) | set(program.functions if program is not None else ())
    (output,) = egraph._egraph.run_program(bindings.PrintSize(_span(), None))
    return sum(size for name, size in output.sizes if name in counted)


class Runner:
    """Runs rulesets on one e-graph through egglog-python."""

    def __init__(self, egraph: EGraph):
        self.egraph = egraph

    def run(self, ruleset: Ruleset, *, saturate: bool = False) -> tuple[bool, dict[str, int]]:
        """Run ruleset once (or to saturation): whether the e-graph changed, and the matches per rule name."""
        report = self.egraph.run(ruleset.saturate()) if saturate else self.egraph.run(1, ruleset=ruleset)
        return report.updated, _by_name((getattr(rule, "name", None) or str(rule), n) for rule, n in report.num_matches_per_rule.items())

    def enode_count(self) -> int:
        return enode_count(self.egraph)


class CompiledRunner(Runner):
    """Runs the rulesets of a compiled program on one e-graph, as egglog commands.

    The program is added to the e-graph once, when the first runner is made.
    """

    def __init__(self, egraph: EGraph, program: Program):
        super().__init__(egraph)
        self.program = program
        if getattr(egraph, "_eqsat_program", None) is not program:
            egraph._egraph.run_program(*program.parsed())
            egraph._eqsat_program = program

    def run(self, ruleset: Ruleset, *, saturate: bool = False) -> tuple[bool, dict[str, int]]:
        # the schedule egglog-python sends for egraph.run(1, ruleset=r) and egraph.run(r.saturate())
        schedule: Any = bindings.Run(_span(), bindings.RunConfig(self.program.rulesets[ruleset_key(ruleset)], None))
        schedule = bindings.Saturate(_span(), schedule) if saturate else bindings.Repeat(_span(), 1, schedule)
        (output,) = self.egraph._egraph.run_program(bindings.RunSchedule(schedule))
        names = self.program.rule_names
        return output.report.updated, _by_name((names.get(rule, rule), n) for rule, n in output.report.num_matches_per_rule.items())


def _by_name(matches) -> dict[str, int]:
    totals: dict[str, int] = {}
    for name, n in matches:
        totals[name] = totals.get(name, 0) + n
    return totals
