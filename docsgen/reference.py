"""The site's nav and API reference pages, generated from ``__all__`` (no name listed by hand).

Everything here is plain Python: it imports hodiff (never mkdocs), so the fast test
``tests/test_docs_site.py`` checks the generated Markdown without the ``docs`` extra, and
``docsgen/hooks.py`` hands the same pages to ``mkdocs build``.

- ``hodiff`` (``hd.*``): every name of ``hodiff.__all__``, grouped by the module that defines it.
- ``hodiff.functions``: one page per family (each module of ``F.FAMILIES``, by its ``__all__``),
  a table of each function's formula (rendered as mathematics) and the derivative order its
  spec rows check (``hodiff/testing/specs``), then each function's docstring.
- Toolkit modules (``TOOLKIT_MODULES``): one page each, for every module that exists.
  A module being written elsewhere appears as soon as it lands, with no edit here.
"""

from __future__ import annotations

import contextlib
import html
import importlib
import importlib.util
import inspect
import re
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The nav, in reading order: first the tasks (a guide per task, from the first line to a working
# result), then the reference, then how hodiff is built. A page listed here but absent from docs/
# is skipped; a page in docs/ listed nowhere is appended to the guides, so a new page never needs
# an edit here to be published (tests/test_docs_site.py checks that every page of docs/ is in the
# nav or in OFF_SITE).
HOME = "index.md"
GETTING_STARTED: tuple[str, ...] = ("quickstart.md",)
GUIDES: tuple[str, ...] = (
    "hvp.md",
    "taylor.md",
    "gradient_penalty.md",
    "training.md",
    "vmap.md",
    "curvature.md",
    "scipy.md",
    "checkpointing.md",
    "compile.md",
    "distributed.md",
    "conv.md",
    "recurrent.md",
    "more_functions.md",
    "complex.md",
    "porting_layers.md",
    "graphs.md",
    "custom_functions.md",
    "checking.md",
    "pitfalls.md",
)
# Measurements, and how hodiff works inside: for readers who want the why.
PERFORMANCE: tuple[str, ...] = ("performance.md",)
DESIGN: tuple[str, ...] = ("engine.md", "design_notes.md")
PROJECT: tuple[str, ...] = ("contributing.md",)
# Kept in docs/ for readers of the repository, not published (mkdocs.yml's exclude_docs):
# functions.md is the one-page table `python -m hodiff docs` writes; the site's one function
# reference is the generated api/functions/ (the same orders, with each docstring).
OFF_SITE: tuple[str, ...] = ("functions.md",)
# The first names of the `hd` reference page: what a newcomer looks for first. A name not (yet)
# in hodiff.__all__ is skipped.
HD_FIRST: tuple[str, ...] = ("grad", "hvp", "laplacian", "jit")
# Toolkit modules, each with a reference page when it exists (importable, or at least present
# as source: griffe reads source statically, so a module whose optional dependency is missing,
# e.g. mpi4py for hodiff.distributed, is still documented).
TOOLKIT_MODULES: tuple[str, ...] = (
    "hodiff.parametric",
    "hodiff.initializers",
    "hodiff.solvers",
    "hodiff.curvature",
    "hodiff.scipy",
    "hodiff.testing",
    "hodiff.distributed",
)

API_DIR = "api"

_OPTIONS = """    options:
      heading_level: {level}
      show_root_heading: true
      show_root_full_path: false
"""


# ---------------------------------------------------------------------------------------------
# Formulas: docstrings write them as ``y = f(x)`` (plain text, readable in help()); the site
# renders them as mathematics with MathJax's AsciiMath input, which reads that notation.
# ---------------------------------------------------------------------------------------------

_RELATION = re.compile(r" (=|<=|>=|<|>|!=) ")
_NOT_MATH = re.compile(
    r"""["':;]|==|->|\bTrue\b|\bFalse\b|\bNone\b|\blambda\b|\bimport\b"""
    r"|[A-Za-z_)\]]\.[A-Za-z_]"  # attribute access: x.shape, F.sum, numpy.einsum
    r"|[A-Za-z]_[a-z]{2,}"  # a Python identifier such as decay_rate or batch_dims
    r"|\w=\w"  # a keyword argument
    r"| of | over |\.\.\.|\*x|\*h|\*xs"  # prose or argument lists, not a formula
)
# Names MathJax's AsciiMath knows (functions set upright, Greek letters, symbols); any other
# name of two letters or more is set upright as text, so that sigmoid(x) does not read as
# s*i*g*m*o*i*d and digamma as d*i*gamma.
_ASCIIMATH_NAMES = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "sec",
        "csc",
        "cot",
        "sinh",
        "cosh",
        "tanh",
        "arcsin",
        "arccos",
        "arctan",
        "exp",
        "log",
        "ln",
        "det",
        "dim",
        "lim",
        "mod",
        "gcd",
        "lcm",
        "min",
        "max",
        "sqrt",
        "root",
        "sum",
        "prod",
        "int",
        "oint",
        "del",
        "grad",
        "abs",
        "floor",
        "ceil",
        "norm",
        "cdot",
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "pi",
        "rho",
        "sigma",
        "tau",
        "upsilon",
        "phi",
        "chi",
        "psi",
        "omega",
        "Gamma",
        "Delta",
        "Theta",
        "Lambda",
        "Xi",
        "Pi",
        "Sigma",
        "Phi",
        "Psi",
        "Omega",
    }
)
_RENAME = {"eps": "epsilon", "inf": "oo", "infty": "oo"}
_NAME = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9]+)(?![A-Za-z0-9])")


