"""Gradient-only functions of the math and activation families: fused backward nodes.

``tanh`` and ``sigmoid`` are in every benchmark; their backward
``gy (1 - y^2)`` / ``gy y (1 - y)`` as separate operators makes three array
passes and three temporaries. Each node below does the same in one node with
one output buffer (1.1x to 1.9x faster on 1e6 floats), and has its own rule, so
the chain of derivatives never ends. ``softplus``'s backward ``gy sigmoid(beta x)``
is one node too: four passes and one buffer, and a gradient graph that keeps no
``sigmoid(beta x)`` array alive (its rule recomputes it, as PyTorch's does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine import cuda as _cuda
from hodiff.engine.context import RAW, STATE, array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import activation as _activation
from hodiff.grad_functions import arithmetic as _garith

__all__ = ["sigmoid_backward", "softplus_backward", "tanh_backward"]


def _fusable(t: Any, gy: Any) -> bool:
    """Whether ``t *= gy`` may run in place: ``t`` a fresh array of the result's shape/dtype."""
    xp = array_module(t)
    return (
        isinstance(t, xp.ndarray)
        and t.ndim > 0
        and getattr(gy, "shape", ()) == t.shape
        and getattr(gy, "dtype", None) == t.dtype
    )


def _tanh_backward(gy: Any, y: Any) -> Any:
    """The array kernel of :func:`tanh_backward` (numpy or cupy)."""
    if type(y) is not np.ndarray and _cuda.fusable(gy, y):  # one kernel launch on a GPU
        return _cuda.kernel("tanh_backward", "T gy, T y", "T gx", "gx = gy - gy * y * y")(gy, y)
    if getattr(y, "size", 0) < 256:  # small: array-array kernels (0.8 against 1.2 us)
        return gy - gy * y * y
    t = y * y
    if _fusable(t, gy):  # large: one temporary, the rest in place (1.5x faster)
        xp = array_module(t)
        xp.subtract(1.0, t, out=t)
        t *= gy
        return t
    return gy * (1.0 - t)


def _sigmoid_backward(gy: Any, y: Any) -> Any:
    """The array kernel of :func:`sigmoid_backward` (numpy or cupy)."""
    if type(y) is not np.ndarray and _cuda.fusable(gy, y):  # one kernel launch on a GPU
        return _cuda.kernel("sigmoid_backward", "T gy, T y", "T gx", "gx = gy * y * (1 - y)")(gy, y)
    t = 1.0 - y
    if _fusable(t, gy):
        t *= y
        t *= gy
        return t
    return gy * y * t


def _softplus_backward(gy: Any, x: Any, beta: float) -> Any:
    """The array kernel of :func:`softplus_backward`: ``gy / (1 + e^(-beta x))``.

    Where ``e^(-beta x)`` overflows the result is ``gy / inf = 0``, the limit. Accurate to a
    few ulps relative, as :func:`hodiff.functions.sigmoid`.
    """
    if type(x) is not np.ndarray and _cuda.fusable(gy, x):  # one kernel launch on a GPU
        return _cuda.kernel(
            "softplus_backward",
            "T gy, T x, float64 beta",
            "T gx",
            "gx = gy / ((T)1 + exp(x * (T)(-beta)))",
        )(gy, x, beta)
    xp = array_module(x)
    t = xp.negative(x) if beta == 1.0 else x * -beta
    with np.errstate(over="ignore", under="ignore"):  # both give the right limit
        if _fusable(t, gy) and t.dtype.kind == "f":  # one buffer, the rest in place
            xp.exp(t, out=t)
            t += 1.0
            xp.divide(gy, t, out=t)
            return t
        return gy / (1.0 + xp.exp(t))  # 0-d, broadcast, mixed dtypes: numpy's promotion


class _GradNode(Function, register=False, follows_shape=True, follows_rank=True):
    """``gx = f(gy, y)`` elementwise, with numpy broadcasting of ``gy`` and ``y``."""

    _second: str = "y"  # the second input's name, for messages
    batch_rule = _batching.elementwise
    taylor = "composite"  # the jet of ``composition``

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        gy, y = inputs
        if gy.shape == y.shape and gy.dtype == y.dtype:  # the hot case
            return [(y.shape, float_dtype(y.dtype))]
        try:
            shape = tuple(np.broadcast_shapes(gy.shape, y.shape))
        except ValueError:
            raise ValueError(
                f"{self.name}: gy of shape {gy.shape} and {self._second} of shape {y.shape} "
                "cannot be broadcast"
            ) from None
        return [(shape, float_dtype(np.result_type(gy.dtype, y.dtype)))]


