"""Imports go one way, as the table in docs/ARCHITECTURE.md ("Layers") states:
this test reads that table, so the rule checked is the rule written. A module
may import its own layer and those below it; function-level imports count,
imports under ``TYPE_CHECKING`` do not. Library code imports no Prefect."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from tests_paths import ROOT

ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
SOURCES = sorted([*(ROOT / "deepvm").rglob("*.py"), *(ROOT / "flows").rglob("*.py")])


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """(layer, [path or folder/]) per row of the Layers table, top layer first."""
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    table = []
    for row in rows:
        name, modules = (cell.strip() for cell in row.strip("|").split("|")[:2])
        table.append((name, re.findall(r"`([^`]+)`", modules)))
    assert table, "docs/ARCHITECTURE.md has no Layers table"
    return table


def rank_of(path: str, table: list[tuple[str, list[str]]]) -> tuple[int, str] | None:
    """(rank: higher is further up, layer) of a repository path; the most specific
    entry wins."""
    best: tuple[int, int, str] | None = None
    for position, (name, entries) in enumerate(table):
        for entry in entries:
            matches = path == entry or (entry.endswith("/") and path.startswith(entry))
            if matches and (best is None or len(entry) > best[0]):
                best = (len(entry), len(table) - position, name)
    return None if best is None else (best[1], best[2])


def module_path(module: str) -> str | None:
    """The repository path of an imported module of this project, else None."""
    parts = module.split(".")
    if parts[0] not in ("deepvm", "flows"):
        return None
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").exists():
        return "/".join(parts) + "/__init__.py"
    if base.with_suffix(".py").exists():
        return "/".join(parts) + ".py"
    return "/".join(parts) + ".py"  # a missing module still names its place


def _type_checking_only(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return ids


def imported_modules(path: Path, *, submodules: bool = False) -> set[str]:
    """The modules ``path`` imports (TYPE_CHECKING imports never run: left out);
    ``submodules``: ``from package import module`` names the module itself."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not submodules:
                names.add(node.module)
                continue
            for alias in node.names:
                sub = module_path(f"{node.module}.{alias.name}")
                whole = sub is not None and (ROOT / sub).exists()
                names.add(f"{node.module}.{alias.name}" if whole else node.module)
    return names


def upward_imports(path: Path, table: list[tuple[str, list[str]]]) -> list[str]:
    relative = path.relative_to(ROOT).as_posix()
    own = rank_of(relative, table)
    assert own is not None, f"{relative} is in no layer of docs/ARCHITECTURE.md"
    found = []
    for module in sorted(imported_modules(path)):
        target = module_path(module)
        if target is None:
            continue
        theirs = rank_of(target, table)
        assert theirs is not None, f"{relative} imports {module}, which is in no layer"
        if theirs[0] > own[0]:
            found.append(f"{module} ({theirs[1]}, above {own[1]})")
    return found


TABLE = layer_table(ARCHITECTURE.read_text())


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_go_down_the_layers_as_docs_architecture_states(path):
    assert upward_imports(path, TABLE) == []


