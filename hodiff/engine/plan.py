"""Reverse plans: which nodes a reverse pass visits, and the ``prop_down`` flags of each.

The engine decides two flags per input of every node a pass visits: ``prop_down``
(this input needs a gradient: it leads to what was asked for), made here once per
plan, and ``accum`` (this input already received a gradient during this pass), decided
by the pass as it goes (``reverse.py``). A plain pass's plan is kept in its root's memo on
the clock (``clock.Memo``): a static graph run many times is planned once.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from hodiff.engine.checks import check_leaves, check_values, values_epoch
from hodiff.engine.clock import CLOCK
from hodiff.engine.function import Function, OutRef
from hodiff.engine.order import topological_order
from hodiff.engine.variable import Variable

__all__ = ["Memo", "Plan", "memo", "paused_collector", "plain_plan", "values_checked"]

# prop_down (or accum) flags of one- and two-input nodes, shared by every pass (tuples: a
# rule that tried to change one would raise, not leak)
PROP1 = (True,)
FLAGS2 = ((False, False), (False, True)), ((True, False), (True, True))
_NONE2 = FLAGS2[0][0]


class Plan:
    """Which nodes a reverse pass visits and their prop_down flags.

    Its steps, in forward order, are three lists of the same length (no tuple per step: a
    plan lives through its pass, and every tracked object is one more for the collector to
    traverse): ``nodes``, their ``props`` (prop_down) and ``sends``, the distinct leaf inputs
    each node sends a gradient to (or None). ``leaf_uses`` counts, per leaf, the steps that
    do (a leaf's gradient is final when its last one has run); ``used`` is every variable
    some step sends a gradient to (towards ``wrt`` only); ``leaves`` every leaf input met.
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
            prop: Sequence[bool] | None
            if len(ins) == 1 and ins[0].parent is not None:  # the common case: shared flags
                if ins[0] not in relevant:
                    continue
                prop = PROP1
            else:
                prop, leaves = _leaf_flags(ins, relevant, leaf_uses, all_leaves)
                if prop is None:
                    continue
            if type(f).backward_impl is base_rule:
                f.backward_impl([], [], prop, prop)  # raises NotImplementedError naming f
            refs = f._outputs
            if type(refs) is OutRef:  # inline: the common case
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
            prop: Sequence[bool] | None
            if n == 1:  # the common cases, with the shared flag lists
                x = ins[0]
                if x not in relevant:
                    continue
                prop = PROP1
                used.add(x)
            elif n == 2:
                a, b = ins
                prop = FLAGS2[a in relevant][b in relevant]
                if prop is _NONE2:
                    continue
                if prop[0]:
                    used.add(a)
                if prop[1]:
                    used.add(b)
            else:
                prop = _relevant_flags(ins, relevant, used)
                if prop is None:
                    continue
            if type(f).backward_impl is base_rule:
                f.backward_impl([], [], prop, prop)  # raises NotImplementedError naming f
            refs = f._outputs
            if type(refs) is OutRef:  # inline: the common case
                v = refs()
                if v is not None:
                    relevant.add(v)
            else:
                _add_alive(refs, relevant)
            add_node(f)
            add_prop(prop)
        self.sends = [None] * len(self.nodes)  # one list: no leaf is committed


def _relevant_flags(
    ins: Sequence[Variable], relevant: set[Variable], used: set[Variable]
) -> list[bool] | None:
    """A step of a plan towards ``relevant`` with more than two inputs: its prop_down flags
    (None when no input is relevant); the relevant inputs are added to ``used``.
    """
    flags: list[bool] = []
    for x in ins:
        if x in relevant:
            flags.append(True)
            used.add(x)
        else:
            flags.append(False)
    return flags if True in flags else None


def _leaf_flags(
    ins: Sequence[Variable],
    relevant: set[Variable],
    leaf_uses: dict[Variable, int],
    all_leaves: dict[Variable, None],
) -> tuple[list[bool] | None, list[Variable] | None]:
    """A plain plan's step with leaf inputs or several inputs: its prop_down flags (None
    when no input needs a gradient) and the distinct leaves with need_grad it sends to
    (counted in ``leaf_uses``; every leaf met noted in ``all_leaves``).
    """
    flags: list[bool] = []  # a plain loop: a comprehension costs a frame (3.11)
    leaves: list[Variable] | None = None
    for x in ins:
        if x.parent is None:
            all_leaves[x] = None
            if x.need_grad:
                flags.append(True)
                if leaves is None:
                    leaves = [x]
                elif x in leaves:
                    continue
                else:
                    leaves.append(x)
                leaf_uses[x] = leaf_uses.get(x, 0) + 1
                continue
        flags.append(x in relevant)
    if leaves is None and True not in flags:
        return None, None
    return flags, leaves


def _add_alive(refs: Iterable[weakref.ref[Variable]], into: set[Variable]) -> None:
    """Adds the outputs still alive (of a multi-output node) to ``into``."""
    for ref in refs:
        v = ref()
        if v is not None:
            into.add(v)


class _Collector:
    """Pauses Python's cyclic collector (gc) while reverse passes are planned and run.

    No pass makes a reference cycle (a node refers to its outputs weakly), so a collection
    during them frees nothing of what they make, and a recording pass makes many objects:
    every full collection would traverse every live node, and the cost per node would grow
    with the size of the graph (bench/graph_size.py). What a pass allocated is collected as
    usual once it returns. Passes in several threads (or nested) share one pause: the
    collector is enabled again when the last one ends, if it was enabled when the first
    began.
    """

    __slots__ = ("enabled", "lock", "passes")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.passes = 0  # the passes in progress
        self.enabled = False  # whether the collector was enabled before them

    def __enter__(self) -> None:
        with self.lock:
            if not self.passes:
                self.enabled = gc.isenabled()
                gc.disable()
            self.passes += 1

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.passes -= 1
            if not self.passes and self.enabled:
                gc.enable()


#: ``with paused_collector:`` around a reverse pass (see :class:`_Collector`)
paused_collector = _Collector()


class Memo:
    """What the passes keep about a root's graph, in ``CLOCK.memos``: ``schedule``, its
    forward's steps (``run.py``), ``plan``: ``(leaves' need_grad, plain plan, epoch checked)``.
    """

    __slots__ = ("plan", "schedule")

    def __init__(self) -> None:
        self.schedule: Any = None
        self.plan: Any = None


def memo(root: Variable) -> Memo:
    """The memo of ``root``'s graph (new the first time)."""
    m = CLOCK.memos.get(root)
    if m is None:
        m = CLOCK.memos[root] = Memo()
    return m  # type: ignore[no-any-return]


def plain_plan(root: Variable) -> Plan:
    """The plan of a plain pass from ``root``, its values checked. The ancestors of a
    variable never change: the plan in its memo holds while its leaves' need_grad do.
    """
    memo_ = memo(root)
    cached = memo_.plan
    if cached is not None:
        flags, found, checked = cached
        if flags == tuple([x.need_grad for x in found.leaves]):
            epoch = values_epoch()
            if checked != epoch:
                check_values(found, "backward")
                memo_.plan = (flags, found, epoch)
            return found
    made = Plan([root], None)
    check_leaves(root, made.leaves, made.leaf_uses)
    check_values(made, "backward")
    memo_.plan = (tuple([x.need_grad for x in made.leaves]), made, values_epoch())
    return made


def values_checked(root: Variable) -> None:
    """Marks the cached plan of ``root`` checked: a forward pass just computed every value
    it reads.
    """
    memo = CLOCK.memos.get(root)
    if memo is not None and memo.plan is not None:
        memo.plan = (memo.plan[0], memo.plan[1], values_epoch())
