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
from hodiff.engine.complex_values import complex_dtype, real_dtype
from hodiff.engine.context import array_module
from hodiff.engine.function import Elementwise, Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import arithmetic as _arithmetic
from hodiff.functions import array as _array
from hodiff.grad_functions import math as _gm

__all__ = [
    "acos",
    "angle",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "complex",
    "conj",
    "cos",
    "cosh",
    "erf",
    "exp",
    "expm1",
    "imag",
    "log",
    "log1p",
    "real",
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
    complex_values = "holomorphic"
    ufunc = "exp"
    scalar_kernel = "exp(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return y  # d exp(x) = exp(x) dx


class Log(_Unary):
    complex_values = "holomorphic"
    ufunc = "log"
    scalar_kernel = "log(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / x  # d log(x) = dx / x


class Log1p(_Unary):
    complex_values = "holomorphic"
    ufunc = "log1p"
    scalar_kernel = "log1p(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return 1.0 / (x + 1.0)  # d log(1 + x) = dx / (1 + x)


class Expm1(_Unary):
    complex_values = "holomorphic"
    ufunc = "expm1"
    scalar_kernel = "expm1(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return y + 1.0  # d (e^x - 1) = (y + 1) dx


class Sqrt(_Unary):
    complex_values = "holomorphic"
    ufunc = "sqrt"
    scalar_kernel = "sqrt(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return 0.5 / y  # d sqrt(x) = dx / (2 y)


class Sin(_Unary):
    complex_values = "holomorphic"
    ufunc = "sin"
    scalar_kernel = "sin(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return cos(x)  # d sin(x) = cos(x) dx


class Cos(_Unary):
    complex_values = "holomorphic"
    ufunc = "cos"
    scalar_kernel = "cos(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return -sin(x)  # d cos(x) = -sin(x) dx


class Tan(_Unary):
    complex_values = "holomorphic"
    ufunc = "tan"
    scalar_kernel = "tan(x0)"
    need_inputs = False
    need_outputs = True

    def dydx(self, x: Any, y: Any) -> Any:
        return y * y + 1.0  # d tan(x) = (1 + y^2) dx


class Sinh(_Unary):
    complex_values = "holomorphic"
    ufunc = "sinh"
    scalar_kernel = "sinh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return cosh(x)  # d sinh(x) = cosh(x) dx


class Cosh(_Unary):
    complex_values = "holomorphic"
    ufunc = "cosh"
    scalar_kernel = "cosh(x0)"

    def dydx(self, x: Any, y: Any) -> Any:
        return sinh(x)  # d cosh(x) = sinh(x) dx


class Tanh(_Unary):
    complex_values = "holomorphic"
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


# ---------------------------------------------------------------- complex values
class _Part(Function, register=False, follows_shape=True, follows_rank=True):
    """An elementwise real-linear map of complex values (a part, the conjugate, a cast):
    linear over the reals, so its Taylor rule is ``y_k = f(x_k)``. Its rules combine real
    parts with :class:`Complex`, so no rule mixes real and complex operands.
    """

    batch_rule = _batching.elementwise
    taylor = "linear"
    complex_values = "own"
    need_inputs = False

    def _complex_input(self) -> bool:
        return bool(self.inputs[0].dtype.kind == "c")


class Real(_Part):
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, real_dtype(float_dtype(inputs[0].dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = x.real.copy() if x.dtype.kind == "c" else x + 0.0

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = Re z: gz = gy (the real covector dy/dx = 1, dy/dy' = 0 read as dx - i dy')
        if prop_down[0]:
            g = outputs[0].grad
            inputs[0].store(ComplexCast()(g) if self._complex_input() else g, accum[0])


class Imag(_Part):
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, real_dtype(float_dtype(inputs[0].dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = x.imag.copy() if x.dtype.kind == "c" else x * 0.0

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = Im z: gz = -i gy; a real input's imaginary part is 0: no gradient
        if prop_down[0]:
            g = outputs[0].grad
            gx = Complex()(g * 0.0, -g) if self._complex_input() else g * 0.0
            inputs[0].store(gx, accum[0])


class Conj(_Part):
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, float_dtype(inputs[0].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = array_module(x).conj(x) if x.dtype.kind == "c" else x + 0.0

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = conj(z): gz = conj(gy)
        if prop_down[0]:
            inputs[0].store(Conj()(outputs[0].grad), accum[0])


class ComplexCast(_Part):
    """``y = x + 0i`` of a real ``x``: the cast the engine puts before a holomorphic primitive
    that gets real and complex inputs; its rule keeps the real part of the gradient.
    """

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, complex_dtype(float_dtype(inputs[0].dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = x.astype(complex_dtype(float_dtype(x.dtype)))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gx = Re gy (a real input's gradient is real)
        if prop_down[0]:
            inputs[0].store(Real()(outputs[0].grad), accum[0])


class Complex(_Part):
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        shape = _arithmetic.broadcast_shapes(self.name, *inputs)
        for arg, x in zip(("re", "im"), inputs, strict=True):
            if x.dtype.kind == "c":
                raise TypeError(f"F.complex: {arg} has dtype {x.dtype}; re and im must be real")
        dtype = float_dtype(np.result_type(*(x.dtype for x in inputs)))
        return [(shape, complex_dtype(dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        re, im = inputs
        dtype = complex_dtype(float_dtype(np.result_type(re, im)))
        y = array_module(re).empty(np.broadcast_shapes(re.shape, im.shape), dtype=dtype)
        y.real, y.imag = re, im
        outputs[0] = y

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = re + i im: g_re = Re gy, g_im = -Im gy
        g = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(Real()(g), accum[0])
        if prop_down[1]:
            inputs[1].store(-Imag()(g), accum[1])


class Angle(Function, follows_shape=True, follows_rank=True):
    batch_rule = _batching.elementwise
    taylor = "composite"
    complex_values = "own"

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, real_dtype(float_dtype(inputs[0].dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = array_module(x).angle(x).astype(real_dtype(float_dtype(x.dtype)))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = atan2(b, a) of z = a + ib: dy = (a db - b da) / |z|^2, so
        # gz = gy (-b - i a) / |z|^2; 0 at z = 0 (and for a real input)
        if prop_down[0]:
            g = outputs[0].grad
            z = inputs[0].data
            if self.inputs[0].dtype.kind != "c":
                inputs[0].store(g * 0.0, accum[0])
                return
            a, b = Real()(z), Imag()(z)
            s = a * a + b * b
            w = g / _where_positive(s)
            inputs[0].store(Complex()(-(w * b), -(w * a)), accum[0])

    def composition(self, z: Any) -> Any:
        # atan2 of the parts where z != 0, of (0, 1) at z = 0: the derivative there is 0,
        # as backward_impl's (a where of constants, so every Taylor coefficient is 0 too)
        a, b = Real()(z), Imag()(z)
        nonzero = _array.greater(a * a + b * b, 0.0)
        return Atan2()(_array.where(nonzero, b, 0.0), _array.where(nonzero, a, 1.0))


class ComplexAbs(Function, follows_shape=True, follows_rank=True):
    """``|z|`` of complex ``z`` (``F.abs`` of a complex input): a real result, the gradient
    ``gy conj(z) / |z|`` (0 at 0, as JAX).
    """

    batch_rule = _batching.elementwise
    taylor = "composite"
    complex_values = "own"
    need_outputs = True

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, real_dtype(float_dtype(inputs[0].dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).abs(inputs[0])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d|z| = (a da + b db) / |z|: gz = gy (a - i b) / |z|, 0 at z = 0
        if prop_down[0]:
            z = inputs[0].data
            w = outputs[0].grad / _where_positive(outputs[0].data)
            if self.inputs[0].dtype.kind != "c":
                inputs[0].store(w * z, accum[0])
                return
            inputs[0].store(Complex()(w * Real()(z), -(w * Imag()(z))), accum[0])

    def composition(self, z: Any) -> Any:
        # sqrt(a^2 + b^2) where z != 0, the constant 0 at z = 0: the derivative there is 0,
        # as backward_impl's (sqrt is taken of 1 there, so no 0/0 reaches the coefficients)
        a, b = Real()(z), Imag()(z)
        s = a * a + b * b
        nonzero = _array.greater(s, 0.0)
        return _array.where(nonzero, Sqrt()(_array.where(nonzero, s, 1.0)), 0.0)


def _where_positive(s: Any) -> Any:
    """``s`` where positive, 1 elsewhere (a denominator that is 0 where its numerator is)."""
    return _array.where(_array.greater(s, 0.0), s, 1.0)


def real(x: Any) -> Variable:
    """The real part ``y = Re x`` elementwise: real, of ``x``'s shape (complex64 -> float32).

    Its gradient for a complex ``x`` is ``gy`` as a complex number (API.md's convention).
    A real ``x`` is its own real part.
    """
    return Real()(x)


def imag(x: Any) -> Variable:
    """The imaginary part ``y = Im x`` elementwise: real, of ``x``'s shape (0 for a real ``x``).

    Its gradient is ``-i gy``: for ``f = Im z``, ``df/dx - i df/dy = -i``.
    """
    return Imag()(x)


def conj(x: Any) -> Variable:
    """The complex conjugate ``y = Re x - i Im x`` elementwise, of ``x``'s shape and dtype.

    Real-linear, not holomorphic: its gradient is ``conj(gy)``.
    """
    return Conj()(x)


def angle(x: Any) -> Variable:
    """The argument ``y = atan2(Im x, Re x)`` in ``(-pi, pi]`` elementwise (numpy's
    ``angle``): real, of ``x``'s shape.

    Its gradient is ``gy (-Im x - i Re x) / |x|^2``, 0 at ``x = 0``; the branch cut is
    the negative real axis.
    """
    return Angle()(x)


def complex(re: Any, im: Any = None) -> Variable:
    """``y = re + i im`` elementwise, with broadcasting: complex64 from float32 parts,
    complex128 from float64 (and ints).

    Args:
        re: the real part (a real array, Variable or scalar).
        im: the imaginary part (real, broadcastable with ``re``); None for 0 (a cast).

    Returns:
        The complex Variable of the broadcast shape. The gradients are ``Re gy`` for
        ``re`` and ``-Im gy`` for ``im``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.complex(np.array([1.0]), np.array([2.0])).d
    array([1.+2.j])
    """
    if im is None:
        return ComplexCast()(re)
    return Complex()(re, im)
