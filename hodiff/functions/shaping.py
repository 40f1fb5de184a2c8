"""More array functions: axes, repetition, triangles and diagonals, scatter, constants, casts.

All of them but the casts and the constants are compositions of ``reshape``,
``transpose``, ``broadcast``, ``getitem``/``gather``, ``where`` and the
selection pair of :mod:`hodiff.grad_functions.selection`, so they need no
rule of their own. ``eye`` and ``arange`` are constants (no inputs, not
differentiable). ``astype`` to a float dtype is differentiable (the gradient
is cast back); to an integer or bool dtype it cuts the graph.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.arguments import array_module_of
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import get_default_context
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions.indexing import as_ints, normalize_axis, shape_of
from hodiff.grad_functions.selection import gather_nd as _gather_nd
from hodiff.grad_functions.selection import scatter_along_axis

__all__ = [
    "arange",
    "astype",
    "broadcast_to",
    "expand_dims",
    "eye",
    "gather_nd",
    "matrix_diag",
    "matrix_diag_part",
    "moveaxis",
    "repeat",
    "roll",
    "scatter_add",
    "squeeze",
    "swapaxes",
    "trilu",
]

Spec = list[tuple[tuple[int, ...], Any]]
_ALL = builtins.slice(None)


def _axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    axes = as_ints(name, "axis", (axis,) if isinstance(axis, int | np.integer) else axis)
    out = tuple(normalize_axis(name, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {axis}")
    return out


# ---------------------------------------------------------------- primitives
class Eye(Function, follows_shape=False):
    differentiable = False
    batch_rule = _batching.elementwise  # no inputs: never batched

    def __init__(self, *, n: int, m: int, k: int, dtype: Any) -> None:
        self.n, self.m, self.k = n, m, k
        self.dtype = np.dtype(dtype)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [((self.n, self.m), self.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = get_default_context().xp.eye(self.n, self.m, self.k, dtype=self.dtype)


class Arange(Function, follows_shape=False):
    differentiable = False
    batch_rule = _batching.elementwise  # no inputs

    def __init__(self, *, start: float, stop: float, step: float, dtype: Any) -> None:
        self.start, self.stop, self.step = start, stop, step
        self.dtype = np.dtype(dtype)
        self.size = builtins.max(0, math.ceil((stop - start) / step))

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [((self.size,), self.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = get_default_context().xp
        outputs[0] = (self.start + self.step * xp.arange(self.size)).astype(self.dtype)


class _Cast(Function, register=False, follows_shape=True, follows_rank=True):
    need_inputs = False
    batch_rule = _batching.elementwise

    def __init__(self, *, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [(inputs[0].shape, self.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0].astype(self.dtype)


class Cast(_Cast):
    """A cast between float dtypes: the gradient is cast back to the input's dtype."""

    taylor = "linear"

    def __init__(self, *, dtype: Any, source: Any) -> None:
        super().__init__(dtype=dtype)
        self.source = np.dtype(source)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        if inputs[0].dtype != self.source:
            raise TypeError(f"cast: x has dtype {inputs[0].dtype}, not {self.source}")
        return [(inputs[0].shape, self.dtype)]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = x in another precision: gx = gy in x's precision
        if prop_down[0]:
            inputs[0].store(astype(outputs[0].grad, self.source), accum[0])


class CastIndex(_Cast):
    """A cast to an integer or bool dtype: not differentiable."""

    differentiable = False


# ---------------------------------------------------------------- wrappers
@traced
def squeeze(x: Any, axis: Any = None) -> Variable:
    """``x`` without the axes of size 1 in ``axis`` (all of them when None), numpy's squeeze.

    >>> import numpy as np, hodiff.functions as F
    >>> F.squeeze(np.zeros((1, 3, 1)), axis=0).shape
    (3, 1)
    """
    shape = shape_of(x)
    axes = (
        tuple(i for i, s in enumerate(shape) if s == 1)
        if axis is None
        else _axes("squeeze", axis, len(shape))
    )
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} of x of shape {shape} has size {shape[a]}, not 1")
    # the Reshape node itself: Variable.squeeze follows new shapes by its node's own rule
    return _array.Reshape(shape=tuple(s for i, s in enumerate(shape) if i not in axes))(x)


