"""Elementwise math: exp, log and the trigonometric, hyperbolic and error functions.

Every function here is a primitive (one numpy/cupy kernel forward); each rule
is written with hodiff functions, so it runs on bare arrays during
``.backward()`` and records a differentiable graph during ``hd.grad``. Rules
that can reuse the output (exp, expm1, sqrt, tan, tanh) declare
``need_outputs`` and never read the input.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Elementwise, Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import arithmetic as _arithmetic
from hodiff.grad_functions import math as _gm

__all__ = [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cos",
    "cosh",
    "erf",
    "exp",
    "expm1",
    "log",
    "log1p",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
]


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


_SPECIAL: dict[str, ModuleType | None] = {}


def special_module(xp: ModuleType) -> ModuleType | None:
    """``scipy.special`` for numpy (None when scipy is not installed), ``cupyx.scipy.special``
    for cupy; looked up once per backend.
    """
    name = "scipy.special" if xp is np else "cupyx.scipy.special"
    if name not in _SPECIAL:
        try:
            _SPECIAL[name] = importlib.import_module(name)
        except ImportError:
            _SPECIAL[name] = None
    return _SPECIAL[name]


class _Unary(Elementwise, register=False):
    """``y = ufunc(x)`` for the numpy/cupy ufunc named ``ufunc`` (Elementwise's forward)."""

    batch_rule = _batching.elementwise


class Exp(_Unary):
    ufunc = "exp"
    scalar_kernel = "exp(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return y  # d exp(x) = exp(x) dx


class Log(_Unary):
    ufunc = "log"
    scalar_kernel = "log(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / x  # d log(x) = dx / x


class Log1p(_Unary):
    ufunc = "log1p"
    scalar_kernel = "log1p(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / (x + 1.0)  # d log(1 + x) = dx / (1 + x)


class Expm1(_Unary):
    ufunc = "expm1"
    scalar_kernel = "expm1(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return y + 1.0  # d (e^x - 1) = (y + 1) dx


class Sqrt(_Unary):
    ufunc = "sqrt"
    scalar_kernel = "sqrt(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return 0.5 / y  # d sqrt(x) = dx / (2 y)


class Sin(_Unary):
    ufunc = "sin"
    scalar_kernel = "sin(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return cos(x)  # d sin(x) = cos(x) dx


class Cos(_Unary):
    ufunc = "cos"
    scalar_kernel = "cos(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return -sin(x)  # d cos(x) = -sin(x) dx


class Tan(_Unary):
    ufunc = "tan"
    scalar_kernel = "tan(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return y * y + 1.0  # d tan(x) = (1 + y^2) dx


class Sinh(_Unary):
    ufunc = "sinh"
    scalar_kernel = "sinh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return cosh(x)  # d sinh(x) = cosh(x) dx


class Cosh(_Unary):
    ufunc = "cosh"
    scalar_kernel = "cosh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return sinh(x)  # d cosh(x) = sinh(x) dx


class Tanh(_Unary):
    ufunc = "tanh"
    scalar_kernel = "tanh(x0)"
    need_inputs = False
    need_outputs = True

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d tanh(x) = (1 - y^2) dx, as one fused node
        if prop_down[0]:
            inputs[0].store(_gm.tanh_backward(outputs[0].grad, outputs[0].data), accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 - y * y  # d tanh(x) = (1 - y^2) dx (backward: the same, as one fused node)


class Asin(_Unary):
    ufunc = "arcsin"
    scalar_kernel = "arcsin(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / sqrt(1.0 - x * x)  # d asin(x) = dx / sqrt(1 - x^2)


class Acos(_Unary):
    ufunc = "arccos"
    scalar_kernel = "arccos(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return -1.0 / sqrt(1.0 - x * x)  # d acos(x) = -dx / sqrt(1 - x^2)


class Atan(_Unary):
    ufunc = "arctan"
    scalar_kernel = "arctan(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / (x * x + 1.0)  # d atan(x) = dx / (1 + x^2)


class Asinh(_Unary):
    ufunc = "arcsinh"
    scalar_kernel = "arcsinh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / sqrt(x * x + 1.0)  # d asinh(x) = dx / sqrt(x^2 + 1)


class Acosh(_Unary):
    ufunc = "arccosh"
    scalar_kernel = "arccosh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / sqrt(x * x - 1.0)  # d acosh(x) = dx / sqrt(x^2 - 1)


class Atanh(_Unary):
    ufunc = "arctanh"
    scalar_kernel = "arctanh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / (1.0 - x * x)  # d atanh(x) = dx / (1 - x^2)


class Atan2(Function, follows_shape=True, follows_rank=True):
    scalar_kernel = "arctan2(x0, x1)"
    batch_rule = _batching.elementwise

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        shape = _arithmetic.broadcast_shapes(self.name, *inputs)
        return [(shape, float_dtype(np.result_type(*(x.dtype for x in inputs))))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).arctan2(inputs[0], inputs[1])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d atan2(x0, x1) = (x1 dx0 - x0 dx1) / (x0^2 + x1^2)
        x0, x1 = inputs[0].data, inputs[1].data
        g = outputs[0].grad / (x0 * x0 + x1 * x1)
        if prop_down[0]:
            inputs[0].store(g * x1, accum[0])
        if prop_down[1]:
            inputs[1].store(-(g * x0), accum[1])


class Erf(Elementwise):
    batch_rule = _batching.elementwise

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        special = special_module(xp)
        if special is not None:
            outputs[0] = special.erf(x)
        else:  # numpy without scipy: math.erf elementwise
            dtype = float_dtype(np.asarray(x).dtype)
            outputs[0] = np.vectorize(math.erf, otypes=[dtype])(x)

    def dydx(self, x: Any, y: Any) -> Any:
        return exp(-(x * x)) * _TWO_OVER_SQRT_PI  # d erf(x) = 2 / sqrt(pi) exp(-x^2) dx


# ---------------------------------------------------------------- wrappers
def exp(x: Any) -> Variable:
    """``y = e^x`` elementwise.

    >>> import numpy as np, hodiff.functions as F
    >>> F.exp(np.array([0.0, 1.0])).d
    array([1.        , 2.71828183])
    """
    return Exp()(x)


def log(x: Any) -> Variable:
    """``y = ln(x)`` elementwise (natural logarithm, ``x > 0``)."""
    return Log()(x)


def log1p(x: Any) -> Variable:
    """``y = ln(1 + x)`` elementwise, accurate for small ``x`` (``x > -1``)."""
    return Log1p()(x)


def expm1(x: Any) -> Variable:
    """``y = e^x - 1`` elementwise, accurate for small ``x``."""
    return Expm1()(x)


def sqrt(x: Any) -> Variable:
    """Elementwise square root ``y = x^(1/2)`` (``x > 0`` for the gradient ``1 / (2 y)``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.sqrt(np.array([4.0, 9.0])).d
    array([2., 3.])
    """
    return Sqrt()(x)


def sin(x: Any) -> Variable:
    """``y = sin(x)`` elementwise (radians); ``y`` has the shape of ``x``."""
    return Sin()(x)


def cos(x: Any) -> Variable:
    """``y = cos(x)`` elementwise (radians); ``y`` has the shape of ``x``."""
    return Cos()(x)


def tan(x: Any) -> Variable:
    """Elementwise tangent (radians); the gradient is ``1 + y^2``."""
    return Tan()(x)


def sinh(x: Any) -> Variable:
    """Elementwise hyperbolic sine ``y = (e^x - e^-x) / 2``."""
    return Sinh()(x)


def cosh(x: Any) -> Variable:
    """Elementwise hyperbolic cosine ``y = (e^x + e^-x) / 2``."""
    return Cosh()(x)


def tanh(x: Any) -> Variable:
    """Elementwise hyperbolic tangent; the gradient ``1 - y^2`` reuses the output.

    >>> import numpy as np, hodiff.functions as F
    >>> F.tanh(np.array([0.0])).d
    array([0.])
    """
    return Tanh()(x)


def asin(x: Any) -> Variable:
    """``y = arcsin(x)`` elementwise, ``|x| <= 1`` (``|x| < 1`` for the gradient)."""
    return Asin()(x)


def acos(x: Any) -> Variable:
    """``y = arccos(x)`` elementwise, ``|x| <= 1`` (``|x| < 1`` for the gradient)."""
    return Acos()(x)


def atan(x: Any) -> Variable:
    """``y = arctan(x)`` elementwise, in (-pi/2, pi/2); ``y`` has the shape of ``x``."""
    return Atan()(x)


def atan2(x0: Any, x1: Any) -> Variable:
    """Quadrant-aware ``y = arctan(x0 / x1)`` in ``[-pi, pi]``, with broadcasting.

    Args:
        x0: the "y" coordinate (numerator), any shape broadcastable with ``x1``.
        x1: the "x" coordinate (denominator).

    Returns:
        The angles, of the broadcast shape. The gradient is
        ``(x1, -x0) / (x0^2 + x1^2)`` (undefined at the origin).

    >>> import numpy as np, hodiff.functions as F
    >>> F.atan2(np.array([1.0, -1.0]), np.array([0.0, 0.0])).d
    array([ 1.57079633, -1.57079633])

    """
    return Atan2()(x0, x1)


def asinh(x: Any) -> Variable:
    """``y = arcsinh(x) = log(x + sqrt(x^2 + 1))`` elementwise, same shape as ``x``."""
    return Asinh()(x)


def acosh(x: Any) -> Variable:
    """``y = arccosh(x)`` elementwise, ``x >= 1`` (``x > 1`` for the gradient)."""
    return Acosh()(x)


def atanh(x: Any) -> Variable:
    """``y = arctanh(x)`` elementwise, ``|x| < 1``."""
    return Atanh()(x)


def erf(x: Any) -> Variable:
    """Gauss error function ``y = 2 / sqrt(pi) * integral_0^x exp(-t^2) dt`` elementwise.

    Uses ``scipy.special.erf`` (``cupyx.scipy.special.erf`` on cupy) when available,
    else ``math.erf`` element by element (scipy is optional).

    >>> import numpy as np, hodiff.functions as F
    >>> F.erf(np.array([0.0, 1.0])).d
    array([0.        , 0.84270079])
    """
    return Erf()(x)
