"""A griffe extension: docstrings as the site shows them (formulas as math, doctests fenced).

Loaded by mkdocstrings (``extensions: [docsgen/griffe_math.py]`` in mkdocs.yml); the rewrite
is ``docsgen.reference.transform_docstring``, tested without mkdocs.
"""

from __future__ import annotations

from typing import Any

import griffe

from docsgen.reference import transform_docstring


class FormulasAsMath(griffe.Extension):
    """Rewrites every hodiff docstring before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and obj.path.startswith("hodiff"):
            obj.docstring.value = transform_docstring(obj.docstring.value)
