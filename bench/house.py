"""The house in numbers: sizes, complexity, module state and private uses of a checkout.

``python -m bench.house [--root PATH]`` prints one table for the ``hodiff`` package under
``PATH`` (default: this checkout), so a tree before and after a change can be compared
with the same command. What each row counts:

- *lines*: the lines of a file that hold code, from its tokens: docstrings, comments and
  blank lines are not counted (a statement over three lines counts three).
- *backward files*: the engine modules whose code runs during one ``.backward()`` of a
  two-layer network (read with ``sys.setprofile`` in a subprocess of that checkout).
- *complexity*: the cyclomatic complexity of every function (radon's count), above 15
  and the largest.
- *module state*: names bound at module level in ``hodiff/engine/`` to a mutable object
  (a list, dict or set literal or comprehension, or a call of ``dict``, ``list``, ``set``,
  ``defaultdict``, ``WeakKeyDictionary``, ``WeakValueDictionary``, ``WeakSet``,
  ``ContextVar``, ``itertools.count``, ``deque``, ``threading.Lock``).
- *private uses*: in a module, an import of a private name (``from hodiff.x import _y``)
  or a read of ``m._y`` where ``m`` is an imported hodiff module, from another module;
  and, outside ``hodiff/engine/``, a read of ``obj._y`` where ``_y`` is a private
  attribute that the engine's classes set on ``self`` or list in ``__slots__``.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import pathlib
import subprocess
import sys
import tokenize

MUTABLE_CALLS = {
    "dict", "list", "set", "defaultdict", "WeakKeyDictionary", "WeakValueDictionary",
    "WeakSet", "ContextVar", "count", "deque", "Lock", "RLock", "OrderedDict", "Counter",
}  # fmt: skip
SKIP = ("Token", "NL", "NEWLINE", "INDENT", "DEDENT", "COMMENT", "ENCODING", "ENDMARKER")


def code_lines(path: pathlib.Path) -> int:
    """Lines holding code: no docstrings, comments or blank lines."""
    text = path.read_text()
    doc: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tokenize.tok_name[tok.type] in SKIP:
            continue
        for line in range(tok.start[0], tok.end[0] + 1):
            if line not in doc:
                lines.add(line)
    return len(lines)


def module_name(pkg: pathlib.Path, path: pathlib.Path) -> str:
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def complexity(paths: list[pathlib.Path]) -> list[tuple[int, str]]:
    from radon.complexity import cc_visit

    out = []
    for p in paths:
        for block in cc_visit(p.read_text()):
            name = f"{p.name}:{getattr(block, 'classname', None) or ''}.{block.name}".replace(
                ":.", ":"
            )
            out.append((block.complexity, name))
            for inner in getattr(block, "closures", []):
                out.append((inner.complexity, f"{name}.{inner.name}"))
    return sorted(out, reverse=True)


def module_state(paths: list[pathlib.Path]) -> list[str]:
    found = []
    for p in paths:
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                v = node.value
                mutable = isinstance(v, ast.List | ast.Dict | ast.Set | ast.ListComp)
                mutable |= isinstance(v, ast.DictComp | ast.SetComp)
                if isinstance(v, ast.Call):
                    f = v.func
                    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                    mutable |= name in MUTABLE_CALLS
                if mutable:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if ast.unparse(t) != "__all__":  # a module's list of names, not state
                            found.append(f"{p.name}:{ast.unparse(t)}")
    return found


def engine_private_attrs(engine: list[pathlib.Path]) -> set[str]:
    names: set[str] = set()
    for p in engine:
        for node in ast.walk(ast.parse(p.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                for elt in ast.walk(node.value):
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        names.add(elt.value)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_uses(pkg: pathlib.Path) -> list[str]:
    files = sorted(pkg.rglob("*.py"))
    engine_dir = pkg / "engine"
    engine = [p for p in files if engine_dir in p.parents] or [
        pkg / f"{n}.py" for n in ("variable", "function", "graph", "context", "autograd")
    ]
    engine = [p for p in engine if p.exists()]
    attrs = engine_private_attrs(engine)
    uses = []
    for p in files:
        here = module_name(pkg, p)
        in_engine = p in engine
        tree = ast.parse(p.read_text())
        modules: set[str] = set()  # local names bound to hodiff modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hodiff"):
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    sub = pkg.parent / pathlib.Path(*target.split("."))
                    if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                        modules.add(a.asname or a.name)
                    elif (
                        a.name.startswith("_")
                        and not a.name.startswith("__")
                        and node.module != here
                    ):
                        uses.append(f"{here}: from {node.module} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("hodiff") and a.asname:
                        modules.add(a.asname)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in modules:
                uses.append(f"{here}: {base.id}.{node.attr}")
            elif (
                not in_engine
                and node.attr in attrs
                and not (isinstance(base, ast.Name) and base.id in ("self", "cls"))
            ):
                uses.append(f"{here}: ._{node.attr.lstrip('_')} of an engine object")
    return uses


def backward_files(root: pathlib.Path) -> list[str]:
    probe = r"""