def is_formula(span: str) -> bool:
    """True for a double-backtick span of a docstring that is mathematics, not code."""
    return bool(_RELATION.search(f" {span} ")) and not _NOT_MATH.search(span)


def to_asciimath(span: str) -> str:
    """The AsciiMath source for a docstring formula (``**`` is a power, ``integral`` an int)."""
    s = " ".join(span.split())
    s = re.sub(r"\s*\*\*\s*(\w+|\([^()]*\))", r"^(\1)", s)  # x ** val -> x^(val)
    s = re.sub(r"\^-(\w+)", r"^(-\1)", s)  # e^-x -> e^(-x)
    s = s.replace("integral", "int")
    s = re.sub(r"\b([A-Za-z])(\d+)\b", r"\1_\2", s)  # x0 -> x_0 (so x0 / x1 is a fraction)
    s = s.replace(" * ", " cdot ")

    def upright(m: re.Match[str]) -> str:
        name = m.group(1)
        name = _RENAME.get(name, name)
        return name if name in _ASCIIMATH_NAMES else f'"{name}"'

    return _NAME.sub(upright, s)


def math_html(span: str) -> str:
    """Inline HTML that MathJax typesets; safe inside Markdown paragraphs and tables."""
    special = set("*_`\\[]|{}#+-!")
    escaped = "".join(
        f"&#{ord(c)};" if c in special else html.escape(c, quote=False) for c in to_asciimath(span)
    )
    return f'<span class="arithmatex">&#96;{escaped}&#96;</span>'


_SPAN = re.compile(r"``(.+?)``", re.S)
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc):`~?([^`]+)`")
_DOCTEST = re.compile(r"^(\s*)>>> ")


_MATH_DIRECTIVE = re.compile(r"^(\s*)\.\. math::[ \t]*(.*)$")


def math_directives(text: str) -> str:
    r"""reST ``.. math::`` blocks (TeX, on the directive's line or indented below it) as display
    math that MathJax typesets, like the pages' ``$$...$$`` (a ``&`` or ``\\`` in the TeX
    means aligned rows, as in Sphinx).
    """
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _MATH_DIRECTIVE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, body = m.group(1), [m.group(2).strip()] if m.group(2).strip() else []
        i += 1
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
        ):
            if lines[i].strip():
                body.append(lines[i].strip())
            elif body:
                break
            i += 1
        tex = " ".join(body)
        if "&" in tex or "\\\\" in tex:
            tex = f"\\begin{{aligned}} {tex} \\end{{aligned}}"
        out += ["", f'<div class="arithmatex">\\[{html.escape(tex, quote=False)}\\]</div>', ""]
    return "\n".join(out)


def transform_docstring(text: str) -> str:
    """A docstring as the site shows it: formula spans as math, ``.. math::`` blocks as display
    math, doctest blocks fenced.

    Only the rendering changes: ``help()`` and doctests read the docstring as written.
    """
    out: list[str] = []
    lines = math_directives(text).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DOCTEST.match(line)
        if m:
            indent = m.group(1)
            if out and out[-1].strip():
                out.append("")
            out.append(f"{indent}```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(f"{indent}```")
            continue
        out.append(line)
        i += 1
    joined = "\n".join(out)
    joined = _ROLE.sub(r"``\1``", joined)  # reST roles read as code
    joined = re.sub(r"(\S)::$", r"\1:", joined, flags=re.M)  # reST "::" before a code block
    parts = re.split(r"(```pycon.*?```)", joined, flags=re.S)
    for k in range(1, len(parts), 2):  # directives are for pytest, not for readers
        parts[k] = _DIRECTIVE.sub("", parts[k])
    for k in range(0, len(parts), 2):
        parts[k] = _SPAN.sub(
            lambda m: math_html(m.group(1)) if is_formula(m.group(1)) else m.group(0), parts[k]
        )
    return "".join(parts)


