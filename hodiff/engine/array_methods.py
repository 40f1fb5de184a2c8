"""Variable's operators, numpy-style methods and numpy interop, as JAX's array methods.

:class:`ArrayMethods` is the part of :class:`~hodiff.engine.variable.Variable` that the
layer above fills in: ``x + y`` is ``Add2()(x, y)``, ``x @ w`` is ``matmul``, ``x[i]`` is
``getitem``, ``x.sum()`` is ``sum``. ``hodiff.functions`` registers those functions when it
is imported (:func:`register`), and so does the engine for the passes behind
``Variable.forward``/``.backward`` and the record of shape changes; the engine imports
nothing above it. A numpy function or ufunc applied to a Variable (``np.tanh(v)``) raises a
TypeError naming the hodiff function to use; ``ndarray * v`` runs the Variable's operator.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["ArrayMethods", "Registry", "is_scalar", "methods", "register"]

Variable = Any  # the annotations' name for the class these methods belong to

_SCALARS = (int, float, np.floating, np.integer, np.bool_)


def is_scalar(value: Any) -> bool:
    """True for Python and numpy real scalars (not arrays, not Variables)."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, ArrayMethods) or hasattr(value, "shape"):
        return False
    return isinstance(value, numbers.Real)  # other registered real types (slow ABC check)


_PERSISTENT = (
    "Variable.persistent (NNabla's flag) does not exist in hodiff: a value is kept unless "
    "forward(clear_buffer=True) frees it (values a backward rule needs are kept), and an "
    "intermediate gradient is kept with backward(retain_grad=True)"
)


def _scalar_operand(other: Any) -> bool:
    """Whether ``other`` is a scalar operand of arithmetic; a bool is refused (a mask is
    wanted: ``x * (x == 2.0)``, not the Python bool ``x == 2.0`` once gave).
    """
    if type(other) is bool or type(other) is np.bool_:
        raise TypeError(
            f"a Python bool ({other!r}) as an operand of a Variable's arithmetic: use a mask "
            "(x == 2.0 on a Variable is elementwise, or F.equal(x, 2.0)), or a number"
        )
    return is_scalar(other)


