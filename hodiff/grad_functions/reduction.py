"""Gradient-only functions of the reduction family.

``tie_weights`` holds the value-dependent part of the max/min rules (which
elements are extrema); ``linear_scan`` is the first-order linear recurrence that
the cumprod rule needs to stay exact with zeros, closed under differentiation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import reduction as _reduction

__all__ = ["linear_scan", "tie_weights"]

Spec = list[tuple[tuple[int, ...], Any]]


class TieWeights(Function, follows_shape=True):
    """1/(number of extrema of the slice) at each maximum (minimum) over ``axes``, 0
    elsewhere; piecewise constant, so not differentiable (it cuts the graph).
    """

    differentiable = False

    def __init__(self, *, axes: Sequence[int], mode: str = "max") -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"tie_weights: mode must be 'max' or 'min', got {mode!r}")
        self.axes = tuple(axes)
        self.mode = mode

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        if any(not -x.ndim <= a < x.ndim for a in self.axes) or (x.ndim == 0 and self.axes):
            raise ValueError(f"tie_weights: axes {self.axes} out of range for shape {x.shape}")
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        x = xp.asarray(inputs[0])
        m = (
            x.max(self.axes, keepdims=True)
            if self.mode == "max"
            else x.min(self.axes, keepdims=True)
        )
        mask = (x == m).astype(float_dtype(x.dtype))
        outputs[0] = mask / mask.sum(self.axes, keepdims=True)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        return _batching.renew(self, axes=_batching.shift_axes(tuple(self.axes), x.ndim - 1))(x)


class LinearScan(Function, follows_shape=True):
    """``h_k = a_k h_{k-1} + b_k`` along ``axis`` from ``h_{-1} = 0`` (``reverse``:
    ``h_k = a_k h_{k+1} + b_k`` from the end), by log2(K) vectorised doubling steps.
    """

    need_inputs = (0,)
    need_outputs = True
    complex_values = "holomorphic"  # bilinear in a and h: the real rules hold unchanged

    def __init__(self, *, axis: int, reverse: bool = False) -> None:
        self.axis = axis
        self.reverse = bool(reverse)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        a, b = inputs
        if a.shape != b.shape:
            raise ValueError(f"linear_scan: a of shape {a.shape} and b of shape {b.shape} differ")
        if not -a.ndim <= self.axis < a.ndim:
            raise ValueError(f"linear_scan: axis {self.axis} out of range for shape {a.shape}")
        return [(a.shape, float_dtype(np.result_type(a.dtype, b.dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        dtype = float_dtype(xp.result_type(inputs[0], inputs[1]))
        a = xp.moveaxis(xp.array(inputs[0], dtype=dtype, copy=True), self.axis, -1)
        b = xp.moveaxis(xp.array(inputs[1], dtype=dtype, copy=True), self.axis, -1)
        if self.reverse:
            a, b = a[..., ::-1], b[..., ::-1]
        # after the step of offset d, (a_k, b_k) is the affine map h_{k-2d} -> h_k; each
        # right-hand side is computed before it is written, so the updates are in place
        d, n = 1, a.shape[-1]
        while d < n:
            b[..., d:] = a[..., d:] * b[..., :-d] + b[..., d:]
            if 2 * d < n:
                a[..., d:] = a[..., d:] * a[..., :-d]
            d *= 2
        if self.reverse:
            b = b[..., ::-1]
        outputs[0] = xp.ascontiguousarray(xp.moveaxis(b, -1, self.axis))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the adjoint runs the other way, l_k = gh_k + a_{k+1} l_{k+1}: gb = l, ga_k = l_k h_{k-1}
        _shift = _reduction._shift
        a, h = inputs[0], outputs[0]
        axis = self.axis % len(a.shape)
        by = 1 if self.reverse else -1  # moves a_{k+1} (reverse: a_{k-1}) to place k
        lam = linear_scan(
            _shift(a.data, a.shape, axis, by, 0.0), h.grad, axis, reverse=not self.reverse
        )
        if prop_down[0]:
            a.store(lam * _shift(h.data, a.shape, axis, -by, 0.0), accum[0])
        if prop_down[1]:
            inputs[1].store(lam, accum[1])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        size = _batching.batch_size(inputs, axes)
        a, b = (_batching.batched(x, ax, size) for x, ax in zip(inputs, axes, strict=True))
        return _batching.renew(self, axis=_batching.map_axis(self.axis, a.ndim - 1))(a, b)


def tie_weights(x: Any, axes: Sequence[int], mode: str = "max") -> Variable:
    """Weights of the arg-maxima (``mode="min"``: arg-minima) of ``x`` over ``axes``:
    ``1 / count`` at each of the ``count`` tied extrema of a slice, 0 elsewhere.

    >>> import numpy as np
    >>> tie_weights(np.array([1.0, 3.0, 3.0]), (0,)).d
    array([0. , 0.5, 0.5])
    """
    return TieWeights(axes=axes, mode=mode)(x)


def linear_scan(a: Any, b: Any, axis: int, reverse: bool = False) -> Variable:
    """The linear recurrence ``h_k = a_k h_{k-1} + b_k`` along ``axis`` with ``h_{-1} = 0``
    (``reverse``: ``h_k = a_k h_{k+1} + b_k``, from the last element).

    ``a`` and ``b`` have one shape. Linear in ``b``; every derivative is a scan again.

    >>> import numpy as np
    >>> linear_scan(np.array([5.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0]), 0).d
    array([ 1.,  3., 10.])
    """
    return LinearScan(axis=axis, reverse=reverse)(a, b)
