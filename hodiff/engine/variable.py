"""``Variable``: a value, its gradient, ``need_grad`` and the node that made it."""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from hodiff.engine.context import array_module, get_default_context

if TYPE_CHECKING:
    from hodiff.engine.function import Function

__all__ = ["Variable", "as_variable", "is_scalar"]


_SCALARS = (int, float, np.floating, np.integer, np.bool_)

#: the one clock of the engine: node numbers (``Function.seq``, taken when a node is linked),
#: the times of forward passes (``Function._computed``) and of user writes
#: (``Variable._version``) are all read from it. It lives here, below hodiff/function.py,
#: which keeps an alias for its hot path.
_seq = itertools.count(1)
#: the clock time of the last user write of a value (``.d = ...``); 0 for none yet
_last_write = [0]
#: how many times any leaf's shape was reset (:meth:`Variable.reset_shape`); 0 for never, so a
#: static graph re-run checks shapes only in a process that resets them
_reshapes = [0]


class ShapeResetError(ValueError):
    """A node of a graph cannot follow a leaf's new shape (:meth:`Variable.reset_shape`)."""


#: the shape changes a variable remembers (:attr:`Variable._shape_history`): a node made
#: before them that has not run since cannot follow (it raises ShapeResetError)
SHAPE_HISTORY = 32


def record_shape_change(v: Variable, t: int, before: tuple[int, ...]) -> None:
    """Notes that ``v`` changed shape at clock time ``t``, from ``before``; keeps the last
    :data:`SHAPE_HISTORY` changes and, in place of the older ones, ``(t', None)`` with
    ``t'`` the time of the last one dropped (a loop that resets shapes forever keeps a
    bounded record). A node that follows writes the shapes it follows for, and reads the
    record no more.
    """
    history = getattr(v, "_shape_history", None)
    if history is None:
        history = v._shape_history = []
    history.append((t, before))
    if len(history) > SHAPE_HISTORY + 1:
        drop = len(history) - SHAPE_HISTORY
        history[:drop] = [(history[drop - 1][0], None)]


class _Freed:
    """The ``_grad`` of an intermediate variable whose gradient a reverse pass used and freed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<freed gradient>"


#: marks the gradient of an intermediate variable freed by ``.backward()`` (no retain_grad)
FREED: Any = _Freed()


def is_scalar(value: Any) -> bool:
    """True for Python and numpy real scalars (not arrays, not Variables)."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, Variable) or hasattr(value, "shape"):
        return False
    return isinstance(value, numbers.Real)  # other registered real types (slow ABC check)


