"""Pooling and resizing: max, average, sum and global average pooling, unpooling, interpolate.

Semantics are NNabla's. ``kernel`` fixes the number N of spatial axes: the last
N axes of ``x`` (``channel_last``: the N axes before the last). ``stride``
defaults to ``kernel``, ``pad`` to zeros. A window ``j`` covers input indices
``[j s - p, j s - p + k)`` clipped to the input: padding never wins a max and
adds nothing to a sum. The output size is ``(L + 2p - k) // s + 1`` with
``ignore_border`` (windows must fit in the padded input) and
``(L + p - 1) // s + 1`` without (a last partial window is kept).

Every pooling is linear in ``x`` once the max positions are fixed, and is paired
with its transpose (``hodiff.grad_functions.pooling``): window sums scatter
back through :class:`~hodiff.grad_functions.pooling.PoolingBackward`, max
pooling is a gather at the argmax positions (computed once, by the
non-differentiable :class:`MaxPoolingIndex`) whose transpose is the scatter
:class:`~hodiff.grad_functions.pooling.MaxPoolingBackward`, and interpolation
is a product of one small matrix per axis, transposed by
:class:`~hodiff.grad_functions.pooling.InterpolateBackward`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.tracing import shape_bound, traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import indexing as _indexing
from hodiff.functions import reduction as _reduction
from hodiff.functions._pool_kernels import (
    InterpolateBase,
    int_tuple,
    resize,
    spatial_axes,
)
from hodiff.grad_functions import pooling as _gpool

__all__ = [
    "average_pooling",
    "global_average_pooling",
    "interpolate",
    "max_pooling",
    "max_pooling_backward",
    "sum_pooling",
    "unpooling",
]

Ints = tuple[int, ...]
Spec = list[tuple[Ints, Any]]


# ---------------------------------------------------------------- window geometry
@dataclass(frozen=True)
class Windows:
    """Where the pooling windows of one input shape lie, axis by axis."""

    axes: Ints
    size: Ints
    kernel: Ints
    stride: Ints
    pad: Ints
    out: Ints

    def out_shape(self, shape: Ints) -> Ints:
        s = list(shape)
        for a, o in zip(self.axes, self.out, strict=True):
            s[a] = o
        return tuple(s)

    def pads(self) -> list[tuple[int, int]]:
        """(before, after) zeros per spatial axis so that every window lies inside."""
        return [
            (p, max(0, (o - 1) * s + k - p - n))
            for n, k, s, p, o in zip(
                self.size, self.kernel, self.stride, self.pad, self.out, strict=True
            )
        ]

    def padded(self, xp: Any, x: Any, value: float = 0.0) -> Any:
        pads = self.pads()
        if not any(b or a for b, a in pads):
            return x
        shape = list(x.shape)
        inner: list[Any] = [slice(None)] * x.ndim
        for ax, (b, a) in zip(self.axes, pads, strict=True):
            inner[ax] = slice(b, b + shape[ax])
            shape[ax] += b + a
        y = xp.full(tuple(shape), value, dtype=x.dtype)
        y[tuple(inner)] = x
        return y

    def unpadded(self, y: Any) -> Any:
        key: list[Any] = [slice(None)] * y.ndim
        for ax, p, n in zip(self.axes, self.pad, self.size, strict=True):
            key[ax] = slice(p, p + n)
        return y[tuple(key)]

    def offsets(self) -> Any:
        return itertools.product(*(range(k) for k in self.kernel))

    def window(self, offs: Ints, ndim: int) -> tuple[Any, ...]:
        """The slice of the padded input seen at kernel offset ``offs`` by every window."""
        key: list[Any] = [slice(None)] * ndim
        for ax, o, s, n in zip(self.axes, offs, self.stride, self.out, strict=True):
            key[ax] = slice(o, o + s * (n - 1) + 1, s)
        return tuple(key)

    def counts(self, ndim: int, including_pad: bool) -> np.ndarray:
        """Divisor of average pooling per output window, broadcastable to the output."""
        total = np.ones((1,) * ndim)
        for ax, n, k, s, p, o in zip(
            self.axes, self.size, self.kernel, self.stride, self.pad, self.out, strict=True
        ):
            start = np.arange(o) * s - p
            if including_pad:
                c = np.minimum(start + k, n + p) - start
            else:
                c = np.minimum(start + k, n) - np.maximum(start, 0)
            shape = [1] * ndim
            shape[ax] = o
            total = total * c.reshape(shape)
        return total


def window_sum(xp: Any, x: Any, w: Windows) -> Any:
    """``y[j] = sum of x over window j`` (zeros outside the input)."""
    xpad = w.padded(xp, x)
    y = None
    for offs in w.offsets():
        v = xpad[w.window(offs, x.ndim)]
        if y is None:
            y = v.copy()
        else:
            y += v
    return y


def window_scatter(xp: Any, gy: Any, w: Windows, shape: Ints) -> Any:
    """The transpose of :func:`window_sum`: every window adds its ``gy`` to its inputs."""
    g = w.padded(xp, xp.zeros(shape, dtype=gy.dtype))
    for offs in w.offsets():
        g[w.window(offs, gy.ndim)] += gy
    return w.unpadded(g)


class _Pool(Function, register=False, follows_shape=True):
    """Static arguments of the window poolings (resolved tuples)."""

    def __init__(
        self,
        *,
        kernel: Sequence[int],
        stride: Sequence[int],
        ignore_border: bool,
        pad: Sequence[int],
        channel_last: bool,
    ) -> None:
        self.kernel = tuple(kernel)
        self.stride = tuple(stride)
        self.ignore_border = bool(ignore_border)
        self.pad = tuple(pad)
        self.channel_last = bool(channel_last)

    def params(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "stride": self.stride,
            "ignore_border": self.ignore_border,
            "pad": self.pad,
            "channel_last": self.channel_last,
        }

    def windows(self, shape: Ints, check: bool = False) -> Windows:
        """The window geometry for an input of ``shape``; ``check`` raises ValueErrors."""
        n = len(self.kernel)
        name = self.name
        axes = spatial_axes(name, shape, n, self.channel_last)
        size = tuple(shape[a] for a in axes)
        if check:
            for arg, low in (("kernel", 1), ("stride", 1), ("pad", 0)):
                int_tuple(name, arg, getattr(self, arg), n, low)
            for i, (m, k, p) in enumerate(zip(size, self.kernel, self.pad, strict=True)):
                if p >= k:
                    raise ValueError(
                        f"{name}: pad={self.pad} must be smaller than kernel={self.kernel} "
                        f"(a window would see only padding)"
                    )
                if self.ignore_border and k > m + 2 * p:
                    raise ValueError(
                        f"{name}: kernel={self.kernel} is larger than the padded input along "
                        f"spatial axis {i} of x of shape {shape} ({m} + 2 * pad {p})"
                    )
        out = tuple(
            (m + 2 * p - k) // s + 1 if self.ignore_border else (m + p - 1) // s + 1
            for m, k, s, p in zip(size, self.kernel, self.stride, self.pad, strict=True)
        )
        return Windows(axes, size, self.kernel, self.stride, self.pad, out)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        return [(self.windows(x.shape, check=True).out_shape(x.shape), float_dtype(x.dtype))]


def _batch_leading(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    return self(*inputs)  # windows over the last (spatial) axes: leading axes are carried


class SumPooling(_Pool):
    need_inputs = False
    batch_rule = _batch_leading
    taylor = "linear"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        x = x.astype(float_dtype(x.dtype), copy=False)
        outputs[0] = window_sum(array_module(x), x, self.windows(x.shape))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # every input of a window gets that window's gy
        if prop_down[0]:
            gx = _gpool.PoolingBackward(
                shape=inputs[0].shape, average=False, including_pad=True, **self.params()
            )(outputs[0].grad)
            inputs[0].store(gx, accum[0])


class AveragePooling(_Pool):
    need_inputs = False
    batch_rule = _batch_leading
    taylor = "linear"

    def __init__(self, *, including_pad: bool, **params: Any) -> None:
        super().__init__(**params)
        self.including_pad = bool(including_pad)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        x = x.astype(float_dtype(x.dtype), copy=False)
        w = self.windows(x.shape)
        count = xp.asarray(w.counts(x.ndim, self.including_pad), dtype=x.dtype)
        outputs[0] = window_sum(xp, x, w) / count

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # every input of a window gets that window's gy / count
        if prop_down[0]:
            gx = _gpool.PoolingBackward(
                shape=inputs[0].shape,
                average=True,
                including_pad=self.including_pad,
                **self.params(),
            )(outputs[0].grad)
            inputs[0].store(gx, accum[0])


class MaxPoolingIndex(_Pool):
    """Flat index into ``x`` of the maximum of each window (first one on ties); int64.

    Not differentiable: it only decides where :class:`MaxPooling` gathers.
    """

    differentiable = False
    name = "max_pooling"  # its argument errors are max_pooling's

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        return [(self.windows(x.shape, check=True).out_shape(x.shape), np.dtype(np.int64))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        w = self.windows(x.shape)
        xpad = w.padded(xp, x.astype(float_dtype(x.dtype), copy=False), -np.inf)
        best: Any = None
        arg: Any = None
        for t, offs in enumerate(w.offsets()):
            v = xpad[w.window(offs, x.ndim)]
            if best is None:
                best, arg = v, xp.zeros(v.shape, dtype=np.int64)
            else:
                better = v > best
                best = xp.where(better, v, best)
                arg = xp.where(better, t, arg)
        # kernel offset -> input coordinate on each axis -> flat index
        flat = xp.zeros(arg.shape, dtype=np.int64)
        spatial = dict(zip(w.axes, range(len(w.axes)), strict=True))
        step = math.prod(x.shape)
        for ax in range(x.ndim):
            step //= x.shape[ax]
            shape = [1] * x.ndim
            shape[ax] = arg.shape[ax]
            pos = xp.arange(arg.shape[ax], dtype=np.int64).reshape(shape)
            if ax in spatial:
                i = spatial[ax]
                k = (arg // math.prod(w.kernel[i + 1 :])) % w.kernel[i]
                pos = xp.clip(pos * w.stride[i] - w.pad[i] + k, 0, w.size[i] - 1)
            flat = flat + pos * step
        outputs[0] = flat

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # the windows of the batch at once; the flat indices then made per example
        (x,) = inputs
        return _LocalIndex(size=math.prod(x.shape[1:]))(self(x))


class MaxPooling(Function, follows_shape=True):
    """``y = x.flat[index]``: max pooling as a gather at the argmax positions ``index``.

    :func:`max_pooling` computes ``index`` with :class:`MaxPoolingIndex` and calls
    this; its transpose is :class:`~hodiff.grad_functions.pooling.MaxPoolingBackward`.
    """

    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, index = inputs
        if index.dtype.kind not in "iu":
            raise TypeError(f"max_pooling: index must be integer, got {index.dtype}")
        return [(index.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, index = inputs
        outputs[0] = array_module(x).take(x.astype(float_dtype(x.dtype), copy=False), index)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # each window's gy goes to its max; the index gets no gradient
        if prop_down[0]:
            gx = _gpool.MaxPoolingBackward(shape=inputs[0].shape)(outputs[0].grad, inputs[1].data)
            inputs[0].store(gx, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        x, index = inputs
        if axes[0] is None:  # one x, an index per example: take from the same x
            return self(x, index)
        size = x.shape[0]
        index = _batching.batched(index, axes[1], size)
        y = _indexing.gather(
            _array.reshape(x, (size, -1)), _array.reshape(index, (size, -1)), axis=1, batch_dims=1
        )
        y = _array.reshape(y, tuple(index.shape))
        return y if y.dtype.kind == "f" else _arith_float(y)


# ---------------------------------------------------------------- interpolation
# the resize matrices and InterpolateBase are in _pool_kernels.py (shared with the transpose)
class Interpolate(InterpolateBase, follows_shape=True):
    batch_rule = _batch_leading

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        shape = list(x.shape)
        for ax, o in zip(self.check(x.shape), self.output_size, strict=True):
            shape[ax] = o
        return [(tuple(shape), float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        x = x.astype(float_dtype(x.dtype), copy=False)
        axes = spatial_axes(self.name, x.shape, len(self.output_size), self.channel_last)
        mats = self.matrices(tuple(x.shape[a] for a in axes))
        outputs[0] = resize(array_module(x), x, axes, mats)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a product of per-axis matrices: the transposed matrices
        if prop_down[0]:
            shape = inputs[0].shape
            axes = spatial_axes(self.name, shape, len(self.output_size), self.channel_last)
            gx = _gpool.InterpolateBackward(
                input_size=tuple(shape[a] for a in axes),
                output_size=self.output_size,
                **self.params(),
            )(outputs[0].grad)
            inputs[0].store(gx, accum[0])


# ---------------------------------------------------------------- wrappers
def _shape(x: Any) -> Ints:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def pool_args(name: str, kernel: Any, stride: Any, pad: Any) -> dict[str, Ints]:
    kernel = int_tuple(name, "kernel", kernel, None, 1)
    n = len(kernel)
    return {
        "kernel": kernel,
        "stride": kernel if stride is None else int_tuple(name, "stride", stride, n, 1),
        "pad": (0,) * n if pad is None else int_tuple(name, "pad", pad, n, 0),
    }


def max_pooling_index(
    x: Any,
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
) -> Variable:
    """Flat indices into ``x`` of the window maxima of :func:`max_pooling` (int64, no gradient).

    >>> import numpy as np
    >>> max_pooling_index(np.array([[3.0, 1.0, 2.0, 5.0]]), (2,)).d
    array([[0, 3]])
    """
    args = pool_args("max_pooling", kernel, stride, pad)
    return MaxPoolingIndex(ignore_border=ignore_border, channel_last=channel_last, **args)(x)


@traced
@real_values
def max_pooling_backward(
    dy: Any,
    x: Any,
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
) -> Variable:
    """NNabla's max pooling gradient: ``dy`` scattered to the first maximum of each window.

    The gradient of :func:`max_pooling` with respect to ``x`` (zeros off the maxima), as
    NNabla's ``max_pooling_backward(dy, x, ...)``.

    Linear in ``dy`` (its gradient is the max pooling's gather); ``x`` only selects the
    positions, so its gradient is zero. Arguments after ``x`` as :func:`max_pooling`.

    Returns:
        The shape of ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.max_pooling_backward(np.array([[10.0, 20.0]]), np.array([[3.0, 1.0, 2.0, 5.0]]), (2,)).d
    array([[10.,  0.,  0., 20.]])
    """
    index = max_pooling_index(x, kernel, stride, ignore_border, pad, channel_last)
    if tuple(_indexing.shape_of(dy)) != tuple(index.shape):
        raise ValueError(
            f"max_pooling_backward: dy of shape {_indexing.shape_of(dy)} must have the shape"
            f" {index.shape} of max_pooling(x) for x of shape {_indexing.shape_of(x)}"
        )
    return _gpool.max_pooling_backward(dy, index, _indexing.shape_of(x))


@traced
def max_pooling(
    x: Any,
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
) -> Variable:
    """Max pooling, as NNabla's: ``y[j] = max of x over window j`` (padding never wins).

    >>> import numpy as np, hodiff.functions as F
    >>> F.max_pooling(np.arange(16.0).reshape(1, 4, 4), (2, 2)).d
    array([[[ 5.,  7.],
            [13., 15.]]])

    Args:
        x: ``(..., L_1, ..., L_N)`` (``channel_last``: ``(..., L_1, ..., L_N, C)``).
        kernel: window size per spatial axis; its length N sets the spatial axes.
        stride: window step per axis (default ``kernel``).
        ignore_border: drop (True) or keep (False) a last window that overhangs
            the padded input.
        pad: padding on both sides per axis (default 0; must be ``< kernel``).
        channel_last: channels on the last axis.

    Returns:
        The pooled array; ``L'_i = (L_i + 2 p_i - k_i) // s_i + 1``
        (``(L_i + p_i - 1) // s_i + 1`` without ``ignore_border``). The gradient
        goes to the first maximum of each window.

    """
    index = max_pooling_index(x, kernel, stride, ignore_border, pad, channel_last)
    return MaxPooling()(x, index)


@traced
def average_pooling(
    x: Any,
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
    including_pad: bool = True,
) -> Variable:
    """Average pooling, as NNabla's: ``y[j] = (sum of x over window j) / count_j``.

    ``count_j`` is the window's size clipped to the padded input
    (``including_pad=True``) or to the input itself (False). Other arguments as
    in :func:`max_pooling`.

    >>> import numpy as np, hodiff.functions as F
    >>> F.average_pooling(np.ones((1, 3)), (2,), pad=(1,), including_pad=True).d
    array([[0.5, 1. ]])
    """
    args = pool_args("average_pooling", kernel, stride, pad)
    return AveragePooling(
        ignore_border=ignore_border, channel_last=channel_last, including_pad=including_pad, **args
    )(x)


@traced
def sum_pooling(
    x: Any,
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
) -> Variable:
    """Sum pooling, as NNabla's: ``y[j] = sum of x over window j``; arguments as in
    :func:`max_pooling`.

    >>> import numpy as np, hodiff.functions as F
    >>> F.sum_pooling(np.arange(5.0)[None], (2,), ignore_border=False).d
    array([[1., 5., 4.]])
    """
    args = pool_args("sum_pooling", kernel, stride, pad)
    return SumPooling(ignore_border=ignore_border, channel_last=channel_last, **args)(x)


@traced
@real_values
def global_average_pooling(x: Any) -> Variable:
    """The mean over all axes after the second, as NNabla's: ``(N, C, ...) -> (N, C, 1, 1)``.

    A composition (sum, scale, reshape), so its gradients of every order are theirs.

    >>> import numpy as np, hodiff.functions as F
    >>> F.global_average_pooling(np.arange(8.0).reshape(1, 2, 2, 2)).d
    array([[[[1.5]],
    <BLANKLINE>
            [[5.5]]]])
    """
    shape = _shape(x)
    if len(shape) < 2:
        raise ValueError(f"global_average_pooling: x of shape {shape} needs at least 2 dims")
    axes = tuple(range(2, len(shape)))
    y = _reduction.Mean(axis=axes)(x) if axes else x * 1.0
    return _array.reshape(y, (*shape[:2], 1, 1))


@traced
@real_values
def unpooling(x: Any, kernel: Sequence[int], channel_last: bool = False) -> Variable:
    """Unpooling, as NNabla's: every element repeated ``kernel[i]`` times along spatial axis i.

    ``y[k_1 i_1 + j_1, ..., k_N i_N + j_N] = x[i_1, ..., i_N]`` for ``0 <= j_i < k_i``.
    A composition (reshape, broadcast, reshape): its gradient is a sum pooling.

    >>> import numpy as np, hodiff.functions as F
    >>> F.unpooling(np.array([[1.0, 2.0]]), (2,)).d
    array([[1., 1., 2., 2.]])
    """
    kernel = int_tuple("unpooling", "kernel", kernel, None, 1)
    shape = _shape(x)
    axes = spatial_axes("unpooling", shape, len(kernel), channel_last)
    spread, wide, out = [], [], []
    for ax, n in enumerate(shape):
        if ax in axes:
            k = kernel[axes.index(ax)]
            spread += [n, 1]
            wide += [n, k]
            out.append(n * k)
        else:
            spread.append(n)
            wide.append(n)
            out.append(n)
    y = _array.broadcast(_array.reshape(x, spread), tuple(wide))
    return _array.reshape(y, tuple(out))


@traced
def interpolate(
    x: Any,
    scale: Sequence[float] | None = None,
    output_size: Sequence[int] | None = None,
    mode: str = "linear",
    align_corners: bool = False,
    half_pixel: bool = False,
    half_pixel_for_nn: bool = False,
    channel_last: bool = False,
) -> Variable:
    """Resize the last N axes (``channel_last``: the N before the last), as NNabla's.

    ``output_size`` (or ``floor(scale[i] * L_i)``) gives the new sizes. The input
    coordinate of output index ``i`` is ``i (L - 1) / (L' - 1)`` (``align_corners``),
    ``max(0, (i + 0.5) L / L' - 0.5)`` (``half_pixel``) or ``i L / L'``; mode
    ``"linear"`` interpolates between the two neighbours (clamped at the end),
    ``"nearest"`` takes the one below (``half_pixel_for_nn``: at ``(i + 0.5) L / L'``).
    Separable: one small matrix per axis, so its gradient is the transposed resize.

    >>> import numpy as np, hodiff.functions as F
    >>> F.interpolate(np.array([[0.0, 1.0]]), output_size=(3,), align_corners=True).d
    array([[0. , 0.5, 1. ]])
    """
    shape = _shape(x)
    if output_size is None:
        if scale is None:
            raise ValueError("interpolate: give scale or output_size")
        scale = (scale,) if isinstance(scale, int | float) else tuple(scale)
        axes = spatial_axes("interpolate", shape, len(scale), channel_last)
        output_size = tuple(math.floor(s * shape[a]) for s, a in zip(scale, axes, strict=True))
    size = int_tuple("interpolate", "output_size", output_size, None, 1)
    y = Interpolate(
        output_size=size,
        mode=mode,
        align_corners=align_corners,
        half_pixel=half_pixel,
        half_pixel_for_nn=half_pixel_for_nn,
        channel_last=channel_last,
    )(x)
    return y if scale is None else shape_bound(y)  # an output size from the shape and scale


# ---------------------------------------------------------------- batching helpers (hd.vmap)


class _LocalIndex(Function, register=False):
    """``index % size``: flat indices into a batch made flat indices into each example."""

    differentiable = False
    need_inputs = False
    batch_rule = _batching.elementwise

    def __init__(self, *, size: int) -> None:
        self.size = int(size)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [(inputs[0].shape, inputs[0].dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] % self.size


def _arith_float(y: Any) -> Any:
    return y * 1.0
