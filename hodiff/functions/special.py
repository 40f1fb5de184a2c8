"""More elementwise math: powers, logarithms, the error and gamma families, sinc.

Primitives only where a composition would lose accuracy (``log2``, ``log10``,
``erfc`` in the tail, ``erfinv``, ``gammaln``, ``polygamma``); ``square``,
``reciprocal``, ``logaddexp``, ``logit``, ``digamma`` and ``sinc`` are
compositions. The gamma family closes on one primitive: the derivative of
``polygamma(n, x)`` is ``polygamma(n + 1, x)``, ``digamma = polygamma(0, .)``
and the derivative of ``gammaln`` is ``digamma``, so every order is exact.

The special functions use ``scipy.special`` (``cupyx.scipy.special`` on
cupy) when available, else a numpy fallback (``math.erfc``/``math.lgamma``
element by element, Newton's method for ``erfinv``, recurrence plus
asymptotic series for ``polygamma``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Elementwise, float_dtype
from hodiff.engine.variable import Variable, as_variable
from hodiff.functions import activation as _act
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import math as _math

__all__ = [
    "digamma",
    "erfc",
    "erfinv",
    "gammaln",
    "log10",
    "log2",
    "logaddexp",
    "logit",
    "polygamma",
    "reciprocal",
    "sinc",
    "square",
]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0


def _special(x: Any, name: str) -> Any:
    """``scipy.special.<name>`` (or cupyx's) for the backend of ``x``; None without scipy."""
    special = _math.special_module(array_module(x))
    return None if special is None else getattr(special, name)


def _vectorized(fn: Any, x: Any) -> Any:
    dtype = float_dtype(np.asarray(x).dtype)
    return np.vectorize(fn, otypes=[dtype])(x)


# ---------------------------------------------------------------- numpy fallbacks
def erfinv_numpy(x: Any) -> Any:
    """``erfinv`` without scipy: Winitzki's approximation refined by 4 Newton steps."""
    x = np.asarray(x, dtype=float_dtype(np.asarray(x).dtype))
    a = 0.147
    with np.errstate(divide="ignore", invalid="ignore"):
        ln = np.log1p(-x * x)
        t = 2.0 / (math.pi * a) + ln / 2.0
        y = np.sign(x) * np.sqrt(np.sqrt(t * t - ln / a) - t)
        erf = np.vectorize(math.erf, otypes=[x.dtype])
        for _ in range(4):
            step = (erf(y) - x) / (np.exp(-y * y) / _SQRT_PI_OVER_2)
            y = np.where(np.isfinite(y), y - step, y)
    return y


_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def polygamma_numpy(n: int, x: Any) -> Any:
    """``psi^(n)(x)`` without scipy: the recurrence ``psi^(n)(x) = psi^(n)(x + 1) -
    (-1)^n n! / x^(n+1)`` up to ``x >= 20``, then the asymptotic series.
    """
    x = np.array(x, dtype=float_dtype(np.asarray(x).dtype), copy=True)
    out = np.zeros_like(x)
    sign = -1.0 if n % 2 else 1.0  # (-1)^n
    fact = float(math.factorial(n))
    small = x < 20.0
    while small.any():
        out = np.where(small, out - sign * fact / np.where(small, x, 1.0) ** (n + 1), out)
        x = np.where(small, x + 1.0, x)
        small = x < 20.0
    if n == 0:
        series = np.log(x) - 0.5 / x
        for k, b in enumerate(_BERNOULLI, start=1):
            series -= b / (2 * k * x ** (2 * k))
    else:
        series = math.factorial(n - 1) / x**n + fact / (2.0 * x ** (n + 1))
        for k, b in enumerate(_BERNOULLI, start=1):
            c = b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
            series += c / x ** (2 * k + n)
        series *= -sign  # (-1)^(n+1)
    return out + series


# ---------------------------------------------------------------- primitives
class Log2(Elementwise):
    ufunc = "log2"

    def dydx(self, x: Any, y: Any) -> Any:
        return _arith.r_div_scalar(x * _LN2, 1.0)  # d log2(x) = dx / (x ln 2)


class Log10(Elementwise):
    ufunc = "log10"

    def dydx(self, x: Any, y: Any) -> Any:
        return _arith.r_div_scalar(x * _LN10, 1.0)  # d log10(x) = dx / (x ln 10)


class Erfc(Elementwise):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        fn = _special(inputs[0], "erfc")
        outputs[0] = fn(inputs[0]) if fn is not None else _vectorized(math.erfc, inputs[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return _math.exp(-(x * x)) * (-2.0 / math.sqrt(math.pi))  # -2/sqrt(pi) e^{-x^2}


class Erfinv(Elementwise):
    need_inputs = False
    need_outputs = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        fn = _special(inputs[0], "erfinv")
        outputs[0] = fn(inputs[0]) if fn is not None else erfinv_numpy(inputs[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return _math.exp(y * y) * _SQRT_PI_OVER_2  # 1 / erf'(y) = sqrt(pi)/2 e^{y^2}


class Gammaln(Elementwise):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        fn = _special(inputs[0], "gammaln")
        outputs[0] = fn(inputs[0]) if fn is not None else _vectorized(math.lgamma, inputs[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return polygamma(0, x)  # d ln|Gamma(x)| = psi(x) dx


class Polygamma(Elementwise):
    def __init__(self, *, n: int) -> None:
        self.n = n

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        if self.n == 0:
            fn = _special(x, "digamma")
            y = fn(x) if fn is not None else polygamma_numpy(0, x)
        else:
            fn = _special(x, "polygamma")
            # n as an array of x's module: cupyx's polygamma calls where(n == 0, ...)
            y = (
                fn(array_module(x).asarray(self.n), x)
                if fn is not None
                else polygamma_numpy(self.n, x)
            )
        outputs[0] = y.astype(float_dtype(x.dtype), copy=False)

    def dydx(self, x: Any, y: Any) -> Any:
        return polygamma(self.n + 1, x)  # d psi^(n)(x) = psi^(n+1)(x) dx


# ---------------------------------------------------------------- wrappers
@real_values
def square(x: Any) -> Variable:
    """``y = x * x`` elementwise (a composition).

    >>> import numpy as np, hodiff.functions as F
    >>> F.square(np.array([-2.0, 3.0])).d
    array([4., 9.])
    """
    return _arith.mul2(x, x)


@real_values
def reciprocal(x: Any) -> Variable:
    """``y = 1 / x`` elementwise (``r_div_scalar(x, 1)``); the gradient is ``-1 / x^2``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.reciprocal(np.array([2.0, -4.0])).d
    array([ 0.5 , -0.25])
    """
    return _arith.r_div_scalar(x, 1.0)


@real_values
def logaddexp(x0: Any, x1: Any) -> Variable:
    """``y = log(exp(x0) + exp(x1))`` elementwise with broadcasting, without overflow.

    Composed as ``x0 + softplus(x1 - x0)``: smooth everywhere (ties included); the
    gradients are ``sigmoid(x0 - x1)`` and ``sigmoid(x1 - x0)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.logaddexp(np.array([0.0, 1000.0]), np.array([0.0, 1000.0])).d - np.log(2.0)
    array([   0.,  1000.])
    """
    return _arith.add2(x0, _act.softplus(_arith.sub2(x1, x0)))


def log2(x: Any) -> Variable:
    """``y = log2(x)`` elementwise (``x > 0``); the gradient is ``1 / (x ln 2)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.log2(np.array([1.0, 8.0])).d
    array([0., 3.])
    """
    return Log2()(x)


def log10(x: Any) -> Variable:
    """``y = log10(x)`` elementwise (``x > 0``); the gradient is ``1 / (x ln 10)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.log10(np.array([1.0, 100.0])).d
    array([0., 2.])
    """
    return Log10()(x)


def erfc(x: Any) -> Variable:
    """Complementary error function ``y = 1 - erf(x)``, accurate in the tail.

    The gradient is ``-2 / sqrt(pi) exp(-x^2)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.erfc(np.array([0.0, 5.0])).d
    array([1.00000000e+00, 1.53745979e-12])
    """
    return Erfc()(x)


def erfinv(x: Any) -> Variable:
    """Inverse error function: ``y`` with ``erf(y) = x``, for ``-1 < x < 1``.

    The gradient is ``sqrt(pi) / 2 * exp(y^2)`` (from the output).

    >>> import numpy as np, hodiff.functions as F
    >>> F.erfinv(np.array([0.0, 0.5])).d
    array([0.        , 0.47693628])
    """
    return Erfinv()(x)


@real_values
def logit(x: Any) -> Variable:
    """``y = log(x / (1 - x))`` elementwise for ``0 < x < 1`` (the inverse of sigmoid).

    Composed as ``log(x) - log1p(-x)``; the gradient is ``1 / (x (1 - x))``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.logit(np.array([0.5, 0.75])).d
    array([0.        , 1.09861229])
    """
    return _arith.sub2(_math.log(x), _math.log1p(_arith.mul_scalar(x, -1.0)))


def gammaln(x: Any) -> Variable:
    """``y = log|Gamma(x)|`` elementwise; the gradient is ``digamma(x)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.gammaln(np.array([1.0, 5.0])).d
    array([0.        , 3.17805383])
    """
    return Gammaln()(x)


@real_values
def digamma(x: Any) -> Variable:
    """``y = psi(x) = d/dx log Gamma(x)`` elementwise, i.e. ``polygamma(0, x)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.digamma(np.array([1.0])).d  # -Euler's gamma
    array([-0.57721566])
    """
    return polygamma(0, x)


def polygamma(n: int, x: Any) -> Variable:
    """``y = psi^(n)(x) = d^(n+1)/dx^(n+1) log Gamma(x)`` elementwise, for an integer ``n >= 0``.

    The derivative of ``polygamma(n, x)`` is ``polygamma(n + 1, x)``, so every order of
    derivative is one more node of the same primitive.

    Args:
        n: the order (a Python int, ``n >= 0``).
        x: input of any shape (not a non-positive integer).

    >>> import numpy as np, hodiff.functions as F
    >>> F.polygamma(1, np.array([1.0])).d  # pi^2 / 6
    array([1.64493407])
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ValueError(f"polygamma: n must be an int >= 0, got {n!r}")
    return Polygamma(n=int(n))(x)


@real_values
def sinc(x: Any) -> Variable:
    """NNabla's (unnormalized) sinc ``y = sin(x) / x``, with ``y(0) = 1``.

    numpy's ``np.sinc(x)`` is the normalized ``sin(pi x) / (pi x)``, that is
    ``F.sinc(np.pi * x)``. Composed: ``|x| < 0.5`` uses the Taylor polynomial
    ``1 - x^2/3! + x^4/5! - ... - x^14/15!`` (truncation below 5e-20), elsewhere the quotient
    on a safe input, so every derivative is finite, exact at ``x = 0`` and free of the
    quotient's cancellation near 0 (its third derivative loses ~1e-16 / x^4).

    Args:
        x: input of any shape.

    Returns:
        The shape of ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.sinc(np.array([0.0, np.pi / 2, np.pi])).d.round(12)
    array([1.        , 0.63661977, 0.        ])
    """
    x = as_variable(x)
    small = _array.less(_arith.abs(x), 0.5)
    safe = _array.where(small, 1.0, x)
    x2 = x * x
    taylor: Any = _SINC_SERIES[-1]  # Horner in x^2; the next term is below 5e-20 at 0.5
    for c in reversed(_SINC_SERIES[:-1]):
        taylor = c + x2 * taylor
    return _array.where(small, taylor, _math.sin(safe) / safe)


#: ``sin(x) / x = sum_k (-1)^k x^(2k) / (2k + 1)!``, k = 0..7: on ``|x| < 0.5`` the series
#: keeps every derivative to full precision (the quotient's third derivative there loses
#: digits to cancellation, ~1e-16 / x^4)
_SINC_SERIES: tuple[float, ...] = tuple((-1.0) ** k / math.factorial(2 * k + 1) for k in range(8))
