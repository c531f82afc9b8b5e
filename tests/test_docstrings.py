"""Every public callable in src/cuco/ has a docstring (read with `ast`; no package module is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cuco"


DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _public(name: str) -> bool:
    return not name.startswith("_")


def _public_module(rel: Path) -> bool:
    return all(_public(part) for part in rel.parts[:-1]) and (rel.name == "__init__.py" or _public(rel.name))


def _undocumented(body: list[ast.stmt], prefix: str) -> list[tuple[int, str]]:
    """(line, qualified name) of each public def in `body` without a docstring, class bodies included."""
    found = []
    for node in body:
        if not isinstance(node, DEFS) or not _public(node.name):
            continue
        qualname = prefix + node.name
        if ast.get_docstring(node) is None:
            found.append((node.lineno, qualname))
        if isinstance(node, ast.ClassDef):
            found += _undocumented(node.body, qualname + ".")
    return found


def missing_docstrings() -> list[str]:
    """`path:line qualified.name` of every public callable in the package without a docstring."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if not _public_module(rel):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out += [f"src/cuco/{rel.as_posix()}:{line} {name}" for line, name in _undocumented(tree.body, "")]
    return out


def test_every_public_callable_has_a_docstring() -> None:
    missing = missing_docstrings()
    assert not missing, f"{len(missing)} public callables have no docstring:\n" + "\n".join(missing)
