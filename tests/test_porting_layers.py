"""Layers of the classic frameworks written as compositions (docs/porting_layers.md).

Each composition is checked against a numpy reference written with loops or
plain indexing, and its derivatives to second order against finite differences
with hd.gradcheck (on ``sum(u * y**3)`` so that linear layers get a non-zero
second derivative too).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

RNG = np.random.default_rng(0)


def _u(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape)


def _check2(fn: Any, inputs: tuple[Any, ...]) -> None:
    """Derivatives of orders 1 and 2 of ``sum(u * fn(...)**3)`` against finite differences."""
    y = fn(*inputs)
    u = np.random.default_rng(1).standard_normal(y.shape)
    hd.gradcheck(lambda *xs: F.sum(fn(*xs) ** 3 * u), inputs, order=2, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- 3-D deconvolution
def deconvolution_3d(
    x: Any, w: Any, b: Any, stride: tuple[int, ...], pad: tuple[int, ...]
) -> hd.Variable:
    """(N, C, D, H, W) -> (N, C', D', H', W'): NNabla's N-d deconvolution with 3 spatial axes."""
    return F.deconvolution(x, w, b, pad=pad, stride=stride)


def _deconv3d_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: tuple[int, ...], pad: tuple[int, ...]
) -> np.ndarray:
    n, c, *size = x.shape
    co, k = w.shape[1], w.shape[2:]
    full = [(s - 1) * st + kk for s, st, kk in zip(size, stride, k, strict=True)]
    y = np.zeros((n, co, *full))
    for i in np.ndindex(*size):  # every input voxel scatters the kernel, scaled
        at = tuple(slice(j * st, j * st + kk) for j, st, kk in zip(i, stride, k, strict=True))
        for ci in range(c):
            y[(slice(None), slice(None), *at)] += (
                x[(slice(None), ci, *i)][:, None, None, None, None] * w[ci][None]
            )
    crop = tuple(slice(p, f - p) for p, f in zip(pad, full, strict=True))
    return y[(slice(None), slice(None), *crop)] + b[:, None, None, None]


def test_deconvolution_3d() -> None:
    x, w, b = _u(2, 2, 2, 3, 2), _u(2, 3, 2, 2, 3), _u(3)
    kw = {"stride": (2, 1, 2), "pad": (0, 1, 1)}
    y = deconvolution_3d(x, w, b, **kw)
    ref = _deconv3d_ref(x, w, b, **kw)
    assert y.shape == ref.shape == (2, 3, 4, 2, 3)
    np.testing.assert_allclose(y.d, ref, rtol=1e-12, atol=1e-12)
    _check2(lambda x, w, b: deconvolution_3d(x, w, b, **kw), (x[:1], w, b))


# ---------------------------------------------------------------- selective fully connected
def selective_fc(x: Any, w: Any, b: Any, select: Any) -> hd.Variable:
    """``y[n, s] = x[n] . w[:, select[n, s]] + b[select[n, s]]``: only the selected columns.

    Gathers the selected rows of ``w^T`` per sample, ``(N, S, K)``, then one batched
    product with ``x`` as ``(N, K, 1)``; no full ``(N, M)`` product is formed.
    """
    n, k = x.shape
    ws = F.gather(F.transpose(w, (1, 0)), select)  # (N, S, K)
    y = F.batch_matmul(ws, F.reshape(x, (n, k, 1)))  # (N, S, 1)
    return F.reshape(y, select.shape) + F.gather(b, select)


def test_selective_fc() -> None:
    x, w, b = _u(2, 4), _u(4, 5), _u(5)
    select = np.array([[4, 0, 2], [1, 1, 3]])  # repeated columns add up in the gradient
    y = selective_fc(x, w, b, select)
    ref = np.take_along_axis(x @ w + b, select, axis=1)
    np.testing.assert_allclose(y.d, ref, rtol=1e-12, atol=1e-12)
    _check2(lambda x, w, b: selective_fc(x, w, b, select), (x, w, b))


# ---------------------------------------------------------------- sequence concatenation
def sequence_concat(a: Any, len_a: Any, b: Any, len_b: Any) -> tuple[hd.Variable, np.ndarray]:
    """Concatenates sample by sample two batches of packed variable-length sequences.

    ``a`` is ``(sum(len_a), F)`` (sample i is rows ``off_a[i] : off_a[i] + len_a[i]``),
    ``b`` likewise; the result is packed the same way with sample i ``= [a_i; b_i]``
    and lengths ``len_a + len_b``. The lengths are static, so the order of rows is
    an index table and the layer is one gather from ``concatenate(a, b)``.
    """
    len_a, len_b = np.asarray(len_a), np.asarray(len_b)
    off_a = np.concatenate([[0], np.cumsum(len_a)[:-1]])
    off_b = np.concatenate([[0], np.cumsum(len_b)[:-1]]) + int(len_a.sum())
    rows = np.concatenate(
        [
            np.concatenate([oa + np.arange(la), ob + np.arange(lb)])
            for oa, la, ob, lb in zip(off_a, len_a, off_b, len_b, strict=True)
        ]
    ).astype(np.intp)
    return F.gather(F.concatenate(a, b, axis=0), rows), len_a + len_b


