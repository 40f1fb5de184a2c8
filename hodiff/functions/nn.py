"""Dropout and embedding lookup.

``dropout`` is ``x * mask``: the mask is the output of a non-differentiable
node (:class:`DropoutMask`) drawn once per forward, so the plain backward and
every order of ``hd.grad`` see the same mask. ``embed`` gathers rows; its
weight gradient is the scatter-add ``hodiff.grad_functions.nn.embed_weight_grad``
whose own backward is ``embed`` again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Function, Slot, float_dtype
from hodiff.engine.random import node_generator
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import arithmetic as _arith
from hodiff.functions import indexing as _indexing
from hodiff.grad_functions import nn as _gnn

__all__ = ["dropout", "embed"]

Slots = Sequence[Slot]
Flags = Sequence[bool]
Spec = list[tuple[tuple[int, ...], Any]]


def check_ids(name: str, x: Any, n: int) -> None:
    """ValueError unless every id of the integer array ``x`` lies in ``[0, n)``."""
    if x.size:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi >= n:
            raise ValueError(
                f"{name}: ids x of shape {x.shape} must lie in [0, {n}) (w.shape[0]);"
                f" got values in [{lo}, {hi}]"
            )


class DropoutRangeError(ValueError, RuntimeError):
    """``dropout``'s ``p`` outside ``[0, 1)``: a ValueError, and a RuntimeError as NNabla's."""


class DropoutMask(Function, follows_shape=True, follows_rank=True):
    """``mask = (u >= p) / (1 - p)`` with ``u`` uniform in [0, 1), shaped like ``x``.

    Not differentiable (it cuts the graph). The node owns a numpy ``Generator``
    seeded once from ``seed`` (-1: from hodiff's global generator, see
    :func:`hodiff.seed`); every forward draws the next mask from it, so a seeded
    graph replays the same sequence of masks. The mask is drawn on the host, so
    numpy and cupy give the same masks for one seed.
    """

    differentiable = False
    #: its forward does more than compute its outputs (draws): a compiler runs it once per call
    effects = True

    def __init__(self, *, p: float = 0.5, seed: int = -1) -> None:
        p = _arith.check_scalar("dropout", "p", p)
        if not 0.0 <= p < 1.0:
            raise DropoutRangeError(f"dropout: p must be in [0, 1), got {p}")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise TypeError(f"dropout: seed must be an int, got {type(seed).__name__}")
        self.p = p
        self.seed = int(seed)
        self.rng = node_generator(self.seed)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        keep = self.rng.random(x.shape) >= self.p
        dtype = float_dtype(x.dtype)
        outputs[0] = xp.asarray(keep, dtype=dtype) * dtype.type(1.0 / (1.0 - self.p))

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        return self(inputs[0])  # one independent mask per example, as in a batch


class Embed(Function, follows_shape=True):
    need_inputs = (0,)
    taylor = "linear"
    linear_in = (1,)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, w = inputs
        if x.dtype.kind not in "iu":
            raise TypeError(f"embed: ids x must be an integer array, got dtype {x.dtype}")
        if w.ndim < 1:
            raise ValueError(f"embed: w must have at least one dimension, got shape {w.shape}")
        return [(x.shape + w.shape[1:], w.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, w = inputs
        xp = array_module(w)
        x = xp.asarray(x)
        check_ids("embed", x, w.shape[0])
        outputs[0] = xp.take(w, x, axis=0)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dw = scatter-add of gy into the rows named by x (the ids get no gradient)
        if prop_down[1]:
            gw = _gnn.embed_weight_grad(outputs[0].grad, inputs[0].data, n=inputs[1].shape[0])
            inputs[1].store(gw, accum[1])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        if axes[1] is None:  # shared table: the batch is one more leading axis of the ids
            return self(*inputs)
        # a table per example: gather along its rows
        size = _batching.batch_size(inputs, axes)
        x, w = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        return _indexing.gather(w, x, axis=1, batch_dims=1)


def dropout_mask(x: Any, p: float = 0.5, seed: int = -1) -> Variable:
    """The scaled keep-mask :func:`dropout` multiplies by (not differentiable).

    >>> import numpy as np
    >>> sorted(set(dropout_mask(np.ones(100), p=0.5, seed=0).d.tolist()))
    [0.0, 2.0]
    """
    return DropoutMask(p=p, seed=seed)(x)


@traced
@real_values
def dropout(x: Any, p: float = 0.5, seed: int = -1) -> Variable:
    """``y = x * mask / (1 - p)``: each element is zeroed with probability ``p``.

    The mask is drawn once in the forward pass and kept as a node of the graph,
    so the plain backward and every higher-order derivative use the same mask;
    re-running a static graph draws a new one. ``seed >= 0`` makes the sequence
    of masks reproducible (as NNabla's ``seed``); -1 draws from hodiff's global
    generator (reproducible after ``hd.seed(n)``).

    Args:
        x: input, any shape.
        p: drop probability in ``[0, 1)``.
        seed: random seed, or -1.

    >>> import numpy as np, hodiff.functions as F
    >>> y = F.dropout(np.ones((2, 50)), p=0.5, seed=1)
    >>> sorted(set(y.d.ravel().tolist()))
    [0.0, 2.0]

    """
    return _arith.mul2(x, dropout_mask(x, p=p, seed=seed))


@traced
def embed(x: Any, w: Any) -> Variable:
    """Rows of ``w`` picked by integer ids: ``y[i...] = w[x[i...]]``.

    Args:
        x: integer ids of shape ``(I_0, ..., I_N)``, each in ``[0, W_0)``; no gradient.
        w: weights of shape ``(W_0, W_1, ..., W_M)``.

    Returns:
        Shape ``(I_0, ..., I_N, W_1, ..., W_M)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.embed(np.array([2, 0]), np.arange(6.0).reshape(3, 2)).d
    array([[4., 5.],
           [0., 1.]])

    """
    return Embed()(x, w)
