"""The engine: topological order, static forward, and the reverse pass.

One reverse pass serves both ways of differentiating (see ``function.py``):
:func:`backward` runs the rules on bare arrays and accumulates into the
leaves' ``.g`` (the fast path); :func:`grad_graph` runs the same rules on
Variables so that the gradients are a new differentiable graph.

The engine decides two flags per input of every node it visits:
``prop_down`` (this input needs a gradient: it leads to what was asked for)
and ``accum`` (this input already received a gradient during this pass, so
the rule must add; otherwise it writes, and nothing is zero-filled first).
Everything is iterative: no recursion limit applies to graph depth.
"""

from __future__ import annotations

import contextvars
import gc
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from hodiff.engine import function as _function
from hodiff.engine import variable as _variable
from hodiff.engine.context import _auto_forward, _raw, _trusted, array_module, get_default_context
from hodiff.engine.function import (
    Function,
    GradientShapeError,
    Slot,
    _as_declared,
    _Out,
    array_module_of,
    as_array,
)
from hodiff.engine.variable import FREED, ShapeResetError, Variable, _no_value

__all__ = [
    "PassScope",
    "Pullback",
    "backward",
    "backward_steps",
    "current_pass",
    "forward",
    "grad_graph",
    "grad_values",
    "plan",
    "topological_order",
    "unused_inputs",
]

_by_seq = attrgetter("seq")
_ref = weakref.ref
# accum flags of one- and two-input nodes, by "already has a gradient" (never mutated)
# (tuples: shared by every pass, so a rule that tried to change one would raise, not leak)
_ACCUM = ((False,), (True,))
_ACCUM2 = ((False, False), (False, True)), ((True, False), (True, True))
_PROP1 = (True,)  # prop_down of a one-input step


def topological_order(roots: Sequence[Variable]) -> list[Function]:
    """Every node the roots depend on, inputs before consumers (iterative DFS)."""
    stack = list(dict.fromkeys([v.parent for v in roots if v.parent is not None]))
    seen: set[Function] = set(stack)  # marked when pushed: each node is pushed once
    nodes: list[Function] = []
    append, push, mark = nodes.append, stack.append, seen.add
    while stack:
        f = stack.pop()
        append(f)
        for x in f.inputs:
            p = x.parent
            if p is not None and p not in seen:
                mark(p)
                push(p)
    nodes.sort(key=_by_seq)  # a node is always created after the parents of its inputs
    return nodes


def nodes_since(roots: Sequence[Variable], start: int) -> list[Function]:
    """The nodes made after the clock read ``start`` (``Function.seq > start``) that the
    roots depend on, inputs before consumers: the graph of one call, without walking what
    it reads from older nodes (a node reads only variables made before it, so what an older
    node depends on is older still). Its cost is that of the new nodes, however large the
    older graph. (``topological_order`` is this walk without the bound: ``nodes_since(r, 0)``
    gives the same nodes, but the bound's test on every edge would cost the plan of every
    reverse pass about 10% of its walk.)
    """
    stack: list[Function] = []
    seen: set[Function] = set()
    for v in roots:
        p = v.parent
        if p is not None and p.seq > start and p not in seen:
            seen.add(p)
            stack.append(p)
    nodes: list[Function] = []
    append, push, mark = nodes.append, stack.append, seen.add
    while stack:
        f = stack.pop()
        append(f)
        for x in f.inputs:
            p = x.parent
            if p is not None and p.seq > start and p not in seen:
                mark(p)
                push(p)
    nodes.sort(key=_by_seq)
    return nodes


# Counts the passes that freed values (clear_buffer=True): a cached plan is checked again for
# freed values only when this changed since its last check, so the hot path pays nothing.
_frees = [0]
# A node number (Function.seq) taken at the last free: nodes created later hold all their values.
_last_free = [-1]


def _freed() -> None:
    _frees[0] += 1
    _last_free[0] = next(_function._seq)


def check_values(plan: _Plan, where: str) -> None:
    """Raises RuntimeError if a value some step's backward rule reads was freed (or never
    computed), or was set by the user (``.d = ...``) after the node computed with it.

    Run before a reverse pass, so that a failing one touches no gradient. A node's values
    are as of ``max(seq, _computed)`` (its link, or the last forward pass that recomputed
    it); a node whose values are newer than the last free and the last user write is not
    looked at, nor is a plan whose nodes were all created after them.
    """
    last = _last_free[0]
    if _variable._last_write[0] > last:
        last = _variable._last_write[0]
    if not plan.nodes or plan.nodes[0].seq > last:
        return
    for f in plan.nodes:
        t = f.seq
        if f._computed > t:
            t = f._computed
        if t > last:
            continue
        _check_not_reset(f, t, where)
        need = f.need_inputs
        if need is not False:
            for i, x in enumerate(f.inputs):
                if need is True or i in need:
                    if x._data is None and x.parent is not None:
                        raise RuntimeError(f"{where}: {f.name} needs its input {i}, {_no_value(x)}")
                    if getattr(x, "_version", 0) > t:
                        raise RuntimeError(_changed(where, f, f"input {i}", x))
        if f.need_outputs:
            for i, r in enumerate(f._outputs):
                o = r()
                if f._ydata is None and (o is None or o._data is None):
                    raise RuntimeError(
                        f"{where}: {f.name} needs its output {i} (shape {f.output_shape(i)}), "
                        "which has no value: its static graph was not run yet, or "
                        "clear_buffer=True freed it; call .forward() on the result first"
                    )
                if o is not None and getattr(o, "_version", 0) > t:
                    raise RuntimeError(_changed(where, f, f"output {i}", o))


def _check_not_reset(f: Function, t: int, where: str) -> None:
    """Raises RuntimeError if an input of ``f`` was given a new shape after time ``t``."""
    for i, x in enumerate(f.inputs):
        hist = getattr(x, "_shape_history", None)
        if hist and hist[-1][0] > t:
            before = hist[-1][1]
            shape = "an earlier shape" if before is None else f"shape {before}"
            raise RuntimeError(
                f"{where}: {f.name} computed with its input {i} of {shape}, "
                f"which was reset to {x._shape} since (reset_shape); call .forward() on "
                "the output first"
            )


def _changed(where: str, f: Function, which: str, x: Variable) -> str:
    """Why ``f``'s backward cannot read ``x`` (its ``which``): the user set its value since."""
    kind = "a leaf" if x.parent is None else f"the output of {x.parent.name}"
    return (
        f"{where}: {f.name} reads its {which} ({kind}, shape {x._shape}, dtype {x._dtype}), "
        f"but its value was changed after {f.name} computed with it (.d set); call .forward() "
        "on the output to recompute, or build the graph again"
    )


# The nodes a variable depends on never change once it exists (inputs are fixed at link time).
_ORDERS: weakref.WeakKeyDictionary[Variable, list[Function]] = weakref.WeakKeyDictionary()