@traced
def expand_dims(x: Any, axis: Any) -> Variable:
    """``x`` with new axes of size 1 at positions ``axis`` of the result (numpy's expand_dims).

    >>> import numpy as np, hodiff.functions as F
    >>> F.expand_dims(np.zeros((2, 3)), (0, -1)).shape
    (1, 2, 3, 1)
    """
    shape = shape_of(x)
    n = len(shape) + (1 if isinstance(axis, int | np.integer) else len(axis))
    axes = _axes("expand_dims", axis, n)
    it = iter(shape)
    return _array.reshape(x, tuple(1 if i in axes else next(it) for i in range(n)))


@traced
def moveaxis(x: Any, source: Any, destination: Any) -> Variable:
    """``x`` with axes ``source`` moved to positions ``destination`` (numpy's moveaxis).

    >>> import numpy as np, hodiff.functions as F
    >>> F.moveaxis(np.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    nd = len(shape_of(x))
    src = _axes("moveaxis", source, nd)
    dst = _axes("moveaxis", destination, nd)
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source {source} and destination {destination} differ in length"
        )
    order = [a for a in range(nd) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return _array.transpose(x, order)


@traced
def swapaxes(x: Any, axis1: int, axis2: int) -> Variable:
    """``x`` with axes ``axis1`` and ``axis2`` exchanged (numpy's swapaxes).

    >>> import numpy as np, hodiff.functions as F
    >>> F.swapaxes(np.zeros((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
    """
    nd = len(shape_of(x))
    a, b = normalize_axis("swapaxes", axis1, nd), normalize_axis("swapaxes", axis2, nd)
    order = list(range(nd))
    order[a], order[b] = b, a
    return _array.transpose(x, order)


@traced
def repeat(x: Any, repeats: Any, axis: int | None = None) -> Variable:
    """Each element repeated ``repeats`` times along ``axis`` (numpy's ``repeat``).

    ``axis=None`` flattens first. ``repeats`` is an int or one int per element of the axis.

    The gradient sums the copies back.

    >>> import numpy as np, hodiff.functions as F
    >>> F.repeat(np.array([[1.0, 2.0]]), 2, axis=1).d
    array([[1., 1., 2., 2.]])
    """
    if axis is None:
        x = _array.reshape(x, (-1,))
        axis = 0
    shape = shape_of(x)
    a = normalize_axis("repeat", axis, len(shape))
    if isinstance(repeats, int | np.integer):
        if repeats < 0:
            raise ValueError(f"repeat: repeats={repeats} must be >= 0")
        inter = (*shape[: a + 1], 1, *shape[a + 1 :])
        wide = (*shape[: a + 1], int(repeats), *shape[a + 1 :])
        y = _array.broadcast(_array.reshape(x, inter), wide)
        return _array.reshape(y, (*shape[:a], shape[a] * int(repeats), *shape[a + 1 :]))
    reps = np.asarray(repeats)
    if reps.shape != (shape[a],) or reps.dtype.kind not in "iu" or (reps < 0).any():
        raise ValueError(f"repeat: repeats must be an int or {shape[a]} ints >= 0, got {repeats}")
    return _array.gather(x, np.repeat(np.arange(shape[a]), reps), axis=a)


@traced
def roll(x: Any, shifts: Any, axes: Any = None) -> Variable:
    """Cyclic shift ``y[(i + s) % n] = x[i]`` by ``shifts`` along ``axes`` (numpy's ``roll``).

    ``axes=None`` rolls the flattened array.

    >>> import numpy as np, hodiff.functions as F
    >>> F.roll(np.array([1.0, 2.0, 3.0]), 1).d
    array([3., 1., 2.])
    """
    shape = shape_of(x)
    if axes is None:
        return _array.reshape(roll(_array.reshape(x, (-1,)), shifts, 0), shape)
    ax = as_ints("roll", "axes", (axes,) if isinstance(axes, int | np.integer) else axes)
    sh = as_ints("roll", "shifts", (shifts,) if isinstance(shifts, int | np.integer) else shifts)
    if len(sh) == 1:
        sh = sh * len(ax)
    if len(sh) != len(ax):
        raise ValueError(f"roll: {len(sh)} shifts for {len(ax)} axes")
    y = x
    for s, a in zip(sh, ax, strict=True):
        a = normalize_axis("roll", a, len(shape))
        n = shape[a]
        if n and s % n:
            idx = (np.arange(n) - s) % n
            y = _array.getitem(y, (_ALL,) * a + (idx,))
    return y if isinstance(y, Variable) else _array.reshape(y, shape)


@traced
def trilu(x: Any, k: int = 0, upper: bool = True) -> Variable:
    """Triangle of the last two axes: ``y = x`` where ``j - i >= k`` (``upper``), else 0.

    With ``upper=False`` the lower part ``j - i <= k`` is kept (NNabla's ``trilu``, numpy's
    ``triu``/``tril``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.trilu(np.ones((2, 3)), k=1).d
    array([[0., 1., 1.],
           [0., 0., 1.]])
    """
    shape = shape_of(x)
    if len(shape) < 2:
        raise ValueError(f"trilu: x of shape {shape} needs at least 2 dims")
    m, n = shape[-2:]
    keep = (
        np.triu(np.ones((m, n), dtype=bool), k)
        if upper
        else np.tril(np.ones((m, n), dtype=bool), k)
    )
    return _array.where(array_module_of(x).asarray(keep), x, 0.0)


@traced
def matrix_diag(x: Any) -> Variable:
    """Diagonal matrices ``y[..., i, i] = x[..., i]``, (..., M) -> (..., M, M).

    Zeros off the diagonal (NNabla's ``matrix_diag``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.matrix_diag(np.array([1.0, 2.0])).d
    array([[1., 0.],
           [0., 2.]])
    """
    shape = shape_of(x)
    if not shape:
        raise ValueError("matrix_diag: x must have at least 1 dim")
    m = shape[-1]
    eye_ = array_module_of(x).eye(m, dtype=bool)
    return _array.where(eye_, _array.reshape(x, (*shape[:-1], 1, m)), 0.0)


@traced
def matrix_diag_part(x: Any) -> Variable:
    """The diagonals ``y[..., i] = x[..., i, i]``, (..., M, M) -> (..., M).

    NNabla's ``matrix_diag_part``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.matrix_diag_part(np.arange(4.0).reshape(2, 2)).d
    array([0., 3.])
    """
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"matrix_diag_part: x of shape {shape} must be (..., M, M)")
    i = np.arange(shape[-1])
    return _array.getitem(x, (Ellipsis, i, i))


@traced
def gather_nd(x: Any, indices: Any) -> Variable:
    """``y = x[indices[0], ..., indices[M-1]]`` for indices (M, Y...) (NNabla's ``gather_nd``).

    ``y.shape = Y + x.shape[M:]``. Repeats add up in the gradient; ``indices`` may be a
    Variable (re-set between forwards).

    >>> import numpy as np, hodiff.functions as F
    >>> F.gather_nd(np.arange(1.0, 11.0).reshape(2, 5), np.array([[1, 1, 0], [0, 1, 0]])).d
    array([6., 7., 1.])
    """
    return _gather_nd(x, indices)


@traced
@real_values
def scatter_add(x0: Any, indices: Any, x1: Any, axis: int | None = None) -> Variable:
    """``y = x0`` plus ``x1`` added at ``indices`` along ``axis`` (NNabla's ``scatter_add``).

    For axis 1, ``y[i, indices[i, j, k], k] += x1[i, j, k]``; ``axis=None`` means 0.

    ``x0``, ``indices`` and ``x1`` have the same number of dims; ``indices`` is no larger
    than ``x1`` on any axis (the rest of ``x1`` is unused) and no larger than ``x0`` off
    ``axis``. The gradients are ``gy`` for ``x0`` and ``gy`` read at ``indices`` for ``x1``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.scatter_add(np.zeros((1, 3)), np.array([[2, 2]]), np.array([[1.0, 2.0]]), 1).d
    array([[0., 0., 3.]])
    """
    axis = 0 if axis is None else axis
    ishape, s1 = shape_of(indices), shape_of(x1)
    if len(ishape) != len(s1) or any(i > s for i, s in zip(ishape, s1, strict=True)):
        raise ValueError(f"scatter_add: indices of shape {ishape} must not exceed x1 of shape {s1}")
    if s1 != ishape:
        x1 = _array.getitem(x1, tuple(builtins.slice(0, i) for i in ishape))
    return x0 + scatter_along_axis(x1, indices, axis, shape_of(x0))


@traced
def eye(n: int, dtype: Any = None, m: int | None = None, k: int = 0) -> Variable:
    """The constant ``n x m`` identity ``y[i, i + k] = 1`` (numpy's ``eye``).

    ``m`` defaults to ``n``, ``dtype`` to the context's float dtype.

    >>> import numpy as np, hodiff.functions as F
    >>> F.eye(2, np.float64).d
    array([[1., 0.],
           [0., 1.]])
    """
    dtype = get_default_context().dtype if dtype is None else dtype
    return Eye(n=int(n), m=int(n if m is None else m), k=int(k), dtype=dtype)()


@traced
def arange(start: float, stop: float, step: float = 1.0, dtype: Any = None) -> Variable:
    """The constant ``y = [start, start + step, ...]`` below ``stop`` (NNabla's ``arange``).

    Float, in the context's dtype unless ``dtype``.

    >>> import hodiff.functions as F
    >>> F.arange(1, 3, 0.5).d
    array([1. , 1.5, 2. , 2.5], dtype=float32)
    """
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    dtype = get_default_context().dtype if dtype is None else dtype
    return Arange(start=start, stop=stop, step=step, dtype=dtype)()


@traced
@real_values
def astype(x: Any, dtype: Any) -> Variable:
    """``y = x`` converted to ``dtype`` (numpy's ``astype``; ``Variable.astype``).

    Between float dtypes the gradient is cast back to ``x``'s dtype; to an integer or bool
    dtype it cuts the graph.

    >>> import numpy as np, hodiff.functions as F
    >>> F.astype(np.array([1.5, 2.0]), np.float32).d
    array([1.5, 2. ], dtype=float32)
    """
    dtype = np.dtype(dtype)
    xdt = getattr(x, "dtype", None)
    xdt = np.asarray(x).dtype if xdt is None else np.dtype(xdt)
    if dtype.kind == "f" and xdt.kind == "f":
        return Cast(dtype=dtype, source=xdt)(x)
    return CastIndex(dtype=dtype)(x)


@traced
def broadcast_to(x: Any, y: Any, axis: int = -1) -> Variable:
    """``y`` broadcast to the shape of ``x`` from axis ``axis`` on (NNabla's ``broadcast_to``).

    Only ``x``'s shape is used; the gradient it gets from this node is zero (a constant).

    ``y``'s axes are matched to ``x``'s axes ``axis, ..., axis + y.ndim - 1``; with
    ``axis < 0`` (the default), or when they end at ``x``'s last axis, to the trailing
    axes (numpy's rule). The gradient of ``y`` sums over the broadcast axes.

    Args:
        x: any array or Variable: its shape is the target.
        y: the values, each of its axes of the size of the matched axis of ``x``.
        axis: the first axis of ``x`` matched to ``y``'s first axis.

    Returns:
        The shape of ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.broadcast_to(np.zeros((2, 3)), np.array([1.0, 2.0]), axis=0).d
    array([[1., 1., 1.],
           [2., 2., 2.]])
    """
    shape, y_shape = shape_of(x), shape_of(y)
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"broadcast_to: axis must be an int, got {type(axis).__name__}")
    if len(y_shape) > len(shape):
        raise ValueError(
            f"broadcast_to: y of shape {y_shape} has more axes than x of shape {shape}"
        )
    start = len(shape) - len(y_shape) if axis < 0 else int(axis)
    if start + len(y_shape) > len(shape) or shape[start : start + len(y_shape)] != y_shape:
        raise ValueError(
            f"broadcast_to: y of shape {y_shape} does not match the axes {start}.."
            f"{start + len(y_shape) - 1} of x of shape {shape} (axis={axis})"
        )
    aligned = (1,) * start + y_shape + (1,) * (len(shape) - start - len(y_shape))
    if not isinstance(x, Variable):
        return _array.broadcast(_array.reshape(y, aligned), shape)
    # x an input of the node, which reads its shape when it runs (x gets a zero gradient)
    return _array.BroadcastLike()(_array.reshape(y, aligned), x)
