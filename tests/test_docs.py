"""Documentation: every public function has a docstring with its formula; docs pages exist."""

from __future__ import annotations

import pathlib

import pytest

import hodiff as hd
import hodiff.functions as F

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", F.__all__)
def test_every_function_has_a_docstring_with_a_formula(name: str) -> None:
    doc = (getattr(F, name).__doc__ or "").strip()
    assert len(doc) >= 40, f"F.{name} needs a docstring with its formula and shapes"
    assert "=" in doc or "->" in doc or "(" in doc, f"F.{name}: no formula in the docstring"


@pytest.mark.parametrize("name", [n for n in hd.__all__ if callable(getattr(hd, n))])
def test_every_top_level_callable_is_documented(name: str) -> None:
    assert (getattr(hd, name).__doc__ or "").strip(), f"hd.{name} has no docstring"


def test_readme_links_existing_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    for line in readme.splitlines():
        if line.startswith("- `docs/"):
            page = line.split("`")[1]
            assert (ROOT / page).exists(), page


def test_function_reference_lists_every_function_with_its_checked_order() -> None:
    from hodiff.testing import all_specs, complex_specs

    best: dict[str, int] = {}
    for s in all_specs() + complex_specs():
        best[s.fn.__name__] = max(best.get(s.fn.__name__, 0), s.order)
    text = (ROOT / "docs" / "functions.md").read_text()
    for name in F.__all__:
        row = f"| `{name}` | {best[name]} |"
        assert row in text, f"docs/functions.md: update the row of {name}"


def test_function_reference_is_generated_from_specs_and_docstrings() -> None:
    from hodiff.tools.docgen import function_reference

    text = (ROOT / "docs" / "functions.md").read_text()
    assert text == function_reference(), "docs/functions.md is stale: run python -m hodiff docs"
