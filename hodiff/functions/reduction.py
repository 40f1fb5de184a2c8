"""Reductions over axes and cumulative sums and products.

``mean`` and ``norm`` are compositions. ``max``/``min`` send the gradient to the
arg-extrema, split evenly among ties (as JAX); the tie weights come from a
non-differentiable function, never from Python. ``prod`` and ``cumprod`` are
exact with zeros in ``x`` at every order: their rules use exclusive products and
a linear recurrence (:func:`hodiff.grad_functions.reduction.linear_scan`), never
a division by ``x``.
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
from hodiff.engine.function import Function, Slot, float_dtype
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import logic as _logic
from hodiff.functions import math as _math
from hodiff.functions import statistics as _stats
from hodiff.functions.indexing import shape_of
from hodiff.grad_functions import reduction as _greduction

__all__ = ["cumprod", "cumsum", "logsumexp", "max", "mean", "min", "norm", "prod", "sum"]

Slots = Sequence[Slot]
Flags = Sequence[bool]
Spec = list[tuple[tuple[int, ...], Any]]
_ALL = builtins.slice(None)


def normalize_axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    try:
        axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    except TypeError:
        axes = (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, int | np.integer):
            raise TypeError(
                f"{name}: axis must be None, an int or a sequence of ints, got {axis!r}"
            )
        if not isinstance(a, int | np.integer) or not -ndim <= a < builtins.max(ndim, 1):
            raise ValueError(f"{name}: axis {axis} is out of range for an input of {ndim} dims")
        out.append(int(a) % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {axis}")
    return tuple(sorted(out))


def kept_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` set to 1 (the keepdims shape)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


class _Reduce(Function, register=False, follows_shape=True):
    def __init__(self, *, axis: Any = None, keepdims: bool = False) -> None:
        self.axis = axis
        self.keepdims = bool(keepdims)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        axes = self._axes(x.ndim)
        if len(axes) == x.ndim:  # every axis (axis=None, the common case)
            shape: tuple[int, ...] = (1,) * x.ndim if self.keepdims else ()
        elif self.keepdims:
            shape = kept_shape(x.shape, axes)
        else:
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        return [(shape, float_dtype(x.dtype))]

    def _axes(self, ndim: int) -> tuple[int, ...]:
        """``axis`` normalized for an input of ``ndim`` dims (kept for the node's next call:
        setup, forward and backward all ask, with the same ``axis`` and ``ndim``).
        """
        cached = getattr(self, "_axes_of", None)
        if cached is not None and cached[0] is self.axis and cached[1] == ndim:
            return cached[2]  # type: ignore[no-any-return]
        axes = normalize_axes(self.name, self.axis, ndim)
        self._axes_of = (self.axis, ndim, axes)
        return axes

    def expand(self, gy: Any, shape: tuple[int, ...]) -> Any:
        """``gy`` (a reduced gradient or output) broadcast back to the input ``shape``."""
        if not self.keepdims:
            gy = _array.reshape(gy, kept_shape(shape, self._axes(len(shape))))
        return _array.broadcast(gy, shape)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # reduce the per-example axes: shifted by one past the batch axis
        (x,) = inputs
        return _batching.renew(self, axis=_batching.shift_axes(self.axis, x.ndim - 1))(x)


class Sum(_Reduce):
    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        axes = self._axes(x.ndim)
        if type(x) is np.ndarray:  # the ufunc itself: ndarray.sum goes through a Python frame
            outputs[0] = np.add.reduce(  # type: ignore[call-overload]
                x, axis=axes, keepdims=self.keepdims, dtype=float_dtype(x.dtype)
            )
        else:
            outputs[0] = x.sum(axis=axes, keepdims=self.keepdims, dtype=float_dtype(x.dtype))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # every summed element gets gy
        if prop_down[0]:
            inputs[0].store(self.expand(outputs[0].grad, inputs[0].shape), accum[0])


class Mean(Sum):
    """``sum(x, axis) / (n - ddof)``, ``n`` the number of reduced elements, read from ``x``'s
    shape when the node runs (so a static graph follows ``reset_shape``).
    """

    def __init__(self, *, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> None:
        super().__init__(axis=axis, keepdims=keepdims)
        self.ddof = int(ddof)

    def _count(self, shape: Sequence[int]) -> int:
        """``n - ddof`` for an input of ``shape``."""
        return math.prod(shape[a] for a in self._axes(len(shape))) - self.ddof

    def _scale(self, shape: Sequence[int]) -> float:
        n = self._count(shape)
        return 1.0 / n if n else math.nan

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        specs = super().setup_impl(inputs)
        shape = tuple(inputs[0].shape)
        if self.ddof and self._count(shape) <= 0:
            raise ValueError(
                f"{self.name}: ddof={self.ddof} leaves {self._count(shape)} degrees of freedom "
                f"for the elements reduced over axis={self.axis} of x of shape {shape}"
            )
        return specs

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        super().forward_impl(inputs, outputs)
        outputs[0] = outputs[0] * self._scale(inputs[0].shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # every reduced element gets gy / (n - ddof)
        if prop_down[0]:
            shape = inputs[0].shape
            gy = outputs[0].grad * self._scale(shape)
            inputs[0].store(self.expand(gy, shape), accum[0])


class _Extremum(_Reduce, register=False):
    mode = "max"

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        axes = normalize_axes(self.name, self.axis, x.ndim)
        if any(x.shape[a] == 0 for a in axes):
            raise ValueError(f"{self.name}: cannot reduce the empty axes {axes} of shape {x.shape}")
        return super().setup_impl(inputs)

    def weights(self, x: Any) -> Any:
        """``dy/dx``: 1/(number of extrema of the slice) at each extremum, 0 elsewhere (a
        tie splits the derivative evenly); locally constant, read by reverse and Taylor mode.
        """
        return _greduction.tie_weights(x, self._axes(len(x.shape)), self.mode)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gy goes to the arg-extrema, split evenly among ties
        if prop_down[0]:
            x = inputs[0]
            x.store(self.expand(outputs[0].grad, x.shape) * self.weights(x.data), accum[0])

    def jet_rule(self, jp: Any, ins: list[Any], outs: list[Any]) -> list[Any]:
        # piecewise linear: y_k = sum over the axes of w x_k, w = weights(x0) (as backward)
        x = jp.val(self.inputs[0])
        w = self.weights(x)
        axes = tuple(a + 1 for a in self._axes(len(x.shape)))  # behind the direction axis
        return [[None if c is None else sum(c * w, axes, self.keepdims) for c in ins[0]]]


class Max(_Extremum):
    mode = "max"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        y = x.max(axis=self._axes(x.ndim), keepdims=self.keepdims)
        outputs[0] = y.astype(float_dtype(y.dtype), copy=False)


class Min(_Extremum):
    mode = "min"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        y = x.min(axis=self._axes(x.ndim), keepdims=self.keepdims)
        outputs[0] = y.astype(float_dtype(y.dtype), copy=False)


class Prod(_Reduce):
    complex_values = "holomorphic"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        axes = self._axes(x.ndim)
        outputs[0] = x.prod(axis=axes, keepdims=self.keepdims, dtype=float_dtype(x.dtype))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d prod(x) / d x_i = product of the other x_j (exclusive products: exact with zeros)
        if prop_down[0]:
            x = inputs[0]
            others = _products_of_others(x.data, x.shape, self._axes(len(x.shape)))
            x.store(self.expand(outputs[0].grad, x.shape) * others, accum[0])


def _products_of_others(x: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """For each element, the product of the other elements of its reduced slice.

    The reduced axes are moved last and flattened into one axis of length K; there,
    the product of the others is ``cumprod(exclusive) * cumprod(exclusive, reverse)``.
    """
    keep = [i for i in range(len(shape)) if i not in axes]
    perm = keep + list(axes)
    k = math.prod(shape[a] for a in axes)
    t = _array.reshape(_array.transpose(x, perm), (*(shape[i] for i in keep), k))
    axis = len(keep)
    others = cumprod(t, axis, exclusive=True) * cumprod(t, axis, exclusive=True, reverse=True)
    others = _array.reshape(others, tuple(shape[i] for i in perm))
    return _array.transpose(others, [int(i) for i in np.argsort(perm)])


class LogSumExp(_Reduce):
    """Fused for stability and speed: one pass, shifted by the max (no overflow), and its
    gradient ``exp(x - y)`` needs no softmax normalisation.
    """

    name = "logsumexp"
    need_outputs = True
    taylor = "composite"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        axes = self._axes(np.ndim(x))
        m = xp.max(x, axis=axes, keepdims=True) if np.size(x) else xp.zeros(())
        m = xp.where(xp.isfinite(m), m, 0)  # all -inf (or inf) slices: no shift
        with np.errstate(divide="ignore"):  # log(0) = -inf for empty or all -inf slices
            y = xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True)) + m
        outputs[0] = y if self.keepdims else xp.squeeze(y, axis=axes)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d logsumexp(x) = softmax(x) dx = exp(x - y) dx
        if prop_down[0]:
            x = inputs[0]
            y = self.expand(outputs[0].data, x.shape)
            gy = self.expand(outputs[0].grad, x.shape)
            x.store(gy * _math.exp(x.data - y), accum[0])

    def composition(self, x: Any) -> Any:
        # Taylor mode: log(sum(exp(x - m))) + m, m the max held constant (no jet depends on it)
        axes = self._axes(x.ndim)
        m = max_shift(x, axes)
        y = _math.log(sum(_math.exp(x - m), axes, True)) + m
        return y if self.keepdims else _array.reshape(y, tuple(self.output_shape(0)))


def max_shift(x: Any, axis: Any) -> Any:
    """The max of ``x``'s value along ``axis`` (kept), an array: a constant shift that makes an
    exponential stable, on which no Taylor coefficient depends.
    """
    a = x.d if isinstance(x, Variable) else x
    return a.max(axis=axis, keepdims=True) if a.size else a


def _batch_cumulative(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    (x,) = inputs
    return _batching.renew(self, axis=_batching.map_axis(self.axis, x.ndim - 1))(x)


class CumSum(Function, follows_shape=True):
    complex_values = "holomorphic"
    name = "cumsum"
    need_inputs = False
    batch_rule = _batch_cumulative
    taylor = "linear"

    def __init__(self, *, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> None:
        self.axis = axis
        self.exclusive = bool(exclusive)
        self.reverse = bool(reverse)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        _array.normalize_axis(self.name, self.axis, x.ndim)
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        axis = self.axis % np.ndim(x)
        rev = (_ALL,) * axis + (builtins.slice(None, None, -1),)
        if self.reverse:
            x = x[rev]
        y = xp.cumsum(x, axis=axis, dtype=float_dtype(x.dtype))
        if self.exclusive:  # shift by one: y_k = sum_{j<k} x_j
            lead = rev[:-1]
            head, body = (*lead, builtins.slice(0, 1)), (*lead, builtins.slice(0, -1))
            y = xp.concatenate([xp.zeros_like(y[head]), y[body]], axis=axis)
        outputs[0] = y[rev] if self.reverse else y

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a cumulative sum is the cumulative sum in the other direction
        if prop_down[0]:
            gx = cumsum(outputs[0].grad, self.axis, self.exclusive, not self.reverse)
            inputs[0].store(gx, accum[0])


class CumProd(Function, follows_shape=True):
    """Inclusive cumulative product along ``axis``; exclusive and reverse forms are
    compositions with shifts and flips (see :func:`cumprod`).
    """

    complex_values = "holomorphic"
    name = "cumprod"
    need_outputs = True
    batch_rule = _batch_cumulative

    def __init__(self, *, axis: int = 0) -> None:
        self.axis = axis

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        _array.normalize_axis(self.name, self.axis, x.ndim)
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        outputs[0] = xp.cumprod(x, axis=self.axis % np.ndim(x), dtype=float_dtype(x.dtype))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gx_i = sum_{k>=i} gy_k prod_{j<=k, j!=i} x_j = y_{i-1} s_i, where the reverse
        # recurrence s_i = gy_i + x_{i+1} s_{i+1} needs no division by x
        if prop_down[0]:
            x = inputs[0]
            axis = self.axis % len(x.shape)
            before = _shift(outputs[0].data, x.shape, axis, 1, 1.0)
            after = _shift(x.data, x.shape, axis, -1, 0.0)
            s = _greduction.linear_scan(after, outputs[0].grad, axis, reverse=True)
            x.store(before * s, accum[0])


def _shift(x: Any, shape: tuple[int, ...], axis: int, by: int, fill: float) -> Any:
    """``x`` moved by ``by`` = +1 (towards higher indices) or -1 along ``axis``, the freed
    place filled with ``fill``: a slice and a constant pad.
    """
    lead = (_ALL,) * axis
    width = [0] * (2 * (len(shape) - axis))
    if by > 0:
        cut, width[0] = builtins.slice(0, shape[axis] - 1), 1
    else:
        cut, width[1] = builtins.slice(1, None), 1
    return _array.Pad(pad_width=width, constant_value=fill)(_array.getitem(x, (*lead, cut)))


# ---------------------------------------------------------------- wrappers
@traced
def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Sum over ``axis`` (None: all axes; an int or a sequence of ints).

    >>> import numpy as np, hodiff.functions as F
    >>> F.sum(np.ones((2, 3)), axis=1).d
    array([3., 3.])
    """
    return Sum(axis=axis, keepdims=keepdims)(x)


