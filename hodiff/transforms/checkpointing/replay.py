"""The replay: ``f`` computed again on a checkpoint's inputs, with its first run's draws.

Above :mod:`.segment`. ``f`` runs in the context variables of the ``checkpoint`` call (the
parameter scope and array context it was called in, which a reverse pass run elsewhere
does not have), with the current modes, replaying the random draws of the run whose values
the node's outputs hold. :class:`Vjp` is what a checkpoint's recorded gradient computes,
as a function that a checkpoint of its own can replay in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine import api
from hodiff.engine import random as _random
from hodiff.engine.variable import Variable
from hodiff.functions import state as _state
from hodiff.transforms.checkpointing.segment import as_outputs, describe, grad, run_in

__all__ = ["Vjp", "call_f", "check_specs", "replay"]


def call_f(node: Any, leaves: Sequence[Variable]) -> Any:
    """``node.f`` on its statics with the Variable arguments replaced by ``leaves``, in the
    context of the ``checkpoint`` call, with the current modes and random tapes.
    """
    call = list(node.statics)
    for p, v in zip(node.positions, leaves, strict=True):
        call[p] = v
    return node.context.copy().run(
        run_in, node.f, call, api.modes(), _random.current(), _state.is_replaying()
    )


def replay(node: Any, leaves: Sequence[Variable]) -> list[Variable]:
    """The outputs of ``node.f`` recomputed on ``leaves``, with the recorded random draws."""
    with _random.replaying(node.tape, node.name), _state.replaying():
        outs = as_outputs(node.name, call_f(node, leaves))[1]
    check_specs(node, outs)
    return outs


def check_specs(node: Any, outs: list[Variable]) -> None:
    """Raises when ``outs`` have other shapes or dtypes than the first run's outputs."""
    got = [(o.shape, o.dtype) for o in outs]
    want = [(tuple(s), d) for s, d in node.specs]
    if got != want:
        raise RuntimeError(
            f"{node.name}: recomputed, f returned {describe(got)} where its first run "
            f"returned {describe(want)}: a checkpointed function must compute the same "
            "way every time"
        )


class Replaying:
    """``node.f`` on Variable arguments, replaying ``node``'s random draws (what ``hd.vmap``
    maps in a checkpoint's batching rule).
    """

    def __init__(self, node: Any) -> None:
        self.node = node

    def __call__(self, *leaves: Variable) -> Any:
        with _random.replaying(self.node.tape, "checkpoint"):
            return call_f(self.node, leaves)


class Vjp:
    """``(args, gys) -> [sum_k (d y_k / d x_i)^T gy_k for the wanted inputs i]`` of a node.

    What a checkpoint node's recorded gradient computes, as a function that
    ``checkpoint`` can recompute: ``f`` again on the arguments (replaying the node's
    random draws), then ``hd.grad`` of it with ``create_graph=True``. Its externals are the
    node's; the wanted inputs that are externals are differentiated as they are.
    """

    def __init__(self, node: Any, wanted: list[int]) -> None:
        self.node = node
        self.wanted = wanted
        self.__name__ = f"vjp_of_{node.name}"
        #: set by the tracing to a list, which the next call fills with ``f``'s outputs
        #: and the clock time between ``f``'s graph and its gradient graph
        self.traced: list[Any] | None = None

    def __call__(self, *args: Variable) -> tuple[Variable, ...]:
        start = api.clock()
        outs, wrt, gys = self._forward(args)
        if self.traced is not None:
            self.traced[:] = [outs, api.clock()]
        return tuple(grad(outs, wrt, gys, start))

    def lazily(self, args: Sequence[Variable]) -> tuple[list[Variable], int, list[Variable]]:
        """The same graph, its gradient part linked but not computed (static mode), the
        clock time before that part, and ``f``'s recomputed outputs. A rule never reads a
        value to decide what to link (see hodiff/engine/function.py), so linking it first is
        safe; ``f`` itself runs as it is (a user's ``f`` may read values).
        """
        start = api.clock()
        outs, wrt, gys = self._forward(args)
        linked = api.clock()
        with api.static_mode():
            return grad(outs, wrt, gys, start), linked, outs

    def _forward(self, args: Sequence[Variable]) -> tuple[list[Variable], ...]:
        """The node's outputs recomputed, the variables to differentiate, the seeds."""
        node = self.node
        n = len(node.positions)
        leaves = list(args[:n])
        outs = replay(node, leaves)
        wrt = [leaves[i] if i < n else node.inputs[i] for i in self.wanted]
        return outs, wrt, list(args[n:])