def forward(roots: Sequence[Variable], clear_buffer: bool = False) -> None:
    """Recomputes every node the roots depend on from the current leaf values.

    With ``clear_buffer``, an intermediate value is freed once its last consumer
    has run, unless some backward rule needs it or it is a root. One root
    without ``clear_buffer`` (a static graph re-run) runs its flat schedule,
    made on the first run (see :func:`_run_schedule`).
    """
    if len(roots) == 1 and not clear_buffer:  # a static graph run many times is ordered once
        _run_schedule(roots[0])
        return
    nodes = _forward_order(roots)
    now = next(_function._seq)  # the nodes' values are as of now (before this pass frees)
    keep = {id(v) for v in roots}
    uses: dict[int, int] = {}
    if clear_buffer:
        _freed()
        needed: set[int] = set()
        for f in nodes:
            for i, x in enumerate(f.inputs):
                if x.parent is not None:
                    uses[id(x)] = uses.get(id(x), 0) + 1
                    if f.differentiable and f.needs_input(i):
                        needed.add(id(x))
        keep |= needed
    for f in nodes:
        ys: list[Any] = [None] * f.n_outputs
        xs = [x.d for x in f.inputs]
        f.forward_impl(xs, ys)
        _set_outputs(f, xs, ys)
        f._computed = now
        if clear_buffer:
            for x in f.inputs:
                k = id(x)
                if x.parent is not None:
                    uses[k] -= 1
                    if uses[k] == 0 and k not in keep:
                        x._data = None
    if len(roots) == 1:
        _plan_checked(roots[0])


# the value of ``variable._reshapes`` at the last shape check of a root's graph
_FOLLOWED: weakref.WeakKeyDictionary[Variable, int] = weakref.WeakKeyDictionary()


def _shapes_followed(root: Variable | None, nodes: Sequence[Function]) -> bool:
    """Before a forward pass: lets the graph follow any leaf's new shape (``reset_shape``).

    Costs one read in a process that never resets a shape, and one dictionary read per
    pass of a root checked since the last reset. Returns whether the graph changed (a
    composition was made again): the caller's order of ``nodes`` is then stale.
    """
    epoch = _variable._reshapes[0]
    if not epoch or (root is not None and _FOLLOWED.get(root) == epoch):
        return False
    remade = follow_shapes(nodes)
    if remade:  # every cached order, schedule and plan may hold a node made again
        _ORDERS.clear()
        _SCHEDULES.clear()
        _PLANS.clear()
        _FOLLOWED.clear()
    if root is not None:
        _FOLLOWED[root] = epoch
    return remade


def shapes_current(roots: Sequence[Variable]) -> list[Function] | None:
    """Lets the graph of ``roots`` follow its leaves' new shapes (``reset_shape``) now,
    before its shapes are read (``hd.grad`` records a gradient graph from them). Returns
    the nodes of that graph in order (for :func:`plan`'s ``order``) when it walked them and
    made nothing again, else None.
    """
    if not _variable._reshapes[0]:
        return None
    nodes = topological_order(roots)
    return None if _shapes_followed(None, nodes) else nodes


