"""The documentation site's generated sources (docsgen/): complete, ordered, and well-formed.

These run without the ``docs`` extra: ``docsgen.reference`` imports hodiff only. CI also builds
the site itself with ``mkdocs build --strict`` (.ci/run).
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
import types

import pytest

import hodiff as hd
import hodiff.functions as F

pytest.importorskip("scipy")  # the spec table (derivative orders) needs it

from docsgen import reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference.reference_pages()


def _blocks(pages: dict[str, str]) -> set[str]:
    return {m for text in pages.values() for m in re.findall(r"^::: (\S+)$", text, re.M)}


def _resolve(path: str) -> object:
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def test_every_function_has_a_reference_block_for_the_object_itself(pages) -> None:
    blocks = _blocks(pages)
    by_name = {b.rsplit(".", 1)[1]: b for b in blocks if b.startswith("hodiff.functions.")}
    for name in F.__all__:
        assert name in by_name, f"F.{name} is missing from the generated API reference"
        # F's attribute is its family's function itself (a traced one included)
        assert _resolve(by_name[name]) is getattr(F, name), by_name[name]


def test_every_top_level_name_is_in_the_reference(pages) -> None:
    blocks = _blocks(pages)
    text = pages["api/hodiff.md"]
    for name in hd.__all__:
        obj = getattr(hd, name)
        if isinstance(obj, types.ModuleType):
            assert f"`hd.{name}`" in text, f"hd.{name} (a module) is not linked from api/hodiff.md"
            continue
        found = [b for b in blocks if b.rsplit(".", 1)[1] == name and _resolve(b) is obj]
        assert found, f"hd.{name} is missing from the generated API reference"


def test_function_tables_give_the_order_each_spec_checks(pages) -> None:
    orders = reference.checked_orders()
    text = "\n".join(v for k, v in pages.items() if k.startswith("api/functions/"))
    for name in F.__all__:
        row = re.search(rf"^\| \[`{name}`\]\[[\w.]+\] \| .* \| (\S+) \|$", text, re.M)
        assert row, f"no table row for F.{name}"
        expected = str(orders[name]) if name in orders else "no spec"
        assert row.group(1) == expected, f"F.{name}: order {row.group(1)}, spec {expected}"


def test_each_family_page_lists_its_module_all(pages) -> None:
    for module in F.FAMILIES:
        slug = module.__name__.rsplit(".", 1)[1]
        page = reference.family_page(slug)
        text = pages[f"api/functions/{page}.md"]
        for name in module.__all__:
            assert f"::: {module.__name__}.{name}\n" in text or f".{name}\n" in text, name
        assert f"]({page}.md)" in pages["api/functions/index.md"]


def test_linear_algebra_is_one_page(pages) -> None:
    assert "api/functions/decomposition.md" not in pages
    text = pages["api/functions/linalg.md"]
    assert text.startswith("# Linear algebra\n")
    for name in ("matmul", "einsum", "solve", "eigh", "svd"):
        assert f".{name}\n" in text, name
    titles = re.findall(r"^\| \[([^\]]+)\]\(", pages["api/functions/index.md"], re.M)
    assert len(titles) == len(set(titles)), titles
    assert not any(t.endswith(" II") for t in titles)


def test_the_hd_reference_opens_with_the_derivatives(pages) -> None:
    blocks = re.findall(r"^::: (\S+)$", pages["api/hodiff.md"], re.M)
    first = [n for n in reference.HD_FIRST if n in hd.__all__]
    assert [b.rsplit(".", 1)[1] for b in blocks[: len(first)]] == first
    assert first[:3] == ["grad", "hvp", "laplacian"]
    for name in first:
        assert sum(b.rsplit(".", 1)[1] == name for b in blocks) == 1, name


def test_every_present_toolkit_module_gets_a_page_with_its_all(pages) -> None:
    assert "hodiff.scipy" in reference.toolkit_modules()
    assert "hodiff.testing" in reference.toolkit_modules()
    blocks = _blocks(pages)
    for module_name in reference.toolkit_modules():
        page = f"api/{module_name.removeprefix('hodiff.')}.md"
        assert page in pages, f"{module_name} has no reference page"
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not isinstance(obj, types.ModuleType):
                assert any(_resolve(b) is obj for b in blocks), f"{module_name}.{name}"


def test_a_toolkit_module_appears_when_it_exists(monkeypatch) -> None:
    monkeypatch.setattr(reference, "TOOLKIT_MODULES", ("hodiff.scipy", "hodiff.not_written_yet"))
    assert reference.toolkit_modules() == ["hodiff.scipy"]
    pages = reference.reference_pages()
    assert "api/scipy.md" in pages
    assert "api/not_written_yet.md" not in pages


def test_the_nav_holds_every_page_of_docs_once(pages) -> None:
    nav = reference.nav(DOCS, pages)

    def flatten(items):
        for item in items:
            if isinstance(item, dict):
                for value in item.values():
                    yield from flatten(value if isinstance(value, list) else [value])
            else:
                yield item

    entries = list(flatten(nav))
    assert len(entries) == len(set(entries)), "a page is twice in the nav"
    for page in sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")):
        if page in reference.OFF_SITE:
            assert page not in entries, f"docs/{page} is off the site but in the nav"
            continue
        assert page in entries, f"docs/{page} is not in the nav (docsgen/reference.py)"
    for entry in entries:
        assert (DOCS / entry).exists() or entry in pages, f"nav entry {entry} has no page"
    groups = _groups()
    every = [page for group in groups for page in group]
    assert len(every) == len(set(every)), "a page is listed twice in docsgen/reference.py"


def _groups() -> tuple[tuple[str, ...], ...]:
    return (
        reference.GETTING_STARTED,
        reference.GUIDES,
        reference.PERFORMANCE,
        reference.DESIGN,
        reference.PROJECT,
        reference.OFF_SITE,
    )


def test_the_nav_puts_tasks_first_then_the_reference(pages) -> None:
    titles = [next(iter(item)) for item in reference.nav(DOCS, pages)]
    assert titles[:4] == ["Home", "Getting started", "Guides", "API reference"]
    assert titles.index("Design notes") > titles.index("API reference")


def test_the_site_publishes_one_function_reference() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    exclude = config.split("exclude_docs: |", 1)[1].split("\n\n", 1)[0]
    for page in reference.OFF_SITE:
        assert page in exclude.split(), f"{page} is off the site: list it in exclude_docs"


def test_a_new_tutorial_is_appended_to_the_nav(tmp_path) -> None:
    for name in ("index.md", "quickstart.md", "brand_new.md", "functions.md"):
        (tmp_path / name).write_text(f"# {name}\n")
    nav = reference.nav(tmp_path, [])
    guides = next(item["Guides"] for item in nav if "Guides" in item)
    assert guides == ["brand_new.md"]  # functions.md is off the site
    assert {"Getting started": ["quickstart.md"]} in nav


def test_the_readme_pages_are_in_the_nav(pages) -> None:
    listed = {page for group in _groups() for page in group}
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("- `docs/"):
            assert line.split("`")[1].removeprefix("docs/") in listed, line


@pytest.mark.parametrize(
    ("span", "is_math"),
    [
        ("y = ln(1 + x)", True),
        ("|x| <= 1", True),
        ("y[n, m] = sum_k x[n, k] w[k, m] + b[m]", True),
        ("y.shape = x.shape[:axis]", False),  # attribute access: code
        ("batch_dims = 0", False),  # a Python identifier: code
        ("F.sum(x, axis=1)", False),
        ("y = numpy.einsum(subscripts, *xs)", False),
        ("x.shape", False),
        ("(N, C)", False),
    ],
)
def test_which_spans_are_formulas(span: str, is_math: bool) -> None:
    assert reference.is_formula(span) is is_math


def test_formulas_become_asciimath_that_markdown_cannot_touch() -> None:
    assert reference.to_asciimath("y = x0 ** x1") == "y = x_0^(x_1)"
    assert reference.to_asciimath("y = (e^x + e^-x) / 2") == "y = (e^x + e^(-x)) / 2"
    assert reference.to_asciimath("y = arccosh(x0 / x1)") == 'y = "arccosh"(x_0 / x_1)'
    assert reference.to_asciimath("y = x * sigmoid(x)") == 'y = x cdot "sigmoid"(x)'
    assert reference.to_asciimath("y = sqrt(x)") == "y = sqrt(x)"
    assert reference.to_asciimath("digamma = psi(x) = d/dx log Gamma(x)") == (
        '"digamma" = psi(x) = d/"dx" log Gamma(x)'
    )
    assert reference.to_asciimath("y = x ** val + count_j") == 'y = x^("val") + "count"_j'
    html = reference.math_html("y = |x_1 * x_2|")
    assert html.startswith('<span class="arithmatex">&#96;')
    assert html.endswith("&#96;</span>")
    inner = html[len('<span class="arithmatex">') : -len("</span>")]
    for raw in "*_|`[]":
        assert raw not in inner, f"{raw!r} would be read by Markdown"


def test_docstrings_are_rewritten_for_the_site_only() -> None:
    doc = inspect.getdoc(F.exp) or ""
    site = reference.transform_docstring(doc)
    assert "``y = e^x``" in doc  # help() and doctests read it as written
    assert "``y = e^x``" not in site
    assert "arithmatex" in site
    assert "```pycon\n>>> import numpy as np" in site
    assert site.count("```") == 2
    code = reference.transform_docstring("Shape ``x.shape``; ``y = x`` here.")
    assert "``x.shape``" in code
    assert "arithmatex" in code


def test_mkdocs_config_points_at_existing_files() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "docsgen/hooks.py" in config
    assert (ROOT / "docsgen" / "hooks.py").exists()
    assert "docsgen/griffe_math.py" in config
    assert (ROOT / "docsgen" / "griffe_math.py").exists()
    assert (DOCS / "javascripts" / "mathjax.js").exists()
    assert "strict: true" in config


def test_rest_math_directives_become_display_math() -> None:
    one = reference.transform_docstring("Elman.\n\n.. math:: h_t = \\tanh(W x)\n\nwith act")
    assert '<div class="arithmatex">\\[h_t = \\tanh(W x)\\]</div>' in one
    assert ".. math" not in one
    rows = reference.transform_docstring(
        "LSTM:\n\n.. math::\n    i_t &= a \\\\\n    c_t &= b.\n\nArgs:\n    x: input."
    )
    assert "\\begin{aligned} i_t &amp;= a \\\\ c_t &amp;= b. \\end{aligned}" in rows
    assert rows.rstrip().endswith("Args:\n    x: input.")


def test_eliding_doctests_show_their_real_output_on_the_site() -> None:
    from docsgen import outputs

    page = (
        "Text.\n\n```python\n>>> import math\n"
        ">>> print(f'pi = {math.pi:.6f}')  # doctest: +ELLIPSIS\npi = ...\n"
        ">>> 1 + 1\n2\n>>> math.sqrt(-1)  # doctest: +ELLIPSIS\n"
        "Traceback (most recent call last):\n...\nValueError: ...\n\n```\n"
    )
    out = outputs.fill_outputs(page)
    assert "pi = 3.141593\n>>> 1 + 1\n2\n" in out
    assert "Traceback (most recent call last):\n  ...\nValueError: math domain error\n" in out
    assert not outputs.elided_rows(out)
    assert outputs.fill_outputs("No examples.\n") == "No examples.\n"
    with pytest.raises(RuntimeError, match="line 1: the example"):
        outputs.fill_outputs(">>> print(1)  # doctest: +ELLIPSIS\n2...\n")


def test_the_checking_page_shows_real_reports() -> None:
    from docsgen import outputs

    assert "checking.md" in outputs.REAL_OUTPUTS
    source = (DOCS / "checking.md").read_text()
    assert outputs.elided_rows(source), "the page's source elides numbers (its doctests)"
    shown = outputs.fill_outputs(source, "checking.md")
    assert not outputs.elided_rows(shown), outputs.elided_rows(shown)
    assert re.search(r"^    0     1        2   \d\.\d\de-\d\d", shown, re.M)
