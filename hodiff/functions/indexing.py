"""Indexing functions of the array family (re-exported by :mod:`hodiff.functions.array`).

``getitem`` (``Variable.__getitem__``) and ``gather`` select with static keys and
integer indices; their transposes, ``index_add`` and ``gather_add`` in
:mod:`hodiff.grad_functions.array`, add with numpy's ``add.at`` semantics for
repeated indices, and their own transposes are the selections again. ``slice`` is
a ``getitem``; ``one_hot`` writes ones at integer ids. ``transpose`` is here too
(the batching rules of the selections and of their transposes permute axes, and this
module imports no other family). Also the shape and index helpers that the other
array functions share.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions._index_kernels import (  # noqa: F401 (re-exported: the array family uses them)
    IndexOutOfRangeError,
    as_ints,
    gather_key,
    has_arrays,
    index_key,
    key_on,
    normalize_axis,
    shape_of,
)
from hodiff.grad_functions import array as _garray

__all__ = ["gather", "getitem", "one_hot", "slice", "transpose"]

Spec = list[tuple[tuple[int, ...], Any]]
_ALL = builtins.slice(None)


# the shape and index helpers are in _index_kernels.py (shared with the scatter-adds)


# ---------------------------------------------------------------- primitives
class GetItem(Function, follows_shape=True):
    complex_values = "holomorphic"
    name = "getitem"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, key: tuple[Any, ...]) -> None:
        self.key = key

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        _, shape = index_key(self.key, x.shape)
        return [(shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = x[key_on(array_module(x), self.key)]

    def follows(self, seen: list[tuple[int, ...]], now: list[tuple[int, ...]]) -> bool:
        # a graph built for the new shape indexes the same way only where every changed
        # axis is taken whole (``:``); ints, bounds and arrays were chosen for the old sizes
        items = self.key if isinstance(self.key, tuple) else (self.key,)
        if any(
            not (k is None or k is Ellipsis or isinstance(k, int | builtins.slice)) for k in items
        ):
            return False
        axis_items = [k for k in items if k is not None]
        if Ellipsis in axis_items:
            e = axis_items.index(Ellipsis)
            rest = axis_items[e + 1 :]
            axis_items = (
                axis_items[:e]
                + [builtins.slice(None)] * (len(seen[0]) - len(axis_items) + 1)
                + rest
            )
        axis_items += [builtins.slice(None)] * (len(seen[0]) - len(axis_items))
        return all(
            a == b or k == builtins.slice(None)
            for a, b, k in zip(seen[0], now[0], axis_items, strict=True)
        )

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of indexing adds gy into zeros at the indexed places (repeats add up)
        if prop_down[0]:
            gx = _garray.index_add(outputs[0].grad, self.key, inputs[0].shape)
            inputs[0].store(gx, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        key, at = batched_key(self.key)
        y = _batching.renew(self, key=key)(x)
        if at:
            perm = [at, *[i for i in range(y.ndim) if i != at]]
            y = transpose(y, perm)
        return y


class Gather(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, axis: int = 0, batch_dims: int = 0) -> None:
        self.axis = axis
        self.batch_dims = batch_dims

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, indices = inputs
        if indices.dtype.kind not in "iu":
            raise TypeError(f"gather: indices must be integers, got {indices.dtype}")
        axis = normalize_axis(self.name, self.axis, x.ndim)
        b = self.batch_dims
        if not 0 <= b <= min(axis, indices.ndim):
            raise ValueError(
                f"gather: batch_dims {b} must be in [0, min(axis, indices.ndim)] = "
                f"[0, {min(axis, indices.ndim)}]"
            )
        if x.shape[:b] != indices.shape[:b]:
            raise ValueError(
                f"gather: x of shape {x.shape} and indices of shape {indices.shape} differ in "
                f"their first batch_dims={b} axes"
            )
        return [(x.shape[:axis] + indices.shape[b:] + x.shape[axis + 1 :], x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, indices = inputs
        xp = array_module(x)
        axis = self.axis % np.ndim(x)
        key, perm = gather_key(xp, indices, np.ndim(x), axis, self.batch_dims)
        y = x[key]
        outputs[0] = y if perm is None else y.transpose(perm)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of gather adds gy into zeros at the gathered places; indices get none
        if prop_down[0]:
            gx = _garray.gather_add(
                outputs[0].grad, inputs[1].data, inputs[0].shape, self.axis, self.batch_dims
            )
            inputs[0].store(gx, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        x, indices = inputs
        n = x.ndim - (axes[0] is not None)
        axis = self.axis % n + 1
        if axes[1] is None and self.batch_dims == 0:  # the same indices for every example
            return _batching.renew(self, axis=axis)(x, indices)
        size = _batching.batch_size(inputs, axes)
        x = _batching.batched(x, axes[0], size)
        indices = _batching.batched(indices, axes[1], size)
        return _batching.renew(self, axis=axis, batch_dims=self.batch_dims + 1)(x, indices)


class OneHotShapeError(ValueError, RuntimeError):
    """``one_hot``'s ids do not match ``shape``: a ValueError, and a RuntimeError as NNabla's."""


class OneHot(Function, follows_shape=True):
    differentiable = False

    def __init__(self, *, shape: Sequence[int], dtype: Any) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        if x.dtype.kind not in "iuf":  # float ids (NNabla's default dtype) must be whole
            raise TypeError(f"one_hot: x must hold integer ids, got {x.dtype}")
        if x.ndim == 0 or x.shape[-1] != len(self.shape):
            raise OneHotShapeError(
                f"one_hot: x of shape {x.shape} must have a last axis of len(shape) = "
                f"{len(self.shape)} (shape={self.shape})"
            )
        return [(x.shape[:-1] + self.shape, self.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        x = xp.asarray(inputs[0])
        if x.dtype.kind == "f":
            if x.size and not bool((x == xp.floor(x)).all()):
                raise ValueError(
                    f"one_hot: float ids of x (shape {x.shape}, dtype {x.dtype}) must be whole"
                    " numbers"
                )
            x = x.astype(np.intp)
        # NNabla's definition: ids in [-C, -1] count from the end; an id outside [-C, C)
        # makes a vector of zeros
        sizes = xp.asarray(self.shape)
        n = math.prod(x.shape[:-1])
        ids = x.reshape(n, -1)
        valid = ((ids >= -sizes) & (ids < sizes)).all(axis=1)
        ids = xp.where(ids < 0, ids + sizes, ids)
        flat = xp.zeros((n,), dtype=np.intp)
        for j, size in enumerate(self.shape):
            flat = flat * size + ids[:, j]
        y = xp.zeros((n, math.prod(self.shape)), dtype=self.dtype)
        rows = xp.arange(n)[valid]
        y[rows, flat[valid]] = 1
        outputs[0] = y.reshape(x.shape[:-1] + self.shape)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        return self(inputs[0])  # ids along the last axis: leading axes are carried as they are


class Transpose(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, axes: Sequence[int]) -> None:
        self.axes = tuple(axes)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        if sorted(self.axes) != list(range(x.ndim)):
            raise ValueError(
                f"transpose: axes {self.axes} are not a permutation of the {x.ndim} axes of x "
                f"of shape {x.shape}"
            )
        return [(tuple(x.shape[a] for a in self.axes), x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).transpose(inputs[0], self.axes)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a permutation is the inverse permutation
        if prop_down[0]:
            inverse = tuple(int(i) for i in np.argsort(self.axes))
            inputs[0].store(transpose(outputs[0].grad, inverse), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        n = x.ndim - 1
        return _batching.renew(self, axes=(0, *[a % n + 1 for a in self.axes]))(x)


# ---------------------------------------------------------------- wrappers
@traced
def slice(
    x: Any,
    start: Sequence[int | None] | None = None,
    stop: Sequence[int | None] | None = None,
    step: Sequence[int | None] | None = None,
) -> Variable:
    """``x[start[0]:stop[0]:step[0], start[1]:stop[1]:step[1], ...]`` with per-axis lists.

    Each list covers the leading axes (NNabla's defaults: all axes, from 0 to the end, step 1);
    entries follow Python's slice rules (None, negative values, negative steps).

    >>> import numpy as np, hodiff.functions as F
    >>> F.slice(np.arange(6.0).reshape(2, 3), (0, 1), (2, 3), (1, 1)).d
    array([[1., 2.],
           [4., 5.]])
    """
    lists = [list(v) if v is not None else None for v in (start, stop, step)]
    n = builtins.max((len(v) for v in lists if v is not None), default=0)
    for name, v in zip(("start", "stop", "step"), lists, strict=True):
        if v is not None and len(v) != n:
            raise ValueError(
                f"slice: start, stop and step must have equal lengths, {name} has "
                f"{len(v)} entries, not {n}"
            )
    key = tuple(builtins.slice(*(None if v is None else v[i] for v in lists)) for i in range(n))
    return getitem(x, key)


@traced
def getitem(x: Any, key: Any) -> Variable:
    """``x[key]`` as numpy indexes: ints, slices (any step), None, Ellipsis, integer arrays
    (repeats allowed: their gradients add up) and boolean masks. ``Variable.__getitem__``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.getitem(np.arange(6.0).reshape(2, 3), np.s_[:, [0, 0, 2]]).d
    array([[0., 0., 2.],
           [3., 3., 5.]])
    """
    key, _ = index_key(key, shape_of(x))
    return GetItem(key=key)(x)


@traced
def gather(x: Any, indices: Any, axis: int = 0, batch_dims: int = 0) -> Variable:
    """Picks slices of ``x`` along ``axis`` by integer ``indices`` (NNabla's / TensorFlow's).

    With ``batch_dims = 0``, ``y[d_0..d_{a-1}, i..., d_{a+1}...] = x[d_0..d_{a-1}, idx[i...],
    d_{a+1}...]``; the first ``batch_dims`` axes of ``x`` and ``indices`` are shared.
    ``y.shape = x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis + 1:]``. Repeated
    indices add up in the gradient; ``indices`` may be a Variable (re-set between forwards).

    >>> import numpy as np, hodiff.functions as F
    >>> F.gather(np.arange(6.0).reshape(3, 2), np.array([2, 0])).d
    array([[4., 5.],
           [0., 1.]])
    """
    return Gather(axis=axis, batch_dims=batch_dims)(x, indices)


@traced
def one_hot(x: Any, shape: Sequence[int]) -> Variable:
    """One-hot vectors of integer ids (not differentiable).

    Args:
        x: ids of shape ``(..., K)``: integers, or floats holding whole numbers (as
            NNabla, whose arrays are float by default; another float raises ValueError).
            As NNabla's, an id in ``[-shape[k], -1]`` counts from the end, and a row with
            an id outside ``[-shape[k], shape[k])`` gives a vector of zeros (an ignored label).
        shape: the ``K`` class counts.

    Returns:
        Shape ``x.shape[:-1] + shape``, 1 at the ids, 0 elsewhere, in the context's float
        dtype: ``(N, 1)`` ids with ``shape=(C,)`` give ``(N, C)``.

    Raises:
        ValueError: (also a RuntimeError, as NNabla's) ``x.shape[-1] != len(shape)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.one_hot(np.array([[2], [0]]), (3,)).d
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
    >>> F.one_hot(np.array([[-1], [3]]), (3,)).d  # from the end; out of range: zeros
    array([[0., 0., 1.],
           [0., 0., 0.]], dtype=float32)
    """
    return OneHot(shape=shape, dtype=get_default_context().dtype)(x)


@traced
def transpose(x: Any, axes: Sequence[int] | None = None) -> Variable:
    """Permutes the axes: ``y.shape[i] = x.shape[axes[i]]`` (None: reverse them, as numpy).

    >>> import numpy as np, hodiff.functions as F
    >>> F.transpose(np.zeros((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    ndim = len(shape_of(x))
    if axes is None:
        axes = tuple(range(ndim))[::-1]
    axes = as_ints("transpose", "axes", axes)
    return Transpose(axes=tuple(a % ndim if -ndim <= a < 0 else a for a in axes))(x)


# ---------------------------------------------------------------- batching helpers (hd.vmap)


def batched_key(key: tuple[Any, ...]) -> tuple[tuple[Any, ...], int]:
    """``key`` for an array with a batch axis in front, and where numpy puts that axis.

    Numpy moves the axes of advanced indices (arrays, and ints next to them) to the front
    when they are not adjacent in the key; the batch axis then follows them: the second
    value is its position in ``x[batched_key]`` (0 when nothing moves).
    """
    bkey = (builtins.slice(None), *key)
    if not has_arrays(key):
        return bkey, 0
    adv = [i for i, k in enumerate(key) if isinstance(k, np.ndarray | int)]
    if adv[-1] - adv[0] + 1 == len(adv):  # adjacent: the advanced axes stay in place
        return bkey, 0
    arrays = [k.shape for k in key if isinstance(k, np.ndarray)]
    return bkey, len(np.broadcast_shapes(*arrays))
