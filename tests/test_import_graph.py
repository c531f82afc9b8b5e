"""The cuco package has no import circle.

The graph's nodes are the modules under src/cuco; an arrow A -> B means A names B in an import statement. Every
import statement counts: at module level, inside a function (a deferred import still ties A to B: each needs the
other to work) and under `if TYPE_CHECKING:` (a type-only import ties the two files for every reader). `from cuco
import x` points at cuco.x when x is a module, else at the package cuco itself. A package's __init__ being run
when one of its modules is imported is not an arrow: it is how Python loads, not a choice of the importer.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(node: ast.AST, module: str, is_package: bool, modules: set[str]) -> list[str]:
    """The cuco modules that one import statement of `module` names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
        return [n for n in names if n in modules]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from the module's package, one level up per extra dot
        package = module.split(".") if is_package else module.split(".")[:-1]
        base_parts = package[: len(package) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in modules:
            found.append(sub)
        elif base in modules:
            found.append(base)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the cuco modules its import statements name (itself excluded)."""
    files = {_module_name(p): p for p in (src / "cuco").rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        targets = {t for node in ast.walk(tree) for t in _imported(node, name, is_package, modules)}
        graph[name] = targets - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None when it has none (depth-first search, three colours)."""
    state: dict[str, int] = {}  # absent: not seen; 1: on the current path; 2: done, no cycle through it
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_graph_is_read():
    graph = import_graph()
    assert "cuco.db" in graph["cuco.search.api"]       # module level
    assert "cuco.cli" in graph and "cuco.run" in graph


def test_find_cycle_names_the_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])
