"""Specs of hodiff/functions/conv.py and hodiff/grad_functions/conv.py.

The references are direct loops over every output (or input) element: slow,
obviously correct, and sharing no code with the im2col/col2im kernels.
Convolutions are bilinear in ``(x, w)``: ``linear=True`` checks orders 2 and 3
on ``y**3``, which exercises the gradients of the gradients.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.conv import convolution_filter_grad
from hodiff.testing.spec import Spec


def _resolve(n: int, pad: Any, stride: Any, dilation: Any) -> tuple[Any, Any, Any]:
    return (tuple(pad or (0,) * n), tuple(stride or (1,) * n), tuple(dilation or (1,) * n))


def ref_convolution(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    base_axis: int = 1,
    pad: Any = None,
    stride: Any = None,
    dilation: Any = None,
    group: int = 1,
    channel_last: bool = False,
) -> np.ndarray:
    """Convolution by loops over every output element, kernel tap and channel."""
    if channel_last:
        x, w = np.moveaxis(x, -1, base_axis), np.moveaxis(w, -1, 1)
    batch = x.shape[:base_axis]
    xb = x.reshape((-1, *x.shape[base_axis:]))
    nb, c, size = xb.shape[0], xb.shape[1], xb.shape[2:]
    n = len(size)
    pad, stride, dilation = _resolve(n, pad, stride, dilation)
    oc, kernel = w.shape[0], w.shape[2:]
    cg, ocg = c // group, oc // group
    out = tuple(
        (size[i] + 2 * pad[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
        for i in range(n)
    )
    y = np.zeros((nb, oc, *out))
    for i, o, j in itertools.product(range(nb), range(oc), np.ndindex(*out)):
        acc = 0.0 if b is None else float(b[o])
        for ci, k in itertools.product(range(cg), np.ndindex(*kernel)):
            pos = tuple(j[a] * stride[a] + k[a] * dilation[a] - pad[a] for a in range(n))
            if all(0 <= pos[a] < size[a] for a in range(n)):
                acc += w[(o, ci, *k)] * xb[(i, (o // ocg) * cg + ci, *pos)]
        y[(i, o, *j)] = acc
    y = y.reshape(batch + y.shape[1:])
    return np.moveaxis(y, base_axis, -1) if channel_last else y


def ref_deconvolution(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    base_axis: int = 1,
    pad: Any = None,
    stride: Any = None,
    dilation: Any = None,
    group: int = 1,
    channel_last: bool = False,
    output_padding: Any = None,
) -> np.ndarray:
    """Deconvolution by scattering every input element through every kernel tap."""
    if channel_last:
        x, w = np.moveaxis(x, -1, base_axis), np.moveaxis(w, -1, 1)
    batch = x.shape[:base_axis]
    xb = x.reshape((-1, *x.shape[base_axis:]))
    nb, ic, size = xb.shape[0], xb.shape[1], xb.shape[2:]
    n = len(size)
    pad, stride, dilation = _resolve(n, pad, stride, dilation)
    op = tuple(output_padding or (0,) * n)
    ocg, kernel = w.shape[1], w.shape[2:]
    icg = ic // group
    out = tuple(
        stride[a] * (size[a] - 1) + dilation[a] * (kernel[a] - 1) + 1 - 2 * pad[a] + op[a]
        for a in range(n)
    )
    y = np.zeros((nb, ocg * group, *out))
    for i, c, j in itertools.product(range(nb), range(ic), np.ndindex(*size)):
        for o, k in itertools.product(range(ocg), np.ndindex(*kernel)):
            pos = tuple(j[a] * stride[a] + k[a] * dilation[a] - pad[a] for a in range(n))
            if all(0 <= pos[a] < out[a] for a in range(n)):
                y[(i, (c // icg) * ocg + o, *pos)] += xb[(i, c, *j)] * w[(c, o, *k)]
    if b is not None:
        y += b.reshape((-1,) + (1,) * n)
    y = y.reshape(batch + y.shape[1:])
    return np.moveaxis(y, base_axis, -1) if channel_last else y


def ref_depthwise_convolution(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    base_axis: int = 1,
    pad: Any = None,
    stride: Any = None,
    dilation: Any = None,
    multiplier: int = 1,
) -> np.ndarray:
    """Depthwise convolution: one loop-convolution per (channel, multiplier) pair."""
    c = x.shape[base_axis]
    outs = []
    for ci in range(c):
        xc = np.take(x, [ci], axis=base_axis)
        for m in range(multiplier):
            wk = w[ci * multiplier + m][None, None]
            bk = None if b is None else b[ci * multiplier + m : ci * multiplier + m + 1]
            outs.append(ref_convolution(xc, wk, bk, base_axis, pad, stride, dilation))
    return np.concatenate(outs, axis=base_axis)


def ref_filter_grad(
    x: np.ndarray,
    gy: np.ndarray,
    kernel: Any,
    pad: Any = None,
    stride: Any = None,
    dilation: Any = None,
    group: int = 1,
) -> np.ndarray:
    """``gw[o, c, k] = sum gy[b, o, j] x[b, c, s j + d k - p]`` by loops (base_axis 1)."""
    nb, c, size = x.shape[0], x.shape[1], x.shape[2:]
    n = len(size)
    pad, stride, dilation = _resolve(n, pad, stride, dilation)
    oc, out = gy.shape[1], gy.shape[2:]
    cg, ocg = c // group, oc // group
    gw = np.zeros((oc, cg, *kernel))
    for o, ci, k in itertools.product(range(oc), range(cg), np.ndindex(*kernel)):
        for i, j in itertools.product(range(nb), np.ndindex(*out)):
            pos = tuple(j[a] * stride[a] + k[a] * dilation[a] - pad[a] for a in range(n))
            if all(0 <= pos[a] < size[a] for a in range(n)):
                gw[(o, ci, *k)] += gy[(i, o, *j)] * x[(i, (o // ocg) * cg + ci, *pos)]
    return gw


BILINEAR = {"linear": True, "domain": (-1.0, 1.0)}

SPECS = [
    # convolution: plain 2-D with bias; pad/stride/dilation; groups; channel_last; 1-D; 3-D
    Spec(F.convolution, ((2, 2, 4, 4), (2, 2, 3, 3), (2,)), ref_convolution, **BILINEAR),
    Spec(
        F.convolution,
        ((2, 2, 4, 5), (2, 2, 3, 3)),
        ref_convolution,
        kwargs={"pad": (1, 2), "stride": (2, 1), "dilation": (1, 2)},
        id="pad_stride_dilation",
        **BILINEAR,
    ),
    Spec(
        F.convolution,
        ((2, 2, 5, 4), (2, 1, 3, 3), (2,)),
        ref_convolution,
        kwargs={"group": 2, "pad": (1, 1), "stride": (2, 2)},
        id="group",
        **BILINEAR,
    ),
    Spec(
        F.convolution,
        ((2, 4, 4, 2), (2, 3, 3, 2), (2,)),
        ref_convolution,
        kwargs={"channel_last": True, "pad": (1, 0)},
        id="channel_last",
        **BILINEAR,
    ),
    Spec(
        F.convolution,
        ((2, 3, 7), (2, 3, 3)),
        ref_convolution,
        kwargs={"pad": (1,), "stride": (2,)},
        id="1d",
        **BILINEAR,
    ),
    Spec(
        F.convolution,
        ((2, 2, 3, 3, 2), (2, 2, 2, 2, 2), (2,)),
        ref_convolution,
        kwargs={"pad": (1, 0, 0), "stride": (1, 2, 1)},
        id="3d",
        **BILINEAR,
    ),
    Spec(
        F.convolution,
        ((2, 2, 2, 6), (2, 2, 3)),
        ref_convolution,
        kwargs={"base_axis": 2, "dilation": (2,)},
        id="base_axis",
        **BILINEAR,
    ),
    Spec(
        F.convolution,
        ((2, 2, 10), (4, 2, 1)),
        lambda x, w, base_axis, **kw: ref_convolution(x, w, base_axis=base_axis + x.ndim, **kw),
        kwargs={"base_axis": -2, "pad": (3,), "stride": (2,)},
        id="negative_base_axis",
        **BILINEAR,
    ),
    # depthwise deconvolution: a deconvolution with group = C / divisor
    Spec(
        F.depthwise_deconvolution,
        ((2, 3, 5), (3, 2), (3,)),
        lambda x, w, b, **kw: ref_deconvolution(x, w[:, None], b, group=3, **kw),
        kwargs={"stride": (2,), "pad": (1,)},
        **BILINEAR,
    ),
    Spec(
        F.depthwise_deconvolution,
        ((2, 4, 3, 3), (4, 2, 2)),
        lambda x, w, divisor, **kw: ref_deconvolution(x, w[:, None], group=2, **kw),
        kwargs={"divisor": 2, "dilation": (1, 2)},
        id="divisor",
        **BILINEAR,
    ),
    # deconvolution
    Spec(
        F.deconvolution,
        ((2, 2, 3, 3), (2, 2, 3, 3), (2,)),
        ref_deconvolution,
        kwargs={"pad": (1, 1), "stride": (2, 2), "output_padding": (1, 0)},
        **BILINEAR,
    ),
    Spec(
        F.deconvolution,
        ((2, 4, 3, 3), (4, 1, 2, 2)),
        ref_deconvolution,
        kwargs={"group": 2, "dilation": (2, 1), "stride": (1, 2)},
        id="group_dilation",
        **BILINEAR,
    ),
    Spec(
        F.deconvolution,
        ((2, 4, 3), (3, 2, 2), (2,)),
        ref_deconvolution,
        kwargs={"channel_last": True, "stride": (2,), "pad": (1,)},
        id="channel_last_1d",
        **BILINEAR,
    ),
    Spec(
        F.deconvolution,
        ((2, 2, 2, 2, 2), (2, 2, 2, 2, 2)),
        ref_deconvolution,
        kwargs={"stride": (2, 1, 1), "pad": (0, 1, 0)},
        id="3d",
        **BILINEAR,
    ),
    # depthwise convolution
    Spec(
        F.depthwise_convolution,
        ((2, 2, 4, 4), (4, 3, 3), (4,)),
        ref_depthwise_convolution,
        kwargs={"multiplier": 2, "pad": (1, 1), "stride": (2, 1)},
        **BILINEAR,
    ),
    Spec(
        F.depthwise_convolution,
        ((2, 3, 6), (3, 3)),
        ref_depthwise_convolution,
        kwargs={"dilation": (2,)},
        id="1d",
        **BILINEAR,
    ),
    # the filter gradient (bilinear in x and gy)
    Spec(
        convolution_filter_grad,
        ((2, 2, 4, 5), (2, 4, 2, 2)),
        ref_filter_grad,
        kwargs={"kernel": (3, 3), "pad": (1, 0), "stride": (2, 2), "group": 2},
        **BILINEAR,
    ),
]
