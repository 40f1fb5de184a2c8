"""Following ``reset_shape``: a static graph set up again for its leaves' new shapes.

What this module remembers of shapes lives here, not on the protocol classes
(:data:`_RECORD`): for a variable, its last shape changes (``(clock time, shape
before)``, :func:`record_shape_change`); for a node that was checked or set up
again, the input shapes it was set up for. A node linked at time ``s`` saw each
input's shape before that input's first change after ``s``.

Before a forward pass over a graph whose leaves changed shape,
:func:`follow_shapes` walks its nodes in order: a node whose inputs' shapes
differ from those it was set up for runs its ``setup_impl`` again (its outputs
take the new shapes), and a composition that computes from shapes (a
:class:`~hodiff.engine.function.Trace`) is made again, its new nodes numbered
where the old ones were (:meth:`Clock.renumber`). On any error every change is
undone first.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import tracing as _tracing
from hodiff.engine import variable as _variable
from hodiff.engine.clock import CLOCK
from hodiff.engine.context import flag_auto_forward
from hodiff.engine.function import Function, OutRef
from hodiff.engine.order import topological_order
from hodiff.engine.variable import SHAPE_HISTORY, ShapeResetError, Variable, check_shape

__all__ = ["follow_shapes", "record_shape_change", "shape_changes", "shapes_current"]

Shapes = list[tuple[int, ...]]

#: a variable -> its shape changes ``[(clock time, shape before), ...]`` (the last
#: :data:`SHAPE_HISTORY`; a first entry ``(t, None)`` stands for the changes dropped up to
#: ``t``); a node -> the input shapes it was last checked or set up for
_RECORD: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def record_shape_change(v: Variable, t: int, before: tuple[int, ...]) -> None:
    """Notes that ``v`` changed shape at clock time ``t``, from ``before``; keeps the last
    :data:`SHAPE_HISTORY` changes and, in place of the older ones, ``(t', None)`` with
    ``t'`` the time of the last one dropped (a loop that resets shapes forever keeps a
    bounded record). A node that follows records the shapes it follows for, and reads the
    record no more.
    """
    history = _RECORD.get(v)
    if history is None:
        history = _RECORD[v] = []
    history.append((t, before))
    if len(history) > SHAPE_HISTORY + 1:
        drop = len(history) - SHAPE_HISTORY
        history[:drop] = [(history[drop - 1][0], None)]


def reset_shape(v: Variable, shape: Any, force: bool) -> None:
    """:meth:`Variable.reset_shape`: ``v``'s new shape, recorded on the clock for the graphs
    built on it to follow at their next forward.
    """
    new = check_shape(shape)
    old = v._shape
    if v.parent is not None:
        raise ValueError(
            f"Variable.reset_shape: this Variable (shape {old}) is the output of "
            f"{v.parent.name}; only a leaf's shape can be reset (the outputs follow "
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
    t = CLOCK.reshaped()
    record_shape_change(v, t, old)
    v._data = v._data.reshape(new) if same_size and v._data is not None else None
    v._shape = new
    v._grad = None
    v._version = CLOCK.last_write = t


def shape_changes(v: Variable) -> list[tuple[int, tuple[int, ...] | None]]:
    """The shape changes ``v`` remembers, oldest first (empty for none)."""
    return list(_RECORD.get(v, ()))


def last_change(v: Variable) -> tuple[int, tuple[int, ...] | None] | None:
    """``(time, shape before)`` of the last shape change of ``v``; None for none."""
    if not CLOCK.reshapes:
        return None
    history = _RECORD.get(v)
    return history[-1] if history else None


def shapes_current(roots: Sequence[Variable]) -> list[Function] | None:
    """Lets the graph of ``roots`` follow its leaves' new shapes (``reset_shape``) now,
    before its shapes are read (``hd.grad`` records a gradient graph from them). Returns
    the nodes of that graph in order (for ``plan``'s ``order``) when it walked them and
    made nothing again, else None.
    """
    if not CLOCK.reshapes:
        return None
    nodes = topological_order(roots)
    return None if follow_shapes(nodes) else nodes


def _shape_at(x: Variable, t: int) -> tuple[int, ...] | None:
    """The shape ``x`` had at clock time ``t`` (before its first shape change after ``t``);
    None if that change is older than those ``x`` remembers (:data:`SHAPE_HISTORY`).
    """
    for when, before in _RECORD.get(x, ()):
        if when > t:
            return before
    return x._shape


def _made_for(f: Function) -> Shapes:
    """The input shapes ``f`` was set up for (raises ShapeResetError if no longer known)."""
    seen = _RECORD.get(f)
    if seen is not None:
        return seen
    ins = f.inputs
    seen = [_shape_at(x, f.seq) for x in ins]
    if None in seen:
        i = seen.index(None)
        raise ShapeResetError(
            f"reset_shape: the node {f.name} was made before the last {SHAPE_HISTORY} shape "
            f"changes of its input {i} (now of shape {ins[i]._shape}) and has not run since, "
            "so the shapes it was made for are no longer known: build this graph again (or "
            "run it after fewer resets)"
        )
    if any(x in _RECORD for x in ins):
        # a fact (what f was made for) kept, undone or not: the record of its inputs'
        # shape changes is bounded, and f may never need to follow
        _RECORD[f] = seen
    return seen


def follow_shapes(nodes: Sequence[Function]) -> bool:
    """Infers the output shapes of ``nodes`` (in order) again where their inputs' shapes changed.

    A node whose input shapes differ from those it was made (or last set up) for, or
    whose input comes from such a node, is *affected*. If it was made by a traced
    composition of a static graph (a :class:`~hodiff.function.Trace`: a public function of
    ``hodiff.functions`` that computes from shapes, or ``hd.grad``), that call is made
    again on the new shapes and its outputs take the new nodes as parents (the old ones
    are dropped): the composition is set up again as NNabla sets up its own functions.
    Otherwise the node runs its ``setup_impl`` again on the new shapes and its outputs take
    the shapes it gives (values dropped until the forward pass computes them); it must
    then be ``follows_shape``, not ``_shape_bound``, and keep its inputs' ranks (unless
    ``follows_rank``), else :class:`ShapeResetError` is raised naming it. On any error
    everything this call changed is restored first, so nothing is touched. Returns whether
    a composition was made again (every cached order, schedule and plan is then stale:
    :meth:`Clock.remade`).
    """
    run = _Following(nodes)
    try:
        run.all()
    except BaseException:
        run.undo()
        raise
    if run.remade:
        CLOCK.remade()
    return bool(run.remade)


class _Following:
    """One :func:`follow_shapes` call: what it changed, to undo on an error."""

    def __init__(self, nodes: Sequence[Function]) -> None:
        self.nodes = nodes
        self.t = CLOCK.tick()
        self.moved: set[int] = set()  # the variables whose parent followed or was made again
        self.written: list[tuple[Variable, tuple[int, ...], Any, Any, bool]] = []
        # each node followed: its state and set-up shapes before
        self.states: list[tuple[Function, dict[str, Any], Shapes | None]] = []
        self.remade: list[_tracing.Trace] = []
        self.parents: list[tuple[Variable, Any, bool]] = []  # (output, old parent, need_grad)
        self.dropped: set[Function] = set()  # the old nodes of the compositions made again
        self.traces = _outermost_traces(nodes)  # (t0, t1, trace), sorted, not nested

    def all(self) -> None:
        k = 0
        traces = self.traces
        for f in self.nodes:
            while k < len(traces) and traces[k][1] <= f.seq:
                k += 1
            trace = traces[k][2] if k < len(traces) and traces[k][0] < f.seq else None
            if trace is None or trace not in self.remade:  # else a node made again: dropped
                self.visit(f, trace)

    def visit(self, f: Function, trace: _tracing.Trace | None) -> None:
        """Follows ``f`` (or makes its composition ``trace`` again) if it is affected."""
        ins = f.inputs
        now = [x._shape for x in ins]
        seen = _made_for(f)
        stale = any(x.parent in self.dropped for x in ins)
        if seen == now and not stale and not any(id(x) in self.moved for x in ins):
            return
        if trace is not None:
            self.remake(trace)
        elif stale:
            raise ShapeResetError(
                f"reset_shape: the node {f.name} uses a value made inside a composition "
                "that was made again for the new shapes: build this part of the graph again"
            )
        else:
            self.follow(f, seen, now)

    def follow(self, f: Function, seen: Shapes, now: Shapes) -> None:
        self.states.append((f, dict(f.__dict__), _RECORD.get(f)))
        _check_follows(f, seen, now)
        try:
            specs = f.setup_impl(f.inputs)
        except (ValueError, TypeError) as e:  # the new shapes do not fit its arguments
            raise ShapeResetError(
                f"reset_shape: the node {f.name} (made for input shapes {seen}) refuses "
                f"the new input shapes {now}: {e}"
            ) from e
        refs = f._outputs
        outs = [refs()] if type(refs) is OutRef else [r() for r in refs]
        for v, spec in zip(outs, specs, strict=True):
            if v is not None:
                self.take(v, tuple(spec[0]))
        if len(outs) > 1:
            f._out_meta = [(tuple(sp[0]), np.dtype(sp[1])) for sp in specs]
        # at once (undo restores it with the rest of f's state): a composition made again
        # during this run (hd.grad) follows shapes itself, and must see f followed
        _RECORD[f] = now

    def take(self, v: Variable, shape: tuple[int, ...]) -> None:
        """``v`` gets ``shape`` (its value dropped), undoably."""
        self.moved.add(id(v))
        if v._shape != shape:
            self.written.append((v, v._shape, v._data, v._dtype, True))
            record_shape_change(v, self.t, v._shape)
            v._shape, v._data = shape, None

    def remake(self, trace: _tracing.Trace) -> None:
        """Makes the composition of ``trace`` again (static mode) and gives its outputs the
        new nodes as parents, numbered inside the old interval.
        """
        news, fresh = _made_again(trace)
        took: dict[int, Variable] = {}  # id(new output) -> the old Variable in its place
        for ref, v in zip(trace.outs, news, strict=True):
            old = None if ref is None else ref()
            if old is None:
                continue
            if not isinstance(v, Variable) or v.parent is None or v.parent not in fresh:
                raise ShapeResetError(
                    f"reset_shape: {trace.name} made again returns an output it did not make "
                    "(an input or a constant): build this part of the graph again"
                )
            self.splice(old, v)
            took[id(v)] = old
        for f in fresh:  # the new nodes that use an output read it from the old Variable
            if any(id(x) in took for x in f.inputs):
                f.inputs = [took.get(id(x), x) for x in f.inputs]
        self.remade.append(trace)
        self.dropped.update(f for f in self.nodes if trace.t0 < f.seq < trace.t1)

    def splice(self, old: Variable, new: Variable) -> None:
        """``old`` takes the place of ``new`` as the output of ``new``'s parent, undoably."""
        parent = new.parent
        assert parent is not None
        changed = old._shape != new._shape
        self.written.append((old, old._shape, old._data, old._dtype, changed))
        self.parents.append((old, old.parent, old.need_grad))
        if changed:
            record_shape_change(old, self.t, old._shape)
        refs = parent._outputs
        if type(refs) is OutRef:
            parent._outputs = OutRef(old)
        else:
            assert isinstance(refs, list)
            refs[[r() for r in refs].index(new)] = weakref.ref(old)
        old.parent, old.need_grad = parent, new.need_grad
        old._shape, old._dtype, old._data = new._shape, new._dtype, None
        self.moved.add(id(old))

    def undo(self) -> None:
        for old, parent, need in reversed(self.parents):
            old.parent, old.need_grad = parent, need
        for f, state, seen in reversed(self.states):
            f.__dict__.clear()
            f.__dict__.update(state)
            if seen is None:
                _RECORD.pop(f, None)
            else:
                _RECORD[f] = seen
        for v, shape, data, dtype, pushed in reversed(self.written):
            if pushed:
                _RECORD[v].pop()
            v._shape, v._data, v._dtype = shape, data, dtype


