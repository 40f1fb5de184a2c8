"""Spatial transformers: ``affine_grid`` and ``warp_by_grid`` (NNabla's), 2-D and 3-D.

Both are compositions, so they are differentiable to any order in the input
*and* in the grid (R1 with data augmentation differentiates the warp twice).
``warp_by_grid`` unnormalizes the grid to pixel coordinates ``s``, splits
them into a floor ``i`` (not differentiable) and a fraction ``s - i``, reads
the ``2^D`` neighbouring pixels with ``gather`` (indices from the
non-differentiable :class:`CornerIndex`) and weights them by products of
``1 - frac`` / ``frac``. Padding modes act on ``s``: "repeat" clamps it,
"reflect" folds it with ``mod``/``abs``, "zero" masks the corners outside.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.function import Function
from hodiff.engine.tracing import shape_bound, traced
from hodiff.engine.variable import Variable
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import reduction as _reduction
from hodiff.functions import rounding as _round
from hodiff.functions.indexing import shape_of
from hodiff.functions.linalg import batch_matmul

__all__ = ["affine_grid", "warp_by_grid"]

Spec = list[tuple[tuple[int, ...], Any]]


class CornerIndex(Function, follows_shape=False):
    """From per-axis integer-valued float coordinates ``i_a`` of one shape ``S``, for each
    corner ``k`` (a tuple of per-axis ``offsets[k]``): the flat index ``sum_a clip(i_a +
    o_ka) stride_a`` into an array of spatial ``sizes`` (int64) and a float mask of the
    in-range corners, both of shape ``S + (K,)``. Not differentiable.
    """

    differentiable = False
    n_outputs = 2

    def __init__(self, *, sizes: Sequence[int], offsets: Sequence[Sequence[int]]) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        self.offsets = tuple(tuple(int(o) for o in k) for k in offsets)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        shape = inputs[0].shape
        if len(inputs) != len(self.sizes) or any(x.shape != shape for x in inputs):
            raise ValueError(f"corner_index: {len(self.sizes)} coordinates of one shape needed")
        if any(len(k) != len(self.sizes) for k in self.offsets):
            raise ValueError(f"corner_index: offsets {self.offsets} need {len(self.sizes)} ints")
        out = (*shape, len(self.offsets))
        return [(out, np.dtype(np.int64)), (out, inputs[0].dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        shape = (*inputs[0].shape, len(self.offsets))
        flat = xp.zeros(shape, dtype=np.int64)
        valid = xp.ones(shape, dtype=bool)
        for a, (i, size) in enumerate(zip(inputs, self.sizes, strict=True)):
            off = xp.asarray([k[a] for k in self.offsets], dtype=np.int64)
            idx = i.astype(np.int64)[..., None] + off
            valid &= (idx >= 0) & (idx < size)
            flat = flat * size + xp.clip(idx, 0, size - 1)
        outputs[0], outputs[1] = flat, valid.astype(inputs[0].dtype)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        size = _batching.batch_size(inputs, axes)  # pointwise over coordinates of one shape
        return self(*(_batching.batched(x, a, size) for x, a in zip(inputs, axes, strict=True)))


def _base_grid(size: Sequence[int], align_corners: bool, dtype: Any) -> Any:
    """Target points ``(x, y[, z], 1)`` of shape (prod(size), D + 1), x along the last axis."""
    axes = []
    for n in size:
        t = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        axes.append(t if align_corners else t * (n - 1) / n)
    mesh = np.meshgrid(*axes, indexing="ij")  # (D, H, W) order
    cols = [m.reshape(-1) for m in mesh[::-1]] + [np.ones(math.prod(size))]
    return get_default_context().xp.asarray(np.stack(cols, axis=-1), dtype=dtype)


@traced
@real_values
def affine_grid(theta: Any, size: Sequence[int], align_corners: bool = False) -> Variable:
    """The source grid of an affine transform of the normalized target grid (NNabla's).

    ``grid[b, h, w] = theta[b] @ (x_w, y_h, 1)`` with target points in [-1, 1]
    (``align_corners=True``: the corner pixels' centres; False: scaled by ``(n - 1) / n``).

    Args:
        theta: (B, 2, 3) for 2-D or (B, 3, 4) for 3-D.
        size: (H, W) or (D, H, W).
        align_corners: see above.

    Returns:
        (B, H, W, 2) or (B, D, H, W, 3), last axis (x, y[, z]). Linear in ``theta``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.affine_grid(np.array([[[1.0, 0, 0], [0, 1.0, 0]]]), (1, 2), True).d
    array([[[[-1.,  0.],
             [ 1.,  0.]]]])
    """
    size = tuple(int(s) for s in size)
    ts = shape_of(theta)
    d = len(size)
    if d not in (2, 3) or ts[1:] != (d, d + 1) or len(ts) != 3:
        raise ValueError(
            f"affine_grid: theta of shape {ts} must be (B, {d}, {d + 1}) for size "
            f"{size} (2-D or 3-D)"
        )
    dtype = getattr(theta, "dtype", np.float64)
    base = _base_grid(size, bool(align_corners), dtype if np.dtype(dtype).kind == "f" else None)
    grid = batch_matmul(base[None], theta, transpose_b=True)  # (B, P, D)
    return _array.reshape(grid, (ts[0], *size, d))


def _unnormalize(g: Any, n: int, align_corners: bool) -> Any:
    if align_corners:  # [-1, 1] -> [0, n - 1]
        return (g + 1.0) * ((n - 1) / 2.0)
    return (g + 1.0) * (n / 2.0) - 0.5  # [-1, 1] -> [-0.5, n - 0.5]


def _reflect(s: Any, lo: float, hi: float) -> Any:
    """Mirror ``s`` into [lo, hi]: ``lo + L - |mod(s - lo, 2 L) - L|`` with ``L = hi - lo``."""
    span = hi - lo
    if span <= 0:
        return s * 0.0 + lo
    return (lo + span) - _arith.abs(_round.mod(s - lo, 2.0 * span) - span)


def _source(g: Any, n: int, padding_mode: str, align_corners: bool) -> Any:
    s = _unnormalize(g, n, align_corners)
    if padding_mode == "repeat":
        return _array.clip_by_value(s, 0.0, float(n - 1))
    if padding_mode == "reflect":
        if align_corners:
            return _reflect(s, 0.0, float(n - 1))
        s = _reflect(s * 2.0, -1.0, 2.0 * n - 1.0) * 0.5
        return _array.clip_by_value(s, 0.0, float(n - 1))
    return s


@traced
@real_values
def warp_by_grid(
    x: Any,
    grid: Any,
    mode: str = "linear",
    padding_mode: str = "zero",
    align_corners: bool = False,
    channel_last: bool = False,
) -> Variable:
    """Samples ``x`` at the normalized points of ``grid`` (NNabla's ``warp_by_grid``).

    A grid value ``g`` in [-1, 1] maps to the pixel coordinate ``s = (g + 1) (n - 1) / 2``
    (``align_corners``) or ``s = ((g + 1) n - 1) / 2``; "linear" mode interpolates the
    ``2^D`` neighbours with weights ``prod_a (1 - |s_a - i_a|)`` (bilinear/trilinear),
    "nearest" takes the pixel ``round(s)`` (halves away from zero, as C's ``round``).
    Outside the image "zero" pads with zeros, "repeat" clamps to the border, "reflect"
    mirrors at the borders.

    Args:
        x: (B, C, H, W) or (B, C, D, H, W) (channels last if ``channel_last``).
        grid: (B, Ho, Wo, 2) or (B, Do, Ho, Wo, 3), last axis (x, y[, z]).
        mode: "linear" or "nearest".
        padding_mode: "zero", "repeat" or "reflect".
        align_corners: see above.
        channel_last: layout of ``x`` and of the result.

    Returns:
        (B, C, Ho, Wo) or (B, C, Do, Ho, Wo) (or channels last). Differentiable to any
        order in ``x`` and (linear mode) in ``grid``; the derivative in ``grid`` jumps where
        a point crosses a pixel.

    >>> import numpy as np, hodiff.functions as F
    >>> x = np.arange(4.0).reshape(1, 1, 2, 2)
    >>> F.warp_by_grid(x, np.zeros((1, 1, 1, 2)), align_corners=True).d
    array([[[[1.5]]]])
    """
    xs, gs, d = _check_warp(mode, padding_mode, x, grid)
    if channel_last:
        sizes, c = xs[1:-1], xs[-1]
        xc = x
    else:
        sizes, c = xs[2:], xs[1]
        xc = _array.transpose(x, (0, *range(2, d + 2), 1))
    b, out = gs[0], gs[1:-1]
    # the corner indices below are computed from x's spatial sizes, on grid's branch:
    # a static graph cannot carry them to a new x (reset_shape refuses here)
    flat_x = shape_bound(_array.reshape(xc, (b, math.prod(sizes), c)))
    flat_g = _array.reshape(grid, (b, math.prod(out), d))
    coords = []  # per spatial axis (D, H, W order): source coordinate, shape (B, P)
    for a, n in enumerate(sizes):
        g = _array.getitem(flat_g, (Ellipsis, d - 1 - a))
        coords.append(_source(g, n, padding_mode, bool(align_corners)))
    if mode == "nearest":
        # NNabla's std::round: halves away from zero
        lows = [_arith.sign(s, alpha=0.0) * _round.floor(_arith.abs(s) + 0.5) for s in coords]
        corners: list[tuple[int, ...]] = [(0,) * d]
    else:
        lows = [_round.floor(s) for s in coords]
        corners = list(itertools.product((0, 1), repeat=d))
    # all 2^D corners at once: (B, P, K) indices, masks and weights, one gather of (B, P K)
    p, k = math.prod(out), len(corners)
    idx, wgt = CornerIndex(sizes=sizes, offsets=corners)(*lows)
    if mode == "linear":
        for a, (s, i) in enumerate(zip(coords, lows, strict=True)):
            f = s - i
            pair = _array.stack(1.0 - f, f, axis=-1)  # (B, P, 2): weights of offsets 0 and 1
            wgt = wgt * _array.getitem(pair, (Ellipsis, np.array([o[a] for o in corners])))
    vals = _array.gather(flat_x, _array.reshape(idx, (b, p * k)), axis=1, batch_dims=1)
    y = _reduction.sum(
        _array.reshape(vals, (b, p, k, c)) * _array.reshape(wgt, (b, p, k, 1)), axis=2
    )
    y = _array.reshape(y, (b, *out, c))
    return y if channel_last else _array.transpose(y, (0, d + 1, *range(1, d + 1)))


def _check_warp(
    mode: str, padding_mode: str, x: Any, grid: Any
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Raises unless the modes are known and the shapes of x and grid fit; returns the
    shapes and D (2 or 3).
    """
    if mode not in ("linear", "nearest"):
        raise ValueError(f"warp_by_grid: mode must be 'linear' or 'nearest', got {mode!r}")
    if padding_mode not in ("zero", "repeat", "reflect"):
        raise ValueError(
            f"warp_by_grid: padding_mode must be 'zero', 'repeat' or 'reflect', "
            f"got {padding_mode!r}"
        )
    xs, gs = shape_of(x), shape_of(grid)
    d = len(gs) - 2
    if d not in (2, 3) or len(xs) != d + 2 or gs[-1] != d or gs[0] != xs[0]:
        raise ValueError(
            f"warp_by_grid: x of shape {xs} and grid of shape {gs} must be "
            "(B, C, H, W) and (B, Ho, Wo, 2), or the 3-D forms"
        )
    return xs, gs, d
