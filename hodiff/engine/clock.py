"""The engine's one clock: node numbers and the epochs that keep cached facts valid.

Every time the engine compares is read from :data:`CLOCK`: a node's number
(``Function.seq``, taken when it is linked; a node is numbered after the nodes its
inputs come from), the time of the forward pass that last computed it
(``Function._computed``), the time of a user's write of a value
(``Variable._version``). Besides the times, the clock keeps the epochs that the
caches of the passes are checked against, so that no cache has to know another:

* ``last_write``: the time of the last user write (``.d = ...``, or a hodiff call's
  in-place write, ``api.mark_written``, whose writer ``writers`` keeps for the message);
* ``frees``, ``last_free``: how many passes freed values (``clear_buffer``) and the
  time of the last one;
* ``reshapes``: how many times a leaf's shape was reset (``reset_shape``), 0 for
  never, so that a process that never resets pays one read per forward pass;
* ``remakes``: how many times a graph was made again for new shapes: a cached
  order, schedule or plan made before holds nodes that are gone.

The facts the passes keep about one root's graph are the clock's too, in one memo per
root (:data:`Clock.memos`, a ``plan.Memo``): the schedule of its forward (``run.py``) and
the plan of its plain reverse pass (``plan.py``), each with the epochs it was last checked
at. A graph made again makes every memo stale at once, so the clock forgets them all
(:meth:`Clock.remade`): no memo has to note when it was made.

Times are integers, :data:`STRIDE` apart, so that nodes made again for new shapes
(``reset_shape`` re-running a composition) take numbers between those of the call
they replace (:meth:`Clock.renumber`): every order by number stays an order of
inputs before consumers.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from typing import Any

__all__ = ["CLOCK", "STRIDE", "Clock"]

#: the step between two times: the free numbers between two ticks, for nodes made again
STRIDE = 16


class Clock:
    """Node numbers, the times of passes and writes, the epochs of the caches, and the
    memo of each root's graph.
    """

    __slots__ = (
        "frees", "last_free", "last_write", "memos", "remakes", "reshapes", "tick", "ticks",
        "writers",
    )  # fmt: skip

    def __init__(self) -> None:
        #: the times, one per ``next``: read ``next(clock.ticks)`` or ``clock.tick()``
        self.ticks = itertools.count(STRIDE, STRIDE)
        self.tick = self.ticks.__next__
        self.last_write = 0
        self.frees = 0
        self.last_free = -1
        self.reshapes = 0
        self.remakes = 0
        #: a root -> the memo of its graph (``plan.memo``)
        self.memos: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        #: per Variable a hodiff call wrote in place: ``(time, what wrote it)``
        self.writers: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()

    def wrote(self) -> int:
        """A user wrote a value now; returns the time (the value's version)."""
        t = self.last_write = self.tick()
        return t

    def writer(self, v: Any) -> str:
        """What made the last write of ``v``'s value: the hodiff call that wrote it in place
        (``writers``), or ``.d set`` for the setter (a later write than the noted one).
        """
        note = self.writers.get(v)
        return note[1] if note is not None and note[0] == getattr(v, "_version", 0) else ".d set"

    def freed(self) -> None:
        """A pass frees values (``clear_buffer``): every check of values is due again."""
        self.frees += 1
        self.last_free = self.tick()

    def reshaped(self) -> int:
        """A leaf's shape was reset now; returns the time."""
        self.reshapes += 1
        return self.tick()

    def remade(self) -> None:
        """A graph was made again for new shapes: every cached order, schedule and plan is
        stale, and every memo forgotten.
        """
        self.remakes += 1
        self.memos.clear()

    def renumber(self, nodes: Sequence[Any], t0: int, t1: int) -> bool:
        """Numbers ``nodes`` (in order) inside ``(t0, t1)``, evenly spread: where the nodes
        of the call they replace were, so that every order by number (inputs before
        consumers) still holds. Returns False, numbering nothing, when they do not fit.
        """
        step = (t1 - t0) // (len(nodes) + 1)
        if step < 1:
            return False
        for k, f in enumerate(nodes, 1):
            f.seq = t0 + k * step
        return True


#: the clock of the process
CLOCK = Clock()
