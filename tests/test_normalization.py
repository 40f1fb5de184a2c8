"""Normalization: running statistics, training vs inference, gradient penalty, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


def var(a: np.ndarray, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a), need_grad=need_grad)


def _bn_params(c: int) -> tuple[hd.Variable, ...]:
    shape = (1, c, 1, 1)
    return (
        var(np.zeros(shape)),
        var(np.ones(shape)),
        var(np.zeros(shape), need_grad=False),
        var(np.ones(shape), need_grad=False),
    )


def test_batch_norm_training_updates_running_statistics_in_place() -> None:
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((4, 3, 2, 2)) * 2 + 1
    beta, gamma, mean, variance = _bn_params(3)
    y = F.batch_normalization(var(x0), beta, gamma, mean, variance, decay_rate=0.8)
    mu = x0.mean(axis=(0, 2, 3), keepdims=True)
    v = x0.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y.d, (x0 - mu) / np.sqrt(v + 1e-5), rtol=1e-10)
    np.testing.assert_allclose(mean.d, 0.2 * mu, rtol=1e-12)
    np.testing.assert_allclose(variance.d, 0.8 + 0.2 * v * 16 / 15, rtol=1e-12)


def test_batch_norm_static_graph_updates_once_per_forward() -> None:
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((5, 2))
    with hd.auto_forward(False):
        x = hd.Variable((5, 2), need_grad=True, dtype=np.float64)
        mean = hd.Variable((1, 2), dtype=np.float64)
        variance = hd.Variable((1, 2), dtype=np.float64)
        y = F.batch_normalization(x, None, None, mean, variance)
        assert mean.d.sum() == 0  # nothing computed yet
    x.d = x0
    mean.d, variance.d = np.zeros((1, 2)), np.ones((1, 2))
    y.forward()
    y.forward()
    mu = x0.mean(axis=0, keepdims=True)
    np.testing.assert_allclose(mean.d, (1 - 0.81) * mu, rtol=1e-12)


def test_batch_norm_inference_uses_stored_statistics_and_leaves_them() -> None:
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((3, 2))
    m0, v0 = np.array([[0.5, -1.0]]), np.array([[2.0, 0.5]])
    mean, variance = var(m0.copy()), var(v0.copy())
    y = F.batch_normalization(var(x0), None, None, mean, variance, batch_stat=False, eps=0.0)
    np.testing.assert_allclose(y.d, (x0 - m0) / np.sqrt(v0))
    np.testing.assert_array_equal(mean.d, m0)
    np.testing.assert_array_equal(variance.d, v0)
    F.sum(y * y).backward()  # inference: the stored statistics get gradients
    np.testing.assert_allclose(mean.g, (-2 * (x0 - m0) / v0).sum(axis=0, keepdims=True))


def test_batch_norm_gradient_goes_through_batch_statistics() -> None:
    # sum(y) is constant (=N*beta) in training mode: its x-gradient vanishes, unlike inference
    rng = np.random.default_rng(3)
    x = var(rng.standard_normal((6, 3)))
    beta, gamma = var(np.zeros((1, 3))), var(rng.uniform(0.5, 2, (1, 3)))
    mean, variance = var(np.zeros((1, 3)), False), var(np.ones((1, 3)), False)
    F.sum(F.batch_normalization(x, beta, gamma, mean, variance)).backward()
    np.testing.assert_allclose(x.g, 0.0, atol=1e-12)
    np.testing.assert_allclose(beta.g, 6.0)


def test_gradient_penalty_through_batch_norm_matches_finite_differences() -> None:
    # d/dw ||d f / d x||^2 with f = sum(tanh(bn(x w))): a WGAN-GP style double backward
    rng = np.random.default_rng(4)
    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))

    def penalty(x: hd.Variable, w: hd.Variable) -> hd.Variable:
        mean, variance = np.zeros((1, 2)), np.ones((1, 2))
        h = F.batch_normalization(x @ w, None, None, mean, variance)
        (gx,) = hd.grad(F.sum(F.tanh(h)), [x])
        return F.sum(gx * gx)

    hd.gradcheck(penalty, (x0, w0), order=1)


def test_batch_norm_float32_and_none_statistics() -> None:
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    mean, variance = np.zeros((1, 3)), np.ones((1, 3))  # float64 buffers
    y = F.batch_normalization(x, None, None, mean, variance)
    assert y.dtype == np.float32
    assert mean.dtype == np.float64
    assert np.any(mean != 0)
    assert F.batch_normalization(x, None, None, None, None).dtype == np.float32


def test_batch_norm_bad_input() -> None:
    x = np.ones((4, 3))
    with pytest.raises(
        ValueError,
        match=r"batch_normalization: gamma of shape \(1, 4\) does not"
        r" fit x of shape \(4, 3\) with axes \[1\]: expected"
        r" \(1, 3\)",
    ):
        F.batch_normalization(x, np.zeros((1, 3)), np.ones((1, 4)), None, None)
    with pytest.raises(ValueError, match="batch_normalization: mean must be given when batch_stat"):
        F.batch_normalization(x, None, None, None, None, batch_stat=False)
    with pytest.raises(ValueError, match="batch_normalization: axes 2 is out of range"):
        F.batch_normalization(x, None, None, None, None, axes=2)
    with pytest.raises(TypeError, match="batch_normalization: x must be a float array"):
        F.batch_normalization(np.ones((4, 3), np.int64), None, None, None, None)
    m = var(np.zeros((1, 3))) * 1.0
    with pytest.raises(ValueError, match="batch_normalization: mean must be a leaf Variable"):
        F.batch_normalization(x, None, None, m, np.ones((1, 3)))


def test_layer_instance_group_norm_statistics_shapes() -> None:
    x0 = np.random.default_rng(6).standard_normal((2, 4, 3, 3))
    y = F.layer_normalization(x0, None, None).d
    np.testing.assert_allclose(y.mean(axis=(1, 2, 3)), 0, atol=1e-12)
    y = F.instance_normalization(x0, None, None).d
    np.testing.assert_allclose(y.mean(axis=(2, 3)), 0, atol=1e-12)
    y = F.group_normalization(x0, None, None, num_groups=2).d
    np.testing.assert_allclose(y.reshape(2, 2, -1).mean(axis=2), 0, atol=1e-12)
    np.testing.assert_allclose(y.reshape(2, 2, -1).var(axis=2), 1, rtol=1e-3)
    w = F.weight_normalization(x0, np.full(2, 3.0), dim=0).d
    np.testing.assert_allclose(np.sqrt((w**2).sum(axis=(1, 2, 3))), 3.0, rtol=1e-10)


def test_norm_layers_bad_input() -> None:
    x = np.ones((2, 6, 3))
    with pytest.raises(
        ValueError,
        match=r"group_normalization: the 6 channels of x of shape"
        r" \(2, 6, 3\) \(axis 1\) are not a multiple of"
        r" num_groups=4",
    ):
        F.group_normalization(x, None, None, num_groups=4)
    with pytest.raises(
        ValueError,
        match=r"layer_normalization: gamma of shape \(1, 5, 1\) does"
        r" not broadcast to x of shape \(2, 6, 3\)",
    ):
        F.layer_normalization(x, None, np.ones((1, 5, 1)))
    with pytest.raises(ValueError, match="instance_normalization: channel_axis 0 is also in"):
        F.instance_normalization(x, None, None, channel_axis=0)
    with pytest.raises(
        ValueError,
        match=r"weight_normalization: g of shape \(3,\) must have"
        r" shape \(2,\)",
    ):
        F.weight_normalization(x, np.ones(3))
