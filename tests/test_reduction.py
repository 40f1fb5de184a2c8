"""Reductions beyond the spec table: ties, zeros, overflow, errors, dtypes, static graphs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from tests.test_array import _specs_of, check_freed_buffers_suffice


def var(a: Any, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


def grad_of(f: Any, a: Any) -> np.ndarray:
    x = var(a)
    f(x).backward()
    return x.g


# ---------------------------------------------------------------- max / min ties
def test_max_splits_the_gradient_evenly_among_ties() -> None:
    g = grad_of(lambda x: F.max(x, axis=1), [[1.0, 3.0, 3.0, 3.0], [2.0, 5.0, 2.0, 5.0]])
    np.testing.assert_allclose(g, [[0, 1 / 3, 1 / 3, 1 / 3], [0, 0.5, 0, 0.5]])


def test_min_over_all_axes_with_ties() -> None:
    g = grad_of(F.min, [[0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(g, [[1 / 3, 0], [1 / 3, 1 / 3]])


def test_max_tie_weights_are_constants_in_higher_orders() -> None:
    x = var([[1.0, 3.0, 3.0], [4.0, 0.0, 4.0]])
    (g,) = hd.grad(F.sum(F.max(x, axis=1) ** 2), [x])
    np.testing.assert_allclose(g.d, [[0, 3, 3], [4, 0, 4]])  # 2 m w_i, w_i = 1/2 at each tie
    (h,) = hd.grad(F.sum(g), [x])
    np.testing.assert_allclose(h.d, [[0, 1, 1], [1, 0, 1]])  # d(2 m) = 2 w_i dx_i


def test_max_keeps_float32_in_the_backward() -> None:
    x = hd.Variable.from_array(np.array([[1.0, 2.0], [2.0, 2.0]], np.float32), need_grad=True)
    F.max(x, axis=0).backward()
    assert x.g.dtype == np.float32
    np.testing.assert_allclose(x.g, [[0, 0.5], [1, 0.5]])


def test_max_of_integers_is_float_in_both_modes() -> None:
    a = np.array([[1, 5], [7, 2]])
    y = F.max(a, axis=1)
    assert y.dtype == np.float64
    with hd.auto_forward(False):
        v = hd.Variable(a.shape, dtype=a.dtype)
        ys = F.max(v, axis=1)
        assert ys.dtype == np.float64
        v.d = a
        ys.forward()
    np.testing.assert_array_equal(ys.d, y.d)


# ---------------------------------------------------------------- prod / cumprod with zeros
def test_prod_gradient_with_one_and_two_zeros() -> None:
    g = grad_of(lambda x: F.prod(x, axis=1), [[0.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    np.testing.assert_allclose(g, [[6, 0, 0], [0, 0, 0]])


def test_prod_hessian_with_a_zero() -> None:
    x0 = np.array([0.0, 2.0, 3.0])
    h = hd.hessian(F.prod, x0)
    expected = np.array([[0, 3, 2], [3, 0, 0], [2, 0, 0]], dtype=float)
    np.testing.assert_allclose(h, expected, atol=1e-12)


def test_prod_third_derivative_through_zeros() -> None:
    x = var([0.0, 0.0, 2.0, 3.0])
    (g,) = hd.grad(F.prod(x), [x])
    (h,) = hd.grad(g[0], [x])  # d/dx of prod_{j != 0} x_j
    (t,) = hd.grad(h[1], [x])  # d/dx of prod_{j != 0, 1} x_j = x2 x3
    np.testing.assert_allclose(g.d, [0, 0, 0, 0])
    np.testing.assert_allclose(h.d, [0, 6, 0, 0])
    np.testing.assert_allclose(t.d, [0, 0, 3, 2])


def test_cumprod_gradient_with_zeros_matches_loops() -> None:
    a = np.array([2.0, 0.0, 3.0, 0.5, 0.0, 4.0])
    w = np.arange(1.0, 7.0)
    g = grad_of(lambda x: F.sum(F.cumprod(x) * w), a)
    expected = np.zeros(6)
    for i in range(6):
        for k in range(i, 6):
            expected[i] += w[k] * np.prod([a[j] for j in range(k + 1) if j != i])
    np.testing.assert_allclose(g, expected)


def test_cumprod_exclusive_reverse_values() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_allclose(F.cumprod(x, 1, exclusive=True).d, [[1, 1, 2, 6]])
    np.testing.assert_allclose(F.cumprod(x, 1, reverse=True).d, [[24, 24, 12, 4]])
    np.testing.assert_allclose(F.cumprod(x, 1, exclusive=True, reverse=True).d, [[24, 12, 4, 1]])


def test_cumsum_default_axis_is_zero() -> None:
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(F.cumsum(x).d, np.cumsum(x, axis=0))


def test_linear_scan_of_long_axes_matches_a_loop() -> None:
    from hodiff.grad_functions.reduction import linear_scan

    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (2, 37)), rng.standard_normal((2, 37))
    h = np.zeros_like(b)
    prev = np.zeros(2)
    for k in range(37):
        prev = a[:, k] * prev + b[:, k]
        h[:, k] = prev
    np.testing.assert_allclose(linear_scan(a, b, 1).d, h, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- logsumexp
def test_logsumexp_does_not_overflow() -> None:
    x = var([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4, -1e4]])
    y = F.logsumexp(x, axis=1)
    expected = [1e4 + np.log(1 + np.exp(-1.0)), -1e4 + np.log(3.0)]
    np.testing.assert_allclose(y.d, expected, rtol=1e-14)
    y.backward()
    soft = np.exp(-1.0) / (1 + np.exp(-1.0))
    np.testing.assert_allclose(x.g, [[1 - soft, soft, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-15)


def test_logsumexp_with_minus_infinity() -> None:
    y = F.logsumexp(np.array([[-np.inf, 0.0], [-np.inf, -np.inf]]), axis=1)
    np.testing.assert_allclose(y.d, [0.0, -np.inf])


def test_logsumexp_float32_large_values() -> None:
    x = np.array([100.0, 100.0], np.float32)
    y = F.logsumexp(x)
    assert y.dtype == np.float32
    assert np.isfinite(y.d)
    assert abs(float(y.d) - 100.6931472) < 1e-4


# ---------------------------------------------------------------- mean / norm
def test_mean_gradient() -> None:
    g = grad_of(lambda x: F.mean(x, axis=(0, 1)), np.ones((2, 3, 4)))
    np.testing.assert_allclose(g, np.full((2, 3, 4), 1 / 6))


def test_norm_variants() -> None:
    x = np.array([[3.0, -4.0], [1.0, 0.0]])
    np.testing.assert_allclose(F.norm(x, axis=1).d, [5.0, 1.0])
    np.testing.assert_allclose(F.norm(x, p=None).d, np.linalg.norm(x))
    np.testing.assert_allclose(F.norm(x, p=1, axis=1, keepdims=True).d, [[7.0], [1.0]])
    np.testing.assert_allclose(F.norm(x, p=np.inf, axis=0).d, [3.0, 4.0])
    with pytest.raises(ValueError, match="norm: p must be positive"):
        F.norm(x, p=0)


# ---------------------------------------------------------------- errors at call time
@pytest.mark.parametrize("fn", [F.sum, F.mean, F.max, F.min, F.prod, F.logsumexp])
def test_axis_out_of_range_raises_at_call_time(fn: Any) -> None:
    with hd.auto_forward(False), pytest.raises(ValueError, match=r"axis 2 is out of range"):
        fn(hd.Variable((2, 3)), axis=2)


def test_repeated_axis_raises() -> None:
    with pytest.raises(ValueError, match=r"sum: repeated axis in \(0, -2\)"):
        F.sum(np.zeros((2, 3)), axis=(0, -2))


def test_max_of_an_empty_axis_raises() -> None:
    with pytest.raises(ValueError, match=r"max: cannot reduce the empty axes"):
        F.max(np.zeros((0, 3)), axis=0)


@pytest.mark.parametrize("fn", [F.cumsum, F.cumprod])
def test_cumulative_axis_out_of_range(fn: Any) -> None:
    with pytest.raises(ValueError, match=r"axis 3 is out of range for an input of 2 dims"):
        fn(np.zeros((2, 3)), axis=3)


def test_linear_scan_shape_mismatch() -> None:
    from hodiff.grad_functions.reduction import linear_scan

    with pytest.raises(ValueError, match=r"linear_scan: a of shape \(2,\) and b of shape \(3,\)"):
        linear_scan(np.zeros(2), np.zeros(3), 0)


def test_static_graph_reductions_recompute() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2, 3), need_grad=True, dtype=np.float64)
        y = F.sum(F.cumprod(x, axis=1) + F.logsumexp(x, axis=1, keepdims=True))
        x.d = np.arange(6.0).reshape(2, 3)
        y.forward()
        first = float(y.d)
        x.d = np.ones((2, 3))
        y.forward()
    assert first != float(y.d)
    np.testing.assert_allclose(y.d, 3 * 2 + 6 * (1 + np.log(3.0)))


@pytest.mark.parametrize("spec", _specs_of("reduction"), ids=lambda s: s.name)
def test_reduction_backward_after_clear_buffer(spec: Any) -> None:
    check_freed_buffers_suffice(spec)
