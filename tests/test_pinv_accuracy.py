"""F.pinv's derivatives of a rank-deficient matrix keep the digits the problem allows.

The reference is the constant-rank derivative (Golub & Pereyra) evaluated in 60-digit
arithmetic (mpmath): the pseudo-inverse from the truncated SVD of the same float64
matrix, the gradient ``gA = -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)`` of
``f = <W, P> + <P, P>`` (``g = W + 2P``), and its derivative along ``V`` by the chain rule
(``dP = -P V P + (I - P A) V^T P^T P + P P^T V^T (I - A P)``), by a central difference of
step 1e-25, exact to far below float64. A float64 evaluation cannot beat ``eps cond(A)``;
computed with the projectors untransposed the second derivative was off by about
``eps cond(A)^2`` (1e-9 at cond 2e4, where HIPS autograd, which transposes them, gives
1e-11).
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

mp = pytest.importorskip("mpmath")


def _m(a: np.ndarray):
    return mp.matrix(a.tolist())


def _n(m) -> np.ndarray:
    return np.array(m.tolist(), dtype=float)


def _reference(a: np.ndarray, w: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The gradient and the Hessian ``H[i, j, k, l] = d gA[i, j] / d A[k, l]`` of
    ``f = <W, P> + <P, P>``, in 60-digit arithmetic.
    """
    with mp.workdps(60):
        m, n = a.shape
        am = _m(a)
        u, s, vt = mp.svd_r(am, full_matrices=True)
        order = sorted(range(min(m, n)), key=lambda i: -s[i])
        p = mp.zeros(n, m)
        for i in order[:rank]:
            p += (vt[i, :].T * u[:, i].T) / s[i]
        im, i_n, wm = mp.eye(m), mp.eye(n), _m(w)

        def vjp(a_, p_, g_):
            return (
                -p_.T * g_ * p_.T
                + (im - a_ * p_) * g_.T * p_ * p_.T
                + p_.T * p_ * g_.T * (i_n - p_ * a_)
            )

        def jvp(v):
            return -p * v * p + (i_n - p * am) * v.T * p.T * p + p * p.T * v.T * (im - am * p)

        g = wm + 2 * p
        h = mp.mpf(10) ** -25
        hessian = np.zeros((m, n, m, n))
        for k in range(m):
            for j in range(n):
                vm = mp.zeros(m, n)
                vm[k, j] = 1
                dp = jvp(vm)
                up = vjp(am + h * vm, p + h * dp, g + 2 * h * dp)
                down = vjp(am - h * vm, p - h * dp, g - 2 * h * dp)
                hessian[:, :, k, j] = _n((up - down) / (2 * h))
        return _n(vjp(am, p, g)), hessian


@pytest.mark.parametrize(("m", "n", "rank"), [(5, 5, 3), (4, 6, 2), (6, 4, 3)])
def test_the_second_derivative_of_a_low_rank_pinv_has_eps_cond_error(m, n, rank) -> None:
    rng = np.random.default_rng(m * 10 + n)
    u, _ = np.linalg.qr(rng.standard_normal((m, m)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.zeros(min(m, n))
    s[:rank] = np.linspace(2.0, 1e-4, rank)  # cond(A) = 2e4 on its rank
    a = (u[:, : len(s)] * s) @ v[:, : len(s)].T
    w = rng.standard_normal((n, m))
    want_g, want_h = _reference(a, w, rank)

    def f(x: hd.Variable) -> hd.Variable:
        p = F.pinv(x)
        return F.sum(p * w) + F.sum(p * p)

    x = hd.Variable.from_array(a, need_grad=True)
    (g,) = hd.grad(f(x), x)
    eps_cond = np.finfo(float).eps * 2.0 / 1e-4
    np.testing.assert_allclose(g.d, want_g, atol=10 * eps_cond * np.abs(want_g).max())
    err = np.abs(hd.hessian(f, a) - want_h).max() / np.abs(want_h).max()
    assert err < 10 * eps_cond, err  # eps cond(A)^2 would be ~1e-8
