"""Gradient-only functions of the array family: the scatter-adds that transpose indexing.

``index_add`` is the transpose of ``getitem`` and ``gather_add`` the transpose of
``gather``; each one's own backward is the indexing again, so the chain of
derivatives never ends. Repeated indices add up (numpy's ``add.at``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.variable import Variable
from hodiff.functions import _index_kernels as _kernels
from hodiff.functions import indexing as _indexing

__all__ = ["gather_add", "index_add"]

Spec = list[tuple[tuple[int, ...], Any]]


def _add_at(xp: Any, out: Any, key: tuple[Any, ...], values: Any) -> None:
    """``out[key] += values`` where repeated indices add up (numpy's ``add.at``)."""
    xp.add.at(out, key, values)


class IndexAdd(Function, follows_shape=False):
    """Zeros of ``shape`` with ``y`` added at ``key``: the transpose of ``x[key]``."""

    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, key: tuple[Any, ...], shape: Sequence[int]) -> None:
        self.key = key
        self.shape = tuple(int(s) for s in shape)
        self.advanced = _kernels.has_arrays(key)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        y = inputs[0]
        _, selected = _kernels.index_key(self.key, self.shape)
        if y.shape != selected:
            raise ValueError(
                f"index_add: y of shape {y.shape} does not match the {selected} elements that "
                f"key {self.key!r} selects from shape {self.shape}"
            )
        return [(self.shape, y.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        y = inputs[0]
        xp = array_module(y)
        out = xp.zeros(self.shape, dtype=y.dtype)
        key = _kernels.key_on(xp, self.key)
        if self.advanced:
            _add_at(xp, out, key, y)
        else:  # basic indexing selects each element at most once
            out[key] = y
        outputs[0] = out

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a scatter-add is indexing
        if prop_down[0]:
            inputs[0].store(_indexing.getitem(outputs[0].grad, self.key), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        (y,) = inputs
        key, at = _indexing.batched_key(self.key)
        if at:  # y in the layout numpy's indexing gives: the batch axis after the advanced axes
            perm = [*range(1, at + 1), 0, *range(at + 1, y.ndim)]
            y = _indexing.transpose(y, perm)
        return IndexAdd(key=key, shape=(y.shape[at], *self.shape))(y)


class GatherAdd(Function, follows_shape=False):
    """Zeros of ``shape`` with ``y`` added where ``gather(., indices, axis, batch_dims)``
    reads: the transpose of gather.
    """

    complex_values = "holomorphic"
    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, shape: Sequence[int], axis: int = 0, batch_dims: int = 0) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.axis = axis
        self.batch_dims = batch_dims

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        y, indices = inputs
        probe = Variable(self.shape, dtype=y.dtype)
        ((expected, _),) = _indexing.Gather(axis=self.axis, batch_dims=self.batch_dims).setup_impl(
            [probe, indices]
        )
        if y.shape != expected:
            raise ValueError(
                f"gather_add: y of shape {y.shape} does not match the gather shape {expected} "
                f"of indices of shape {indices.shape} from shape {self.shape}"
            )
        return [(self.shape, y.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        y, indices = inputs
        xp = array_module(y)
        ndim = len(self.shape)
        key, perm = _kernels.gather_key(xp, indices, ndim, self.axis % ndim, self.batch_dims)
        if perm is not None:  # back to numpy's advanced-indexing layout
            y = xp.transpose(y, [int(i) for i in _argsort(perm)])
        out = xp.zeros(self.shape, dtype=y.dtype)
        _add_at(xp, out, key, y)
        outputs[0] = out

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a scatter-add is gather; indices get none
        if prop_down[0]:
            g = _indexing.gather(outputs[0].grad, inputs[1].data, self.axis, self.batch_dims)
            inputs[0].store(g, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        y, indices = inputs
        size = _batching.batch_size(inputs, axes)
        axis = self.axis % len(self.shape) + 1
        shape = (size, *self.shape)
        if axes[1] is None and self.batch_dims == 0:
            y = _batching.batched(y, axes[0], size)
            return _batching.renew(self, shape=shape, axis=axis)(y, indices)
        y = _batching.batched(y, axes[0], size)
        indices = _batching.batched(indices, axes[1], size)
        return _batching.renew(self, shape=shape, axis=axis, batch_dims=self.batch_dims + 1)(
            y, indices
        )


def _argsort(perm: Sequence[int]) -> list[int]:
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return inverse


def index_add(y: Any, key: Any, shape: Sequence[int]) -> Variable:
    """Zeros of ``shape`` with ``y`` added at ``key`` (``add.at``: repeated indices add up).

    The gradient of ``x[key]``; ``y.shape`` must be the shape ``key`` selects.

    >>> import numpy as np
    >>> index_add(np.ones(3), ([0, 0, 2],), (3,)).d
    array([2., 0., 1.])
    """
    key, _ = _kernels.index_key(key, tuple(shape))
    return IndexAdd(key=key, shape=shape)(y)


def gather_add(
    y: Any, indices: Any, shape: Sequence[int], axis: int = 0, batch_dims: int = 0
) -> Variable:
    """Zeros of ``shape`` with ``y`` added where ``gather(x, indices, axis, batch_dims)``
    reads ``x`` of that shape (repeated indices add up): the gradient of gather.

    >>> import numpy as np
    >>> gather_add(np.ones((2, 2)), np.array([1, 1]), (3, 2)).d
    array([[0., 0.],
           [2., 2.],
           [0., 0.]])
    """
    return GatherAdd(shape=shape, axis=axis, batch_dims=batch_dims)(y, indices)
