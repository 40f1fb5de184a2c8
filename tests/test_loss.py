"""Softmax family and losses: stability at huge logits, label errors, closed-form derivatives."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.grad_functions.loss import scatter_by_label, select_by_label

BIG = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]])


def var(a: np.ndarray, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a), need_grad=need_grad)


# ---------------------------------------------------------------- stability
def test_softmax_family_is_finite_for_logits_of_1e4() -> None:
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s = F.softmax(BIG).d
        ls = F.log_softmax(BIG).d
        loss = F.softmax_cross_entropy(BIG, np.array([[0], [2]])).d
        loss_far = F.softmax_cross_entropy(BIG, np.array([[2], [0]])).d
    np.testing.assert_allclose(s, [[1, 0, 0], [0, 0.5, 0.5]])
    np.testing.assert_allclose(ls, [[0, -1e4, -2e4], [-2e4 - np.log(2), -np.log(2), -np.log(2)]])
    np.testing.assert_allclose(loss, [[0.0], [np.log(2)]])
    np.testing.assert_allclose(loss_far, [[2e4], [2e4 + np.log(2)]])


def test_softmax_cross_entropy_derivatives_are_finite_for_logits_of_1e4() -> None:
    t = np.array([[1], [0]])
    x = var(BIG)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = F.sum(F.softmax_cross_entropy(x, t))
        loss.backward()
        (g,) = hd.grad(loss, [x])
        (gg,) = hd.grad(F.sum(g * g), [x])
    np.testing.assert_allclose(x.g, [[1, -1, 0], [-1, 0.5, 0.5]])
    np.testing.assert_allclose(g.d, x.g)
    assert np.all(np.isfinite(gg.d))


def test_sigmoid_cross_entropy_is_finite_for_logits_of_1e4() -> None:
    x = var(np.array([1e4, -1e4, 1e4, -1e4]))
    t = np.array([1, 0, 0, 1])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = F.sigmoid_cross_entropy(x, t)
        F.sum(y).backward()
        (g,) = hd.grad(F.sum(y), [x])
        (gg,) = hd.grad(F.sum(g * g), [x])
    np.testing.assert_allclose(y.d, [0, 0, 1e4, 1e4])
    np.testing.assert_allclose(x.g, [0, 0, 1, -1])
    assert np.all(np.isfinite(gg.d))


def test_log_softmax_backward_does_not_divide() -> None:
    # dx = gy - softmax * sum(gy): exact even where softmax underflows to 0
    x = var(BIG)
    F.sum(F.log_softmax(x) * np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])).backward()
    np.testing.assert_allclose(x.g, [[0, 0, 0], [0, -0.5, 0.5]])


# ---------------------------------------------------------------- closed forms
def test_softmax_cross_entropy_gradient_and_hessian_closed_form() -> None:
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 4))
    t = np.array([[3], [1]])
    s = np.exp(x0) / np.exp(x0).sum(axis=1, keepdims=True)
    x = var(x0)
    loss = F.sum(F.softmax_cross_entropy(x, t))
    (g,) = hd.grad(loss, [x])
    np.testing.assert_allclose(g.d, s - np.eye(4)[t[:, 0]], atol=1e-12)
    h = hd.hessian(lambda v: F.sum(F.softmax_cross_entropy(v, t)), x0)
    for i in range(2):
        np.testing.assert_allclose(h[i, :, i, :], np.diag(s[i]) - np.outer(s[i], s[i]), atol=1e-12)
        np.testing.assert_allclose(h[i, :, 1 - i, :], 0.0, atol=1e-12)


def test_softmax_cross_entropy_equals_log_softmax_pick() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 4))
    t = rng.integers(0, 2, size=(3, 1, 4))
    y = F.softmax_cross_entropy(x, t, axis=1).d
    ref = -np.take_along_axis(F.log_softmax(x, axis=1).d, t, axis=1)
    np.testing.assert_allclose(y, ref, rtol=1e-12)


def test_select_and_scatter_are_transposes() -> None:
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((3, 5)), rng.standard_normal((3, 1))
    t = np.array([[4], [0], [2]])
    lhs = np.sum(select_by_label(x, t).d * g)
    rhs = np.sum(x * scatter_by_label(g, t, axis=1, size=5).d)
    np.testing.assert_allclose(lhs, rhs)


def test_kl_multinomial_of_a_one_hot_p_is_finite() -> None:
    p = var(np.array([[1.0, 0.0, 0.0]]))
    q = var(np.array([[0.5, 0.25, 0.25]]))
    d = F.kl_multinomial(p, q)
    assert d.shape == (1, 1)
    np.testing.assert_allclose(d.d, [[np.log(2)]], rtol=1e-6)
    d.backward()
    assert np.all(np.isfinite(p.g))
    assert np.all(np.isfinite(q.g))


def test_losses_keep_float32() -> None:
    x = np.ones((2, 3), np.float32)
    t = np.zeros((2, 1), np.int64)
    for y in (
        F.softmax_cross_entropy(x, t),
        F.categorical_cross_entropy(x * 0.5, t),
        F.sigmoid_cross_entropy(x, np.ones((2, 3), np.int64)),
        F.huber_loss(x, x * 0),
    ):
        assert y.dtype == np.float32


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", [F.softmax_cross_entropy, F.categorical_cross_entropy])
def test_float_labels_raise_type_error(fn) -> None:
    name = fn.__name__
    with pytest.raises(
        TypeError,
        match=rf"{name}: labels t must be an integer array, got dtype"
        r" float64 \(shape \(2, 1\)\)",
    ):
        fn(np.ones((2, 3)), np.zeros((2, 1)))


@pytest.mark.parametrize("fn", [F.softmax_cross_entropy, F.categorical_cross_entropy])
def test_labels_out_of_range_raise_value_error(fn) -> None:
    name = fn.__name__
    with pytest.raises(
        ValueError,
        match=rf"{name}: labels t of shape \(2, 1\) must lie in"
        r" \[0, 3\) \(or be -1: ignored\) for x of shape \(2, 3\).*\[0, 3\]",
    ):
        fn(np.ones((2, 3)), np.array([[0], [3]]))
    # -1 is NNabla's ignored sample; any other negative label is an error
    with pytest.raises(ValueError, match=r"got values in \[-2, 0\]"):
        fn(np.ones((2, 3)), np.array([[-2], [0]]))


def test_label_shape_mismatch_names_both_shapes() -> None:
    with pytest.raises(
        ValueError,
        match=r"softmax_cross_entropy: labels t of shape \(3, 1\) do"
        r" not match x of shape \(2, 3\) on axis 1",
    ):
        F.softmax_cross_entropy(np.ones((2, 3)), np.zeros((3, 1), np.int64))


def test_label_errors_in_static_mode() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2, 3), need_grad=True)
        with pytest.raises(TypeError, match="softmax_cross_entropy: labels t must be an integer"):
            F.softmax_cross_entropy(x, hd.Variable((2, 1)))
        t = hd.Variable((2, 1), dtype=np.int64)
        y = F.softmax_cross_entropy(x, t)
        x.d = np.ones((2, 3))
        t.d = np.array([[0], [5]])
        with pytest.raises(ValueError, match=r"must lie in \[0, 3\)"):
            y.forward()


def test_bad_axis_and_shapes() -> None:
    with pytest.raises(ValueError, match="softmax: axis 2 is out of range for x of 2 dims"):
        F.softmax(np.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="log_softmax: x must have at least one dimension"):
        F.log_softmax(np.float64(1.0))
    with pytest.raises(
        ValueError,
        match=r"sigmoid_cross_entropy: x of shape \(2, 3\) and target"
        r" t of shape \(3,\)",
    ):
        F.sigmoid_cross_entropy(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="huber_loss: delta must be positive"):
        F.huber_loss(np.ones(2), np.ones(2), delta=0.0)
    with pytest.raises(ValueError, match=r"kl_multinomial: base_axis=2 must be in \[1, 1\]"):
        F.kl_multinomial(np.ones((2, 3)), np.ones((2, 3)), base_axis=2)
    with pytest.raises(ValueError, match=r"kl_multinomial: p of shape \(2, 3\) and q of shape"):
        F.kl_multinomial(np.ones((2, 3)), np.ones((3, 2)))
