"""Gradient-only functions of the pooling family: the transposes of the poolings.

Each is linear in its float input, and its own gradient is the pooling it
transposes, so every order keeps the same array kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import _pool_kernels as _kernels
from hodiff.functions import array as _array
from hodiff.functions import pooling as _pooling
from hodiff.grad_functions import array as _garray

__all__ = [
    "average_pooling_backward",
    "interpolate_backward",
    "max_pooling_backward",
    "sum_pooling_backward",
]

Ints = tuple[int, ...]
Spec = list[tuple[Ints, Any]]


class PoolingBackward(Function, follows_shape=False):
    """``gx = P^T gy`` for the sum or average pooling ``P`` of an input of ``shape``."""

    need_inputs = False
    taylor = "linear"

    def __init__(
        self, *, shape: Sequence[int], average: bool, including_pad: bool, **params: Any
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.average = bool(average)
        self.including_pad = bool(including_pad)
        self.pool = (
            _pooling.AveragePooling(including_pad=including_pad, **params)
            if average
            else _pooling.SumPooling(**params)
        )

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        gy = inputs[0]
        expected = self.pool.windows(self.shape, check=True).out_shape(self.shape)
        if tuple(gy.shape) != expected:
            raise ValueError(
                f"{self.name}: gy of shape {gy.shape} must be {expected}, the "
                f"pooled shape of an input of shape {self.shape}"
            )
        return [(self.shape, float_dtype(gy.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        gy = inputs[0]
        xp = array_module(gy)
        gy = gy.astype(float_dtype(gy.dtype), copy=False)
        w = self.pool.windows(self.shape)
        if self.average:
            gy = gy / xp.asarray(w.counts(gy.ndim, self.including_pad), dtype=gy.dtype)
        outputs[0] = _pooling.window_scatter(xp, gy, w, self.shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of the transpose: the pooling itself
        if prop_down[0]:
            inputs[0].store(self.pool(outputs[0].grad), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (gy,) = inputs
        return _batching.renew(self, shape=(gy.shape[0], *self.shape))(gy)


class MaxPoolingBackward(Function, follows_shape=False):
    """``gx.flat[index] += gy``: scatters each window's gradient to its maximum."""

    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        gy, index = inputs
        if index.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: index must be integer, got {index.dtype}")
        if tuple(gy.shape) != tuple(index.shape):
            raise ValueError(
                f"{self.name}: gy of shape {gy.shape} and index of shape "
                f"{index.shape} must have the same shape"
            )
        return [(self.shape, float_dtype(gy.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        gy, index = inputs
        xp = array_module(gy)
        dtype = float_dtype(gy.dtype)
        size = int(np.prod(self.shape))
        gx = xp.bincount(index.reshape(-1), weights=gy.reshape(-1), minlength=size)
        outputs[0] = gx.astype(dtype, copy=False).reshape(self.shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a scatter is the gather; the index gets no gradient
        if prop_down[0]:
            inputs[0].store(_pooling.MaxPooling()(outputs[0].grad, inputs[1].data), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # per example: gx_b.flat[index_b] += gy_b, i.e. a gather_add along the flattened example
        size = _batching.batch_size(inputs, axes)
        gy, index = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        n = int(np.prod(self.shape, dtype=np.int64))
        gx = _garray.gather_add(
            _array.reshape(gy, (size, -1)),
            _array.reshape(index, (size, -1)),
            (size, n),
            axis=1,
            batch_dims=1,
        )
        return _array.reshape(gx, (size, *self.shape))


class InterpolateBackward(_kernels.InterpolateBase, follows_shape=False):
    """``gx = gy`` multiplied along each spatial axis by the transposed resize matrix."""

    def __init__(self, *, input_size: Sequence[int], **params: Any) -> None:
        super().__init__(**params)
        self.input_size = tuple(int(s) for s in input_size)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        gy = inputs[0]
        axes = self.check(gy.shape)
        int_size = _kernels.int_tuple(
            self.name, "input_size", self.input_size, len(self.output_size), 1
        )
        shape = list(gy.shape)
        for ax, n, o in zip(axes, int_size, self.output_size, strict=True):
            if shape[ax] != o:
                raise ValueError(
                    f"{self.name}: gy of shape {gy.shape} must have the sizes "
                    f"{self.output_size} on its spatial axes"
                )
            shape[ax] = n
        return [(tuple(shape), float_dtype(gy.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        gy = inputs[0]
        gy = gy.astype(float_dtype(gy.dtype), copy=False)
        axes = _kernels.spatial_axes(self.name, gy.shape, len(self.output_size), self.channel_last)
        mats = [m.T for m in self.matrices(self.input_size)]
        outputs[0] = _kernels.resize(array_module(gy), gy, axes, mats)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of the transposed resize: the resize itself
        if prop_down[0]:
            f = _pooling.Interpolate(output_size=self.output_size, **self.params())
            inputs[0].store(f(outputs[0].grad), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        return self(*inputs)  # windows over the last (spatial) axes: leading axes are carried


# ---------------------------------------------------------------- wrappers
def sum_pooling_backward(
    gy: Any,
    shape: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
) -> Variable:
    """The gradient of :func:`hodiff.functions.sum_pooling` for an input of ``shape``.

    >>> import numpy as np
    >>> sum_pooling_backward(np.array([[1.0, 2.0]]), (1, 4), (2,)).d
    array([[1., 1., 2., 2.]])
    """
    args = _pooling.pool_args("sum_pooling", kernel, stride, pad)
    return PoolingBackward(
        shape=shape,
        average=False,
        including_pad=True,
        ignore_border=ignore_border,
        channel_last=channel_last,
        **args,
    )(gy)


def average_pooling_backward(
    gy: Any,
    shape: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    ignore_border: bool = True,
    pad: Sequence[int] | None = None,
    channel_last: bool = False,
    including_pad: bool = True,
) -> Variable:
    """The gradient of :func:`hodiff.functions.average_pooling` for an input of ``shape``.

    >>> import numpy as np
    >>> average_pooling_backward(np.array([[1.0, 2.0]]), (1, 4), (2,)).d
    array([[0.5, 0.5, 1. , 1. ]])
    """
    args = _pooling.pool_args("average_pooling", kernel, stride, pad)
    return PoolingBackward(
        shape=shape,
        average=True,
        including_pad=including_pad,
        ignore_border=ignore_border,
        channel_last=channel_last,
        **args,
    )(gy)


def max_pooling_backward(gy: Any, index: Any, shape: Sequence[int]) -> Variable:
    """The gradient of :func:`hodiff.functions.max_pooling`: ``gx.flat[index] += gy``.

    >>> import numpy as np
    >>> max_pooling_backward(np.array([1.0, 2.0]), np.array([3, 3]), (4,)).d
    array([0., 0., 0., 3.])
    """
    return MaxPoolingBackward(shape=shape)(gy, index)


def interpolate_backward(
    gy: Any,
    input_size: Sequence[int],
    output_size: Sequence[int],
    mode: str = "linear",
    align_corners: bool = False,
    half_pixel: bool = False,
    half_pixel_for_nn: bool = False,
    channel_last: bool = False,
) -> Variable:
    """The gradient of :func:`hodiff.functions.interpolate` (spatial sizes ``input_size``).

    >>> import numpy as np
    >>> interpolate_backward(np.ones((1, 3)), (2,), (3,), align_corners=True).d
    array([[1.5, 1.5]])
    """
    return InterpolateBackward(
        input_size=input_size,
        output_size=output_size,
        mode=mode,
        align_corners=align_corners,
        half_pixel=half_pixel,
        half_pixel_for_nn=half_pixel_for_nn,
        channel_last=channel_last,
    )(gy)
