"""The docs site as a reader sees it (issue 21): code blocks, tables, the copy button, the
install command, the performance chart, and what the examples write.

The built-site tests parse the HTML of ``mkdocs build``: the site CI built (its directory in
``HODIFF_SITE_DIR``, .ci/run), or one built here when mkdocs is importable; else they skip.
The other tests read the sources and need nothing.
"""

from __future__ import annotations

import html.parser
import importlib.util
import inspect
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import pytest

import hodiff.functions as F
from hodiff.tools import docgen

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


# ---------------------------------------------------------------------------- the built site
class _Page(html.parser.HTMLParser):
    """The parts of a page the tests read: code blocks, block quotes, table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.pre: list[str] = []  # the text of each <pre>
        self.blockquotes: list[str] = []
        self.rows: list[str] = []  # the text of each <tr>
        self._stack: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("pre", "blockquote", "tr"):
            self._stack.append((tag, []))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                _, parts = self._stack.pop(i)
                text = "".join(parts)
                {"pre": self.pre, "blockquote": self.blockquotes, "tr": self.rows}[tag].append(text)
                for _, outer in self._stack:
                    outer.append(text)
                return

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1][1].append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    given = os.environ.get("HODIFF_SITE_DIR")
    if given:
        return pathlib.Path(given)
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs is not installed here (the docs extra); CI tests the site it builds")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=900,
    )
    return out


class _Prose(html.parser.HTMLParser):
    """The text a reader sees as prose: everything outside code, scripts and the elements
    MathJax typesets (class ``arithmatex``, where formula markup belongs).
    """

    SKIP = frozenset({"pre", "code", "script", "style", "textarea"})
    VOID = frozenset({"br", "img", "input", "meta", "link", "hr", "source", "wbr", "col"})

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self._stack: list[tuple[str, bool]] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = tag in self.SKIP or "arithmatex" in classes
        self._stack.append((tag, skip))
        self._skipping += skip

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                self._skipping -= sum(skip for _, skip in self._stack[i:])
                del self._stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.text.append(data)


# Formula markup that only MathJax should read: TeX delimiters and commands, $$ blocks, inline
# $...$, and reST's math directive. Outside an arithmatex element it shows as raw text.
_RAW_MATH = re.compile(r"\$\$|\\[A-Za-z]+|\\[()\[\]]|\$[^$\s][^$\n]*\$|\.\. math::?")


def unrendered_math(page_html: str) -> list[str]:
    """Pieces of formula markup in a page's prose (outside code and MathJax's elements)."""
    prose = _Prose()
    prose.feed(page_html)
    text = "".join(prose.text)
    return [text[max(0, m.start() - 30) : m.end() + 30] for m in _RAW_MATH.finditer(text)]


def test_unrendered_math_is_found_where_it_would_show() -> None:
    assert unrendered_math("<p>the sum $$\\sum_i x_i$$ here</p>")
    assert unrendered_math("<p>.. math: h_t = x</p>")
    assert unrendered_math("<p>a \\frac{1}{2} b</p>")
    assert not unrendered_math('<p>a <span class="arithmatex">\\(\\frac{1}{2}\\)</span> b</p>')
    assert not unrendered_math("<pre><code>x = r'\\frac'</code></pre><p>costs $5</p>")


def test_no_page_shows_unrendered_formula_markup(site) -> None:
    found = {}
    for path in sorted(site.rglob("*.html")):
        if "javascripts" in path.parts:
            continue
        raw = unrendered_math(path.read_text(encoding="utf-8"))
        if raw:
            found[str(path.relative_to(site))] = raw[:3]
    assert not found, f"formula markup outside MathJax's elements: {found}"


def test_formulas_are_typeset_the_same_way_on_narrative_and_api_pages(site) -> None:
    for name in ("taylor.html", "hvp.html", "api/functions/math.html"):
        text = (site / name).read_text(encoding="utf-8")
        assert 'class="arithmatex"' in text, f"{name}: no formula for MathJax"
    assert (site / "javascripts" / "mathjax" / "tex-mml-chtml.js").exists()  # offline


# Mathematics written as code where the page should typeset it: a power or transpose (h^3, J^T),
# an indexed sum (sum_i), an inner product <J v, u>, a function of maths applied to a formula
# (sin(pi x), not a call with keywords), pi, a derivative d/dx or dS/dz, J v and H v, a norm
# ||x||. A small list: enough to keep a page from drifting back to code-span formulas.
_MATH_IN_CODE = re.compile(
    r"(?<![\w.])[A-Za-z]\w*\^[\w({-]"
    r"|(?<![\w.])sum_[a-z]\b"
    r"|<[^<>`]*\b[A-Za-z]\b[^<>`]*,[^<>`]*>"
    r"|(?<![\w.])(?:sin|cos|tanh|exp|log|sqrt|trace)\((?![^)]*=)"
    r"|(?<![\w.])pi\b"
    r"|(?<![\w.])d\w*\s?/\s?d\w"
    r"|(?<![\w.])[JH] [uvx]\b"
    r"|\|\|"
)
# The pages of measured workloads name the code each workload runs (an expression of F calls).
_CODE_FORMULA_PAGES = frozenset({"performance", "compile"})


class _InlineCode(html.parser.HTMLParser):
    """The text of every inline ``<code>`` (one not inside a ``<pre>``) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[str] = []
        self._pre = 0
        self._code: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "pre":
            self._pre += 1
        elif tag == "code" and not self._pre:
            self._code = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._pre -= 1
        elif tag == "code" and self._code is not None:
            self.spans.append("".join(self._code))
            self._code = None

    def handle_data(self, data: str) -> None:
        if self._code is not None:
            self._code.append(data)


