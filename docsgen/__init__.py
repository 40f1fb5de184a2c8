"""Builds the documentation site: the API reference pages, the nav and the math.

``docsgen.reference`` is plain Python (it imports hodiff, never mkdocs), so the tests check
what it generates without the ``docs`` extra; ``docsgen.hooks`` (mkdocs hooks) and
``docsgen.griffe_math`` (a griffe extension) are used only by ``mkdocs build``.
"""