def _shape_at(x: Variable, t: float) -> tuple[int, ...] | None:
    """The shape ``x`` had at clock time ``t`` (before its first shape change after ``t``);
    None if that change is older than those ``x`` remembers (``variable.SHAPE_HISTORY``).
    """
    for when, before in getattr(x, "_shape_history", ()):
        if when > t:
            return before
    return x._shape


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
    a composition was made again.
    """
    run = _Following(nodes)
    try:
        run.all()
    except BaseException:
        run.undo()
        raise
    return bool(run.remade)


class _Following:
    """One :func:`follow_shapes` call: what it changed, to undo on an error."""

    def __init__(self, nodes: Sequence[Function]) -> None:
        self.nodes = nodes
        self.t = next(_function._seq)
        self.moved: set[int] = set()  # the variables whose parent followed or was made again
        self.written: list[tuple[Variable, tuple[int, ...], Any, Any, bool]] = []
        self.followed: list[tuple[Function, list[tuple[int, ...]]]] = []
        self.states: list[tuple[Function, dict[str, Any]]] = []  # arguments before following
        self.remade: list[_function.Trace] = []
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
            if trace is not None and trace in self.remade:
                continue  # a node of a composition made again: dropped
            ins = f.inputs
            now = [x._shape for x in ins]
            seen = getattr(f, "_in_shapes", None)  # not f.__dict__: that would make one per node
            if seen is None:
                seen = [_shape_at(x, f.seq) for x in ins]
                if None in seen:
                    i = seen.index(None)
                    raise ShapeResetError(
                        f"reset_shape: the node {f.name} was made before the last "
                        f"{_variable.SHAPE_HISTORY} shape changes of its input {i} (now of "
                        f"shape {ins[i]._shape}) and has not run since, so the shapes it was "
                        "made for are no longer known: build this graph again (or run it "
                        "after fewer resets)"
                    )
                if any(getattr(x, "_shape_history", None) for x in ins):
                    # a fact (what f was made for) kept on f, undone or not: the record of
                    # its inputs' shape changes is bounded, and f may never need to follow
                    f._in_shapes = seen  # type: ignore[attr-defined]
            stale = any(x.parent in self.dropped for x in ins)
            if seen == now and not stale and not any(id(x) in self.moved for x in ins):
                continue
            if trace is not None:
                self.remake(trace)
            elif stale:
                raise ShapeResetError(
                    f"reset_shape: the node {f.name} uses a value made inside a composition "
                    "that was made again for the new shapes: build this part of the graph again"
                )
            else:
                self.follow(f, seen, now)

    def follow(self, f: Function, seen: list[tuple[int, ...]], now: list[tuple[int, ...]]) -> None:
        self.states.append((f, dict(f.__dict__)))
        _check_follows(f, seen, now)
        try:
            specs = f.setup_impl(f.inputs)
        except (ValueError, TypeError) as e:  # the new shapes do not fit its arguments
            raise ShapeResetError(
                f"reset_shape: the node {f.name} (made for input shapes {seen}) refuses "
                f"the new input shapes {now}: {e}"
            ) from e
        refs = f._outputs
        outs = [refs()] if type(refs) is _Out else [r() for r in refs]
        for v, spec in zip(outs, specs, strict=True):
            if v is not None:
                self.take(v, tuple(spec[0]))
        if len(outs) > 1:
            f._out_meta = [(tuple(sp[0]), np.dtype(sp[1])) for sp in specs]
        # at once (undo restores it with the rest of f's state): a composition made again
        # during this run (hd.grad) follows shapes itself, and must see f followed
        f._in_shapes = now  # type: ignore[attr-defined]
        self.followed.append((f, now))

    def take(self, v: Variable, shape: tuple[int, ...]) -> None:
        """``v`` gets ``shape`` (its value dropped), undoably."""
        self.moved.add(id(v))
        if v._shape != shape:
            self.written.append((v, v._shape, v._data, v._dtype, True))
            self._history(v)
            v._shape, v._data = shape, None

    def _history(self, v: Variable) -> None:
        _variable.record_shape_change(v, self.t, v._shape)

    def remake(self, trace: _function.Trace) -> None:
        """Makes the composition of ``trace`` again (static mode) and gives its outputs the
        new nodes as parents, numbered inside the old interval.
        """
        t0 = next(_function._seq)
        token = _auto_forward.set(False)  # the call links nodes; the forward computes them
        try:
            out = trace.fn(*trace.args, **trace.kwargs)
        except (ValueError, TypeError) as e:
            raise ShapeResetError(
                f"reset_shape: {trace.name} refuses the new shapes of its inputs: {e}"
            ) from e
        finally:
            _auto_forward.reset(token)
        t1 = next(_function._seq)
        news = list(out) if isinstance(out, tuple | list) else [out]
        if len(news) != len(trace.outs):
            raise ShapeResetError(
                f"reset_shape: {trace.name} made again gives {len(news)} outputs, not "
                f"{len(trace.outs)}: build this part of the graph again"
            )
        made = [v for v in news if isinstance(v, Variable) and v.parent is not None]
        fresh = [f for f in topological_order(made) if t0 < f.seq < t1]
        _renumber(fresh, trace.t0, trace.t1)
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
            self._history(old)
        refs = parent._outputs
        if type(refs) is _Out:
            parent._outputs = _Out(old)
        else:
            assert isinstance(refs, list)
            refs[[r() for r in refs].index(new)] = weakref.ref(old)
        old.parent, old.need_grad = parent, new.need_grad
        old._shape, old._dtype, old._data = new._shape, new._dtype, None
        self.moved.add(id(old))

    def undo(self) -> None:
        for old, parent, need in reversed(self.parents):
            old.parent, old.need_grad = parent, need
        for f, state in reversed(self.states):
            f.__dict__.clear()
            f.__dict__.update(state)
        for v, shape, data, dtype, pushed in reversed(self.written):
            if pushed:
                v._shape_history.pop()
            v._shape, v._data, v._dtype = shape, data, dtype


def _outermost_traces(nodes: Sequence[Function]) -> list[tuple[float, float, Any]]:
    """The traces kept by the outputs of ``nodes``, outermost only, sorted by interval."""
    found: dict[int, Any] = {}
    for f in nodes:
        refs = f._outputs
        for v in [refs()] if type(refs) is _Out else [r() for r in refs]:
            trace = getattr(v, "_trace", None) if v is not None else None
            if trace is not None:
                found[id(trace)] = trace
    out: list[tuple[float, float, Any]] = []
    for trace in sorted(found.values(), key=lambda tr: (tr.t0, -tr.t1)):
        if out and trace.t1 <= out[-1][1]:
            continue  # inside the one before: made again with it
        out.append((trace.t0, trace.t1, trace))
    return out


def _renumber(nodes: list[Function], t0: float, t1: float) -> None:
    """Numbers ``nodes`` (in order) inside ``(t0, t1)``: where the nodes they replace were,
    so that every order by number (inputs before consumers) still holds.
    """
    step = (t1 - t0) / (len(nodes) + 1)
    for k, f in enumerate(nodes, 1):
        f.seq = t0 + k * step  # type: ignore[assignment]
        f._in_shapes = [x._shape for x in f.inputs]  # type: ignore[attr-defined]


def _check_follows(f: Function, seen: list[tuple[int, ...]], now: list[tuple[int, ...]]) -> None:
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


def _forward_order(roots: Sequence[Variable]) -> list[Function]:
    """The nodes of a forward pass over ``roots`` (cached for one root), shapes followed."""
    if len(roots) != 1:
        nodes = topological_order(roots)
        return topological_order(roots) if _shapes_followed(None, nodes) else nodes
    cached = _ORDERS.get(roots[0])
    nodes = cached if cached is not None else topological_order(roots)
    _ORDERS[roots[0]] = nodes
    if _shapes_followed(roots[0], nodes):
        nodes = _ORDERS[roots[0]] = topological_order(roots)
    return nodes


def _plan_checked(root: Variable) -> None:
    """Marks the cached plan of ``root`` valid: it reads only values a forward computed and kept."""
    cached = _PLANS.get(root)
    if cached is not None:
        _PLANS[root] = (cached[0], cached[1], _frees[0], _variable._last_write[0])


def _set_outputs(f: Function, xs: list[Any], ys: list[Any]) -> None:
    """Stores the output arrays ``ys`` of ``f`` (computed from ``xs``) in its output Variables."""
    ys = [as_array(y) for y in ys]
    for ref, y in zip(f._outputs, ys, strict=True):
        v = ref()
        if v is not None and y.dtype != v._dtype:  # float16 from int8 as in dynamic mode
            ys = [as_array(y) for y in _as_declared(f, xs, ys, _declared(f))]
            break
    for ref, y in zip(f._outputs, ys, strict=True):
        v = ref()
        if v is not None:
            v._data, v._shape, v._dtype = y, y.shape, y.dtype
    if len(ys) > 1:
        f._out_meta = [(y.shape, y.dtype) for y in ys]
    if f.need_outputs:
        f._ydata = tuple(ys)  # untracked by the collector (see Function._ydata)


# A static graph's flat schedule, per root: one entry per node, in order, with what running it
# needs resolved once. Entries hold the nodes and their inputs (which the root's graph holds
# anyway), never the root itself (it is the weak key); a node's weak references to its outputs
# are read at run time (a re-linked output replaces them, see Function.output_variable).
_Entry = tuple[Any, Sequence[Variable], int, bool, Function]
_SCHEDULES: weakref.WeakKeyDictionary[Variable, tuple[list[_Entry], list[Variable]]] = (
    weakref.WeakKeyDictionary()
)


def _schedule(root: Variable) -> tuple[list[_Entry], list[Variable]]:
    """The flat schedule of ``root``'s graph and the leaves it reads."""
    nodes = _ORDERS.get(root)
    if nodes is None:
        nodes = _ORDERS[root] = topological_order([root])
    entries: list[_Entry] = []
    leaves: dict[Variable, None] = {}
    for f in nodes:
        ins = f.inputs
        for x in ins:
            if x.parent is None:
                leaves[x] = None
        if len(f._outputs) == 1:  # the common case, run inline
            entries.append((f.forward_impl, ins, len(ins), f.need_outputs, f))
        else:
            entries.append((None, ins, len(ins), False, f))
    return entries, list(leaves)


def _run_schedule(root: Variable) -> None:
    """Re-runs a static graph from its flat schedule (planned on the first run).

    Per single-output node: the bound ``forward_impl`` on its inputs' arrays, the
    numpy-scalar fix-up, the output stored; any other case (several outputs, a
    dtype other than declared) goes through :func:`_set_outputs`. About half the
    per-node cost of the general loop.
    """
    cached = _SCHEDULES.get(root)
    if cached is None:
        cached = _SCHEDULES[root] = _schedule(root)
    entries, leaves = cached
    epoch = _variable._reshapes[0]
    if epoch and _FOLLOWED.get(root) != epoch and _shapes_followed(root, [e[4] for e in entries]):
        entries, leaves = _SCHEDULES[root] = _schedule(root)
    for v in leaves:
        if v._data is None:
            v.d  # noqa: B018 (an unfilled leaf reads as zeros, as in the general loop)
    nd = np.ndarray
    now = next(_function._seq)  # the nodes' values are as of now (graph.check_values)
    for fwd, ins, n, need_out, f in entries:
        if n == 1:
            xs = [ins[0]._data]
        elif n == 2:
            xs = [ins[0]._data, ins[1]._data]
        else:
            xs = [x._data for x in ins]
        if fwd is None:
            ys: list[Any] = [None] * f.n_outputs
            f.forward_impl(xs, ys)
            _set_outputs(f, xs, ys)
            f._computed = now
            continue
        ys = [None]
        fwd(xs, ys)
        f._computed = now
        y = ys[0]
        if type(y) is not nd:
            y = as_array(y)
        refs = f._outputs
        out = refs() if type(refs) is _Out else refs[0]()
        if out is not None:
            if (y.dtype is not out._dtype and y.dtype != out._dtype) or y.shape != out._shape:
                _set_outputs(f, xs, [y])  # as declared, or as the dynamic mode would store it
                continue
            out._data = y
        if need_out:
            f._ydata = (y,)
    _plan_checked(root)


