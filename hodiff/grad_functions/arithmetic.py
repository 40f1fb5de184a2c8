"""Gradient-only functions of the arithmetic family."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.function import Function, Slot
from hodiff.grad_functions import F
from hodiff.variable import Variable

__all__ = ["sum_to"]


class SumTo(Function):
    """Sums a broadcast gradient back to ``shape``: the transpose of ``broadcast``."""

    need_inputs = False

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        x = inputs[0]
        lead = x.ndim - len(self.shape)
        tail = x.shape[lead:] if lead >= 0 else ()
        if lead < 0 or any(s not in (1, t) for s, t in zip(self.shape, tail, strict=True)):
            raise ValueError(f"sum_to: x of shape {x.shape} cannot be summed to {self.shape}")
        return [(self.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        lead = x.ndim - len(self.shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, s in enumerate(self.shape) if s == 1 and x.shape[lead + i] != 1
        )
        y = x.sum(axis=axes, keepdims=True) if axes else x
        outputs[0] = y.reshape(self.shape) if lead else y

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        # transpose of a sum is a broadcast
        if prop_down[0]:
            inputs[0].store(F.array.broadcast(outputs[0].grad, inputs[0].shape), accum[0])


def sum_to(x: Any, shape: Sequence[int]) -> Variable:
    """``x`` summed over the axes that broadcasting to ``x.shape`` would have added to ``shape``.

    >>> import numpy as np
    >>> sum_to(np.ones((2, 3)), (3,)).d
    array([2., 2., 2.])
    """
    return SumTo(shape=shape)(x)


# ---------------------------------------------------------------- batching rules (hd.vmap)
def _batch_sum_to(self: Any, inputs: Sequence[Any], axes: Sequence[Any]) -> Any:
    # the leading per-example axes that sum_to drops sit behind the batch axis: sum them first
    (x,) = inputs
    lead = x.ndim - 1 - len(self.shape)
    if lead > 0:
        x = F.reduction.sum(x, axis=tuple(range(1, lead + 1)))
    return SumTo(shape=(x.shape[0], *self.shape))(x)


SumTo.batch_rule = _batch_sum_to  # type: ignore[attr-defined]
