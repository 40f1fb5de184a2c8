"""The spec table: every module here defines ``SPECS``, a list of :class:`hodiff.testing.Spec`."""

from __future__ import annotations

import importlib
import pkgutil

from hodiff.testing.spec import Spec


def _rows() -> list[Spec]:
    specs: list[Spec] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        specs.extend(module.SPECS)
    return specs


def all_specs() -> list[Spec]:
    """Every real row of the table (the complex rows are :func:`complex_specs`)."""
    return [s for s in _rows() if not s.complex]


def complex_specs() -> list[Spec]:
    """The rows with ``complex=True``: their inputs are drawn as ``x + iy``."""
    return [s for s in _rows() if s.complex]
