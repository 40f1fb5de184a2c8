"""The two small helpers NNabla's normalization tests import for their references."""

from __future__ import annotations

from typing import Any


def _force_list(x: Any) -> list:
    if isinstance(x, list):
        return x
    if isinstance(x, tuple):
        return list(x)
    return [x]


def _get_axes_excluding(ndim: int, axes: Any) -> list[int]:
    """The axes of an ``ndim`` array that are not in ``axes``."""
    keep = {a % ndim for a in _force_list(axes)}
    return [i for i in range(ndim) if i not in keep]
