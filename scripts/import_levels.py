"""How deep deepvm's import graph is (issue 38's "levels"): the longest chain of
the package's modules importing one another, counted in imports (a module that
imports none is level 0), at module level and with function-level imports too,
and how many entries stand at the top of ``deepvm/``.

    python scripts/import_levels.py [TREE]   (default: this checkout)

TYPE_CHECKING imports do not count (they never run); a circle counts once. A
package's ``__init__`` only re-exports its modules, so it is no level of its own
(counted so, the tree issue 38 was filed on, 5189275, has 12 levels). flows/
stands above the package and is left out.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path


def module_path(root: Path, module: str) -> str | None:
    parts = module.split(".")
    if parts[0] not in ("deepvm", "flows"):
        return None
    if (root.joinpath(*parts) / "__init__.py").exists():
        return "/".join(parts) + "/__init__.py"
    return "/".join(parts) + ".py"


def graph(root: Path, *, function_level: bool) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted([*(root / "deepvm").rglob("*.py"), *(root / "flows").rglob("*.py")]):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        skip: set[int] = set()
        for node in ast.walk(tree):
            typing_only = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            in_function = not function_level and isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef
            )
            if typing_only or in_function:
                body = node.body if typing_only else [node]
                skip |= {id(inner) for stmt in body for inner in ast.walk(stmt)}
        names: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = module_path(root, f"{node.module}.{alias.name}")
                    whole = sub is not None and (root / sub).exists()
                    names.add(f"{node.module}.{alias.name}" if whole else node.module)
        here = path.relative_to(root).as_posix()
        out[here] = {
            target
            for name in names
            if (target := module_path(root, name)) and target != here and (root / target).exists()
        }
    return out


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The package's modules only: no flows/, no ``__init__`` (see the docstring)."""

    def counted(module: str) -> bool:
        return module.startswith("deepvm/") and not module.endswith("/__init__.py")

    return {m: {t for t in targets if counted(t)} for m, targets in edges.items() if counted(m)}


def longest_chain(edges: dict[str, set[str]]) -> tuple[str, ...]:
    """The longest chain of modules, each importing the next."""
    sys.setrecursionlimit(10_000)

    @functools.cache
    def chain(module: str, seen: frozenset[str] = frozenset()) -> tuple[str, ...]:
        if module in seen:
            return ()
        below = [chain(t, seen | {module}) for t in sorted(edges.get(module, ()))]
        return (module, *max(below, key=len, default=()))

    return max((chain(m) for m in sorted(edges)), key=len, default=())


def levels(edges: dict[str, set[str]]) -> int:
    """Imports in the longest chain."""
    return max(len(longest_chain(edges)) - 1, 0)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    with_functions = package_graph(graph(root, function_level=True))
    module_level = package_graph(graph(root, function_level=False))
    top = [p for p in (root / "deepvm").iterdir() if p.name != "__pycache__"]
    print(f"{len(module_level)} modules; {len(top)} entries at the top of deepvm/")
    print(f"levels, module-level imports: {levels(module_level)}")
    print("  " + " -> ".join(longest_chain(module_level)))
    print(f"levels with function-level imports: {levels(with_functions)}")
    print("  " + " -> ".join(longest_chain(with_functions)))


if __name__ == "__main__":
    main()
