"""Array functions: shape manipulation, selection, comparison, indexing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.context import array_module
from hodiff.function import Function, Slot
from hodiff.variable import Variable

__all__ = [
    "broadcast",
    "equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "reshape",
    "where",
]

Slots = Sequence[Slot]
Flags = Sequence[bool]
Spec = list[tuple[tuple[int, ...], Any]]


def _broadcast_shape(name: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " and ".join(str(s) for s in shapes)
        raise ValueError(f"{name}: shapes {listed} cannot be broadcast together") from None


class Reshape(Function):
    need_inputs = False

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        shape = list(self.shape)
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if shape.count(-1) > 1 or (shape.count(-1) == 1 and (known == 0 or x.size % known)):
            raise ValueError(f"reshape: cannot reshape x of shape {x.shape} into {self.shape}")
        if -1 in shape:
            shape[shape.index(-1)] = x.size // known
        elif known != x.size:
            raise ValueError(f"reshape: cannot reshape x of shape {x.shape} into {self.shape}")
        return [(tuple(shape), x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0].reshape(self.shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the gradient takes the input's shape back
        if prop_down[0]:
            inputs[0].store(reshape(outputs[0].grad, inputs[0].shape), accum[0])


class Broadcast(Function):
    need_inputs = False

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        ok = x.ndim <= len(self.shape) and all(
            a in (1, b) for a, b in zip(x.shape[::-1], self.shape[::-1], strict=False)
        )
        if not ok:
            raise ValueError(f"broadcast: x of shape {x.shape} cannot be broadcast to {self.shape}")
        return [(self.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).broadcast_to(inputs[0], self.shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the gradient is summed over the broadcast axes (Slot.store does it)
        if prop_down[0]:
            inputs[0].store(outputs[0].grad, accum[0])


class Where(Function):
    need_inputs = (0,)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        shape = _broadcast_shape(self.name, [x.shape for x in inputs])
        return [(shape, np.result_type(inputs[1].dtype, inputs[2].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        c, a, b = inputs
        outputs[0] = array_module(a).where(c, a, b)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gy goes to x_true where cond holds, to x_false elsewhere; cond gets none
        gy, c = outputs[0].grad, inputs[0].data
        if prop_down[1]:
            inputs[1].store(where(c, gy, 0.0), accum[1])
        if prop_down[2]:
            inputs[2].store(where(c, 0.0, gy), accum[2])


class _Compare(Function, register=False):
    differentiable = False

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [(_broadcast_shape(self.name, [x.shape for x in inputs]), np.dtype(bool))]


class Less(_Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] < inputs[1]


class LessEqual(_Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] <= inputs[1]


class Greater(_Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] > inputs[1]


class GreaterEqual(_Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] >= inputs[1]


class Equal(_Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] == inputs[1]


def reshape(x: Any, shape: Sequence[int]) -> Variable:
    """``x`` with a new shape of the same size (one entry may be -1).

    >>> import numpy as np, hodiff.functions as F
    >>> F.reshape(np.arange(6.0), (2, -1)).shape
    (2, 3)
    """
    return Reshape(shape=shape)(x)


def broadcast(x: Any, shape: Sequence[int]) -> Variable:
    """``x`` broadcast to ``shape`` (numpy rules); the gradient sums over the broadcast axes."""
    return Broadcast(shape=shape)(x)


def where(condition: Any, x_true: Any, x_false: Any) -> Variable:
    """``y = x_true`` where ``condition`` is nonzero, else ``x_false`` (all broadcast).

    ``condition`` gets no gradient.
    """
    return Where()(condition, x_true, x_false)


def less(x0: Any, x1: Any) -> Variable:
    """``x0 < x1`` elementwise (bool, not differentiable)."""
    return Less()(x0, x1)


def less_equal(x0: Any, x1: Any) -> Variable:
    """``x0 <= x1`` elementwise (bool, not differentiable)."""
    return LessEqual()(x0, x1)


def greater(x0: Any, x1: Any) -> Variable:
    """``x0 > x1`` elementwise (bool, not differentiable)."""
    return Greater()(x0, x1)


def greater_equal(x0: Any, x1: Any) -> Variable:
    """``x0 >= x1`` elementwise (bool, not differentiable)."""
    return GreaterEqual()(x0, x1)


def equal(x0: Any, x1: Any) -> Variable:
    """``x0 == x1`` elementwise (bool, not differentiable)."""
    return Equal()(x0, x1)