class _Plan:
    """Which nodes a reverse pass visits and their prop_down flags.

    Its steps, in forward order, are three lists of the same length (no tuple per step: a
    plan lives through its pass, and every tracked object is one more for the collector to
    traverse): ``nodes``, their ``props`` (prop_down) and ``sends``, the distinct leaf inputs
    each node sends a gradient to (or None). ``leaf_uses`` counts, per leaf, the steps that
    do (a leaf's gradient is final when its last one has run); ``used`` is every variable
    some step sends a gradient to (towards ``wrt`` only).
    """

    __slots__ = ("leaf_uses", "leaves", "nodes", "props", "sends", "used")

    def __init__(
        self,
        roots: Sequence[Variable],
        wrt: Sequence[Variable] | None,
        order: list[Function] | None = None,
    ) -> None:
        # wrt=None: the plain pass, towards every leaf with need_grad.
        # Otherwise towards the given variables (leaf or not), whatever their need_grad.
        # order: the nodes to plan over, in creation order (default: all the roots' nodes).
        self.leaf_uses: dict[Variable, int] = {}
        self.used: set[Variable] = set()
        self.leaves: tuple[Variable, ...] = ()
        self.nodes: list[Function] = []
        self.props: list[Sequence[bool]] = []
        self.sends: list[list[Variable] | None] = []
        if order is None:
            order = topological_order(roots)
        if wrt is None:
            self._plain(order)
        else:
            self._towards(order, set(wrt))

    def _plain(self, order: list[Function]) -> None:
        """Steps towards every leaf with need_grad: a node is visited when an input needs a
        gradient (a leaf with need_grad, or the output of a visited node).
        """
        relevant: set[Variable] = set()
        add_node, add_prop, add_sends = self.nodes.append, self.props.append, self.sends.append
        leaf_uses = self.leaf_uses
        base_rule = Function.backward_impl
        all_leaves: dict[Variable, None] = {}
        for f in order:
            if not f.differentiable:
                continue
            ins = f.inputs
            leaves: list[Variable] | None = None
            prop: Sequence[bool]
            if len(ins) == 1 and ins[0].parent is not None:  # the common case: shared flags
                if ins[0] not in relevant:
                    continue
                prop = _PROP1
            else:
                flags: list[bool] = []  # a plain loop: a comprehension costs a frame (3.11)
                prop = flags
                for x in ins:
                    if x.parent is None:
                        all_leaves[x] = None
                        if x.need_grad:
                            flags.append(True)
                            if leaves is None:
                                leaves = [x]
                                leaf_uses[x] = leaf_uses.get(x, 0) + 1
                            elif x not in leaves:
                                leaves.append(x)
                                leaf_uses[x] = leaf_uses.get(x, 0) + 1
                            continue
                    flags.append(x in relevant)
                if leaves is None and True not in prop:
                    continue
            if type(f).backward_impl is base_rule:
                f.backward_impl([], [], prop, prop)  # raises NotImplementedError naming f
            refs = f._outputs
            if type(refs) is _Out:  # inline: the common case
                v = refs()
                if v is not None:
                    relevant.add(v)
            else:
                _add_alive(refs, relevant)
            add_node(f)
            add_prop(prop)
            add_sends(leaves)
        self.leaves = tuple(all_leaves)

    def _towards(self, order: list[Function], relevant: set[Variable]) -> None:
        """Steps towards the variables in ``relevant`` (a node is visited when an input is
        relevant; its outputs become relevant).
        """
        add_node, add_prop = self.nodes.append, self.props.append
        used = self.used
        base_rule = Function.backward_impl
        for f in order:
            if not f.differentiable:
                continue
            ins = f.inputs
            n = len(ins)
            prop: Sequence[bool]
            if n == 1:  # the common cases, with the shared flag lists
                x = ins[0]
                if x not in relevant:
                    continue
                prop = _PROP1
                used.add(x)
            elif n == 2:
                a, b = ins
                pa, pb = a in relevant, b in relevant
                if not (pa or pb):
                    continue
                prop = _ACCUM2[pa][pb]
                if pa:
                    used.add(a)
                if pb:
                    used.add(b)
            else:
                flags: list[bool] = []
                prop = flags
                for x in ins:
                    if x in relevant:
                        flags.append(True)
                        used.add(x)
                    else:
                        flags.append(False)
                if True not in prop:
                    continue
            if type(f).backward_impl is base_rule:
                f.backward_impl([], [], prop, prop)  # raises NotImplementedError naming f
            refs = f._outputs
            if type(refs) is _Out:  # inline: the common case
                v = refs()
                if v is not None:
                    relevant.add(v)
            else:
                _add_alive(refs, relevant)
            add_node(f)
            add_prop(prop)
        self.sends = [None] * len(self.nodes)  # one list: no leaf is committed


def _add_alive(refs: Iterable[weakref.ref[Variable]], into: set[Variable]) -> None:
    """Adds the outputs still alive (of a multi-output node) to ``into``."""
    for ref in refs:
        v = ref()
        if v is not None:
            into.add(v)


def _in_slots(
    inputs: list[Variable], prop: list[bool], grads: dict[Variable, Any], graph_mode: bool
) -> tuple[list[Slot], list[bool], dict[Variable, Slot]]:
    """One Slot per distinct input (shared when a variable appears twice) and the accum flags."""
    slots: dict[Variable, Slot] = {}
    in_slots = []
    accum = []
    for x, p in zip(inputs, prop, strict=True):
        s = slots.get(x)
        if s is None:
            g = grads.get(x)
            s = slots[x] = Slot(x if graph_mode else x._data, g, x._shape)
            accum.append(g is not None)
        else:  # the same variable again (x * x): add to what the earlier store wrote
            accum.append(p or s.grad is not None)
        in_slots.append(s)
    return in_slots, accum, slots


# Plans of plain passes, per root: a static graph run many times is planned once. The
# ancestors of a variable never change, so a plan stays valid while its leaves' need_grad
# flags do.
# Each with the values of _frees and _last_write when its values were last checked.
_PLANS: weakref.WeakKeyDictionary[Variable, tuple[tuple[bool, ...], _Plan, int, int]] = (
    weakref.WeakKeyDictionary()
)