def test_sequence_concat() -> None:
    len_a, len_b = [2, 0, 3], [1, 2, 1]
    a, b = _u(sum(len_a), 2), _u(sum(len_b), 2)
    y, lengths = sequence_concat(a, len_a, b, len_b)
    sa = np.split(a, np.cumsum(len_a)[:-1])
    sb = np.split(b, np.cumsum(len_b)[:-1])
    ref = np.concatenate([np.concatenate([p, q]) for p, q in zip(sa, sb, strict=True)])
    np.testing.assert_array_equal(lengths, [3, 2, 4])
    np.testing.assert_allclose(y.d, ref, rtol=0, atol=0)
    _check2(lambda a, b: sequence_concat(a, len_a, b, len_b)[0], (a, b))


# ---------------------------------------------------------------- multiplex
def multiplex(index: Any, *xs: Any) -> hd.Variable:
    """``y[i] = xs[index[i]][i]``: row i taken from input ``index[i]``.

    The inputs are stacked to ``(N, K, ...)`` and one gather with ``batch_dims=1``
    picks input ``index[i]`` in row i (``index`` may be an array or a Variable).
    """
    return F.gather(F.stack(*xs, axis=1), index, axis=1, batch_dims=1)


def test_multiplex() -> None:
    xs = (_u(4, 3), _u(4, 3), _u(4, 3))
    index = np.array([2, 0, 0, 1])
    y = multiplex(index, *xs)
    ref = np.array([xs[k][i] for i, k in enumerate(index)])
    np.testing.assert_allclose(y.d, ref, rtol=0, atol=0)
    _check2(lambda *xs: multiplex(index, *xs), xs)


# ---------------------------------------------------------------- feature-map expansion
def featuremap_expand(x: Any, n: int, as_row_vector: bool = True) -> hd.Variable:
    """Repeats each sample's features ``n`` times without copying in the graph (broadcast).

    ``(B, F) -> (B, n * F)``: ``n`` copies of the row one after the other
    (``as_row_vector``), or each feature repeated ``n`` times in a row (column mode).
    """
    bsz, f = x.shape
    if as_row_vector:
        y = F.broadcast(F.reshape(x, (bsz, 1, f)), (bsz, n, f))
    else:
        y = F.broadcast(F.reshape(x, (bsz, f, 1)), (bsz, f, n))
    return F.reshape(y, (bsz, n * f))


@pytest.mark.parametrize("as_row_vector", [True, False])
def test_featuremap_expand(as_row_vector: bool) -> None:
    x = _u(2, 3)
    y = featuremap_expand(x, 4, as_row_vector)
    ref = np.tile(x, (1, 4)) if as_row_vector else np.repeat(x, 4, axis=1)
    np.testing.assert_allclose(y.d, ref, rtol=0, atol=0)
    _check2(lambda x: featuremap_expand(x, 4, as_row_vector), (x,))


# ---------------------------------------------------------------- mixed layer
def mixed_layer(
    x1: Any, w1: Any, x2: Any, w2: Any, x3: Any, scale: Any, ids: Any, table: Any, b: Any
) -> hd.Variable:
    """``tanh(x1 W1 + x2 W2 + x3 * scale + table[ids] + b)``: a sum of projections.

    The projections of PaddlePaddle's ``mixed_layer``: two full-matrix projections,
    a dot-mul (elementwise) projection and a table (embedding) projection, then
    the bias and the activation.
    """
    y = F.affine(x1, w1) + F.affine(x2, w2) + x3 * scale + F.embed(ids, table)
    return F.tanh(y + b)


def test_mixed_layer() -> None:
    ids = np.array([3, 0])
    args = (_u(2, 3), _u(3, 4), _u(2, 2), _u(2, 4), _u(2, 4), _u(4), ids, _u(5, 4), _u(4))
    y = mixed_layer(*args)
    x1, w1, x2, w2, x3, scale, _, table, b = args
    ref = np.tanh(x1 @ w1 + x2 @ w2 + x3 * scale + table[ids] + b)
    np.testing.assert_allclose(y.d, ref, rtol=1e-12, atol=1e-12)
    floats = tuple(a for a in args if a is not ids)

    def f(
        x1: Any, w1: Any, x2: Any, w2: Any, x3: Any, scale: Any, table: Any, b: Any
    ) -> hd.Variable:
        return mixed_layer(x1, w1, x2, w2, x3, scale, ids, table, b)

    # tanh is not linear: check the layer itself to second order
    u = _u(2, 4)
    hd.gradcheck(lambda *xs: F.sum(f(*xs) * u), floats, order=2, atol=1e-5, rtol=1e-4)
