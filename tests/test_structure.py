"""The package's import structure: layers that point one way, no hidden circle.

Every import of a hodiff module is read from the source (module level and inside
functions alike; ``if TYPE_CHECKING:`` blocks are not imports at run time), and:

* the engine imports nothing but the engine;
* the only import circle is the rules' own mutual recursion, inside
  ``hodiff/functions/`` + ``hodiff/grad_functions/``;
* imports inside functions are few and named (the CLI, which keeps ``--help`` fast);
  no class resolves a module lazily in ``__getattr__``; no ``# noqa: E402``;
* batching rules are declared in the class bodies, and the engine's functions are
  simple enough for the linter (no ``noqa: C901``).
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "hodiff"

#: where the rules' mutual recursion may form a circle
RULES = ("hodiff.functions", "hodiff.grad_functions")
#: (module, imported module) pairs allowed inside a function (e.g. a CLI keeping --help fast)
LOCAL_IMPORTS_ALLOWED: set[tuple[str, str]] = set()  # none today
MAX_LOCAL_IMPORTS = 8


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
#: the engine: data, nodes, the clock, ordering, the passes, hd.grad and the batching protocol
ENGINE = {m for m in MODULES if m == "hodiff.engine" or m.startswith("hodiff.engine.")}


def _resolve(module: str, level: int, here: str, is_package: bool) -> str:
    if not level:
        return module
    base = here.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _targets(node: ast.Import | ast.ImportFrom, here: str) -> list[str]:
    """The hodiff modules an import statement loads (``from a import b``: ``a.b`` if a module)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        is_package = MODULES.get(here, ROOT).name == "__init__.py"
        mod = _resolve(node.module or "", node.level, here, is_package)
        names = []
        for a in node.names:
            sub = f"{mod}.{a.name}"
            names.append(sub if sub in MODULES else mod)
    return [n for n in names if n == "hodiff" or n.startswith("hodiff.")]


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(path: pathlib.Path) -> list[tuple[str, bool, int]]:
    """``(imported module, inside a function, line)`` for every run-time import in ``path``."""
    here = _module_name(path)
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, local)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.extend((t, local, child.lineno) for t in _targets(child, here))
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


IMPORTS = {m: _imports(p) for m, p in MODULES.items()}


def _edges() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in imps if t in MODULES and t != m} for m, imps in IMPORTS.items()}


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def _in_rules(module: str) -> bool:
    return any(module == r or module.startswith(r + ".") for r in RULES)


def test_the_engine_imports_only_the_engine() -> None:
    offenders = {
        m: sorted({t for t, _, _ in IMPORTS[m] if t not in ENGINE and t != "hodiff"} | set())
        for m in ENGINE
    }
    offenders = {m: bad for m, bad in offenders.items() if bad}
    assert not offenders, f"the engine imports modules above it: {offenders}"
    for m in ENGINE:
        assert "hodiff" not in {t for t, _, _ in IMPORTS[m]}, f"{m} imports the hodiff package"


def test_the_only_circle_is_the_rules_mutual_recursion() -> None:
    for comp in _cycles(_edges()):
        outside = sorted(m for m in comp if not _in_rules(m))
        assert not outside, f"a circle through {sorted(comp)} (outside the rules: {outside})"


def test_no_module_imports_the_hodiff_package_itself() -> None:
    """``import hodiff`` inside the package is a circle through ``hodiff/__init__.py``."""
    offenders = {m: [line for t, _, line in imps if t == "hodiff"] for m, imps in IMPORTS.items()}
    offenders = {m: lines for m, lines in offenders.items() if lines and m != "hodiff"}
    assert not offenders, offenders


def test_imports_inside_functions_are_few_and_named() -> None:
    local = [(m, t, line) for m, imps in IMPORTS.items() for t, inside, line in imps if inside]
    unexpected = [x for x in local if (x[0], x[1]) not in LOCAL_IMPORTS_ALLOWED]
    assert not unexpected, f"imports of hodiff modules inside functions: {unexpected}"
    assert len(local) <= MAX_LOCAL_IMPORTS


def test_no_lazy_module_proxy() -> None:
    """No class that imports a module when an attribute is first read (``__getattr__``)."""
    offenders = []
    for m, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if (
                isinstance(node, ast.FunctionDef)
                and node.name == "__getattr__"
                and any(isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(node))
            ):
                offenders.append(f"{m}:{node.lineno}")
    assert not offenders, offenders


def test_no_import_after_code() -> None:
    offenders = [
        f"{m}:{i}"
        for m, p in MODULES.items()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"noqa:[^#]*E402", line)
    ]
    assert not offenders, offenders


def test_batching_rules_are_declared_in_the_class_bodies() -> None:
    offenders = []
    for m, p in MODULES.items():
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == "batch_rule":
                        offenders.append(f"{m}:{node.lineno}")
    assert not offenders, offenders


def test_the_engine_needs_no_complexity_exemption() -> None:
    offenders = [
        f"{m}:{i}"
        for m in ENGINE
        for i, line in enumerate(MODULES[m].read_text().splitlines(), 1)
        if "noqa: C901" in line
    ]
    assert not offenders, offenders


def test_the_checks_see_what_they_check() -> None:
    """The reader finds the imports this file's rules are about (it cannot pass vacuously)."""
    assert len(MODULES) > 60
    assert "hodiff.engine.function" in _edges()["hodiff.engine.graph"]
    assert "hodiff.functions.arithmetic" in _edges()["hodiff.functions"]
    assert ("hodiff.tools.check", False) in {
        (t, inside) for t, inside, _ in IMPORTS["hodiff.tools.demo"]
    }
    # a made-up circle is found
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