def _no_leaf_message(root: Variable, plan: _Plan) -> str:
    """Why a plain pass from ``root`` would change nothing (no leaf with need_grad reached)."""
    n = len(plan.leaves)
    return (
        f"backward: the output of {root.parent.name if root.parent else 'a leaf'} (shape "
        f"{root.shape}) depends on no leaf with need_grad=True ({n} leaf input"
        f"{'' if n == 1 else 's'}, all need_grad=False or reached only through "
        "non-differentiable functions), so every .g would stay zero: make the leaves to "
        "differentiate with hd.Variable.from_array(a, need_grad=True) (or set x.need_grad = "
        "True), or take hd.grad(y, x) for a gradient with respect to x"
    )


def _check_leaf_dtypes(plan: _Plan) -> None:
    """An integer or boolean leaf with need_grad: refused, as PyTorch does (a gradient with
    respect to an integer has no meaning; it would come out in another dtype than its leaf).
    """
    for x in plan.leaf_uses:
        if x._dtype.kind != "f":
            raise TypeError(
                f"backward: a leaf of shape {x.shape} and dtype {x.dtype} has need_grad=True; "
                "only float Variables have gradients: make it a float array (e.g. "
                "hd.Variable.from_array(a.astype(np.float64), need_grad=True)) or set "
                "need_grad=False"
            )


def _plain_plan(root: Variable) -> _Plan:
    cached = _PLANS.get(root)
    if cached is not None:
        flags, plan, checked, written = cached
        if flags == tuple([x.need_grad for x in plan.leaves]):
            if checked != _frees[0] or written != _variable._last_write[0]:
                check_values(plan, "backward")
                _PLANS[root] = (flags, plan, _frees[0], _variable._last_write[0])
            return plan
    plan = _Plan([root], None)
    _check_leaf_dtypes(plan)
    check_values(plan, "backward")
    _PLANS[root] = (
        tuple([x.need_grad for x in plan.leaves]),
        plan,
        _frees[0],
        _variable._last_write[0],
    )
    return plan


def _check_seed(root: Variable, grad: Any, where: str) -> Any:
    if isinstance(grad, Variable):
        grad = grad.d
    xp = array_module(root._data) if root._data is not None else get_default_context().xp
    if grad is None:
        return xp.ones(root.shape, dtype=root._grad_dtype())
    grad = xp.asarray(grad, dtype=root._grad_dtype())
    if grad.shape != root.shape:
        if grad.ndim == 0:
            return xp.full(root.shape, grad, dtype=root._grad_dtype())
        raise ValueError(
            f"{where}: grad of shape {grad.shape} does not match the output shape {root.shape}"
        )
    return grad


def backward(
    root: Variable, grad: Any = None, clear_buffer: bool = False, retain_grad: bool = False
) -> None:
    """Plain reverse pass from ``root`` (see :meth:`Variable.backward`): runs it to the end.

    The collector is paused while it runs, as in :func:`grad_graph` (``iter_grads``, which
    hands control back to the caller between gradients, is not paused).
    """
    _pause_collector()
    try:
        for _ in backward_steps(root, grad, clear_buffer, retain_grad):
            pass
    finally:
        _resume_collector()


def backward_steps(
    root: Variable, grad: Any = None, clear_buffer: bool = False, retain_grad: bool = False
) -> Iterator[Variable]:
    """The plain reverse pass from ``root`` as a generator: it runs only while iterated.

    Rules run on bare arrays and nothing is recorded. Accumulates into ``.g``
    of every leaf with need_grad. An intermediate variable's gradient is freed
    once the node that made the variable has consumed it; with ``retain_grad``
    it is stored in the variable's ``.g`` instead (overwritten per pass). Yields
    each leaf as soon as its gradient is final (all its consumers have run),
    for ``iter_grads``; :func:`backward` is the pass run to the end.
    """
    if root.parent is None and not root.need_grad:
        raise RuntimeError(
            f"backward: this Variable (shape {root.shape}) has no graph and need_grad=False, so "
            "nothing can be differentiated (was it computed under hd.no_grad()?)"
        )
    if root._data is None and root.parent is not None:
        raise RuntimeError(f"backward: {_no_value(root)}")
    seed = _check_seed(root, grad, "backward")
    plan = _plain_plan(root)
    if root.parent is not None and not plan.leaf_uses:
        raise RuntimeError(_no_leaf_message(root, plan))
    grads: dict[Variable, Any] = {root: seed}
    # arrays that may be shared (seeds, every gy handed to a rule, every array stored in a
    # leaf), by id, each with a weak reference that tells a live one from a dead one whose id
    # a new array took over: a leaf never takes a shared array over (see _commit)
    handed: dict[int, Any] = {}
    _hand(handed, seed)
    if root.parent is None:
        if root.need_grad:
            _commit(root, seed, handed)
            yield root
        return
    root._grad = seed if retain_grad else FREED
    if clear_buffer:
        _freed()
    yield from _plain_pass(plan, grads, _NOTHING, handed, root, retain_grad, clear_buffer)


_NOTHING: frozenset[Variable] = frozenset()


def _out_slots(
    f: Function,
    grads: dict[Variable, Any],
    wanted: set[Variable] | frozenset[Variable],
    keep: bool | None,
    root: Variable | None,
    handed: dict[int, Any],
    graph_mode: bool,
    force: bool = False,
) -> list[Slot]:
    """The output slots of a multi-output node (empty if no gradient reached it, unless
    ``force``: a node with work left for it in the pass's handoff).

    An output that received no gradient gets zeros (rules never see None).
    """
    ydata = f._ydata
    outs = [r() for r in f._outputs]
    gys = [None if o is None else grads.get(o) if o in wanted else grads.pop(o, None) for o in outs]
    if not force and all(g is None for g in gys):
        return []
    slots = []
    for i, o in enumerate(outs):
        g = gys[i]
        if graph_mode:
            y = f.output_variable(i) if f.need_outputs else o
            if g is None:
                g = Variable.from_array(_zeros_like_output(f, i))
        else:
            if g is None:
                g = _zeros_like_output(f, i)
            elif keep is not None and o is not root:
                o._grad = g if keep else FREED  # type: ignore[union-attr]
            _hand(handed, g)
            y = ydata[i] if ydata is not None else (o._data if o is not None else None)
        slots.append(Slot(y, g, g.shape))
    return slots


