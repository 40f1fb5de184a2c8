"""hd.hessian, hd.jacobian, hd.hvp, hd.vjp and hd.jvp inside hd.vmap.

Inside ``vmap`` the transforms return Variables batched along the vmap axis. Every
result is checked against an independent computation: numpy closed forms, dense
finite differences of a numpy twin of the function, or a Python loop over the
examples calling the same transform outside ``vmap``.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.transforms import derivatives as transforms
from tests.harness import gpu

RNG = np.random.default_rng(7)
N_B, N_X = 4, 3
MAT = RNG.standard_normal((5, N_X))


# ---------------------------------------------------------------- functions and references
def lse(x):
    """``logsumexp(M x)``: H = M^T (diag p - p p^T) M with p = softmax(M x)."""
    return F.logsumexp(F.matmul(hd.Variable.from_array(MAT.astype(x.dtype)), x))


def lse_np(x):
    z = MAT @ x
    return z.max() + np.log(np.exp(z - z.max()).sum())


def lse_hessian(x):
    z = MAT @ x
    p = np.exp(z - z.max())
    p /= p.sum()
    return MAT.T @ (np.diag(p) - np.outer(p, p)) @ MAT


def mixed(x):
    """A function whose Hessian is dense and not constant: exp, a reversal, a cube."""
    return F.sum(F.exp(x) * x[::-1]) + F.sum(x) ** 3


def mixed_np(x):
    return np.sum(np.exp(x) * x[::-1]) + np.sum(x) ** 3


def vecfun(x):
    """``y = sin(x) * sum(x^2)`` (3 -> 3): J = diag(cos x) s + 2 sin(x) x^T."""
    return F.sin(x) * F.sum(x * x)


def vecfun_jacobian(x):
    return np.diag(np.cos(x)) * np.sum(x * x) + 2 * np.outer(np.sin(x), x)


def wide(x):
    """3 -> (3, 2) outputs (more outputs than inputs: the Jacobian by columns)."""
    return F.reshape(F.sin(x), (N_X, 1)) * F.reshape(F.stack(F.sum(x), F.sum(x * x)), (1, 2))


def wide_jacobian(x):
    s, q = np.sum(x), np.sum(x * x)
    d = np.diag(np.cos(x))
    sx = np.sin(x)
    return np.stack([d * s + np.outer(sx, np.ones(N_X)), d * q + 2 * np.outer(sx, x)], axis=1)


def fd_hessian(fn, x, h=1e-4):
    """Dense central second differences of a numpy function (float64)."""
    n = x.size
    H = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            H[i, j] = (fn(x + ei + ej) - fn(x + ei - ej) - fn(x - ei + ej) + fn(x - ei - ej)) / (
                4 * h * h
            )
    return H


def fd_jacobian(fn, x, h=1e-6):
    return np.stack([(fn(x + h * e) - fn(x - h * e)) / (2 * h) for e in np.eye(x.size)], axis=-1)


X = RNG.standard_normal((N_B, N_X))
V = RNG.standard_normal((N_B, N_X))


# ---------------------------------------------------------------- hessian
def test_hessian_inside_vmap_equals_dense_finite_differences() -> None:
    H = hd.vmap(lambda v: hd.hessian(mixed, v))(X)
    assert isinstance(H, hd.Variable)
    assert H.shape == (N_B, N_X, N_X)
    for b in range(N_B):
        np.testing.assert_allclose(H.d[b], fd_hessian(mixed_np, X[b]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("chunk", [None, 1, 2, 100])
def test_hessian_per_example_equals_closed_form_and_loop(chunk) -> None:
    H = hd.vmap(lambda v: hd.hessian(lse, v, chunk_size=chunk))(X)
    assert H.shape == (N_B, N_X, N_X)
    for b in range(N_B):
        np.testing.assert_allclose(H.d[b], lse_hessian(X[b]), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(H.d[b], hd.hessian(lse, X[b]), rtol=1e-13, atol=1e-14)


def test_hessian_bad_chunk_size_inside_vmap() -> None:
    with pytest.raises(ValueError, match=r"hessian: chunk_size"):
        hd.vmap(lambda v: hd.hessian(lse, v, chunk_size=0))(X)


def test_hessian_of_a_tuple_gives_nested_blocks() -> None:
    def pair(a, w):
        return F.sum(F.exp(a) * w * w) + F.sum(a) * F.sum(w)

    W = RNG.standard_normal((N_B, N_X))
    Hb = hd.vmap(lambda a, w: hd.hessian(pair, (a, w)))(X, W)
    assert isinstance(Hb, tuple)
    assert all(isinstance(r, tuple) for r in Hb)
    for b in range(N_B):
        e, w = np.exp(X[b]), W[b]
        ref = (
            (np.diag(e * w * w), np.diag(2 * e * w) + 1),
            (np.diag(2 * e * w) + 1, np.diag(2 * e)),
        )
        for i in range(2):
            for j in range(2):
                assert Hb[i][j].shape == (N_B, N_X, N_X)
                np.testing.assert_allclose(Hb[i][j].d[b], ref[i][j], rtol=1e-12)


def test_hessian_of_a_matrix_input_has_the_input_shape_twice() -> None:
    Xm = RNG.standard_normal((N_B, 2, 3))
    H = hd.vmap(lambda m: hd.hessian(lambda u: F.sum(F.exp(u) * u), m))(Xm)
    assert H.shape == (N_B, 2, 3, 2, 3)
    for b in range(N_B):
        ref = np.diag(((2 + Xm[b]) * np.exp(Xm[b])).ravel()).reshape(2, 3, 2, 3)
        np.testing.assert_allclose(H.d[b], ref, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_are_kept(dtype) -> None:
    Xd = X.astype(dtype)
    tol = {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12}
    H = hd.vmap(lambda v: hd.hessian(lse, v))(Xd)
    J = hd.vmap(lambda v: hd.jacobian(vecfun, v))(Xd)
    _, hv = hd.vmap(lambda v, d: hd.hvp(lse, v, d))(Xd, V.astype(dtype))
    _, jv = hd.vmap(lambda v, d: hd.jvp(vecfun, v, d))(Xd, V.astype(dtype))
    _, vj = hd.vmap(lambda v, d: hd.vjp(vecfun, v, d))(Xd, V.astype(dtype))
    for r in (H, J, hv, jv, vj):
        assert r.dtype == dtype
    for b in range(N_B):
        Hr, Jr = lse_hessian(X[b]), vecfun_jacobian(X[b])
        np.testing.assert_allclose(H.d[b], Hr, **tol)
        np.testing.assert_allclose(J.d[b], Jr, **tol)
        np.testing.assert_allclose(hv.d[b], Hr @ V[b], **tol)
        np.testing.assert_allclose(jv.d[b], Jr @ V[b], **tol)
        np.testing.assert_allclose(vj.d[b], V[b] @ Jr, **tol)


# ---------------------------------------------------------------- jacobian
@pytest.mark.parametrize("chunk", [None, 2])
def test_jacobian_by_rows_and_by_columns(chunk) -> None:
    J = hd.vmap(lambda v: hd.jacobian(vecfun, v, chunk_size=chunk))(X)
    Jw = hd.vmap(lambda v: hd.jacobian(wide, v, chunk_size=chunk))(X)  # 6 outputs > 3 inputs
    assert J.shape == (N_B, N_X, N_X)
    assert Jw.shape == (N_B, N_X, 2, N_X)
    for b in range(N_B):
        np.testing.assert_allclose(J.d[b], vecfun_jacobian(X[b]), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(Jw.d[b], wide_jacobian(X[b]), rtol=1e-12, atol=1e-14)


def test_jacobian_of_several_inputs_equals_finite_differences() -> None:
    W = RNG.standard_normal((N_B, 2))

    def g(a, w):  # (3,), (2,) -> (2, 3)
        return F.reshape(w, (2, 1)) * F.reshape(F.tanh(a), (1, N_X)) + F.sum(a * a)

    def g_np(a, w):
        return w[:, None] * np.tanh(a)[None, :] + np.sum(a * a)

    Ja, Jw = hd.vmap(lambda a, w: hd.jacobian(g, (a, w)))(X, W)
    assert Ja.shape == (N_B, 2, N_X, N_X)
    assert Jw.shape == (N_B, 2, N_X, 2)
    for b in range(N_B):
        ra = fd_jacobian(lambda a, b=b: g_np(a, W[b]), X[b])
        rw = fd_jacobian(lambda w, b=b: g_np(X[b], w), W[b])
        np.testing.assert_allclose(Ja.d[b], ra, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(Jw.d[b], rw, rtol=1e-7, atol=1e-8)


# ---------------------------------------------------------------- hvp, vjp, jvp
@pytest.mark.parametrize("mode", ["rev-rev", "fwd-rev"])
def test_hvp_with_batched_inputs_and_directions(mode) -> None:
    y, hv = hd.vmap(lambda x, v: hd.hvp(lse, x, v, mode=mode))(X, V)
    assert y.shape == (N_B,)
    assert hv.shape == (N_B, N_X)
    for b in range(N_B):
        np.testing.assert_allclose(y.d[b], lse_np(X[b]), rtol=1e-13)
        np.testing.assert_allclose(hv.d[b], lse_hessian(X[b]) @ V[b], rtol=1e-12, atol=1e-13)


def test_hvp_mapped_over_directions_only() -> None:
    x = X[0]
    y, hv = hd.vmap(lambda v: hd.hvp(mixed, x, v))(V)
    assert hv.shape == (N_B, N_X)
    np.testing.assert_allclose(y.d, np.full(N_B, mixed_np(x)), rtol=1e-13)  # broadcast
    np.testing.assert_allclose(hv.d, V @ fd_hessian(mixed_np, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["rev-rev", "fwd-rev"])
def test_hvp_with_a_batch_of_directions_per_example(mode) -> None:
    K = RNG.standard_normal((5, N_X))  # the same 5 directions for every example
    KK = RNG.standard_normal((N_B, 5, N_X))  # 5 directions of each example
    _, hk = hd.vmap(lambda x: hd.hvp(lse, x, K, mode=mode))(X)
    _, hkk = hd.vmap(lambda x, k: hd.hvp(lse, x, k, mode=mode))(X, KK)
    assert hk.shape == hkk.shape == (N_B, 5, N_X)
    for b in range(N_B):
        H = lse_hessian(X[b])
        np.testing.assert_allclose(hk.d[b], K @ H, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(hkk.d[b], KK[b] @ H, rtol=1e-12, atol=1e-13)


def test_hvp_of_a_tuple_equals_the_loop() -> None:
    def f2(a, b):
        return F.sum(a * a * b) + F.sum(F.exp(a * b))

    W, U = RNG.standard_normal((N_B, N_X)), RNG.standard_normal((N_B, N_X))
    _, (ha, hb) = hd.vmap(lambda a, b, u, v: hd.hvp(f2, (a, b), (u, v)))(X, W, V, U)
    for b in range(N_B):
        _, (ra, rb) = hd.hvp(f2, (X[b], W[b]), (V[b], U[b]))
        np.testing.assert_allclose(ha.d[b], ra, rtol=1e-13)
        np.testing.assert_allclose(hb.d[b], rb, rtol=1e-13)


def test_vjp_and_jvp_equal_the_jacobian() -> None:
    y, vj = hd.vmap(lambda x, v: hd.vjp(vecfun, x, v))(X, V)
    y2, jv = hd.vmap(lambda x, v: hd.jvp(vecfun, x, v))(X, V)
    for b in range(N_B):
        J = vecfun_jacobian(X[b])
        np.testing.assert_allclose(y.d[b], np.sin(X[b]) * np.sum(X[b] ** 2), rtol=1e-13)
        np.testing.assert_allclose(y2.d[b], y.d[b], rtol=1e-13)
        np.testing.assert_allclose(vj.d[b], V[b] @ J, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(jv.d[b], J @ V[b], rtol=1e-12, atol=1e-13)


def test_vjp_and_jvp_of_several_inputs_and_an_unmapped_direction() -> None:
    def g(a, w):
        return F.exp(a) * w

    W = RNG.standard_normal((N_B, N_X))
    u, v = RNG.standard_normal(N_X), RNG.standard_normal(N_X)
    _, (ga, gw) = hd.vmap(lambda a, w: hd.vjp(g, (a, w), u))(X, W)
    _, jv = hd.vmap(lambda a, w: hd.jvp(g, (a, w), (v, v)))(X, W)
    e = np.exp(X)
    np.testing.assert_allclose(ga.d, u * e * W, rtol=1e-13)
    np.testing.assert_allclose(gw.d, u * e, rtol=1e-13)
    np.testing.assert_allclose(jv.d, e * W * v + e * v, rtol=1e-13)


# ---------------------------------------------------------------- vmap options
def test_in_axes_and_out_axes() -> None:
    Xt = np.ascontiguousarray(X.T)  # examples along axis 1
    H = hd.vmap(lambda v: hd.hessian(lse, v), in_axes=1, out_axes=2)(Xt)
    assert H.shape == (N_X, N_X, N_B)
    for b in range(N_B):
        np.testing.assert_allclose(H.d[:, :, b], lse_hessian(X[b]), rtol=1e-12, atol=1e-13)
    y, hv = hd.vmap(lambda v, d: hd.hvp(lse, v, d), in_axes=(1, None), out_axes=(0, 1))(Xt, V[0])
    assert y.shape == (N_B,)
    assert hv.shape == (N_X, N_B)
    for b in range(N_B):
        np.testing.assert_allclose(hv.d[:, b], lse_hessian(X[b]) @ V[0], rtol=1e-12, atol=1e-13)


def test_nested_vmap_equals_a_double_loop() -> None:
    XX = RNG.standard_normal((2, 3, N_X))
    H = hd.vmap(hd.vmap(lambda v: hd.hessian(mixed, v, chunk_size=2)))(XX)
    J = hd.vmap(hd.vmap(lambda v: hd.jacobian(wide, v)))(XX)
    assert H.shape == (2, 3, N_X, N_X)
    assert J.shape == (2, 3, N_X, 2, N_X)
    for i in range(2):
        for k in range(3):
            np.testing.assert_allclose(
                H.d[i, k], fd_hessian(mixed_np, XX[i, k]), rtol=1e-6, atol=1e-6
            )
            np.testing.assert_allclose(J.d[i, k], wide_jacobian(XX[i, k]), rtol=1e-12, atol=1e-14)


def test_transform_of_a_vmap_inside_a_vmap() -> None:
    """Both orders: a Hessian of a vmapped sum, mapped again over an outer batch."""
    XX = RNG.standard_normal((2, 3, N_X))

    def total(m):  # sum over the rows of m of mixed(row), by an inner vmap
        return F.sum(hd.vmap(mixed)(m))

    H = hd.vmap(lambda m: hd.hessian(total, m))(XX)
    assert H.shape == (2, 3, N_X, 3, N_X)
    for i in range(2):
        for k in range(3):
            np.testing.assert_allclose(
                H.d[i, k, :, k], fd_hessian(mixed_np, XX[i, k]), rtol=1e-6, atol=1e-6
            )
            others = np.delete(H.d[i, k], k, axis=1)  # rows are independent
            np.testing.assert_array_equal(others, 0.0)


def test_closed_over_batched_variables_and_unbatched_inputs() -> None:
    W = RNG.standard_normal((N_B, N_X))
    x0 = hd.Variable.from_array(X[0].copy(), need_grad=True)
    H = hd.vmap(lambda w: hd.hessian(lambda x: F.sum(F.exp(x * w)), x0))(W)
    for b in range(N_B):
        np.testing.assert_allclose(H.d[b], np.diag(W[b] ** 2 * np.exp(X[0] * W[b])), rtol=1e-13)
    # the result stays connected to the unmapped input: d/dx0 sum(H) = sum_b w^3 exp(x0 w)
    (g,) = hd.grad(F.sum(H), x0)
    np.testing.assert_allclose(g.d, (W**3 * np.exp(X[0] * W)).sum(0), rtol=1e-12)


def test_unbatched_transforms_inside_vmap_still_give_arrays() -> None:
    seen = []

    def f(w):
        H = hd.hessian(lse, X[0])
        seen.append(type(H))
        return w * H[0]

    out = hd.vmap(f)(V)
    assert seen == [np.ndarray]
    np.testing.assert_allclose(out.d, V * lse_hessian(X[0])[0], rtol=1e-12)


def test_static_graphs_are_computed_by_forward() -> None:
    with hd.auto_forward(False):
        xv = hd.Variable.from_array(X)
        H = hd.vmap(lambda v: hd.hessian(lse, v, chunk_size=2))(xv)
        _, hv = hd.vmap(lambda v, d: hd.hvp(lse, v, d))(xv, V)
        _, jv = hd.vmap(lambda v, d: hd.jvp(vecfun, v, d))(xv, V)
        for r in (H, hv, jv):
            r.forward()
    for b in range(N_B):
        np.testing.assert_allclose(H.d[b], lse_hessian(X[b]), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(hv.d[b], lse_hessian(X[b]) @ V[b], rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(jv.d[b], vecfun_jacobian(X[b]) @ V[b], rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- differentiating again
def test_per_example_hessians_differentiate_again() -> None:
    """grad of sum(H**2) w.r.t. the batch equals finite differences of the loop."""
    Xv = hd.Variable.from_array(X, need_grad=True)
    H = hd.vmap(lambda v: hd.hessian(mixed, v))(Xv)
    (g,) = hd.grad(F.sum(H * H), Xv)
    h = 1e-6
    for b in range(2):
        for i in range(N_X):
            e = np.zeros(N_X)
            e[i] = h
            fd = (
                np.sum(hd.hessian(mixed, X[b] + e) ** 2) - np.sum(hd.hessian(mixed, X[b] - e) ** 2)
            ) / (2 * h)
            np.testing.assert_allclose(g.d[b, i], fd, rtol=1e-6)
    np.testing.assert_allclose(
        hd.grad(F.sum(H * H), Xv)[0].d, g.d, rtol=1e-13
    )  # the graph is kept: it differentiates again


def test_third_derivatives_of_per_example_hessians() -> None:
    """The Jacobian of vmap(hessian) is the third-derivative tensor, per example."""

    def quartic(x):  # sum(x^4) + sum(x)^3: T_ijk = 24 x_i d_ijk + 6
        return F.sum(x**4) + F.sum(x) ** 3

    T = hd.jacobian(lambda m: hd.vmap(lambda v: hd.hessian(quartic, v))(m), X)
    assert T.shape == (N_B, N_X, N_X, N_B, N_X)
    for b in range(N_B):
        ref = np.full((N_X, N_X, N_X), 6.0)
        ref[np.arange(N_X), np.arange(N_X), np.arange(N_X)] += 24 * X[b]
        np.testing.assert_allclose(T[b, :, :, b], ref, rtol=1e-12)
        np.testing.assert_array_equal(np.delete(T[b], b, axis=2), 0.0)


def test_jvp_result_differentiates_in_the_direction() -> None:
    Vv = hd.Variable.from_array(V, need_grad=True)
    _, jv = hd.vmap(lambda x, v: hd.jvp(vecfun, x, v))(X, Vv)
    (g,) = hd.grad(F.sum(jv), Vv)  # d/dv sum(J v) = 1^T J
    for b in range(N_B):
        np.testing.assert_allclose(g.d[b], vecfun_jacobian(X[b]).sum(0), rtol=1e-12)


# ---------------------------------------------------------------- errors
def test_errors_name_the_transform_and_the_argument() -> None:
    with pytest.raises(
        ValueError, match=r"hvp: v of shape \(2,\) does not match inputs of shape \(3,\)"
    ):
        hd.vmap(lambda x, v: hd.hvp(lse, x, v))(X, np.ones((N_B, 2)))
    with pytest.raises(ValueError, match=r"hessian: f must return a scalar.*shape \(3,\)"):
        hd.vmap(lambda x: hd.hessian(vecfun, x))(X)
    with pytest.raises(TypeError, match=r"jvp: v has dtype int64"):
        hd.vmap(lambda x, v: hd.jvp(vecfun, x, v))(X, np.ones((N_B, N_X), dtype=np.int64))
    with pytest.raises(ValueError, match=r"vjp: v of shape \(2,\) does not match the output"):
        hd.vmap(lambda x: hd.vjp(vecfun, x, np.ones(2)))(X)
    with pytest.raises(ValueError, match=r"hvp: v must be a tuple of 2"):
        hd.vmap(lambda x: hd.hvp(lambda a, b: F.sum(a * b), (x, x), x))(X)
    kept = []
    hd.vmap(lambda x: kept.append(x) or x * 1.0)(X)
    with pytest.raises(RuntimeError, match=r"jacobian: inputs .*hd.vmap that has returned"):
        hd.jacobian(vecfun, kept[0])
    with pytest.raises(RuntimeError, match=r"hvp: v .*hd.vmap that has returned"):
        hd.hvp(lse, X[0], kept[0])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's own, on import
def test_matches_torch_func_when_installed() -> None:
    torch = pytest.importorskip("torch")
    from torch.func import hessian, vmap

    Mt = torch.tensor(MAT)

    def lse_t(x):
        return torch.logsumexp(Mt @ x, 0)

    ref = vmap(hessian(lse_t))(torch.tensor(X)).numpy()
    np.testing.assert_allclose(
        hd.vmap(lambda v: hd.hessian(lse, v))(X).d, ref, rtol=1e-12, atol=1e-14
    )


def test_vmap_returns_nested_tuples_with_one_out_axis_per_output() -> None:
    a, (b, [c]) = hd.vmap(lambda x: (x, (x * 2.0, [x * 3.0])), out_axes=(0, 1))(X)
    np.testing.assert_array_equal(a.d, X)
    np.testing.assert_array_equal(b.d, 2 * X.T)
    np.testing.assert_array_equal(c.d, 3 * X.T)
    with pytest.raises(TypeError, match=r"output 1\[1\] is int"):
        hd.vmap(lambda x: (x, (x, 3)))(X)


def test_on_cupy_equals_numpy() -> None:
    cp = gpu()
    H = hd.vmap(lambda v: hd.hessian(mixed, v, chunk_size=2))(cp.asarray(X))
    _, hv = hd.vmap(lambda x, v: hd.hvp(mixed, x, v))(cp.asarray(X), cp.asarray(V))
    assert isinstance(H.d, cp.ndarray)
    ref = hd.vmap(lambda v: hd.hessian(mixed, v))(X).d
    np.testing.assert_allclose(cp.asnumpy(H.d), ref, rtol=1e-12)
    np.testing.assert_allclose(cp.asnumpy(hv.d), np.einsum("nij,nj->ni", ref, V), rtol=1e-12)


def test_default_chunks_inside_vmap_count_the_examples(monkeypatch) -> None:
    """The default rows per pass divide the memory bound by the examples of the vmap."""
    monkeypatch.setattr(transforms, "_auto_chunk", lambda roots: 2 * N_B)  # rows of one example
    passes = []
    real = transforms.vmap  # the vmap the batched passes call

    def counting(f, *args, **kwargs):
        mapped = real(f, *args, **kwargs)

        def run(*xs):
            passes.append(xs[0].shape[0])
            return mapped(*xs)

        return run

    monkeypatch.setattr(transforms, "vmap", counting)
    H = hd.vmap(lambda v: hd.hessian(lse, v))(X)  # 4 examples: 2 rows per pass
    assert passes == [2, 1]
    for b in range(N_B):
        np.testing.assert_allclose(H.d[b], lse_hessian(X[b]), rtol=1e-12, atol=1e-13)
    passes.clear()
    hd.hessian(lse, X[0])  # outside vmap: 8 rows per pass (all 3 at once)
    assert passes == [3]
