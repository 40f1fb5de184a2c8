"""Gradient-only functions of the convolution family: the filter gradient."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Function, Slot, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import _conv_kernels as _kernels
from hodiff.functions import array as _array
from hodiff.functions import conv as _conv

__all__ = ["convolution_filter_grad"]

Ints = tuple[int, ...]


class ConvolutionFilterGrad(Function, follows_shape=False):
    """``gw[o, c, k] = sum_{b, p} gy[b, o, p] x[b, c, s p + d k - pad]`` (per group).

    The gradient of :func:`hodiff.functions.convolution` with respect to its
    weight (``x`` the convolution's input, ``gy`` the gradient of its output),
    and of :func:`hodiff.functions.deconvolution` with the roles swapped. It is
    bilinear in ``(x, gy)``: its gradients are a deconvolution (in ``x``) and a
    convolution (in ``gy``) with the incoming gradient as weight.
    """

    need_inputs = (0, 1)
    taylor = "multilinear"

    def __init__(self, *, kernel: Sequence[int], **params: Any) -> None:
        self.kernel = tuple(int(k) for k in kernel)
        self.conv = _conv.Convolution(**params)

    def weight_shape(self, x_shape: Ints, gy_shape: Ints) -> Ints:
        conv = self.conv
        name = self.name
        _kernels.n_spatial(name, x_shape, conv.base_axis)
        if len(gy_shape) != len(x_shape):
            raise ValueError(
                f"{name}: x of shape {x_shape} and gy of shape {gy_shape} must "
                f"have the same number of dims"
            )
        channel = len(x_shape) - 1 if conv.channel_last else conv.base_axis
        c, oc = x_shape[channel], gy_shape[channel]
        if c % conv.group or oc % conv.group:
            raise ValueError(
                f"{name}: the channels of x of shape {x_shape} and gy of shape "
                f"{gy_shape} must be divisible by group={conv.group}"
            )
        cg = c // conv.group
        return (oc, *self.kernel, cg) if conv.channel_last else (oc, cg, *self.kernel)

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[Ints, Any]]:
        x, gy = inputs
        w_shape = self.weight_shape(x.shape, gy.shape)
        g = self.conv.geometry(x.shape, w_shape, check=True)
        expected = g.shape(g.y_channels, g.y_spatial, self.conv.channel_last)
        if tuple(gy.shape) != expected:
            raise ValueError(
                f"{self.name}: gy of shape {gy.shape} must be {expected}, the shape of the "
                f"convolution of x of shape {x.shape} with a kernel {self.kernel}"
            )
        return [(w_shape, float_dtype(np.result_type(x.dtype, gy.dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, gy = inputs
        xp = array_module(x)
        conv = self.conv
        dtype = float_dtype(np.result_type(x.dtype, gy.dtype))
        xc = _kernels.to_cb(xp, x.astype(dtype, copy=False), conv.base_axis, conv.channel_last)
        gyc = _kernels.to_cb(xp, gy.astype(dtype, copy=False), conv.base_axis, conv.channel_last)
        gw = _kernels.conv_filter_grad(
            xp, xc, gyc, self.kernel, conv.pad, conv.stride, conv.dilation, conv.group
        )
        outputs[0] = _kernels.weight_from_channels_first(xp, gw, conv.channel_last)

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        ggw = outputs[0].grad
        x, gy = inputs
        conv = self.conv
        params = conv.params()
        if prop_down[0]:
            # d/dx <ggw, gw> = conv^T(gy, ggw): a deconvolution back to x's size
            g = conv.geometry(x.shape, self.weight_shape(x.shape, gy.shape))
            op = tuple(
                n + 2 * p - d * (k - 1) - 1 - s * (o - 1)
                for n, o, k, p, s, d in zip(
                    g.x_spatial,
                    g.y_spatial,
                    g.kernel,
                    conv.pad,
                    conv.stride,
                    conv.dilation,
                    strict=True,
                )
            )
            x.store(_conv.Deconvolution(**params, output_padding=op)(gy.data, ggw), accum[0])
        if prop_down[1]:
            # d/dgy <ggw, gw> = conv(x, ggw)
            gy.store(_conv.Convolution(**params)(x.data, ggw), accum[1])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # a filter gradient per example: the examples become groups of one grouped filter gradient
        size = _batching.batch_size(inputs, axes)
        x, gy = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        conv = self.conv
        ba = conv.base_axis if conv.base_axis >= 0 else conv.base_axis + x.ndim - 1
        params = {**conv.params(), "base_axis": ba, "group": conv.group * size}
        f = ConvolutionFilterGrad(kernel=self.kernel, **params)
        fold = _conv.fold_batch
        gw = f(fold(x, ba, conv.channel_last), fold(gy, ba, conv.channel_last))
        return _array.reshape(gw, (size, gw.shape[0] // size, *gw.shape[1:]))


def convolution_filter_grad(
    x: Any,
    gy: Any,
    kernel: Sequence[int],
    base_axis: int = 1,
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    group: int = 1,
    channel_last: bool = False,
) -> Variable:
    """The weight gradient of ``convolution(x, w, ...)`` for an output gradient ``gy``.

    Returns an array of the weight's shape, ``(C', C / group, *kernel)``
    (``channel_last``: ``(C', *kernel, C / group)``); the arguments are those of
    :func:`hodiff.functions.convolution`.

    >>> import numpy as np
    >>> convolution_filter_grad(np.ones((1, 1, 4)), np.ones((1, 1, 2)), kernel=(3,)).d
    array([[[2., 2., 2.]]])
    """
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    n = _kernels.n_spatial("convolution_filter_grad", shape, base_axis)
    args = _kernels.spatial_args(
        "convolution_filter_grad", shape, n, pad=pad, stride=stride, dilation=dilation
    )
    f = ConvolutionFilterGrad(
        kernel=kernel, base_axis=base_axis, group=group, channel_last=channel_last, **args
    )
    return f(x, gy)
