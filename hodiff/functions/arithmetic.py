"""Arithmetic: the binary operators (broadcasting), their scalar forms, abs, sign, identity.

Every rule below is written with Variable operators and hodiff functions, so
it runs on bare arrays during ``.backward()`` and records a differentiable
graph during ``hd.grad``. Binary gradients are stored at the broadcast shape;
``Slot.store`` sums them back to each input's shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import (
    Function,
    Slot,
    elementwise_setup,
    float_dtype,
    records_arguments,
)
from hodiff.engine.variable import Variable, is_scalar
from hodiff.functions import array as _array
from hodiff.functions import math as _math
from hodiff.grad_functions import arithmetic as _garith

__all__ = [
    "abs",
    "add2",
    "add_n",
    "add_scalar",
    "div2",
    "identity",
    "maximum2",
    "maximum_scalar",
    "minimum2",
    "minimum_scalar",
    "mul2",
    "mul_n",
    "mul_scalar",
    "pow2",
    "pow_scalar",
    "r_div_scalar",
    "r_pow_scalar",
    "r_sub_scalar",
    "sign",
    "sub2",
]

Slots = Sequence[Slot]
Flags = Sequence[bool]


def broadcast_shapes(name: str, *inputs: Variable) -> tuple[int, ...]:
    """numpy's broadcast shape of the inputs, or a ValueError naming ``name`` and the shapes."""
    if len(inputs) == 2:  # the hot case, without comprehensions
        a, b = inputs[0]._shape, inputs[1]._shape
        if a == b:
            return a
        shapes = [a, b]
    else:
        shapes = [x.shape for x in inputs]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " and ".join(str(s) for s in shapes)
        raise ValueError(f"{name}: shapes {listed} cannot be broadcast together") from None


def check_scalar(name: str, arg: str, value: Any) -> float:
    """``value`` as a float, or a TypeError naming the function and argument."""
    if type(value) is float:
        return value
    if not is_scalar(value):
        raise TypeError(f"{name}: {arg} must be a real scalar, got {type(value).__name__}")
    return float(value)


class _Binary(Function, register=False, follows_shape=True, follows_rank=True):
    batch_rule = _batching.elementwise

    @elementwise_setup
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        shape = broadcast_shapes(self.name, *inputs)
        a, b = inputs[0]._dtype, inputs[1]._dtype
        return [(shape, float_dtype(a if a == b else np.result_type(a, b)))]


class _Scalar(Function, register=False, follows_shape=True, follows_rank=True):
    """``y = f(x, val)`` for a Python scalar ``val`` fixed at construction."""

    batch_rule = _batching.elementwise

    @records_arguments
    def __init__(self, *, val: float) -> None:
        self.val = val if type(val) is float else check_scalar(self.name, "val", val)

    @property  # read-only in this family
    def static_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # type: ignore[override]
        """``((), {"val": val})``, made when asked (a hot constructor stores nothing more)."""
        return ((), {"val": self.val})


class Add2(_Binary):
    complex_values = "holomorphic"
    scalar_kernel = "x0 + x1"
    need_inputs = False
    taylor = "linear"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] + inputs[1]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x0 + x1) = dx0 + dx1
        gy = outputs[0].grad
        for i in (0, 1):
            if prop_down[i]:
                inputs[i].store(gy, accum[i])


class Sub2(_Binary):
    complex_values = "holomorphic"
    scalar_kernel = "x0 - x1"
    need_inputs = False
    taylor = "linear"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] - inputs[1]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x0 - x1) = dx0 - dx1
        gy = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(gy, accum[0])
        if prop_down[1]:
            inputs[1].store(-gy, accum[1])


class Mul2(_Binary):
    complex_values = "holomorphic"
    scalar_kernel = "x0 * x1"
    taylor = "multilinear"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] * inputs[1]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x0 x1) = x1 dx0 + x0 dx1
        gy = outputs[0].grad
        x0, x1 = inputs[0].data, inputs[1].data
        if prop_down[0]:
            inputs[0].store(gy * x1, accum[0])
        if prop_down[1]:
            inputs[1].store(gy * x0, accum[1])


