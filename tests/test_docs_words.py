"""What the pages say to a reader: no tracker words, and install commands that work.

hodiff is not on a package index, so ``pip install 'hodiff[scipy]'`` finds nothing (or
someone else's package): every install command, in the docs, the README, the examples and
hodiff's own messages, is the from-source form ``pip install -e ".[scipy]"``. And the pages
are written for users, not for the people who built them: no "issue 22", "session 7" or
"Tier-4". These tests read the sources and need nothing installed.
"""

from __future__ import annotations

import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The words of a tracker: an issue or a session of work, a tier of functions. A page says what
# a thing does and why, not which ticket brought it.
TRACKER = re.compile(r"\bTier-?\d|\b(issues?|sessions?|tiers?)\b", re.IGNORECASE)
# An install of hodiff by name with extras: 'hodiff[scipy]', "hodiff[mpi]", hodiff[plot].
INDEX_INSTALL = re.compile(r"""['"]?\bhodiff\[""")


def tracker_words(text: str) -> list[tuple[int, str]]:
    """(line, word) of every tracker word of a page."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in TRACKER.finditer(text)]


def index_installs(text: str) -> list[int]:
    """Lines that install hodiff from an index with extras (``hodiff[...]``)."""
    return [text.count("\n", 0, m.start()) + 1 for m in INDEX_INSTALL.finditer(text)]


def python_strings(source: str) -> str:
    """Every string literal (docstrings and f-strings included) of a Python source, one a line."""
    out = []
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            out.append(tok.string)
    return "\n".join(out)


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.rglob("*.md")))
def test_no_page_uses_tracker_words(page: str) -> None:
    found = tracker_words((DOCS / page).read_text(encoding="utf-8"))
    assert not found, f"docs/{page}: tracker words at (line, word) {found}"


def test_no_install_command_names_hodiff_with_extras() -> None:
    bad: list[str] = []
    texts = [*DOCS.rglob("*.md"), ROOT / "README.md"]
    for path in texts:
        bad += [f"{path.relative_to(ROOT)}:{n}" for n in index_installs(path.read_text())]
    for path in sorted([*(ROOT / "examples").rglob("*.py"), *(ROOT / "hodiff").rglob("*.py")]):
        strings = python_strings(path.read_text(encoding="utf-8"))
        if index_installs(strings):
            bad.append(str(path.relative_to(ROOT)))
    assert not bad, f'install from the checkout, pip install -e ".[extra]": {bad}'


def test_the_checks_catch_what_they_are_for() -> None:
    assert tracker_words("Fixed in issue 22 (session 7).") == [(1, "issue"), (1, "session")]
    assert tracker_words("The Tier-4 functions") == [(1, "Tier-4")]
    assert tracker_words("tissue, sessional, frontier") == []
    assert index_installs("pip install 'hodiff[scipy]'\npip install hodiff[mpi]") == [1, 2]
    assert index_installs('pip install -e ".[scipy]"') == []
    source = (
        'def f():\n    """Needs it."""\n    raise ImportError("pip install \'hodiff[plot]\'")\n'
    )
    assert index_installs(python_strings(source))
    assert index_installs(python_strings("x = a[1]  # hodiff[plot] in a comment\n")) == []