def _squeeze_leading(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading axes of size 1."""
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


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

    __slots__ = (
        "__weakref__",
        "_data",
        "_dtype",
        "_grad",
        "_shape",
        "_shape_history",
        "_trace",
        "_version",
        "need_grad",
        "parent",
    )
    #: the clock time of the last user write of the value (the ``.d`` setter); unset (read
    #: it with ``getattr(v, "_version", 0)``) for never, so that making a Variable costs
    #: nothing more. Engine writes (a forward pass) do not set it.
    _version: int
    #: ``[(clock time, shape before), ...]``, one entry per shape change of this variable
    #: (:meth:`reset_shape`, or a forward pass that followed it), the last
    #: :data:`SHAPE_HISTORY` of them (:func:`record_shape_change`); unset for never. A node
    #: linked at time ``s`` saw the shape before the first change after ``s``; a first entry
    #: ``(t, None)`` stands for the changes dropped, up to ``t`` (unknown before it).
    _shape_history: list[tuple[int, tuple[int, ...] | None]]
    #: the call that made this output in a static graph (``function.Trace``); unset for none
    _trace: Any

    def __init__(
        self, shape: tuple[int, ...] | int = (), need_grad: bool = False, dtype: Any = None
    ) -> None:
        self._shape = _check_shape(shape)
        self._dtype = np.dtype(dtype) if dtype is not None else get_default_context().dtype
        if need_grad and self._dtype.kind != "f":
            raise TypeError(_NOT_FLOAT.format(where="Variable", dtype=self._dtype))
        self._data: Any = None
        self._grad: Any = None
        self.need_grad = bool(need_grad)
        self.parent: Function | None = None

    @classmethod
    def from_array(cls, array: Any, need_grad: bool = False, copy: bool = True) -> Variable:
        """A leaf holding a COPY of a numpy/cupy array (or a Python scalar).

        As NNabla and ``torch.tensor``, later changes to the caller's array do
        not reach the Variable (nor a gradient computed from it). The copy
        costs one pass over the array; ``copy=False`` shares the caller's array
        instead (then the caller must not modify it while a graph uses it).
        Float and integer arrays and numpy scalars (``np.float64(1.0)``) keep
        their dtype. Python numbers and lists become what numpy makes of them
        (``float64``, ``int64``, ``bool``), in the context's array module: a
        Python ``2.0`` and ``[2.0]`` are both float64 (NumPy 2's rule; next to
        a float Variable in a function they take its dtype instead, see
        docs/pitfalls.md).

        Raises:
            TypeError: ``array`` is a Variable, or not real numbers, or
                ``need_grad=True`` for an integer or boolean array (a gradient
                needs a float dtype: ``a.astype(np.float64)``).
        """
        if isinstance(array, Variable):
            raise TypeError("Variable.from_array: got a Variable; use it directly or .unlinked()")
        if isinstance(array, bool | int | float) and not isinstance(array, np.generic):
            array = get_default_context().xp.asarray(array)
        elif array_module(array) is np:
            try:
                array = np.array(array, copy=True) if copy else np.asarray(array)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"Variable.from_array: cannot make an array of {type(array).__name__}"
                ) from e
        elif copy:  # cupy
            array = array.copy()
        if array.dtype.kind not in "fiub":
            raise TypeError(
                f"Variable.from_array: unsupported dtype {array.dtype} (real floats, ints, bools)"
            )
        if need_grad and array.dtype.kind != "f":
            raise TypeError(_NOT_FLOAT.format(where="Variable.from_array", dtype=array.dtype))
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
        """The value (numpy/cupy ndarray). An unfilled leaf reads as zeros.

        Raises:
            RuntimeError: for a function's output that has no value: its static
                graph was not run yet, or ``clear_buffer=True`` freed it.
        """
        if self._data is None:
            read = _impl.__dict__.get("unfilled_read")  # hd.jit: a read while recording raises
            if read is not None:
                read(self)
            if self.parent is not None:
                raise RuntimeError(f"Variable.d: {_no_value(self)}")
            self._data = get_default_context().xp.zeros(self._shape, dtype=self._dtype)
        return self._data

    @d.setter
    def d(self, value: Any) -> None:
        """Sets the value to a copy of ``value`` (cast to this Variable's dtype).

        A scalar fills every element. The shape is fixed: a graph built on this
        Variable was set up for it (a mean divides by it), so a value of
        another shape raises ValueError instead of giving stale results; one that
        differs only by leading axes of size 1 (``(1, 6)`` for ``(6,)``, or the
        reverse) holds the same elements in the same order and is reshaped, as
        NNabla's ``d[...] = value`` does.

        It also marks the value as changed (also when ``value`` is the array
        itself, as ``x.d *= 10`` does): a reverse pass through nodes computed
        with the old value raises RuntimeError until ``forward()`` recomputes
        them (writes into the array, ``x.d[0] = 5``, are not seen).
        """
        if isinstance(value, Variable):
            value = value.d
        if value is None:
            raise TypeError(
                f"Variable.d: cannot set None on a Variable of shape {self._shape} "
                "(set an array, or .zero_grad() for the gradient)"
            )
        xp = array_module(value)
        try:
            value = xp.array(value, dtype=self._dtype, copy=True)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"Variable.d: cannot make a {self._dtype} array of {type(value).__name__}"
            ) from e
        if value.shape != self._shape:
            if _squeeze_leading(value.shape) == _squeeze_leading(self._shape):
                # NNabla's d[...] = value: the same elements with leading 1-axes added or dropped
                value = value.reshape(self._shape)
            elif value.ndim != 0:
                raise ValueError(
                    f"Variable.d: a value of shape {value.shape} for a Variable of shape "
                    f"{self._shape}; .d keeps the shape (graphs built on it were set up for "
                    "it): call reset_shape(shape, force=True) first to carry a graph to the "
                    "new shape, or make a new Variable"
                )
            value = xp.full(self._shape, value, dtype=self._dtype)
        self._data = value
        # a user write: the nodes that computed with the old value are stale (graph.check_values)
        self._version = _last_write[0] = next(_seq)

    data = d

    @property
    def g(self) -> Any:
        """The gradient, same shape and dtype as :attr:`d`; zeros until a backward writes it.

        Raises:
            RuntimeError: this is an intermediate variable (a function's output)
                whose gradient ``.backward()`` used and freed: pass
                ``retain_grad=True`` to keep it.
        """
        grad = self._grad
        if grad is None:
            xp = array_module(self._data) if self._data is not None else get_default_context().xp
            grad = self._grad = xp.zeros(self.shape, dtype=self._grad_dtype())
        elif grad is FREED:
            name = self.parent.name if self.parent is not None else "a function"
            raise RuntimeError(
                f"Variable.g: this output of {name} (shape {self._shape}) is an intermediate "
                "variable: .backward() freed its gradient once used; call "
                ".backward(retain_grad=True) to keep intermediate gradients (or set .g, or "
                ".zero_grad(), to use .g as a buffer)"
            )
        return grad

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
            if value.ndim != 0:
                raise ValueError(
                    f"Variable.g: a gradient of shape {value.shape} for a Variable of shape "
                    f"{self._shape} (a scalar fills it; an array must have the same shape)"
                )
            value = xp.full(self.shape, value, dtype=self._grad_dtype())
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

    def __bool__(self) -> bool:
        """As numpy: the truth of the value for a single element, ValueError for more."""
        if self.size != 1:
            raise ValueError(
                f"The truth value of a Variable of shape {self._shape} is ambiguous "
                "(use F.sum, or .d.any() / .d.all())"
            )
        return bool(self.d)

    def __float__(self) -> float:
        """As numpy: the value of a one-element Variable as a Python float."""
        return float(self.item())

    def __copy__(self) -> Variable:
        if self.parent is not None:
            raise TypeError(_NO_COPY.format(how="copy.copy", name=self.parent.name))
        return self.unlinked()

    def __deepcopy__(self, memo: dict[int, Any]) -> Variable:
        """An independent leaf with copies of the value and gradient (leaves only).

        Raises:
            TypeError: for a function's output: a copied graph would not lead to
                the original leaves, so its gradients would silently be lost.
        """
        if self.parent is not None:
            raise TypeError(_NO_COPY.format(how="copy.deepcopy", name=self.parent.name))
        v = self.unlinked()
        if v._data is not None:
            v._data = v._data.copy()
        if self._grad is not None:
            v._grad = self._grad.copy()
        memo[id(self)] = v
        return v

    def __getstate__(self) -> Any:
        """The slots' state, as pickle's default, without ``_version`` (a time on this
        process's clock, meaningless in another one).
        """
        slots = {}
        for c in type(self).__mro__:
            for k in c.__dict__.get("__slots__", ()):
                if k not in ("__weakref__", "_version") and hasattr(self, k):
                    slots[k] = getattr(self, k)
        return None, slots

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
        """The value (as numpy prints it), shape, dtype, ``need_grad`` and what made it.

        >>> import numpy as np, hodiff as hd
        >>> hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
        Variable([1., 2.], shape=(2,), dtype=float64, need_grad=True)
        """
        data = self._data
        if data is None:
            value = "<no value>" if self.parent is not None else "<unfilled>"
        else:
            if array_module(data) is not np:
                data = data.get()  # cupy: printed from a host copy
            value = np.array2string(data, separator=", ", prefix="Variable(", threshold=20)
        made = "" if self.parent is None else f", parent={self.parent.name}"
        return (
            f"Variable({value}, shape={self._shape}, dtype={self._dtype}, "
            f"need_grad={self.need_grad}{made})"
        )

    def item(self) -> Any:
        """The value of a one-element Variable as a Python number (numpy's ``item``).

        Raises:
            ValueError: the Variable has more than one element (or none).
        """
        if self.size != 1:
            raise ValueError(
                f"Variable.item: only a Variable of one element has an item, this one has shape "
                f"{self._shape} (use .numpy() or .d for the array)"
            )
        return self.d.item()

    def numpy(self) -> np.ndarray:
        """A numpy COPY of the value (a cupy value is copied to the host).

        Writing into it changes nothing in the Variable (``.d`` is the array
        itself). Not differentiable: the result is an array, not a Variable.
        """
        d = self.d
        return d.get() if array_module(d) is not np else d.copy()

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
            if b is self and not isinstance(a, Variable):  # ndarray * v: the common case
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

    # ------------------------------------------------------------ graph
    def forward(self, clear_buffer: bool = False) -> None:
        """(Re)computes every node this variable depends on from the leaves' values.

        With ``clear_buffer=True`` intermediate values that no backward rule
        needs are freed as soon as their last consumer has run.
        """
        _impl.forward([self], clear_buffer=clear_buffer)

    def backward(
        self, grad: Any = None, clear_buffer: bool = False, *, retain_grad: bool = False
    ) -> None:
        """Reverse pass from this variable; ACCUMULATES into ``.g`` of every leaf with need_grad.

        Intermediate gradients are freed as soon as they are consumed, so after
        the pass ``.g`` of a non-leaf variable is whatever it was before (None
        unless set), as in PyTorch; ``retain_grad=True`` stores each
        intermediate variable's gradient (and this variable's seed) in its
        ``.g``, overwritten by every pass: what NNabla does by default. Leaves
        are not affected: their gradients always accumulate.

        Args:
            grad: gradient of some scalar with respect to this variable; defaults
                to ones of this variable's shape (any shape).
            clear_buffer: free intermediate values as soon as the reverse pass no
                longer needs them (another backward or ``hd.grad`` through the
                graph then raises RuntimeError until ``forward()`` recomputes them).
            retain_grad: keep every intermediate gradient in ``.g`` (costs
                memory: one array per intermediate variable, alive with the graph).

        Raises:
            RuntimeError: the graph was never run (static mode: call ``forward()``),
                a value it needs was freed, or this Variable has no graph and
                ``need_grad=False`` (e.g. it was computed under ``hd.no_grad()``).
        """
        _impl.backward(self, grad, clear_buffer, retain_grad)

    def reset_shape(self, shape: Any, force: bool = False) -> None:
        """Gives this leaf a new shape, as NNabla's ``reset_shape``: a static graph follows it.

        The next ``.forward()`` of any graph built on this leaf infers every node's
        output shapes again from the new input shapes (setup runs again, with its
        checks), then computes; a new batch size on one static graph is the usual
        use. A composition that computes from shapes (a public function of
        ``hodiff.functions`` that does, or ``hd.grad`` in a static graph) is made again
        on the new shapes. A node that cannot follow raises :class:`ShapeResetError` (a
        ValueError) before any value is computed, naming it: one that holds a number
        computed from the old shapes (a shape given as an argument that does not carry
        over, such as ``F.broadcast``'s; ``F.reshape`` follows a new leading size, a
        ``-1`` or merged axes), or whose inputs change rank when it does not follow a
        rank (elementwise functions do). Build that part again for the new shape.

        The value is kept (reshaped) when the number of elements is the same and
        dropped (reads as zeros) otherwise; the gradient is dropped.

        Args:
            shape: the new shape (a tuple of ints, or an int).
            force: allow a different number of elements (NNabla's flag); without it a
                new size raises ValueError.

        Raises:
            ValueError: this Variable is not a leaf (its shape follows its inputs'), or
                the size changes without ``force=True``.
        """
        new = _check_shape(shape)
        old = self._shape
        if self.parent is not None:
            raise ValueError(
                f"Variable.reset_shape: this Variable (shape {old}) is the output of "
                f"{self.parent.name}; only a leaf's shape can be reset (the outputs follow "
                "at the next .forward())"
            )
        same_size = math.prod(new) == math.prod(old)
        if not same_size and not force:
            raise ValueError(
                f"Variable.reset_shape: shape {new} has {math.prod(new)} elements, the "
                f"Variable's shape {old} has {math.prod(old)}; pass force=True to change "
                "the size (the value is then dropped)"
            )
        if new == old:
            return
        t = next(_seq)
        record_shape_change(self, t, old)
        self._data = self._data.reshape(new) if same_size and self._data is not None else None
        self._shape = new
        self._grad = None
        self._version = _last_write[0] = t
        _reshapes[0] += 1

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
    # The hot operators try the exact types first: a Python float/int, then a Variable.
    def __add__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return _impl.AddScalar(val=other)(self)
        if t is Variable:
            return _impl.Add2()(self, other)
        if is_scalar(other):
            return _impl.add_scalar(self, other)
        return _impl.add2(self, other)

    def __radd__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return _impl.AddScalar(val=other)(self)
        if is_scalar(other):
            return _impl.add_scalar(self, other)
        return _impl.add2(other, self)

    def __sub__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return _impl.AddScalar(val=-other)(self)
        if t is Variable:
            return _impl.Sub2()(self, other)
        if is_scalar(other):
            return _impl.add_scalar(self, -other)
        return _impl.sub2(self, other)

    def __rsub__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _impl.r_sub_scalar(self, other)
        return _impl.sub2(other, self)

    def __mul__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return _impl.MulScalar(val=other)(self)
        if t is Variable:
            return _impl.Mul2()(self, other)
        if is_scalar(other):
            return _impl.mul_scalar(self, other)
        return _impl.mul2(self, other)

    def __rmul__(self, other: Any) -> Variable:
        t = type(other)
        if t is float or t is int:
            return _impl.MulScalar(val=other)(self)
        if is_scalar(other):
            return _impl.mul_scalar(self, other)
        return _impl.mul2(other, self)

    def __truediv__(self, other: Any) -> Variable:
        if is_scalar(other):
            if other == 0:  # numpy's x / 0: inf, -inf or nan (not ZeroDivisionError)
                return _impl.div2(self, other)
            return _impl.mul_scalar(self, 1.0 / other)
        return _impl.div2(self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _impl.r_div_scalar(self, other)
        return _impl.div2(other, self)

    def __pow__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _impl.pow_scalar(self, other)
        return _impl.pow2(self, other)

    def __rpow__(self, other: Any) -> Variable:
        if is_scalar(other):
            return _impl.r_pow_scalar(self, other)
        return _impl.pow2(other, self)

    def __matmul__(self, other: Any) -> Variable:
        return _impl.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Variable:
        return _impl.matmul(other, self)

    def __neg__(self) -> Variable:
        return _impl.MulScalar(val=-1.0)(self)

    def __pos__(self) -> Variable:
        return self

    def __abs__(self) -> Variable:
        return _impl.abs(self)

    def __getitem__(self, key: Any) -> Variable:
        return _impl.getitem(self, key)

    def __lt__(self, other: Any) -> Variable:
        return _impl.less(self, other)

    def __gt__(self, other: Any) -> Variable:
        return _impl.greater(self, other)

    def __le__(self, other: Any) -> Variable:
        return _impl.less_equal(self, other)

    def __ge__(self, other: Any) -> Variable:
        return _impl.greater_equal(self, other)

    # == stays object identity (not defined here): Variables are dict keys and set members

    # ------------------------------------------------------------ numpy-style methods
    # thin wrappers over hodiff.functions (F), registered by it
    @property
    def T(self) -> Variable:  # noqa: N802
        """The axes reversed: ``F.transpose(self)``."""
        return _impl.transpose(self)

    def reshape(self, *shape: Any) -> Variable:
        """``F.reshape(self, shape)``; ``shape`` as a tuple or as separate ints."""
        return _impl.reshape(
            self, shape[0] if len(shape) == 1 and not is_scalar(shape[0]) else shape
        )

    def transpose(self, *axes: Any) -> Variable:
        """``F.transpose(self, axes)``; no axes reverse them, as numpy."""
        if len(axes) == 1 and (axes[0] is None or not is_scalar(axes[0])):
            axes = axes[0]
        return _impl.transpose(self, axes or None)

    def flatten(self) -> Variable:
        """``F.reshape(self, (-1,))``: a 1-D copy, as numpy's ``flatten``."""
        return _impl.reshape(self, (-1,))

    def squeeze(self, axis: Any = None) -> Variable:
        """``F.squeeze(self, axis)``."""
        return _impl.squeeze(self, axis)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.sum(self, axis, keepdims)``."""
        return _impl.sum(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.mean(self, axis, keepdims)``."""
        return _impl.mean(self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.max(self, axis, keepdims)``."""
        return _impl.max(self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.min(self, axis, keepdims)``."""
        return _impl.min(self, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """``F.prod(self, axis, keepdims)``."""
        return _impl.prod(self, axis, keepdims)

    def astype(self, dtype: Any) -> Variable:
        """``F.astype(self, dtype)``."""
        return _impl.astype(self, dtype)


_NOT_FLOAT = (
    "{where}: need_grad=True for dtype {dtype}: only float Variables have gradients (as "
    "PyTorch); make it a float array first (e.g. a.astype(np.float64))"
)

#: numpy's operator ufuncs -> (the Variable method, the reflected one; none for unary ones),
#: so that ``ndarray * v`` and ``np.float32(2) * v`` run the Variable's operators
_OPERATORS: dict[str, tuple[str, str]] = {
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

#: numpy names whose hodiff function has another name (for the error of np.arctan(v))
_NUMPY_ALIASES = {
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


def _numpy_refused(what: str, name: str, args: Any) -> str:
    """The message for a numpy function applied to a Variable: which hodiff function to use."""
    known = _impl.__dict__.get("function_names", frozenset())
    hodiff_name = _NUMPY_ALIASES.get(name, name)
    if hodiff_name in known:
        use = f"use F.{hodiff_name} (import hodiff.functions as F), which is differentiable"
    else:
        use = f"hodiff.functions has no {name}: compose it from F functions"
    got = ", ".join(
        f"Variable {a.shape} {a.dtype}" if isinstance(a, Variable) else type(a).__name__
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
        same = inputs[0] is inputs[1]  # ``array == v``: identity, as ``v == array``
        return same if name == "equal" else not same
    ops = _OPERATORS.get(name) if method == "__call__" and not kwargs else None
    if ops is not None and (len(inputs) == 1) == (not ops[1]):
        if len(inputs) == 1:
            return getattr(inputs[0], ops[0])()
        a, b = inputs
        if isinstance(a, Variable):
            return getattr(a, ops[0])(b)
        return getattr(b, ops[1])(a)
    raise TypeError(_numpy_refused(f"numpy.{name}", name, inputs))


#: numpy's binary operator ufuncs -> the Variable's reflected operator (``ndarray * v``)
_REFLECTED: dict[Any, Any] = {
    getattr(np, name): getattr(Variable, reflected)
    for name, (_, reflected) in _OPERATORS.items()
    if reflected
}


_NO_COPY = (
    "{how}: this Variable is the output of {name}; a copy of its graph would not lead to the "
    "original leaves (their gradients would silently stay zero). Copy leaves, use .unlinked() "
    "for the value, or build the graph again"
)


def _no_value(v: Variable) -> str:
    """Why a function's output has no value (for error messages)."""
    name = v.parent.name if v.parent is not None else "a leaf"
    return (
        f"the output of {name} (shape {v._shape}) has no value: its static graph was not run "
        "yet, or clear_buffer=True freed it; call .forward() on the result first"
    )


def _check_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or a TypeError/ValueError saying why not."""
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    elif type(shape) is not tuple and (
        hasattr(shape, "shape") or isinstance(shape, float | np.floating | bool)
    ):
        # hd.Variable(np.array([3., 4.])): the torch.tensor habit, not a shape
        raise TypeError(
            f"Variable: the first argument is the shape of an unfilled Variable, got "
            f"{_describe(shape)}; to make a Variable holding values use "
            "hd.Variable.from_array(array, need_grad=...)"
        )
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(
            f"Variable: shape must be an int or a sequence of ints, got {type(shape).__name__}"
        ) from None
    for s in dims:
        if isinstance(s, bool) or not isinstance(s, int | np.integer):
            raise TypeError(
                f"Variable: shape {dims} must hold ints, got {type(s).__name__} (to make a "
                "Variable holding values use hd.Variable.from_array(array))"
            )
        if s < 0:
            raise ValueError(f"Variable: shape {dims} has a negative size")
    return tuple(int(s) for s in dims)


def _describe(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"a {type(value).__name__}"


def as_variable(value: Any) -> Variable:
    """``value`` if it is a Variable, else a constant leaf wrapping it."""
    if isinstance(value, Variable):
        return value
    return Variable.from_array(value)


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


#: what Variable's methods call: ``hodiff.engine.graph`` registers the passes (``forward``,
#: ``backward``), ``hodiff.functions`` the functions behind the operators and numpy-style
#: methods (``x + y`` is ``Add2()(x, y)``, ``x @ w`` is ``matmul``, ``x[i]`` is ``getitem``,
#: ``x.sum()`` is ``sum``)
_impl: Any = Registry("Variable", "hodiff.engine.graph / hodiff.functions")
register = _impl.register