@pytest.mark.parametrize(
    "path", sorted((ROOT / "deepvm").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_library_code_imports_no_prefect(path):
    assert not [m for m in imported_modules(path) if m.split(".")[0] in ("prefect", "flows")]


def test_the_table_places_the_planner_below_the_store_and_the_catalog_below_the_planner():
    """The rules the rest of the docs rely on, so that an edit of the table that
    turns them round fails here."""
    order = [name for name, _ in TABLE]
    assert order.index("store") < order.index("planner") < order.index("domain")
    assert order.index("domain") < order.index("data model") < order.index("base")


def test_the_check_sees_a_function_level_import_and_skips_type_checking(tmp_path):
    sneaky = ROOT / "deepvm" / "planner" / "_layers_probe.py"
    sneaky.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from deepvm.cli import main\n"
        "def f():\n    from deepvm.nightly.stages import nightly\n"
    )
    try:
        assert upward_imports(sneaky, TABLE) == ["deepvm.nightly.stages (stages, above planner)"]
    finally:
        sneaky.unlink()


def test_a_catalog_that_imports_the_store_is_refused():
    """What deepvm/catalog/sources.py did before the schemas moved below it."""
    table = layer_table(ARCHITECTURE.read_text())
    catalog = rank_of("deepvm/catalog/sources.py", table)
    store = rank_of(module_path("deepvm.store.core") or "", table)
    assert catalog is not None and store is not None
    assert store[0] > catalog[0]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "deepvm" / "planner").glob("*.py")), ids=lambda p: p.name
)
def test_the_planner_names_no_command_line_flag(path):
    """The planner names parameters by its own names ({deadline_h}); each front end
    spells them (docs/ARCHITECTURE.md, "Layers": errors)."""
    flags = [
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.search(r"(^|[\s(`])--[a-z]", node.value)
        and "--json" not in node.value  # highs.py: why its banner is kept off stdout
    ]
    assert flags == []


