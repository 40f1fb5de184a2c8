"""Gradient-only functions of the nn family: the scatter-add that is ``embed``'s weight gradient."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Function, Slot
from hodiff.engine.variable import Variable
from hodiff.functions import nn as _nn
from hodiff.grad_functions import array as _garray

__all__ = ["embed_weight_grad"]


class EmbedWeightGrad(Function, follows_shape=False):
    """``gw[k] = sum of gy[i...] over the ids x[i...] == k``: the transpose of ``embed``."""

    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, n: int) -> None:
        self.n = int(n)

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        gy, x = inputs
        if x.dtype.kind not in "iu":
            raise TypeError(f"embed_weight_grad: ids x must be an integer array, got {x.dtype}")
        if gy.shape[: x.ndim] != x.shape:
            raise ValueError(
                f"embed_weight_grad: gy of shape {gy.shape} must start with the ids' shape"
                f" {x.shape}"
            )
        return [((self.n, *gy.shape[x.ndim :]), gy.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        gy, x = inputs
        xp = array_module(gy)
        x = xp.asarray(x)
        _nn.check_ids("embed_weight_grad", x, self.n)
        rest = gy.shape[x.ndim :]
        gw = xp.zeros((self.n, *rest), dtype=gy.dtype)
        ids, rows = x.reshape(-1), gy.reshape((-1, *rest))
        at = getattr(xp.add, "at", None)
        if at is not None:
            at(gw, ids, rows)
        else:  # cupy without ufunc.at
            importlib.import_module("cupyx").scatter_add(gw, ids, rows)
        outputs[0] = gw

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        # transpose of a scatter-add: gather the rows again (embed)
        if prop_down[0]:
            inputs[0].store(_nn.embed(inputs[1].data, outputs[0].grad), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # a table gradient per example: gather_add along the rows of a batch of tables
        size = _batching.batch_size(inputs, axes)
        gy, x = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        shape = (size, self.n, *gy.shape[x.ndim :])
        return _garray.gather_add(gy, x, shape, axis=1, batch_dims=1)


def embed_weight_grad(gy: Any, x: Any, n: int) -> Variable:
    """Scatter-add of ``gy`` (shape ``x.shape + rest``) into ``n`` rows by the integer ids ``x``.

    >>> import numpy as np
    >>> embed_weight_grad(np.ones((3, 2)), np.array([0, 2, 0]), n=3).d
    array([[2., 2.],
           [0., 0.],
           [1., 1.]])
    """
    return EmbedWeightGrad(n=n)(gy, x)
