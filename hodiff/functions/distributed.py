"""Collective functions over the processes of a :class:`hodiff.distributed.Communicator`.

``all_reduce`` is a primitive like any other: its value is the sum of its input
over the ranks, and its backward rule is again an ``all_reduce`` (the adjoint
of "sum over ranks, copy to every rank" is itself), so it can be differentiated
to any order. Its forward and backward are *collective*: every rank must run
them, in the same order, with the same shapes (see docs/distributed.md). The
communicator is a static argument; nothing here imports MPI (:class:`Communicator` is
the collective backend, below the functions like the array backends).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine.context import array_module
from hodiff.engine.function import Function, Slot, float_dtype
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.training.distributed import Communicator

__all__ = ["all_reduce"]


class AllReduce(Function, follows_shape=False):
    need_inputs = False
    #: its forward communicates: a compiler runs it once per call
    effects = True
    taylor = "linear"

    def __init__(self, *, comm: Any = None) -> None:
        # None: the default communicator, found when the node first runs (a loaded graph)
        self._comm = comm

    @property
    def comm(self) -> Any:
        if self._comm is None:
            self._comm = Communicator.default()
        return self._comm

    @property  # type: ignore[override]
    def static_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``comm=None`` for the world communicator: a saved graph reduces over the world of
        the program that loads it; any other communicator cannot be stored in a file.
        """
        comm = self._comm
        return (), {"comm": None if comm is None or comm.is_world else comm}

    @static_arguments.setter
    def static_arguments(self, value: Any) -> None:
        pass  # derived from the communicator above

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        x = inputs[0]
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        # our own C-contiguous array (also from a numpy scalar), reduced in place
        y = array_module(x).array(x, dtype=float_dtype(x.dtype), order="C", copy=True)
        self.comm._sum_over_ranks(y, "all_reduce")
        outputs[0] = y

    def batch_rule(self, inputs: Sequence[Variable], axes: Sequence[int | None]) -> Variable:
        """``hd.vmap``: the sum over ranks is elementwise, so one all_reduce of the batched
        input reduces every example (every rank must map with the same batch size).
        """
        return self(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        # y = sum_r x_r on every rank, so dJ/dx_r = sum_s gy_s: the adjoint is an all_reduce
        if prop_down[0]:
            inputs[0].store(all_reduce(outputs[0].grad, self.comm), accum[0])


@traced
def all_reduce(x: Any, comm: Any) -> Variable:
    """The sum of ``x`` over every rank of ``comm``, on every rank: ``y = sum_r x_r``.

    Differentiable to any order: the gradient of a rank's input is the sum of
    the output gradients of all ranks, ``gx_r = sum_s gy_s`` (an ``all_reduce``
    again), so that summing the ranks' local gradients (as
    :meth:`hodiff.distributed.Communicator.backward` does) gives the gradient of
    the sum of the ranks' objectives. Use it for quantities that must be global
    inside the graph: synchronized batch statistics, a penalty on a full-batch
    mean, a global normalizer.

    It is a collective call: every rank must call it (in the forward pass and
    in every backward pass that reaches it), in the same order, with the same
    shape and dtype. With one process it is the identity.

    Args:
        x: a Variable or array of any shape; integer inputs give float64.
        comm: a :class:`hodiff.distributed.Communicator`, or an mpi4py
            communicator (wrapped once, on first use, by every rank).

    Returns:
        A Variable of ``x``'s shape.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.distributed import Communicator
    >>> comm = Communicator.single_process()  # one rank: the identity
    >>> F.all_reduce(np.array([1.0, 2.0]), comm).d
    array([1., 2.])
    """
    if not isinstance(comm, Communicator):
        if type(comm).__module__ != "mpi4py.MPI":
            raise TypeError(
                "all_reduce: comm must be a hodiff.distributed.Communicator or an mpi4py "
                f"communicator, got {type(comm).__name__}"
            )
        comm = Communicator.of(comm)
    return AllReduce(comm=comm)(x)
