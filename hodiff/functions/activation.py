"""Activation functions, with NNabla's definitions and keyword arguments.

Three are primitives because they are in every network and a fused rule is
measurably faster or more stable than a composition: ``sigmoid`` (stable
forward, backward from its output in one fused node), ``softplus`` (stable
``max(z, 0) + log1p(exp(-|z|))`` with in-place passes) and ``relu`` (its
backward ``gy * (x > 0)`` is about 15x faster than a ``where`` on numpy). The
others are compositions of hodiff functions and need no rule of their own;
the piecewise ones are ``relu(x) + a * min(x, 0)``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine import cuda as _cuda
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Elementwise, Flags, Function, Slots
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable, as_variable
from hodiff.functions import arithmetic as _arithmetic
from hodiff.functions import array as _array
from hodiff.functions import math as _math
from hodiff.functions._index_kernels import normalize_base_axis
from hodiff.grad_functions import math as _gm

__all__ = [
    "celu",
    "crelu",
    "elu",
    "gelu",
    "hard_sigmoid",
    "hard_tanh",
    "leaky_relu",
    "log_sigmoid",
    "prelu",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "softplus",
    "softsign",
    "swish",
]


_GELU_C = math.sqrt(2.0 / math.pi)
_FLOAT64 = np.dtype(np.float64)


def _inplace_ok(a: Any) -> bool:
    """Whether ``a`` is a float array we made ourselves and may overwrite (not a 0-d scalar)."""
    xp = array_module(a)
    return isinstance(a, xp.ndarray) and a.ndim > 0 and a.dtype.kind == "f"


class Sigmoid(Function, follows_shape=True, follows_rank=True):
    scalar_kernel = "1.0 / (1.0 + exp(-x0))"
    need_inputs = False
    need_outputs = True
    batch_rule = _batching.elementwise
    taylor = "elementwise"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        if xp is not np:  # cupy: expit is one fused kernel
            special = _math.special_module(xp)
            if special is not None:
                outputs[0] = special.expit(x)
                return
        outputs[0] = _sigmoid(xp, x)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d sigmoid(x) = y (1 - y) dx, as one fused node
        if prop_down[0]:
            inputs[0].store(_gm.sigmoid_backward(outputs[0].grad, outputs[0].data), accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return y * (1.0 - y)  # d sigmoid(x) = y (1 - y) dx, as the fused backward


def _sigmoid(xp: Any, x: Any) -> Any:
    """``1 / (1 + e^-x)`` as a new array, in four passes (three in place).

    Accurate to a few ulps relative in both tails: for ``x << 0`` the quotient is a
    product of correctly rounded terms, and where ``e^-x`` overflows the result is 0,
    the true value being below the smallest normal float. (scipy's ``expit`` is as
    accurate but about 3x slower on numpy's float64 and 4x on float32.)
    """
    if getattr(x, "dtype", _FLOAT64).kind not in "fc":  # bool or int: float64, as numpy's
        x = xp.asarray(x, dtype=np.float64)
    t = xp.negative(x)
    with np.errstate(over="ignore"):
        if not _inplace_ok(t):  # a 0-d input (numpy gives a scalar)
            return 1.0 / (1.0 + xp.exp(t))
        xp.exp(t, out=t)
    t += 1.0
    xp.divide(1.0, t, out=t)
    return t


def _svml() -> bool:
    """Whether numpy runs ``log1p`` through its vectorised SVML loops (AVX512_SKX CPUs)."""
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # 2.x, 1.x
        try:
            features = importlib.import_module(name).__cpu_features__
        except (ImportError, AttributeError):
            continue
        return bool(features.get("AVX512_SKX", False))
    return False


#: numpy's float32 log1p is as fast as log with SVML, else a scalar loop 4x slower
_FAST_LOG1P = _svml()


def _log1p_small(xp: Any, t: Any) -> Any:
    """``log1p(t)`` as a new array for ``t`` in [0, 1], from the vectorised ``log``.

    Without SVML numpy's float32 ``log1p`` is a scalar loop (4x slower than ``log``). With
    ``u = 1 + t`` rounded, ``log1p(t) = log(u) - ((u - 1) - t) / u`` up to ``O(eps^2)``:
    ``(u - 1) - t`` is exactly the rounding error of ``u`` (Sterbenz), and where
    ``u == 1`` the result is ``t`` itself.
    """
    u = t + 1.0
    c = u - 1.0
    c -= t
    c /= u
    xp.log(u, out=u)
    u -= c
    return u


class Softplus(Elementwise):
    batch_rule = _batching.elementwise

    def __init__(self, *, beta: float = 1.0) -> None:
        self.beta = _arithmetic.check_scalar(self.name, "beta", beta)
        if self.beta == 0.0:
            raise ValueError("softplus: beta must be nonzero, got 0.0")

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        # log(1 + e^z) / beta with z = beta x, as max(z, 0) + log1p(e^-|z|): never overflows.
        # From h = z / 2: max(z, 0) = h + |h| and -|z| = -2 |h|, both exact and overflow-free
        # (h + |h| is NaN at z = -inf: max(h, 0) * 2 there).
        x = inputs[0]
        xp = array_module(x)
        if xp is not np and _cuda.fusable(x):  # cupy: the same formula in one kernel launch
            outputs[0] = _cuda.kernel(
                "softplus",
                "T x, float64 beta",
                "T y",
                "T h = x * (T)(0.5 * beta); "
                "y = (fmax(h, (T)0) * 2 + log1p(exp(fabs(h) * -2))) / (T)beta",
            )(x, self.beta)
            return
        h = x * (0.5 * self.beta)
        if not _inplace_ok(h):  # a 0-d input (numpy gives a scalar)
            y = xp.maximum(h + h, 0.0) + xp.log1p(xp.exp(xp.abs(h) * -2.0))
            outputs[0] = y / self.beta if self.beta != 1.0 else y
            return
        a = xp.abs(h)
        if xp is np and (h.size == 0 or np.fmin.reduce(h, axis=None) > -np.inf):
            h += a  # max(z, 0), in one pass (NaN-blind fmin: 4 us against maximum's 25)
        else:  # cupy, or some z = -inf, where h + |h| = -inf + inf
            xp.maximum(h, 0.0, out=h)
            h += h
        a *= -2.0
        xp.exp(a, out=a)  # e^-|z| in (0, 1]
        if a.dtype == xp.float32 and xp is np and not _FAST_LOG1P:  # cupy's log1p is fast
            y = _log1p_small(xp, a)
        else:
            y = xp.log1p(a, out=a)
        y += h
        if self.beta != 1.0:
            y /= self.beta
        outputs[0] = y

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d softplus = sigmoid(beta x) dx, as one fused node (gy / (1 + e^(-beta x)))
        if prop_down[0]:
            gx = _gm.softplus_backward(outputs[0].grad, inputs[0].data, beta=self.beta)
            inputs[0].store(gx, accum[0])

    def dydx(self, x: Any, y: Any) -> Any:
        return sigmoid(x * self.beta)  # d softplus(x) = sigmoid(beta x) dx, as the fused backward


class ReLU(Elementwise):
    scalar_kernel = "maximum(x0, 0.0)"
    name = "relu"  # the public F.relu (the class name would give re_lu)
    batch_rule = _batching.elementwise
    piecewise_linear = True  # Taylor mode: y_k = [x > 0] x_k

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).maximum(inputs[0], 0.0)

    def dydx(self, x: Any, y: Any) -> Any:
        return _array.greater(x, 0.0)  # d relu(x) = [x > 0] dx (a mask product, faster than where)


# ---------------------------------------------------------------- primitives' wrappers
def sigmoid(x: Any) -> Variable:
    """Logistic sigmoid ``y = 1 / (1 + exp(-x))``, elementwise and numerically stable.

    The gradient ``y (1 - y)`` is computed from the output.

    >>> import numpy as np, hodiff.functions as F
    >>> F.sigmoid(np.array([0.0, 1e4, -1e4])).d
    array([0.5, 1. , 0. ])
    """
    return Sigmoid()(x)


def softplus(x: Any, beta: float = 1.0) -> Variable:
    """``y = log(1 + exp(beta * x)) / beta`` elementwise, without overflow for any ``x``.

    Args:
        x: input of any shape.
        beta: sharpness (nonzero); large ``beta`` approaches ``relu``.

    Returns:
        Same shape as ``x``; the gradient is ``sigmoid(beta * x)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.softplus(np.array([0.0, 1e4])).d
    array([6.93147181e-01, 1.00000000e+04])

    """
    return Softplus(beta=beta)(x)


def relu(x: Any) -> Variable:
    """Rectified linear unit ``y = max(0, x)`` elementwise; the derivative is ``[x > 0]``
    (0 at the kink, in every mode: its ``dydx``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.relu(np.array([-1.0, 2.0])).d
    array([0., 2.])
    """
    return ReLU()(x)


# ---------------------------------------------------------------- compositions
# These run on bare arrays too (a rule may call them during a plain backward), so they
# start from hodiff functions and never wrap an array into a Variable.
def _check(name: str, arg: str, value: Any) -> float:
    return _arithmetic.check_scalar(name, arg, value)


def _neg(x: Any) -> Any:
    return _arithmetic.mul_scalar(x, -1.0)


def _min0(x: Any) -> Any:
    """``min(x, 0)``, whose derivative ``[x <= 0]`` gives the point ``x = 0`` to the negative
    branch, as NNabla does (so ``elu`` with ``alpha = 1`` has its true derivative 1 there),
    in reverse and forward mode alike.
    """
    return _arithmetic.minimum_scalar(x, 0.0)


def _shaped(x: Any) -> Any:
    """``x`` itself when it has a shape (array or Variable), else a constant Variable."""
    return x if hasattr(x, "shape") else as_variable(x)


@real_values
def leaky_relu(x: Any, alpha: float = 0.1) -> Variable:
    """``y = max(0, x) + alpha * min(0, x)`` elementwise; the derivative at the kink 0 is
    ``alpha`` (the negative branch's), in every mode.

    >>> import numpy as np, hodiff.functions as F
    >>> F.leaky_relu(np.array([-2.0, 3.0])).d
    array([-0.2,  3. ])
    """
    alpha = _check("leaky_relu", "alpha", alpha)
    return relu(x) + _min0(x) * alpha


@real_values
def elu(x: Any, alpha: float = 1.0) -> Variable:
    """Exponential linear unit: ``y = x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise.

    At 0 the derivative is ``alpha`` (the negative branch's; the true one, 1, for
    ``alpha = 1``), in every mode.

    >>> import numpy as np, hodiff.functions as F
    >>> F.elu(np.array([-1.0, 2.0])).d
    array([-0.63212056,  2.        ])
    """
    alpha = _check("elu", "alpha", alpha)
    # exp of min(x, 0) never overflows
    return relu(x) + _math.expm1(_min0(x)) * alpha


@real_values
def selu(x: Any, scale: float = 1.05070098735548, alpha: float = 1.673263242354377) -> Variable:
    """Scaled ELU (Klambauer et al., 2017): ``y = scale * elu(x, alpha)``; at 0 the
    derivative is ``scale * alpha`` (the negative branch's, as :func:`elu`), in every mode.

    Args:
        x: input of any shape.
        scale: ``lambda`` of the definition (the self-normalising value by default).
        alpha: ``alpha`` of the definition (the self-normalising value by default).

    """
    scale = _check("selu", "scale", scale)
    return elu(x, _check("selu", "alpha", alpha)) * scale


@traced
@real_values
def celu(x: Any, alpha: float = 1.0, axis: int = 1) -> Variable:
    """Concatenated ELU: ``elu(x, alpha)`` and ``elu(-x, alpha)`` joined along ``axis``
    (each half with :func:`elu`'s derivative at 0).

    Args:
        x: input with at least one axis.
        alpha: ``alpha`` of :func:`elu`.
        axis: the axis whose size doubles.

    Returns:
        ``x``'s shape with ``shape[axis]`` doubled.

    >>> import numpy as np, hodiff.functions as F
    >>> F.celu(np.array([[1.0, -1.0]]), axis=1).d
    array([[ 1.        , -0.63212056, -0.63212056,  1.        ]])

    """
    alpha = _check("celu", "alpha", alpha)
    x = _shaped(x)
    if not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"celu: axis {axis} is out of range for x of shape {x.shape}")
    return _array.concatenate(elu(x, alpha), elu(_neg(x), alpha), axis=axis)


@traced
@real_values
def crelu(x: Any, axis: int = 1) -> Variable:
    """Concatenated ReLU (NNabla's): ``relu(x)`` and ``relu(-x)`` joined along ``axis``.

    Args:
        x: input with at least one axis.
        axis: the axis whose size doubles.

    Returns:
        ``x``'s shape with ``shape[axis]`` doubled.

    >>> import numpy as np, hodiff.functions as F
    >>> F.crelu(np.array([[1.0, -2.0]]), axis=1).d
    array([[1., 0., 0., 2.]])
    """
    x = _shaped(x)
    if not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"crelu: axis {axis} is out of range for x of shape {x.shape}")
    return _array.concatenate(relu(x), relu(_neg(x)), axis=axis)


@real_values
def gelu(x: Any) -> Variable:
    """Gaussian error linear unit, tanh approximation (NNabla's definition):
    ``y = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.gelu(np.array([0.0, 1.0])).d
    array([0.        , 0.84119199])
    """
    t = _math.tanh((_arithmetic.pow_scalar(x, 3.0) * 0.044715 + x) * _GELU_C)
    return x * (t + 1.0) * 0.5


@real_values
def softsign(x: Any) -> Variable:
    """``y = x / (1 + |x|)`` elementwise.

    >>> import numpy as np, hodiff.functions as F
    >>> F.softsign(np.array([-1.0, 3.0])).d
    array([-0.5 ,  0.75])
    """
    return x / (_arithmetic.abs(x) + 1.0)


@real_values
def swish(x: Any) -> Variable:
    """Swish (Ramachandran et al., 2017): ``y = x * sigmoid(x) = x / (1 + exp(-x))``."""
    return sigmoid(x) * x


@real_values
def relu6(x: Any) -> Variable:
    """``y = min(max(0, x), 6)`` elementwise; the derivative is 0 at 0 and 1 at 6 (every mode).

    >>> import numpy as np, hodiff.functions as F
    >>> F.relu6(np.array([-1.0, 3.0, 7.0])).d
    array([0., 3., 6.])
    """
    return _arithmetic.minimum_scalar(relu(x), 6.0)


@real_values
def hard_sigmoid(x: Any) -> Variable:
    """Piecewise-linear sigmoid ``y = clip(0.2 x + 0.5, 0, 1)``: 0 below -2.5, 1 above 2.5.

    The derivative is 0 at -2.5 (``relu``'s at 0) and 0.2 at 2.5, in every mode.

    >>> import numpy as np, hodiff.functions as F
    >>> F.hard_sigmoid(np.array([-3.0, 0.0, 1.0, 3.0])).d
    array([0. , 0.5, 0.7, 1. ])
    """
    return _arithmetic.minimum_scalar(relu(_arithmetic.mul_scalar(x, 0.2) + 0.5), 1.0)


@real_values
def hard_tanh(x: Any) -> Variable:
    """``y = clip(x, -1, 1)`` elementwise; the derivative is 1 on ``[-1, 1]``, bounds included
    (every mode).

    >>> import numpy as np, hodiff.functions as F
    >>> F.hard_tanh(np.array([-3.0, 0.5, 3.0])).d
    array([-1. ,  0.5,  1. ])
    """
    return _arithmetic.minimum_scalar(_arithmetic.maximum_scalar(x, -1.0), 1.0)


@real_values
def log_sigmoid(x: Any) -> Variable:
    """``y = log(sigmoid(x)) = -softplus(-x)`` elementwise, without overflow for any ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.log_sigmoid(np.array([0.0, -1e4])).d
    array([-6.93147181e-01, -1.00000000e+04])
    """
    return -softplus(_neg(x))


@traced
@real_values
def prelu(x: Any, w: Any, base_axis: int = 1) -> Variable:
    """Parametric ReLU: ``y = max(0, x) + w * min(0, x)`` with a learned slope ``w``; the
    derivative in ``x`` at 0 is ``w`` (the negative branch's), in every mode.

    Args:
        x: input of any shape.
        w: slope, shape ``()`` or ``(1,)`` (shared by all elements) or
            ``(x.shape[base_axis],)`` (one per channel).
        base_axis: the channel axis of ``x`` when ``w`` is per channel.

    Returns:
        Same shape as ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.prelu(np.array([[-1.0, 2.0], [-3.0, -4.0]]), np.array([0.5, 0.1])).d
    array([[-0.5,  2. ],
           [-1.5, -0.4]])

    """
    x, w = _shaped(x), _shaped(w)
    if w.shape in ((), (1,)):
        w = _array.reshape(w, ()) if w.shape else w
    else:
        axis = normalize_base_axis("prelu", base_axis, x.ndim)
        if w.shape != (x.shape[axis],):
            raise ValueError(
                f"prelu: w of shape {w.shape} must have shape (), (1,) or "
                f"({x.shape[axis]},) = (x.shape[base_axis],) for x of shape {x.shape}"
            )
        w = _array.reshape(w, (x.shape[axis],) + (1,) * (x.ndim - axis - 1))
    return relu(x) + _min0(x) * w
