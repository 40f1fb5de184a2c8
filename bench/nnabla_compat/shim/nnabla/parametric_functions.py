"""``nnabla.parametric_functions``: hodiff.parametric's layer of the same name."""

from __future__ import annotations

from typing import Any

import hodiff.parametric as HPF
from bench.nnabla_compat.causes import Internals, MissingFunction

from ._core import call


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name.startswith("_"):
        raise Internals(f"PF.{name}")
    fn = getattr(HPF, name, None)
    if fn is None or not callable(fn):

        def missing(*a: Any, **k: Any) -> Any:
            raise MissingFunction(f"PF.{name}")

        return missing

    def f(*args: Any, **kwargs: Any) -> Any:
        return call(f"PF.{name}", fn, args, kwargs)

    return f
