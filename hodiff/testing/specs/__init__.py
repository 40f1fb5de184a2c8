"""The spec table: every module here defines ``SPECS``, a list of :class:`hodiff.testing.Spec`."""

from __future__ import annotations

import importlib
import pkgutil

from hodiff.testing.spec import Spec


def all_specs() -> list[Spec]:
    specs: list[Spec] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        specs.extend(module.SPECS)
    return specs
