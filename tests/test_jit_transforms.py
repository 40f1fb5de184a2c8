"""The transforms inside ``hd.jit`` and ``hd.compile``: hd.grad, vjp, jvp, hvp, jet, hessian,
jacobian, laplacian (every method, with coefficients), biharmonic, vmap and checkpoint.

While ``hd.jit`` records ``f`` no value exists (``api.is_symbolic()``): the transforms record
their passes and return Variables, as inside ``hd.vmap``. Each compiled call is compared
with the uncompiled call (1e-12), and the derivatives of orders 1-3 of the compiled
function (``hd.grad`` then ``.backward()``) with those of an uncompiled differentiable
reference: ``hd.grad`` compositions, ``create_graph=True``, or another method. Hessians and
Jacobians compile as one batched graph: their node count does not grow with ``D``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine import api

X0 = np.array([0.3, -0.2, 0.5])
V0 = np.array([1.0, 2.0, 0.5])
S = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, 2.0]])  # coefficients (D, R)
XB = np.array([[0.3, -0.2], [0.5, 0.1], [-0.4, 0.6]])  # a batch of 3 points in 2-D


def f(x: Any) -> Any:
    """A scalar with every second derivative coupled: sum(tanh(x)^3) * sum(x^2)."""
    return F.sum(F.tanh(x) ** 3) * F.sum(x * x)


def h(z: Any) -> Any:
    """A vector map: tanh(z) * z."""
    return F.tanh(z) * z


def u(x: Any) -> Any:
    """A per-datum scalar of a batch (N, 2): sin(x0) * x1^2 + x0^3, shape (N,)."""
    return F.sin(x[:, 0]) * x[:, 1] ** 2 + x[:, 0] ** 3


def _hvp_ref(x: Any) -> Any:
    (g,) = hd.grad(f(x), x)
    (hv,) = hd.grad(F.sum(g * V0), x)
    return hv


def _jvp_ref(x: Any) -> Any:
    jac = hd.jacobian(h, x, create_graph=True)
    return F.sum(jac * V0.reshape(1, 3), axis=1)


#: name -> (the transform called inside hd.jit, an uncompiled differentiable reference, x)
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], np.ndarray]] = {
    "grad": (lambda x: hd.grad(f(x), x)[0], lambda x: hd.grad(f(x), x)[0], X0),
    "vjp": (
        lambda x: hd.vjp(h, x, V0)[1],
        lambda x: hd.grad(h(x), x, grad_outputs=[V0])[0],
        X0,
    ),
    "jvp": (lambda x: hd.jvp(h, x, V0)[1], _jvp_ref, X0),
    "hvp": (lambda x: hd.hvp(f, x, V0)[1], _hvp_ref, X0),
    "hvp fwd-rev": (lambda x: hd.hvp(f, x, V0, mode="fwd-rev")[1], _hvp_ref, X0),
    "hvp 2 directions": (
        lambda x: hd.hvp(f, x, np.stack([V0, -2 * V0]))[1][1],
        lambda x: -2 * _hvp_ref(x),
        X0,
    ),
    "hessian": (lambda x: hd.hessian(f, x), lambda x: hd.hessian(f, x, create_graph=True), X0),
    "jacobian (rows)": (
        lambda x: hd.jacobian(lambda z: F.tanh(z) * F.sum(z), x),
        lambda x: hd.jacobian(lambda z: F.tanh(z) * F.sum(z), x, create_graph=True),
        X0,
    ),
    "jacobian (columns)": (
        lambda x: hd.jacobian(lambda z: F.concatenate(h(z), z * z, axis=0), x),
        lambda x: hd.jacobian(lambda z: F.concatenate(h(z), z * z, axis=0), x, create_graph=True),
        X0,
    ),
    "jet": (
        lambda x: hd.jet(h, (x,), ([V0, 0.5 * V0, V0],))[1][2],
        lambda x: hd.jet(h, (x,), ([V0, 0.5 * V0, V0],), create_graph=True)[1][2],
        X0,
    ),
    # the references of the exact Laplacians run the other exact method, uncompiled
    "laplacian taylor": (
        lambda x: hd.laplacian(f, x),
        lambda x: hd.laplacian(f, x, method="nested", create_graph=True),
        X0,
    ),
    "laplacian nested": (
        lambda x: hd.laplacian(f, x, method="nested"),
        lambda x: hd.laplacian(f, x, create_graph=True),
        X0,
    ),
    "laplacian stochastic": (
        lambda x: hd.laplacian(f, x, method="stochastic", num_samples=4, seed=3),
        lambda x: hd.laplacian(f, x, method="stochastic", num_samples=4, seed=3, create_graph=True),
        X0,
    ),
    "laplacian taylor coefficients": (
        lambda x: hd.laplacian(f, x, coefficients=S),
        lambda x: hd.laplacian(f, x, method="nested", coefficients=S, create_graph=True),
        X0,
    ),
    "laplacian nested coefficients": (
        lambda x: hd.laplacian(f, x, method="nested", coefficients=S),
        lambda x: hd.laplacian(f, x, coefficients=S, create_graph=True),
        X0,
    ),
    "laplacian stochastic coefficients": (
        lambda x: hd.laplacian(
            f, x, method="stochastic", num_samples=3, coefficients=S, distribution="normal"
        ),
        lambda x: hd.laplacian(
            f,
            x,
            method="stochastic",
            num_samples=3,
            coefficients=S,
            distribution="normal",
            create_graph=True,
        ),
        X0,
    ),
    "laplacian per datum taylor": (
        lambda x: hd.laplacian(u, x, batch_axis=0),
        lambda x: hd.laplacian(u, x, batch_axis=0, method="nested", create_graph=True),
        XB,
    ),
    "laplacian per datum nested": (
        lambda x: hd.laplacian(u, x, batch_axis=0, method="nested"),
        lambda x: hd.laplacian(u, x, batch_axis=0, create_graph=True),
        XB,
    ),
    "biharmonic taylor": (
        lambda x: hd.biharmonic(f, x),
        lambda x: hd.biharmonic(f, x, method="nested", create_graph=True),
        X0,
    ),
    "biharmonic nested": (
        lambda x: hd.biharmonic(f, x, method="nested"),
        lambda x: hd.biharmonic(f, x, create_graph=True),
        X0,
    ),
    "biharmonic stochastic": (
        lambda x: hd.biharmonic(f, x, method="stochastic", num_samples=3),
        lambda x: hd.biharmonic(f, x, method="stochastic", num_samples=3, create_graph=True),
        X0,
    ),
    "vmap": (
        lambda x: hd.vmap(lambda z: F.sum(F.tanh(z) * z))(F.reshape(x, (3, 1))),
        lambda x: F.tanh(x) * x,
        X0,
    ),
    "vmap of grad": (
        lambda x: hd.vmap(lambda z: hd.grad(F.sum(F.sin(z) * z), z)[0])(F.reshape(x, (3, 1))),
        lambda x: F.reshape(F.cos(x) * x + F.sin(x), (3, 1)),
        X0,
    ),
    "checkpoint": (
        lambda x: hd.grad(F.sum(hd.checkpoint(h, x) ** 2), x)[0],
        lambda x: hd.grad(F.sum(h(x) ** 2), x)[0],
        X0,
    ),
}


def _close(got: Any, want: Any, what: str) -> None:
    want = np.asarray(want)
    scale = max(float(np.max(np.abs(want))), 1.0) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


def _weights(shape: tuple[int, ...], k: int) -> np.ndarray:
    return np.random.default_rng(k).standard_normal(shape)


def _derivatives(g: Callable[[Any], Any], x0: np.ndarray) -> list[np.ndarray]:
    """Orders 1-3 of ``g`` at ``x0``, contracted with fixed weights: two ``hd.grad`` and a
    ``.backward()``.
    """
    x = hd.Variable.from_array(x0, need_grad=True)
    y = g(x)
    (d1,) = hd.grad(F.sum(y * _weights(y.shape, 1)), x)
    (d2,) = hd.grad(F.sum(d1 * _weights(x0.shape, 2)), x)
    x.zero_grad()
    F.sum(d2 * d2).backward()
    return [d1.d.copy(), d2.d.copy(), x.g.copy()]


@pytest.mark.parametrize("name", list(CASES))
def test_transform_inside_jit_equals_the_uncompiled_call(name: str) -> None:
    inside, reference, x0 = CASES[name]
    g = hd.jit(inside)
    got = g(x0)
    assert isinstance(got, np.ndarray)
    want = inside(hd.Variable.from_array(x0, need_grad=True))
    want = want.d if isinstance(want, hd.Variable) else want
    _close(got, want, f"{name}: the compiled call")
    _close(got, reference(hd.Variable.from_array(x0, need_grad=True)).d, f"{name}: reference")
    _close(g(x0 * 0.5), reference(hd.Variable.from_array(x0 * 0.5, need_grad=True)).d, name)


@pytest.mark.parametrize("name", list(CASES))
def test_derivatives_of_a_compiled_transform_orders_1_to_3(name: str) -> None:
    inside, reference, x0 = CASES[name]
    got = _derivatives(hd.jit(inside), x0)
    want = _derivatives(reference, x0)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        _close(a, b, f"{name}: derivative of order {k + 1}")


def test_the_transforms_see_a_compiler_recording() -> None:
    seen = []

    def probe(x: Any) -> Any:
        seen.append(api.is_symbolic())
        return hd.hvp(f, x, V0)[1]

    out = hd.jit(probe)(X0)
    assert seen == [True]
    assert not api.is_symbolic()
    _close(out, hd.hvp(f, X0, V0)[1], "hvp")
    with hd.auto_forward(False):  # a plain static graph still computes arrays
        _, hv = hd.hvp(f, X0, V0)
    assert isinstance(hv, np.ndarray)


# ---------------------------------------------------------------- closed forms, one graph
def cubic(x: Any) -> Any:
    """sum(x^3) + sum(x)^2: H = diag(6 x) + 2, Laplacian 6 sum(x) + 2 D."""
    return F.sum(x**3) + F.sum(x) ** 2


def tanh_sum(z: Any) -> Any:
    """tanh(z) * sum(z): J = diag(sech^2(z)) sum(z) + tanh(z) 1^T."""
    return F.tanh(z) * F.sum(z)


def _jac_tanh_sum(x: np.ndarray) -> np.ndarray:
    return np.diag(np.cosh(x) ** -2 * x.sum()) + np.tanh(x)[:, None] * np.ones(x.size)


def _dirs(d: int) -> np.ndarray:
    return np.stack([np.cos(np.arange(d) + k) for k in range(8)])


GRAPHS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "hessian": (
        lambda x: hd.hessian(cubic, x),
        lambda x: np.diag(6 * x) + 2.0,
    ),
    "jacobian (rows)": (lambda x: hd.jacobian(tanh_sum, x), _jac_tanh_sum),
    "jacobian (columns)": (
        lambda x: hd.jacobian(lambda z: F.concatenate(tanh_sum(z), z * z, axis=0), x),
        lambda x: np.concatenate([_jac_tanh_sum(x), np.diag(2 * x)]),
    ),
    "laplacian nested": (
        lambda x: hd.laplacian(cubic, x, method="nested"),
        lambda x: np.array(6 * x.sum() + 2.0 * x.size),
    ),
    "laplacian taylor": (
        lambda x: hd.laplacian(cubic, x),
        lambda x: np.array(6 * x.sum() + 2.0 * x.size),
    ),
    "hvp 8 directions": (
        lambda x: hd.hvp(cubic, x, _dirs(x.shape[0]))[1],
        lambda x: _dirs(x.size) @ (np.diag(6 * x) + 2.0),
    ),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_hessians_and_jacobians_compile_as_one_batched_graph(name: str) -> None:
    inside, closed = GRAPHS[name]
    nodes = []
    for d in (10, 40):
        x0 = np.linspace(-1.0, 1.5, d)
        g = hd.jit(inside)
        _close(g(x0), closed(x0), f"{name}, D={d}")
        nodes.append(g.lower(x0).nodes_after)
    assert nodes[0] == nodes[1], f"{name}: {nodes[0]} nodes at D=10, {nodes[1]} at D=40"


def test_compiled_hessian_against_finite_differences_of_the_gradient() -> None:
    x0 = np.array([0.4, -0.7, 1.1, 0.2])
    got = hd.jit(lambda x: hd.hessian(f, x))(x0)
    eps = 1e-6
    fd = np.empty((4, 4))
    for j in range(4):
        e = np.zeros(4)
        e[j] = eps
        plus = hd.Variable.from_array(x0 + e, need_grad=True)
        minus = hd.Variable.from_array(x0 - e, need_grad=True)
        fd[:, j] = (hd.grad(f(plus), plus)[0].d - hd.grad(f(minus), minus)[0].d) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(got, got.T, rtol=1e-13, atol=1e-14)


# ---------------------------------------------------------------- hd.compile
STATIC: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "hessian": (lambda x: hd.hessian(cubic, x, create_graph=True), lambda x: np.diag(6 * x) + 2),
    "jacobian": (lambda x: hd.jacobian(tanh_sum, x, create_graph=True), _jac_tanh_sum),
    "laplacian": (
        lambda x: hd.laplacian(cubic, x, create_graph=True),
        lambda x: np.array(6 * x.sum() + 2.0 * x.size),
    ),
    "hvp by hd.grad": (
        lambda x: hd.grad(F.sum(hd.grad(cubic(x), x)[0] * V0), x)[0],
        lambda x: (np.diag(6 * x) + 2) @ V0,
    ),
    "jet": (
        lambda x: hd.jet(F.sin, (x,), ([V0, 0 * V0],), create_graph=True)[1][1],
        lambda x: -np.sin(x) * V0**2,
    ),
}


@pytest.mark.parametrize("name", list(STATIC))
def test_compile_runs_a_static_graph_of_a_transform_at_new_leaf_values(name: str) -> None:
    inside, closed = STATIC[name]
    x = hd.Variable(X0.shape, need_grad=True, dtype=np.float64)
    x.d = X0
    with hd.auto_forward(False):
        y = inside(x)
    prog = hd.compile(y)
    for x1 in (np.array([0.1, 0.7, -0.4]), np.array([-1.2, 0.3, 0.9])):
        x.d = x1
        prog()
        _close(y.d, closed(x1), f"{name} at {x1}")