_FENCE = re.compile(r"^(\s*)```(\w*)\n(.*?)^\1```", re.M | re.S)
_DIRECTIVE = re.compile(r"[ \t]*#\s*doctest:[^\n]*$", re.M)


def page_markdown(markdown: str) -> str:
    """A page of docs/ as the site shows it (the file itself is doctested as written).

    A fenced block of doctest lines (``>>>``) is highlighted as a Python console
    (``pycon``: the prompts and outputs get their own classes, which the copy button
    leaves out, docs/stylesheets/extra.css), and the ``# doctest:`` directives, which are
    for pytest, not for readers, are removed from every code block.
    """

    def fence(m: re.Match[str]) -> str:
        indent, lang, body = m.group(1), m.group(2), m.group(3)
        if lang in ("", "python", "py", "pycon") and body.lstrip().startswith(">>>"):
            lang = "pycon"
            body = _DIRECTIVE.sub("", body)
        return f"{indent}```{lang}\n{body}{indent}```"

    return _FENCE.sub(fence, markdown)


def formula(obj: Any) -> str | None:
    """The first formula of an object's docstring (its definition), or None."""
    for span in _SPAN.findall(inspect.getdoc(obj) or ""):
        if is_formula(span):
            return span
    return None


def definition_cell(obj: Any) -> str:
    """A function's definition for a table cell: its docstring's whole first paragraph, so a
    piecewise definition keeps every piece (elu's ``y = x`` for ``x > 0``, ``alpha (e^x - 1)``
    otherwise), formulas as math, code spans as code, no pipe left to break the row.
    """

    def span(m: re.Match[str]) -> str:
        body = m.group(1)
        if is_formula(body):
            return math_html(body)
        return (
            "<code>"
            + "".join(
                f"&#{ord(c)};" if c in "*_`\\[]|{}" else html.escape(c, quote=False) for c in body
            )
            + "</code>"
        )

    parts = re.split(r"(``.+?``)", summary(obj))
    return "".join(
        _SPAN.sub(span, part) if k % 2 else part.replace("|", "&#124;")
        for k, part in enumerate(parts)
    )


