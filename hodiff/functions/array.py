"""Array functions: shape manipulation, joining, padding, selection, comparison.

Linear functions are paired with their transposes so that every order of
derivative stays cheap: transpose/transpose, concatenate/getitem, split/stack,
pad/getitem, flip/flip. ``tile``, ``clip_by_value`` and the reflect and repeat
``pad`` modes are compositions and need no rule. The indexing functions
(``getitem``, ``gather``, ``slice``, ``one_hot``) and ``transpose`` live in
:mod:`hodiff.functions.indexing` and are re-exported here.
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
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable, is_scalar
from hodiff.functions import arithmetic as _arith
from hodiff.functions._index_kernels import EmptyShapeError
from hodiff.functions.indexing import (
    Transpose,  # noqa: F401 (re-exported: the primitive's home before it moved to indexing)
    as_ints,
    gather,
    getitem,
    normalize_axis,
    one_hot,
    shape_of,
    slice,
    transpose,
)

__all__ = [
    "broadcast",
    "clip_by_value",
    "concatenate",
    "constant",
    "equal",
    "flip",
    "gather",
    "getitem",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "one_hot",
    "pad",
    "reshape",
    "slice",
    "split",
    "stack",
    "tile",
    "transpose",
    "where",
]

Spec = list[tuple[tuple[int, ...], Any]]
_ALL = builtins.slice(None)


# ---------------------------------------------------------------- helpers
def _broadcast_shape(name: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " and ".join(str(s) for s in shapes)
        raise ValueError(f"{name}: shapes {listed} cannot be broadcast together") from None


# ---------------------------------------------------------------- shapes
def _merged_target(
    old: tuple[int, ...], new: tuple[int, ...], target: tuple[int, ...], changed: list[int]
) -> tuple[int, ...] | None:
    """The reshape target for input ``new``, where reshaping ``old`` to ``target`` only
    merges or keeps the groups of axes that changed; None where that is not so.
    """
    if any(old[i] == 1 for i in changed):
        return None
    ins = [i for i, n in enumerate(old) if n != 1]
    outs = [j for j, n in enumerate(target) if n != 1]
    result = list(target)
    p = q = 0
    while p < len(ins) or q < len(outs):
        ends = _next_group(old, target, ins, outs, p, q)
        if ends is None:
            return None
        p2, q2 = ends
        group = ins[p:p2]
        if any(i in changed for i in group):
            if q2 - q != 1:
                return None  # split into several axes: which one changes is ambiguous
            result[outs[q]] = math.prod(new[i] for i in group)
        p, q = p2, q2
    return tuple(result)


def _next_group(
    old: tuple[int, ...], target: tuple[int, ...], ins: list[int], outs: list[int], p: int, q: int
) -> tuple[int, int] | None:
    """The ends ``(p2, q2)`` of the next group: input axes ``ins[p:p2]`` and output axes
    ``outs[q:q2]`` of equal size; None where the sizes cannot be matched.
    """
    p2, q2, a, b = p + 1, q + 1, old[ins[p]] if p < len(ins) else 1, 1
    b = target[outs[q]] if q < len(outs) else 1
    while a != b:
        if a < b and p2 < len(ins):
            a *= old[ins[p2]]
            p2 += 1
        elif b < a and q2 < len(outs):
            b *= target[outs[q2]]
            q2 += 1
        else:
            return None
    return p2, q2


class Reshape(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        shape = list(self.shape)
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if shape.count(-1) > 1 or (shape.count(-1) == 1 and (known == 0 or x.size % known)):
            raise ValueError(f"reshape: cannot reshape x of shape {x.shape} into {self.shape}")
        if -1 in shape:
            shape[shape.index(-1)] = x.size // known
        elif known != x.size:
            raise ValueError(f"reshape: cannot reshape x of shape {x.shape} into {self.shape}")
        return [(tuple(shape), x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0].reshape(self.shape)

    def follows(self, seen: list[tuple[int, ...]], now: list[tuple[int, ...]]) -> bool:
        # Where NNabla's re-setup (the same target, a -1 inferred again) and a graph
        # built for the new shape (a target computed from it) agree, or NNabla could not
        # run at all (another size, no -1):
        # - a -1 that takes exactly the changed input axes (the elements before and
        #   after them are as many as those before and after the -1);
        # - no -1: every changed input axis lies in a group of input axes that the
        #   reshape merges into one output axis (or keeps), and the size changes; the
        #   output axis takes the group's new size (``self.shape`` is updated, and
        #   restored by the engine if another node refuses). A group split into several
        #   axes (``C`` into ``(G, C / G)``) is ambiguous, as is an axis of size 1.
        # (the engine asks only for inputs of the same rank: Reshape does not follow ranks)
        old, new = seen[0], now[0]
        changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        if not changed:
            return True
        if -1 in self.shape:
            j = self.shape.index(-1)
            before, after = math.prod(self.shape[:j]), math.prod(self.shape[j + 1 :])
            return (
                math.prod(old[: changed[0]]) == before
                and math.prod(old[changed[-1] + 1 :]) == after
            )
        if math.prod(new) == math.prod(old):
            return False
        target = _merged_target(old, new, self.shape, changed)
        if target is None:
            return False
        self.shape = target
        self.static_arguments = ((), {"shape": target})
        return True

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the gradient takes the input's shape back
        if prop_down[0]:
            inputs[0].store(reshape(outputs[0].grad, inputs[0].shape), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        return _batching.renew(self, shape=(x.shape[0], *self.shape))(x)


class Broadcast(Function, follows_shape=False):
    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        ok = x.ndim <= len(self.shape) and all(
            a in (1, b) for a, b in zip(x.shape[::-1], self.shape[::-1], strict=False)
        )
        if not ok:
            raise ValueError(f"broadcast: x of shape {x.shape} cannot be broadcast to {self.shape}")
        return [(self.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).broadcast_to(inputs[0], self.shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the gradient is summed over the broadcast axes (Slot.store does it)
        if prop_down[0]:
            inputs[0].store(outputs[0].grad, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        x = _batching.align(x, 0, len(self.shape))
        return _batching.renew(self, shape=(x.shape[0], *self.shape))(x)


class BroadcastLike(Function, follows_shape=True):
    """``x`` broadcast to the shape of ``like`` (read when the node runs: it follows
    ``reset_shape``); ``like``'s values are not read and its gradient is zero.
    """

    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"
    linear_in = (0,)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, like = inputs
        return Broadcast(shape=like.shape).setup_impl([x])

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).broadcast_to(inputs[0], inputs[1].shape)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # x: the gradient summed over the broadcast axes (Slot.store); like: zero, a constant
        # that depends on nothing (not gy * 0, which an infinite gy makes nan)
        gy = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(gy, accum[0])
        if prop_down[1] and not accum[1]:  # added to a gradient, zero changes nothing
            zero = array_module_of(gy).zeros(inputs[1].shape, dtype=gy.dtype)
            inputs[1].store(Variable.from_array(zero) if isinstance(gy, Variable) else zero, False)

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        x, like = inputs
        if axes[1] is None:
            x = _batching.align(x, axes[0], like.ndim)
            return Broadcast(shape=(x.shape[0], *like.shape))(x)
        return _batching.renew(self)(_batching.align(x, axes[0], like.ndim - 1), like)


class Flip(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, axes: Sequence[int]) -> None:
        self.axes = tuple(axes)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        axes = [normalize_axis(self.name, a, x.ndim, "axes") for a in self.axes]
        if len(set(axes)) != len(axes):
            raise ValueError(f"flip: repeated axis in {self.axes}")
        return [(x.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        axes = {a % x.ndim for a in self.axes}
        rev = builtins.slice(None, None, -1)
        outputs[0] = x[tuple(rev if i in axes else _ALL for i in range(x.ndim))]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # flipping is its own transpose
        if prop_down[0]:
            inputs[0].store(flip(outputs[0].grad, self.axes), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        shifted = _batching.shift_axes(tuple(self.axes), x.ndim - 1)  # a tuple in, a tuple out
        return _batching.renew(self, axes=tuple(shifted))(x)  # type: ignore[arg-type]


# ---------------------------------------------------------------- joining and splitting
def _batch_join(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    # concatenate / stack: every input batched (unbatched ones broadcast), the axis shifted
    size = _batching.batch_size(inputs, axes)
    xs = [_batching.batched(x, a, size) for x, a in zip(inputs, axes, strict=True)]
    n = xs[0].ndim - 1 + (type(self) is Stack)  # stack: the new axis counts
    axis = None if self.axis is None else _batching.map_axis(self.axis, n)
    return _batching.renew(self, axis=axis)(*xs)


class Concatenate(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = False
    batch_rule = _batch_join
    taylor = "linear"

    def __init__(self, *, axis: int | None) -> None:
        self.axis = axis

    def _axis(self, ndim: int) -> int:
        return ndim - 1 if self.axis is None else normalize_axis(self.name, self.axis, ndim)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        if not inputs:
            raise ValueError("concatenate: needs at least one input")
        first = inputs[0]
        for i, x in enumerate(inputs):
            if x.ndim == 0:
                raise EmptyShapeError(
                    f"concatenate: inputs must have at least one axis, got shape () for input {i}"
                )
        axis = self._axis(first.ndim)
        for x in inputs[1:]:
            if x.ndim != first.ndim or any(
                a != b
                for i, (a, b) in enumerate(zip(x.shape, first.shape, strict=True))
                if i != axis
            ):
                raise ValueError(
                    f"concatenate: shapes {first.shape} and {x.shape} differ outside axis {axis}"
                )
        shape = list(first.shape)
        shape[axis] = builtins.sum(x.shape[axis] for x in inputs)
        return [(tuple(shape), np.result_type(*(x.dtype for x in inputs)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        outputs[0] = xp.concatenate(inputs, axis=self._axis(np.ndim(inputs[0])))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # each input gets its own section of gy
        gy = outputs[0].grad
        axis = self._axis(len(inputs[0].shape))
        start = 0
        for i, x in enumerate(inputs):
            stop = start + x.shape[axis]
            if prop_down[i]:
                key = (_ALL,) * axis + (builtins.slice(start, stop),)
                x.store(getitem(gy, key), accum[i])
            start = stop


class Stack(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = False
    batch_rule = _batch_join
    taylor = "linear"

    def __init__(self, *, axis: int) -> None:
        self.axis = axis

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        if not inputs:
            raise ValueError("stack: needs at least one input")
        first = inputs[0]
        for x in inputs[1:]:
            if x.shape != first.shape:
                raise ValueError(f"stack: inputs of shapes {first.shape} and {x.shape} differ")
        axis = normalize_axis(self.name, self.axis, first.ndim + 1)
        shape = (*first.shape[:axis], len(inputs), *first.shape[axis:])
        return [(shape, np.result_type(*(x.dtype for x in inputs)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).stack(inputs, axis=self.axis)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of stack is split
        gxs = split(outputs[0].grad, self.axis)
        for i, x in enumerate(inputs):
            if prop_down[i]:
                x.store(gxs[i], accum[i])


class Split(Function, follows_shape=False):
    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, axis: int, num: int) -> None:
        self.axis = axis
        self.n_outputs = num

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        axis = normalize_axis(self.name, self.axis, x.ndim)
        if x.shape[axis] != self.n_outputs:
            raise ValueError(
                f"split: x of shape {x.shape} has {x.shape[axis]} entries along axis {axis}, "
                f"not {self.n_outputs}"
            )
        shape = x.shape[:axis] + x.shape[axis + 1 :]
        return [(shape, x.dtype)] * self.n_outputs

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        lead = (_ALL,) * (self.axis % np.ndim(x))
        for i in range(self.n_outputs):
            key = (*lead, i)
            outputs[i] = x[key]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of split is stack (absent gradients arrive as zeros)
        if prop_down[0]:
            inputs[0].store(stack(*(y.grad for y in outputs), axis=self.axis), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (x,) = inputs
        return _batching.renew(self, axis=_batching.map_axis(self.axis, x.ndim - 1))(x)


class Pad(Function, follows_shape=True):
    """Constant padding; reflect and repeat padding are gathers (see :func:`pad`)."""

    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, pad_width: Sequence[int], constant_value: float = 0.0) -> None:
        self.pad_width = tuple(pad_width)
        self.constant_value = float(constant_value)

    def _widths(self, ndim: int) -> list[tuple[int, int]]:
        w = self.pad_width
        pairs = [(w[i], w[i + 1]) for i in range(0, len(w), 2)]
        return [(0, 0)] * (ndim - len(pairs)) + pairs

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        check_pad_width(x.shape, self.pad_width)
        shape = tuple(s + a + b for s, (a, b) in zip(x.shape, self._widths(x.ndim), strict=True))
        return [(shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        widths = self._widths(np.ndim(x))
        shape = tuple(s + a + b for s, (a, b) in zip(np.shape(x), widths, strict=True))
        y = xp.full(shape, self.constant_value, dtype=x.dtype)
        inner = zip(np.shape(x), widths, strict=True)
        y[tuple(builtins.slice(a, a + s) for s, (a, _) in inner)] = x
        outputs[0] = y

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of padding crops the padded borders away
        if prop_down[0]:
            shape = inputs[0].shape
            key = tuple(
                builtins.slice(a, a + s)
                for s, (a, _) in zip(shape, self._widths(len(shape)), strict=True)
            )
            inputs[0].store(getitem(outputs[0].grad, key), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # pad_width pairs apply to the last axes: the batch axis in front is left alone
        return self(inputs[0])

    def linear_part(self) -> Function:
        # pad(x, c) = pad(x, 0) + pad(0, c): Taylor coefficients are padded with zeros
        if self.constant_value == 0.0:
            return self
        return Pad(pad_width=self.pad_width)


def check_pad_width(shape: tuple[int, ...], pad_width: Sequence[int]) -> None:
    """ValueError unless ``pad_width`` is an even number of non-negative ints for ``shape``."""
    if len(pad_width) % 2 or len(pad_width) // 2 > len(shape):
        raise ValueError(
            f"pad: pad_width {tuple(pad_width)} must hold (before, after) pairs for at most the "
            f"{len(shape)} axes of x of shape {shape}"
        )
    if any(p < 0 for p in pad_width):
        raise ValueError(f"pad: pad_width {tuple(pad_width)} must be non-negative")


# ---------------------------------------------------------------- selection
class Where(Function, follows_shape=True, follows_rank=True):
    scalar_kernel = "where(x0, x1, x2)"
    complex_values = "holomorphic"
    need_inputs = (0,)
    batch_rule = _batching.elementwise
    taylor = "linear"
    linear_in = (1, 2)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        shape = _broadcast_shape(self.name, [x.shape for x in inputs])
        return [(shape, np.result_type(inputs[1].dtype, inputs[2].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        c, a, b = inputs
        outputs[0] = array_module_of(c, a, b).where(c, a, b)  # a, b may be Python scalars

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gy goes to x_true where cond holds, to x_false elsewhere; cond gets none
        gy, c = outputs[0].grad, inputs[0].data
        if prop_down[1]:
            inputs[1].store(where(c, gy, 0.0), accum[1])
        if prop_down[2]:
            inputs[2].store(where(c, 0.0, gy), accum[2])


# ---------------------------------------------------------------- not differentiable
class Constant(Function, follows_shape=False):
    complex_values = "holomorphic"
    differentiable = False
    batch_rule = _batching.elementwise  # no inputs: never batched

    def __init__(self, *, val: complex, shape: Sequence[int], dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        self.val = complex(val) if self.dtype.kind == "c" else float(val)  # type: ignore[arg-type]
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        if any(s < 0 for s in self.shape):
            raise ValueError(f"constant: shape {self.shape} has a negative size")
        return [(self.shape, self.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = get_default_context().xp.full(self.shape, self.val, dtype=self.dtype)


class Compare(Function, register=False, follows_shape=True, follows_rank=True):
    differentiable = False
    batch_rule = _batching.elementwise

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [(_broadcast_shape(self.name, [x.shape for x in inputs]), np.dtype(bool))]


class Less(Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] < inputs[1]


class LessEqual(Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] <= inputs[1]


class Greater(Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] > inputs[1]


class GreaterEqual(Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] >= inputs[1]


class Equal(Compare):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] == inputs[1]


# ---------------------------------------------------------------- wrappers
@traced
def reshape(x: Any, shape: Sequence[int]) -> Variable:
    """``x`` with a new shape of the same size (one entry may be -1).

    >>> import numpy as np, hodiff.functions as F
    >>> F.reshape(np.arange(6.0), (2, -1)).shape
    (2, 3)
    """
    return Reshape(shape=shape)(x)


@traced
def broadcast(x: Any, shape: Sequence[int]) -> Variable:
    """``x`` broadcast to ``shape`` (numpy rules); the gradient sums over the broadcast axes."""
    return Broadcast(shape=shape)(x)


@traced
def flip(x: Any, axes: Sequence[int] | None = None) -> Variable:
    """Reverses the order of the elements along ``axes`` (default: the last axis, as NNabla).

    >>> import numpy as np, hodiff.functions as F
    >>> F.flip(np.arange(3.0)).d
    array([2., 1., 0.])
    """
    if axes is None:
        ndim = len(shape_of(x))
        axes = (ndim - 1,) if ndim else ()
    elif not isinstance(axes, Sequence):
        axes = (axes,)
    return Flip(axes=as_ints("flip", "axes", axes))(x)


@traced
def concatenate(*xs: Any, axis: int | None = None) -> Variable:
    """Joins the inputs along an existing ``axis`` (default: the last axis, as NNabla).

    Args:
        *xs: arrays of equal shapes except along ``axis`` (a single list is unpacked).
        axis: the joining axis.

    >>> import numpy as np, hodiff.functions as F
    >>> F.concatenate(np.zeros((2, 3)), np.ones((2, 1))).shape
    (2, 4)

    """
    if len(xs) == 1 and isinstance(xs[0], list | tuple):
        xs = tuple(xs[0])
    return Concatenate(axis=axis)(*xs)


@traced
def stack(*xs: Any, axis: int = 0) -> Variable:
    """Joins inputs of equal shapes along a new ``axis``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.stack(np.zeros(3), np.ones(3), axis=1).shape
    (3, 2)
    """
    if len(xs) == 1 and isinstance(xs[0], list | tuple):
        xs = tuple(xs[0])
    return Stack(axis=axis)(*xs)


@traced
def split(x: Any, axis: int = 0) -> tuple[Variable, ...]:
    """Splits ``x`` into its ``x.shape[axis]`` slices along ``axis``, which is removed (NNabla).

    Returns:
        A tuple of ``x.shape[axis]`` Variables of shape ``x.shape`` without ``axis``.

    Raises:
        ValueError: ``x`` has no elements (also a RuntimeError, as NNabla raises).

    >>> import numpy as np, hodiff.functions as F
    >>> [y.shape for y in F.split(np.zeros((2, 3)), axis=1)]
    [(2,), (2,), (2,)]

    """
    shape = shape_of(x)
    axis = normalize_axis("split", axis, len(shape))
    if 0 in shape:  # as NNabla, which refuses an input without elements
        raise EmptyShapeError(
            f"split: x of shape {shape} has no elements (axis {shape.index(0)} has size 0):"
            " nothing to split"
        )
    ys = Split(axis=axis, num=shape[axis])(x)
    return ys if isinstance(ys, tuple) else (ys,)


@traced
def pad(
    x: Any, pad_width: Sequence[int], mode: str = "constant", constant_value: float = 0.0
) -> Variable:
    """Pads the last ``len(pad_width) // 2`` axes of ``x`` (NNabla's layout).

    Args:
        x: N-D array.
        pad_width: ``(before, after)`` pairs, flat, for the last axes in order: ``(1, 2)``
            pads the last axis, ``(a, b, c, d)`` the second-to-last by ``(a, b)`` and the
            last by ``(c, d)``.
        mode: ``"constant"`` (``constant_value``), ``"reflect"`` (mirrored about the
            edge values, numpy's "reflect") or ``"repeat"`` (edge values, numpy's "edge").
        constant_value: fill value of the constant mode.

    >>> import numpy as np, hodiff.functions as F
    >>> F.pad(np.array([1.0, 2.0, 3.0]), (2, 1), mode="reflect").d
    array([3., 2., 1., 2., 3., 2.])

    """
    widths = as_ints("pad", "pad_width", pad_width)
    if mode == "constant":
        return Pad(pad_width=widths, constant_value=constant_value)(x)
    if mode not in ("reflect", "repeat"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect' or 'repeat', got {mode!r}")
    shape = shape_of(x)
    check_pad_width(shape, widths)
    first = len(shape) - len(widths) // 2
    y = x
    for i in range(len(widths) // 2):
        a, b = widths[2 * i], widths[2 * i + 1]
        axis = first + i
        if a or b:
            if shape[axis] == 0:
                raise ValueError(f"pad: cannot {mode}-pad the empty axis {axis} of shape {shape}")
            idx = np.pad(
                np.arange(shape[axis]), (a, b), mode="reflect" if mode == "reflect" else "edge"
            )
            y = getitem(y, (_ALL,) * axis + (idx,))
    return y if y is not x else Pad(pad_width=widths)(x)


@traced
def tile(x: Any, reps: int | Sequence[int]) -> Variable:
    """``x`` repeated ``reps[i]`` times along each axis (numpy's ``tile``: the shorter of
    ``x.shape`` and ``reps`` is padded with leading ones).

    A broadcast between two reshapes, so the gradient sums the copies.

    >>> import numpy as np, hodiff.functions as F
    >>> F.tile(np.array([1.0, 2.0]), (2, 2)).d
    array([[1., 2., 1., 2.],
           [1., 2., 1., 2.]])
    """
    reps = as_ints("tile", "reps", (reps,) if isinstance(reps, int) else reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps {reps} must be non-negative")
    shape = shape_of(x)
    d = builtins.max(len(shape), len(reps))
    shape = (1,) * (d - len(shape)) + shape
    reps = (1,) * (d - len(reps)) + reps
    inter = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for r, s in zip(reps, shape, strict=True) for v in (r, s))
    y = broadcast(reshape(x, inter), wide)
    return reshape(y, tuple(r * s for r, s in zip(reps, shape, strict=True)))


@traced
@real_values
def clip_by_value(x: Any, min: Any, max: Any) -> Variable:
    """Elementwise ``y = min(max(x, min), max)``; ``min``/``max`` are scalars or arrays
    (broadcast). The derivative in x is 1 inside the closed ``[min, max]`` (at the bounds
    too) and 0 outside, in reverse mode, ``hd.jvp`` and Taylor mode alike.

    >>> import numpy as np, hodiff.functions as F
    >>> F.clip_by_value(np.array([-2.0, 0.5, 3.0]), -1.0, 1.0).d
    array([-1. ,  0.5,  1. ])
    """
    y = _arith.maximum_scalar(x, min) if is_scalar(min) else _arith.maximum2(x, min)
    return _arith.minimum_scalar(y, max) if is_scalar(max) else _arith.minimum2(y, max)


@traced
def constant(val: complex = 0.0, shape: Sequence[int] = ()) -> Variable:
    """An array of ``shape`` filled with ``val``, in the context's float dtype (a complex
    ``val``: its complex pair, complex64 for float32).

    >>> import hodiff.functions as F
    >>> F.constant(2.0, (2,)).d
    array([2., 2.], dtype=float32)
    >>> F.constant(1 + 2j, (2,)).d
    array([1.+2.j, 1.+2.j], dtype=complex64)
    """
    dtype = get_default_context().dtype
    if isinstance(val, complex | np.complexfloating):
        dtype = np.result_type(dtype, np.complex64)
    return Constant(val=val, shape=shape, dtype=dtype)()


@traced
def where(condition: Any, x_true: Any, x_false: Any) -> Variable:
    """``y = x_true`` where ``condition`` is nonzero, else ``x_false`` (all broadcast).

    ``condition`` gets no gradient (the derivative is the selected input's, in every mode).
    A Python bool as ``condition`` raises TypeError: it is what ``x == 2.0`` gave before
    comparisons made masks; use ``x == 2.0`` on a Variable or ``F.equal``.
    """
    if isinstance(condition, bool | np.bool_):
        raise TypeError(
            f"where: condition is the Python bool {condition!r}, not a mask: compare a "
            "Variable (x == 2.0 is elementwise) or use F.equal(x, 2.0)"
        )
    return Where()(condition, x_true, x_false)


@traced
def less(x0: Any, x1: Any) -> Variable:
    """``x0 < x1`` elementwise (bool, not differentiable)."""
    return Less()(x0, x1)


@traced
def less_equal(x0: Any, x1: Any) -> Variable:
    """``x0 <= x1`` elementwise (bool, not differentiable)."""
    return LessEqual()(x0, x1)


@traced
def greater(x0: Any, x1: Any) -> Variable:
    """``x0 > x1`` elementwise (bool, not differentiable)."""
    return Greater()(x0, x1)


@traced
def greater_equal(x0: Any, x1: Any) -> Variable:
    """``x0 >= x1`` elementwise (bool, not differentiable)."""
    return GreaterEqual()(x0, x1)


@traced
def equal(x0: Any, x1: Any) -> Variable:
    """``x0 == x1`` elementwise (bool, not differentiable)."""
    return Equal()(x0, x1)
