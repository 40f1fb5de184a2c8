"""``Variable``: a value, its gradient, ``need_grad`` and the node that made it."""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from hodiff.context import array_module, get_default_context

if TYPE_CHECKING:
    from hodiff.function import Function

__all__ = ["Variable", "as_variable", "is_scalar"]


_SCALARS = (int, float, np.floating, np.integer, np.bool_)


def is_scalar(value: Any) -> bool:
    """True for Python and numpy real scalars (not arrays, not Variables)."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, Variable) or hasattr(value, "shape"):
        return False
    return isinstance(value, numbers.Real)  # other registered real types (slow ABC check)


class Variable:
    """A node of the graph holding an array ``d`` and its gradient ``g``.

    Args:
        shape: shape of the (unfilled) value.
        need_grad: whether a reverse pass computes this variable's gradient.
            A leaf with ``need_grad=False`` cuts the graph.
        dtype: float dtype; defaults to the context's.

    A leaf is made by hand (``Variable(shape)`` or :meth:`from_array`); every
    other Variable is the output of a function node, its :attr:`parent`.

    >>> import numpy as np
    >>> import hodiff as hd
    >>> x = hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
    >>> y = x * x
    >>> y.backward()
    >>> x.g
    array([2., 4.])
    """

    __slots__ = ("__weakref__", "_data", "_dtype", "_grad", "_shape", "need_grad", "parent")

    # numpy defers to our reflected operators: ndarray * Variable -> Variable.
    __array_ufunc__ = None

    def __init__(
        self, shape: tuple[int, ...] | int = (), need_grad: bool = False, dtype: Any = None
    ) -> None:
        self._shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        self._dtype = np.dtype(dtype) if dtype is not None else get_default_context().dtype
        self._data: Any = None
        self._grad: Any = None
        self.need_grad = bool(need_grad)
        self.parent: Function | None = None

    @classmethod
    def from_array(cls, array: Any, need_grad: bool = False) -> Variable:
        """Wraps a numpy/cupy array (kept as is, no copy) or a Python scalar.

        Float and integer arrays keep their dtype; Python scalars take the
        context's float dtype.
        """
        if isinstance(array, Variable):
            raise TypeError("Variable.from_array: got a Variable; use it directly or .unlinked()")
        if isinstance(array, bool | int | float):
            ctx = get_default_context()
            array = ctx.xp.asarray(array, dtype=ctx.dtype)
        elif array_module(array) is np:
            try:
                array = np.asarray(array)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"Variable.from_array: cannot make an array of {type(array).__name__}"
                ) from e
        if array.dtype.kind not in "fiub":
            raise TypeError(
                f"Variable.from_array: unsupported dtype {array.dtype} (real floats, ints, bools)"
            )
        v = cls.__new__(cls)
        v._data = array
        v._shape = tuple(array.shape)
        v._dtype = array.dtype
        v._grad = None
        v.need_grad = bool(need_grad)
        v.parent = None
        return v

    # ------------------------------------------------------------------ value
    @property
    def d(self) -> Any:
        """The value (numpy/cupy ndarray). Unfilled variables read as zeros."""
        if self._data is None:
            self._data = get_default_context().xp.zeros(self._shape, dtype=self._dtype)
        return self._data

    @d.setter
    def d(self, value: Any) -> None:
        if isinstance(value, Variable):
            value = value.d
        xp = array_module(value)
        if xp is np and not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=self._dtype)
        elif value.dtype != self._dtype:
            value = value.astype(self._dtype)
        self._data = value
        self._shape = tuple(value.shape)

    data = d

    @property
    def g(self) -> Any:
        """The gradient, same shape and dtype as :attr:`d`; zeros until a backward writes it."""
        if self._grad is None:
            xp = array_module(self._data) if self._data is not None else get_default_context().xp
            self._grad = xp.zeros(self.shape, dtype=self._grad_dtype())
        return self._grad

    @g.setter
    def g(self, value: Any) -> None:
        if isinstance(value, Variable):
            value = value.d
        if value is None:
            self._grad = None
            return
        xp = array_module(self._data) if self._data is not None else array_module(value)
        value = xp.array(value, dtype=self._grad_dtype(), copy=True)  # we add into it in place
        if value.shape != self.shape:
            value = xp.broadcast_to(value, self.shape).copy()
        self._grad = value

    grad = g

    def _grad_dtype(self) -> Any:
        return self._dtype if self._dtype.kind == "f" else get_default_context().dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the value (known before it is computed in static graphs)."""
        return self._shape

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def dtype(self) -> Any:
        """numpy dtype of the value."""
        return self._dtype

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d Variable")
        return self._shape[0]

    def __iter__(self) -> Iterator[Variable]:
        """The sub-Variables along the first axis (``x[0], x[1], ...``), each differentiable."""
        if not self._shape:
            raise TypeError("iteration over a 0-d Variable")
        for i in range(self._shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        kind = "leaf" if self.parent is None else type(self.parent).__name__
        return (
            f"Variable(shape={self._shape}, dtype={self._dtype}, need_grad={self.need_grad},"
            f" {kind})"
        )

    # ------------------------------------------------------------ graph
    def forward(self, clear_buffer: bool = False) -> None:
        """(Re)computes every node this variable depends on from the leaves' values.

        With ``clear_buffer=True`` intermediate values that no backward rule
        needs are freed as soon as their last consumer has run.
        """
        from hodiff import graph

        graph.forward([self], clear_buffer=clear_buffer)

    def backward(self, grad: Any = None, clear_buffer: bool = False) -> None:
        """Reverse pass from this variable; ACCUMULATES into ``.g`` of every leaf with need_grad.

        Args:
            grad: gradient of some scalar with respect to this variable; defaults
                to ones of this variable's shape (any shape).
            clear_buffer: free intermediate gradients and values as soon as they
                are no longer needed (the graph cannot be run backward again).
        """
        from hodiff import graph

        for _ in graph.backward(self, grad, clear_buffer=clear_buffer):
            pass

    def zero_grad(self) -> None:
        """Sets ``.g`` to zeros (lazily: the buffer is dropped and re-made on read or write)."""
        self._grad = None

    def unlinked(self, need_grad: bool | None = None) -> Variable:
        """A new leaf sharing this variable's value, with no parent (detach).

        Args:
            need_grad: of the new leaf; by default this variable's flag (as NNabla).
        """
        v = Variable.__new__(Variable)
        v._data = self._data
        v._shape = self._shape
        v._dtype = self._dtype
        v._grad = None
        v.need_grad = self.need_grad if need_grad is None else bool(need_grad)
        v.parent = None
        return v

    def apply(self, **attrs: Any) -> Variable:
        """Sets attributes (``d``, ``g``, ``need_grad``, ...) and returns self."""
        for name, value in attrs.items():
            if name not in ("d", "data", "g", "grad", "need_grad"):
                raise AttributeError(f"Variable.apply: cannot set {name!r}")
            setattr(self, name, value)
        return self

    # ------------------------------------------------------------ operators
    def __add__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.add_scalar(self, other)
        return _A.add2(self, other)

    def __radd__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.add_scalar(self, other)
        return _A.add2(other, self)

    def __sub__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.add_scalar(self, -other)
        return _A.sub2(self, other)

    def __rsub__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.r_sub_scalar(self, other)
        return _A.sub2(other, self)

    def __mul__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.mul_scalar(self, other)
        return _A.mul2(self, other)

    def __rmul__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.mul_scalar(self, other)
        return _A.mul2(other, self)

    def __truediv__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.mul_scalar(self, 1.0 / other)
        return _A.div2(self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.r_div_scalar(self, other)
        return _A.div2(other, self)

    def __pow__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.pow_scalar(self, other)
        return _A.pow2(self, other)

    def __rpow__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _A.r_pow_scalar(self, other)
        return _A.pow2(other, self)

    def __matmul__(self, other: Any) -> Variable:
        from hodiff.functions import linalg

        return linalg.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Variable:
        from hodiff.functions import linalg

        return linalg.matmul(other, self)

    def __neg__(self) -> Variable:
        return _A.mul_scalar(self, -1.0)

    def __pos__(self) -> Variable:
        return self

    def __abs__(self) -> Variable:
        return _A.abs(self)

    def __getitem__(self, key: Any) -> Variable:
        from hodiff.functions import array

        return array.getitem(self, key)

    def __lt__(self, other: Any) -> Variable:
        from hodiff.functions import array

        return array.less(self, other)

    def __gt__(self, other: Any) -> Variable:
        from hodiff.functions import array

        return array.greater(self, other)

    # ------------------------------------------------------------ numpy-style methods
    # thin wrappers over hodiff.functions (F), which is imported on first use
    @property
    def T(self) -> Variable:  # noqa: N802
        """The axes reversed: ``F.transpose(self)``."""
        return _F().transpose(self)

    def reshape(self, *shape: Any) -> Variable:
        """``F.reshape(self, shape)``; ``shape`` as a tuple or as separate ints."""
        return _F().reshape(self, shape[0] if len(shape) == 1 and not is_scalar(shape[0])
                            else shape)

    def transpose(self, *axes: Any) -> Variable:
        """``F.transpose(self, axes)``; no axes reverse them, as numpy."""
        if len(axes) == 1 and (axes[0] is None or not is_scalar(axes[0])):
            axes = axes[0]
        return _F().transpose(self, axes or None)

    def flatten(self) -> Variable:
        """``F.reshape(self, (-1,))``: a 1-D copy, as numpy's ``flatten``."""
        return _F().reshape(self, (-1,))

    def squeeze(self, axis: Any = None) -> Variable:
        """``F.squeeze(self, axis)``."""
        return _F().squeeze(self, axis)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.sum(self, axis, keepdims)``."""
        return _F().sum(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.mean(self, axis, keepdims)``."""
        return _F().mean(self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.max(self, axis, keepdims)``."""
        return _F().max(self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.min(self, axis, keepdims)``."""
        return _F().min(self, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.prod(self, axis, keepdims)``."""
        return _F().prod(self, axis, keepdims)

    def astype(self, dtype: Any) -> Variable:
        """``F.astype(self, dtype)``."""
        return _F().astype(self, dtype)


def as_variable(value: Any) -> Variable:
    """``value`` if it is a Variable, else a constant leaf wrapping it."""
    if isinstance(value, Variable):
        return value
    return Variable.from_array(value)


class _Arithmetic:
    """The arithmetic module, imported on first use (it imports this module)."""

    def __getattr__(self, name: str) -> Any:
        from hodiff.functions import arithmetic

        globals()["_A"] = arithmetic
        return getattr(arithmetic, name)


_A: Any = _Arithmetic()


def _F() -> Any:  # noqa: N802
    """``hodiff.functions`` (imported on first use: it imports this module)."""
    import hodiff.functions

    return hodiff.functions
