"""Gradient-only functions of the loss family: label selection and the fused softmax-CE gradient.

``select_by_label`` (a gather of one entry per slice along an axis) and
``scatter_by_label`` (its transpose) are each other's backward, so any chain of
them is differentiable forever. ``softmax_cross_entropy_grad`` is the fused
gradient ``gy * (softmax(x) - onehot(t))`` of ``softmax_cross_entropy``: one
cheap kernel in a plain backward, with a backward of its own written in
hodiff functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import _loss_kernels as _kernels
from hodiff.functions import loss as _loss
from hodiff.functions import reduction as _reduction

__all__ = ["scatter_by_label", "select_by_label", "softmax_cross_entropy_grad"]

Spec = list[tuple[tuple[int, ...], Any]]


def _onehot(xp: Any, t: Any, axis: int, n: int, ndim: int) -> Any:
    """Boolean array broadcast against ``t`` (size 1 on ``axis``): True where the index is t."""
    shape = [1] * ndim
    shape[axis] = n
    return xp.arange(n).reshape(shape) == t


def _batch_select(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    # select_by_label(x, t), scatter_by_label(g, t): both batched, the axis shifted
    size = _batching.batch_size(inputs, axes)
    x, t = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
    axis = None if self.axis is None else _batching.map_axis(self.axis, x.ndim - 1)
    return _batching.renew(self, axis=axis)(x, t)


class SelectByLabel(Function, follows_shape=True):
    """``y = take_along_axis(x, t, axis)``: the entry of each slice picked by its label."""

    need_inputs = (1,)
    batch_rule = _batch_select
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, axis: int | None = None, caller: str = "select_by_label") -> None:
        self.axis = axis
        self.caller = caller

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, t = inputs
        axis = _kernels.resolve_axis(self.caller, self.axis, x.ndim)
        kept = _kernels.check_labels(self.caller, x.shape, t, axis)
        return [(kept, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, t = inputs
        axis = _kernels.resolve_axis(self.caller, self.axis, x.ndim)
        xp = array_module(x)
        t = _kernels.labels_in_range(self.caller, xp, t, axis, x.shape)
        y = xp.take_along_axis(x, t, axis)  # a label -1 (ignored) picks 0
        outputs[0] = xp.where(t < 0, xp.zeros((), y.dtype), y)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # transpose of a gather: scatter gy back to the picked entries (zeros elsewhere)
        if prop_down[0]:
            x = inputs[0]
            axis = _kernels.resolve_axis(self.caller, self.axis, len(x.shape))
            g = scatter_by_label(outputs[0].grad, inputs[1].data, axis=axis, size=x.shape[axis])
            x.store(g, accum[0])


class ScatterByLabel(Function, follows_shape=False):
    """``y[..., t, ...] = g`` along ``axis`` into zeros of length ``size``; the transpose of
    :class:`SelectByLabel`.
    """

    need_inputs = (1,)
    batch_rule = _batch_select
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, axis: int, size: int) -> None:
        self.axis = int(axis)
        self.size = int(size)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        g, t = inputs
        axis = _kernels.resolve_axis(self.name, self.axis, g.ndim)
        if g.shape[axis] != 1:
            raise ValueError(
                f"scatter_by_label: g of shape {g.shape} must have size 1 on axis {axis}"
            )
        shape = (*g.shape[:axis], self.size, *g.shape[axis + 1 :])
        _kernels.check_labels(self.name, shape, t, axis, x_name="the output")
        return [(shape, g.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        g, t = inputs
        xp = array_module(g)
        axis = self.axis % g.ndim
        shape = (*g.shape[:axis], self.size, *g.shape[axis + 1 :])
        t = _kernels.labels_in_range(self.name, xp, t, axis, shape)
        outputs[0] = xp.where(_onehot(xp, t, axis, self.size, g.ndim), g, xp.zeros((), g.dtype))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # transpose of a scatter: gather the picked entries of gy
        if prop_down[0]:
            g = select_by_label(outputs[0].grad, inputs[1].data, axis=self.axis)
            inputs[0].store(g, accum[0])


class SoftmaxCrossEntropyGrad(Function, follows_shape=True):
    """``gx = gy * (softmax(x) - onehot(t))`` along ``axis``: softmax_cross_entropy's gradient."""

    def __init__(self, *, axis: int | None = None) -> None:
        self.axis = axis

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, t, gy = inputs
        name = self.name
        axis = _kernels.resolve_axis(name, self.axis, x.ndim)
        kept = _kernels.check_labels(name, x.shape, t, axis)
        try:
            ok = np.broadcast_shapes(gy.shape, kept) == kept
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name}: gy of shape {gy.shape} does not broadcast to the loss shape {kept}"
            )
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, t, gy = inputs
        xp = array_module(x)
        axis = _kernels.resolve_axis(self.name, self.axis, x.ndim)
        t = _kernels.labels_in_range(self.name, xp, t, axis, x.shape)
        s = _kernels.softmax_array(xp, x, axis)
        s -= _onehot(xp, t, axis, x.shape[axis], x.ndim)  # no one for a label -1
        s *= xp.where(t < 0, xp.zeros((), s.dtype), gy)  # an ignored label: no gradient
        outputs[0] = s

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        ggx = outputs[0].grad
        x, t, gy = (s.data for s in inputs)
        shape = inputs[0].shape
        axis = _kernels.resolve_axis(self.name, self.axis, len(shape))
        s = _loss.softmax(x, axis=axis)
        # y = w gy (s - onehot(t)) with w = 0 for an ignored label (-1), 1 otherwise
        w = _loss.label_weight(t, (*shape[:axis], 1, *shape[axis + 1 :]), s.dtype)
        gy = gy * w
        if prop_down[0]:
            # d/dx [gy (s - onehot)] . ggx = gy s (ggx - <ggx, s>)
            inner = _reduction.sum(ggx * s, axis=axis, keepdims=True)
            inputs[0].store(gy * s * (ggx - inner), accum[0])
        if prop_down[2]:
            # d/dgy: <ggx, s - onehot> along the axis
            ggy = _reduction.sum(ggx * s, axis=axis, keepdims=True) - select_by_label(
                ggx, t, axis=axis
            )
            inputs[2].store(ggy * w, accum[2])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # (x, t, gy): x and t batched; gy broadcasts to the loss shape, so it is aligned
        size = _batching.batch_size(inputs, axes)
        x = _batching.batched(inputs[0], axes[0], size)
        t = _batching.batched(inputs[1], axes[1], size)
        gy = _batching.align(inputs[2], axes[2], x.ndim - 1)
        axis = None if self.axis is None else _batching.map_axis(self.axis, x.ndim - 1)
        return _batching.renew(self, axis=axis)(x, t, gy)


