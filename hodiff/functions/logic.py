"""Comparisons and logical functions with NNabla's names: ``not_equal``, ``logical_and``,
``logical_or``, ``logical_xor``, ``logical_not`` and the ``*_scalar`` forms.

All are elementwise, broadcast as numpy, give bool arrays and are not differentiable
(they cut the graph), like :func:`hodiff.functions.equal` and the other comparisons. A
logical function reads a nonzero input as True (NNabla: ``x != 0``). NNabla returns
0/1 in the input's float dtype; hodiff returns bool (``F.astype(y, x.dtype)`` gives
NNabla's numbers). The scalar forms are the binary functions with a Python scalar.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine.complex_values import real_values
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array

__all__ = [
    "equal_scalar",
    "greater_equal_scalar",
    "greater_scalar",
    "less_equal_scalar",
    "less_scalar",
    "logical_and",
    "logical_and_scalar",
    "logical_not",
    "logical_or",
    "logical_or_scalar",
    "logical_xor",
    "logical_xor_scalar",
    "not_equal",
    "not_equal_scalar",
]


class NotEqual(_array.Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] != inputs[1]


class LogicalAnd(_array.Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = (inputs[0] != 0) & (inputs[1] != 0)


class LogicalOr(_array.Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = (inputs[0] != 0) | (inputs[1] != 0)


class LogicalXor(_array.Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = (inputs[0] != 0) ^ (inputs[1] != 0)


class LogicalNot(_array.Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] == 0


def _scalar(name: str, val: Any) -> Any:
    """``val`` checked to be a real Python or numpy scalar (bool included)."""
    if isinstance(val, bool | np.bool_):
        return bool(val)
    if not isinstance(val, int | float | np.integer | np.floating):
        raise TypeError(f"{name}: val must be a real scalar, got {type(val).__name__}")
    return val


# ---------------------------------------------------------------- wrappers
def not_equal(x0: Any, x1: Any) -> Variable:
    """``y = x0 != x1`` elementwise, broadcast (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.not_equal(np.array([1.0, 2.0]), np.array([1.0, 3.0])).d
    array([False,  True])
    """
    return NotEqual()(x0, x1)


def logical_and(x0: Any, x1: Any) -> Variable:
    """``y = (x0 != 0) and (x1 != 0)`` elementwise, broadcast (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_and(np.array([0.0, 2.0, 3.0]), np.array([1.0, 0.0, -1.0])).d
    array([False, False,  True])
    """
    return LogicalAnd()(x0, x1)


def logical_or(x0: Any, x1: Any) -> Variable:
    """``y = (x0 != 0) or (x1 != 0)`` elementwise, broadcast (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_or(np.array([0.0, 2.0, 0.0]), np.array([1.0, 0.0, 0.0])).d
    array([ True,  True, False])
    """
    return LogicalOr()(x0, x1)


def logical_xor(x0: Any, x1: Any) -> Variable:
    """``y = (x0 != 0) xor (x1 != 0)`` elementwise, broadcast (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_xor(np.array([0.0, 2.0, 3.0]), np.array([1.0, 0.0, 1.0])).d
    array([ True,  True, False])
    """
    return LogicalXor()(x0, x1)


def logical_not(x0: Any) -> Variable:
    """``y = (x0 == 0)`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_not(np.array([0.0, 2.0])).d
    array([ True, False])
    """
    return LogicalNot()(x0)


@real_values
def equal_scalar(x0: Any, val: Any = 1) -> Variable:
    """``y = (x0 == val)`` elementwise (bool, not differentiable), NNabla's default val 1.

    >>> import numpy as np, hodiff.functions as F
    >>> F.equal_scalar(np.array([1.0, 2.0]), 2.0).d
    array([False,  True])
    """
    return _array.equal(x0, _scalar("equal_scalar", val))


@real_values
def not_equal_scalar(x0: Any, val: Any = 1) -> Variable:
    """``y = (x0 != val)`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.not_equal_scalar(np.array([1.0, 2.0]), 2.0).d
    array([ True, False])
    """
    return not_equal(x0, _scalar("not_equal_scalar", val))


@real_values
def greater_scalar(x0: Any, val: Any = 1) -> Variable:
    """``y = (x0 > val)`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.greater_scalar(np.array([1.0, 2.0]), 1.0).d
    array([False,  True])
    """
    return _array.greater(x0, _scalar("greater_scalar", val))


@real_values
def greater_equal_scalar(x0: Any, val: Any = 1) -> Variable:
    """``y = (x0 >= val)`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.greater_equal_scalar(np.array([1.0, 2.0]), 2.0).d
    array([False,  True])
    """
    return _array.greater_equal(x0, _scalar("greater_equal_scalar", val))


@real_values
def less_scalar(x0: Any, val: Any = 1) -> Variable:
    """``y = (x0 < val)`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.less_scalar(np.array([1.0, 2.0]), 2.0).d
    array([ True, False])
    """
    return _array.less(x0, _scalar("less_scalar", val))


@real_values
def less_equal_scalar(x0: Any, val: Any = 1) -> Variable:
    """``y = (x0 <= val)`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.less_equal_scalar(np.array([1.0, 2.0]), 1.0).d
    array([ True, False])
    """
    return _array.less_equal(x0, _scalar("less_equal_scalar", val))


@real_values
def logical_and_scalar(x0: Any, val: bool) -> Variable:
    """``y = (x0 != 0) and val`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_and_scalar(np.array([0.0, 2.0]), True).d
    array([False,  True])
    """
    return logical_and(x0, _scalar("logical_and_scalar", val))


@real_values
def logical_or_scalar(x0: Any, val: bool) -> Variable:
    """``y = (x0 != 0) or val`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_or_scalar(np.array([0.0, 2.0]), False).d
    array([False,  True])
    """
    return logical_or(x0, _scalar("logical_or_scalar", val))


@real_values
def logical_xor_scalar(x0: Any, val: bool) -> Variable:
    """``y = (x0 != 0) xor val`` elementwise (bool, not differentiable).

    >>> import numpy as np, hodiff.functions as F
    >>> F.logical_xor_scalar(np.array([0.0, 2.0]), True).d
    array([ True, False])
    """
    return logical_xor(x0, _scalar("logical_xor_scalar", val))