def maths_in_code(spans: list[str]) -> list[str]:
    """The code spans that hold a formula (``_MATH_IN_CODE``)."""
    return [s for s in spans if _MATH_IN_CODE.search(s)]


def _markdown_code_spans(text: str) -> list[str]:
    """A Markdown page's inline code spans, outside fenced blocks and ``$...$`` formulas."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", "", text)
    spans = re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, flags=re.S)
    return [m.group(2).strip() for m in spans]


def test_maths_in_code_is_found_and_code_is_not() -> None:
    maths = ["J^T u", "sum_i d^2 f / dx_i^2", "<J v, u>", "sin(pi x)", "trace(S^T H S)", "J v"]
    maths += ["-Laplace(u) = 2 pi^2 f", "||g|| - 1", "dS/dz", "h^3", "e^-x"]
    code = ["F.sin(x)", "np.pi * x", "sum_pooling", "hd.jvp(f, x, v)", "x.shape", "seed >= 0"]
    code += ["trace(loss, params, n_samples=100)", "F.tanh(x)", "a[0]", "(N, D, R)", "1e-4"]
    assert maths_in_code(maths) == maths
    assert maths_in_code(code) == []
    page = _InlineCode()
    page.feed("<p><code>J^T u</code> and <code>F.sum</code></p><pre><code>x^2</code></pre>")
    assert page.spans == ["J^T u", "F.sum"]
    assert _markdown_code_spans("`a^2` and $`b^2`$\n```\n`c^2`\n```\n") == ["a^2"]
    assert _markdown_code_spans("``u u^T`` and `` `x` ``") == ["u u^T", "`x`"]


def test_no_narrative_page_writes_maths_as_code() -> None:
    found = {}
    for path in sorted(DOCS.glob("*.md")):
        if path.stem in _CODE_FORMULA_PAGES or path.name == "functions.md":
            continue  # functions.md: the plain-text table for readers of the repository
        spans = maths_in_code(_markdown_code_spans(path.read_text(encoding="utf-8")))
        if spans:
            found[path.name] = spans[:4]
    assert not found, f"write these as $...$ formulas: {found}"


def test_no_narrative_page_of_the_site_shows_maths_as_code(site) -> None:
    found = {}
    for path in sorted(site.glob("*.html")):  # the narrative pages (the API under api/)
        if path.stem in _CODE_FORMULA_PAGES or path.stem in ("404", "functions"):
            continue
        page = _InlineCode()
        page.feed(path.read_text(encoding="utf-8"))
        if maths_in_code(page.spans):
            found[path.name] = maths_in_code(page.spans)[:4]
    assert not found, f"formulas in code spans: {found}"


def test_long_code_lines_wrap_instead_of_being_cut() -> None:
    css = re.sub(r"/\*.*?\*/", "", (DOCS / "stylesheets" / "extra.css").read_text(), flags=re.S)
    rule = re.search(r"\.md-typeset pre > code\s*\{([^}]*)\}", css)
    assert rule, "no rule for the site's code blocks"
    assert re.search(r"white-space:\s*pre-wrap", rule.group(1))


def _page(site: pathlib.Path, name: str) -> _Page:
    page = _Page()
    page.feed((site / name).read_text(encoding="utf-8"))
    return page


def test_the_quickstart_retain_grad_example_is_a_code_block(site) -> None:
    page = _page(site, "quickstart.html")
    assert any("backward(retain_grad=True)" in p for p in page.pre), "not in a code block"
    for quote in page.blockquotes:
        assert ">>>" not in quote, f"a block quote: {quote!r}"
        assert "retain_grad" not in quote, f"a block quote: {quote!r}"


def test_no_table_on_the_site_shows_an_escaped_pipe(site) -> None:
    for path in sorted(site.rglob("*.html")):
        if "javascripts" in path.parts:
            continue
        for row in _page(site, str(path.relative_to(site))).rows:
            assert "\\|" not in row, f"{path.relative_to(site)}: {row.strip()[:120]!r}"
    rows = _page(site, "api/functions/arithmetic.html").rows
    abs_row = next(r for r in rows if r.strip().startswith("abs"))
    assert "y = |x|" in abs_row


def test_the_family_tables_show_whole_piecewise_definitions(site) -> None:
    rows = _page(site, "api/functions/activation.html").rows
    elu = next(r for r in rows if r.strip().startswith("elu"))
    assert "otherwise" in elu, elu
    assert "alpha" in elu, elu


def test_site_code_blocks_show_no_doctest_directives(site) -> None:
    for name in ("pitfalls.html", "api/functions/loss.html", "api/hodiff.html"):
        for block in _page(site, name).pre:
            assert "doctest:" not in block, f"{name}: {block[:200]!r}"


# ---------------------------------------------------------------------------- the sources
def _unfenced_prompts(text: str) -> list[int]:
    fenced, lines = False, []
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif line.startswith(">>>") and not fenced:
            lines.append(i)  # Markdown reads ">>>" as three nested block quotes
    return lines


def test_every_doctest_of_the_docs_is_in_a_fence() -> None:
    for path in sorted(DOCS.rglob("*.md")):
        assert not _unfenced_prompts(path.read_text()), f"{path.name}: lines ..."
    assert _unfenced_prompts("text\n\n>>> x = 1\n") == [3]


def test_the_function_table_escapes_no_pipe_with_a_backslash() -> None:
    text = (DOCS / "functions.md").read_text()
    assert "\\|" not in text
    assert "| `abs` | 3 | <code>y = &#124;x&#124;</code>;" in text
    assert docgen.table_cell("``y = |x|`` for a|b") == "<code>y = &#124;x&#124;</code> for a&#124;b"
    assert docgen.table_cell("``sign(x)``") == "``sign(x)``"


def test_the_function_table_gives_the_whole_first_paragraph() -> None:
    text = (DOCS / "functions.md").read_text()
    elu = next(line for line in text.splitlines() if line.startswith("| `elu` |"))
    assert "otherwise" in elu
    huber = next(line for line in text.splitlines() if line.startswith("| `huber_loss` |"))
    assert "elsewhere" in huber  # the docstring's second line


def test_the_family_table_cell_keeps_every_piece() -> None:
    pytest.importorskip("scipy")  # docsgen.reference reads the spec table
    from docsgen import reference

    pages = reference.reference_pages()
    row = next(
        line
        for line in pages["api/functions/activation.md"].splitlines()
        if line.startswith("| [`elu`]")
    )
    assert "otherwise" in row
    assert "alpha" in row
    cell = reference.definition_cell(F.huber_loss)
    assert "|" not in cell.replace("&#124;", "")


def test_the_site_highlights_doctests_as_a_console_without_directives() -> None:
    pytest.importorskip("scipy")
    from docsgen import reference

    page = "Text\n\n```python\n>>> f(x)  # doctest: +ELLIPSIS\n1\n\n```\n\n```python\nx = 1\n```\n"
    out = reference.page_markdown(page)
    assert "```pycon\n>>> f(x)\n1\n" in out
    assert "doctest" not in out
    assert "```python\nx = 1\n```" in out  # code without prompts stays Python
    doc = reference.transform_docstring("Sum.\n\n>>> F.sum(x)  # doctest: +SKIP\n3\n")
    assert "doctest" not in doc
    assert ">>> F.sum(x)\n3" in doc


def test_the_copy_button_leaves_prompts_and_outputs_out() -> None:
    css = re.sub(r"/\*.*?\*/", "", (DOCS / "stylesheets" / "extra.css").read_text(), flags=re.S)
    rule = re.search(r"([^{}]*)\{\s*display:\s*none;\s*\}", css)
    assert rule, "no rule hiding prompts while copying"
    selectors = {s.strip() for s in rule.group(1).split(",")}
    assert ".highlight code[data-md-copying] .gp" in selectors  # >>> and ...
    assert ".highlight code[data-md-copying] .go" in selectors  # outputs


def test_the_home_page_installs_as_the_readme_does() -> None:
    readme = (ROOT / "README.md").read_text()
    home = (DOCS / "index.md").read_text()
    assert "pip install . && python -m hodiff demo" in readme
    assert "pip install . && python -m hodiff demo" in home
    assert "pip install hodiff" not in home  # not on PyPI


def test_the_performance_chart_fits_the_text_column() -> None:
    with (DOCS / "performance.png").open("rb") as f:
        header = f.read(24)
    width, height = struct.unpack(">II", header[16:24])
    # drawn for the column (about 770 px for 7 inches at 110 dpi): text stays readable
    assert width <= 800, f"docs/performance.png is {width} px wide"
    assert height > width  # one row per workload


def test_the_performance_chart_is_drawn_for_the_column(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    import json

    from bench import report

    result = json.loads((DOCS / "performance.json").read_text())
    out = tmp_path / "chart.png"
    assert report.plot(result, out)
    width = struct.unpack(">I", out.read_bytes()[16:20])[0]
    assert width <= 800


# ---------------------------------------------------------------------------- the examples
def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_no_example_writes_into_docs_img_by_default() -> None:
    for path in sorted((ROOT / "examples").glob("*.py")):
        module = _example(path.stem)
        main = getattr(module, "main", None)
        if main is None:
            continue
        for p in inspect.signature(main).parameters.values():
            if isinstance(p.default, str):
                assert "docs" not in p.default, f"{path.name}: main({p.name}={p.default!r})"
        source = path.read_text()
        for m in re.finditer(r"add_argument\(([^)]*)\)", source):
            assert 'default="docs' not in m.group(1), f"{path.name}: {m.group(0)}"


def test_graph_pictures_writes_into_the_cwd_and_says_how_to_render_dot(
    tmp_path, monkeypatch, capsys
) -> None:
    module = _example("graph_pictures")
    before = {p.name: p.stat().st_mtime_ns for p in (DOCS / "img").iterdir()}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no Graphviz
    paths = module.main(verbose=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp_forward.dot", "mlp_gradient.dot"]
    assert all(p.resolve().parent == tmp_path.resolve() for p in paths)
    out = capsys.readouterr().out
    assert "Graphviz" in out
    assert "dot -Tpng mlp_forward.dot -o mlp_forward.png" in out
    assert {p.name: p.stat().st_mtime_ns for p in (DOCS / "img").iterdir()} == before


def test_the_short_mpi_wgan_run_says_it_is_short(capsys) -> None:
    from hodiff.distributed import Communicator

    module = _example("wgan_gp_mpi")
    module.main(steps=2, batch=8, n_critic=1, width=8, comm=Communicator.single_process())
    out = capsys.readouterr().out
    assert "a short run (2 generator steps)" in out
    assert "--steps 2000" in out
    module.main(
        steps=2, batch=8, n_critic=1, width=8, verbose=False, comm=Communicator.single_process()
    )
    assert "short run" not in capsys.readouterr().out


def test_the_checking_page_shows_real_reports(site) -> None:
    from docsgen import outputs

    blocks = "\n".join(_page(site, "checking.html").pre)
    assert "gradcheck passed" in blocks
    assert not outputs.elided_rows(blocks), outputs.elided_rows(blocks)[:3]
    assert re.search(r"max abs err \d\.\de-\d\d", blocks)  # check_function's report
