"""The weighted Laplacian ``trace(S^T H S)`` (``hd.laplacian(..., coefficients=S)``).

Expected values come from the full Hessian (``hd.hessian`` of one datum, then numpy),
and, for the stochastic estimator, from the theory of quadratic forms: with
``B = S^T H S`` and ``z`` of ``R`` independent entries, ``E[z^T B z] = trace(B)``;
``Var = 2 (||B||_F^2 - sum_i B_ii^2)`` for Rademacher ``z``, ``2 ||B||_F^2`` for Gaussian.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 6)) * 0.7
A = RNG.standard_normal((6, 1))


def net(x: hd.Variable, w: hd.Variable | np.ndarray = W) -> hd.Variable:
    """``(N, 2, 2) -> (N,)``: a small tanh network of each datum (flattened to 4)."""
    h = F.tanh(F.reshape(x, (x.shape[0], 4)) @ w)
    return F.reshape(h @ A, (x.shape[0],)) + F.sum(F.reshape(x, (x.shape[0], 4)) ** 3, axis=1)


def hessians(x: np.ndarray) -> np.ndarray:
    """Per-datum Hessians ``(N, 4, 4)`` of :func:`net`, by ``hd.hessian`` of one datum."""
    out = []
    for xn in x:
        h = hd.hessian(lambda z: F.sum(net(F.reshape(z, (1, 2, 2)))), xn.reshape(4))
        out.append(h)
    return np.array(out)


X = RNG.standard_normal((3, 2, 2))
H = hessians(X)
S_SHARED = RNG.standard_normal((4, 2))
S_EACH = RNG.standard_normal((3, 4, 5))


def expected(s: np.ndarray) -> np.ndarray:
    s = np.broadcast_to(s, (3, *s.shape[-2:]))
    return np.einsum("ndr,nde,ner->n", s, H, s)


@pytest.mark.parametrize("method", ["taylor", "nested"])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("s", [S_SHARED, S_EACH], ids=["S (D, R)", "S (N, D, R)"])
def test_exact_methods_give_the_trace_of_s_h_s(method, create_graph, s) -> None:
    got = hd.laplacian(
        net, X, batch_axis=0, method=method, coefficients=s, create_graph=create_graph
    )
    got = got.d if create_graph else got
    assert got.shape == (3,)
    np.testing.assert_allclose(got, expected(s), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_one_point_and_the_identity_give_the_laplacian(method) -> None:
    x = X[1].reshape(4)

    def f(z):
        return F.sum(net(F.reshape(z, (1, 2, 2))))

    s = RNG.standard_normal((4, 3))
    got = hd.laplacian(f, x, method=method, coefficients=s)
    assert np.shape(got) == ()
    np.testing.assert_allclose(got, np.trace(s.T @ H[1] @ s), rtol=1e-10)
    eye = hd.laplacian(f, x, method=method, coefficients=np.eye(4))
    np.testing.assert_allclose(eye, np.trace(H[1]), rtol=1e-10)


@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_recorded_result_differentiates_against_finite_differences(method) -> None:
    """d/dW of sum_n trace(S_n^T H_n(W) S_n), against central differences in W."""
    w = hd.Variable.from_array(W, need_grad=True)

    def total(wv) -> float:
        lap = hd.laplacian(
            lambda x: net(x, wv), X, batch_axis=0, method=method, coefficients=S_EACH
        )
        return float(np.sum(lap))

    lap = hd.laplacian(
        lambda x: net(x, w), X, batch_axis=0, method=method, coefficients=S_EACH, create_graph=True
    )
    (gw,) = hd.grad(F.sum(lap), w)
    eps = 1e-5
    for i, j in [(0, 0), (2, 3), (3, 5)]:
        e = np.zeros_like(W)
        e[i, j] = eps
        fd = (total(W + e) - total(W - e)) / (2 * eps)
        np.testing.assert_allclose(gw.d[i, j], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    ("distribution", "variance"),
    [
        ("rademacher", lambda b: 2 * (np.sum(b * b) - np.sum(np.diag(b) ** 2))),
        ("normal", lambda b: 2 * np.sum(b * b)),
    ],
)
def test_stochastic_estimator_is_unbiased_with_the_variance_of_theory(distribution, variance):
    """One-sample estimates over many seeds: mean and variance against E and Var above."""
    x = X[0].reshape(4)

    def f(z):
        return F.sum(net(F.reshape(z, (1, 2, 2))))

    s = RNG.standard_normal((4, 3))
    b = s.T @ H[0] @ s
    b = (b + b.T) / 2
    k = 600
    est = np.array(
        [
            hd.laplacian(
                f, x, method="stochastic", num_samples=1, seed=i, coefficients=s,
                distribution=distribution,
            )
            for i in range(k)
        ]
    )  # fmt: skip
    var = variance(b)
    assert abs(est.mean() - np.trace(b)) < 4.5 * np.sqrt(var / k)
    assert 0.75 < est.var(ddof=1) / var < 1.3
    many = hd.laplacian(
        f, x, method="stochastic", num_samples=k, seed=0, coefficients=s, distribution=distribution
    )
    assert abs(many - np.trace(b)) < 4.5 * np.sqrt(var / k)


def test_stochastic_per_datum_with_a_batch() -> None:
    k = 3000
    got = hd.laplacian(
        net, X, batch_axis=0, method="stochastic", num_samples=k, coefficients=S_EACH,
        distribution="normal",
    )  # fmt: skip
    b = np.einsum("ndr,nde,nes->nrs", S_EACH, H, S_EACH)
    sd = np.sqrt(2 * np.sum(b * b, axis=(1, 2)) / k)
    assert got.shape == (3,)
    assert np.all(np.abs(got - expected(S_EACH)) < 4.5 * sd)


def test_normal_directions_without_coefficients_estimate_the_laplacian() -> None:
    k = 4000
    got = hd.laplacian(
        net, X, batch_axis=0, method="stochastic", num_samples=k, distribution="normal"
    )
    h2 = np.sum(H * H, axis=(1, 2))
    assert np.all(np.abs(got - np.trace(H, axis1=1, axis2=2)) < 4.5 * np.sqrt(2 * h2 / k))


WRONG_SHAPE = (
    r"coefficients must have shape \(4, R\) or \(3, 4, R\) for x of shape \(3, 2, 2\) "
    r"\(batch_axis=0\), got \(5, 2\)"
)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"coefficients": np.ones((5, 2))}, ValueError, WRONG_SHAPE),
        ({"coefficients": np.ones((2, 4, 2))}, ValueError, r"got \(2, 4, 2\)"),
        ({"coefficients": np.ones(4)}, ValueError, r"got \(4,\)"),
        ({"coefficients": np.ones((4, 0))}, ValueError, r"got \(4, 0\)"),
        ({"coefficients": hd.Variable.from_array(np.ones((4, 2)))}, TypeError, r"pass its \.d"),
        ({"coefficients": np.ones((4, 2), complex)}, TypeError, "real numbers, got dtype complex"),
        ({"distribution": "uniform"}, ValueError, r"distribution must be one of \('rademacher', "),
    ],
)  # fmt: skip
def test_misuse_raises_before_f_runs(kwargs, error, match) -> None:
    calls = []

    def f(x):
        calls.append(1)
        return net(x)

    with pytest.raises(error, match=match):
        hd.laplacian(f, X, batch_axis=0, **kwargs)
    assert not calls


def test_coefficients_of_one_point_must_be_two_dimensional() -> None:
    with pytest.raises(ValueError, match=r"must have shape \(4, R\) for x of shape \(4,\)"):
        hd.laplacian(lambda z: F.sum(z**3), np.ones(4), coefficients=np.ones((1, 4, 2)))
