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

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.tracing import shape_bound, traced
from hodiff.engine.variable import Variable
from hodiff.functions import activation as _act
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import logic as _logic
from hodiff.functions import loss as _loss
from hodiff.functions import math as _math
from hodiff.functions import nn as _nn
from hodiff.functions import reduction as _reduction
from hodiff.functions import state as _state
from hodiff.functions.indexing import normalize_axis, shape_of
from hodiff.functions.linalg import affine, batch_matmul

__all__ = [
    "mish",
    "multi_head_attention",
    "scaled_dot_product_attention",
    "spectral_norm",
    "tanh_shrink",
]

Spec = list[tuple[tuple[int, ...], Any]]


class WriteBack(Function, follows_shape=False):
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
        if not _state.is_replaying():  # once per call, not again when a transform recomputes
            target[...] = u
        outputs[0] = u

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # dy = du (target: 0)
        gy = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(gy, accum[0])
        if prop_down[1]:
            inputs[1].store(gy * 0.0, accum[1])

    def jet_rule(self, jp: Any, ins: list[Any], outs: list[Any]) -> list[Any]:
        # y_k = u_k (not written into target: only the value is); target's are not read
        return [None if ins[0] is None else list(ins[0])]


class StopGradient(Function, follows_shape=True, follows_rank=True):
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


@traced
@real_values
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
    if scale is None:  # 1/sqrt(E) from the shape: a static graph cannot carry it to a new E
        shape_bound(scores)
    if attn_mask is not None:
        dtype = getattr(attn_mask, "dtype", None)
        dtype = np.asarray(attn_mask).dtype if dtype is None else dtype
        if np.dtype(dtype).kind == "b":
            scores = _array.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    return batch_matmul(_loss.softmax(scores, axis=-1), value)