class Div2(_Binary):
    complex_values = "holomorphic"
    scalar_kernel = "x0 / x1"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] / inputs[1]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x0 / x1) = dx0 / x1 - x0 dx1 / x1^2
        gy = outputs[0].grad
        x0, x1 = inputs[0].data, inputs[1].data
        gx0 = gy / x1
        if prop_down[0]:
            inputs[0].store(gx0, accum[0])
        if prop_down[1]:
            inputs[1].store(-gx0 * x0 / x1, accum[1])

    def jet_rule(self, jp: Any, ins: list[Any], outs: list[Any]) -> list[Any]:
        """From ``y b = a``: ``y_k = (a_k - sum_{j<k} C(k, j) y_j b_{k-j}) / b0``."""
        ndim = len(self.output_shape(0))
        sa, sb = ([_align(c, ndim) for c in s] if s is not None else None for s in ins)
        b0 = jp.val(self.inputs[1])
        y0 = jp.val(outs[0])
        ys: list[Any] = []
        for k in range(1, jp.kk + 1):
            per_dir: list[Any] = []
            with_top: list[Any] = []
            if sa is not None and sa[k - 1] is not None:
                with_top.append(sa[k - 1])
            if sb is not None:
                for j in range(k):
                    cb = sb[k - j - 1]
                    cy = y0 if j == 0 else ys[j - 1]
                    if cb is None or cy is None:
                        continue
                    t = -(cy * cb) * float(math.comb(k, j))
                    (with_top if j == 0 else per_dir).append(t)
            c = jp.combine(k, per_dir, with_top)
            ys.append(None if c is None else c / b0)
        return [ys]


def _align(c: Any, ndim: int) -> Any:
    """A Taylor coefficient ``(R, *shape)`` with axes of 1 after ``R`` up to ``ndim``
    per-direction dimensions (broadcasting aligns the trailing axes: ``R`` stays first).
    """
    if c is None or c.ndim - 1 >= ndim:
        return c
    return _array.reshape(c, (c.shape[0], *(1,) * (ndim - c.ndim + 1), *c.shape[1:]))


class Pow2(_Binary):
    complex_values = "holomorphic"
    scalar_kernel = "x0**x1"
    need_outputs = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] ** inputs[1]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x0 ** x1) = x1 x0^(x1-1) dx0 + x0^x1 log(x0) dx1, where the limits at x0 = 0 are
        # 0 (0 * inf at x0 = x1 = 0; 0 * log 0 for x1 > 0). The double where keeps the
        # masked-out branch finite, so every higher order is right too.
        gy = outputs[0].grad
        x0, x1 = inputs[0].data, inputs[1].data
        if prop_down[0]:
            some = _array.greater(_abs(x0) + _abs(x1), 0.0)  # not both zero
            dx0 = x1 * _array.where(some, x0, 1.0) ** (x1 - 1.0)
            inputs[0].store(gy * _array.where(some, dx0, 0.0), accum[0])
        if prop_down[1]:
            nonzero = _array.greater(_abs(x0), 0.0)
            dx1 = outputs[0].data * _math.log(_array.where(nonzero, x0, 1.0))
            inputs[1].store(gy * _array.where(nonzero, dx1, 0.0), accum[1])


class AddScalar(_Scalar):
    complex_values = "holomorphic"
    scalar_kernel = "x0 + val"
    need_inputs = False
    _fast_forward = np.add  # x + val, inline
    _fast_val = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] + self.val

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x + c) = dx
        if prop_down[0]:
            inputs[0].store(outputs[0].grad, accum[0])

    def jet_rule(self, jp: Any, ins: list[Any], outs: list[Any]) -> list[Any]:
        return [list(ins[0])]  # (x + c)_k = x_k


class MulScalar(_Scalar):
    complex_values = "holomorphic"
    scalar_kernel = "x0 * val"
    need_inputs = False
    taylor = "linear"
    _fast_forward = np.multiply  # x * val, inline
    _fast_val = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] * self.val

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(c x) = c dx
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * self.val, accum[0])


