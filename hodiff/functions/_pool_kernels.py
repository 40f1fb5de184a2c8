"""Array-level kernels of the pooling family, shared by ``functions/pooling.py`` and
``grad_functions/pooling.py``: spatial axes and integer arguments, the 1-D resize matrices
of ``interpolate`` and :class:`InterpolateBase` (the arguments of ``interpolate`` and of its
transpose). A leaf module: it imports no function family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine.function import Function

Ints = tuple[int, ...]


def spatial_axes(name: str, shape: Ints, n: int, channel_last: bool) -> Ints:
    """The ``n`` spatial axes of an input of ``shape``."""
    last = len(shape) - (1 if channel_last else 0)
    if n < 1 or last - n < 0:
        raise ValueError(
            f"{name}: x of shape {shape} has fewer than {n} spatial axes"
            + (" before its channel axis" if channel_last else "")
        )
    return tuple(range(last - n, last))


def int_tuple(name: str, arg: str, value: Any, n: int | None, low: int) -> Ints:
    """``value`` (an int or a sequence of ints) as a tuple of ``n`` ints ``>= low``."""
    t = (value,) * (n or 1) if isinstance(value, int | np.integer) else tuple(value)
    if not all(isinstance(v, int | np.integer) for v in t):
        raise TypeError(f"{name}: {arg}={value!r} must be ints")
    if (n is not None and len(t) != n) or not t:
        raise ValueError(f"{name}: {arg}={value!r} must be {n or 'one or more'} ints")
    if any(v < low for v in t):
        raise ValueError(f"{name}: {arg}={value!r} must be >= {low}")
    return tuple(int(v) for v in t)


def interpolation_matrix(
    size: int,
    out: int,
    mode: str,
    align_corners: bool,
    half_pixel: bool,
    half_pixel_for_nn: bool,
) -> np.ndarray:
    """The ``(out, size)`` matrix of a 1-D resize, NNabla's coordinate rules (float64)."""
    scale = 0.0 if out <= 1 else ((size - 1) / (out - 1) if align_corners else size / out)
    o = np.arange(out, dtype=np.float64)
    rows = np.arange(out)
    m = np.zeros((out, size))
    if mode == "nearest" and half_pixel_for_nn:
        src = size / out * (o + 0.5)
    elif half_pixel:
        src = np.maximum(0.0, scale * (o + 0.5) - 0.5)
    else:
        src = scale * o
    lo = np.minimum(np.floor(src).astype(np.int64), size - 1)
    if mode == "nearest":
        m[rows, lo] = 1.0
        return m
    hi = np.minimum(lo + 1, size - 1)
    frac = src - lo
    np.add.at(m, (rows, lo), 1.0 - frac)
    np.add.at(m, (rows, hi), frac)
    return m


def resize(xp: Any, x: Any, axes: Ints, mats: Sequence[np.ndarray]) -> Any:
    """``x`` multiplied along each axis in ``axes`` by its matrix (``(new, old)``)."""
    for ax, m in zip(axes, mats, strict=True):
        mt = xp.asarray(m.T, dtype=x.dtype)
        x = xp.moveaxis(xp.matmul(xp.moveaxis(x, ax, -1), mt), -1, ax)
    return xp.ascontiguousarray(x)


class InterpolateBase(Function, register=False):
    need_inputs = False
    taylor = "linear"
    linear_in = (0,)

    def __init__(
        self,
        *,
        output_size: Sequence[int],
        mode: str,
        align_corners: bool,
        half_pixel: bool,
        half_pixel_for_nn: bool,
        channel_last: bool,
    ) -> None:
        self.output_size = tuple(output_size)
        self.mode = mode
        self.align_corners = bool(align_corners)
        self.half_pixel = bool(half_pixel)
        self.half_pixel_for_nn = bool(half_pixel_for_nn)
        self.channel_last = bool(channel_last)

    def params(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "align_corners": self.align_corners,
            "half_pixel": self.half_pixel,
            "half_pixel_for_nn": self.half_pixel_for_nn,
            "channel_last": self.channel_last,
        }

    def check(self, shape: Ints) -> Ints:
        name = self.name
        axes = spatial_axes(name, shape, len(self.output_size), self.channel_last)
        int_tuple(name, "output_size", self.output_size, len(self.output_size), 1)
        if self.mode not in ("linear", "nearest"):
            raise ValueError(f"{name}: mode={self.mode!r} must be 'linear' or 'nearest'")
        if self.align_corners and self.half_pixel:
            raise ValueError(f"{name}: align_corners and half_pixel cannot both be True")
        return axes

    def matrices(self, size: Ints) -> list[np.ndarray]:
        """One ``(output_size[i], size[i])`` matrix per spatial axis."""
        return [
            interpolation_matrix(
                n, o, self.mode, self.align_corners, self.half_pixel, self.half_pixel_for_nn
            )
            for n, o in zip(size, self.output_size, strict=True)
        ]