import sys, json, numpy as np
import hodiff as hd, hodiff.functions as F
x = hd.Variable.from_array(np.random.default_rng(0).standard_normal((8, 4)))
w1 = hd.Variable.from_array(np.ones((4, 16)) * 0.1, need_grad=True)
w2 = hd.Variable.from_array(np.ones((16, 1)) * 0.1, need_grad=True)
loss = F.mean(F.tanh(x @ w1) @ w2)
loss.backward()
seen = set()
def prof(frame, event, arg):
    if event == "call":
        seen.add(frame.f_code.co_filename)
loss = F.mean(F.tanh(x @ w1) @ w2)
sys.setprofile(prof)
loss.backward()
sys.setprofile(None)
print(json.dumps(sorted(seen)))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    pkg = (root / "hodiff").resolve()
    files = [pathlib.Path(f).resolve() for f in json.loads(out.stdout)]
    engine = {"functions", "grad_functions"}
    return sorted(
        str(f.relative_to(pkg))
        for f in files
        if pkg in f.parents and f.relative_to(pkg).parts[0] not in engine
    )


def measure(root: pathlib.Path) -> dict[str, object]:
    pkg = root / "hodiff"
    files = sorted(pkg.rglob("*.py"))
    specs = pkg / "testing" / "specs"
    sizes = {str(p.relative_to(pkg)): code_lines(p) for p in files}
    back = backward_files(root)
    cc = complexity(files)
    engine_files = [p for p in files if (pkg / "engine") in p.parents] or [
        pkg / f"{n}.py"
        for n in ("variable", "function", "graph", "context", "autograd", "batching")
    ]
    engine_names = {str(p.relative_to(pkg)) for p in engine_files}
    physical = {str(p.relative_to(pkg)): len(p.read_text().splitlines()) for p in files}
    largest = max((n for n in sizes if specs.name not in n), key=sizes.__getitem__)
    largest_engine = max(engine_names & set(sizes), key=sizes.__getitem__)
    return {
        "backward files": back,
        "lines one .backward() needs (code; physical)": (
            f"{sum(sizes[f] for f in back)}; {sum(physical[f] for f in back)}"
        ),
        "largest engine file (code; physical)": (
            f"{largest_engine} {sizes[largest_engine]}; {max(physical[n] for n in engine_names)}"
        ),
        "largest file, spec tables aside (code; physical)": (
            f"{largest} {sizes[largest]}; "
            f"{max(v for n, v in physical.items() if specs.name not in n)}"
        ),
        "functions above complexity 15": sum(c > 15 for c, _ in cc),
        "largest complexity": f"{cc[0][1]} {cc[0][0]}",
        "module-level mutable names in the engine": module_state(engine_files),
        "private uses across modules": private_uses(pkg),
        "modules directly in hodiff/": sorted(
            p.name for p in pkg.glob("*.py") if p.name != "__init__.py"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]))
    parser.add_argument("--list", action="store_true", help="print every item, not the counts")
    args = parser.parse_args()
    for key, value in measure(pathlib.Path(args.root)).items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}")
            if args.list:
                for item in value:
                    print(f"    {item}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