class PowScalar(_Scalar):
    complex_values = "holomorphic"
    scalar_kernel = "x0**val"
    taylor = "elementwise"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        if self.val == 2.0:
            outputs[0] = x * x
        else:
            outputs[0] = x**self.val

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(x^c) = c x^(c-1) dx
        if prop_down[0]:
            gy = outputs[0].grad
            gx = gy if self.val == 1.0 else gy * self.dydx(inputs[0].data, None)
            inputs[0].store(gx, accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        """``c x^(c-1)``; 0 for ``c = 0`` (``x^0 = 1`` everywhere, ``0^0`` too)."""
        c = self.val
        if c == 0.0 or c == 1.0:
            return c
        if c == 2.0:
            return x * 2.0
        return pow_scalar(x, c - 1.0) * c


class RSubScalar(_Scalar):
    name = "r_sub_scalar"  # the public F.r_sub_scalar
    complex_values = "holomorphic"
    scalar_kernel = "val - x0"
    need_inputs = False

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = self.val - inputs[0]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(c - x) = -dx
        if prop_down[0]:
            inputs[0].store(-outputs[0].grad, accum[0])

    def jet_rule(self, jp: Any, ins: list[Any], outs: list[Any]) -> list[Any]:
        return [[None if c is None else -c for c in ins[0]]]  # (c - x)_k = -x_k


class RDivScalar(_Scalar):
    name = "r_div_scalar"  # the public F.r_div_scalar
    complex_values = "holomorphic"
    scalar_kernel = "val / x0"
    taylor = "elementwise"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = self.val / inputs[0]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(c / x) = -c / x^2 dx
        if prop_down[0]:
            x = inputs[0].data
            inputs[0].store(outputs[0].grad * (-self.val) / (x * x), accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return -y / x  # d(c / x) = -(c / x) / x dx


class RPowScalar(_Scalar):
    name = "r_pow_scalar"  # the public F.r_pow_scalar
    complex_values = "holomorphic"
    scalar_kernel = "val**x0"
    need_inputs = False
    need_outputs = True
    taylor = "elementwise"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).power(self.val, inputs[0])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d(c^x) = c^x log(c) dx
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * self.dydx(None, outputs[0].data), accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        """``c^x log(c)``; 0 for ``c = 0`` (``0^x`` is constant, 0 for ``x > 0``), NaN for
        ``c < 0`` (numpy's log of a negative number).
        """
        c = self.val
        if c == 0.0:
            return y * 0.0
        return y * (math.log(c) if c > 0.0 else math.nan)


def _abs(x: Any) -> Any:
    return abs(x)  # |x| of a complex x too (a rule's mask of where x is not 0)


class _Extremum2(_Binary, register=False):
    """``min``/``max`` of two inputs; piecewise linear, with the partial derivatives of
    :meth:`partials` (locally constant masks): reverse mode and Taylor mode both read them.
    """

    taylor = "composite"

    def partials(self, x0: Any, x1: Any) -> tuple[Any, Any]:
        """``(dy/dx0, dy/dx1)``: 1 where that input is selected; a tie selects ``x0``."""
        raise NotImplementedError

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the selected input gets gy
        gy = outputs[0].grad
        m0, m1 = self.partials(inputs[0].data, inputs[1].data)
        if prop_down[0]:
            inputs[0].store(gy * m0, accum[0])
        if prop_down[1]:
            inputs[1].store(gy * m1, accum[1])

    def composition(self, x0: Any, x1: Any) -> Any:
        m0, m1 = self.partials(x0, x1)  # constant near the point: y_k = m0 x0_k + m1 x1_k
        return x0 * m0 + x1 * m1


class Minimum2(_Extremum2):
    scalar_kernel = "minimum(x0, x1)"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).minimum(inputs[0], inputs[1])

    def partials(self, x0: Any, x1: Any) -> tuple[Any, Any]:
        return _array.less_equal(x0, x1), _array.greater(x0, x1)  # ties go to x0


class Maximum2(_Extremum2):
    scalar_kernel = "maximum(x0, x1)"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).maximum(inputs[0], inputs[1])

    def partials(self, x0: Any, x1: Any) -> tuple[Any, Any]:
        return _array.greater_equal(x0, x1), _array.less(x0, x1)  # ties go to x0


