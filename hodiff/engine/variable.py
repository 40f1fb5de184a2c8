"""``Variable``: a value, its gradient, ``need_grad`` and the node that made it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from hodiff.engine.array_methods import ArrayMethods
from hodiff.engine.array_methods import is_scalar as is_scalar
from hodiff.engine.array_methods import methods as _impl
from hodiff.engine.array_methods import register as register
from hodiff.engine.clock import CLOCK
from hodiff.engine.context import array_module, get_default_context

if TYPE_CHECKING:
    from hodiff.engine.function import Function

__all__ = ["Variable", "as_variable", "is_scalar"]


#: the clock's times (an alias for the hot paths; see :mod:`hodiff.engine.clock`)
ticks = CLOCK.ticks


class ShapeResetError(ValueError):
    """A node of a graph cannot follow a leaf's new shape (:meth:`Variable.reset_shape`)."""


#: the shape changes a variable remembers (``hodiff.engine.follow``): a node made before
#: them that has not run since cannot follow (it raises ShapeResetError)
SHAPE_HISTORY = 32


class _Freed:
    """The ``_grad`` of an intermediate variable whose gradient a reverse pass used and freed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<freed gradient>"


#: marks the gradient of an intermediate variable freed by ``.backward()`` (no retain_grad)
FREED: Any = _Freed()


def _squeeze_leading(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading axes of size 1."""
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


class Variable(ArrayMethods):
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
        "_trace",
        "_version",
        "need_grad",
        "parent",
    )
    #: the clock time of the last user write of the value (the ``.d`` setter); unset (read
    #: it with ``getattr(v, "_version", 0)``) for never, so that making a Variable costs
    #: nothing more. Engine writes (a forward pass) do not set it.
    _version: int
    #: the call that made this output in a static graph (``function.Trace``); unset for none
    _trace: Any

    def __init__(
        self, shape: tuple[int, ...] | int = (), need_grad: bool = False, dtype: Any = None
    ) -> None:
        self._shape = check_shape(shape)
        self._dtype = np.dtype(dtype) if dtype is not None else get_default_context().dtype
        if need_grad and self._dtype.kind not in "fc":
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
        if isinstance(array, bool | int | float | complex) and not isinstance(array, np.generic):
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
        if array.dtype.kind not in "fciub":
            raise TypeError(
                f"Variable.from_array: unsupported dtype {array.dtype} (floats, complex, ints, "
                "bools)"
            )
        if need_grad and array.dtype.kind not in "fc":
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
                raise RuntimeError(f"Variable.d: {no_value(self)}")
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
        # a user write: the nodes that computed with the old value are stale (checks.py)
        self._version = CLOCK.wrote()

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
        return self._dtype if self._dtype.kind in "fc" else get_default_context().dtype

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
        process's clock, meaningless in another one). A leaf only, as ``copy.copy``.
        """
        if self.parent is not None:
            raise TypeError(_NO_COPY.format(how="pickle", name=self.parent.name))
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

    # ------------------------------------------------------------ graph
    def forward(self, clear_buffer: bool = False, clear_no_need_grad: bool = False) -> None:
        """(Re)computes every node this variable depends on from the leaves' values.

        With ``clear_buffer=True`` intermediate values that no backward rule
        needs are freed as soon as their last consumer has run (NNabla's
        ``clear_no_need_grad=True`` is the same and accepted under its name).
        """
        _impl.forward([self], clear_buffer=clear_buffer or clear_no_need_grad)

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
        _impl.reset_shape(self, shape, force)  # hodiff.engine.follow

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


_NOT_FLOAT = (
    "{where}: need_grad=True for dtype {dtype}: only float and complex Variables have "
    "gradients (as PyTorch); make it a float array first (e.g. a.astype(np.float64))"
)

_NO_COPY = (
    "{how}: this Variable is the output of {name}; a copy of its graph would not lead to the "
    "original leaves (their gradients would silently stay zero). Copy leaves, use .unlinked() "
    "for the value, or build the graph again"
)


def no_value(v: Variable) -> str:
    """Why a function's output has no value (for error messages)."""
    name = v.parent.name if v.parent is not None else "a leaf"
    return (
        f"the output of {name} (shape {v._shape}) has no value: its static graph was not run "
        "yet, or clear_buffer=True freed it; call .forward() on the result first"
    )


def check_shape(shape: Any) -> tuple[int, ...]:
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
