"""The layering of docs/architecture.md, checked on the source: which modules may import which (the test suite's too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eqsat"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def direct_imports(module: str, modules: dict[str, Path] = MODULES) -> set[str]:
    """Every module named by an import statement of module (one of modules), at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(modules[module].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if f"{node.module}.{alias.name}" in modules)
    return found


def reachable_imports(module: str) -> set[str]:
    """The modules module imports, directly or through eqsat's own modules and their parent packages
    (not through the root package `eqsat`, whose __init__ is the public API that imports everything)."""
    found, visited, todo = set(), {module}, [module]
    while todo:
        for name in direct_imports(todo.pop()):
            found.add(name)
            parents = [".".join(name.split(".")[:i]) for i in range(2, name.count(".") + 1)]
            for m in [name, *parents]:
                if m in MODULES and m != "eqsat" and m not in visited:
                    visited.add(m)
                    todo.append(m)
    return found


def top_level(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("eqsat.extract") or m == "eqsat.ir"))
def test_the_term_language_extractors_and_cost_model_import_no_torch_and_no_bridge(module):
    imported = reachable_imports(module)
    assert not top_level(imported) & {"torch", "executorch"}, sorted(imported)
    assert "eqsat.bridge_fx" not in imported


def eqsat_modules(names: set[str]) -> set[str]:
    return {n for n in names if n == "eqsat" or n.startswith("eqsat.")}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("eqsat.ops") or m == "eqsat.ir"))
def test_the_op_registry_and_the_term_language_import_nothing_of_eqsat_but_ir(module):
    assert all(n == "eqsat.ir" or n.startswith("eqsat.ops") for n in eqsat_modules(reachable_imports(module))), sorted(reachable_imports(module))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("eqsat.extract")))
def test_the_extractors_and_cost_model_read_terms_from_ir_not_from_the_op_registry(module):
    assert not {n for n in reachable_imports(module) if n.startswith("eqsat.ops")}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_package_imports_no_benchmarks(module):
    assert "benchmarks" not in top_level(direct_imports(module))


@pytest.mark.parametrize("module", ["eqsat.pipeline", "eqsat.arm_pass", "eqsat.bridge_fx", "eqsat.rules", "eqsat.extract"])
def test_the_optimizer_does_not_import_the_calibration_tooling(module):
    assert not {n for n in reachable_imports(module) if n.startswith("eqsat.calibration")}


def test_the_flatbuffer_bridge_hands_the_pipeline_an_fx_graph_and_knows_no_egraph():
    imported = reachable_imports("eqsat.bridge_tosa")
    assert not {n for n in eqsat_modules(imported) if not n.startswith("eqsat.ops") and n != "eqsat.ir"}, sorted(eqsat_modules(imported))
    assert "egglog" not in top_level(imported)


TEST_SUITE = {module_name(p): p for p in (ROOT / "tests").rglob("*.py")}


@pytest.mark.parametrize("module", sorted(TEST_SUITE))
def test_no_module_of_the_test_suite_imports_a_test_module(module):
    """What several test files share lives in a harness module (docs/architecture.md names them), never in a test_*
    module that another test file would import."""
    imported = direct_imports(module, TEST_SUITE) & TEST_SUITE.keys()
    assert not {m for m in imported if m.rpartition(".")[2].startswith("test_")}