def _recording_pass(
    plan: _Plan, grads: dict[Variable, Any], wanted: set[Variable] | frozenset[Variable]
) -> None:
    """``hd.grad``'s reverse pass: the rules run on Variables and record the gradient graph.

    For each step of the plan, last first: take the gradient of the node's outputs out
    of ``grads`` (leaving those of ``wanted`` variables there), call ``backward_impl``
    and put the input gradients it stored into ``grads``. A node that no gradient
    reached is skipped. One- and two-input nodes reuse the pass's slots (a slot is only
    valid during the call); other nodes take :func:`_run_general`.
    """
    x_slot, b_slot, y_slot = Slot(None, None, ()), Slot(None, None, ()), Slot(None, None, ())
    x_slots, y_slots, ab_slots = [x_slot], [y_slot], [x_slot, b_slot]
    accum1 = _ACCUM
    scope = _pass.set(None)  # its rules record: no plain pass's scope is theirs
    try:
        for f, prop in zip(reversed(plan.nodes), reversed(plan.props), strict=True):
            refs = f._outputs
            out_slots: list[Slot] = y_slots
            if type(refs) is _Out:
                o = refs()
                gy = None if o is None else grads.get(o) if o in wanted else grads.pop(o, None)
                if gy is None:
                    continue
                if o._data is None and f._ydata is not None:  # type: ignore[union-attr]
                    o._data = f._ydata[0]  # type: ignore[union-attr]  # freed, but retained
                y_slot.data, y_slot.grad, y_slot.shape = o, gy, o._shape  # type: ignore[union-attr]
            else:
                out_slots = _out_slots(f, grads, wanted, None, None, {}, True)
                if not out_slots:
                    continue
            inputs = f.inputs
            n = len(inputs)
            if n == 1:
                x = inputs[0]
                g = grads.get(x)
                x_slot.data, x_slot.grad, x_slot.shape = x, g, x._shape
                f.backward_impl(x_slots, out_slots, prop, accum1[g is not None])
                if x_slot.grad is not None:
                    grads[x] = x_slot.grad
            elif n == 2 and inputs[0] is not inputs[1]:
                a, b = inputs
                ga, gb = grads.get(a), grads.get(b)
                x_slot.data, x_slot.grad, x_slot.shape = a, ga, a._shape
                b_slot.data, b_slot.grad, b_slot.shape = b, gb, b._shape
                f.backward_impl(ab_slots, out_slots, prop, _ACCUM2[ga is not None][gb is not None])
                if x_slot.grad is not None:
                    grads[a] = x_slot.grad
                if b_slot.grad is not None:
                    grads[b] = b_slot.grad
            else:
                _run_general(f, prop, out_slots, grads, True)
            x_slot.data = x_slot.grad = b_slot.data = b_slot.grad = y_slot.data = y_slot.grad = None
    except GradientShapeError as e:
        raise GradientShapeError(f"{f.name}: backward_impl: {e}") from None
    finally:
        _pass.reset(scope)


class PassScope:
    """What one plain reverse pass shares with the rules it runs (see :func:`current_pass`).

    ``handoff``: a place where a rule may leave work for a node that the pass visits
    later (see :meth:`visits`), keyed by that node (a node that reuses what an earlier
    one computed on the same values, e.g. a checkpoint's recomputation). A node that has
    an entry here when its turn comes runs even when no gradient reached its outputs
    (with zero gradients), so that nothing left for it is lost; whatever is left when the
    pass ends (also when it stops early) is dropped with the pass, so no entry outlives
    it.

    ``freed``: the bytes of the values this pass has freed so far (``clear_buffer``: the
    arrays whose references its nodes' outputs dropped; an array the caller still holds,
    e.g. through ``.d``, counts though it stays), and ``held``: the bytes that entries of
    ``handoff`` hold (a rule adds what it leaves there, the node that takes it subtracts
    it). A rule that could spare work by keeping more alive may spend ``freed - held``:
    what it keeps for that is then at most what the pass dropped before (it is up to the
    rule that nothing else it makes later counts on that memory).
    """

    __slots__ = ("_nodes", "_plan", "freed", "handoff", "held")

    def __init__(self, plan: _Plan) -> None:
        self.handoff: dict[Function, Any] = {}
        self.freed = 0
        self.held = 0
        self._plan = plan
        self._nodes: set[Function] | None = None

    def visits(self, f: Function) -> bool:
        """Whether ``f`` is a step of this pass (it runs when a gradient reaches it, or
        when work was left for it in ``handoff``). Steps run in the reverse order of
        creation: a node made before the one whose rule runs now is visited later.
        """
        if self._nodes is None:
            self._nodes = set(self._plan.nodes)
        return f in self._nodes


_pass: contextvars.ContextVar[PassScope | None] = contextvars.ContextVar(
    "hodiff_pass", default=None
)


def current_pass() -> PassScope | None:
    """The plain reverse pass whose rule runs now: the innermost one.

    None outside of a plain pass and while ``hd.grad`` records (its rules build graphs;
    they share nothing through the pass). A rule that runs a pass of its own (over a graph
    it made) reads this first: the inner pass has its own scope.
    """
    return _pass.get()


def _left_for(f: Function, handoff: dict[Function, Any]) -> Any:
    """Zeros for the output of a one-output node that no gradient reached, if work was
    left for it in the pass's handoff (it then runs); otherwise None (it is skipped).
    """
    return _zeros_of(f, 0) if handoff and f in handoff else None


def _zeros_of(f: Function, i: int) -> Any:
    """Zeros of the shape and dtype of ``f``'s output ``i`` (alive or not)."""
    meta = getattr(f, "_out_meta", None)
    if meta is None:
        o = f._outputs[i]()
        if o is None:
            raise RuntimeError(f"{f.name}: output {i} is gone and its shape was not recorded")
        meta = [(o._shape, o._dtype)] * (i + 1)
    shape, dtype = meta[i]
    xp = array_module_of(*f.inputs)
    return xp.zeros(shape, dtype=dtype if dtype.kind == "f" else np.float64)


