"""Shape and index helpers of the array family, shared by ``functions/indexing.py`` (and
the functions built on it) and ``grad_functions/array.py``: axis and int checks, numpy
index keys resolved against a shape, the advanced-indexing key of ``gather``. A leaf
module: it imports no function family.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from hodiff.engine.variable import Variable

_ALL = builtins.slice(None)


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a Variable, an array or a scalar (without wrapping it)."""
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def normalize_axis(name: str, axis: Any, ndim: int, arg: str = "axis") -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int, or a ValueError naming ``name``."""
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: {arg} must be an int, got {type(axis).__name__}") from None
    if not -ndim <= a < ndim:
        raise ValueError(f"{name}: {arg} {axis} is out of range for an input of {ndim} dims")
    return a % ndim


def normalize_base_axis(name: str, base_axis: Any, ndim: int, low: int = 0, high: int = -1) -> int:
    """NNabla's ``base_axis`` as a non-negative int: a negative one counts from the end.

    ``base_axis + ndim`` when negative (NNabla's rule: ``base_axis=-2`` of a 3-D input is
    1), then checked to lie in ``[low, ndim + high]``: the axes the function needs after
    it (the convolutions: a channel and a spatial axis, ``high=-2``). TypeError for a
    non-int, ValueError naming ``name``, the value and the range otherwise.
    """
    if isinstance(base_axis, bool):
        raise TypeError(f"{name}: base_axis must be an int, got bool")
    try:
        b = operator.index(base_axis)
    except TypeError:
        raise TypeError(
            f"{name}: base_axis must be an int, got {type(base_axis).__name__}"
        ) from None
    resolved = b + ndim if b < 0 else b
    top = ndim + high
    if not low <= resolved <= top:
        raise ValueError(
            f"{name}: base_axis={base_axis} must be in [{low}, {top}] or, counted from the end,"
            f" in [{low - ndim}, {top - ndim}] for an input of {ndim} dims"
        )
    return resolved


def as_ints(name: str, arg: str, values: Any) -> tuple[int, ...]:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {arg} must be a sequence of ints, got {values!r}") from None


def key_on(xp: Any, key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` with its index arrays moved to ``xp`` (numpy keys are used as they are)."""
    if xp is np:
        return key
    return tuple(xp.asarray(k) if isinstance(k, np.ndarray) else k for k in key)


class EmptyShapeError(ValueError, RuntimeError):
    """An input with no axis, or no element, where the function needs one.

    A ValueError as every bad argument in hodiff, and a RuntimeError as NNabla raises for
    the same call (``concatenate`` of 0-d inputs, ``split`` along an axis of size 0).
    """


class IndexOutOfRangeError(IndexError, ValueError):
    """An index that does not fit the array.

    An IndexError as in numpy (so iteration stops), and a ValueError as every other
    bad argument in hodiff.
    """


def index_key(key: Any, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """A numpy index as a tuple of ints, slices, None, Ellipsis and intp arrays, and the
    shape it selects from an array of ``shape``; boolean masks become their ``nonzero()``.

    Raises TypeError for Variables, floats and bool scalars in the key and ValueError for
    an index that does not fit ``shape``.
    """
    items = key if isinstance(key, tuple) else (key,)
    out: list[Any] = []
    for k in items:
        if isinstance(k, Variable):
            raise TypeError(
                "getitem: a Variable cannot be an index (index values must be static); "
                "use F.gather for indices held in a Variable"
            )
        if k is None or k is Ellipsis:
            out.append(k)
        elif isinstance(k, builtins.slice):
            out.append(_int_slice(k))
        elif isinstance(k, bool | np.bool_):
            raise TypeError("getitem: a boolean scalar is not a supported index")
        elif isinstance(k, int | np.integer):
            out.append(int(k))
        else:
            out.extend(_index_arrays(k))
    key = tuple(out)
    try:
        selected = np.broadcast_to(np.zeros((), np.int8), shape)[key].shape
    except IndexError as e:
        raise IndexOutOfRangeError(
            f"getitem: index {key!r} does not fit x of shape {shape}: {e}"
        ) from None
    return key, tuple(selected)


def _int_slice(k: builtins.slice) -> builtins.slice:
    """The slice with its start, stop and step as ints (or None); a zero step raises."""
    try:
        parts = [None if p is None else operator.index(p) for p in (k.start, k.stop, k.step)]
    except TypeError:
        raise TypeError(f"getitem: slice {k} must hold ints or None") from None
    if parts[2] == 0:
        raise ValueError(f"getitem: slice {k} has a zero step")
    return builtins.slice(*parts)


def _index_arrays(k: Any) -> list[np.ndarray]:
    """An index array (numpy, cupy or a list) as intp arrays: itself, or a mask's
    ``nonzero()``.
    """
    a = np.asarray(k.get() if hasattr(k, "get") and not isinstance(k, dict) else k)
    if a.dtype.kind == "b":
        return list(np.nonzero(a))
    if a.dtype.kind in "iu" or a.size == 0:
        return [a.astype(np.intp)]
    raise TypeError(f"getitem: index arrays must hold integers or bools, got {a.dtype}")


def has_arrays(key: tuple[Any, ...]) -> bool:
    """True when ``key`` holds an index array (advanced indexing: indices may repeat)."""
    return any(isinstance(k, np.ndarray) for k in key)


def gather_key(
    xp: Any, indices: Any, ndim: int, axis: int, batch_dims: int
) -> tuple[tuple[Any, ...], list[int] | None]:
    """The numpy key of ``gather`` and the permutation taking ``x[key]`` to gather's layout.

    Batch axes are indexed by broadcast aranges; when they are separated from ``axis``
    numpy puts the advanced axes first, and the permutation moves them back.
    """
    indices = xp.asarray(indices)
    n_idx = indices.ndim - batch_dims
    key: list[Any] = []
    for k in range(batch_dims):
        shape = [1] * (batch_dims + n_idx)
        shape[k] = indices.shape[k]
        key.append(xp.arange(indices.shape[k]).reshape(shape))
    key += [_ALL] * (axis - batch_dims) + [indices]
    if batch_dims == 0 or axis == batch_dims:
        return tuple(key), None
    mid = axis - batch_dims
    perm = (
        list(range(batch_dims))
        + list(range(indices.ndim, indices.ndim + mid))
        + list(range(batch_dims, indices.ndim))
        + list(range(indices.ndim + mid, ndim - 1 + n_idx))
    )
    return tuple(key), perm
