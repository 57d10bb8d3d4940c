"""Imports go one way (docs/ARCHITECTURE.md, "Layers"): the planner is a leaf
that reads no store and knows no pipeline, flows or CLI; library code imports no
Prefect. Function-level imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tests_paths import ROOT

PACKAGE = ROOT / "deepvm"
# What sits above the planner.
ABOVE_PLANNER = (
    "deepvm.store",
    "deepvm.store_inputs",
    "deepvm.pipeline",
    "deepvm.results",
    "deepvm.scenarios",
    "deepvm.report",
    "deepvm.plots",
    "deepvm.cli",
    "flows",
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def upward(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        name
        for name in imported_modules(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    )


@pytest.mark.parametrize("path", sorted((PACKAGE / "planner").glob("*.py")), ids=lambda p: p.name)
def test_the_planner_imports_nothing_above_it(path):
    assert upward(path, ABOVE_PLANNER) == []


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_library_code_imports_no_prefect(path):
    assert upward(path, ("prefect", "flows")) == []


def test_the_check_sees_a_function_level_import(tmp_path):
    sneaky = tmp_path / "m.py"
    sneaky.write_text("def f():\n    from deepvm.pipeline import nightly\n")
    assert upward(sneaky, ABOVE_PLANNER) == ["deepvm.pipeline"]