class _ExtremumScalar(_Scalar, register=False):
    """``min``/``max`` of ``x`` and a scalar: ``dydx`` (a mask, 1 at the tie ``x = c``) gives
    the backward and the Taylor rule (``y_k = dydx(x0) x_k``).
    """

    taylor = "elementwise"
    piecewise_linear = True

    def dydx(self, x: Any, y: Any) -> Any:
        """``dy/dx``: 1 where ``x`` is selected (at the tie too), 0 elsewhere."""
        raise NotImplementedError

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gy where x is selected
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * self.dydx(inputs[0].data, None), accum[0])


class MinimumScalar(_ExtremumScalar):
    scalar_kernel = "minimum(x0, val)"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).minimum(inputs[0], self.val)

    def dydx(self, x: Any, y: Any) -> Any:
        return _array.less_equal(x, self.val)  # [x <= c]: 1 at the kink


class MaximumScalar(_ExtremumScalar):
    scalar_kernel = "maximum(x0, val)"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).maximum(inputs[0], self.val)

    def dydx(self, x: Any, y: Any) -> Any:
        return _array.greater_equal(x, self.val)  # [x >= c]: 1 at the kink


class Abs(Function, follows_shape=True, follows_rank=True):
    scalar_kernel = "abs(x0)"
    batch_rule = _batching.elementwise
    taylor = "elementwise"
    piecewise_linear = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).abs(inputs[0])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d|x| = sign(x) dx
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * self.dydx(inputs[0].data, None), accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return Sign()(x)  # sign(x), 0 at the kink x = 0


class Sign(Function, follows_shape=True, follows_rank=True):
    """sign(x) in {-1, alpha, 1} (``alpha`` at 0; 0 by default, numpy's); not differentiable
    (zero gradient), so it cuts the graph.
    """

    differentiable = False
    batch_rule = _batching.elementwise

    def __init__(self, *, alpha: float = 0.0) -> None:
        self.alpha = check_scalar(self.name, "alpha", alpha)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        y = xp.sign(x)
        if self.alpha != 0.0:
            y = xp.where(x == 0, xp.asarray(self.alpha, dtype=y.dtype), y)
        outputs[0] = y


class Identity(Function, follows_shape=True, follows_rank=True):
    complex_values = "holomorphic"
    scalar_kernel = "x0"
    need_inputs = False
    taylor = "linear"
    batch_rule = _batching.elementwise

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, inputs[0].dtype)]  # y = x, dtype included (labels stay ints)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dy = dx
        if prop_down[0]:
            inputs[0].store(outputs[0].grad, accum[0])


# ---------------------------------------------------------------- wrappers
def add2(x0: Any, x1: Any) -> Variable:
    """Elementwise sum with broadcasting: ``y = x0 + x1``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.add2(np.ones(2), np.arange(2.0)).d
    array([1., 2.])
    """
    return Add2()(x0, x1)


def sub2(x0: Any, x1: Any) -> Variable:
    """Elementwise difference with broadcasting: ``y = x0 - x1``."""
    return Sub2()(x0, x1)


def mul2(x0: Any, x1: Any) -> Variable:
    """Elementwise product with broadcasting: ``y = x0 * x1``."""
    return Mul2()(x0, x1)


def div2(x0: Any, x1: Any) -> Variable:
    """Elementwise quotient with broadcasting: ``y = x0 / x1``."""
    return Div2()(x0, x1)


def pow2(x0: Any, x1: Any) -> Variable:
    """Elementwise power with broadcasting: ``y = x0 ** x1`` (``x0 > 0`` for the gradient in x1)."""
    return Pow2()(x0, x1)


def add_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = x + val`` for a scalar ``val``; ``y`` has the shape and dtype of ``x``."""
    return AddScalar(val=val)(x)


def mul_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = val * x`` for a scalar ``val``; ``y`` has the shape and dtype of ``x``."""
    return MulScalar(val=val)(x)


def pow_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = x ** val`` for a scalar ``val``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.pow_scalar(np.array([2.0, 3.0]), 2).d
    array([4., 9.])
    """
    return PowScalar(val=val)(x)


def r_sub_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = val - x`` for a scalar ``val``; ``y`` has the shape and dtype of ``x``."""
    return RSubScalar(val=val)(x)


