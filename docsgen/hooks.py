"""mkdocs hooks: the generated nav and API pages, and a local copy of MathJax.

- ``on_config``: the nav is ``docsgen.reference.nav`` (listed pages in order, any other page of
  docs/ appended to the tutorials), so a new tutorial is published without editing mkdocs.yml.
- ``on_page_markdown``: doctest blocks highlighted as a console, without their ``# doctest:``
  directives (``docsgen.reference.page_markdown``); on the pages of
  ``docsgen.outputs.REAL_OUTPUTS`` the examples run first and elided outputs (``...``) are
  replaced by what they print (``docsgen.outputs.fill_outputs``).
- ``on_files``: the API reference pages of ``docsgen.reference.reference_pages`` are added as
  generated files (nothing is written into docs/, which pytest doctests), and MathJax 3 is
  copied into the site, so pages render their formulas offline. The files come from the
  ``sphinx-mathjax-offline`` wheel of the ``docs`` extra: MathJax 3.2.2 as released, packaged
  for documentation sites that must work without a CDN (nothing of Sphinx runs here; only its
  ``static/mathjax`` folder is read).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def _on_path() -> None:
    """docsgen and this checkout's hodiff importable whatever the cwd (mkdocs restores
    sys.path after loading a hook, so this runs again in on_config).
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


_on_path()

from docsgen import outputs, reference  # noqa: E402

_PAGES: dict[str, str] = {}
MATHJAX_DIR = "javascripts/mathjax"
# MathJax 3 files the pages load: the TeX/MathML component, AsciiMath input, CHTML fonts, menu.
_MATHJAX_PARTS = (
    "tex-mml-chtml.js",
    "input/asciimath.js",
    "output/chtml",
    "ui",
    "a11y",
    "adaptors",
)


def _pages() -> dict[str, str]:
    if not _PAGES:
        _PAGES.update(reference.reference_pages())
    return _PAGES


def on_config(config: Any, **kwargs: Any) -> Any:
    _on_path()
    config["nav"] = reference.nav(config["docs_dir"], _pages())
    return config


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri in outputs.REAL_OUTPUTS:
        markdown = outputs.fill_outputs(markdown, page.file.src_uri)
    return reference.page_markdown(markdown)


def _mathjax_root() -> Path:
    """The MathJax 3 distribution (``tex-mml-chtml.js`` and its components) of the docs extra."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("sphinx-mathjax-offline")
    except PackageNotFoundError as e:
        raise RuntimeError(
            'the site needs MathJax from the docs extra: pip install -e ".[docs]"'
        ) from e
    return Path(str(dist.locate_file("sphinx-mathjax-offline/static/mathjax")))


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for path, text in _pages().items():
        files.append(File.generated(config, path, content=text))
    root = _mathjax_root()
    for part in _MATHJAX_PARTS:
        source = root / part
        for f in [source] if source.is_file() else sorted(source.rglob("*")):
            if f.is_file():
                dest = f"{MATHJAX_DIR}/{f.relative_to(root).as_posix()}"
                files.append(File.generated(config, dest, abs_src_path=str(f)))
    return files
