"""Rounding and remainders: floor, ceil, round, mod/remainder, fmod, nan_to_num.

``floor``, ``ceil`` and ``round`` are piecewise constant: their derivative is
zero wherever it exists, so, like ``sign``, they are *not differentiable*
functions that cut the graph (no gradient flows through them, at any order).
The remainders are differentiable away from the jumps at multiples of ``x1``:
``mod(x0, x1) = x0 - floor(x0 / x1) x1`` has gradients ``1`` and
``-floor(x0 / x1)`` (``fmod`` uses ``trunc`` instead of ``floor``).
``nan_to_num`` passes the gradient where ``x`` is finite and sends zero to
the replaced entries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.arguments import array_module_of
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Elementwise, Flags, Function, Slots, float_dtype
from hodiff.engine.variable import Variable
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array

__all__ = ["ceil", "floor", "fmod", "mod", "nan_to_num", "remainder", "round"]


class _Piecewise(Function, register=False, follows_shape=True, follows_rank=True):
    """A piecewise-constant elementwise function: zero derivative, so it cuts the graph."""

    differentiable = False
    ufunc: str
    batch_rule = _batching.elementwise

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = getattr(array_module(inputs[0]), self.ufunc)(inputs[0])


class Floor(_Piecewise):
    ufunc = "floor"


class Ceil(_Piecewise):
    ufunc = "ceil"


class Round(_Piecewise):
    def __init__(self, *, decimals: int = 0) -> None:
        self.decimals = int(decimals)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).round(inputs[0], self.decimals)


class _Remainder(Function, register=False, follows_shape=True, follows_rank=True):
    """``y = x0 - q(x0 / x1) x1`` for the rounding ``q`` of the numpy ufunc ``ufunc``."""

    ufunc: str
    batch_rule = _batching.elementwise

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        shape = _arith.broadcast_shapes(self.name, *inputs)
        return [(shape, float_dtype(np.result_type(*(x.dtype for x in inputs))))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x0, x1 = inputs
        y = getattr(array_module(x0), self.ufunc)(x0, x1)
        outputs[0] = y if y.dtype.kind == "f" else y.astype(np.float64)

    def quotient(self, x0: Any, x1: Any) -> Any:
        raise NotImplementedError

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d y = d x0 - q(x0 / x1) d x1  (q is piecewise constant)
        gy = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(gy, accum[0])
        if prop_down[1]:
            x0, x1 = inputs[0].data, inputs[1].data
            inputs[1].store(-(gy * self.quotient(x0, x1)), accum[1])


class Mod2(_Remainder):
    name = "mod"  # the public F.mod (F.remainder is the same function)
    ufunc = "mod"

    def quotient(self, x0: Any, x1: Any) -> Any:
        return floor(x0 / x1)


class Fmod2(_Remainder):
    name = "fmod"  # the public F.fmod
    ufunc = "fmod"

    def quotient(self, x0: Any, x1: Any) -> Any:
        q = x0 / x1
        return _arith.sign(q, alpha=0.0) * floor(_arith.abs(q))  # trunc


class NanToNum(Elementwise):
    def __init__(
        self, *, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> None:
        self.nan = float(nan)
        self.posinf = None if posinf is None else float(posinf)
        self.neginf = None if neginf is None else float(neginf)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = array_module(x).nan_to_num(
            x, copy=True, nan=self.nan, posinf=self.posinf, neginf=self.neginf
        )

    def dydx(self, x: Any, y: Any) -> Any:
        # 1 where x is finite, 0 at the replaced nan/inf entries, in x's dtype (Python's 1.0
        # and 0.0 with no float operand would be float64)
        xp = array_module_of(x)
        finite = _array.less(_arith.abs(x), math.inf)
        return _array.where(finite, xp.ones((), x.dtype), xp.zeros((), x.dtype))


# ---------------------------------------------------------------- wrappers
def floor(x: Any) -> Variable:
    """``y = floor(x)``, the largest integer ``<= x``, elementwise (as float).

    Not differentiable: the derivative is zero away from the integers and undefined at
    them, so ``floor`` cuts the graph (like ``sign``; no straight-through estimator).

    >>> import numpy as np, hodiff.functions as F
    >>> F.floor(np.array([-1.5, 0.5, 2.0])).d
    array([-2.,  0.,  2.])
    """
    return Floor()(x)


def ceil(x: Any) -> Variable:
    """``y = ceil(x)``, the smallest integer ``>= x``, elementwise (as float).

    Not differentiable (zero derivative almost everywhere): it cuts the graph.

    >>> import numpy as np, hodiff.functions as F
    >>> F.ceil(np.array([-1.5, 0.5])).d
    array([-1.,  1.])
    """
    return Ceil()(x)


def round(x: Any, decimals: int = 0) -> Variable:
    """``y = round(x, decimals)`` elementwise, halves to even (numpy's ``round``).

    Not differentiable (zero derivative almost everywhere): it cuts the graph.

    >>> import numpy as np, hodiff.functions as F
    >>> F.round(np.array([0.5, 1.5, 2.26]), 1).d
    array([0.5, 1.5, 2.3])
    """
    return Round(decimals=decimals)(x)


def mod(x0: Any, x1: Any) -> Variable:
    """Remainder with the sign of the divisor (numpy's ``mod``), with broadcasting.

    ``y = x0 - floor(x0 / x1) * x1``; the gradients are ``dy/dx0 = 1`` and
    ``dy/dx1 = -floor(x0 / x1)`` (undefined at the jumps, where ``x0 / x1`` is an integer).

    >>> import numpy as np, hodiff.functions as F
    >>> F.mod(np.array([5.0, -5.0]), np.array([3.0, 3.0])).d
    array([2., 1.])
    """
    return Mod2()(x0, x1)


@real_values
def remainder(x0: Any, x1: Any) -> Variable:
    """Same as :func:`mod` (numpy's alias): ``y = x0 - floor(x0 / x1) * x1``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.remainder(np.array([-5.0]), np.array([3.0])).d
    array([1.])
    """
    return Mod2()(x0, x1)


def fmod(x0: Any, x1: Any) -> Variable:
    """Remainder with the sign of the dividend (C's ``fmod``), with broadcasting.

    ``y = x0 - trunc(x0 / x1) * x1``; the gradients are ``1`` and ``-trunc(x0 / x1)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.fmod(np.array([5.0, -5.0]), np.array([3.0, 3.0])).d
    array([ 2., -2.])
    """
    return Fmod2()(x0, x1)


def nan_to_num(
    x: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Variable:
    """``y = x`` with NaN and +-inf replaced by finite numbers (numpy's ``nan_to_num``).

    NaN becomes ``nan``, +-inf ``posinf``/``neginf`` (``None``: the largest/smallest finite
    float of the dtype).

    The gradient is ``gy`` where ``x`` is finite and 0 at the replaced entries.

    >>> import numpy as np, hodiff.functions as F
    >>> F.nan_to_num(np.array([np.nan, 1.0, -np.inf]), neginf=-9.0).d
    array([ 0.,  1., -9.])
    """
    return NanToNum(nan=nan, posinf=posinf, neginf=neginf)(x)