def _plain_pass(
    plan: _Plan,
    grads: dict[Variable, Any],
    wanted: set[Variable] | frozenset[Variable],
    handed: dict[int, Any],
    root: Variable | None = None,
    keep: bool | None = None,
    clear_buffer: bool = False,
) -> Iterator[Variable]:
    """The plain reverse pass: the rules run on bare arrays (raw mode), recording nothing.

    The steps are those of :func:`_recording_pass`, on arrays. Besides: an output's
    gradient goes into its ``.g`` with ``keep`` (retain_grad), its ``.g`` is marked
    freed with ``keep=False`` and left alone with None; every gradient handed to a rule
    is noted in ``handed`` (a leaf never takes such an array over, see :func:`_commit`);
    a gradient numpy made a scalar (a 0-d result) becomes a 0-d array; with
    ``clear_buffer`` values are freed once used; the plan's leaves are committed into
    ``.g`` and yielded as soon as final (for ``iter_grads``). Its rules see its
    :class:`PassScope` (:func:`current_pass`); a node with an entry in the scope's handoff
    runs even when no gradient reached it. The loop is one frame on purpose: a call per
    node would cost about 10% of the pass (bench/overhead.py).
    """
    leaf_uses = dict(plan.leaf_uses)  # counted down during the pass; the plan may be reused
    x_slot, b_slot, y_slot = Slot(None, None, ()), Slot(None, None, ()), Slot(None, None, ())
    x_slots, y_slots, ab_slots = [x_slot], [y_slot], [x_slot, b_slot]
    nd, freed, accum1 = np.ndarray, FREED, _ACCUM  # locals: read once per node
    mark = keep is not None
    scope = PassScope(plan)
    handoff = scope.handoff  # filled by rules during the pass (empty: falsy, one test)
    token: Any = _raw.set(True)
    stoken: Any = _pass.set(scope)
    try:
        # zip reuses its tuple: nothing is allocated per step
        for f, prop, leaves in zip(
            reversed(plan.nodes), reversed(plan.props), reversed(plan.sends), strict=True
        ):
            refs = f._outputs
            out_slots: list[Slot] = y_slots
            if type(refs) is _Out:
                o = refs()
                gy = None if o is None else grads.get(o) if o in wanted else grads.pop(o, None)
                if gy is None and (gy := _left_for(f, handoff)) is None:
                    # no gradient reached the node: its leaves are counted all the same
                    yield from _skipped(f, leaves, leaf_uses, grads, handed, root, clear_buffer)
                    continue
                if mark and o is not None and o is not root:
                    o._grad = gy if keep else freed
                handed[id(gy)] = _ref(gy) if type(gy) is nd else _weakly(gy)  # see _commit
                ydata = f._ydata
                y_slot.data = ydata[0] if ydata is not None else o._data if o is not None else None
                y_slot.grad, y_slot.shape = gy, gy.shape if o is None else o._shape
            else:
                force = bool(handoff) and f in handoff
                out_slots = _out_slots(f, grads, wanted, keep, root, handed, False, force)
                if not out_slots:
                    yield from _skipped(f, leaves, leaf_uses, grads, handed, root, clear_buffer)
                    continue
            inputs = f.inputs
            n = len(inputs)
            if n == 1:  # the common case, without allocations
                x = inputs[0]
                g = grads.get(x)
                x_slot.data, x_slot.grad, x_slot.shape = x._data, g, x._shape
                f.backward_impl(x_slots, out_slots, prop, accum1[g is not None])
                g = x_slot.grad
                if g is not None:
                    grads[x] = g if type(g) is nd else as_array(g)
            elif n == 2 and inputs[0] is not inputs[1]:  # without allocations
                a, b = inputs
                ga, gb = grads.get(a), grads.get(b)
                x_slot.data, x_slot.grad, x_slot.shape = a._data, ga, a._shape
                b_slot.data, b_slot.grad, b_slot.shape = b._data, gb, b._shape
                f.backward_impl(ab_slots, out_slots, prop, _ACCUM2[ga is not None][gb is not None])
                ga, gb = x_slot.grad, b_slot.grad
                if ga is not None:
                    grads[a] = ga if type(ga) is nd else as_array(ga)
                if gb is not None:
                    grads[b] = gb if type(gb) is nd else as_array(gb)
            else:
                _run_general(f, prop, out_slots, grads, False)
            x_slot.data = x_slot.grad = b_slot.data = b_slot.grad = y_slot.data = y_slot.grad = None
            if clear_buffer:
                scope.freed += _free_values(f, root)
            if leaves and (done := _final_leaves(leaves, leaf_uses, grads, handed)):
                _raw.reset(token)  # user code runs between yields: not in raw mode,
                _pass.reset(stoken)  # nor in this pass
                token = stoken = None
                yield from done
                token = _raw.set(True)
                stoken = _pass.set(scope)
    except GradientShapeError as e:
        raise GradientShapeError(f"{f.name}: backward_impl: {e}") from None
    finally:
        _leave(token, stoken, handoff)


def _leave(token: Any, stoken: Any, handoff: dict[Function, Any]) -> None:
    """The end of a plain pass: its modes reset (those not reset while it yields), and
    what was left in its handoff dropped.
    """
    if token is not None:
        _raw.reset(token)
    if stoken is not None:
        _pass.reset(stoken)
    handoff.clear()


def _skipped(
    f: Function,
    leaves: list[Variable] | None,
    leaf_uses: dict[Variable, int],
    grads: dict[Variable, Any],
    handed: dict[int, Any],
    root: Variable | None,
    clear_buffer: bool,
) -> Iterator[Variable]:
    """A node of the plain pass that no gradient reached: its values are freed (with
    ``clear_buffer``) and the leaves it would have sent to are counted down, so that a leaf
    whose other consumers ran is still committed (e.g. a weight reached only through a
    recorded gradient graph, whose forward node gets no gradient). What it yields, the
    user's code sees outside raw mode and outside the pass's scope.
    """
    if clear_buffer:
        scope = _pass.get()
        n = _free_values(f, root)
        if scope is not None:
            scope.freed += n
    if leaves:
        done = _final_leaves(leaves, leaf_uses, grads, handed)
        if done:
            token, stoken = _raw.set(False), _pass.set(None)
            try:
                yield from done
            finally:
                _pass.reset(stoken)
                _raw.reset(token)


def _run_general(
    f: Function,
    prop: Sequence[bool],
    out_slots: list[Slot],
    grads: dict[Variable, Any],
    graph_mode: bool,
) -> None:
    """Runs the rule of a node with more than two inputs or a repeated one (``x * x``)."""
    in_slots, accum, slots = _in_slots(list(f.inputs), list(prop), grads, graph_mode)
    f.backward_impl(in_slots, out_slots, prop, accum)
    for v, s in slots.items():
        g = s.grad
        if g is not None:
            grads[v] = g if graph_mode or type(g) is np.ndarray else as_array(g)


def _free_values(f: Function, root: Variable | None) -> int:
    """``clear_buffer``: frees the values of ``f``'s outputs (not the root's) once it ran;
    returns the bytes freed (of arrays that own their memory).
    """
    f._ydata = None
    n = 0
    for r in f._outputs:
        o = r()
        if o is not None and o is not root:
            a = o._data
            if a is not None and getattr(a, "base", 0) is None:
                n += a.nbytes
            o._data = None
    return n


def _final_leaves(
    leaves: list[Variable],
    leaf_uses: dict[Variable, int],
    grads: dict[Variable, Any],
    handed: dict[int, Any],
) -> list[Variable]:
    """Counts down the leaves a step sent gradients to; commits those now final into ``.g``."""
    done = []
    for x in leaves:
        left = leaf_uses[x] - 1
        leaf_uses[x] = left
        if left == 0:
            g = grads.pop(x, None)
            if g is not None:
                _commit(x, g, handed)
                done.append(x)
    return done


def _declared(f: Function) -> list[Any]:
    """The dtypes ``f``'s outputs were set up with."""
    meta = getattr(f, "_out_meta", None)
    if meta is not None:
        return [m[1] for m in meta]
    return [r()._dtype for r in f._outputs]  # type: ignore[union-attr]


def _zeros_like_output(f: Function, i: int) -> Any:
    """Zeros for an output that received no gradient (a multi-output node)."""
    shape, dtype = f._out_meta[i]
    xp = array_module_of(*f.inputs)
    return xp.zeros(shape, dtype=dtype if dtype.kind == "f" else np.float64)


def _weakly(a: Any) -> Any:
    """A weak reference to ``a``, or ``a`` itself if it has none (a numpy scalar)."""
    try:
        return _ref(a)
    except TypeError:
        return a


def _hand(handed: dict[int, Any], a: Any) -> None:
    """Records ``a`` as given elsewhere (see :func:`_is_handed`)."""
    handed[id(a)] = _weakly(a)


def _is_handed(handed: dict[int, Any], a: Any) -> bool:
    """Whether ``a`` itself (not a dead array whose id it reuses) was recorded by :func:`_hand`."""
    r = handed.get(id(a))
    return r is not None and (r is a or (type(r) is weakref.ref and r() is a))


