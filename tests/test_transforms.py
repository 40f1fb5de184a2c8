"""vjp, jvp, hvp, hessian, jacobian against independent computations (numpy closed forms)."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from tests.harness import gpu

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 3))
B = RNG.standard_normal((3, 4))
X0 = RNG.standard_normal(3)
MODES = [True, False]  # auto_forward: dynamic and static graphs


def matvec(m, x):
    """``m @ x`` for a constant matrix, composed of elementwise ops and a sum."""
    return F.sum(m * x, axis=1)


def quad(x):  # x^T A x: Hessian A + A^T
    return F.sum(x * matvec(A, x))


def softexp(x):  # sum(exp(B^T x)) / 4 + sum(x^3)/3: H = B diag(exp(B^T x)) B^T / 4 + diag(2 x)
    return F.sum(F.exp(matvec(B.T, x))) * 0.25 + F.sum(x**3) * (1.0 / 3)


def softexp_hessian(x):
    return B @ np.diag(np.exp(B.T @ x)) @ B.T / 4 + np.diag(2 * x)


def vecfun(x):  # y = exp(B^T x) * sum(x^2): J = diag(e) B^T s + 2 e x^T
    return F.exp(matvec(B.T, x)) * F.sum(x * x)


def vecfun_jacobian(x):
    e = np.exp(B.T @ x)
    return np.diag(e) @ B.T * np.sum(x * x) + 2 * np.outer(e, x)


def pair(x, w):  # a function of two inputs of different shapes
    return F.sum(F.exp(matvec(B.T, x)) * w * w) + F.sum(x) * F.sum(w)


def pair_blocks(x, w):
    e = np.exp(B.T @ x)
    hxx = B @ np.diag(e * w * w) @ B.T
    hxw = B * (2 * e * w) + 1.0
    hww = np.diag(2 * e)
    return ((hxx, hxw), (hxw.T, hww))


@pytest.fixture(params=MODES, ids=["dynamic", "static"])
def mode(request):
    with hd.auto_forward(request.param):
        yield request.param


def dense(blocks):
    return np.block([[np.reshape(b, (b.shape[0], -1)) for b in row] for row in blocks])


# ---------------------------------------------------------------- hessian
def test_hessian_of_quadratic_form_is_a_plus_a_transpose(mode):
    H = hd.hessian(quad, X0)
    assert H.shape == (3, 3)
    np.testing.assert_allclose(H, A + A.T, rtol=1e-12, atol=1e-12)


def test_hessian_matches_closed_form(mode):
    np.testing.assert_allclose(hd.hessian(softexp, X0), softexp_hessian(X0), rtol=1e-12)


def test_hessian_of_a_tuple_is_blocks(mode):
    x, w = X0, RNG.standard_normal(4)
    H = hd.hessian(pair, (x, w))
    ref = pair_blocks(x, w)
    assert isinstance(H, tuple)
    assert all(isinstance(row, tuple) for row in H)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(H[i][j], ref[i][j], rtol=1e-12, atol=1e-12)


def test_hessian_shape_is_in_shape_twice():
    x = RNG.standard_normal((2, 3))
    H = hd.hessian(lambda x: F.sum(x**3), x)
    assert H.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(H.reshape(6, 6), np.diag(6 * x.reshape(-1)), atol=1e-12)


def test_hessian_builds_the_forward_graph_once():
    calls = []

    def f(x):
        calls.append(1)
        return softexp(x)

    hd.hessian(f, X0)
    hd.jacobian(lambda x: (calls.append(1), vecfun(x))[1], X0)
    assert len(calls) == 2


def test_hessian_of_linear_and_unused_is_zero(mode):
    H = hd.hessian(lambda x, w: F.sum(x * 2.0), (X0, X0[:2]))
    for row in H:
        for block in row:
            assert not np.any(block)


# ---------------------------------------------------------------- hvp
@pytest.mark.parametrize("hvp_mode", ["rev-rev", "fwd-rev"])
def test_hvp_equals_hessian_times_v(mode, hvp_mode):
    v = RNG.standard_normal(3)
    y, hv = hd.hvp(softexp, X0, v, mode=hvp_mode)
    np.testing.assert_allclose(hv, softexp_hessian(X0) @ v, rtol=1e-12)
    with hd.auto_forward(True):
        np.testing.assert_allclose(y, softexp(hd.Variable.from_array(X0)).d, rtol=1e-14)


@pytest.mark.parametrize("hvp_mode", ["rev-rev", "fwd-rev"])
def test_hvp_of_a_tuple(mode, hvp_mode):
    x, w = X0, RNG.standard_normal(4)
    v = (RNG.standard_normal(3), RNG.standard_normal(4))
    _, hv = hd.hvp(pair, (x, w), v, mode=hvp_mode)
    assert isinstance(hv, tuple)
    assert len(hv) == 2
    ref = dense(pair_blocks(x, w)) @ np.concatenate(v)
    np.testing.assert_allclose(np.concatenate(hv), ref, rtol=1e-12)


def test_hvp_equals_hessian_rows_for_matrix_input():
    x, v = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))

    def f(x):
        return F.sum(F.exp(x) * F.sum(x * x))

    H = hd.hessian(f, x).reshape(6, 6)
    _, hv = hd.hvp(f, x, v)
    assert hv.shape == (2, 3)
    np.testing.assert_allclose(hv.reshape(-1), H @ v.reshape(-1), rtol=1e-12)


# ---------------------------------------------------------------- jacobian, jvp, vjp
def test_jacobian_of_affine_map_is_its_matrix(mode):
    b = RNG.standard_normal(3)
    x = RNG.standard_normal(4)
    J = hd.jacobian(lambda x: matvec(B, x) + b, x)  # 3 outputs < 4 inputs: rows
    np.testing.assert_allclose(J, B, rtol=1e-14)
    M = RNG.standard_normal((5, 2))
    J = hd.jacobian(lambda x: matvec(M, x), x[:2])  # 5 outputs > 2 inputs: columns
    np.testing.assert_allclose(J, M, rtol=1e-14)


def test_jacobian_matches_closed_form(mode):
    np.testing.assert_allclose(hd.jacobian(vecfun, X0), vecfun_jacobian(X0), rtol=1e-12)


def test_jacobian_shapes_and_tuples(mode):
    x, w = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
    Jx, Jw = hd.jacobian(lambda x, w: x * w, (x, w))
    assert Jx.shape == (2, 3, 2, 3)
    assert Jw.shape == (2, 3, 3)
    np.testing.assert_allclose(Jx.reshape(6, 6), np.diag(np.tile(w, 2)), atol=1e-14)
    np.testing.assert_allclose(
        Jw.reshape(6, 3), np.vstack([np.diag(x[0]), np.diag(x[1])]), atol=1e-14
    )
    g = hd.jacobian(lambda x: F.sum(x * x), x)  # scalar output: the gradient
    np.testing.assert_allclose(g, 2 * x, rtol=1e-14)


def test_jvp_equals_jacobian_times_v(mode):
    v = RNG.standard_normal(3)
    y, jv = hd.jvp(vecfun, X0, v)
    assert y.shape == (4,)
    np.testing.assert_allclose(jv, vecfun_jacobian(X0) @ v, rtol=1e-12)


def test_vjp_equals_v_times_jacobian(mode):
    v = RNG.standard_normal(4)
    y, g = hd.vjp(vecfun, X0, v)
    np.testing.assert_allclose(g, v @ vecfun_jacobian(X0), rtol=1e-12)
    np.testing.assert_allclose(y, np.exp(B.T @ X0) * np.sum(X0**2), rtol=1e-12)


def test_jvp_and_vjp_with_tuples(mode):
    x, w = RNG.standard_normal((2, 3)), RNG.standard_normal(3)

    def f(x, w):
        return F.exp(x) * w

    Jx, Jw = hd.jacobian(f, (x, w))
    vx, vw = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
    _, jv = hd.jvp(f, (x, w), (vx, vw))
    ref = Jx.reshape(6, 6) @ vx.reshape(-1) + Jw.reshape(6, 3) @ vw
    np.testing.assert_allclose(jv.reshape(-1), ref, rtol=1e-12)
    u = RNG.standard_normal((2, 3))
    _, (gx, gw) = hd.vjp(f, (x, w), u)
    np.testing.assert_allclose(gx.reshape(-1), u.reshape(-1) @ Jx.reshape(6, 6), rtol=1e-12)
    np.testing.assert_allclose(gw, u.reshape(-1) @ Jw.reshape(6, 3), rtol=1e-12)


def test_identity_and_constant_functions():
    x = RNG.standard_normal(3)
    np.testing.assert_allclose(hd.jacobian(lambda x: x, x), np.eye(3))
    _, jv = hd.jvp(lambda x: x, x, np.ones(3))
    np.testing.assert_allclose(jv, np.ones(3))
    _, jv = hd.jvp(lambda x: hd.Variable.from_array(np.ones(2)), x, np.ones(3))
    np.testing.assert_allclose(jv, np.zeros(2))


# ---------------------------------------------------------------- dtypes, inputs, side effects
def test_float32_in_float32_out():
    x = X0.astype(np.float32)

    def vec(x):  # no float64 constants (they would promote, as in numpy)
        return F.exp(x) * F.sum(x * x)

    def scalar(x):
        return F.sum(vec(x))

    for J in (hd.hessian(scalar, x), hd.jacobian(vec, x), hd.jacobian(vec, x[:1])):
        assert J.dtype == np.float32
    assert hd.hvp(scalar, x, np.ones(3))[1].dtype == np.float32
    assert hd.hvp(scalar, x, np.ones(3), mode="fwd-rev")[1].dtype == np.float32
    assert hd.jvp(vec, x, np.ones(3))[1].dtype == np.float32
    assert hd.vjp(vec, x, np.ones(3))[1].dtype == np.float32


def test_variables_closed_over_are_left_alone():
    W = hd.Variable.from_array(RNG.standard_normal(3), need_grad=True)
    W.g = np.full(3, 7.0)

    def f(x):
        return F.sum(F.exp(x * W) * W)

    hd.hessian(f, X0)
    hd.hvp(f, X0, np.ones(3))
    hd.vjp(f, X0, 1.0)
    hd.jvp(f, X0, np.ones(3))
    hd.jacobian(f, X0)
    assert W.need_grad
    np.testing.assert_array_equal(W.g, np.full(3, 7.0))
    # and the result is the Hessian in x alone: W is a constant
    e = np.exp(X0 * W.d)
    np.testing.assert_allclose(hd.hessian(f, X0), np.diag(W.d**3 * e), rtol=1e-12)


def test_variable_inputs_are_not_modified():
    x = hd.Variable.from_array(X0.copy(), need_grad=False)
    parent = hd.Variable.from_array(X0.copy(), need_grad=True)
    y = parent * 1.0  # not a leaf
    np.testing.assert_allclose(hd.hessian(quad, x), A + A.T, atol=1e-12)
    np.testing.assert_allclose(hd.hessian(quad, y), A + A.T, atol=1e-12)
    assert not x.need_grad
    assert x._grad is None
    assert parent._grad is None
    np.testing.assert_array_equal(x.d, X0)


def test_works_inside_no_grad():
    with hd.no_grad():
        np.testing.assert_allclose(hd.hessian(quad, X0), A + A.T, atol=1e-12)


def test_scalar_inputs():
    assert float(hd.hessian(lambda x: x**3, 2.0)) == pytest.approx(12.0)
    _, (gx, gy) = hd.vjp(lambda x, y: x * y, (np.float64(2.0), np.float64(3.0)), 1.0)
    assert (float(gx), float(gy)) == (3.0, 2.0)


# ---------------------------------------------------------------- bad input
def test_non_scalar_f_raises():
    with pytest.raises(ValueError, match=r"hvp: f must return a scalar.*\(4,\)"):
        hd.hvp(vecfun, X0, np.ones(3))
    with pytest.raises(ValueError, match=r"hessian: f must return a scalar.*\(4,\)"):
        hd.hessian(vecfun, X0)


def test_v_of_wrong_shape_names_both_shapes():
    with pytest.raises(
        ValueError,
        match=r"hvp: v of shape \(2,\) does not match inputs of "
        r"shape \(3,\)",
    ):
        hd.hvp(softexp, X0, np.ones(2))
    with pytest.raises(ValueError, match=r"jvp: v of shape \(4,\).*\(3,\)"):
        hd.jvp(vecfun, X0, np.ones(4))
    with pytest.raises(
        ValueError,
        match=r"vjp: v of shape \(3,\) does not match the output of f "
        r"of shape \(4,\)",
    ):
        hd.vjp(vecfun, X0, np.ones(3))
    with pytest.raises(
        ValueError,
        match=r"v\[1\] of shape \(3,\) does not match inputs\[1\] of "
        r"shape \(4,\)",
    ):
        hd.hvp(pair, (X0, np.ones(4)), (np.ones(3), np.ones(3)))
    with pytest.raises(ValueError, match="tuple of 2 arrays"):
        hd.hvp(pair, (X0, np.ones(4)), np.ones(3))


def test_other_bad_input():
    with pytest.raises(ValueError, match="mode"):
        hd.hvp(softexp, X0, np.ones(3), mode="fwd-fwd")
    with pytest.raises(TypeError, match=r"f must return a hodiff\.Variable"):
        hd.hessian(lambda x: 1.0, X0)
    with pytest.raises(TypeError, match=r"jacobian: inputs has dtype int64"):
        hd.jacobian(lambda x: x, np.arange(3))
    with pytest.raises(TypeError, match="callable"):
        hd.vjp(3, X0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        hd.hessian(softexp, ())


# ---------------------------------------------------------------- cupy
def test_cupy_results_are_cupy_and_match_numpy():
    cp = gpu()

    def vec(x, w):
        return F.exp(x) * F.sum(x * w)

    def scalar(x, w):
        return F.sum(vec(x, w))

    x, w = RNG.standard_normal(3), RNG.standard_normal(3)
    v = (RNG.standard_normal(3), RNG.standard_normal(3))
    calls = {
        "hessian": lambda to: hd.hessian(scalar, (to(x), to(w))),
        "jacobian": lambda to: hd.jacobian(vec, (to(x), to(w))),
        "jacobian columns": lambda to: hd.jacobian(lambda x: F.exp(x * to(np.ones((4, 1)))), to(x)),
        "hvp": lambda to: hd.hvp(scalar, (to(x), to(w)), (to(v[0]), to(v[1]))),
        "hvp fwd-rev": lambda to: hd.hvp(
            scalar, (to(x), to(w)), (to(v[0]), to(v[1])), mode="fwd-rev"
        ),
        "jvp": lambda to: hd.jvp(vec, (to(x), to(w)), (to(v[0]), to(v[1]))),
        "vjp": lambda to: hd.vjp(vec, (to(x), to(w)), to(v[0])),
    }

    def flat(r):
        return [a for item in r for a in flat(item)] if isinstance(r, tuple) else [r]

    for name, call in calls.items():
        ref, got = flat(call(np.asarray)), flat(call(cp.asarray))
        assert len(ref) == len(got), name
        for a, b in zip(ref, got, strict=True):
            assert isinstance(b, cp.ndarray), name
            np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-10, atol=1e-12, err_msg=name)


def test_results_never_share_the_callers_arrays() -> None:
    # the transforms read the caller's arrays without copying them; what they return is new
    a, v = np.arange(6.0).reshape(2, 3), np.ones(6)
    for f in (lambda x: x, lambda x: F.reshape(x, (6,)), lambda x: x * 2.0):
        y, g = hd.vjp(f, a, v.reshape(f(hd.Variable.from_array(a)).shape))
        assert not np.shares_memory(y, a)
        assert not np.shares_memory(g, a)
        y, jv = hd.jvp(f, a, np.ones_like(a))
        assert not np.shares_memory(jv, a)
        assert not np.shares_memory(y, a)
    before = a.copy()
    hd.hvp(lambda x: F.sum(x**3), a, np.ones_like(a))
    hd.hessian(lambda x: F.sum(x**3), a)
    np.testing.assert_array_equal(a, before)  # nothing wrote into the caller's array
