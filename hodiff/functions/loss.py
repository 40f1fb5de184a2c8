"""The softmax family and the losses (NNabla's definitions: element-wise, no reduction).

``softmax``, ``log_softmax``, ``softmax_cross_entropy`` and
``sigmoid_cross_entropy`` are fused primitives: their forwards are the stable
log-sum-exp forms (no overflow for logits of 1e4) and their backwards are one
cheap expression each. The other losses are compositions of existing functions
and need no rule of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.arguments import as_variables
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import activation as _act
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import math as _math
from hodiff.functions import reduction as _red
from hodiff.functions import shaping as _shaping
from hodiff.functions._index_kernels import normalize_base_axis
from hodiff.functions._loss_kernels import (
    check_labels,
    labels_in_range,
    log_softmax_array,
    resolve_axis,
    softmax_array,
)
from hodiff.grad_functions import loss as _gloss

__all__ = [
    "absolute_error",
    "binary_cross_entropy",
    "categorical_cross_entropy",
    "epsilon_insensitive_loss",
    "huber_loss",
    "kl_multinomial",
    "log_softmax",
    "sigmoid_cross_entropy",
    "softmax",
    "softmax_cross_entropy",
    "squared_error",
]

Spec = list[tuple[tuple[int, ...], Any]]


# the label checks and softmax kernels are in _loss_kernels.py (shared with the gradients)
class _AxisFunction(Function, register=False, follows_shape=True):
    def __init__(self, *, axis: int | None = None) -> None:
        self.axis = axis

    def _axis(self, ndim: int) -> int:
        return resolve_axis(self.name, self.axis, ndim)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        self._axis(x.ndim)
        return [(x.shape, float_dtype(x.dtype))]


def _batch_axis(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    # softmax, log_softmax: the axis shifted past the batch axis (None, the last, stays)
    (x,) = inputs
    axis = None if self.axis is None else _batching.map_axis(self.axis, x.ndim - 1)
    return _batching.renew(self, axis=axis)(x)


class Softmax(_AxisFunction):
    need_inputs = False
    need_outputs = True
    batch_rule = _batch_axis
    taylor = "composite"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = softmax_array(array_module(x), x, self._axis(x.ndim))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dx = y (gy - <gy, y>) along the axis
        if prop_down[0]:
            y, gy = outputs[0].data, outputs[0].grad
            axis = self._axis(len(outputs[0].shape))
            inputs[0].store(y * (gy - _red.sum(gy * y, axis=axis, keepdims=True)), accum[0])

    def composition(self, x: Any) -> Any:
        # Taylor mode: e / sum(e), e = exp(x - m), m the max held constant
        axis = self._axis(x.ndim)
        e = _math.exp(x - _red.max_shift(x, axis))
        return e / _red.sum(e, axis=axis, keepdims=True)


class LogSoftmax(_AxisFunction):
    """Fused for stability: ``x - max - log(sum(exp(x - max)))`` never takes the log of 0."""

    need_inputs = False
    need_outputs = True
    batch_rule = _batch_axis
    taylor = "composite"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        outputs[0] = log_softmax_array(array_module(x), x, self._axis(x.ndim))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dx = gy - exp(y) sum(gy) along the axis
        if prop_down[0]:
            y, gy = outputs[0].data, outputs[0].grad
            axis = self._axis(len(outputs[0].shape))
            total = _red.sum(gy, axis=axis, keepdims=True)
            inputs[0].store(gy - _math.exp(y) * total, accum[0])

    def composition(self, x: Any) -> Any:
        # Taylor mode: z - log(sum(exp(z))), z = x - m, m the max held constant
        axis = self._axis(x.ndim)
        z = x - _red.max_shift(x, axis)
        return z - _math.log(_red.sum(_math.exp(z), axis=axis, keepdims=True))


class SoftmaxCrossEntropy(_AxisFunction):
    """Fused: the forward is a log-sum-exp, the backward the single kernel
    ``softmax_cross_entropy_grad`` (softmax - onehot), the hot path of classifier training.
    """

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, t = inputs
        kept = check_labels(self.name, x.shape, t, self._axis(x.ndim))
        return [(kept, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, t = inputs
        xp = array_module(x)
        axis = self._axis(x.ndim)
        t = labels_in_range(self.name, xp, t, axis, x.shape)
        z = x - x.max(axis=axis, keepdims=True)
        lse = xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
        y = lse - xp.take_along_axis(z, t, axis)  # a label -1 picks the last: masked below
        outputs[0] = xp.where(t < 0, xp.zeros((), y.dtype), y)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dx = gy (softmax(x) - onehot(t)), zero for a label -1; the labels get no gradient
        if prop_down[0]:
            gx = _gloss.softmax_cross_entropy_grad(
                inputs[0].data, inputs[1].data, outputs[0].grad, axis=self.axis
            )
            inputs[0].store(gx, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # (x, t): both batched (an unbatched one broadcast along the batch), the axis shifted
        size = _batching.batch_size(inputs, axes)
        x, t = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        axis = None if self.axis is None else _batching.map_axis(self.axis, x.ndim - 1)
        return _batching.renew(self, axis=axis)(x, t)


class SigmoidCrossEntropy(Function, follows_shape=True):
    """Fused for stability: ``max(x, 0) - x t + log1p(exp(-|x|))`` never overflows."""

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, t = inputs
        if x.shape != t.shape:
            raise ValueError(
                f"sigmoid_cross_entropy: x of shape {x.shape} and target t of shape {t.shape}"
                " must have the same shape"
            )
        if t.dtype.kind not in "fiub":
            raise TypeError(f"sigmoid_cross_entropy: target t has unsupported dtype {t.dtype}")
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, t = inputs
        xp = array_module(x)
        dtype = float_dtype(x.dtype)
        x = x.astype(dtype, copy=False)
        y = xp.maximum(x, 0) - x * xp.asarray(t).astype(dtype, copy=False)
        y += xp.log1p(xp.exp(-xp.abs(x)))
        outputs[0] = y

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = softplus(x) - x t:  dx = gy (sigmoid(x) - t),  dt = -gy x
        gy = outputs[0].grad
        x, t = inputs[0].data, inputs[1].data
        if prop_down[0]:
            if t.dtype != x.dtype:  # integer labels: keep x's float dtype (float32 stays)
                t = _shaping.astype(t, x.dtype)
            inputs[0].store(gy * (_act.sigmoid(x) - t), accum[0])
        if prop_down[1]:
            inputs[1].store(-(gy * x), accum[1])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        size = _batching.batch_size(inputs, axes)
        x, t = (_batching.batched(v, a, size) for v, a in zip(inputs, axes, strict=True))
        return self(x, t)


def _operands(name: str, x0: Any, x1: Any, names: tuple[str, str] = ("x0", "x1")) -> Any:
    """The two operands of an element-wise loss as Variables, after the one rule of every
    loss here: they may broadcast to the shape of one of them (a target ``(C,)`` against
    predictions ``(N, C)``, a scalar), never to a shape larger than both, as ``(4, 1)``
    against ``(4,)`` would (``(4, 4)``: almost always a missing reshape; PyTorch warns).

    Raises:
        ValueError: naming the loss, both shapes and the shape they would broadcast to.
    """
    x0, x1 = as_variables(x0, x1)
    s0, s1 = x0.shape, x1.shape
    if s0 != s1:
        try:
            out = np.broadcast_shapes(s0, s1)
        except ValueError:
            out = None  # the function itself raises its shape error
        if out is not None and out != s0 and out != s1:
            a, b = names
            raise ValueError(
                f"{name}: {a} of shape {s0} and {b} of shape {s1} broadcast to {out}, larger "
                f"than either (every pair of elements, not element against element): reshape "
                f"one of them (e.g. F.reshape({b}, {s0}) when they hold the same number of "
                "elements), or F.broadcast both explicitly if the pairs are meant"
            )
    return x0, x1


# ---------------------------------------------------------------- wrappers
@traced
def softmax(x: Any, axis: int | None = None) -> Variable:
    """Softmax along ``axis`` (default: the last): ``y_i = exp(x_i) / sum_j exp(x_j)``.

    Computed as ``exp(x - max(x))`` normalised, so large logits do not overflow.

    >>> import numpy as np, hodiff.functions as F
    >>> F.softmax(np.array([0.0, np.log(3.0)])).d
    array([0.25, 0.75])
    """
    return Softmax(axis=axis)(x)


@traced
def log_softmax(x: Any, axis: int | None = None) -> Variable:
    """``y_i = x_i - log(sum_j exp(x_j))`` along ``axis`` (default: the last), computed stably.

    >>> import numpy as np, hodiff.functions as F
    >>> np.exp(F.log_softmax(np.array([1e4, 1e4])).d)
    array([0.5, 0.5])
    """
    return LogSoftmax(axis=axis)(x)


@traced
def softmax_cross_entropy(x: Any, t: Any, axis: int | None = None) -> Variable:
    """Cross entropy of integer labels ``t`` under ``softmax(x)`` along ``axis``, per sample.

    ``y_j = -log(softmax(x_j)[t_j]) = logsumexp(x_j) - x_{j, t_j}``.

    Args:
        x: scores of shape ``(D_1, ..., C, ..., D_N)`` (``C`` on ``axis``, default the last).
        t: integer labels in ``[0, C)`` of shape ``(D_1, ..., 1, ..., D_N)`` (or without the
            axis); they get no gradient. A label ``-1`` marks a sample to ignore, as in
            NNabla: its loss is 0 and its scores get no gradient.
        axis: the class axis.

    Returns:
        The element-wise losses, shape ``(D_1, ..., 1, ..., D_N)``.

    Raises:
        TypeError: ``t`` is not an integer array.
        ValueError: ``t`` has the wrong shape or a label outside ``[0, C)`` other than -1.

    >>> import numpy as np, hodiff.functions as F
    >>> F.softmax_cross_entropy(np.array([[0.0, 0.0]]), np.array([[1]])).d
    array([[0.69314718]])

    """
    return SoftmaxCrossEntropy(axis=axis)(x, t)


@traced
@real_values
def categorical_cross_entropy(x: Any, t: Any, axis: int | None = None) -> Variable:
    """``y_j = -log(x_{j, t_j})``: cross entropy of integer labels ``t`` under probabilities ``x``.

    Shapes as in :func:`softmax_cross_entropy`; ``x`` must be positive at the labels. A
    label ``-1`` is ignored, as in NNabla: loss 0, no gradient.

    >>> import numpy as np, hodiff.functions as F
    >>> F.categorical_cross_entropy(np.array([[0.25, 0.75], [0.5, 0.5]]), np.array([[1], [-1]])).d
    array([[0.28768207],
           [0.        ]])
    """
    picked = _gloss.SelectByLabel(axis=axis, caller="categorical_cross_entropy")(x, t)
    # an ignored label picks 0 (no gradient): log(0 + 1) = 0
    return 0.0 - _math.log(picked + (1.0 - label_weight(t, picked.shape, picked.dtype)))


def label_weight(t: Any, shape: tuple[int, ...], dtype: Any) -> Variable:
    """``1`` where a label counts and ``0`` where it is ``-1`` (ignored), of ``shape`` (the
    loss shape) and ``dtype``; not differentiable. Labels were checked by the caller.
    """
    kept = _array.greater_equal(_array.reshape(t, shape), 0)
    return _shaping.astype(kept, dtype)


@traced
def sigmoid_cross_entropy(x: Any, t: Any) -> Variable:
    """``y = -(t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x)))`` element-wise, computed stably.

    Args:
        x: scores (logits), any shape.
        t: targets of the same shape, 0/1 labels (int) or probabilities (float; then ``t``
            gets a gradient, ``-x``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.sigmoid_cross_entropy(np.array([0.0, 1e4]), np.array([1, 1])).d
    array([0.69314718, 0.        ])

    """
    return SigmoidCrossEntropy()(x, t)


@traced
@real_values
def binary_cross_entropy(x: Any, t: Any) -> Variable:
    """``y = -(t log(x) + (1 - t) log(1 - x))`` element-wise, for probabilities ``0 < x < 1``.

    ``t`` may be probabilities too (it gets a gradient, ``log(1 - x) - log(x)``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.binary_cross_entropy(np.array([0.5]), np.array([1.0])).d
    array([0.69314718])
    """
    x, t = _operands("binary_cross_entropy", x, t, ("x", "t"))
    return -(t * _math.log(x) + (1.0 - t) * _math.log(1.0 - x))


@traced
@real_values
def squared_error(x0: Any, x1: Any) -> Variable:
    """``y = (x0 - x1)^2`` element-wise (broadcasting).

    >>> import numpy as np, hodiff.functions as F
    >>> F.squared_error(np.array([1.0, 3.0]), np.array([0.0, 1.0])).d
    array([1., 4.])
    """
    x0, x1 = _operands("squared_error", x0, x1)
    return _arith.pow_scalar(_arith.sub2(x0, x1), 2.0)


@traced
@real_values
def absolute_error(x0: Any, x1: Any) -> Variable:
    """``y = |x0 - x1|`` element-wise (broadcasting); the gradient is 0 where ``x0 == x1``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.absolute_error(np.array([1.0, 3.0]), np.array([0.0, 5.0])).d
    array([1., 2.])
    """
    x0, x1 = _operands("absolute_error", x0, x1)
    return _arith.abs(_arith.sub2(x0, x1))


@traced
@real_values
def huber_loss(x0: Any, x1: Any, delta: float = 1.0) -> Variable:
    """NNabla's Huber loss, element-wise: with ``d = x0 - x1``,
    ``y = d^2`` where ``|d| < delta`` and ``delta (2 |d| - delta)`` elsewhere.

    >>> import numpy as np, hodiff.functions as F
    >>> F.huber_loss(np.array([0.5, 3.0]), np.array([0.0, 0.0])).d
    array([0.25, 5.  ])
    """
    delta = _arith.check_scalar("huber_loss", "delta", delta)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    x0, x1 = _operands("huber_loss", x0, x1)
    d = _arith.sub2(x0, x1)
    a = _arith.abs(d)
    inner = _array.less(a, delta)
    return _array.where(inner, d * d, (2.0 * delta) * a - delta * delta)


@traced
@real_values
def epsilon_insensitive_loss(x0: Any, x1: Any, epsilon: float) -> Variable:
    """``y = max(|x0 - x1| - epsilon, 0)`` elementwise, broadcast (NNabla's).

    The gradient is ``sign(x0 - x1)`` (``-`` for ``x1``) where ``|x0 - x1| > epsilon``, 0
    elsewhere (0 at the kinks, as NNabla).

    Args:
        x0: input.
        x1: target, broadcastable with ``x0``.
        epsilon: the insensitive margin (>= 0).

    Returns:
        The broadcast shape.

    >>> import numpy as np, hodiff.functions as F
    >>> F.epsilon_insensitive_loss(np.array([0.0, 2.0, -3.0]), np.zeros(3), 1.0).d
    array([0., 1., 2.])
    """
    epsilon = _arith.check_scalar("epsilon_insensitive_loss", "epsilon", epsilon)
    if epsilon < 0:
        raise ValueError(f"epsilon_insensitive_loss: epsilon={epsilon} must be >= 0")
    return _act.relu(_arith.abs(_arith.sub2(x0, x1)) - epsilon)


@traced
@real_values
def kl_multinomial(p: Any, q: Any, base_axis: int = 1) -> Variable:
    """Kullback-Leibler divergence of categorical distributions, ``D = sum_i p_i log(p_i / q_i)``.

    The sum runs over the axes from ``base_axis`` on; as NNabla, ``1e-8`` is added inside each
    log so that ``p_i = 0`` contributes 0.

    Args:
        p: source probabilities, shape ``(M_0, ..., M_{B-1}, D_B, ..., D_N)``.
        q: target probabilities, same shape.
        base_axis: the number of leading sample axes ``B`` (at least 1, less than ``p.ndim``).

    Returns:
        Shape ``(M_0, ..., M_{B-1}, 1)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.kl_multinomial(np.array([[0.5, 0.5]]), np.array([[0.5, 0.5]])).d
    array([[0.]])

    """
    p, q = as_variables(p, q)
    if p.shape != q.shape:
        raise ValueError(
            f"kl_multinomial: p of shape {p.shape} and q of shape {q.shape} must have the same"
            " shape"
        )
    base_axis = normalize_base_axis("kl_multinomial", base_axis, p.ndim, low=1)
    eps = 1e-8
    terms = p * (_math.log(p + eps) - _math.log(q + eps))
    d = _red.sum(terms, axis=tuple(range(base_axis, p.ndim)))
    return _array.reshape(d, (*p.shape[:base_axis], 1))
