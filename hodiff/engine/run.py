"""The forward interpreter: computing a list of nodes from their inputs' values.

:func:`run` is the one interpreter: every node in order, its ``forward_impl`` on its
inputs' arrays, its outputs stored (numpy's scalars made 0-d arrays, a dtype other than
declared cast as in define-by-run mode), its values stamped with the clock's time.
:func:`forward` (``Variable.forward``) runs a static graph with it, its leaves' new
shapes followed first (``follow.py``); the graph of one root keeps its steps, resolved
once (:class:`_Schedule`, in the root's memo on the clock), and re-runs them at about half
the per-node cost of resolving them again. Anything that replays nodes (a checkpoint's
recomputation) calls :func:`run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import variable as _variable
from hodiff.engine.clock import CLOCK
from hodiff.engine.follow import follow_shapes
from hodiff.engine.function import Function, OutRef, as_array, as_declared
from hodiff.engine.order import topological_order
from hodiff.engine.plan import memo, values_checked
from hodiff.engine.variable import Variable

__all__ = ["forward", "run"]

_NONE: tuple[Variable, ...] = ()

# One step per node: its bound forward_impl (None for the general case: several outputs),
# its inputs, how many, whether it keeps its outputs' values (need_outputs), the node, and
# the variables whose values are dropped once it ran. Steps hold the nodes and their inputs
# (which the graph holds anyway), never a root; a node's weak references to its outputs are
# read at run time (a re-linked output replaces them, see Function.output_variable).
_Step = tuple[Any, Sequence[Variable], int, bool, Function, Sequence[Variable]]


def _steps(
    nodes: Sequence[Function], drops: Sequence[Sequence[Variable]] | None = None
) -> tuple[list[_Step], list[Variable]]:
    """The steps of ``nodes`` (with ``drops[k]`` dropped after node ``k``) and the leaves
    they read.
    """
    steps: list[_Step] = []
    leaves: dict[Variable, None] = {}
    for k, f in enumerate(nodes):
        ins = f.inputs
        for x in ins:
            if x.parent is None:
                leaves[x] = None
        drop = _NONE if drops is None else tuple(drops[k])
        if type(f._outputs) is OutRef:  # the common case, run inline
            steps.append((f.forward_impl, ins, len(ins), f.need_outputs, f, drop))
        else:
            steps.append((None, ins, len(ins), False, f, drop))
    return steps, list(leaves)


def _execute(steps: list[_Step], leaves: list[Variable]) -> None:
    """Runs ``steps``: the interpreter's loop, one frame for every node (a call per node
    would cost measurably). An unfilled leaf reads as zeros.
    """
    for v in leaves:
        if v._data is None:
            v.d  # noqa: B018 (fills it)
    nd = np.ndarray
    now = CLOCK.tick()  # the nodes' values are as of now (checks.check_values)
    for fwd, ins, n, need_out, f, drop in steps:
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
        else:
            ys = [None]
            fwd(xs, ys)
            y = ys[0]
            if type(y) is not nd:
                y = as_array(y)
            out = f._outputs()  # type: ignore[operator]
            dtype = y.dtype
            if out is None or (dtype is not out._dtype and dtype != out._dtype):
                _set_outputs(f, xs, [y])  # as declared, or as the dynamic mode would store it
            elif y.shape == out._shape:
                out._data = y
                if need_out:
                    f._ydata = (y,)
            else:
                _set_outputs(f, xs, [y])
        f._computed = now
        for v in drop:
            v._data = None


def run(nodes: Sequence[Function], drops: Sequence[Sequence[Variable]] | None = None) -> None:
    """Computes ``nodes`` in order (inputs before consumers) from their inputs' values.

    ``drops[k]``: the variables whose values are dropped once node ``k`` ran (values no
    later node and no backward rule reads). A caller that drops values that a reverse pass
    may read notes it on the clock first (``CLOCK.freed()``), as :func:`forward` does.
    """
    _execute(*_steps(nodes, drops))


class _Schedule:
    """A root's graph, resolved once: its nodes in order, their steps, the leaves they read,
    and the clock's reshapes when its shapes were last followed.
    """

    __slots__ = ("followed", "leaves", "nodes", "steps")

    def __init__(self, root: Variable) -> None:
        self.followed = 0
        self.nodes = topological_order([root])
        self.steps, self.leaves = _steps(self.nodes)


def _schedule(root: Variable) -> _Schedule:
    """The schedule of ``root``'s graph, its leaves' new shapes followed. A static graph run
    many times is ordered once: the schedule is kept in the root's memo on the clock.
    """
    s = memo(root).schedule
    if s is None:
        s = memo(root).schedule = _Schedule(root)
    reshapes = CLOCK.reshapes
    if reshapes and s.followed != reshapes:
        if follow_shapes(s.nodes):  # a composition was made again: new nodes, memos forgotten
            s = memo(root).schedule = _Schedule(root)
        s.followed = reshapes
    return s


def forward(roots: Sequence[Variable], clear_buffer: bool = False) -> None:
    """Recomputes every node the roots depend on from the current leaf values.

    With ``clear_buffer``, an intermediate value is freed once its last consumer
    has run, unless some backward rule needs it or it is a root. One root runs its
    schedule, resolved on its first run.
    """
    if len(roots) == 1:
        s = _schedule(roots[0])
        if not clear_buffer:
            _execute(s.steps, s.leaves)
            values_checked(roots[0])
            return
        nodes = s.nodes
    else:
        nodes = topological_order(roots)
        if CLOCK.reshapes and follow_shapes(nodes):
            nodes = topological_order(roots)
    _execute(*_steps(nodes, _drops(nodes, roots) if clear_buffer else None))
    if clear_buffer:
        CLOCK.freed()  # after the nodes' time: a pass over them checks their values again
    if len(roots) == 1:
        values_checked(roots[0])


def _drops(nodes: Sequence[Function], roots: Sequence[Variable]) -> list[list[Variable]]:
    """``clear_buffer``: after each node, the intermediate values it was the last to read,
    except those a backward rule reads and the roots.
    """
    keep = set(roots)
    last: dict[Variable, int] = {}
    for k, f in enumerate(nodes):
        for i, x in enumerate(f.inputs):
            if x.parent is not None:
                last[x] = k
                if f.differentiable and f.needs_input(i):
                    keep.add(x)
    drops: list[list[Variable]] = [[] for _ in nodes]
    for x, k in last.items():
        if x not in keep:
            drops[k].append(x)
    return drops


def _set_outputs(f: Function, xs: list[Any], ys: list[Any]) -> None:
    """Stores the output arrays ``ys`` of ``f`` (computed from ``xs``) in its output Variables."""
    ys = [as_array(y) for y in ys]
    for ref, y in zip(f._outputs, ys, strict=True):
        v = ref()
        if v is not None and y.dtype != v._dtype:  # float16 from int8 as in dynamic mode
            ys = [as_array(y) for y in as_declared(f, xs, ys, _declared(f))]
            break
    for ref, y in zip(f._outputs, ys, strict=True):
        v = ref()
        if v is not None:
            v._data, v._shape, v._dtype = y, y.shape, y.dtype
    if len(ys) > 1:
        f._out_meta = [(y.shape, y.dtype) for y in ys]
    if f.need_outputs:
        f._ydata = tuple(ys)  # untracked by the collector (see Function._ydata)


def _declared(f: Function) -> list[Any]:
    """The dtypes ``f``'s outputs were set up with."""
    meta = getattr(f, "_out_meta", None)
    if meta is not None:
        return [m[1] for m in meta]
    return [r()._dtype for r in f._outputs]  # type: ignore[union-attr]


_variable.register(forward=forward)  # Variable.forward
