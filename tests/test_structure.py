"""The package's import structure: functions/ -> grad_functions/ -> leaf kernels, one way.

``hodiff/grad_functions/*`` import no function family at module level (only the leaf
``hodiff/functions/_*.py`` kernel modules, which import no family either); the families
import the gradient-only modules at module level, never inside a function.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "hodiff"


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in tree.body if isinstance(tree, ast.Module) else ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def _family(name: str) -> bool:
    """A module of hodiff.functions that is a family (not a leaf kernel module)."""
    if not name.startswith("hodiff.functions"):
        return False
    rest = name.removeprefix("hodiff.functions").lstrip(".")
    return not rest or not rest.split(".")[0].startswith("_")


def _module_level(path: pathlib.Path) -> list[str]:
    return _imports(ast.parse(path.read_text()))


def _inside_functions(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in node.body:
                found += (
                    _imports(inner)
                    if not isinstance(inner, ast.Import | ast.ImportFrom)
                    else _imports(ast.Module(body=[inner], type_ignores=[]))
                )
    return found


def test_leaf_kernel_modules_import_no_family() -> None:
    leaves = sorted(p for p in (ROOT / "functions").glob("_*.py") if p.name != "__init__.py")
    assert leaves, "no leaf kernel modules"
    for p in leaves:
        bad = [n for n in _module_level(p) if _family(n) or n.startswith("hodiff.grad_functions")]
        assert not bad, f"{p.name} imports {bad}"


def test_families_import_gradient_only_modules_at_module_level_only() -> None:
    offenders = {}
    for p in sorted((ROOT / "functions").glob("*.py")):
        late = [n for n in _inside_functions(p) if n.startswith("hodiff.grad_functions")]
        if late:
            offenders[p.name] = late
    assert not offenders, offenders