def _made_again(trace: _tracing.Trace) -> tuple[list[Any], list[Function]]:
    """Calls the composition of ``trace`` again (static mode): its outputs, and its new
    nodes, numbered inside ``trace``'s interval and recorded as set up for their shapes.
    """
    t0 = CLOCK.tick()
    token = flag_auto_forward.set(False)  # the call links nodes; the forward computes them
    try:
        out = trace.fn(*trace.args, **trace.kwargs)
    except (ValueError, TypeError) as e:
        raise ShapeResetError(
            f"reset_shape: {trace.name} refuses the new shapes of its inputs: {e}"
        ) from e
    finally:
        flag_auto_forward.reset(token)
    t1 = CLOCK.tick()
    news = list(out) if isinstance(out, tuple | list) else [out]
    if len(news) != len(trace.outs):
        raise ShapeResetError(
            f"reset_shape: {trace.name} made again gives {len(news)} outputs, not "
            f"{len(trace.outs)}: build this part of the graph again"
        )
    made = [v for v in news if isinstance(v, Variable) and v.parent is not None]
    fresh = [f for f in topological_order(made) if t0 < f.seq < t1]
    if not CLOCK.renumber(fresh, trace.t0, trace.t1):
        raise ShapeResetError(
            f"reset_shape: {trace.name} made again makes {len(fresh)} nodes, more than fit "
            "between the nodes around its first call: build this part of the graph again"
        )
    for f in fresh:
        _RECORD[f] = [x._shape for x in f.inputs]
    return news, fresh


