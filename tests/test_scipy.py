"""hodiff.scipy drives real scipy solvers to optima known in closed form."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

pytest.importorskip("scipy")
import scipy.optimize
import scipy.sparse.linalg

from hodiff.scipy import HessianOperator, Objective, minimize
from tests.harness import gpu

RNG = np.random.default_rng(0)
N = 5
_M = RNG.standard_normal((N, N))
Q = _M @ _M.T + N * np.eye(N)  # SPD
R = RNG.standard_normal(N)


def matvec(m, x):
    return F.sum(m * x, axis=1)


def quadratic(x):  # 0.5 x^T Q x - r^T x: minimum at Q^-1 r
    return F.sum(x * matvec(Q, x)) * 0.5 - F.sum(x * R)


def rosenbrock(x):  # minimum at (1, ..., 1)
    return F.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@pytest.mark.parametrize("method", ["Newton-CG", "trust-ncg", "trust-krylov"])
def test_objective_drives_hessp_methods_to_the_closed_form_optimum(method):
    obj = Objective(quadratic)
    res = scipy.optimize.minimize(
        obj.fun, np.zeros(N), jac=obj.jac, hessp=obj.hessp, method=method, tol=1e-9
    )
    np.testing.assert_allclose(res.x, np.linalg.solve(Q, R), rtol=1e-7, atol=1e-9)
    assert obj.n_hessp > 0


@pytest.mark.parametrize("method", ["Newton-CG", "trust-ncg", "BFGS", "trust-exact"])
def test_minimize_reaches_rosenbrock_minimum(method):
    x0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2])  # scipy tutorial start: reaches the global min
    res = minimize(rosenbrock, x0, method=method, options={"maxiter": 2000}, tol=1e-12)
    np.testing.assert_allclose(res.x, np.ones(5), rtol=1e-5, atol=1e-5)


def test_derivatives_equal_scipy_rosenbrock_references():
    obj = Objective(rosenbrock)
    x = RNG.uniform(-1.5, 1.5, size=6)
    p = RNG.standard_normal(6)
    assert obj.fun(x) == pytest.approx(scipy.optimize.rosen(x), rel=1e-13)
    np.testing.assert_allclose(obj.jac(x), scipy.optimize.rosen_der(x), rtol=1e-12)
    np.testing.assert_allclose(
        obj.hessp(x, p), scipy.optimize.rosen_hess_prod(x, p), rtol=1e-12, atol=1e-10
    )
    np.testing.assert_allclose(obj.hess(x), scipy.optimize.rosen_hess(x), rtol=1e-12, atol=1e-10)


def test_value_and_gradient_share_one_forward_pass():
    calls = []

    def f(x):
        calls.append(1)
        return quadratic(x)

    obj = Objective(f)
    x = RNG.standard_normal(N)
    value, g = obj.fun_and_jac(x)
    obj.jac(x)
    obj.hessp(x, np.ones(N))
    obj.hessp(x, np.ones(N))
    assert len(calls) == 1
    assert obj.n_forward == 1
    assert obj.n_grad == 1
    np.testing.assert_allclose(g, Q @ x - R, rtol=1e-12)
    assert value == pytest.approx(0.5 * x @ Q @ x - R @ x, rel=1e-12)
    # a whole Newton-CG run evaluates f once per point, never twice for value and gradient
    calls.clear()
    res = scipy.optimize.minimize(
        obj.fun, np.zeros(N), jac=obj.jac, hessp=obj.hessp, method="Newton-CG"
    )
    assert len(calls) <= res.nfev + 1


def test_shaped_parameters_and_static_mode():
    target = RNG.standard_normal((2, 3))
    with hd.auto_forward(False):
        res = minimize(lambda w: F.sum(F.exp(w - target) - w), np.zeros((2, 3)), tol=1e-12)
    assert res.x.shape == (2, 3)
    np.testing.assert_allclose(res.x, target, atol=1e-8)  # exp(w - t) = 1


def test_objective_bad_input():
    obj = Objective(lambda x: x * 2.0)
    with pytest.raises(ValueError, match="scalar"):
        obj.fun(np.ones(3))
    obj = Objective(quadratic)
    with pytest.raises(ValueError, match=r"p of shape \(2,\) does not match x of shape \(5,\)"):
        obj.hessp(np.ones(N), np.ones(2))
    with pytest.raises(ValueError, match="flat vector"):
        obj.fun(np.ones((5, 1)))
    with pytest.raises(TypeError, match="callable"):
        Objective(3)


# ---------------------------------------------------------------- HessianOperator
def split_quadratic(w, b):
    """0.5 p^T Q p - r^T p for p = (w.ravel(), b): the Hessian is Q."""
    p = F.concatenate(F.reshape(w, (-1,)), b, axis=0)
    return F.sum(p * matvec(Q, p)) * 0.5 - F.sum(p * R)


def params():
    w = hd.Variable.from_array(RNG.standard_normal((2, 2)), need_grad=True)
    b = hd.Variable.from_array(RNG.standard_normal(1), need_grad=True)
    return w, b


def test_hessian_operator_is_the_hessian():
    w, b = params()
    H = HessianOperator(split_quadratic(w, b), [w, b])
    assert H.shape == (N, N)
    assert H.dtype == np.float64
    np.testing.assert_allclose(H @ np.eye(N), Q, rtol=1e-12)
    np.testing.assert_allclose(H.T @ np.eye(N), Q, rtol=1e-12)


def test_hessian_operator_with_eigsh_and_cg():
    w, b = params()
    H = HessianOperator(split_quadratic(w, b), [w, b])
    top = scipy.sparse.linalg.eigsh(H, k=2, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(top), np.linalg.eigvalsh(Q)[-2:], rtol=1e-10)
    x, info = scipy.sparse.linalg.cg(H, R, rtol=1e-12, atol=0.0)
    assert info == 0
    np.testing.assert_allclose(x, np.linalg.solve(Q, R), rtol=1e-8)


def test_hessian_operator_leaves_parameters_alone():
    w, b = params()
    other = hd.Variable.from_array(np.ones(1), need_grad=True)
    loss = split_quadratic(w, b) * other
    w.g = np.full((2, 2), 3.0)
    H = HessianOperator(loss, [w, b])
    H @ np.ones(N)
    np.testing.assert_array_equal(w.g, np.full((2, 2), 3.0))
    assert b._grad is None
    assert other._grad is None
    assert w.need_grad
    assert other.need_grad


def test_hessian_operator_single_parameter_static_and_float32():
    with hd.auto_forward(False):
        x = hd.Variable((N,), need_grad=True, dtype=np.float64)
        loss = F.sum(F.exp(x))
        x.d = np.linspace(-1, 1, N)
        H = HessianOperator(loss, x)
    np.testing.assert_allclose(H @ np.ones(N), np.exp(np.linspace(-1, 1, N)), rtol=1e-12)
    x32 = hd.Variable.from_array(np.ones(3, dtype=np.float32), need_grad=True)
    H32 = HessianOperator(F.sum(x32**3), [x32])
    assert H32.dtype == np.float32
    np.testing.assert_allclose(H32 @ np.ones(3), np.full(3, 6.0))


def test_hessian_operator_bad_input():
    w, b = params()
    with pytest.raises(ValueError, match="scalar"):
        HessianOperator(w * 2.0, [w])
    with pytest.raises(TypeError, match=r"params\[1\]"):
        HessianOperator(F.sum(w), [w, 3.0])
    with pytest.raises(ValueError, match="do not depend"):
        HessianOperator(F.sum(w * w), [w, b])
    H = HessianOperator(F.sum(w * w), [w, b], allow_unused=True)
    np.testing.assert_allclose(H @ np.ones(N), [2, 2, 2, 2, 0])


# ---------------------------------------------------------------- scipy missing
def test_missing_scipy_says_which_extra_to_install(monkeypatch):
    for name in ("scipy", "scipy.optimize", "scipy.sparse", "scipy.sparse.linalg"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "hodiff.scipy")
    monkeypatch.delitem(sys.modules, "hodiff.transforms.scipy")
    with pytest.raises(ImportError, match=r'pip install -e "\.\[scipy\]" in the hodiff source'):
        importlib.import_module("hodiff.scipy")


def test_hessian_operator_on_cupy():
    cp = gpu()
    w = hd.Variable.from_array(cp.asarray(RNG.standard_normal((2, 2))), need_grad=True)
    b = hd.Variable.from_array(cp.asarray(RNG.standard_normal(2)), need_grad=True)
    loss = F.sum(F.exp(w) * b) + F.sum(b * b * b)
    H = HessianOperator(loss, [w, b])
    dense = H @ np.eye(6)
    assert isinstance(dense, np.ndarray)
    wd, bd = cp.asnumpy(w.d), cp.asnumpy(b.d)
    ref = np.zeros((6, 6))
    ref[:4, :4] = np.diag((np.exp(wd) * bd).reshape(-1))
    cross = np.zeros((4, 2))
    for i in range(2):
        for j in range(2):
            cross[2 * i + j, j] = np.exp(wd[i, j])
    ref[:4, 4:], ref[4:, :4] = cross, cross.T
    ref[4:, 4:] = np.diag(6 * bd)
    np.testing.assert_allclose(dense, ref, rtol=1e-12, atol=1e-12)