@traced
def multi_head_attention(
    query: Any,
    key: Any,
    value: Any,
    num_heads: int,
    q_weight: Any,
    k_weight: Any,
    v_weight: Any,
    out_weight: Any,
    q_bias: Any = None,
    k_bias: Any = None,
    v_bias: Any = None,
    out_bias: Any = None,
    attn_bias_k: Any = None,
    attn_bias_v: Any = None,
    dropout: float = 0.0,
    additive_mask: Any = None,
    key_padding_mask: Any = None,
) -> tuple[Variable, Variable]:
    """Multi-head attention, as NNabla's ``F.multi_head_attention`` (sequence-first layout).

    ``q = query W_q + b_q`` (and ``k``, ``v``), split into ``H`` heads of ``E / H``; per
    head ``A = softmax(q k^T / sqrt(E / H) + mask)``, ``o = A v``; the heads joined and
    ``y = o W_out + b_out``. ``attn_bias_k``/``attn_bias_v`` append one learned key and
    value; ``key_padding_mask`` (nonzero: ignored) sets those scores to ``-inf``.

    Args:
        query: ``(L_T, B, D_q)``.
        key: ``(L_S, B, D_k)``.
        value: ``(L_S, B, D_v)``.
        num_heads: ``H``; ``E`` and ``E_v`` must be multiples of it.
        q_weight: ``(D_q, E)``.
        k_weight: ``(D_k, E)``.
        v_weight: ``(D_v, E_v)``.
        out_weight: ``(E_v, E_out)``.
        q_bias: optional ``(E,)``.
        k_bias: optional ``(E,)``.
        v_bias: optional ``(E_v,)``.
        out_bias: optional ``(E_out,)``.
        attn_bias_k: optional ``(E,)``, with ``attn_bias_v`` ``(E_v,)``.
        attn_bias_v: see ``attn_bias_k``.
        dropout: dropout ratio of the attention weights.
        additive_mask: optional ``(L_T, L_S)``, added to the scores.
        key_padding_mask: optional ``(B, L_S)``; nonzero entries are ignored.

    Returns:
        ``(y, A)``: ``y`` of shape ``(L_T, B, E_out)`` and the attention weights of shape
        ``(B * H, L_T, L_S)`` (``L_S + 1`` with ``attn_bias_k``), as NNabla's code returns.

    >>> import numpy as np, hodiff.functions as F
    >>> x = np.ones((2, 1, 4)); w = np.eye(4)
    >>> y, a = F.multi_head_attention(x, x, x, 2, w, w, w, w)
    >>> y.shape, a.shape, a.d[0, 0]
    ((2, 1, 4), (2, 2, 2), array([0.5, 0.5]))
    """
    lt, b, ls, e, e_v = _attention_sizes(query, key, value, num_heads, q_weight, k_weight, v_weight)
    if (attn_bias_k is None) != (attn_bias_v is None):
        raise ValueError("multi_head_attention: attn_bias_k and attn_bias_v go together")
    h, d, d_v = int(num_heads), e // num_heads, e_v // num_heads
    q = affine(query, q_weight, q_bias, base_axis=2) * (float(d) ** -0.5)
    k = affine(key, k_weight, k_bias, base_axis=2)
    v = affine(value, v_weight, v_bias, base_axis=2)
    if attn_bias_k is not None:  # one more key and value, the same for every sample
        ls += 1
        bias_k = _array.broadcast(_array.reshape(attn_bias_k, (1, 1, e)), (1, b, e))
        bias_v = _array.broadcast(_array.reshape(attn_bias_v, (1, 1, e_v)), (1, b, e_v))
        k = _array.concatenate(k, bias_k, axis=0)
        v = _array.concatenate(v, bias_v, axis=0)
        if additive_mask is not None:
            additive_mask = _array.pad(additive_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = _array.pad(key_padding_mask, (0, 1))

    def heads(t: Any, length: int, size: int) -> Any:  # (L, B, H size) -> (B H, L, size)
        return _array.transpose(_array.reshape(t, (length, b * h, size)), (1, 0, 2))

    scores = batch_matmul(heads(q, lt, d), heads(k, ls, d), transpose_b=True)
    if additive_mask is not None:
        scores = scores + _array.reshape(additive_mask, (1, lt, ls))
    if key_padding_mask is not None:
        ignored = _logic.not_equal(_array.reshape(key_padding_mask, (b, 1, 1, ls)), 0)
        scores = _array.reshape(
            _array.where(ignored, -math.inf, _array.reshape(scores, (b, h, lt, ls))),
            (b * h, lt, ls),
        )
    weights = _loss.softmax(scores, axis=-1)
    if dropout > 0:
        weights = _nn.dropout(weights, p=dropout)
    o = batch_matmul(weights, heads(v, ls, d_v))  # (B H, L_T, d_v)
    o = _array.reshape(_array.transpose(o, (1, 0, 2)), (lt, b, e_v))
    return affine(o, out_weight, out_bias, base_axis=2), weights


def _attention_sizes(
    query: Any, key: Any, value: Any, num_heads: Any, q_weight: Any, k_weight: Any, v_weight: Any
) -> tuple[int, int, int, int, int]:
    """``(L_T, B, L_S, E, E_v)``; raises unless q and k embed into one size, ``num_heads``
    divides both embedding sizes and query, key and value agree on their lengths and batch.
    """
    name = "multi_head_attention"
    (lt, b, _), (ls, bk, _) = shape_of(query), shape_of(key)
    e, e_v = shape_of(q_weight)[1], shape_of(v_weight)[1]
    if shape_of(k_weight)[1] != e:
        raise ValueError(
            f"{name}: q_weight of shape {shape_of(q_weight)} and k_weight of shape"
            f" {shape_of(k_weight)} must embed into the same size"
        )
    if isinstance(num_heads, bool) or not isinstance(num_heads, int | np.integer) or num_heads < 1:
        raise ValueError(f"{name}: num_heads={num_heads} must be an int >= 1")
    if e % num_heads or e_v % num_heads:
        raise ValueError(
            f"{name}: the embedding sizes E={e} and E_v={e_v} must be multiples of"
            f" num_heads={num_heads}"
        )
    if bk != b or shape_of(value)[:2] != (ls, b):
        raise ValueError(
            f"{name}: query {shape_of(query)}, key {shape_of(key)} and value"
            f" {shape_of(value)} must be (L_T, B, D), (L_S, B, D_k), (L_S, B, D_v)"
        )
    return lt, b, ls, e, e_v


@traced
@real_values
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


@traced
@real_values
def mish(x: Any) -> Variable:
    """Mish activation ``y = x tanh(softplus(x)) = x tanh(log(1 + e^x))`` elementwise.

    NNabla's ``mish``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.mish(np.array([0.0, 1.0])).d
    array([0.        , 0.86509839])
    """
    return _arith.mul2(x, _math.tanh(_act.softplus(x)))


@traced
@real_values
def tanh_shrink(x: Any) -> Variable:
    """``y = x - tanh(x)`` elementwise (NNabla's ``tanh_shrink``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.tanh_shrink(np.array([0.0, 1.0])).d
    array([0.        , 0.23840584])
    """
    return _arith.sub2(x, _math.tanh(x))