def summary(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return _ROLE.sub(r"``\1``", doc.split("\n\n")[0].replace("\n", " ").strip())


# ---------------------------------------------------------------------------------------------
# The pages.
# ---------------------------------------------------------------------------------------------


def canonical(obj: Any, fallback: str) -> str:
    """The dotted path where an object is defined (what mkdocstrings documents)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and qualname and "<" not in qualname:
        return f"{module}.{qualname}"
    return fallback


def _block(path: str, level: int) -> str:
    return f"::: {path}\n{_OPTIONS.format(level=level)}"


def checked_orders() -> dict[str, int]:
    """Function name -> the highest derivative order its spec rows check (0: none)."""
    from hodiff.testing import all_specs, complex_specs

    best: dict[str, int] = {}
    for s in all_specs() + complex_specs():  # a function of complex values only: its rows
        best[s.fn.__name__] = max(best.get(s.fn.__name__, 0), s.order)
    return best


def toolkit_modules() -> list[str]:
    """The modules of ``TOOLKIT_MODULES`` present in this checkout."""
    present = []
    for name in TOOLKIT_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:
            found = False
        if found:
            present.append(name)
    return present


def _exports(module_name: str) -> list[str] | None:
    """A module's ``__all__``, or None when it cannot be imported (optional extra missing)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return list(getattr(module, "__all__", []))


def _page_name(module_name: str) -> str:
    return module_name.removeprefix("hodiff.")


def _link(text: str, target: str) -> str:
    return f"[{text}][{target}]"


def _module_doc(module_name: str, level: int) -> str:
    """A module's docstring, without its members (they get blocks of their own)."""
    return (
        _block(module_name, level).replace("show_root_heading: true", "show_root_heading: false")
        + "      members: false\n"
    )


def hodiff_page() -> str:
    """``hd.*``: the entry points of ``HD_FIRST`` first, then every other name of
    ``hodiff.__all__``, grouped by its defining module.
    """
    import hodiff as hd

    first = [name for name in HD_FIRST if name in hd.__all__]
    groups: dict[str, list[tuple[str, Any]]] = {}
    submodules: list[str] = []
    for name in hd.__all__:
        obj = getattr(hd, name)
        if isinstance(obj, types.ModuleType):
            submodules.append(name)
            continue
        if name in first:
            continue
        defined = canonical(obj, "") and obj.__module__
        groups.setdefault(defined or "hodiff", []).append((name, obj))
    lines = [
        "# `hodiff` (`hd`)",
        "",
        "`import hodiff as hd`. The derivatives first ("
        + ", ".join(f"`hd.{n}`" for n in first)
        + "), then every other name of `hodiff.__all__`, grouped by the module that defines it.",
        "",
        "## Derivatives",
        "",
    ]
    for name in first:
        lines += [_block(canonical(getattr(hd, name), f"hodiff.{name}"), 3), ""]
    lines += ["## Submodules", ""]
    for name in submodules:
        target = "functions/index.md" if name == "functions" else f"{_page_name(name)}.md"
        lines += [f"- `hd.{name}`: see [hodiff.{name}]({target}).", ""]
    for module_name, members in groups.items():
        lines += [f"## `{module_name}`", "", _module_doc(module_name, 3), ""]
        for name, obj in members:
            lines += [_block(canonical(obj, f"hodiff.{name}"), 3), ""]
    return "\n".join(lines)


# Page titles of the function families (a family missing here is titled by its module name).
FAMILY_TITLES: dict[str, str] = {
    "activation": "Activations",
    "reduction": "Reductions",
    "linalg": "Linear algebra",
    "conv": "Convolutions",
    "loss": "Softmax and losses",
    "nn": "Dropout and embedding",
    "recurrent": "Recurrent layers",
    "special": "Special functions",
    "decomposition": "Solves and decompositions",
    "sampling": "Spatial sampling",
}


# Families shown on the page of another (one page per subject): slug -> the page's slug.
MERGED: dict[str, str] = {"decomposition": "linalg"}


def _family_title(module: types.ModuleType) -> str:
    slug = module.__name__.rsplit(".", 1)[1]
    return FAMILY_TITLES.get(slug, slug.replace("_", " ").capitalize())


def _families() -> list[tuple[str, types.ModuleType | None, list[str]]]:
    """(slug, module, names) per family of ``F.FAMILIES``, and 'other' for the rest of
    ``F.__all__`` (names a module appends to ``F.__all__`` without being a family).
    """
    import hodiff.functions as F

    out: list[tuple[str, types.ModuleType | None, list[str]]] = []
    seen: set[str] = set()
    for module in F.FAMILIES:
        names = [n for n in module.__all__ if n in F.__all__]
        seen.update(names)
        out.append((module.__name__.rsplit(".", 1)[1], module, names))
    rest = [n for n in F.__all__ if n not in seen]
    if rest:
        out.append(("other", None, rest))
    return out


def family_page(slug: str) -> str:
    """The page (``functions/<page>.md``) that shows a family: its own, or the one it is merged
    into (``MERGED``).
    """
    return MERGED.get(slug, slug)


def _order_cell(orders: dict[str, int], name: str) -> str:
    return str(orders[name]) if name in orders else "no spec"


def _family_section(
    module: types.ModuleType | None, names: list[str], orders: dict[str, int], level: int
) -> list[str]:
    """A family's module docstring, its table (function, definition, checked order), then each
    function's docstring, with headings at ``level``.
    """
    import hodiff.functions as F

    lines: list[str] = []
    if module is not None:
        lines += [
            f"`{module.__name__}`: the functions of this family are exported as `F.name`.",
            "",
            _module_doc(module.__name__, level),
            "",
        ]
    lines += ["| function | definition | order |", "|---|---|---:|"]
    blocks = []
    for name in names:
        obj = getattr(F, name)
        path = canonical(obj, f"hodiff.functions.{name}")
        lines.append(
            f"| {_link(f'`{name}`', path)} | {definition_cell(obj)} | {_order_cell(orders, name)} |"
        )
        blocks += [
            _block(path, level),
            f"Derivatives checked against finite differences to order "
            f"**{_order_cell(orders, name)}** (spec table `hodiff/testing/specs/`).",
            "",
        ]
    return [*lines, "", *blocks]


def function_pages() -> dict[str, str]:
    """``functions/index.md`` (every family) and one page per family (families of ``MERGED``
    share the page of another, each under a heading of its own).
    """
    orders = checked_orders()
    families = _families()
    by_page: dict[str, list[tuple[str, types.ModuleType | None, list[str]]]] = {}
    for slug, module, names in families:
        by_page.setdefault(family_page(slug), []).append((slug, module, names))
    pages: dict[str, str] = {}
    index = [
        "# `hodiff.functions` (`F`)",
        "",
        "`import hodiff.functions as F`. Every function is differentiable to any order "
        "(its backward is written in hodiff functions). **order** is the highest derivative "
        "order its spec rows in `hodiff/testing/specs/` check against finite differences in "
        "float64 (`python -m hodiff check` re-runs them; 0: not differentiable, it cuts the "
        "graph).",
        "",
        "| family | functions |",
        "|---|---|",
    ]
    for page, members in by_page.items():
        _, module, _ = members[0]
        title = _family_title(module) if module else "Other"
        names = [n for _, _, ns in members for n in ns]
        index.append(f"| [{title}]({page}.md) | " + ", ".join(f"`{n}`" for n in names) + " |")
        lines = [f"# {title}", ""]
        if len(members) == 1:
            lines += _family_section(module, names, orders, 2)
        else:
            for _, m, ns in members:
                subtitle = _family_title(m) if m else "Other"
                lines += [f"## {subtitle}", "", *_family_section(m, ns, orders, 3)]
        pages[f"functions/{page}.md"] = "\n".join(lines)
    pages["functions/index.md"] = "\n".join(index) + "\n"
    return pages


def toolkit_page(module_name: str) -> str:
    """One toolkit module: its docstring, then each name of its ``__all__``."""
    names = _exports(module_name)
    lines = [f"# `{module_name}`", ""]
    if names is None:
        # Not importable here (an optional dependency is missing): griffe still reads the
        # source, and mkdocstrings shows the members of its __all__.
        return "\n".join(
            [
                *lines,
                _block(module_name, 1).replace(
                    "show_root_heading: true", "show_root_heading: false"
                ),
            ]
        )
    module = importlib.import_module(module_name)
    lines += [_module_doc(module_name, 2), ""]
    for name in names:
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            continue
        lines += [_block(canonical(obj, f"{module_name}.{name}"), 2), ""]
    return "\n".join(lines)


def index_page(modules: Iterable[str]) -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings of every public name (each module's `__all__`).",
        "",
        "- [`hodiff`](hodiff.md) (`import hodiff as hd`): variables, modes, `hd.grad` and "
        "the transforms.",
        "- [`hodiff.functions`](functions/index.md) (`import hodiff.functions as F`): every "
        "differentiable function, by family, with its formula and checked derivative order.",
    ]
    for name in modules:
        module_summary = ""
        with contextlib.suppress(ImportError):
            module_summary = ": " + summary(importlib.import_module(name))
        lines.append(f"- [`{name}`]({_page_name(name)}.md){module_summary}")
    return "\n".join(lines) + "\n"


def reference_pages() -> dict[str, str]:
    """Path under ``api/`` -> Markdown source, for every reference page."""
    modules = toolkit_modules()
    pages = {"index.md": index_page(modules), "hodiff.md": hodiff_page()}
    pages.update(function_pages())
    for name in modules:
        pages[f"{_page_name(name)}.md"] = toolkit_page(name)
    return {f"{API_DIR}/{path}": text for path, text in pages.items()}


def nav(docs_dir: str | Path, reference: Iterable[str]) -> list[dict[str, Any]]:
    """The site's nav: the guides, then the reference, then performance and design; listed
    pages in order, unlisted ones appended to the guides, ``OFF_SITE`` pages left out.
    """
    docs = Path(docs_dir)
    present = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    listed = {HOME, *GETTING_STARTED, *GUIDES, *PERFORMANCE, *DESIGN, *PROJECT, *OFF_SITE}
    guides = [p for p in GUIDES if p in present]
    guides += [p for p in present if p not in listed and not p.startswith(f"{API_DIR}/")]
    reference = list(reference)
    functions = [
        p for p in reference if p.startswith(f"{API_DIR}/functions/") and not p.endswith("index.md")
    ]
    api: list[Any] = [
        f"{API_DIR}/index.md",
        f"{API_DIR}/hodiff.md",
        {"hodiff.functions": [f"{API_DIR}/functions/index.md", *functions]},
    ]
    api += [p for p in reference if p not in api and not p.startswith(f"{API_DIR}/functions/")]
    out: list[dict[str, Any]] = []
    if HOME in present:
        out.append({"Home": HOME})
    sections: list[tuple[str, list[Any]]] = [
        ("Getting started", [p for p in GETTING_STARTED if p in present]),
        ("Guides", guides),
        ("API reference", api),
        ("Performance", [p for p in PERFORMANCE if p in present]),
        ("Design notes", [p for p in DESIGN if p in present]),
        ("Project", [p for p in PROJECT if p in present]),
    ]
    out += [{title: pages} for title, pages in sections if pages]
    return out