class TanhBackward(_GradNode):
    """``gx = gy (1 - y^2)``, the backward of ``y = tanh(x)``."""

    scalar_kernel = "x0 - x0 * x1 * x1"
    complex_values = "holomorphic"  # a polynomial in gy and y

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = _tanh_backward(inputs[0], inputs[1])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d gx = (1 - y^2) d gy - 2 gy y dy
        ggx = outputs[0].grad
        gy, y = inputs[0].data, inputs[1].data
        if prop_down[0]:
            inputs[0].store(tanh_backward(ggx, y), accum[0])
        if prop_down[1]:
            inputs[1].store(_garith.mul_n(ggx, gy, y, val=-2.0), accum[1])

    def composition(self, gy: Any, y: Any) -> Any:
        return gy * (1.0 - y * y)  # Taylor mode: the jet of the expression


class SigmoidBackward(_GradNode):
    """``gx = gy y (1 - y)``, the backward of ``y = sigmoid(x)``."""

    scalar_kernel = "x0 * x1 * (1.0 - x1)"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = _sigmoid_backward(inputs[0], inputs[1])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d gx = y (1 - y) d gy + gy (1 - 2 y) dy
        ggx = outputs[0].grad
        gy, y = inputs[0].data, inputs[1].data
        if prop_down[0]:
            inputs[0].store(sigmoid_backward(ggx, y), accum[0])
        if prop_down[1]:
            inputs[1].store(ggx * gy * (1.0 - y * 2.0), accum[1])

    def composition(self, gy: Any, y: Any) -> Any:
        return gy * y * (1.0 - y)  # Taylor mode: the jet of the expression


class SoftplusBackward(_GradNode):
    """``gx = gy sigmoid(beta x)``, the backward of ``y = softplus(x, beta)``."""

    scalar_kernel = "x0 / (1.0 + exp(x1 * -beta))"

    need_inputs = True
    _second = "x"

    def __init__(self, *, beta: float = 1.0) -> None:
        self.beta = float(beta)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = _softplus_backward(inputs[0], inputs[1], self.beta)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # with s = sigmoid(beta x): d gx = s d gy + beta gy s (1 - s) dx
        ggx = outputs[0].grad
        gy, x = inputs[0].data, inputs[1].data
        beta = self.beta
        s = _activation.sigmoid(x * beta if beta != 1.0 else x)  # recomputed, not kept
        if prop_down[0]:
            inputs[0].store(ggx * s, accum[0])
        if prop_down[1]:
            g = ggx * gy if beta == 1.0 else _garith.mul_n(ggx, gy, val=beta)
            inputs[1].store(sigmoid_backward(g, s), accum[1])

    def composition(self, gy: Any, x: Any) -> Any:
        return gy * _activation.sigmoid(x * self.beta)  # Taylor mode: the jet of the expression


def tanh_backward(gy: Any, y: Any) -> Variable:
    """``gx = gy * (1 - y**2)``: the gradient of ``tanh`` from its output ``y``.

    >>> import numpy as np
    >>> tanh_backward(np.array([2.0]), np.array([0.5])).d
    array([1.5])
    """
    if (
        STATE.get().modes & RAW
    ):  # a plain pass: the kernel on the arrays (a node would record nothing)
        return _tanh_backward(gy, y)
    return TanhBackward()(gy, y)


def sigmoid_backward(gy: Any, y: Any) -> Variable:
    """``gx = gy * y * (1 - y)``: the gradient of ``sigmoid`` from its output ``y``.

    >>> import numpy as np
    >>> sigmoid_backward(np.array([2.0]), np.array([0.5])).d
    array([0.5])
    """
    if (
        STATE.get().modes & RAW
    ):  # a plain pass: the kernel on the arrays (a node would record nothing)
        return _sigmoid_backward(gy, y)
    return SigmoidBackward()(gy, y)


def softplus_backward(gy: Any, x: Any, beta: float = 1.0) -> Variable:
    """``gx = gy * sigmoid(beta * x)``: the gradient of ``softplus(x, beta)`` from its input.

    Shapes: ``gy`` and ``x`` broadcast together; ``gx`` has the broadcast shape.

    >>> import numpy as np
    >>> softplus_backward(np.array([2.0]), np.array([0.0])).d
    array([1.])
    """
    if (
        STATE.get().modes & RAW
    ):  # a plain pass: the kernel on the arrays (a node would record nothing)
        return _softplus_backward(gy, x, beta if type(beta) is float else float(beta))
    return SoftplusBackward(beta=beta)(gy, x)
