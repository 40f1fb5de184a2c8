"""Array-level kernels of the convolution family, shared by ``functions/conv.py`` and
``grad_functions/conv.py``: argument checks, output shapes, the im2col/GEMM convolution,
its transpose (col2im) and the filter gradient. A leaf module: it imports no function family.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.functions._index_kernels import normalize_base_axis

Ints = tuple[int, ...]


# ---------------------------------------------------------------- arguments and shapes
def spatial_args(name: str, x_shape: Ints, n: int, **args: Any) -> dict[str, Ints]:
    """Each of ``args`` (None, an int, or one int per spatial axis) as an ``n``-tuple.

    None takes the default of its argument (pad 0, stride 1, dilation 1,
    output_padding 0). Raises ValueError naming the function and the argument.
    """
    defaults = {"pad": 0, "stride": 1, "dilation": 1, "output_padding": 0}
    out = {}
    for arg, value in args.items():
        if value is None:
            out[arg] = (defaults[arg],) * n
            continue
        t = (value,) * n if isinstance(value, int | np.integer) else tuple(value)
        if not all(isinstance(v, int | np.integer) for v in t):
            raise TypeError(f"{name}: {arg}={value!r} must be ints")
        if len(t) != n:
            raise ValueError(
                f"{name}: {arg}={value!r} must be {n} ints, one per spatial axis of x of "
                f"shape {x_shape}"
            )
        low = 0 if arg in ("pad", "output_padding") else 1
        if any(v < low for v in t):
            raise ValueError(f"{name}: {arg}={value!r} must be >= {low} (x of shape {x_shape})")
        out[arg] = tuple(int(v) for v in t)
    return out


def n_spatial(name: str, x_shape: Ints, base_axis: int) -> int:
    """The number of spatial axes of ``x`` (``base_axis`` as :func:`resolve_base_axis` takes it)."""
    return len(x_shape) - resolve_base_axis(name, x_shape, base_axis) - 1


def resolve_base_axis(name: str, x_shape: Ints, base_axis: int) -> int:
    """``base_axis`` non-negative (a negative one counts from the end, as NNabla), leaving the
    channel and at least one spatial axis after it; TypeError or ValueError naming ``name``.
    """
    return normalize_base_axis(name, base_axis, len(x_shape), high=-2)


@dataclass(frozen=True)
class Geometry:
    """Shapes of one convolution ``x -> y`` in channels-first terms.

    ``batch`` is ``x.shape[:base_axis]``; ``x_spatial``/``y_spatial`` are the
    spatial sizes of the convolution's input and output (for a deconvolution,
    ``x`` is the convolution's output and ``y`` its input).
    """

    batch: Ints
    x_channels: int
    y_channels: int
    x_spatial: Ints
    y_spatial: Ints
    kernel: Ints

    def shape(self, channels: int, spatial: Ints, channel_last: bool) -> Ints:
        return self.batch + ((*spatial, channels) if channel_last else (channels, *spatial))


def conv_out_size(size: int, k: int, p: int, s: int, d: int) -> int:
    """Output length of a convolution: ``(L + 2p - d(k - 1) - 1) // s + 1``."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def deconv_out_size(size: int, k: int, p: int, s: int, d: int, op: int) -> int:
    """Output length of a deconvolution: ``s(L - 1) + d(k - 1) + 1 - 2p + op``."""
    return s * (size - 1) + d * (k - 1) + 1 - 2 * p + op


# ---------------------------------------------------------------- array kernels
# The kernels work on (C, B, *spatial) arrays ("cb" layout: channels, then the flattened
# batch), so that each group is one GEMM: (C_out/G, C/G * K) @ (C/G * K, B * P).
def to_cb(xp: Any, x: Any, base_axis: int, channel_last: bool) -> Any:
    """``x`` as a (C, B, *spatial) array (a view when possible)."""
    x = xp.moveaxis(x, -1 if channel_last else base_axis, 0)
    return x.reshape((x.shape[0], -1, *x.shape[base_axis + 1 :]))


def from_cb(xp: Any, y: Any, batch: Ints, channel_last: bool) -> Any:
    """The inverse of :func:`to_cb` for an output of batch shape ``batch`` (contiguous)."""
    y = y.reshape((y.shape[0], *batch, *y.shape[2:]))
    return xp.ascontiguousarray(xp.moveaxis(y, 0, -1 if channel_last else len(batch)))


