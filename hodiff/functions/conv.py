"""Convolutions: ``convolution``, ``deconvolution`` (transposed) and ``depthwise_convolution``.

Layouts follow NNabla. ``x`` is ``(*batch, C, *spatial)`` (``channel_last``:
``(*batch, *spatial, C)``), the batch being the axes before ``base_axis``. The
convolution weight is ``(C_out, C_in / group, *kernel)`` (``channel_last``:
``(C_out, *kernel, C_in / group)``); the deconvolution weight is
``(C_in, C_out / group, *kernel)`` (``channel_last``: ``(C_in, *kernel, C_out / group)``).

Kernels are array-level: an im2col strided view copied once, then one GEMM
per group on BLAS (convolution, filter gradient); a GEMM then a col2im loop over
kernel offsets (deconvolution). Each linear map is paired with its transpose,
so every order keeps the same fast kernels: the data gradient of a convolution
is a deconvolution and vice versa, and the filter gradient is
:class:`hodiff.grad_functions.conv.ConvolutionFilterGrad`, whose own gradients
are again a convolution and a deconvolution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import reduction as _reduction
from hodiff.functions._conv_kernels import (
    Geometry,
    conv_forward,
    conv_out_size,
    deconv_forward,
    deconv_out_size,
    from_cb,
    n_spatial,
    resolve_base_axis,
    spatial_args,
    to_cb,
    weight_channels_first,
)
from hodiff.grad_functions import conv as _gconv

__all__ = ["convolution", "deconvolution", "depthwise_convolution", "depthwise_deconvolution"]

Ints = tuple[int, ...]


# the argument checks, shapes and array kernels are in _conv_kernels.py (shared with the
# filter gradient)
class _ConvBase(Function, register=False, follows_shape=True):
    """Static arguments shared by the convolution family (all fully resolved tuples)."""

    need_inputs = (0, 1)
    taylor = "multilinear"
    linear_in = (0, 1)  # and a bias

    def __init__(
        self,
        *,
        base_axis: int,
        pad: Ints,
        stride: Ints,
        dilation: Ints,
        group: int,
        channel_last: bool,
    ) -> None:
        self.base_axis = int(base_axis)
        self.pad = tuple(pad)
        self.stride = tuple(stride)
        self.dilation = tuple(dilation)
        self.group = int(group)
        self.channel_last = bool(channel_last)

    def params(self) -> dict[str, Any]:
        return {
            "base_axis": self.base_axis,
            "pad": self.pad,
            "stride": self.stride,
            "dilation": self.dilation,
            "group": self.group,
            "channel_last": self.channel_last,
        }

    def weight_layout(self, w_shape: Ints) -> tuple[int, int, Ints]:
        """(w.shape[0], the per-group channel count, kernel) of a weight shape."""
        if self.channel_last:
            return w_shape[0], w_shape[-1], tuple(w_shape[1:-1])
        return w_shape[0], w_shape[1], tuple(w_shape[2:])

    def check(self, x_shape: Ints, w_shape: Ints, transposed: bool) -> Ints:
        """Checks ``x`` against ``w`` and the arguments; returns the kernel."""
        name = self.name
        n = n_spatial(name, x_shape, self.base_axis)
        for arg, low in (("pad", 0), ("stride", 1), ("dilation", 1)):
            value = getattr(self, arg)
            if len(value) != n or min(value) < low:
                spatial_args(name, x_shape, n, **{arg: value})  # raises the ValueError
        if len(w_shape) != n + 2:
            raise ValueError(
                f"{name}: w of shape {w_shape} must have {n + 2} dims for x of shape {x_shape} "
                f"with base_axis={self.base_axis}"
            )
        if self.group < 1:
            raise ValueError(f"{name}: group={self.group} must be >= 1")
        c = x_shape[-1] if self.channel_last else x_shape[self.base_axis]
        w0, wg, kernel = self.weight_layout(w_shape)
        axis = len(w_shape) - 1 if self.channel_last else 1
        pair = f"x of shape {x_shape} and w of shape {w_shape} with group={self.group}"
        if transposed:  # w is (C_in, C_out / group, *kernel)
            if w0 != c or c % self.group:
                raise ValueError(
                    f"{name}: {pair}: w.shape[0] must equal the {c} channels of x and be "
                    f"divisible by group"
                )
        else:  # w is (C_out, C_in / group, *kernel)
            if c % self.group or w0 % self.group or wg * self.group != c:
                raise ValueError(
                    f"{name}: {pair}: the {c} channels of x and w.shape[0] must be divisible "
                    f"by group, and w.shape[{axis}] must equal channels / group = "
                    f"{c / self.group:g}"
                )
        return kernel

    # Convolution and Deconvolution differ only in their geometry, output layout and kernel.
    def geometry(self, x_shape: Ints, w_shape: Ints, check: bool = False) -> Geometry:
        raise NotImplementedError

    def out_layout(self, g: Geometry) -> tuple[int, Ints]:
        """(channels, spatial sizes) of the output."""
        raise NotImplementedError

    def kernel(self, xp: Any, x: Any, w: Any, g: Geometry) -> Any:
        """The output in (channels, batch, *spatial) layout, without bias."""
        raise NotImplementedError

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[Ints, Any]]:
        x, w = inputs[0], inputs[1]
        g = self.geometry(x.shape, w.shape, check=True)
        channels, spatial = self.out_layout(g)
        _bias_shape_check(self.name, inputs[2] if len(inputs) > 2 else None, channels, w.shape)
        dtype = float_dtype(np.result_type(*(v.dtype for v in inputs)))
        return [(g.shape(channels, spatial, self.channel_last), dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, w = inputs[0], inputs[1]
        xp = array_module(x)
        dtype = float_dtype(np.result_type(*(a.dtype for a in inputs)))
        g = self.geometry(x.shape, w.shape)
        xc = to_cb(xp, _float(x, dtype), self.base_axis, self.channel_last)
        wc = weight_channels_first(xp, _float(w, dtype), self.channel_last)
        y = self.kernel(xp, xc, wc, g)
        if len(inputs) > 2:
            y = _add_bias(y, _float(inputs[2], dtype))
        outputs[0] = from_cb(xp, y, g.batch, self.channel_last)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        if all(a is None for a in axes[1:]):  # shared weights: one more leading axis of x
            ba = self.base_axis + 1 if self.base_axis >= 0 else self.base_axis
            return _batching.renew(self, base_axis=ba)(*inputs)
        # per-example weights: the examples become groups of one grouped convolution
        size = _batching.batch_size(inputs, axes)
        x = _batching.batched(inputs[0], axes[0], size)
        ba = self.base_axis if self.base_axis >= 0 else self.base_axis + x.ndim - 1
        w = _batching.batched(inputs[1], axes[1], size)
        args = [
            fold_batch(x, ba, self.channel_last),
            _array.reshape(w, (size * w.shape[1], *w.shape[2:])),
        ]
        if len(inputs) > 2:
            b = _batching.batched(inputs[2], axes[2], size)
            args.append(_array.reshape(b, (size * b.shape[1],)))
        f = _batching.renew(self, base_axis=ba, group=self.group * size)
        return unfold_batch(f(*args), size, ba, self.channel_last)


def _bias_shape_check(name: str, b: Variable | None, channels: int, w_shape: Ints) -> None:
    if b is not None and tuple(b.shape) != (channels,):
        raise ValueError(
            f"{name}: b of shape {b.shape} must be ({channels},) for w of shape {w_shape}"
        )


def _float(a: Any, dtype: Any) -> Any:
    return a if a.dtype == dtype else a.astype(dtype)


def _add_bias(y: Any, b: Any) -> Any:
    return y + b.reshape((-1,) + (1,) * (y.ndim - 1))


# ---------------------------------------------------------------- primitives
class Convolution(_ConvBase):
    """``y = conv(x, w) + b``; see :func:`convolution`."""

    def geometry(self, x_shape: Ints, w_shape: Ints, check: bool = False) -> Geometry:
        """Shapes of this convolution; with ``check``, ValueErrors for bad arguments."""
        kernel = (
            self.check(x_shape, w_shape, transposed=False)
            if check
            else self.weight_layout(w_shape)[2]
        )
        cf = (
            (*x_shape[: self.base_axis], x_shape[-1], *x_shape[self.base_axis : -1])
            if self.channel_last
            else x_shape
        )
        spatial = cf[self.base_axis + 1 :]
        out = []
        for i, (n, k, p, s, d) in enumerate(
            zip(spatial, kernel, self.pad, self.stride, self.dilation, strict=True)
        ):
            if d * (k - 1) + 1 > n + 2 * p:
                raise ValueError(
                    f"{self.name}: the kernel of w of shape {w_shape} (size {k}, dilation {d}) "
                    f"is larger than the padded input along spatial axis {i} of x of shape "
                    f"{x_shape} ({n} + 2 * pad {p})"
                )
            out.append(conv_out_size(n, k, p, s, d))
        return Geometry(
            tuple(x_shape[: self.base_axis]),
            cf[self.base_axis],
            w_shape[0],
            tuple(spatial),
            tuple(out),
            kernel,
        )

    def out_layout(self, g: Geometry) -> tuple[int, Ints]:
        return g.y_channels, g.y_spatial

    def kernel(self, xp: Any, x: Any, w: Any, g: Geometry) -> Any:
        return conv_forward(xp, x, w, self.pad, self.stride, self.dilation, self.group, g.y_spatial)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        gy = outputs[0].grad
        x, w = inputs[0], inputs[1]
        g = self.geometry(x.shape, w.shape)
        if prop_down[0]:
            # dx = conv^T(gy, w): a deconvolution whose output_padding restores x's size
            op = tuple(
                n + 2 * p - d * (k - 1) - 1 - s * (o - 1)
                for n, o, k, p, s, d in zip(
                    g.x_spatial,
                    g.y_spatial,
                    g.kernel,
                    self.pad,
                    self.stride,
                    self.dilation,
                    strict=True,
                )
            )
            x.store(Deconvolution(**self.params(), output_padding=op)(gy, w.data), accum[0])
        if prop_down[1]:
            # dw[o, c, k] = sum_{b, p} gy[b, o, p] x[b, c, s p + d k - pad]
            gw = _gconv.ConvolutionFilterGrad(kernel=g.kernel, **self.params())(x.data, gy)
            w.store(gw, accum[1])
        if len(inputs) > 2 and prop_down[2]:
            # db = gy summed over all but the channel axis
            inputs[2].store(_sum_but_channel(gy, self.base_axis, self.channel_last), accum[2])


class Deconvolution(_ConvBase):
    """``y = conv^T(x, w) + b``; see :func:`deconvolution`."""

    def __init__(self, *, output_padding: Ints, **params: Any) -> None:
        super().__init__(**params)
        self.output_padding = tuple(output_padding)

    def geometry(self, x_shape: Ints, w_shape: Ints, check: bool = False) -> Geometry:
        """Shapes of this deconvolution; with ``check``, ValueErrors for bad arguments."""
        if check:
            kernel = self.check(x_shape, w_shape, transposed=True)
            n = len(x_shape) - self.base_axis - 1
            spatial_args(self.name, x_shape, n, output_padding=self.output_padding)
        else:
            kernel = self.weight_layout(w_shape)[2]
        cf = (
            (*x_shape[: self.base_axis], x_shape[-1], *x_shape[self.base_axis : -1])
            if self.channel_last
            else x_shape
        )
        spatial = cf[self.base_axis + 1 :]
        out = []
        for i, (m, k, p, s, d, op) in enumerate(
            zip(
                spatial,
                kernel,
                self.pad,
                self.stride,
                self.dilation,
                self.output_padding,
                strict=True,
            )
        ):
            if op >= s:
                raise ValueError(
                    f"{self.name}: output_padding={self.output_padding} must be smaller than "
                    f"stride={self.stride} (x of shape {x_shape})"
                )
            size = deconv_out_size(m, k, p, s, d, op)
            if size < 1:
                raise ValueError(
                    f"{self.name}: pad={self.pad} is too large for x of shape {x_shape} and w "
                    f"of shape {w_shape}: the output would have size {size} along spatial "
                    f"axis {i}"
                )
            out.append(size)
        ocg = self.weight_layout(w_shape)[1]
        return Geometry(
            tuple(x_shape[: self.base_axis]),
            ocg * self.group,
            cf[self.base_axis],
            tuple(out),
            tuple(spatial),
            kernel,
        )

    def out_layout(self, g: Geometry) -> tuple[int, Ints]:
        return g.x_channels, g.x_spatial

    def kernel(self, xp: Any, x: Any, w: Any, g: Geometry) -> Any:
        return deconv_forward(
            xp, x, w, self.pad, self.stride, self.dilation, self.group, g.x_spatial
        )

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        gy = outputs[0].grad
        x, w = inputs[0], inputs[1]
        g = self.geometry(x.shape, w.shape)
        if prop_down[0]:
            # dx = conv(gy, w): the transpose of the transpose
            x.store(Convolution(**self.params())(gy, w.data), accum[0])
        if prop_down[1]:
            # dw[i, o, k] = sum_{b, p} x[b, i, p] gy[b, o, s p + d k - pad]
            gw = _gconv.ConvolutionFilterGrad(kernel=g.kernel, **self.params())(gy, x.data)
            w.store(gw, accum[1])
        if len(inputs) > 2 and prop_down[2]:
            # db = gy summed over all but the channel axis
            inputs[2].store(_sum_but_channel(gy, self.base_axis, self.channel_last), accum[2])


def _sum_but_channel(gy: Any, base_axis: int, channel_last: bool) -> Any:
    ndim = len(gy.shape)
    channel = ndim - 1 if channel_last else base_axis
    return _reduction.sum(gy, axis=tuple(a for a in range(ndim) if a != channel))


# ---------------------------------------------------------------- wrappers
def _shape(x: Any) -> Ints:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


@traced
def convolution(
    x: Any,
    w: Any,
    b: Any = None,
    base_axis: int = 1,
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    group: int = 1,
    channel_last: bool = False,
) -> Variable:
    """N-D convolution (cross-correlation) with optional bias, as NNabla's.

    ``y[n, o, j] = b[o] + sum_{c, k} w[o, c, k] x[n, g(o) C/G + c, s j + d k - p]`` for
    every spatial index ``j`` (multi-indices over the N spatial axes), where
    ``g(o)`` is the group of output channel ``o``; padding is zeros.

    >>> import numpy as np, hodiff.functions as F
    >>> F.convolution(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), pad=(1, 1)).d[0, 0]
    array([[4., 6., 6., 4.],
           [6., 9., 9., 6.],
           [6., 9., 9., 6.],
           [4., 6., 6., 4.]])

    Args:
        x: ``(*batch, C, L_1, ..., L_N)`` (``channel_last``: ``(*batch, L_1, ..., L_N, C)``);
            the batch is the ``base_axis`` leading axes.
        w: ``(C', C / group, K_1, ..., K_N)``
            (``channel_last``: ``(C', K_1, ..., K_N, C / group)``).
        b: optional ``(C',)``.
        base_axis: number of leading batch axes; a negative one counts from the end
            (NNabla's ``base_axis + x.ndim``).
        pad: zeros added on both sides, one int per spatial axis (or one for all; default 0).
        stride: window step per spatial axis (default 1).
        dilation: spacing of the kernel taps per spatial axis (default 1).
        group: channels are split into ``group`` groups convolved separately.
        channel_last: channels on the last axis (NHWC).

    Returns:
        ``(*batch, C', L'_1, ..., L'_N)``, ``L'_i = (L_i + 2 p_i - d_i (K_i - 1) - 1) // s_i + 1``.

    """
    base_axis = resolve_base_axis("convolution", _shape(x), base_axis)
    n = n_spatial("convolution", _shape(x), base_axis)
    args = spatial_args("convolution", _shape(x), n, pad=pad, stride=stride, dilation=dilation)
    f = Convolution(base_axis=base_axis, group=group, channel_last=channel_last, **args)
    return f(x, w) if b is None else f(x, w, b)


@traced
def deconvolution(
    x: Any,
    w: Any,
    b: Any = None,
    base_axis: int = 1,
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    group: int = 1,
    channel_last: bool = False,
    output_padding: Sequence[int] | None = None,
) -> Variable:
    """N-D deconvolution (transposed convolution) with optional bias, as NNabla's.

    The transpose of :func:`convolution` with the same arguments and weight:
    ``y[n, g C'/G + o, s j + d k - p] += w[i, o, k] x[n, i, j]`` for each input
    channel ``i`` of group ``g``, plus ``b``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.deconvolution(np.ones((1, 1, 2)), np.ones((1, 1, 3)), stride=(2,)).d
    array([[[1., 1., 2., 1., 1.]]])

    Args:
        x: ``(*batch, C, L_1, ..., L_N)`` (``channel_last``: channels last).
        w: ``(C, C' / group, K_1, ..., K_N)``
            (``channel_last``: ``(C, K_1, ..., K_N, C' / group)``).
        b: optional ``(C',)``.
        base_axis: as in :func:`convolution`.
        pad: as in :func:`convolution` (cropped from the output).
        stride: as in :func:`convolution`.
        dilation: as in :func:`convolution`.
        group: as in :func:`convolution`.
        channel_last: as in :func:`convolution`.
        output_padding: extra size at the end of each spatial axis (``< stride``),
            to reach the input size of a strided convolution.

    Returns:
        ``(*batch, C', L'_1, ..., L'_N)``,
        ``L'_i = s_i (L_i - 1) + d_i (K_i - 1) + 1 - 2 p_i + op_i``.

    """
    base_axis = resolve_base_axis("deconvolution", _shape(x), base_axis)
    n = n_spatial("deconvolution", _shape(x), base_axis)
    args = spatial_args(
        "deconvolution",
        _shape(x),
        n,
        pad=pad,
        stride=stride,
        dilation=dilation,
        output_padding=output_padding,
    )
    f = Deconvolution(base_axis=base_axis, group=group, channel_last=channel_last, **args)
    return f(x, w) if b is None else f(x, w, b)


@traced
@real_values
def depthwise_convolution(
    x: Any,
    w: Any,
    b: Any = None,
    base_axis: int = 1,
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    multiplier: int = 1,
) -> Variable:
    """Depthwise convolution, as NNabla's: each channel convolved with its own filters.

    Output channel ``c * multiplier + m`` is input channel ``c`` convolved with
    ``w[c * multiplier + m]``. This is :func:`convolution` with ``group = C`` and
    the weight reshaped to ``(C * multiplier, 1, *kernel)`` (so its gradients of
    every order are those of the convolution).

    >>> import numpy as np, hodiff.functions as F
    >>> F.depthwise_convolution(np.ones((1, 2, 3)), np.array([[1.0, 1.0], [0.0, 2.0]])).d
    array([[[2., 2.],
            [2., 2.]]])

    Args:
        x: ``(*batch, C, L_1, ..., L_N)``.
        w: ``(C * multiplier, K_1, ..., K_N)``.
        b: optional ``(C * multiplier,)``.
        base_axis: as in :func:`convolution`.
        pad: as in :func:`convolution`.
        stride: as in :func:`convolution`.
        dilation: as in :func:`convolution`.
        multiplier: output channels per input channel.

    Returns:
        ``(*batch, C * multiplier, L'_1, ..., L'_N)``.

    """
    shape, w_shape = _shape(x), _shape(w)
    base_axis = resolve_base_axis("depthwise_convolution", shape, base_axis)
    n = n_spatial("depthwise_convolution", shape, base_axis)
    c = shape[base_axis]
    if not isinstance(multiplier, int | np.integer) or multiplier < 1:
        raise ValueError(f"depthwise_convolution: multiplier={multiplier} must be an int >= 1")
    if len(w_shape) != n + 1 or w_shape[0] != c * multiplier:
        raise ValueError(
            f"depthwise_convolution: w of shape {w_shape} must be ({c * multiplier}, *kernel) "
            f"with {n} kernel axes for x of shape {shape} and multiplier={multiplier}"
        )
    w4 = _array.reshape(w, (w_shape[0], 1, *w_shape[1:]))
    return convolution(x, w4, b, base_axis, pad, stride, dilation, group=c)


@traced
@real_values
def depthwise_deconvolution(
    x: Any,
    w: Any,
    b: Any = None,
    base_axis: int = 1,
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    divisor: int = 1,
) -> Variable:
    """Depthwise deconvolution, as NNabla's: the transpose of a depthwise convolution.

    Each of the ``C / divisor`` output channels sums the transposed convolutions of its
    ``divisor`` input channels, channel ``c`` with its own filter ``w[c]``. This is
    :func:`deconvolution` with ``group = C / divisor`` and the weight reshaped to
    ``(C, 1, *kernel)`` (so its gradients of every order are those of the deconvolution).

    >>> import numpy as np, hodiff.functions as F
    >>> F.depthwise_deconvolution(np.ones((1, 2, 2)), np.array([[1.0, 1.0], [0.0, 2.0]])).d
    array([[[1., 2., 1.],
            [0., 2., 2.]]])

    Args:
        x: ``(*batch, C, L_1, ..., L_N)``.
        w: ``(C, K_1, ..., K_N)``.
        b: optional ``(C / divisor,)``.
        base_axis: as in :func:`convolution`.
        pad: as in :func:`deconvolution`.
        stride: as in :func:`deconvolution`.
        dilation: as in :func:`deconvolution`.
        divisor: input channels per output channel (``C`` must be a multiple).

    Returns:
        ``(*batch, C / divisor, L'_1, ..., L'_N)``, ``L'`` as in :func:`deconvolution`.

    """
    shape, w_shape = _shape(x), _shape(w)
    base_axis = resolve_base_axis("depthwise_deconvolution", shape, base_axis)
    n = n_spatial("depthwise_deconvolution", shape, base_axis)
    c = shape[base_axis]
    if isinstance(divisor, bool) or not isinstance(divisor, int | np.integer) or divisor < 1:
        raise ValueError(f"depthwise_deconvolution: divisor={divisor} must be an int >= 1")
    if c % divisor:
        raise ValueError(
            f"depthwise_deconvolution: the {c} channels of x of shape {shape} are not a"
            f" multiple of divisor={divisor}"
        )
    if len(w_shape) != n + 1 or w_shape[0] != c:
        raise ValueError(
            f"depthwise_deconvolution: w of shape {w_shape} must be ({c}, *kernel) with {n}"
            f" kernel axes for x of shape {shape}"
        )
    w4 = _array.reshape(w, (c, 1, *w_shape[1:]))
    return deconvolution(x, w4, b, base_axis, pad, stride, dilation, group=c // int(divisor))


# ---------------------------------------------------------------- batching helpers (hd.vmap)


def fold_batch(v: Any, base_axis: int, channel_last: bool) -> Any:
    """A batched ``(B, *lead, C, *spatial)`` as ``(*lead, B * C, *spatial)`` (channel_last:
    ``(B, *lead, *spatial, C)`` as ``(*lead, *spatial, B * C)``): the examples become groups.
    """
    shape = tuple(v.shape)
    at = len(shape) - 1 if channel_last else base_axis + 1  # the channel axis of v
    perm = [*range(1, at), 0, *range(at, len(shape))]
    v = _array.transpose(v, perm)
    return _array.reshape(v, (*shape[1:at], shape[0] * shape[at], *shape[at + 1 :]))


def unfold_batch(y: Any, size: int, base_axis: int, channel_last: bool) -> Any:
    """The inverse of :func:`fold_batch` on an output: ``B * C'`` channels back to a batch."""
    shape = tuple(y.shape)
    at = len(shape) - 1 if channel_last else base_axis
    y = _array.reshape(y, (*shape[:at], size, shape[at] // size, *shape[at + 1 :]))
    perm = [at, *[i for i in range(len(shape) + 1) if i != at]]
    return _array.transpose(y, perm)