class ArrayMethods:
    """Operators and numpy-style methods of a Variable: thin wrappers over ``hodiff.functions``."""

    __slots__ = ()
    _shape: tuple[int, ...]
    _dtype: Any

    # ------------------------------------------------------------ numpy interop
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Refused: ``np.asarray(v)`` would leave the graph silently (and for a list of
        Variables give an array of objects); ``.d`` / ``.numpy()`` say it on purpose.
        """
        raise TypeError(
            f"numpy.asarray / numpy.array of a hodiff Variable (shape {self._shape}, dtype "
            f"{self._dtype}): use v.d (the array itself) or v.numpy() (a copy) for its value, "
            "which is not differentiable; to make one Variable of several, use F.stack"
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """Operators with an array or a numpy scalar on the left (``ndarray * v``) run the
        Variable's operator; any other numpy ufunc (``np.tanh(v)``) raises a TypeError
        naming the hodiff function to use.
        """
        if method == "__call__" and len(inputs) == 2 and not kwargs:
            a, b = inputs
            if b is self and not isinstance(a, ArrayMethods):  # ndarray * v: the common case
                op = _REFLECTED.get(ufunc)
                if op is not None:
                    return op(b, a)
        return _array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """A numpy function (``np.sum(v)``, ``np.stack([v, w])``) raises a TypeError naming
        the hodiff function to use.
        """
        module = getattr(func, "__module__", None) or "numpy"
        module = "numpy.linalg" if "linalg" in module else "numpy"
        raise TypeError(_numpy_refused(f"{module}.{func.__name__}", func.__name__, args))

    # ------------------------------------------------------------ operators
    # The hot operators try the exact types first: a Python float/int, then a Variable.
    def __add__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return methods.AddScalar(val=other)(self)
        if t is type(self):  # a Variable like this one (the hot case)
            return methods.Add2()(self, other)
        if _scalar_operand(other):
            return methods.add_scalar(self, other)
        return methods.add2(self, other)

    def __radd__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return methods.AddScalar(val=other)(self)
        if _scalar_operand(other):
            return methods.add_scalar(self, other)
        return methods.add2(other, self)

    def __sub__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return methods.AddScalar(val=-other)(self)
        if t is type(self):  # a Variable like this one (the hot case)
            return methods.Sub2()(self, other)
        if _scalar_operand(other):
            return methods.add_scalar(self, -other)
        return methods.sub2(self, other)

    def __rsub__(self, other: Any) -> Variable:
        if _scalar_operand(other):
            return methods.r_sub_scalar(self, other)
        return methods.sub2(other, self)

    def __mul__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return methods.MulScalar(val=other)(self)
        if t is type(self):  # a Variable like this one (the hot case)
            return methods.Mul2()(self, other)
        if _scalar_operand(other):
            return methods.mul_scalar(self, other)
        return methods.mul2(self, other)

    def __rmul__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return methods.MulScalar(val=other)(self)
        if _scalar_operand(other):
            return methods.mul_scalar(self, other)
        return methods.mul2(other, self)

    def __truediv__(self, other: Any) -> Variable:
        if _scalar_operand(other):
            if other == 0:  # numpy's x / 0: inf, -inf or nan (not ZeroDivisionError)
                return methods.div2(self, other)
            return methods.mul_scalar(self, 1.0 / other)
        return methods.div2(self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        if _scalar_operand(other):
            return methods.r_div_scalar(self, other)
        return methods.div2(other, self)

    def __pow__(self, other: Any) -> Variable:
        if _scalar_operand(other):
            return methods.pow_scalar(self, other)
        return methods.pow2(self, other)

    def __rpow__(self, other: Any) -> Variable:
        if _scalar_operand(other):
            return methods.r_pow_scalar(self, other)
        return methods.pow2(other, self)

    def __matmul__(self, other: Any) -> Variable:
        return methods.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Variable:
        return methods.matmul(other, self)

    def __neg__(self) -> Variable:
        return methods.MulScalar(val=-1.0)(self)

    def __pos__(self) -> Variable:
        return self

    def __abs__(self) -> Variable:
        return methods.abs(self)

    def __getitem__(self, key: Any) -> Variable:
        return methods.getitem(self, key)

    def __lt__(self, other: Any) -> Variable:
        return methods.less(self, other)

    def __gt__(self, other: Any) -> Variable:
        return methods.greater(self, other)

    def __le__(self, other: Any) -> Variable:
        return methods.less_equal(self, other)

    def __ge__(self, other: Any) -> Variable:
        return methods.greater_equal(self, other)

    # == and != with a scalar or an array are elementwise (numpy's, PyTorch's); between two
    # Variables they stay identity, so Variables are dict keys and set members (NNabla's)
    __hash__ = object.__hash__

    def __eq__(self, other: Any) -> Any:
        if other is None or isinstance(other, ArrayMethods):
            return self is other
        if is_scalar(other) or hasattr(other, "shape") or isinstance(other, list):
            return methods.equal(self, other)
        return NotImplemented

    def __ne__(self, other: Any) -> Any:
        if other is None or isinstance(other, ArrayMethods):
            return self is not other
        if is_scalar(other) or hasattr(other, "shape") or isinstance(other, list):
            return methods.not_equal(self, other)
        return NotImplemented

    def __setitem__(self, key: Any, value: Any) -> None:
        """Refused: a Variable is a value of the graph; an assignment into it would not be
        differentiated (and would change what nodes already computed from it).
        """
        raise TypeError(
            "Variable does not support item assignment (v[...] = ...): build the new value "
            "with F.where(mask, new, v) or a mask product (v * mask + new * (1 - mask)), "
            "or assign into v.d to change a leaf's value outside the graph"
        )

    # ------------------------------------------------------------ NNabla's spellings
    @classmethod
    def from_numpy_array(cls, array: Any, need_grad: bool = False) -> Any:
        """NNabla's name of ``Variable.from_array`` (a copy of ``array``)."""
        return cls.from_array(array, need_grad=need_grad)  # type: ignore[attr-defined]

    @property
    def persistent(self) -> bool:
        """NNabla's flag: refused with what hodiff does instead."""
        raise AttributeError(_PERSISTENT)

    @persistent.setter
    def persistent(self, value: bool) -> None:
        raise AttributeError(_PERSISTENT)

    def tolist(self) -> Any:
        """The value as nested Python lists (``v.d.tolist()``); not differentiable."""
        d = self.d  # type: ignore[attr-defined]
        return (d.get() if hasattr(d, "get") else d).tolist()

    def __format__(self, spec: str) -> str:
        """``f"{loss:.3f}"``: a size-1 value formatted as its number (as numpy's 0-d arrays);
        an empty spec is ``str(v)``.
        """
        if not spec:
            return str(self)
        if math.prod(self._shape) != 1:
            raise TypeError(
                f"unsupported format string {spec!r} for a Variable of shape {self._shape}: "
                "format one element (v.d[i]) or v.d"
            )
        return format(self.item(), spec)  # type: ignore[attr-defined]

    # ------------------------------------------------------------ numpy-style methods
    # thin wrappers over hodiff.functions (F), registered by it
    @property
    def T(self) -> Variable:  # noqa: N802
        """The axes reversed: ``F.transpose(self)``."""
        return methods.transpose(self)

    def reshape(self, *shape: Any) -> Variable:
        """``F.reshape(self, shape)``; ``shape`` as a tuple or as separate ints."""
        return methods.reshape(
            self, shape[0] if len(shape) == 1 and not is_scalar(shape[0]) else shape
        )

    def transpose(self, *axes: Any) -> Variable:
        """``F.transpose(self, axes)``; no axes reverse them, as numpy."""
        if len(axes) == 1 and (axes[0] is None or not is_scalar(axes[0])):
            axes = axes[0]
        return methods.transpose(self, axes or None)

    def flatten(self) -> Variable:
        """``F.reshape(self, (-1,))``: a 1-D copy, as numpy's ``flatten``."""
        return methods.reshape(self, (-1,))

    def squeeze(self, axis: Any = None) -> Variable:
        """``F.squeeze(self, axis)``."""
        return methods.squeeze(self, axis)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.sum(self, axis, keepdims)``."""
        return methods.sum(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.mean(self, axis, keepdims)``."""
        return methods.mean(self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.max(self, axis, keepdims)``."""
        return methods.max(self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.min(self, axis, keepdims)``."""
        return methods.min(self, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.prod(self, axis, keepdims)``."""
        return methods.prod(self, axis, keepdims)

    def astype(self, dtype: Any) -> Variable:
        """``F.astype(self, dtype)``."""
        return methods.astype(self, dtype)


#: numpy's operator ufuncs -> (the Variable method, the reflected one; none for unary ones),
#: so that ``ndarray * v`` and ``np.float32(2) * v`` run the Variable's operators
_OPERATORS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "add": ("__add__", "__radd__"),
        "subtract": ("__sub__", "__rsub__"),
        "multiply": ("__mul__", "__rmul__"),
        "divide": ("__truediv__", "__rtruediv__"),
        "true_divide": ("__truediv__", "__rtruediv__"),
        "power": ("__pow__", "__rpow__"),
        "matmul": ("__matmul__", "__rmatmul__"),
        "less": ("__lt__", "__gt__"),
        "less_equal": ("__le__", "__ge__"),
        "greater": ("__gt__", "__lt__"),
        "greater_equal": ("__ge__", "__le__"),
        "negative": ("__neg__", ""),
        "positive": ("__pos__", ""),
        "absolute": ("__abs__", ""),
    }
)

#: numpy names whose hodiff function has another name (for the error of np.arctan(v))
_NUMPY_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "absolute": "abs",
        "fabs": "abs",
        "arccos": "acos",
        "arcsin": "asin",
        "arctan": "atan",
        "arctan2": "atan2",
        "arccosh": "acosh",
        "arcsinh": "asinh",
        "arctanh": "atanh",
        "maximum": "maximum2",
        "minimum": "minimum2",
        "fmax": "maximum2",
        "fmin": "minimum2",
        "add": "add2",
        "subtract": "sub2",
        "multiply": "mul2",
        "divide": "div2",
        "true_divide": "div2",
        "power": "pow2",
        "float_power": "pow2",
        "amax": "max",
        "amin": "min",
        "clip": "clip_by_value",
        "dot": "matmul",
        "inv": "batch_inv",
        "det": "batch_det",
        "slogdet": "batch_logdet",
        "tril": "trilu",
        "triu": "trilu",
        "diagonal": "matrix_diag_part",
        "diag": "matrix_diag",
        "broadcast_to": "broadcast",
        "take": "gather",
    }
)


def _numpy_refused(what: str, name: str, args: Any) -> str:
    """The message for a numpy function applied to a Variable: which hodiff function to use."""
    known = methods.__dict__.get("function_names", frozenset())
    hodiff_name = _NUMPY_ALIASES.get(name, name)
    if hodiff_name in known:
        use = f"use F.{hodiff_name} (import hodiff.functions as F), which is differentiable"
    else:
        use = f"hodiff.functions has no {name}: compose it from F functions"
    got = ", ".join(
        f"Variable {a._shape} {a._dtype}" if isinstance(a, ArrayMethods) else type(a).__name__
        for a in (args if isinstance(args, tuple | list) else (args,))
    )
    return (
        f"{what} cannot take a hodiff Variable (got {got}): numpy does not record it in the "
        f"graph, so its derivative would be lost; {use}, or v.d for the value (inside a "
        "backward_impl the slots hold Variables when hd.grad records)"
    )


def _array_ufunc(ufunc: Any, method: str, inputs: Any, kwargs: Any) -> Any:
    """:meth:`Variable.__array_ufunc__` past its fast path: the other operators, or the
    TypeError that names the hodiff function to use.
    """
    name = ufunc.__name__
    if name in ("equal", "not_equal") and method == "__call__" and len(inputs) == 2:
        a, b = inputs  # ``array == v``: elementwise, as ``v == array``
        v, other = (a, b) if isinstance(a, ArrayMethods) else (b, a)
        return v.__eq__(other) if name == "equal" else v.__ne__(other)
    ops = _OPERATORS.get(name) if method == "__call__" and not kwargs else None
    if ops is not None and (len(inputs) == 1) == (not ops[1]):
        if len(inputs) == 1:
            return getattr(inputs[0], ops[0])()
        a, b = inputs
        if isinstance(a, ArrayMethods):
            return getattr(a, ops[0])(b)
        return getattr(b, ops[1])(a)
    raise TypeError(_numpy_refused(f"numpy.{name}", name, inputs))


#: numpy's binary operator ufuncs -> the Variable's reflected operator (``ndarray * v``)
_REFLECTED: Mapping[Any, Any] = MappingProxyType(
    {
        getattr(np, name): getattr(ArrayMethods, reflected)
        for name, (_, reflected) in _OPERATORS.items()
        if reflected
    }
)


class Registry:
    """Names that a module calls but a layer above defines, registered at import.

    The engine imports nothing above it; what it must call from there is filled in by
    that layer when it is imported, as JAX fills in its array methods and autograd its
    VJPs. Reading a name not registered yet raises AttributeError saying who registers
    it; registering a name twice with different objects raises RuntimeError.
    """

    def __init__(self, owner: str, registrar: str) -> None:
        self.__dict__["_about"] = (owner, registrar)

    def __getattr__(self, name: str) -> Any:
        owner, registrar = self.__dict__["_about"]
        raise AttributeError(
            f"{owner}: {name!r} is not registered yet (import hodiff: {registrar} registers it)"
        )

    def register(self, **values: Any) -> None:
        """Registers each name (keyword) as its value."""
        owner = self.__dict__["_about"][0]
        for name, value in values.items():
            current = self.__dict__.get(name)
            if current is not None and current is not value:
                raise RuntimeError(f"{owner}: {name!r} is already registered ({current!r})")
            self.__dict__[name] = value


#: what Variable's methods call: the engine registers the passes (``forward`` from
#: ``hodiff.engine.run``, ``backward`` from ``hodiff.engine.reverse``) and the record of shape
#: changes (``reset_shape``, ``hodiff.engine.follow``); ``hodiff.functions`` the
#: functions behind the operators and numpy-style methods (``x + y`` is ``Add2()(x, y)``,
#: ``x @ w`` is ``matmul``, ``x[i]`` is ``getitem``, ``x.sum()`` is ``sum``)
methods: Any = Registry("Variable", "hodiff.engine / hodiff.functions")
register = methods.register
