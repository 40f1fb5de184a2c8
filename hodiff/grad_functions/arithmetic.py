"""Gradient-only functions of the arithmetic family."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine import cuda as _cuda
from hodiff.engine.context import MODE_BITS, RAW
from hodiff.engine.function import (
    Flags,
    Function,
    Slot,
    Slots,
    elementwise_setup,
    float_dtype,
    records_arguments,
)
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import reduction as _reduction

__all__ = ["mul_n", "sum_to"]


class SumTo(Function, follows_shape=False):
    """Sums a broadcast gradient back to ``shape``: the transpose of ``broadcast``."""

    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        x = inputs[0]
        lead = x.ndim - len(self.shape)
        tail = x.shape[lead:] if lead >= 0 else ()
        if lead < 0 or any(s not in (1, t) for s, t in zip(self.shape, tail, strict=True)):
            raise ValueError(f"sum_to: x of shape {x.shape} cannot be summed to {self.shape}")
        return [(self.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        lead = x.ndim - len(self.shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, s in enumerate(self.shape) if s == 1 and x.shape[lead + i] != 1
        )
        y = x.sum(axis=axes, keepdims=True) if axes else x
        outputs[0] = y.reshape(self.shape) if lead else y

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        # transpose of a sum is a broadcast
        if prop_down[0]:
            inputs[0].store(_array.broadcast(outputs[0].grad, inputs[0].shape), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # the leading per-example axes that sum_to drops sit behind the batch axis: sum them first
        (x,) = inputs
        lead = x.ndim - 1 - len(self.shape)
        if lead > 0:
            x = _reduction.sum(x, axis=tuple(range(1, lead + 1)))
        return SumTo(shape=(x.shape[0], *self.shape))(x)


def sum_to(x: Any, shape: Sequence[int]) -> Variable:
    """``x`` summed over the axes that broadcasting to ``x.shape`` would have added to ``shape``.

    >>> import numpy as np
    >>> sum_to(np.ones((2, 3)), (3,)).d
    array([2., 2., 2.])
    """
    return SumTo(shape=shape)(x)


def _mul_n(inputs: Sequence[Any], val: float) -> Any:
    """The array kernel of :func:`mul_n` (numpy or cupy)."""
    # plain products: numpy reuses the temporaries of large arrays (temporary elision)
    n = len(inputs)
    a = inputs[0]
    if n == 3 and type(a) is not np.ndarray and _cuda.fusable(*inputs):  # one GPU launch
        k = _cuda.kernel("mul3", "T a, T b, T c, float64 val", "T y", "y = a * b * c * (T)val")
        return k(a, inputs[1], inputs[2], val)
    if n == 3:  # the common case (a rule's ggx * gy * y)
        y = a * inputs[1] * inputs[2]
    elif n == 1:
        y = a * 1.0
    else:
        y = a * inputs[1]
        for x in inputs[2:]:
            y = y * x
    return y if val == 1.0 else y * val


class MulN(Function, follows_shape=True, follows_rank=True):
    """``y = val * x_0 * x_1 * ... * x_{n-1}`` elementwise, with numpy broadcasting.

    One node for a product that backward rules build often (``ggx * gy * y * -2`` in
    tanh's second derivative). Its derivative is the same kind of node:
    ``d y / d x_i = val * prod_{j != i} x_j``, so the chain of derivatives never ends.
    """

    complex_values = "holomorphic"
    batch_rule = _batching.elementwise
    taylor = "multilinear"

    @records_arguments
    def __init__(self, *, val: float = 1.0) -> None:
        self.val = val if type(val) is float else float(val)

    @property  # read-only here
    def static_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # type: ignore[override]
        """``((), {"val": val})``, made when asked (a hot constructor stores nothing more)."""
        return ((), {"val": self.val})

    @elementwise_setup
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        if not inputs:
            raise ValueError("mul_n: needs at least one input")
        try:
            shape = tuple(np.broadcast_shapes(*[x.shape for x in inputs]))
        except ValueError:
            listed = " and ".join(str(x.shape) for x in inputs)
            raise ValueError(f"mul_n: shapes {listed} cannot be broadcast together") from None
        return [(shape, float_dtype(np.result_type(*[x.dtype for x in inputs])))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = _mul_n(inputs, self.val)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d (val prod_j x_j) = val sum_i (prod_{j != i} x_j) dx_i
        gy = outputs[0].grad
        n = len(inputs)
        for i in range(n):
            if prop_down[i]:
                others = [inputs[j].data for j in range(n) if j != i]
                inputs[i].store(MulN(val=self.val)(gy, *others), accum[i])


def mul_n(*xs: Any, val: float = 1.0) -> Variable:
    """``y = val * x_0 * x_1 * ... * x_{n-1}`` elementwise, with numpy broadcasting.

    Shapes: the inputs broadcast together; ``y`` has the broadcast shape.

    >>> import numpy as np
    >>> mul_n(np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array(0.5), val=-2.0).d
    array([-3., -8.])
    """
    if MODE_BITS.get() & RAW and xs:  # a plain pass: the kernel on the arrays, no node
        return _mul_n(xs, val if type(val) is float else float(val))
    return MulN(val=val)(*xs)
