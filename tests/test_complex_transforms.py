"""Transforms with complex values: vjp, jvp, jet, hvp, vmap, laplacian, checkpoint,
jacobian and hessian (``holomorphic=True``).

The convention (API.md, "Complex numbers"): a vjp is the cotangent times the Jacobian with
no conjugation; for a real ``f`` of ``z = x + iy``, ``hd.grad`` gives ``df/dx - i df/dy``.
So ``jvp(f, z, v)`` is the derivative along ``v``, ``d/dt f(z + t v)`` (``f'(z) v`` for a
holomorphic ``f``), the pairing of a vjp with a tangent is ``Re sum(vjp(c) v) =
Re sum(c jvp(v))``, and ``hvp(f, z, v)`` is the derivative of ``hd.grad``'s output along
``v``. Every expected value comes from a closed form, from central differences, or from
another algorithm.
"""

from __future__ import annotations

from collections.abc import Callable
from math import factorial
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

RNG = np.random.default_rng(5)


def _cplx(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape) + 1j * RNG.normal(size=shape)


def _along(g: Callable[[np.ndarray], np.ndarray], z: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``d/dt g(z + t v)`` at 0 by a Richardson-extrapolated central difference."""

    def d(h: float) -> np.ndarray:
        return (g(z + h * v) - g(z - h * v)) / (2 * h)

    return (4 * d(5e-5) - d(1e-4)) / 3


def _np_nonholo(z: np.ndarray) -> np.ndarray:
    return np.abs(z) ** 2 * np.sin(z) + np.conj(z) * z**2


def _nonholo(z: Any) -> Any:
    return F.abs(z) ** 2 * F.sin(z) + F.conj(z) * z**2


def _grad_of(f: Callable[[Any], Any]) -> Callable[[np.ndarray], np.ndarray]:
    def g(z: np.ndarray) -> np.ndarray:
        v = hd.Variable.from_array(z, need_grad=True)
        (gz,) = hd.grad(f(v), [v])
        return gz.d

    return g


def _real_loss(z: Any) -> Any:
    """A real-valued, non-holomorphic scalar of complex ``z``."""
    return F.sum(F.abs(z) ** 4 + F.real(z * z * z) - F.imag(F.sin(z)) * F.real(z))


# ---------------------------------------------------------------- jvp, vjp
def test_jvp_of_a_holomorphic_function_is_the_derivative_times_v() -> None:
    z0, v0 = _cplx(4), _cplx(4)
    y, jv = hd.jvp(lambda z: F.sin(z) * z + F.exp(z) / z, z0, v0)
    np.testing.assert_allclose(y, np.sin(z0) * z0 + np.exp(z0) / z0, rtol=1e-13)
    fprime = np.cos(z0) * z0 + np.sin(z0) + np.exp(z0) * (z0 - 1) / z0**2
    np.testing.assert_allclose(jv, fprime * v0, rtol=1e-12)
    assert jv.dtype == np.complex128


def test_jvp_of_a_non_holomorphic_function_is_the_derivative_along_v() -> None:
    z0, v0 = _cplx(5), _cplx(5)
    _, jv = hd.jvp(_nonholo, z0, v0)
    np.testing.assert_allclose(jv, _along(_np_nonholo, z0, v0), rtol=1e-8, atol=1e-9)
    # real-linear, not complex-linear in v: along i v it is not i times along v
    _, jv_i = hd.jvp(_nonholo, z0, 1j * v0)
    assert np.max(np.abs(jv_i - 1j * jv)) > 1e-2


def test_jvp_of_a_complex_function_of_real_and_complex_inputs() -> None:
    x0, z0 = RNG.normal(size=3), _cplx(3)
    vx, vz = RNG.normal(size=3), _cplx(3)
    _, jv = hd.jvp(lambda x, z: F.exp(x * z) + F.abs(z) * x, (x0, z0), (vx, vz))

    def g(t: complex) -> np.ndarray:
        x, z = x0 + t * vx, z0 + t * vz
        return np.exp(x * z) + np.abs(z) * x

    want = (4 * (g(5e-5) - g(-5e-5)) / 1e-4 - (g(1e-4) - g(-1e-4)) / 2e-4) / 3
    np.testing.assert_allclose(jv, want, rtol=1e-8)
    with pytest.raises(ValueError, match="complex"):
        hd.jvp(lambda x, z: x * z, (x0, z0), (vz, vz))  # a complex tangent of a real x


def test_vjp_is_the_transpose_of_jvp_under_the_convention() -> None:
    z0, v0, c0 = _cplx(2, 3), _cplx(2, 3), _cplx(2, 3)
    _, jv = hd.jvp(_nonholo, z0, v0)
    _, vj = hd.vjp(_nonholo, z0, c0)
    np.testing.assert_allclose(np.sum(vj * v0).real, np.sum(c0 * jv).real, rtol=1e-11)
    # holomorphic: the cotangent times the derivative, no conjugation
    _, vj = hd.vjp(F.tan, z0, c0)
    np.testing.assert_allclose(vj, c0 / np.cos(z0) ** 2, rtol=1e-12)
    # a real input's gradient is real: the real part of c f'(x)
    x0 = RNG.normal(size=3)
    _, vx = hd.vjp(lambda x: F.exp(x * (1 + 2j)), x0, c0[0])
    assert vx.dtype == np.float64
    np.testing.assert_allclose(vx, (c0[0] * (1 + 2j) * np.exp(x0 * (1 + 2j))).real, rtol=1e-12)


# ---------------------------------------------------------------- hvp
@pytest.mark.parametrize("mode", ["rev-rev", "fwd-rev"])
def test_hvp_is_the_derivative_of_the_gradient_along_v(mode: str) -> None:
    z0, v0 = _cplx(4), _cplx(4)
    y, hv = hd.hvp(_real_loss, z0, v0, mode=mode)
    np.testing.assert_allclose(y, _real_loss(hd.Variable.from_array(z0)).d, rtol=1e-14)
    want = _along(_grad_of(_real_loss), z0, v0)
    np.testing.assert_allclose(hv, want, rtol=1e-7, atol=1e-8)
    assert hv.dtype == np.complex128
    vs = np.stack([v0, _cplx(4), 1j * v0])
    _, hvs = hd.hvp(_real_loss, z0, vs, mode=mode)  # a batch of directions
    for v, h in zip(vs, hvs, strict=True):
        np.testing.assert_allclose(h, _along(_grad_of(_real_loss), z0, v), rtol=1e-7, atol=1e-8)


def test_hvp_of_abs_squared_is_2v() -> None:
    # f = |z|^2 = x^2 + y^2: grad = 2x - 2iy = 2 conj(z), its derivative along v: 2 conj(v)
    z0, v0 = _cplx(3), _cplx(3)
    _, hv = hd.hvp(lambda z: F.sum(F.abs(z) ** 2), z0, v0)
    np.testing.assert_allclose(hv, 2 * np.conj(v0), rtol=1e-12)


# ---------------------------------------------------------------- jet
@pytest.mark.parametrize(
    ("name", "f", "derivs"),
    [
        ("exp", F.exp, lambda z, k: np.exp(z)),
        (
            "sin",
            F.sin,
            lambda z, k: [np.sin, np.cos, lambda a: -np.sin(a), lambda a: -np.cos(a)][k % 4](z),
        ),
    ],
)
def test_jet_of_a_holomorphic_function_is_its_taylor_series(
    name: str, f: Callable[..., Any], derivs: Callable[[np.ndarray, int], np.ndarray]
) -> None:
    z0, v0, w0 = _cplx(3), _cplx(3), _cplx(3)
    zero = np.zeros(3, complex)
    # along the line z0 + t v: y_k = f^(k)(z0) v^k
    y0, ks = hd.jet(f, (z0,), ([v0, zero, zero, zero],))
    np.testing.assert_allclose(y0, derivs(z0, 0), rtol=1e-13)
    for k, yk in enumerate(ks, start=1):
        np.testing.assert_allclose(yk, derivs(z0, k) * v0**k, rtol=1e-11, err_msg=f"{name} {k}")
    # along the curve z0 + t v + t^2/2 w: y2 = f'' v^2 + f' w, y3 = f''' v^3 + 3 f'' v w
    _, (y1, y2, y3) = hd.jet(f, (z0,), ([v0, w0, zero],))
    d1, d2, d3 = (derivs(z0, k) for k in (1, 2, 3))
    np.testing.assert_allclose(y1, d1 * v0, rtol=1e-12)
    np.testing.assert_allclose(y2, d2 * v0**2 + d1 * w0, rtol=1e-11)
    np.testing.assert_allclose(y3, d3 * v0**3 + 3 * d2 * v0 * w0, rtol=1e-11)


def test_jet_taylor_coefficients_sum_to_the_function_on_the_line() -> None:
    # sum_k y_k t^k / k! is f(z0 + t v) to the order's accuracy (closed form of exp)
    z0, v0 = _cplx(2), _cplx(2) * 0.1
    y0, ks = hd.jet(F.exp, (z0,), ([v0] + [np.zeros(2, complex)] * 7,))
    series = y0 + sum(yk / factorial(k) for k, yk in enumerate(ks, start=1))
    np.testing.assert_allclose(series, np.exp(z0 + v0), rtol=1e-9)


def test_jet_of_a_non_holomorphic_function_against_nested_derivatives() -> None:
    z0, v0 = _cplx(3), _cplx(3)
    zero = np.zeros(3, complex)
    _, (y1, y2) = hd.jet(_nonholo, (z0,), ([v0, zero],))
    np.testing.assert_allclose(y1, _along(_np_nonholo, z0, v0), rtol=1e-8, atol=1e-9)
    t = hd.Variable.from_array(np.zeros(()), need_grad=True)
    y = _nonholo(z0 + t * v0)
    for part, got in ((F.real, y2.real), (F.imag, y2.imag)):
        for i in range(3):
            (d1,) = hd.grad(part(y)[i], [t], create_graph=True)
            (d2,) = hd.grad(d1, [t])
            np.testing.assert_allclose(got[i], d2.d, rtol=1e-10, atol=1e-10)


def test_a_complex_primal_is_not_made_real() -> None:
    _, (y1,) = hd.jet(lambda z: z * z, (np.array([1 + 1j]),), ([np.array([1.0 + 0j])],))
    np.testing.assert_allclose(y1, [2 + 2j])


# ---------------------------------------------------------------- vmap
def test_transforms_inside_vmap_equal_the_per_example_ones() -> None:
    zs, vs = _cplx(3, 4), _cplx(3, 4)
    jv = hd.vmap(lambda z, v: hd.jvp(_nonholo, z, v)[1])(zs, vs)
    hv = hd.vmap(lambda z, v: hd.hvp(_real_loss, z, v)[1])(zs, vs)
    vj = hd.vmap(lambda z, v: hd.vjp(_nonholo, z, v)[1])(zs, vs)
    gr = hd.vmap(lambda z: hd.grad(_real_loss(z), [z])[0])(hd.Variable.from_array(zs))
    for i in range(3):
        np.testing.assert_allclose(jv.d[i], _along(_np_nonholo, zs[i], vs[i]), rtol=1e-8)
        want = _along(_grad_of(_real_loss), zs[i], vs[i])
        np.testing.assert_allclose(hv.d[i], want, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(vj.d[i], hd.vjp(_nonholo, zs[i], vs[i])[1], rtol=1e-12)
        np.testing.assert_allclose(gr.d[i], _grad_of(_real_loss)(zs[i]), rtol=1e-12)


# ---------------------------------------------------------------- laplacian
K = np.array([0.7, -0.4, 1.1])


def _psi(x: Any) -> Any:
    """A complex wavefunction of real x: ``exp(i k.x - |x|^2 / 2)`` (per row with batches)."""
    ax = x.ndim - 1
    return F.exp(F.sum(x * K, axis=ax) * 1j - F.sum(x * x, axis=ax) / 2)


def _lap_psi(x: np.ndarray) -> np.ndarray:
    """``sum_j d^2/dx_j^2 psi = psi sum_j ((i k_j - x_j)^2 - 1)``, the closed form."""
    psi = np.exp(1j * (x @ K) - np.sum(x * x, axis=-1) / 2)
    return psi * np.sum((1j * K - x) ** 2 - 1, axis=-1)


@pytest.mark.parametrize("method", ["taylor", "nested"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_kinetic_energy_of_a_complex_wavefunction(method: str, create_graph: bool) -> None:
    x0 = RNG.normal(size=3)
    lap = hd.laplacian(_psi, x0, method=method, create_graph=create_graph)
    got = lap.d if create_graph else lap
    np.testing.assert_allclose(got, _lap_psi(x0), rtol=1e-12)
    xs = RNG.normal(size=(4, 3))
    lap = hd.laplacian(_psi, xs, batch_axis=0, method=method, create_graph=create_graph)
    np.testing.assert_allclose(lap.d if create_graph else lap, _lap_psi(xs), rtol=1e-12)


def test_stochastic_laplacian_of_a_complex_function_is_that_of_its_parts() -> None:
    x0 = RNG.normal(size=3)
    kw: dict[str, Any] = {"method": "stochastic", "num_samples": 5, "seed": 3}
    got = hd.laplacian(_psi, x0, **kw)
    re = hd.laplacian(lambda x: F.real(_psi(x)), x0, **kw)
    im = hd.laplacian(lambda x: F.imag(_psi(x)), x0, **kw)
    np.testing.assert_allclose(got, re + 1j * im, rtol=1e-12)
    # unbiased: many samples come close to the closed form
    many = hd.laplacian(_psi, x0, method="stochastic", num_samples=20000, seed=1)
    assert abs(many - _lap_psi(x0)) < 0.1 * abs(_lap_psi(x0))


def test_biharmonic_of_a_complex_wavefunction_by_both_methods() -> None:
    x0 = RNG.normal(size=3)
    taylor = hd.biharmonic(_psi, x0)
    nested = hd.biharmonic(_psi, x0, method="nested")
    np.testing.assert_allclose(taylor, nested, rtol=1e-10)
    # the Laplacian of the closed-form Laplacian, by second differences
    h, n = 1e-3, np.eye(3)
    want = sum(
        (_lap_psi(x0 + h * n[j]) - 2 * _lap_psi(x0) + _lap_psi(x0 - h * n[j])) / h**2
        for j in range(3)
    )
    np.testing.assert_allclose(taylor, want, rtol=1e-5)


def test_laplacian_refuses_a_complex_point() -> None:
    with pytest.raises(TypeError, match=r"laplacian: x has dtype complex128.*F\.complex"):
        hd.laplacian(lambda z: F.sum(z * z), _cplx(3))


# ---------------------------------------------------------------- checkpoint
def test_checkpoint_of_a_complex_segment_equals_the_plain_graph() -> None:
    z0, w = _cplx(4), _cplx(4)

    def seg(z: Any) -> Any:
        return F.sin(z) * F.conj(z) + F.exp(z)

    def loss(y: Any) -> Any:
        return F.sum(F.real(y * w))

    grads = []
    for wrap in (True, False):
        z = hd.Variable.from_array(z0, need_grad=True)
        y = hd.checkpoint(seg, z) if wrap else seg(z)
        (g,) = hd.grad(loss(y), [z], create_graph=True)
        (gg,) = hd.grad(F.sum(F.abs(g) ** 2), [z])
        loss(hd.checkpoint(seg, z) if wrap else seg(z)).backward()
        grads.append((g.d, gg.d, z.g.copy()))
    for a, b in zip(*grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    # the gradient itself against differences along x and iy
    want = np.zeros(4, complex)
    for i in range(4):
        e = np.eye(4)[i]
        for step, sign in ((1.0, 1.0), (1j, -1j)):

            def lo(t: float, e: np.ndarray = e, step: complex = step) -> float:
                zz = z0 + t * step * e
                return float(np.sum((w * (np.sin(zz) * np.conj(zz) + np.exp(zz))).real))

            want[i] += sign * (lo(1e-6) - lo(-1e-6)) / 2e-6
    np.testing.assert_allclose(grads[0][0], want, rtol=1e-7)
    _, jv = hd.jvp(lambda z: hd.checkpoint(seg, z), z0, w)
    np.testing.assert_allclose(jv, hd.jvp(seg, z0, w)[1], rtol=1e-12)


# ---------------------------------------------------------------- jacobian, hessian
def test_jacobian_and_hessian_of_complex_inputs_need_the_promise() -> None:
    z0 = _cplx(3)
    with pytest.raises(TypeError, match=r"jacobian: inputs has dtype complex128.*holomorphic=Tr"):
        hd.jacobian(lambda z: z**3, z0)
    with pytest.raises(TypeError, match=r"hd\.jvp or hd\.vjp"):
        hd.jacobian(lambda x, z: x * z, (RNG.normal(size=3), z0))
    with pytest.raises(TypeError, match=r"hessian: inputs\[1\] has dtype complex128.*hd\.hvp"):
        hd.hessian(lambda x, z: F.sum(F.abs(x * z)), (RNG.normal(size=3), z0))


@pytest.mark.parametrize("create_graph", [False, True])
def test_holomorphic_jacobians_against_closed_forms(create_graph: bool) -> None:
    z0 = _cplx(3)
    a = _cplx(4, 3)

    def value(j: Any) -> np.ndarray:
        return np.asarray(j.d if create_graph else j)

    j = hd.jacobian(lambda z: z**3, z0, holomorphic=True, create_graph=create_graph)
    np.testing.assert_allclose(value(j), np.diag(3 * z0**2), rtol=1e-13)
    j = hd.jacobian(
        lambda z: F.sum(F.reshape(z, (1, 3)) * a, axis=1),
        z0,
        holomorphic=True,
        create_graph=create_graph,
    )
    np.testing.assert_allclose(value(j), a, rtol=1e-13)
    # more outputs than inputs (columns): y_ab = (A z)_a z_b, dy_ab/dz_c = A_ac z_b + (Az)_a d_bc
    j = hd.jacobian(
        lambda z: F.reshape(F.sum(F.reshape(z, (1, 3)) * a, axis=1), (4, 1)) * F.reshape(z, (1, 3)),
        z0,
        holomorphic=True,
        create_graph=create_graph,
    )
    want = a[:, None, :] * z0[None, :, None] + (a @ z0)[:, None, None] * np.eye(3)[None]
    np.testing.assert_allclose(value(j), want, rtol=1e-12)


def test_holomorphic_hessian_and_mixed_inputs() -> None:
    z0, x0 = _cplx(3), RNG.normal(size=3)
    h = hd.hessian(lambda z: F.sum(z**3) + F.sum(z) ** 2, z0, holomorphic=True)
    np.testing.assert_allclose(h, np.diag(6 * z0) + 2, rtol=1e-13)
    # real inputs beside complex ones: made complex (f holomorphic in both)
    jx, jz = hd.jacobian(lambda x, z: x * F.exp(z), (x0, z0), holomorphic=True)
    np.testing.assert_allclose(jx, np.diag(np.exp(z0)), rtol=1e-13)
    np.testing.assert_allclose(jz, np.diag(x0 * np.exp(z0)), rtol=1e-13)
    (hxx, hxz), (hzx, hzz) = hd.hessian(lambda x, z: F.sum(x * x * z), (x0, z0), holomorphic=True)
    np.testing.assert_allclose(hxx, np.diag(2 * z0), rtol=1e-13)
    np.testing.assert_allclose(hxz, np.diag(2 * x0), rtol=1e-13)
    np.testing.assert_allclose(hzx, np.diag(2 * x0), rtol=1e-13)
    np.testing.assert_allclose(hzz, np.zeros((3, 3)), atol=1e-15)


def test_complex_valued_functions_of_real_inputs_need_no_promise() -> None:
    x0 = RNG.normal(size=3)
    c = 1 + 2j
    j = hd.jacobian(lambda x: F.exp(x * c), x0)
    np.testing.assert_allclose(j, np.diag(c * np.exp(c * x0)), rtol=1e-13)
    h = hd.hessian(lambda x: F.sum(F.exp(x * c)) * x[0], x0)
    want = np.diag(c**2 * np.exp(c * x0) * x0[0]).astype(complex)
    want[0, :] += c * np.exp(c * x0)
    want[:, 0] += c * np.exp(c * x0)
    np.testing.assert_allclose(h, want, rtol=1e-12)
    jv = hd.vmap(lambda x: hd.jacobian(lambda v: F.exp(v * c), x))(np.stack([x0, 2 * x0]))
    np.testing.assert_allclose(jv.d[1], np.diag(c * np.exp(2 * c * x0)), rtol=1e-13)


# ---------------------------------------------------------------- gradcheck
def test_gradcheck_checks_real_and_imaginary_parts_at_every_order() -> None:
    z0 = _cplx(3)
    report = hd.gradcheck(_real_loss, z0, order=3)
    parts = {(r.input, r.part, r.order) for r in report.rows}
    assert parts == {(0, p, k) for p in ("re", "im") for k in (1, 2, 3)}
    # the analytic values of order 1 are hd.grad's: Re g along x, -Im g along y
    g = _grad_of(_real_loss)(z0)
    rows = {(r.part, r.element): r.analytic for r in report.rows if r.order == 1}
    u = np.random.default_rng(0).standard_normal(())  # the check's weight of a scalar f
    for j in range(3):
        np.testing.assert_allclose(rows[("re", (j,))], u * g[j].real, rtol=1e-12)
        np.testing.assert_allclose(rows[("im", (j,))], -u * g[j].imag, rtol=1e-12)
    assert "0.re" in str(report)
    assert "0.im" in str(report)


def test_gradcheck_of_a_complex_valued_f_and_mixed_inputs() -> None:
    x0, z0 = RNG.normal(size=2), _cplx(2)
    report = hd.gradcheck(lambda x, z: F.exp(x * z) * F.conj(z), (x0, z0), order=2)
    assert {(r.input, r.part) for r in report.rows} == {(0, ""), (1, "re"), (1, "im")}
    assert hd.gradcheck(lambda x: F.exp(x * (1 + 2j)), x0, order=3)


class _WrongImag(hd.Function):
    """``y = z^2`` whose rule conjugates: ``gz = gy conj(2 z)`` (right for real z only)."""

    complex_values = "holomorphic"

    def forward_impl(self, inputs: Any, outputs: Any) -> None:
        outputs[0] = inputs[0] * inputs[0]

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if prop_down[0]:
            gz = outputs[0].grad * F.conj(inputs[0].data) * 2.0
            inputs[0].store(gz, accum[0])


def test_gradcheck_catches_a_rule_wrong_for_complex_values_only() -> None:
    x0 = RNG.normal(size=3)
    assert hd.gradcheck(lambda x: _WrongImag()(x), x0, order=1)  # real: right
    report = hd.gradcheck(lambda z: _WrongImag()(z), _cplx(3), raise_exception=False)
    assert not report
    assert {r.part for r in report.failures()} <= {"re", "im"}
    with pytest.raises(hd.GradcheckError, match=r"0\.(re|im)"):
        hd.gradcheck(lambda z: _WrongImag()(z), _cplx(3))


@pytest.mark.parametrize(
    "f",
    [
        lambda z: F.abs(z) ** 2,
        F.conj,
        lambda z: F.real(z) * z,
        lambda z: F.sum(F.abs(z)),
    ],
    ids=["abs2", "conj", "real_times_z", "sum_abs"],
)
def test_gradcheck_refuses_a_false_holomorphic_promise(f: Callable[..., Any]) -> None:
    z0 = _cplx(2, 2)
    report = hd.gradcheck(f, z0, holomorphic=True, raise_exception=False)
    bad = report.failures()
    assert bad
    assert all(r.part == "C-R" for r in bad)  # the derivatives themselves are right
    assert {r.element for r in bad} <= {(i, j) for i in range(2) for j in range(2)}
    with pytest.raises(hd.GradcheckError, match=r"0\.C-R"):
        hd.gradcheck(f, z0, holomorphic=True)


def test_gradcheck_names_the_input_and_element_where_holomorphy_fails() -> None:
    # holomorphic in z[0] and z[2]; conj in z[1]; x real (not checked for it)
    def f(x: Any, z: Any) -> Any:
        mask = np.array([0.0, 1.0, 0.0])
        return F.exp(z) * (1 - mask) + F.conj(z) * mask + x

    report = hd.gradcheck(
        f, (RNG.normal(size=3), _cplx(3)), holomorphic=True, raise_exception=False
    )
    assert [(r.input, r.element) for r in report.failures()] == [(1, (1,))]


@pytest.mark.parametrize(
    "f",
    [lambda z: F.exp(z) * z, lambda z: F.sin(z) / (z + 3.0), lambda z: z**3 + F.log(z)],
    ids=["exp_z", "sin_quotient", "cube_log"],
)
def test_gradcheck_keeps_a_true_holomorphic_promise(f: Callable[..., Any]) -> None:
    report = hd.gradcheck(f, _cplx(3) + 0.5, order=2, holomorphic=True)
    assert sum(1 for r in report.rows if r.part == "C-R") == 3


# ---------------------------------------------------------------- check_function
class _Cube(hd.Function):
    """``y = z^3`` of complex ``z``: ``gz = 3 gy z^2`` (holomorphic: the real rule)."""

    complex_values = "holomorphic"

    def forward_impl(self, inputs: Any, outputs: Any) -> None:
        outputs[0] = inputs[0] ** 3

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if prop_down[0]:
            x = inputs[0].data
            inputs[0].store(outputs[0].grad * (x * x) * 3.0, accum[0])


class _ConjugatedCube(_Cube):
    """The rule a PyTorch habit writes: ``gz = 3 gy conj(z)^2`` (wrong in this convention)."""

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if prop_down[0]:
            x = F.conj(inputs[0].data)
            inputs[0].store(outputs[0].grad * (x * x) * 3.0, accum[0])


def test_check_function_passes_a_holomorphic_primitive() -> None:
    from hodiff.testing import check_function

    report = check_function(_Cube(), _cplx(3))
    assert report.passed
    assert [r.ok for r in report.rows] == [True] * len(report.rows)
    assert len(report.rows) == 9  # every property ran, none skipped for complex values


def test_check_function_fails_a_conjugated_rule_naming_the_part() -> None:
    from hodiff.testing import check_function

    report = check_function(_ConjugatedCube(), _cplx(3), raise_exception=False)
    assert not report.passed
    failed = {r.property for r in report.failures()}
    assert {"finite differences, order 1", "finite differences, order 2"} <= failed
    assert "part)" in report.failures()[0].detail
    with pytest.raises(hd.GradcheckError, match="finite differences, order 1"):
        check_function(_ConjugatedCube(), _cplx(3))
    # on real inputs the two rules agree: only complex values tell them apart
    assert check_function(_ConjugatedCube(), RNG.normal(size=3))