def select_by_label(x: Any, t: Any, axis: int | None = None) -> Variable:
    """Picks the entry ``t`` of every slice of ``x`` along ``axis`` (``take_along_axis``).

    Args:
        x: array of shape ``(D_1, ..., C, ..., D_N)``.
        t: integer labels in ``[0, C)`` of shape ``(D_1, ..., 1, ..., D_N)`` (or without the axis).
        axis: the axis of ``C`` (default: the last).

    Returns:
        Shape ``(D_1, ..., 1, ..., D_N)``.

    >>> import numpy as np
    >>> select_by_label(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1], [0]])).d
    array([[2.],
           [3.]])

    """
    return SelectByLabel(axis=axis)(x, t)


def scatter_by_label(g: Any, t: Any, axis: int, size: int) -> Variable:
    """Zeros of length ``size`` along ``axis`` holding ``g`` at the positions ``t``.

    The transpose of :func:`select_by_label`: ``g`` and ``t`` have size 1 on ``axis``.
    """
    return ScatterByLabel(axis=axis, size=size)(g, t)


def softmax_cross_entropy_grad(x: Any, t: Any, gy: Any, axis: int | None = None) -> Variable:
    """``gy * (softmax(x) - onehot(t))`` along ``axis``: the gradient of softmax_cross_entropy.

    >>> import numpy as np
    >>> softmax_cross_entropy_grad(np.zeros((1, 2)), np.array([[0]]), np.ones((1, 1))).d
    array([[-0.5,  0.5]])
    """
    return SoftmaxCrossEntropyGrad(axis=axis)(x, t, gy)
