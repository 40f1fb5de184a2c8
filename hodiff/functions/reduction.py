"""Reductions over axes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.function import Function, Slot, float_dtype
from hodiff.functions import array as _array
from hodiff.variable import Variable

__all__ = ["sum"]

Slots = Sequence[Slot]
Flags = Sequence[bool]
Spec = list[tuple[tuple[int, ...], Any]]


def normalize_axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, int) or not -ndim <= a < max(ndim, 1):
            raise ValueError(f"{name}: axis {axis} is out of range for an input of {ndim} dims")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {axis}")
    return tuple(sorted(out))


def kept_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` set to 1 (the keepdims shape)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


class _Reduce(Function, register=False):
    def __init__(self, *, axis: Any = None, keepdims: bool = False) -> None:
        self.axis = axis
        self.keepdims = bool(keepdims)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        axes = normalize_axes(self.name, self.axis, x.ndim)
        shape = kept_shape(x.shape, axes)
        if not self.keepdims:
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        return [(shape, float_dtype(x.dtype))]

    def _axes(self, ndim: int) -> tuple[int, ...]:
        return normalize_axes(self.name, self.axis, ndim)

    def expand(self, gy: Any, shape: tuple[int, ...]) -> Any:
        """``gy`` (a reduced gradient) broadcast back to the input ``shape``."""
        if not self.keepdims:
            gy = _array.reshape(gy, kept_shape(shape, self._axes(len(shape))))
        return _array.broadcast(gy, shape)


class Sum(_Reduce):
    need_inputs = False

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = x.sum(axis=self._axes(x.ndim), keepdims=self.keepdims)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # every summed element gets gy
        if prop_down[0]:
            inputs[0].store(self.expand(outputs[0].grad, inputs[0].shape), accum[0])


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:  # noqa: A001
    """``y = sum(x)`` over ``axis`` (None: all axes).

    >>> import numpy as np, hodiff.functions as F
    >>> F.sum(np.ones((2, 3)), axis=1).d
    array([3., 3.])
    """
    return Sum(axis=axis, keepdims=keepdims)(x)