def test_a_planner_error_is_spelled_by_each_front_end(capsys, tmp_path):
    from deepvm.base.config import JobSpec
    from deepvm.cli import main
    from deepvm.nightly.prices import refresh_prices
    from deepvm.nightly.stages import replan
    from deepvm.planner.fleet.types import RegisteredJob
    from deepvm.store import Store

    assert main(["recommend", "--budget", "3", "--objective", "cost", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("deepvm: error: --work is needed by objective cost")
    assert "(or --epochs with --dataset-size)" in err
    store = Store.open(tmp_path)
    refresh_prices(store, "snapshot", snapshot_date="2026-12-01")
    late = RegisteredJob("late", 3.0, JobSpec(objective="cost", work_flops=1e21, deadline_h=0.01))
    (outcome,) = replan(store, [late], "2026-12-01")
    assert outcome.error is not None
    assert "raise deadline_h to at least" in outcome.error  # the scenarios file's key
    assert "or raise budget" in outcome.error and "--" not in outcome.error


def _module_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports, module and function level."""
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        relative = path.relative_to(ROOT).as_posix()
        graph[relative] = {
            target
            for name in imported_modules(path, submodules=True)
            if (target := module_path(name)) and target != relative and (ROOT / target).exists()
        }
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    """Module to module, function-level imports included: none hidden by importing
    inside a function (issue 38 found four)."""
    assert import_circles(_module_graph()) == []


def test_the_circle_check_finds_a_circle_through_a_function_level_import():
    graph = _module_graph()
    graph["deepvm/store/_legacy.py"] = graph["deepvm/store/_legacy.py"] | {"deepvm/store/core.py"}
    assert ["deepvm/store/_legacy.py", "deepvm/store/core.py"] in import_circles(graph)


def package_of(module: str) -> str:
    """A module's package under deepvm/ (``deepvm.planner`` for
    ``deepvm.planner.fleet._program``), or flows."""
    return ".".join(module.split(".")[:2])


def is_module(dotted: str) -> bool:
    path = module_path(dotted)
    return path is not None and (ROOT / path).exists()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_another_modules_private_names(path):
    """No private name of another module; a private module (``_x.py``) only from
    within its own package (deepvm/planner/ and its sub-packages are one)."""
    here = package_of(".".join(path.relative_to(ROOT).with_suffix("").parts))
    private = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.module.split(".")[0] not in ("deepvm", "flows"):
            continue
        own = package_of(node.module) == here
        if not own and any(part.startswith("_") for part in node.module.split(".")):
            private.append(node.module)  # another package's private module
        for alias in node.names:
            name = f"{node.module}.{alias.name}"
            hidden = alias.name.startswith("_") and not alias.name.startswith("__")
            if hidden and not (own and is_module(name)):
                private.append(name)
    assert private == []


def test_private_modules_are_named_as_such():
    """A module that nothing outside its package imports is the package's own
    (``_x.py``); the package's ``__init__`` says what of it is public. The entry
    points (``python -m``) and the packages' ``__init__`` aside."""
    entry = {"deepvm/__main__.py", "deepvm/bench/train.py"}
    graph = _module_graph()
    for init in (ROOT / "deepvm").rglob("__init__.py"):  # names loaded on first use
        lazy = re.findall(r'"(deepvm\.[a-z_.]+)"', init.read_text())
        graph[init.relative_to(ROOT).as_posix()] |= {
            module_path(m)
            for m in lazy
            if is_module(m)  # type: ignore[misc]
        }
    users: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            users.setdefault(target, set()).add(source)

    def package(path: str) -> str:
        return "/".join(path.split("/")[:2])

    unnamed = [
        module
        for module in graph
        if module.startswith("deepvm/")
        and module not in entry
        and not Path(module).name.startswith("_")
        and package(module) != module
        and all(package(u) == package(module) for u in users.get(module, ()))
    ]
    assert unnamed == []


def folder_of(path: str) -> str:
    """A module's folder (``deepvm/planner/fleet/``, ``flows/``); a top-level module
    of the package is its own."""
    parts = path.split("/")
    return "/".join(parts[:-1]) + "/" if len(parts) > 2 or parts[0] == "flows" else path


def test_no_circles_between_folders():
    """Folder to folder, within a layer too (catalog/, performance/ and bench/ are
    one layer: imports between them go one way)."""
    folders: dict[str, set[str]] = {}
    for module, targets in _module_graph().items():
        mine = folder_of(module)
        folders.setdefault(mine, set()).update(
            folder_of(t) for t in targets if folder_of(t) != mine
        )
    assert import_circles(folders) == []


@pytest.mark.parametrize(
    "path",
    [p for p in SOURCES if not p.name.startswith("_") or p.name == "__init__.py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_public_module_says_what_it_offers(path):
    """``__all__`` on every public module (a package's ``__init__`` with nothing but
    its docstring aside), naming only what the module defines or imports."""
    tree = ast.parse(path.read_text())
    if path.name == "__init__.py" and len(tree.body) <= 1:
        return  # a package docstring only: it offers nothing itself
    found = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    assert found, f"{path.relative_to(ROOT)} has no __all__"
    names = ast.literal_eval(found[0])
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.alias):
            defined.add((node.asname or node.name).split(".")[0])
    lazy = "__getattr__" in defined  # a package that loads its names on first use
    assert lazy or not set(names) - defined, set(names) - defined


# The deployment's entry (prefect.yaml names its flows) gathers the flows' modules.
GATHERERS = {"flows/deepvm_flows.py"}


@pytest.mark.parametrize(
    "path",
    [p for p in SOURCES if p.name != "__init__.py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_each_public_name_is_offered_by_the_module_that_defines_it(path):
    """A module offers (``__all__``, or ``import X as X``) only what it defines: a
    name is imported from its one home, and only a package's ``__init__`` gathers
    its modules' names (issue 38: each public name written once)."""
    if path.relative_to(ROOT).as_posix() in GATHERERS:
        return
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name: alias
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    offered = next(
        (ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
         and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)),
        [],
    )  # fmt: skip
    passed_on = [name for name in offered if name in imported]
    passed_on += [a.name for a in imported.values() if a.asname == a.name.split(".")[-1]]
    assert passed_on == []


def test_the_import_graph_is_no_deeper_than_issue_38_left_it():
    """The longest chain of the package's modules importing one another
    (scripts/import_levels.py): 12 imports when issue 38 was filed, 9 after (13
    with function-level imports, from 16). A new layer of indirection shows here."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import import_levels

    module_level = import_levels.package_graph(import_levels.graph(ROOT, function_level=False))
    every = import_levels.package_graph(import_levels.graph(ROOT, function_level=True))
    assert import_levels.levels(module_level) <= 9, import_levels.longest_chain(module_level)
    assert import_levels.levels(every) <= 13, import_levels.longest_chain(every)
