"""Dropout (one mask for every order, seeds) and embed (ids, scatter-add, second order)."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.grad_functions.nn import embed_weight_grad


def var(a: np.ndarray, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a), need_grad=need_grad)


def mask_of(y: hd.Variable) -> np.ndarray:
    return y.parent.inputs[1].d  # y = x * mask


# ---------------------------------------------------------------- dropout
def test_dropout_uses_the_same_mask_at_every_order() -> None:
    x0 = np.random.default_rng(0).uniform(0.5, 1.5, size=(4, 6))
    x = var(x0)
    y = F.dropout(x, p=0.4)
    m = mask_of(y)
    assert set(np.unique(m)) <= {0.0, 1 / 0.6}
    f = F.sum(y * y * y)  # f = sum (m x)^3
    f.backward()
    np.testing.assert_allclose(x.g, 3 * m**3 * x0**2)
    (g,) = hd.grad(f, [x])
    np.testing.assert_allclose(g.d, 3 * m**3 * x0**2)
    (h,) = hd.grad(F.sum(g), [x])
    np.testing.assert_allclose(h.d, 6 * m**3 * x0)
    (k,) = hd.grad(F.sum(h), [x])
    np.testing.assert_allclose(k.d, 6 * m**3)


def test_dropout_seed_is_reproducible() -> None:
    x = np.ones((10, 10))
    a = F.dropout(x, p=0.5, seed=7).d
    b = F.dropout(x, p=0.5, seed=7).d
    c = F.dropout(x, p=0.5, seed=8).d
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    d, e = F.dropout(x, p=0.5).d, F.dropout(x, p=0.5).d  # fresh entropy each call
    assert not np.array_equal(d, e)


def test_dropout_static_graph_draws_a_new_mask_per_forward_and_backward_follows_it() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((8, 8), need_grad=True)
        y = F.dropout(x, p=0.5, seed=1)
        loss = F.sum(y)
    x.d = np.ones((8, 8))
    masks = []
    for _ in range(2):
        loss.forward()
        x.zero_grad()
        loss.backward()
        masks.append(mask_of(y).copy())
        np.testing.assert_array_equal(x.g, masks[-1])
        np.testing.assert_array_equal(y.d, masks[-1])
    assert not np.array_equal(masks[0], masks[1])


def test_dropout_scaling_keeps_the_mean_and_float32() -> None:
    y = F.dropout(np.ones((200, 200), np.float32), p=0.3, seed=0)
    assert y.dtype == np.float32
    assert abs(float(y.d.mean()) - 1.0) < 0.02
    assert abs(float((y.d == 0).mean()) - 0.3) < 0.02
    np.testing.assert_array_equal(F.dropout(np.arange(4.0), p=0.0).d, np.arange(4.0))


def test_dropout_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\), got 1.0"):
        F.dropout(np.ones(3), p=1.0)
    with pytest.raises(TypeError, match="dropout: seed must be an int"):
        F.dropout(np.ones(3), seed=1.5)


# ---------------------------------------------------------------- embed
def test_embed_weight_gradient_sums_repeated_ids() -> None:
    w = var(np.arange(8.0).reshape(4, 2))
    ids = np.array([[1, 3, 1], [0, 1, 3]])
    y = F.embed(ids, w)
    assert y.shape == (2, 3, 2)
    np.testing.assert_array_equal(y.d, w.d[ids])
    F.sum(y * np.arange(12.0).reshape(2, 3, 2)).backward()
    np.testing.assert_array_equal(w.g, [[6, 7], [0 + 4 + 8, 1 + 5 + 9], [0, 0], [2 + 10, 3 + 11]])


def test_embed_second_order_through_the_scatter() -> None:
    # f(w) = sum(embed(ids, w)^3): H v = 6 * scatter(embed(w) * embed(v))
    rng = np.random.default_rng(3)
    w0, v = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    ids = np.array([0, 4, 4, 2])
    w = var(w0)
    (g,) = hd.grad(F.sum(F.embed(ids, w) ** 3), [w])
    (hv,) = hd.grad(F.sum(g * v), [w])
    expected = np.zeros_like(w0)
    np.add.at(expected, ids, 6 * w0[ids] * v[ids])
    np.testing.assert_allclose(hv.d, expected, rtol=1e-12)
    # and the scatter's own backward is a gather
    gy = var(rng.standard_normal((4, 3)))
    F.sum(embed_weight_grad(gy, ids, n=5) * w0).backward()
    np.testing.assert_allclose(gy.g, w0[ids])


def test_embed_bad_ids() -> None:
    w = np.ones((4, 2))
    with pytest.raises(TypeError, match="embed: ids x must be an integer array, got dtype float64"):
        F.embed(np.zeros(3), w)
    with pytest.raises(ValueError, match=r"embed: ids x of shape \(2,\) must lie in \[0, 4\)"):
        F.embed(np.array([0, 4]), w)
    with pytest.raises(ValueError, match=r"got values in \[-1, 0\]"):
        F.embed(np.array([-1, 0]), w)
