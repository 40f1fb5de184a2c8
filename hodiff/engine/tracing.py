"""Traced compositions: how ``Variable.reset_shape`` makes a composition again.

A public composition of ``hodiff.functions`` that computes arguments from its inputs'
shapes is declared ``@traced`` in its source: in a static graph its outputs keep a
:class:`Trace` of the call (the function, its arguments, the clock interval its nodes were
numbered in), and :mod:`hodiff.engine.follow` makes the call again for new shapes, as
NNabla sets up its functions again. :func:`shape_bound` marks a node that holds a number
computed from shapes, so that it refuses a new shape instead.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from hodiff.engine.context import RAW, STATE, STATIC, TRUSTED
from hodiff.engine.variable import Variable, ticks

__all__ = ["Trace", "record_trace", "shape_bound", "traced"]


class Trace:
    """How a composition made its nodes: the function, its arguments and the clock interval
    ``(t0, t1)`` its nodes were numbered in. Kept by its outputs (``Variable._trace``) in a
    static graph, so that :meth:`Variable.reset_shape` can make the composition again for
    new shapes (what NNabla's setup does for its own functions) instead of refusing it.
    """

    __slots__ = ("args", "fn", "kwargs", "name", "outs", "t0", "t1")

    def __init__(
        self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], t0: int, t1: int
    ) -> None:
        self.fn, self.args, self.kwargs, self.t0, self.t1 = fn, args, kwargs, t0, t1
        self.name = getattr(fn, "__name__", "function")
        self.outs: list[weakref.ref[Variable] | None] = []


def record_trace(
    out: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], t0: int, t1: int
) -> None:
    """Gives the outputs ``out`` of the call ``fn(*args, **kwargs)`` (numbered between the
    clock times ``t0`` and ``t1``) its :class:`Trace`, if the call made nodes.
    """
    outs = out if isinstance(out, tuple | list) else (out,)
    trace = Trace(fn, args, kwargs, t0, t1)
    for v in outs:
        if isinstance(v, Variable) and v.parent is not None and t0 < v.parent.seq < t1:
            v._trace = trace
            trace.outs.append(weakref.ref(v))
        else:
            trace.outs.append(None)


def traced(fn: Any) -> Any:
    """``fn`` (a composition of primitives) as a function whose outputs, in a static graph,
    keep a :class:`Trace` of the call; define-by-run calls only pay the check.

    ``@traced`` above a ``def``: every public function of ``hodiff.functions`` but the
    one-primitive wrappers of the elementwise families that read no shapes, so that
    :meth:`Variable.reset_shape` makes the call again for new shapes. Calls from backward
    and batch rules (``hd.grad``, ``hd.vmap``) keep no trace: the nodes they make hold the
    shapes they were made for and refuse new ones (``_shape_bound``).
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if STATE.get().modes & (STATIC | RAW | TRUSTED) != STATIC:  # define-by-run, a plain pass,
            return fn(*args, **kwargs)  # or a rule
        t0 = next(ticks)
        out = fn(*args, **kwargs)
        record_trace(out, fn, args, kwargs, t0, next(ticks))
        return out

    return call


def shape_bound(v: Any) -> Any:
    """Marks the node that made ``v`` as holding a number computed from its inputs' shapes
    (a composition's ``1/sqrt(E)``): a static graph then refuses to carry it to a new shape
    (:meth:`Variable.reset_shape`) instead of computing with the old number. Returns ``v``.
    """
    if isinstance(v, Variable) and v.parent is not None:
        v.parent._shape_bound = True
    return v