def weight_channels_first(xp: Any, w: Any, channel_last: bool) -> Any:
    return xp.moveaxis(w, -1, 1) if channel_last else w


def weight_from_channels_first(xp: Any, w: Any, channel_last: bool) -> Any:
    return xp.ascontiguousarray(xp.moveaxis(w, 1, -1) if channel_last else w)


def im2col(
    xp: Any, x: Any, kernel: Ints, pad: Ints, stride: Ints, dilation: Ints, out: Ints, group: int
) -> Any:
    """The windows of ``x`` (C, B, *spatial) as a (G, C/G * K, B * P) array (one copy)."""
    c, b, size = x.shape[0], x.shape[1], x.shape[2:]
    if any(pad):
        padded = xp.zeros(
            (c, b, *(n + 2 * p for n, p in zip(size, pad, strict=True))), dtype=x.dtype
        )
        inner = tuple(slice(p, p + n) for p, n in zip(pad, size, strict=True))
        key = (slice(None), slice(None), *inner)
        padded[key] = x
        x = padded
    st = x.strides
    strides = (
        st[0],
        *(s * d for s, d in zip(st[2:], dilation, strict=True)),
        st[1],
        *(s * t for s, t in zip(st[2:], stride, strict=True)),
    )
    view = xp.lib.stride_tricks.as_strided(x, shape=(c, *kernel, b, *out), strides=strides)
    return view.reshape(group, (c // group) * math.prod(kernel), -1)


def conv_forward(
    xp: Any, x: Any, w: Any, pad: Ints, stride: Ints, dilation: Ints, group: int, out: Ints
) -> Any:
    """``y[o, b] = sum_{c, k} w[o, c, k] x[c, b, s out + d k - p]``: (C_out, B, *out)."""
    b = x.shape[1]
    oc, kernel = w.shape[0], w.shape[2:]
    cols = im2col(xp, x, kernel, pad, stride, dilation, out, group)
    wm = w.reshape(group, oc // group, -1)
    y = xp.concatenate([wm[g] @ cols[g] for g in range(group)]) if group > 1 else wm[0] @ cols[0]
    return y.reshape((oc, b, *out))


def deconv_forward(
    xp: Any, x: Any, w: Any, pad: Ints, stride: Ints, dilation: Ints, group: int, out: Ints
) -> Any:
    """The transpose of :func:`conv_forward`: ``x`` (C_in, B, *in), ``w`` (C_in, C_out/G, *k)."""
    ic, b, size_in = x.shape[0], x.shape[1], x.shape[2:]
    ocg, kernel = w.shape[1], w.shape[2:]
    wm = w.reshape(group, ic // group, -1)
    xm = x.reshape(group, ic // group, -1)
    cols = xp.concatenate([wm[g].T @ xm[g] for g in range(group)]) if group > 1 else wm[0].T @ xm[0]
    cols = cols.reshape((group * ocg, *kernel, b, *size_in))
    full = [
        s * (n - 1) + d * (k - 1) + 1
        for s, n, d, k in zip(stride, size_in, dilation, kernel, strict=True)
    ]
    size = tuple(max(f, p + o) for f, p, o in zip(full, pad, out, strict=True))
    y = xp.zeros((group * ocg, b, *size), dtype=cols.dtype)
    everything = (slice(None), slice(None))
    for offs in itertools.product(*(range(k) for k in kernel)):  # col2im, one offset at a time
        window = tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(offs, dilation, stride, size_in, strict=True)
        )
        col = (slice(None), *offs)
        y[everything + window] += cols[col]
    return y[everything + tuple(slice(p, p + o) for p, o in zip(pad, out, strict=True))]


def conv_filter_grad(
    xp: Any, x: Any, gy: Any, kernel: Ints, pad: Ints, stride: Ints, dilation: Ints, group: int
) -> Any:
    """``gw[o, c, k] = sum_{b, p} gy[o, b, p] x[c, b, s p + d k - pad]``: (C_out, C/G, *k)."""
    c, oc, out = x.shape[0], gy.shape[0], gy.shape[2:]
    cols = im2col(xp, x, kernel, pad, stride, dilation, out, group)
    gym = gy.reshape(group, oc // group, -1)
    gw = (
        xp.concatenate([gym[g] @ cols[g].T for g in range(group)])
        if group > 1
        else gym[0] @ cols[0].T
    )
    return gw.reshape((oc, c // group, *kernel))