def _outermost_traces(nodes: Sequence[Function]) -> list[tuple[int, int, Any]]:
    """The traces kept by the outputs of ``nodes``, outermost only, sorted by interval."""
    found: dict[int, Any] = {}
    for f in nodes:
        refs = f._outputs
        for v in [refs()] if type(refs) is OutRef else [r() for r in refs]:
            trace = getattr(v, "_trace", None) if v is not None else None
            if trace is not None:
                found[id(trace)] = trace
    out: list[tuple[int, int, Any]] = []
    for trace in sorted(found.values(), key=lambda tr: (tr.t0, -tr.t1)):
        if out and trace.t1 <= out[-1][1]:
            continue  # inside the one before: made again with it
        out.append((trace.t0, trace.t1, trace))
    return out


def _check_follows(f: Function, seen: Shapes, now: Shapes) -> None:
    """Raises ShapeResetError unless ``f`` may run again on inputs of shapes ``now``."""
    why = ""
    if f._shape_bound == "hd.grad":
        why = (
            "it was made by the rules of hd.vmap, or of hd.grad in define-by-run mode (they "
            "hold the shapes they were made for): call hd.grad or hd.vmap again after "
            "reset_shape"
        )
    elif f._shape_bound:
        why = (
            "it holds a number computed from the old shapes by the function that made it; "
            "build this part of the graph again for the new shapes"
        )
    elif not f.follows_rank and any(len(a) != len(b) for a, b in zip(seen, now, strict=True)):
        why = "its inputs changed rank (reset_shape keeps every input's number of axes)"
    elif not f.follows(seen, now):
        why = (
            "it holds arguments set up for the old shapes (a shape, a size, an index); "
            "build this part of the graph again for the new shapes"
        )
    if why:
        raise ShapeResetError(
            f"reset_shape: the node {f.name} (made for input shapes {seen}) cannot follow "
            f"the new input shapes {now}: {why}"
        )


_variable.register(reset_shape=reset_shape)  # Variable.reset_shape
