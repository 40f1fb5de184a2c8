"""Real outputs on the site: a doctest whose expected output elides what varies (``...`` under
``# doctest: +ELLIPSIS``: error sizes, timings) is shown with what the example prints when the
site is built.

The page's file keeps its ellipses, so its doctests pass on any machine (pytest runs them); the
site shows a real report, made by running the page's examples in order, as pytest does. An
elided output that the example does not produce stops the build: the page would show a report
its own example contradicts.

Plain Python (no mkdocs): ``docsgen/hooks.py`` calls it for the pages of ``REAL_OUTPUTS``, and
``tests/test_docs_site.py`` tests it without the docs extra.
"""

from __future__ import annotations

import doctest
import re
import traceback
from typing import Any

# Pages whose examples run when the site is built, to show their real output.
REAL_OUTPUTS: tuple[str, ...] = ("checking.md",)

_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_TRACEBACK = "Traceback (most recent call last):"


class _Recorder(doctest.DocTestRunner):
    """Runs a page's examples and keeps what each printed."""

    def __init__(self) -> None:
        super().__init__(optionflags=_FLAGS, verbose=False)
        self.got: dict[int, str] = {}
        self.failed: list[tuple[doctest.Example, str]] = []

    def report_start(self, out: Any, test: Any, example: Any) -> None:
        pass

    def report_success(self, out: Any, test: Any, example: doctest.Example, got: str) -> None:
        self.got[id(example)] = got

    def report_failure(self, out: Any, test: Any, example: doctest.Example, got: str) -> None:
        self.got[id(example)] = got
        self.failed.append((example, got))

    def report_unexpected_exception(
        self, out: Any, test: Any, example: doctest.Example, exc_info: Any
    ) -> None:
        self.failed.append((example, "".join(traceback.format_exception(*exc_info))))


def _shown(want: str, got: str) -> str:
    """What the site shows for an example: its output, or for an expected exception the
    traceback's header, an elision for the frames (they name files of this machine), and the
    exception with its whole message.
    """
    if not want.startswith(_TRACEBACK):
        return got
    lines = got.splitlines()
    first = next((i for i, line in enumerate(lines[1:], 1) if not line.startswith(" ")), 1)
    return "\n".join([_TRACEBACK, "  ...", *lines[first:]]) + "\n"


def _elides(example: doctest.Example) -> bool:
    return bool(example.options.get(doctest.ELLIPSIS)) and "..." in example.want


def fill_outputs(markdown: str, name: str = "page") -> str:
    """``markdown`` with the output of every eliding doctest replaced by the real one.

    Raises:
        RuntimeError: an eliding example printed something its expected output does not match,
            or raised unexpectedly (run ``pytest docs/<page>``).
    """
    test = doctest.DocTestParser().get_doctest(markdown, {"__name__": "__main__"}, name, name, 0)
    if not any(_elides(ex) for ex in test.examples):
        return markdown
    runner = _Recorder()
    runner.run(test, out=lambda text: None, clear_globs=True)
    # An example that does not elide may fail here (an optional package the docs extra lacks,
    # such as hypothesis): pytest checks it. What the site shows must be right.
    wrong = [(ex, got) for ex, got in runner.failed if _elides(ex)]
    if wrong:
        ex, got = wrong[0]
        raise RuntimeError(
            f"{name}, line {ex.lineno + 1}: the example {ex.source.strip()!r} printed\n{got}"
            f"where the page expects\n{ex.want}"
        )
    lines = markdown.splitlines(keepends=True)
    for ex in reversed(test.examples):
        if not _elides(ex) or id(ex) not in runner.got:
            continue
        start = ex.lineno + ex.source.count("\n")
        stop = start + ex.want.count("\n")
        shown = _shown(ex.want, runner.got[id(ex)])
        pad = " " * ex.indent
        lines[start:stop] = [pad + line if line.strip() else line for line in _keep_ends(shown)]
    return "".join(lines)


def _keep_ends(text: str) -> list[str]:
    out = text.splitlines(keepends=True)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    return out


_ELIDED_ROW = re.compile(r"\S\s+\.\.\.\s")


def elided_rows(text: str) -> list[str]:
    """Lines of a shown output where a value is still elided (``2   ...  pass``)."""
    return [
        line
        for line in text.splitlines()
        if _ELIDED_ROW.search(line) and not line.startswith("...")
    ]
