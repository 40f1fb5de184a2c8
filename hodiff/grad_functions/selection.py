"""Index-driven selection and its transpose: the pairs behind sort, top_k, scatter, gather_nd.

``take_along_axis`` reads ``x`` at integer indices along one axis and
``scatter_along_axis`` adds values into zeros at the same places: each is the
other's transpose, so each one's backward is the other and the chain of
derivatives never ends. ``gather_nd``/``scatter_nd_add`` are the same pair for
indices over the leading axes. The indices are inputs (Variables or arrays,
integer, never differentiated); repeated indices add up in the scatters.

The batching rules permute axes with :func:`hodiff.functions.array.transpose`
(the array family, imported as a module and looked up when a rule runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array

__all__ = ["gather_nd", "scatter_along_axis", "scatter_nd_add", "take_along_axis"]

Spec = list[tuple[tuple[int, ...], Any]]


def _axis_key(xp: Any, idx: Any, axis: int) -> tuple[Any, ...]:
    """The advanced-indexing key ``(i0, ..., idx, ..., iN)`` that reads ``a[.., idx[..], ..]``."""
    nd = idx.ndim
    key = []
    for d in range(nd):
        if d == axis:
            key.append(idx)
        else:
            shape = [1] * nd
            shape[d] = idx.shape[d]
            key.append(xp.arange(idx.shape[d]).reshape(shape))
    return tuple(key)


def _check_along(name: str, data: tuple[int, ...], idx: Variable, axis: int) -> int:
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers, got {idx.dtype}")
    nd = len(data)
    if idx.ndim != nd:
        raise ValueError(
            f"{name}: indices of shape {idx.shape} must have as many dims as the data of shape "
            f"{data}"
        )
    if not -nd <= axis < max(nd, 1):
        raise ValueError(f"{name}: axis {axis} is out of range for {nd} dims")
    axis %= nd
    for d in range(nd):
        if d != axis and idx.shape[d] > data[d]:
            raise ValueError(
                f"{name}: indices of shape {idx.shape} exceed the data of shape {data} on axis {d}"
            )
    return axis


def _batch_along(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    # both operands get the batch axis in front; the axis moves by one (and the shape grows)
    size = _batching.batch_size(inputs, axes)
    a, idx = (_batching.batched(x, ax, size) for x, ax in zip(inputs, axes, strict=True))
    changes: dict[str, Any] = {"axis": _batching.map_axis(self.axis, idx.ndim - 1)}
    if isinstance(self, ScatterAlongAxis):
        changes["shape"] = (size, *self.shape)
    return _batching.renew(self, **changes)(a, idx)


class TakeAlongAxis(Function, follows_shape=True):
    """``y[i, j, k] = x[i, idx[i, j, k], k]`` (for axis 1); ``y.shape == idx.shape``."""

    need_inputs = (1,)
    batch_rule = _batch_along
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, axis: int) -> None:
        self.axis = axis

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, idx = inputs
        _check_along(self.name, x.shape, idx, self.axis)
        return [(idx.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, idx = inputs
        outputs[0] = x[_axis_key(array_module(x), idx, self.axis % x.ndim)]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a take is the scatter-add to the same places; indices get none
        if prop_down[0]:
            g = scatter_along_axis(outputs[0].grad, inputs[1].data, self.axis, inputs[0].shape)
            inputs[0].store(g, accum[0])


class ScatterAlongAxis(Function, follows_shape=False):
    """Zeros of ``shape`` plus ``out[i, idx[i, j, k], k] += y[i, j, k]`` (for axis 1)."""

    need_inputs = (1,)
    batch_rule = _batch_along
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, axis: int, shape: Sequence[int]) -> None:
        self.axis = axis
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        y, idx = inputs
        _check_along(self.name, self.shape, idx, self.axis)
        if y.shape != idx.shape:
            raise ValueError(
                f"{self.name}: values of shape {y.shape} and indices of shape {idx.shape} differ"
            )
        return [(self.shape, y.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        y, idx = inputs
        xp = array_module(y)
        out = xp.zeros(self.shape, dtype=y.dtype)
        xp.add.at(out, _axis_key(xp, idx, self.axis % out.ndim), y)
        outputs[0] = out

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a scatter-add is the take at the same places
        if prop_down[0]:
            g = take_along_axis(outputs[0].grad, inputs[1].data, self.axis)
            inputs[0].store(g, accum[0])


def _check_nd(name: str, data: tuple[int, ...], idx: Variable) -> tuple[int, ...]:
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers, got {idx.dtype}")
    if idx.ndim < 1 or idx.shape[0] > len(data):
        raise ValueError(
            f"{name}: indices of shape {idx.shape} must be (M, ...) with M <= {len(data)}, the "
            f"dims of the data of shape {data}"
        )
    return idx.shape[1:] + data[idx.shape[0] :]


class GatherNd(Function, follows_shape=True):
    """``y[j...] = x[idx[0, j...], ..., idx[M-1, j...], ...]`` (NNabla's gather_nd)."""

    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, idx = inputs
        return [(_check_nd("gather_nd", x.shape, idx), x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, idx = inputs
        outputs[0] = x[tuple(idx)]

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of gather_nd adds gy at the gathered places; indices get none
        if prop_down[0]:
            g = scatter_nd_add(outputs[0].grad, inputs[1].data, inputs[0].shape)
            inputs[0].store(g, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        x, idx = inputs
        if axes[1] is not None:
            return _batching.loop(self, inputs, axes)
        # batch axis of x moved behind the M indexed axes: y = x'[idx] has it after Y, then in front
        m, ny = idx.shape[0], idx.ndim - 1
        nd = x.ndim
        y = self(_array.transpose(x, (*range(1, m + 1), 0, *range(m + 1, nd))), idx)
        return _array.transpose(y, (ny, *range(ny), *range(ny + 1, y.ndim)))


class ScatterNdAdd(Function, follows_shape=False):
    """Zeros of ``shape`` plus ``out[idx[0, j...], ..., idx[M-1, j...], ...] += y[j...]``."""

    need_inputs = (1,)
    taylor = "linear"
    linear_in = (0,)

    def __init__(self, *, shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        y, idx = inputs
        expected = _check_nd(self.name, self.shape, idx)
        if y.shape != expected:
            raise ValueError(
                f"{self.name}: values of shape {y.shape} must have the gather shape {expected} "
                f"of indices of shape {idx.shape} into shape {self.shape}"
            )
        return [(self.shape, y.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        y, idx = inputs
        xp = array_module(y)
        out = xp.zeros(self.shape, dtype=y.dtype)
        xp.add.at(out, tuple(idx), y)
        outputs[0] = out

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # the transpose of a scatter-add is the gather
        if prop_down[0]:
            inputs[0].store(gather_nd(outputs[0].grad, inputs[1].data), accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        y, idx = inputs
        if axes[1] is not None:
            return _batching.loop(self, inputs, axes)
        # scatter into (X_0..X_{M-1}, B, X_M...) with y's batch axis moved behind Y, then in front
        m, ny = idx.shape[0], idx.ndim - 1
        size = y.shape[0]
        yt = _array.transpose(y, (*range(1, ny + 1), 0, *range(ny + 1, y.ndim)))
        shape = (*self.shape[:m], size, *self.shape[m:])
        out = _batching.renew(self, shape=shape)(yt, idx)
        return _array.transpose(out, (m, *range(m), *range(m + 1, out.ndim)))


def take_along_axis(x: Any, indices: Any, axis: int) -> Variable:
    """``y[i, j, k] = x[i, indices[i, j, k], k]`` (axis 1): numpy's ``take_along_axis``,
    where ``indices`` may be smaller than ``x`` on the other axes (NNabla's scatter layout).

    >>> import numpy as np
    >>> take_along_axis(np.array([[1.0, 2.0, 3.0]]), np.array([[2, 0]]), 1).d
    array([[3., 1.]])
    """
    return TakeAlongAxis(axis=axis)(x, indices)


def scatter_along_axis(y: Any, indices: Any, axis: int, shape: Sequence[int]) -> Variable:
    """Zeros of ``shape`` with ``out[i, indices[i, j, k], k] += y[i, j, k]`` (axis 1):
    the transpose of :func:`take_along_axis` (repeated indices add up).

    >>> import numpy as np
    >>> scatter_along_axis(np.array([[1.0, 2.0]]), np.array([[2, 2]]), 1, (1, 3)).d
    array([[0., 0., 3.]])
    """
    return ScatterAlongAxis(axis=axis, shape=shape)(y, indices)


def gather_nd(x: Any, indices: Any) -> Variable:
    """``y = x[indices[0], ..., indices[M-1]]`` for ``indices`` of shape ``(M, Y...)``:
    ``y.shape = Y + x.shape[M:]`` (NNabla's ``gather_nd``).

    >>> import numpy as np
    >>> gather_nd(np.arange(6.0).reshape(2, 3), np.array([[1, 0], [2, 0]])).d
    array([5., 0.])
    """
    return GatherNd()(x, indices)


def scatter_nd_add(y: Any, indices: Any, shape: Sequence[int]) -> Variable:
    """Zeros of ``shape`` with ``y`` added at ``indices`` (the transpose of ``gather_nd``).

    >>> import numpy as np
    >>> scatter_nd_add(np.array([1.0, 2.0]), np.array([[1, 1]]), (3,)).d
    array([0., 3., 0.])
    """
    return ScatterNdAdd(shape=shape)(y, indices)