@traced
def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Mean over ``axis`` (None: all axes): ``sum(x, axis) / n``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.mean(np.arange(6.0).reshape(2, 3), axis=0).d
    array([1.5, 2.5, 3.5])
    """
    return Mean(axis=axis, keepdims=keepdims)(x)


@traced
def max(
    x: Any,
    axis: Any = None,
    keepdims: bool = False,
    with_index: bool = False,
    only_index: bool = False,
) -> Any:
    """Maximum over ``axis``; the derivative goes to the maxima, split evenly among ties (in
    reverse mode, ``hd.jvp`` and Taylor mode alike).

    Args:
        x: input of any shape.
        axis: None (all axes), an int or a sequence of ints.
        keepdims: keep the reduced axes with size 1.
        with_index: also return the int64 index of the maximum (NNabla's): its position
            in the reduced axes flattened in order (the first of ties); not differentiable.
        only_index: return only that index.

    Returns:
        The maxima (numpy's shape); ``(maxima, index)`` with ``with_index``; the index alone
        with ``only_index``. The index has the shape of the maxima.

    >>> import numpy as np, hodiff.functions as F
    >>> F.max(np.array([[1.0, 5.0], [7.0, 2.0]]), axis=1).d
    array([5., 7.])
    >>> F.max(np.array([[1.0, 5.0], [7.0, 2.0]]), axis=1, only_index=True).d
    array([1, 0])
    """
    return _with_index("max", Max, x, axis, keepdims, with_index, only_index)


@traced
@real_values
def min(
    x: Any,
    axis: Any = None,
    keepdims: bool = False,
    with_index: bool = False,
    only_index: bool = False,
) -> Any:
    """``y = min(x)`` over ``axis`` (shape as in numpy).

    The derivative goes to the minima, split evenly among ties (in every mode). ``with_index`` and
    ``only_index`` as in :func:`max` (the index of the first minimum).

    >>> import numpy as np, hodiff.functions as F
    >>> y, i = F.min(np.array([[1.0, 5.0], [7.0, 2.0]]), axis=0, with_index=True)
    >>> y.d, i.d
    (array([1., 2.]), array([0, 1]))
    """
    return _with_index("min", Min, x, axis, keepdims, with_index, only_index)


def _with_index(
    name: str,
    cls: Any,
    x: Any,
    axis: Any,
    keepdims: bool,
    with_index: bool,
    only_index: bool,
) -> Any:
    """The reduction, its index over the reduced axes (flattened in order), or both."""
    if not (with_index or only_index):
        return cls(axis=axis, keepdims=keepdims)(x)
    shape = shape_of(x)
    red, kept, flat = _reduced_last(name, x, axis, shape)
    out_shape = kept_shape(shape, red) if keepdims else tuple(shape[a] for a in kept)
    value = None
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    if only_index or np.dtype(dtype).kind != "f":
        arg = _stats.argmax if name == "max" else _stats.argmin
        index = arg(flat, axis=-1)
    else:
        # NNabla's one function: the index is computed from the value, so that a forward of
        # the index computes the value too. The first position of the extremum (or of the
        # first NaN, which is then the extremum), as numpy's argmax/argmin.
        value = cls(axis=axis, keepdims=keepdims)(x)
        extremum = _array.reshape(value, (*(shape[a] for a in kept), 1))
        hit = _logic.logical_or(_array.equal(flat, extremum), _logic.not_equal(flat, flat))
        index = _stats.argmax(hit, axis=-1)
    if tuple(index.shape) != out_shape:
        index = _array.reshape(index, out_shape)
    if only_index:
        return index
    if value is None:
        value = cls(axis=axis, keepdims=keepdims)(x)
    return value, index


def _reduced_last(
    name: str, x: Any, axis: Any, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], Any]:
    """The reduced and kept axes of ``x``, and ``x`` with its kept axes first and its
    reduced ones flattened into the last (raises on an empty reduction).
    """
    red = normalize_axes(name, axis, len(shape))
    if not red or any(shape[a] == 0 for a in red):
        raise ValueError(
            f"{name}: with_index needs a non-empty reduction (x of shape {shape}, axis {axis})"
        )
    kept = tuple(a for a in range(len(shape)) if a not in red)
    order = (*kept, *red)
    moved = x if order == tuple(range(len(shape))) else _array.transpose(x, order)
    return red, kept, _array.reshape(moved, (*(shape[a] for a in kept), -1))


@traced
def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Product over ``axis``; derivatives of every order are exact with zeros in ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.prod(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=0).d
    array([3., 8.])
    """
    return Prod(axis=axis, keepdims=keepdims)(x)


@traced
def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """``log(sum(exp(x)))`` over ``axis``, computed as ``m + log(sum(exp(x - m)))`` with the
    maximum ``m``: no overflow for large ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> float(F.logsumexp(np.array([1e4, 1e4])).d) - 1e4
    0.6931471806
    """
    return LogSumExp(axis=axis, keepdims=keepdims)(x)


@traced
def cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Variable:
    """Cumulative sum along ``axis`` (NNabla's flags).

    ``y_k = sum_{j<=k} x_j``; ``exclusive``: ``j < k``; ``reverse``: sums run from the end.

    >>> import numpy as np, hodiff.functions as F
    >>> F.cumsum(np.array([1.0, 2.0, 3.0]), exclusive=True).d
    array([0., 1., 3.])
    """
    return CumSum(axis=axis, exclusive=exclusive, reverse=reverse)(x)


@traced
def cumprod(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Variable:
    """Cumulative product along ``axis`` (NNabla's flags); exact with zeros at every order.

    ``y_k = prod_{j<=k} x_j``; ``exclusive``: ``j < k`` (1 first); ``reverse``: from the end.

    >>> import numpy as np, hodiff.functions as F
    >>> F.cumprod(np.array([1.0, 2.0, 3.0])).d
    array([1., 2., 6.])
    """
    shape = _array.shape_of(x)
    axis = _array.normalize_axis("cumprod", axis, len(shape))
    if reverse:
        x = _array.flip(x, (axis,))
    y = CumProd(axis=axis)(x)
    if exclusive:
        y = _shift(y, shape, axis, 1, 1.0)
    return _array.flip(y, (axis,)) if reverse else y


@traced
def norm(x: Any, p: float | None = 2, axis: Any = None, keepdims: bool = False) -> Variable:
    """The p-norm over ``axis``: ``(sum |x|^p)^(1/p)`` (None or 2: Euclidean; ``inf``: max|x|).

    Composed of differentiable functions: the gradient is singular where the norm is 0
    (for ``p < 1`` also where an element is 0). A complex ``x`` has a real norm, of
    ``|x|`` (for ``p = 2``: ``sqrt(sum Re(x)^2 + Im(x)^2)``, gradient ``gy conj(x) / |x|``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.norm(np.array([3.0, 4.0])).d
    array(5.)
    """
    p = 2.0 if p is None else float(p)
    if p == 2.0 and getattr(x, "dtype", np.dtype(float)).kind == "c":  # |z|^2 = a^2 + b^2
        a, b = _math.real(x), _math.imag(x)
        return _arith.pow_scalar(sum(a * a + b * b, axis, keepdims), 0.5)
    if p == 2.0:
        return _arith.pow_scalar(sum(_arith.mul2(x, x), axis, keepdims), 0.5)
    if p == math.inf:
        return max(_arith.abs(x), axis, keepdims)
    if p <= 0:
        raise ValueError(f"norm: p must be positive, got {p}")
    a = _arith.abs(x)
    if p == 1.0:
        return sum(a, axis, keepdims)
    return _arith.pow_scalar(sum(_arith.pow_scalar(a, p), axis, keepdims), 1.0 / p)
