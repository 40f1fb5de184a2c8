"""Statistics and order: var, std, diff, argmax/argmin, sort, top_k_data.

``var``, ``std`` and ``diff`` are compositions. The order functions split in
two: the *indices* (argmax, argmin, the sort permutation, the top-k positions)
come from non-differentiable primitives that cut the graph, and the *values*
are read at those indices with :func:`hodiff.grad_functions.selection.take_along_axis`,
whose gradient scatters back to the chosen places. So ``sort`` is
differentiable as a permutation (at ties the permutation numpy's stable sort
picks gets the gradient; the derivative there is undefined), and
``top_k_data`` passes the gradient to the ``k`` selected entries only.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Function
from hodiff.engine.tracing import shape_bound, traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import reduction as _red
from hodiff.functions._index_kernels import normalize_base_axis
from hodiff.functions.indexing import normalize_axis, shape_of
from hodiff.grad_functions.selection import scatter_along_axis, take_along_axis

__all__ = ["argmax", "argmin", "diff", "searchsorted", "sort", "std", "top_k_data", "var"]

Spec = list[tuple[tuple[int, ...], Any]]


class _ArgExtremum(Function, register=False, follows_shape=True):
    differentiable = False
    method: str

    def __init__(self, *, axis: int | None = None, keepdims: bool = False) -> None:
        self.axis = axis
        self.keepdims = bool(keepdims)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        if x.size == 0:
            raise ValueError(f"{self.name}: x of shape {x.shape} is empty")
        if self.axis is None:
            shape = (1,) * x.ndim if self.keepdims else ()
        else:
            a = normalize_axis(self.name, self.axis, x.ndim)
            shape = (
                _red.kept_shape(x.shape, (a,))
                if self.keepdims
                else (x.shape[:a] + x.shape[a + 1 :])
            )
        return [(shape, np.dtype(np.int64))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        y = getattr(xp, self.method)(x, axis=self.axis)
        if self.keepdims:
            y = y.reshape((1,) * x.ndim) if self.axis is None else xp.expand_dims(y, self.axis)
        outputs[0] = xp.asarray(y, dtype=np.int64)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        nd = x.ndim - 1
        if self.axis is not None:
            return _batching.renew(self, axis=_batching.map_axis(self.axis, nd))(x)
        y = _batching.renew(self, axis=1, keepdims=False)(_array.reshape(x, (x.shape[0], -1)))
        return _array.reshape(y, (x.shape[0],) + ((1,) * nd if self.keepdims else ()))


class Argmax(_ArgExtremum):
    method = "argmax"


class Argmin(_ArgExtremum):
    method = "argmin"


class SearchSorted(Function, follows_shape=True):
    """Insertion indices of ``values`` in ``sorted_sequence`` along the last axis (int64)."""

    name = "searchsorted"  # the public F.searchsorted
    differentiable = False

    def __init__(self, *, right: bool = False) -> None:
        self.right = bool(right)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        seq, values = inputs
        if seq.ndim == 0 or seq.ndim != values.ndim or seq.shape[:-1] != values.shape[:-1]:
            raise ValueError(
                f"searchsorted: sorted_sequence of shape {seq.shape} and values of shape"
                f" {values.shape} must have the same number of axes and the same leading axes"
            )
        return [(values.shape, np.dtype(np.int64))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        seq, values = inputs
        xp = array_module(seq)
        side = "right" if self.right else "left"
        rows, vals = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        y = xp.empty(vals.shape, dtype=np.int64)
        for i in range(rows.shape[0]):  # one sorted row at a time
            y[i] = xp.searchsorted(rows[i], vals[i], side=side)
        outputs[0] = y.reshape(values.shape)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # both batched on axis 0 (an unbatched one broadcast): a leading axis like the others
        size = _batching.batch_size(inputs, axes)
        seq, values = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        return self(seq, values)


class Argsort(Function, follows_shape=True):
    """The stable sorting permutation along ``axis`` (descending if ``reverse``), first ``k``."""

    differentiable = False

    def __init__(
        self, *, axis: int = -1, reverse: bool = False, k: int | None = None, abs: bool = False
    ) -> None:
        self.axis = axis
        self.reverse = bool(reverse)
        self.k = k
        self.abs = bool(abs)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        a = normalize_axis("sort", self.axis, x.ndim)
        shape = x.shape if self.k is None else (*x.shape[:a], self.k, *x.shape[a + 1 :])
        return [(shape, np.dtype(np.int64))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        key = xp.abs(x) if self.abs else x
        if self.reverse:  # stable descending: ascending order of the negation
            key = -key if key.dtype.kind in "fi" else -key.astype(np.int64)
        idx = xp.argsort(key, axis=self.axis, kind="stable")
        if self.k is not None:
            idx = xp.take(idx, xp.arange(self.k), axis=self.axis)
        outputs[0] = idx.astype(np.int64, copy=False)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        return _batching.renew(self, axis=_batching.map_axis(self.axis, inputs[0].ndim - 1))(
            inputs[0]
        )


# ---------------------------------------------------------------- wrappers
def _count(name: str, x: Any, axis: Any, ddof: int) -> int:
    shape = shape_of(x)
    n = math.prod(shape[a] for a in _red.normalize_axes(name, axis, len(shape)))
    if n - ddof <= 0:
        raise ValueError(
            f"{name}: ddof={ddof} leaves {n - ddof} degrees of freedom for the {n} elements "
            f"reduced over axis={axis} of x of shape {shape}"
        )
    return n


@traced
@real_values
def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Variable:
    """Variance ``y = sum((x - mean(x))^2) / (N - ddof)`` over ``axis`` (numpy's ``var``).

    Args:
        x: input of any shape.
        axis: int, tuple of ints or None (all axes).
        keepdims: keep the reduced axes with size 1.
        ddof: delta degrees of freedom (``N - ddof > 0`` is required, else ValueError).

    Returns:
        The reduced shape; the gradient is ``2 (x - mean(x)) / (N - ddof)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.var(np.array([1.0, 2.0, 3.0, 4.0])).d
    array(1.25)
    """
    _count("var", x, axis, ddof)
    d = x - _red.mean(x, axis, keepdims=True)
    return _red.Mean(axis=axis, keepdims=keepdims, ddof=ddof)(d * d)


@traced
@real_values
def std(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Variable:
    """Standard deviation ``y = sqrt(var(x, axis, keepdims, ddof))`` (numpy's ``std``).

    The gradient is ``(x - mean(x)) / ((N - ddof) y)``; it is undefined where all reduced
    elements are equal (``y = 0``), except for a single element (``N = 1``, ``ddof = 0``),
    where ``std`` is identically 0 and so are all its derivatives.

    >>> import numpy as np, hodiff.functions as F
    >>> F.std(np.array([1.0, 3.0])).d
    array(1.)
    """
    n = _count("std", x, axis, ddof)
    v = var(x, axis, keepdims, ddof)
    if n == 1:  # identically 0: the graph holds no square root, so it cannot follow a new n
        return shape_bound(v)
    return v**0.5


@traced
@real_values
def diff(x: Any, n: int = 1, axis: int = -1) -> Variable:
    """``n``-th forward difference ``y[i] = x[i + 1] - x[i]`` (``n`` times) along ``axis``.

    Numpy's ``diff``: the axis shrinks by ``n``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.diff(np.array([1.0, 4.0, 9.0, 16.0]), 2).d
    array([2., 2.])
    """
    shape = shape_of(x)
    a = normalize_axis("diff", axis, len(shape))
    if not isinstance(n, int | np.integer) or n < 0 or n > shape[a]:
        raise ValueError(f"diff: n={n} must be in [0, {shape[a]}] for axis {axis} of {shape}")
    y = x if isinstance(x, Variable) else Variable.from_array(np.asarray(x))
    lead = (builtins.slice(None),) * a
    upper = (*lead, builtins.slice(1, None))
    lower = (*lead, builtins.slice(None, -1))
    for _ in range(int(n)):
        y = y[upper] - y[lower]
    return y


@traced
def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Variable:
    """Indices ``y = argmax(x, axis)`` of the maxima, int64 (not differentiable).

    Numpy's ``argmax``: ``axis=None`` searches the flattened array; ties give the first
    occurrence. It cuts the graph.

    >>> import numpy as np, hodiff.functions as F
    >>> F.argmax(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]]), axis=1).d
    array([1, 0])
    """
    return Argmax(axis=axis, keepdims=keepdims)(x)


@traced
def searchsorted(sorted_sequence: Any, values: Any, right: bool = False) -> Variable:
    """Indices where ``values`` would be inserted to keep each row sorted (NNabla's).

    Along the last axis, row by row: ``y`` is the ``i`` with ``s[i-1] < v <= s[i]``
    (``right``: ``s[i-1] <= v < s[i]``), numpy's ``searchsorted`` per row. Int64, not
    differentiable (it cuts the graph).

    Args:
        sorted_sequence: ``(..., N)``, each row sorted ascending.
        values: ``(..., M)``, the same leading axes.
        right: the side for equal values.

    Returns:
        Shape of ``values``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.searchsorted(np.array([[1.0, 3.0, 5.0]]), np.array([[3.0, 6.0, 0.0]])).d
    array([[1, 3, 0]])
    """
    return SearchSorted(right=right)(sorted_sequence, values)


@traced
def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Variable:
    """Indices ``y = argmin(x, axis)`` of the minima, int64 (not differentiable).

    Numpy's ``argmin``: ``axis=None`` searches the flattened array; ties give the first
    occurrence. It cuts the graph.

    >>> import numpy as np, hodiff.functions as F
    >>> F.argmin(np.array([3.0, 1.0, 2.0])).d
    array(1)
    """
    return Argmin(axis=axis, keepdims=keepdims)(x)


@traced
@real_values
def sort(
    x: Any,
    axis: int = -1,
    reverse: bool = False,
    with_index: bool = False,
    only_index: bool = False,
) -> Any:
    """Sorted values along ``axis`` (ascending; descending if ``reverse``), NNabla's ``sort``.

    ``y = take_along_axis(x, p, axis)`` with ``p`` the stable sorting permutation: the
    gradient is ``gy`` scattered back through ``p`` (at ties, to the order numpy's stable
    sort gives; the derivative there is undefined).

    Returns:
        ``y`` (shape of ``x``); ``(y, p)`` if ``with_index``; ``p`` (int64) if ``only_index``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.sort(np.array([3.0, 1.0, 2.0]), reverse=True).d
    array([3., 2., 1.])
    """
    p = Argsort(axis=axis, reverse=reverse)(x)
    if only_index:
        return p
    y = take_along_axis(x, p, axis)
    return (y, p) if with_index else y


@traced
@real_values
def top_k_data(
    x: Any,
    k: int,
    abs: bool = False,
    reduce: bool = True,
    base_axis: int = 1,
    largest: bool = True,
    with_index: bool = False,
) -> Any:
    """The ``k`` largest values of each sample (NNabla's ``top_k_data``).

    Axes before ``base_axis`` index samples; the others (flattened, ``F`` elements) are
    searched. With ``abs`` the values are ranked by magnitude (the signed values are
    returned); ``largest=False`` picks the smallest.

    Returns:
        ``reduce=True``: shape ``x.shape[:base_axis] + (k,)``, the selected values in
        ranking order; ``reduce=False``: the shape of ``x``, the selected values in place and
        zeros elsewhere. With ``with_index`` also the int64 positions in the flattened sample.
        The gradient reaches the selected entries only.

    >>> import numpy as np, hodiff.functions as F
    >>> F.top_k_data(np.array([[1.0, -4.0, 3.0]]), 2, abs=True).d
    array([[-4.,  3.]])
    """
    shape = shape_of(x)
    base_axis = normalize_base_axis("top_k_data", base_axis, len(shape))
    flat = (*shape[:base_axis], math.prod(shape[base_axis:]))
    if not isinstance(k, int | np.integer) or not 1 <= k <= flat[-1]:
        raise ValueError(f"top_k_data: k={k} must be in [1, {flat[-1]}] for x of shape {shape}")
    xs = _array.reshape(x, flat)
    idx = Argsort(axis=-1, reverse=largest, k=int(k), abs=abs)(xs)
    y = take_along_axis(xs, idx, base_axis)
    if not reduce:
        y = _array.reshape(scatter_along_axis(y, idx, base_axis, flat), shape)
    return (y, idx) if with_index else y