def _commit(leaf: Variable, g: Any, handed: dict[int, Any]) -> None:
    """Adds ``g`` into ``leaf.g``; the first write takes ``g`` itself when nobody else holds it."""
    if g.shape != leaf._shape:
        raise GradientShapeError(
            f"backward: the gradient of a leaf of shape {leaf._shape} came out with shape "
            f"{g.shape}: a backward rule stored a gradient of another shape than its input"
        )
    buf = leaf._grad
    if buf is None:
        dtype = leaf._grad_dtype()
        if g.dtype != dtype:
            g = g.astype(dtype)
        elif g.base is not None or _is_handed(handed, g):
            g = g.copy()  # a view or an array also given elsewhere: we will add into it later
        _hand(handed, g)
        leaf._grad = g
    else:
        buf += g


# The reverse passes (planning them, hd.grad's passes, a plain .backward() run to its end)
# pause Python's cyclic collector (gc). None makes a reference cycle (a node refers to its
# outputs weakly), so a collection during them frees nothing of what they make, and a
# recording pass makes many objects: every full collection would traverse every live node,
# and the cost per node would grow with the size of the graph (bench/graph_size.py). What a
# pass allocated is collected as usual once it returns. Passes in several threads (or
# nested) share one pause: the collector is enabled again when the last one ends, if it was
# enabled when the first began.
_pause_lock = threading.Lock()
_pauses = [0, False]  # the passes in progress; whether the collector was enabled before them


def _pause_collector() -> None:
    with _pause_lock:
        if not _pauses[0]:
            _pauses[1] = gc.isenabled()
            gc.disable()
        _pauses[0] += 1


def _resume_collector() -> None:
    with _pause_lock:
        _pauses[0] -= 1
        if not _pauses[0] and _pauses[1]:
            gc.enable()


def grad_graph(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    seeds: Sequence[Variable],
    plan: _Plan | None = None,
) -> list[Variable | None]:
    """Recording reverse pass: the gradient of each input as a differentiable Variable.

    Returns None for an input that no output depends on.
    """
    if plan is None:
        plan = _Plan(outputs, inputs)
    wanted = set(inputs)
    grads: dict[Variable, Variable] = {}
    for o, s in zip(outputs, seeds, strict=True):
        grads[o] = grads[o] + s if o in grads else s
    token = _trusted.set(True)
    _pause_collector()
    try:
        _recording_pass(plan, grads, wanted)
    finally:
        _resume_collector()
        _trusted.reset(token)
    return [grads.get(x) for x in inputs]


def grad_values(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    seeds: Sequence[Any],
    plan: _Plan,
    clear_buffer: bool = False,
) -> list[Any]:
    """Plain (array) reverse pass: what :func:`grad_graph` computes, as arrays, recording
    nothing (None for an input no output depends on). A result shares memory with no seed,
    no other result and no array it is a view of. With ``clear_buffer`` the values of the
    plan's nodes are freed as the pass goes (as ``.backward(clear_buffer=True)``), for a
    graph that nothing reads after it.
    """
    grads: dict[Variable, Any] = {}
    for o, s in zip(outputs, seeds, strict=True):
        grads[o] = grads[o] + s if o in grads else s
    if clear_buffer:
        _freed()  # a later pass over these nodes checks their values again
    _pause_collector()
    try:
        for _ in _plain_pass(plan, grads, set(inputs), {}, clear_buffer=clear_buffer):
            pass  # a plan towards inputs has no leaves to commit: nothing is yielded
    finally:
        _resume_collector()
    out: list[Any] = []
    for x in inputs:
        g = grads.get(x)
        if g is not None and g.dtype != x._grad_dtype():
            g = g.astype(x._grad_dtype())  # an input's gradient has its dtype, as in backward
        elif g is not None and (
            g.base is not None or any(g is s for s in seeds) or any(g is o for o in out)
        ):
            g = g.copy()
        out.append(g)
    return out


def plan(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    order: list[Function] | None = None,
) -> _Plan:
    """The reverse pass from ``outputs`` towards ``inputs`` (see :func:`grad_graph`); the
    collector is paused while it is made (see :func:`_pause_collector`).

    ``order``: the nodes to plan over, in creation order, when the caller has them: the
    nodes the outputs depend on (:func:`topological_order`), or only those of a part of
    the graph (the pass then stops at that part's inputs). By default all of them.
    """
    _pause_collector()
    try:
        return _Plan(outputs, inputs, order)
    finally:
        _resume_collector()


def unused_inputs(
    outputs: Sequence[Variable], inputs: Sequence[Variable], plan: _Plan | None = None
) -> list[int]:
    """Indices of ``inputs`` that no output depends on (through differentiable nodes)."""
    if plan is None:
        plan = _Plan(outputs, inputs)
    outs = set(outputs)
    return [i for i, x in enumerate(inputs) if x not in plan.used and x not in outs]


class Pullback:
    """``seeds -> sum_k (d roots[k] / d wrt)^T seeds[k]`` by plain (array) reverse passes.

    The plan is made once, so one graph serves many seeds: the rows of a
    Jacobian or Hessian, the products of a Hessian operator. Nothing is
    recorded and no ``.g`` is touched. The returned arrays share memory with
    nothing else: a result that is a seed, or a view, is copied.
    """

    def __init__(self, roots: Sequence[Variable], wrt: Sequence[Variable]) -> None:
        self.roots = list(roots)
        self.wrt = list(wrt)
        self.plan = _Plan(self.roots, self.wrt)
        # the values of _frees and _last_write when the plan's values were last checked
        self._checked = self._written = -1
        self._spent = False  # a pass freed the graph's values (clear_buffer)
        self._reshapes = _variable._reshapes[0]  # the count of shape resets when made

    def __call__(self, seeds: Sequence[Any], clear_buffer: bool = False) -> list[Any]:
        """One reverse pass; a seed of None means ones.

        ``clear_buffer``: the last pass, which frees the values of the nodes it visits as it
        goes (as ``.backward(clear_buffer=True)``): for a graph that only this pullback reads
        (the transforms' own, made from fresh leaves); a later call raises RuntimeError.
        """
        if self._spent:
            raise RuntimeError(
                "pullback: called again after a pass with clear_buffer=True freed the graph's "
                "values; make a new graph (or pass clear_buffer=False to every pass but the last)"
            )
        if self._checked != _frees[0] or self._written != _variable._last_write[0]:
            try:
                check_values(self.plan, "pullback")
            except RuntimeError as e:
                if self._reshapes == _variable._reshapes[0]:
                    raise
                raise RuntimeError(
                    "pullback: a variable of its graph was given a new shape (reset_shape) "
                    "after this pullback was made, and a pullback keeps the graph it was made "
                    f"on: make it again on the graph run for the new shapes ({e})"
                ) from None
            self._checked, self._written = _frees[0], _variable._last_write[0]
        seeds = [_check_seed(r, s, "pullback") for r, s in zip(self.roots, seeds, strict=True)]
        self._spent = clear_buffer
        out = grad_values(self.roots, self.wrt, seeds, self.plan, clear_buffer)
        for i, (x, g) in enumerate(zip(self.wrt, out, strict=True)):
            if g is None:
                xp = array_module(x._data) if x._data is not None else get_default_context().xp
                out[i] = xp.zeros(x.shape, dtype=x._grad_dtype())
        return out


_variable.register(forward=forward, backward=backward)  # Variable.forward / .backward