def r_div_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = val / x`` for a scalar ``val``; ``y`` has the shape and dtype of ``x``."""
    return RDivScalar(val=val)(x)


def r_pow_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = val ** x`` for a scalar ``val > 0``."""
    return RPowScalar(val=val)(x)


def minimum2(x0: Any, x1: Any) -> Variable:
    """Elementwise minimum with broadcasting; the derivative goes to the smaller input, at a
    tie to ``x0`` (in reverse mode, ``hd.jvp`` and Taylor mode alike).
    """
    return Minimum2()(x0, x1)


def maximum2(x0: Any, x1: Any) -> Variable:
    """Elementwise maximum with broadcasting; the derivative goes to the larger input, at a
    tie to ``x0`` (in reverse mode, ``hd.jvp`` and Taylor mode alike).
    """
    return Maximum2()(x0, x1)


def minimum_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = min(x, val)`` elementwise, same shape as ``x``; the derivative is ``[x <= val]``
    (1 at the kink ``x = val``, in every mode).
    """
    return MinimumScalar(val=val)(x)


def maximum_scalar(x: Any, val: float = 1.0) -> Variable:
    """``y = max(x, val)`` elementwise, same shape as ``x``; the derivative is ``[x >= val]``
    (1 at the kink ``x = val``, in every mode).
    """
    return MaximumScalar(val=val)(x)


def abs(x: Any) -> Variable:
    """``y = |x|``; the derivative is ``sign(x)``, 0 at the kink ``x = 0`` (in every mode).

    For a complex ``x``, ``y = sqrt(Re(x)^2 + Im(x)^2)`` is real (complex64 -> float32)
    and the gradient is ``gy conj(x) / |x|``, 0 at ``x = 0`` (``F.angle`` is the phase).
    """
    dtype = getattr(x, "dtype", None)
    if (dtype is not None and dtype.kind == "c") or type(x) is complex:
        return _math.ComplexAbs()(x)
    return Abs()(x)


def sign(x: Any, alpha: float = 1.0) -> Variable:
    """Elementwise sign as NNabla's: ``1`` above 0, ``-1`` below, ``alpha`` at 0 (default 1).

    ``alpha=0`` gives numpy's ``sign``.

    Not differentiable: zero gradient, it cuts the graph (unlike NNabla's
    straight-through estimator).

    Args:
        x: input of any shape.
        alpha: the value at 0.

    Returns:
        The shape of ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.sign(np.array([-2.0, 0.0, 3.0])).d, F.sign(np.array([0.0]), alpha=0.0).d
    (array([-1.,  1.,  1.]), array([0.]))
    """
    return Sign(alpha=alpha)(x)


def add_n(*xs: Any) -> Variable:
    """``y = x_0 + x_1 + ... + x_{n-1}`` elementwise, with numpy broadcasting (NNabla's).

    Composed of :func:`add2` (each gradient is ``gy``, summed back to its input's shape).

    Args:
        *xs: one or more inputs whose shapes broadcast together.

    Returns:
        The broadcast shape.

    >>> import numpy as np, hodiff.functions as F
    >>> F.add_n(np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array(0.5)).d
    array([4.5, 6.5])
    """
    if not xs:
        raise ValueError("add_n: needs at least one input")
    if len(xs) == 1:
        return identity(xs[0])  # a new Variable, as NNabla
    y = add2(xs[0], xs[1])
    for x in xs[2:]:
        y = add2(y, x)
    return y


def mul_n(*xs: Any) -> Variable:
    """``y = x_0 x_1 ... x_{n-1}`` elementwise, with numpy broadcasting (NNabla's).

    One node (the product rules use); ``d y / d x_i = gy prod_{j != i} x_j``.

    Args:
        *xs: one or more inputs whose shapes broadcast together.

    Returns:
        The broadcast shape.

    >>> import numpy as np, hodiff.functions as F
    >>> F.mul_n(np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array(0.5)).d
    array([1.5, 4. ])
    """
    if not xs:
        raise ValueError("mul_n: needs at least one input")
    return _garith.MulN(val=1.0)(*xs)


def identity(x: Any) -> Variable:
    """``y = x`` as a new node (same shape, dtype and value; the gradient passes through)."""
    return Identity()(x)
