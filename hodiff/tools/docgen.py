"""``python -m hodiff docs``: docs/functions.md generated from the spec table and docstrings.

One section per family module of :data:`hodiff.functions.FAMILIES` (in that
order), one row per public function (sorted by name): its name, the highest
derivative order its spec rows check (0: not differentiable) and the first
line of its docstring. ``tests/test_docs.py`` checks that the file equals
the output, so adding a function means: write it with its docstring, add its
spec rows, run ``python -m hodiff docs``.
"""

from __future__ import annotations

import inspect
import pathlib
import re
from types import ModuleType

import hodiff.functions as F
from hodiff.testing import all_specs, complex_specs

__all__ = ["function_reference", "write_function_reference"]

#: section titles of the family modules (a module not listed uses its docstring's first words)
TITLES = {
    "arithmetic": "Arithmetic",
    "math": "Math",
    "activation": "Activations",
    "reduction": "Reductions",
    "array": "Arrays and indexing",
    "linalg": "Linear algebra",
    "conv": "Convolutions",
    "pooling": "Pooling and resizing",
    "loss": "Softmax family and losses",
    "normalization": "Normalization",
    "nn": "Dropout and embedding",
    "recurrent": "Recurrent",
    "rounding": "Rounding and remainders",
    "special": "Special functions",
    "statistics": "Statistics and order",
    "shaping": "More arrays: axes, triangles, scatter, constants",
    "decomposition": "Linear algebra II: solves and factorizations",
    "attention": "Layers: attention, spectral normalization",
    "logic": "Comparisons and logic",
    "sampling": "Spatial transformers",
    "random": "Random numbers",
    "distributed": "Collectives",
}

#: a paragraph under a section's title, for families that need one
NOTES = {
    "random": "No inputs, no gradient (order 0); every forward of a static graph draws anew, and\n"
    "`hd.seed(n)` makes the draws reproducible (see docs/training.md).",
}

HEADER = """# Function reference

Every function of `hodiff.functions` (`import hodiff.functions as F`), by family, with the
highest derivative order its spec rows check against finite differences in float64
(`python -m hodiff check` re-runs them; 0 = not differentiable, it cuts the graph).
Arguments follow NNabla's signatures where NNabla has the function; each docstring
gives the formula and shapes (`help(F.name)`).

This page is generated from the spec table and the docstrings by `python -m hodiff docs`
(a test checks that it is up to date).
"""

FOOTER = """Gradient-only functions (`hodiff/grad_functions/`) appear in the graphs that `hd.grad`
records and have their own rules and spec rows (e.g. `sum_to`, the scatter-adds of
`getitem`/`gather`/`embed`, the filter gradient of `convolution`, the scatters of pooling).
"""

PATH = pathlib.Path(__file__).resolve().parents[2] / "docs" / "functions.md"


def _title(module: ModuleType) -> str:
    short = module.__name__.rsplit(".", 1)[-1]
    if short in TITLES:
        return TITLES[short]
    first = (module.__doc__ or short).strip().splitlines()[0]
    return first.split(":")[0].rstrip(".")


def _summary(name: str) -> str:
    """The docstring's first paragraph (a piecewise definition can span lines), as a table
    cell that renders alike on the site (Python-Markdown) and on GitHub.
    """
    doc = inspect.getdoc(getattr(F, name)) or ""
    return table_cell(" ".join(doc.split("\n\n")[0].split()))


_CELL = re.compile(r"``(.+?)``|\|")


def table_cell(text: str) -> str:
    r"""``text`` safe in a Markdown table cell: a pipe is an entity, not a column break.

    ``\|`` would show its backslash inside a code span on the site (Python-Markdown keeps
    it), so a code span holding a pipe becomes ``<code>`` with entities (``y = |x|``), which
    both renderers show as code.
    """

    def sub(m: re.Match[str]) -> str:
        body = m.group(1)
        if body is None:
            return "&#124;"
        if "|" not in body:
            return m.group(0)
        return "<code>" + "".join(f"&#{ord(c)};" if c in _SPECIAL else c for c in body) + "</code>"

    return _CELL.sub(sub, text)


_SPECIAL = set("|*_`\\[]<>&")


def function_reference() -> str:
    """The text of docs/functions.md for the functions and specs of this checkout."""
    best: dict[str, int] = {}
    for s in all_specs() + complex_specs():  # a function of complex values only: its rows
        name = getattr(s.fn, "__name__", "")
        best[name] = max(best.get(name, 0), s.order)
    parts = [HEADER]
    for module in F.FAMILIES:
        path = module.__name__.replace(".", "/") + ".py"
        rows = [f"## {_title(module)} (`{path}`)", ""]
        note = NOTES.get(module.__name__.rsplit(".", 1)[-1])
        if note:
            rows += [note, ""]
        rows += ["| function | order | summary |", "|---|---:|---|"]
        for name in sorted(module.__all__):
            if name not in best:
                raise LookupError(f"docs: F.{name} has no spec row (hodiff/testing/specs/)")
            rows.append(f"| `{name}` | {best[name]} | {_summary(name)} |")
        parts.append("\n".join(rows) + "\n")
    parts.append(FOOTER)
    return "\n".join(parts)


def write_function_reference(path: pathlib.Path = PATH) -> bool:
    """Writes docs/functions.md; returns whether it changed."""
    text = function_reference()
    old = path.read_text() if path.exists() else None
    if old != text:
        path.write_text(text)
    return old != text
