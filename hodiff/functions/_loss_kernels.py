"""Array-level helpers of the softmax/loss family, shared by ``functions/loss.py`` and
``grad_functions/loss.py``: axis and label checks, the softmax kernels. A leaf module: it
imports no function family.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hodiff.engine.variable import Variable


def resolve_axis(name: str, axis: Any, ndim: int) -> int:
    """``axis`` (None: the last) as a non-negative int, or a ValueError naming ``name``."""
    if ndim == 0:
        raise ValueError(f"{name}: x must have at least one dimension, got a 0-d array")
    if axis is None:
        return ndim - 1
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"{name}: axis must be an int or None, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of range for x of {ndim} dims")
    return int(axis) % ndim


def check_labels(
    name: str, x_shape: tuple[int, ...], t: Variable, axis: int, x_name: str = "x"
) -> tuple[int, ...]:
    """Checks integer labels ``t`` against ``x_shape``; returns the loss shape (1 on ``axis``)."""
    if t.dtype.kind not in "iu":
        raise TypeError(
            f"{name}: labels t must be an integer array, got dtype {t.dtype} (shape {t.shape});"
            " NNabla's float labels are class indices: pass t.astype(np.int64)"
        )
    kept = (*x_shape[:axis], 1, *x_shape[axis + 1 :])
    dropped = x_shape[:axis] + x_shape[axis + 1 :]
    if t.shape not in (kept, dropped):
        raise ValueError(
            f"{name}: labels t of shape {t.shape} do not match {x_name} of shape {x_shape}"
            f" on axis {axis}: expected {kept} or {dropped}"
        )
    return kept


def labels_in_range(name: str, xp: Any, t: Any, axis: int, x_shape: tuple[int, ...]) -> Any:
    """``t`` as an ``xp`` array of size 1 on ``axis``; a ValueError if a label is outside [0, C)
    and is not ``-1``, NNabla's label of a sample to ignore (the caller masks it).
    """
    n = x_shape[axis]
    t = xp.asarray(t).reshape((*x_shape[:axis], 1, *x_shape[axis + 1 :]))
    if t.size:
        # a GPU: one reduction and one wait for the device, not two of each
        if xp is not np and not bool(((t < -1) | (t >= n)).any()):
            return t
        lo, hi = int(t.min()), int(t.max())
        if lo < -1 or hi >= n:
            raise ValueError(
                f"{name}: labels t of shape {t.shape} must lie in [0, {n}) (or be -1: ignored)"
                f" for x of shape {x_shape} (axis {axis}); got values in [{lo}, {hi}]"
            )
    return t


def softmax_array(xp: Any, x: Any, axis: int) -> Any:
    """A new array ``exp(x - max) / sum(exp(x - max))`` along ``axis`` (never overflows)."""
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def log_softmax_array(xp: Any, x: Any, axis: int) -> Any:
    z = x - x.max(axis=axis, keepdims=True)
    return z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
