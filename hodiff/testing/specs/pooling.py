"""Specs of hodiff/functions/pooling.py and hodiff/grad_functions/pooling.py.

References loop over every output window (poolings) or use ``np.interp`` one
axis at a time (interpolation); none shares code with the implementation.
Every function here is linear in its float input (max pooling piecewise, away
from ties, which random inputs never have), so ``linear=True``.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.functions.pooling import max_pooling_index
from hodiff.grad_functions.pooling import (
    average_pooling_backward,
    interpolate_backward,
    max_pooling_backward,
    sum_pooling_backward,
)
from hodiff.testing.spec import Spec


def _windows(
    size: tuple[int, ...], kernel: Any, stride: Any, ignore_border: bool, pad: Any
) -> tuple[tuple[int, ...], Any, Any]:
    n = len(kernel)
    stride = tuple(stride or kernel)
    pad = tuple(pad or (0,) * n)
    out = tuple(
        (size[i] + 2 * pad[i] - kernel[i]) // stride[i] + 1
        if ignore_border
        else (size[i] + pad[i] - 1) // stride[i] + 1
        for i in range(n)
    )
    return out, stride, pad


def ref_pooling(
    x: np.ndarray,
    kernel: Any,
    stride: Any = None,
    ignore_border: bool = True,
    pad: Any = None,
    channel_last: bool = False,
    including_pad: bool = True,
    mode: str = "max",
) -> np.ndarray:
    """Pooling by a loop over every window of the last ``len(kernel)`` axes."""
    if channel_last:
        x = np.moveaxis(x, -1, 0)
    n = len(kernel)
    lead, size = x.shape[:-n], x.shape[-n:]
    out, stride, pad = _windows(size, kernel, stride, ignore_border, pad)
    y = np.zeros(lead + out)
    for i, j in itertools.product(np.ndindex(*lead), np.ndindex(*out)):
        start = [j[a] * stride[a] - pad[a] for a in range(n)]
        end = [min(start[a] + kernel[a], size[a] + pad[a]) for a in range(n)]
        real = tuple(slice(max(start[a], 0), min(end[a], size[a])) for a in range(n))
        block = x[i + real]
        if mode == "max":
            y[i + j] = block.max()
        elif mode == "sum":
            y[i + j] = block.sum()
        else:
            count = (
                math.prod(e - s for s, e in zip(start, end, strict=True))
                if including_pad
                else block.size
            )
            y[i + j] = block.sum() / count
    return np.moveaxis(y, 0, -1) if channel_last else y


def ref_max_pooling_index(
    x: np.ndarray, kernel: Any, stride: Any = None, ignore_border: bool = True, pad: Any = None
) -> np.ndarray:
    """Flat index of the first maximum of every window (channels first)."""
    n = len(kernel)
    lead, size = x.shape[:-n], x.shape[-n:]
    out, stride, pad = _windows(size, kernel, stride, ignore_border, pad)
    index = np.zeros(lead + out, dtype=np.int64)
    for i, j in itertools.product(np.ndindex(*lead), np.ndindex(*out)):
        best, where = -np.inf, None
        ranges = [
            range(
                max(j[a] * stride[a] - pad[a], 0),
                min(j[a] * stride[a] - pad[a] + kernel[a], size[a]),
            )
            for a in range(n)
        ]
        for pos in itertools.product(*ranges):
            if where is None or x[i + pos] > best:
                best, where = x[i + pos], i + pos
        index[i + j] = np.ravel_multi_index(where, x.shape)
    return index


def ref_scatter(gy: np.ndarray, index: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    gx = np.zeros(math.prod(shape))
    for g, k in zip(gy.reshape(-1), index.reshape(-1), strict=True):
        gx[k] += g
    return gx.reshape(shape)


def ref_pooling_backward(
    gy: np.ndarray,
    shape: tuple[int, ...],
    kernel: Any,
    stride: Any = None,
    ignore_border: bool = True,
    pad: Any = None,
    including_pad: bool = True,
    mode: str = "sum",
) -> np.ndarray:
    """The transpose of :func:`ref_pooling`, column by column (on basis vectors)."""
    size = math.prod(shape)
    cols = [
        ref_pooling(
            np.eye(size)[k].reshape(shape),
            kernel,
            stride,
            ignore_border,
            pad,
            including_pad=including_pad,
            mode=mode,
        ).reshape(-1)
        for k in range(size)
    ]
    return (np.stack(cols) @ gy.reshape(-1)).reshape(shape)


def _source(
    size: int, out: int, mode: str, align_corners: bool, half_pixel: bool, half_pixel_for_nn: bool
) -> np.ndarray:
    """Input coordinate of every output index (NNabla's rules)."""
    o = np.arange(out)
    if mode == "nearest" and half_pixel_for_nn:
        return (o + 0.5) * size / out
    if out == 1:  # NNabla's scale is 0 for a single output
        return 0.0 * o
    if align_corners:
        return o * (size - 1) / (out - 1)
    if half_pixel:
        return np.maximum(0, (o + 0.5) * size / out - 0.5)
    return o * size / out


def ref_interpolate(
    x: np.ndarray,
    scale: Any = None,
    output_size: Any = None,
    mode: str = "linear",
    align_corners: bool = False,
    half_pixel: bool = False,
    half_pixel_for_nn: bool = False,
    channel_last: bool = False,
) -> np.ndarray:
    """Resize one axis at a time with ``np.interp`` (linear) or floor indexing (nearest)."""
    if channel_last:
        x = np.moveaxis(x, -1, 0)
    n = len(output_size) if output_size is not None else len(scale)
    if output_size is None:
        output_size = [int(np.floor(s * d)) for s, d in zip(scale, x.shape[-n:], strict=True)]
    for a, out in zip(range(x.ndim - n, x.ndim), output_size, strict=True):
        size = x.shape[a]
        src = _source(size, out, mode, align_corners, half_pixel, half_pixel_for_nn)
        if mode == "nearest":
            x = np.take(x, np.minimum(np.floor(src).astype(int), size - 1), axis=a)
        else:
            x = np.apply_along_axis(lambda r, s=src, m=size: np.interp(s, np.arange(m), r), a, x)
    return np.moveaxis(x, 0, -1) if channel_last else x


def ref_interpolate_backward(
    gy: np.ndarray, input_size: Any, output_size: Any, **kw: Any
) -> np.ndarray:
    """The transpose of :func:`ref_interpolate`, built on basis vectors (channels first)."""
    lead = gy.shape[: -len(input_size)]
    size = math.prod(input_size)
    cols = np.stack(
        [
            ref_interpolate(
                np.eye(size)[k].reshape(input_size), output_size=output_size, **kw
            ).reshape(-1)
            for k in range(size)
        ]
    )
    gx = gy.reshape((-1, cols.shape[1])) @ cols.T
    return gx.reshape(lead + tuple(input_size))


def _index(shape: tuple[int, ...], n: int) -> Any:
    return lambda rng: rng.integers(0, n, size=shape)


LINEAR = {"linear": True}


def _halves(shape: tuple[int, ...]) -> Any:
    """Multiples of 1/2 in [-2, 2]: ties within a window are common."""
    return lambda rng: np.round(rng.uniform(-2.0, 2.0, size=shape) * 2.0) / 2.0


#: max pooling: two inputs of a window tied (within a step) are a kink the sampler avoids
MAX = {"linear": True, "distinct": 1e-3}
ref_average = functools.partial(ref_pooling, mode="average")
ref_sum = functools.partial(ref_pooling, mode="sum")


def _max_pooling_backward_ref(dy: np.ndarray, x: np.ndarray, kernel: Any) -> np.ndarray:
    """2-D, stride = kernel, no pad: each dy to the first maximum of its window (loops)."""
    out = np.zeros_like(x)
    kh, kw = kernel
    for n, c, i, j in itertools.product(*(range(s) for s in dy.shape)):
        win = x[n, c, i * kh : (i + 1) * kh, j * kw : (j + 1) * kw]
        a, b = np.unravel_index(np.argmax(win), win.shape)
        out[n, c, i * kh + a, j * kw + b] += dy[n, c, i, j]
    return out


SPECS = [
    Spec(
        F.max_pooling_backward,
        ((2, 2, 2, 2), (2, 2, 4, 4)),
        _max_pooling_backward_ref,
        kwargs={"kernel": (2, 2)},
        **MAX,
    ),
    # max pooling: default stride; overlapping windows (duplicate maxima); pad and partial
    # windows; 1-D; 3-D
    Spec(
        F.max_pooling,
        ((2, 2, 5, 5),),
        ref_pooling,
        kwargs={"kernel": (2, 2)},
        kink_args=(_halves((2, 2, 5, 5)),),  # tied maxima in most windows
        **MAX,
    ),
    Spec(
        F.max_pooling,
        ((2, 5, 4, 2),),
        ref_pooling,
        kwargs={"kernel": (2, 2), "stride": (1, 1), "channel_last": True},
        id="overlap_channel_last",
        **MAX,
    ),
    Spec(
        F.max_pooling,
        ((2, 2, 5, 5),),
        ref_pooling,
        kwargs={"kernel": (3, 2), "stride": (2, 2), "pad": (1, 1), "ignore_border": False},
        id="pad_border",
        **MAX,
    ),
    Spec(
        F.max_pooling,
        ((2, 3, 7),),
        ref_pooling,
        kwargs={"kernel": (3,), "stride": (2,), "pad": (1,)},
        id="1d",
        **MAX,
    ),
    Spec(
        F.max_pooling,
        ((1, 2, 3, 3, 4),),
        ref_pooling,
        kwargs={"kernel": (2, 2, 2), "stride": (1, 1, 2)},
        id="3d",
        **MAX,
    ),
    Spec(
        max_pooling_index,
        ((2, 2, 5, 5),),
        ref_max_pooling_index,
        kwargs={"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "ignore_border": False},
        order=0,
        float32=False,
    ),
    # average and sum pooling
    Spec(
        F.average_pooling,
        ((2, 2, 5, 5),),
        ref_average,
        kwargs={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)},
        **LINEAR,
    ),
    Spec(
        F.average_pooling,
        ((2, 5, 4, 2),),
        ref_average,
        kwargs={
            "kernel": (2, 3),
            "pad": (1, 1),
            "ignore_border": False,
            "channel_last": True,
            "including_pad": False,
        },
        id="exclude_pad",
        **LINEAR,
    ),
    Spec(
        F.sum_pooling,
        ((2, 2, 5, 5),),
        ref_sum,
        kwargs={"kernel": (2, 2), "stride": (2, 1), "ignore_border": False},
        **LINEAR,
    ),
    Spec(
        F.sum_pooling,
        ((2, 1, 3, 3, 3),),
        ref_sum,
        kwargs={"kernel": (2, 2, 2), "stride": (1, 2, 1), "pad": (1, 0, 0)},
        id="3d",
        **LINEAR,
    ),
    Spec(
        F.global_average_pooling,
        ((2, 3, 4, 5),),
        lambda x: x.mean(axis=(2, 3)).reshape(2, 3, 1, 1),
        **LINEAR,
    ),
    Spec(
        F.global_average_pooling,
        ((2, 2, 2, 3, 2),),
        lambda x: x.mean(axis=(2, 3, 4)).reshape(2, 2, 1, 1),
        id="3d",
        **LINEAR,
    ),
    # unpooling
    Spec(
        F.unpooling,
        ((2, 2, 3, 3),),
        lambda x, kernel: x.repeat(2, 2).repeat(3, 3),
        kwargs={"kernel": (2, 3)},
        **LINEAR,
    ),
    Spec(
        F.unpooling,
        ((2, 3, 2),),
        lambda x, kernel, channel_last: x.repeat(2, 1),
        kwargs={"kernel": (2,), "channel_last": True},
        id="channel_last",
        **LINEAR,
    ),
    # interpolate
    Spec(F.interpolate, ((2, 2, 3, 4),), ref_interpolate, kwargs={"output_size": (5, 7)}, **LINEAR),
    Spec(
        F.interpolate,
        ((2, 2, 3, 4),),
        ref_interpolate,
        kwargs={"scale": (2.0, 1.5), "align_corners": True},
        id="align_corners",
        **LINEAR,
    ),
    Spec(
        F.interpolate,
        ((2, 2, 4, 3),),
        ref_interpolate,
        kwargs={"output_size": (3, 5), "half_pixel": True},
        id="half_pixel",
        **LINEAR,
    ),
    Spec(
        F.interpolate,
        ((2, 5, 2),),
        ref_interpolate,
        kwargs={"output_size": (8,), "channel_last": True},
        id="1d_channel_last",
        **LINEAR,
    ),
    Spec(
        F.interpolate,
        ((1, 2, 2, 3, 2),),
        ref_interpolate,
        kwargs={"output_size": (3, 4, 3)},
        id="3d",
        **LINEAR,
    ),
    Spec(
        F.interpolate,
        ((2, 2, 3, 4),),
        ref_interpolate,
        kwargs={"output_size": (5, 6), "mode": "nearest"},
        id="nearest",
        **LINEAR,
    ),
    Spec(
        F.interpolate,
        ((2, 2, 4, 3),),
        ref_interpolate,
        kwargs={"output_size": (3, 7), "mode": "nearest", "half_pixel_for_nn": True},
        id="nearest_half_pixel_for_nn",
        **LINEAR,
    ),
    # the transposes (gradient functions)
    Spec(
        sum_pooling_backward,
        ((2, 2, 3, 2),),
        lambda gy, **kw: ref_pooling_backward(gy, **kw, mode="sum"),
        kwargs={"shape": (2, 2, 5, 4), "kernel": (2, 2), "ignore_border": False},
        **LINEAR,
    ),
    Spec(
        average_pooling_backward,
        ((2, 2, 3, 3),),
        lambda gy, **kw: ref_pooling_backward(gy, **kw, mode="average"),
        kwargs={
            "shape": (2, 2, 5, 5),
            "kernel": (3, 3),
            "stride": (2, 2),
            "pad": (1, 1),
            "including_pad": False,
        },
        **LINEAR,
    ),
    Spec(
        max_pooling_backward,
        ((2, 3, 4), _index((2, 3, 4), 30)),
        lambda gy, index, shape: ref_scatter(gy, index, shape),
        kwargs={"shape": (5, 6)},
        **LINEAR,
    ),
    Spec(
        interpolate_backward,
        ((2, 2, 5, 7),),
        lambda gy, **kw: ref_interpolate_backward(gy, **kw),
        kwargs={"input_size": (3, 4), "output_size": (5, 7), "half_pixel": True},
        **LINEAR,
    ),
]
