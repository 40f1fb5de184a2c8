"""Batching rules: how a primitive carries an extra batch axis (the protocol behind ``hd.vmap``).

Every primitive declares, in its own class, a method::

    def batch_rule(self, inputs, axes):
        ...

``inputs`` are the primitive's inputs as Variables; ``axes[i]`` is ``0`` when
input ``i`` is batched (its axis 0 is the batch axis, of size ``B``, in front
of the per-example shape) and ``None`` when it is the same for every example.
At least one input is batched. The rule returns the batched outputs (a Variable
or a tuple of them, one per output), each with the batch axis at 0, computed by
calling hodiff functions on the inputs. So the batched computation is an
ordinary graph: it differentiates like any other, and ``hd.grad`` inside the
mapped function works because the engine runs the same backward rules on
batched Variables, which dispatch to these rules again.

A primitive without inputs (a random function) has nothing batched to carry; one
that depends on the example declares ``batch_rule_no_inputs(self, sizes)``, which
``hd.vmap`` calls when it is called inside running vmaps of batch sizes ``sizes``
(outermost first): it returns the output with those axes in front (the random
functions draw ``sizes + shape`` numbers). Without it the output is the same for
every example.

A rule reads shapes and static arguments, never values. The helpers here
cover the common cases: :func:`elementwise` (numpy broadcasting),
:func:`loop` (the generic fallback: one call per example, then ``stack``),
:func:`renew` (the same primitive with other static arguments, e.g. an axis
shifted by one), :func:`shift_axes`, :func:`batched` (an unbatched input
broadcast along the batch) and :func:`batch_size`.

See docs/vmap.md for the user-facing side and a worked example of a custom rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine.array_methods import Registry
from hodiff.engine.variable import Variable

__all__ = [
    "align",
    "batch_size",
    "batched",
    "elementwise",
    "loop",
    "map_axis",
    "renew",
    "shift_axes",
    "unbatched_ndim",
]

Axes = Sequence[int | None]

_LINK_ATTRS = frozenset(("inputs", "seq", "_outputs", "_ydata", "_out_meta", "_axes_of"))
_new = object.__new__


#: the functions the helpers below call (``reshape``, ``broadcast``, ``stack``), registered
#: by :mod:`hodiff.functions` at import: this module imports nothing above the engine
_fn: Any = Registry("batching", "hodiff.functions")
register = _fn.register


def batch_size(inputs: Sequence[Any], axes: Axes) -> int:
    """``B``: the size of axis 0 of the batched inputs."""
    for x, a in zip(inputs, axes, strict=True):
        if a is not None:
            return int(x.shape[0])
    raise ValueError("batch_size: no input is batched")


def unbatched_ndim(x: Any, axis: int | None) -> int:
    """The per-example number of dimensions of ``x``."""
    return x.ndim - (axis is not None)


def batched(x: Any, axis: int | None, size: int) -> Variable:
    """``x`` with a batch axis at 0: itself when batched, else broadcast to ``(size,) + shape``."""
    if axis is not None:
        return x
    shape = tuple(x.shape)
    return _fn.broadcast(_fn.reshape(x, (1, *shape)), (size, *shape))


def align(x: Any, axis: int | None, ndim: int) -> Any:
    """A batched ``x`` reshaped to ``(B, 1, ..., 1) + shape`` with ``ndim`` per-example dims.

    Unbatched inputs are returned as they are: numpy broadcasting aligns them on the right.
    """
    if axis is None:
        return x
    n = ndim - (x.ndim - 1)
    if n <= 0:
        return x
    shape = tuple(x.shape)
    return _fn.reshape(x, (shape[0], *([1] * n), *shape[1:]))


def elementwise(self: Any, inputs: Sequence[Any], axes: Axes) -> Any:
    """Rule of an elementwise function with numpy broadcasting: align, then call it batched."""
    if len(inputs) == 1:
        return self(inputs[0])
    ndim = 0
    for x, a in zip(inputs, axes, strict=True):
        n = x.ndim if a is None else x.ndim - 1
        if n > ndim:
            ndim = n
    args = list(inputs)
    for i, a in enumerate(axes):
        if a is not None and args[i].ndim - 1 < ndim:
            args[i] = align(args[i], a, ndim)
    return self(*args)


def map_axis(axis: int, ndim: int) -> int:
    """A per-example axis (maybe negative) as an axis of the batched array."""
    if ndim == 0:
        return 1 if axis in (0, -1) else axis + 1
    return axis % ndim + 1


def shift_axes(axis: Any, ndim: int) -> tuple[int, ...] | int:
    """Per-example ``axis`` (None, an int or a tuple) as axes of the batched array.

    None (every per-example axis) becomes ``(1, ..., ndim)``; an int stays an int.
    """
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, tuple | list):
        return tuple(map_axis(int(a), ndim) for a in axis)
    return map_axis(int(axis), ndim)


def renew(self: Any, **changes: Any) -> Any:
    """A fresh, unlinked copy of the primitive ``self`` with some static arguments changed."""
    f = _new(type(self))
    d = f.__dict__
    for k, v in self.__dict__.items():
        if k not in _LINK_ATTRS:
            d[k] = v
    d.update(changes)
    return f


def loop(self: Any, inputs: Sequence[Any], axes: Axes) -> Any:
    """The generic fallback: call the primitive once per example and stack the results."""
    size = batch_size(inputs, axes)
    rows: list[Any] = []
    for b in range(size):
        args = [x if a is None else x[b] for x, a in zip(inputs, axes, strict=True)]
        y = renew(self)(*args)
        rows.append(y if isinstance(y, tuple) else (y,))
    outs = tuple(_fn.stack(*[r[k] for r in rows], axis=0) for k in range(len(rows[0])))
    return outs if len(outs) > 1 else outs[0]
