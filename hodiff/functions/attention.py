"""Layers of research code: scaled dot-product attention, spectral normalization, mish,
tanh_shrink.

All are compositions of existing primitives, so each is differentiable to any
order. ``spectral_norm`` follows NNabla (power iteration, ``sigma = u^T W v``, with
``test=False`` the iteration's ``u`` written back into the ``u`` array; the gradient holds
``u`` and ``v`` constant), or differentiates through the iteration on request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff import batching as _batching
from hodiff.function import Flags, Function, Slots
from hodiff.functions import activation as _act
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import loss as _loss
from hodiff.functions import math as _math
from hodiff.functions import reduction as _reduction
from hodiff.functions.indexing import normalize_axis, shape_of
from hodiff.functions.linalg import batch_matmul
from hodiff.variable import Variable

__all__ = ["mish", "scaled_dot_product_attention", "spectral_norm", "tanh_shrink"]

Spec = list[tuple[tuple[int, ...], Any]]


class WriteBack(Function):
    """``y = u`` that also copies ``u`` into the array of ``target`` (NNabla's in-place
    update of spectral_norm's ``u``). ``target`` gets a zero gradient: ``y`` does not
    depend on it.
    """

    need_inputs = False
    # under vmap each example's u is written in turn (the last one stays): one call per example
    batch_rule = _batching.loop

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        u, target = inputs
        if u.shape != target.shape:
            raise ValueError(
                f"write_back: u of shape {u.shape} and target of shape {target.shape} differ"
            )
        return [(u.shape, u.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        u, target = inputs
        target[...] = u
        outputs[0] = u

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dy = du (target: 0)
        gy = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(gy, accum[0])
        if prop_down[1]:
            inputs[1].store(gy * 0.0, accum[1])


class StopGradient(Function):
    """``y = x`` with no gradient: what follows treats ``x`` as a constant (JAX's
    ``stop_gradient``; a static graph recomputes it on every forward, unlike
    ``Variable.unlinked``). spectral_norm holds its power iteration constant with it.
    """

    need_inputs = False
    differentiable = False
    batch_rule = _batching.elementwise

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [(inputs[0].shape, inputs[0].dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0]


def stop_gradient(x: Any) -> Variable:
    """``y = x``, not differentiable: ``x`` is a constant for every derivative of ``y``.

    >>> import numpy as np, hodiff as hd
    >>> x = hd.Variable.from_array(np.array([2.0]), need_grad=True)
    >>> (g,) = hd.grad(x * stop_gradient(x), x)
    >>> g.d
    array([2.])
    """
    return StopGradient()(x)


def write_back(u: Any, target: Any) -> Variable:
    """``y = u``, and ``u``'s values copied into ``target``'s array when computed.

    >>> import numpy as np, hodiff as hd
    >>> t = hd.Variable.from_array(np.zeros(2))  # a Variable: from_array copies an array
    >>> write_back(np.array([1.0, 2.0]), t).d, t.d
    (array([1., 2.]), array([1., 2.]))
    """
    return WriteBack()(u, target)


def _normalized(x: Any, eps: float) -> Any:
    return x / (_reduction.sum(x * x) + eps) ** 0.5


def scaled_dot_product_attention(
    query: Any, key: Any, value: Any, attn_mask: Any = None, scale: float | None = None
) -> Variable:
    """``y = softmax(q k^T / sqrt(E) + mask) v``, batched over leading axes.

    Args:
        query: (..., L, E).
        key: (..., S, E).
        value: (..., S, Ev).
        attn_mask: broadcastable to (..., L, S): a float mask is added to the scores; a
            boolean mask keeps the positions where it is True (the others get ``-inf``;
            every row must keep at least one).
        scale: the factor of the scores (default ``1 / sqrt(E)``).

    Returns:
        (..., L, Ev); leading axes broadcast as in ``batch_matmul``.

    >>> import numpy as np, hodiff.functions as F
    >>> q = np.zeros((1, 2)); k = np.zeros((3, 2)); v = np.arange(3.0).reshape(3, 1)
    >>> F.scaled_dot_product_attention(q, k, v).d
    array([[1.]])
    """
    e = shape_of(query)[-1]
    scores = batch_matmul(query, key, transpose_b=True) * (
        1.0 / math.sqrt(e) if scale is None else float(scale)
    )
    if attn_mask is not None:
        dtype = getattr(attn_mask, "dtype", None)
        dtype = np.asarray(attn_mask).dtype if dtype is None else dtype
        if np.dtype(dtype).kind == "b":
            scores = _array.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    return batch_matmul(_loss.softmax(scores, axis=-1), value)


def spectral_norm(
    w: Any,
    u: Any,
    dim: int = 0,
    itr: int = 1,
    eps: float = 1e-12,
    test: bool = False,
    output_u: bool = False,
    *,
    grad_through_iteration: bool = False,
) -> Any:
    """Spectral normalization ``W_sn = W / sigma(W)`` (NNabla's ``spectral_norm``).

    Miyato et al. 2018.

    ``W`` is ``w`` with axis ``dim`` moved first and reshaped to (M, N); ``itr`` power
    iterations from ``u`` give ``v = W^T u / |W^T u|`` and ``u = W v / |W v|`` (each norm
    ``sqrt(sum^2 + eps)``), and ``sigma = u^T W v``. As in NNabla (and PyTorch), the
    gradient holds ``u`` and ``v`` constant: ``gW = (gW_sn - sum(gW_sn * W_sn) u v^T) /
    sigma``, the derivative of ``W / sigma(W)`` once the iteration has converged, and
    ``u`` gets no gradient. With ``grad_through_iteration=True`` the iteration is
    differentiated too, so every derivative is that of the function computed, for any
    ``itr`` (and ``u`` gets its gradient).

    Args:
        w: weights of any shape (ndim >= 1).
        u: (w.shape[dim],) the left singular vector estimate. With ``test=False`` it is
            updated in place by the iteration (pass a Variable or array you keep).
        dim: the output axis of ``w``.
        itr: number of power iterations (>= 1).
        eps: added inside the square roots of the norms.
        test: if True, ``u`` is not updated.
        output_u: also return ``u`` as it was before the update (NNabla's second output).
        grad_through_iteration: differentiate through the power iteration (hodiff's
            earlier behaviour) instead of holding ``u`` and ``v`` constant.

    Returns:
        ``W_sn`` of the shape of ``w``; with ``output_u``, ``(W_sn, u)``.

    >>> import numpy as np, hodiff.functions as F
    >>> w = np.diag([3.0, 1.0]); u = np.array([1.0, 0.0])
    >>> F.spectral_norm(w, u, test=True).d
    array([[1.        , 0.        ],
           [0.        , 0.33333333]])
    """
    shape = shape_of(w)
    if not shape:
        raise ValueError("spectral_norm: w must have at least 1 dim")
    if int(itr) < 1:
        raise ValueError(f"spectral_norm: itr={itr} must be >= 1")
    d = normalize_axis("spectral_norm", dim, len(shape))
    order = (d, *(i for i in range(len(shape)) if i != d))
    wt = _array.transpose(w, order) if d else w
    m = shape[d]
    wm = _array.reshape(wt, (m, -1))
    u_in = _arith.mul_scalar(u, 1.0)  # a copy: the update below must not change what we read
    u0, w_it = u_in, wm
    if not grad_through_iteration:  # NNabla: u and v are constants of the gradient
        u0, w_it = stop_gradient(u_in), stop_gradient(wm)
    v = None
    for _ in range(int(itr)):
        v = _normalized(_matvec(w_it, u0, transpose=True), eps)
        u0 = _normalized(_matvec(w_it, v), eps)
    if not test:
        u0 = write_back(u0, u)
    sigma = _reduction.sum(u0 * _matvec(wm, v))
    y = _array.reshape(wm / sigma, wt.shape)
    if d:
        inverse = [0] * len(order)
        for i, o in enumerate(order):
            inverse[o] = i
        y = _array.transpose(y, inverse)
    return (y, u_in) if output_u else y


def _matvec(w: Any, x: Any, transpose: bool = False) -> Any:
    """``w x`` (or ``w^T x``) for a matrix ``w`` and a vector ``x``."""
    if transpose:
        return _array.reshape(batch_matmul(_array.reshape(x, (1, -1)), w), (-1,))
    return _array.reshape(batch_matmul(w, _array.reshape(x, (-1, 1))), (-1,))


def mish(x: Any) -> Variable:
    """Mish activation ``y = x tanh(softplus(x)) = x tanh(log(1 + e^x))`` elementwise.

    NNabla's ``mish``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.mish(np.array([0.0, 1.0])).d
    array([0.        , 0.86509839])
    """
    return _arith.mul2(x, _math.tanh(_act.softplus(x)))


def tanh_shrink(x: Any) -> Variable:
    """``y = x - tanh(x)`` elementwise (NNabla's ``tanh_shrink``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.tanh_shrink(np.array([0.0, 1.0])).d
    array([0.        , 0.23840584])
    """
    return _arith.sub2(x, _math.tanh(x))
