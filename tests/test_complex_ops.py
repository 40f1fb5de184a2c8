"""Complex values through the Fourier transforms, linear algebra, array functions and solvers.

Expected values come from numpy (forward), central differences along ``x`` and ``iy``
(API.md's convention: the gradient of a real ``f`` of ``z = x + iy`` is
``df/dx - i df/dy``), transposition identities with numpy's transforms, and, for the
solvers, the same solver run on the real coordinates ``(Re w, Im w)`` of each parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S

RNG = np.random.default_rng(3)


def _cplx(*shape: int, rng: np.random.Generator = RNG) -> np.ndarray:
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def _numeric_grad(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """``df/dx - i df/dy`` by central differences (``df/dx`` alone for a real ``x``)."""
    g = np.zeros(x.shape, dtype=np.result_type(x.dtype, np.float64))
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape, dtype=x.dtype)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
        if x.dtype.kind == "c":
            g[i] -= 1j * (f(x + 1j * e) - f(x - 1j * e)) / (2 * h)
    return g


def _real_loss(y: Any, w: np.ndarray) -> Any:
    """``sum Re(w) Re(y) + Im(w) Im(y)``: a real functional of a real or complex ``y``."""
    if y.dtype.kind == "c":
        return F.sum(F.real(y) * w.real + F.imag(y) * w.imag)
    return F.sum(y * w.real)


def _np_loss(y: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(y.real * w.real + (y.imag * w.imag if np.iscomplexobj(y) else 0.0)))


def _check_orders(fn: Callable[..., Any], ref: Callable[..., Any], x0: np.ndarray) -> None:
    """First and second derivatives of ``L = <w, fn(x)>`` (and of ``L^2``, so the second
    order is not zero for a linear ``fn``) against differences of ``ref``.
    """
    w = _cplx(*np.shape(ref(x0)))

    def f_np(x: np.ndarray) -> float:
        return _np_loss(ref(x), w) ** 2

    x = hd.Variable.from_array(x0, need_grad=True)
    (g,) = hd.grad([_real_loss(fn(x), w) ** 2], [x], create_graph=True)
    np.testing.assert_allclose(g.d, _numeric_grad(f_np, x0), rtol=1e-6, atol=1e-7)
    # second order: the gradient of h = <Re v, Re g> + <Im v, Im g>, a real function of x
    v = _cplx(*x0.shape) if x0.dtype.kind == "c" else RNG.normal(size=x0.shape)
    (gg,) = hd.grad([_real_loss(g, v)], [x])

    def h_np(xx: np.ndarray) -> float:
        xv = hd.Variable.from_array(xx, need_grad=True)
        (gx,) = hd.grad([_real_loss(fn(xv), w) ** 2], [xv])
        return _np_loss(gx.d, v)

    np.testing.assert_allclose(gg.d, _numeric_grad(h_np, x0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- Fourier transforms
TRANSFORMS = [
    (name, kw)
    for name in ("fft", "ifft", "irfft")
    for kw in ({}, {"norm": "ortho"}, {"norm": "forward", "n": 7}, {"n": 4}, {"n": 3})
] + [("rfft", kw) for kw in ({}, {"norm": "ortho", "n": 8}, {"norm": "forward", "n": 3})]


@pytest.mark.parametrize(("name", "kw"), TRANSFORMS, ids=[f"{n}-{k}" for n, k in TRANSFORMS])
def test_transform_matches_numpy_and_differences(name: str, kw: dict[str, Any]) -> None:
    fn, ref = getattr(F, name), getattr(np.fft, name)
    x0 = RNG.normal(size=(2, 5)) if name == "rfft" else _cplx(2, 5)
    np.testing.assert_allclose(fn(x0, **kw).d, ref(x0, **kw), rtol=1e-12, atol=1e-12)
    _check_orders(lambda x: fn(x, **kw), lambda x: ref(x, **kw), x0)


@pytest.mark.parametrize("name", ["fft", "ifft", "irfft"])
def test_transform_of_a_real_signal_has_a_real_gradient(name: str) -> None:
    fn, ref = getattr(F, name), getattr(np.fft, name)
    x0 = RNG.normal(size=(6,))
    w = _cplx(*ref(x0).shape)
    x = hd.Variable.from_array(x0, need_grad=True)
    (g,) = hd.grad([_real_loss(fn(x), w)], [x])
    assert g.dtype == np.float64
    np.testing.assert_allclose(g.d, _numeric_grad(lambda a: _np_loss(ref(a), w), x0), atol=1e-7)


@pytest.mark.parametrize(("name", "kw"), TRANSFORMS, ids=[f"{n}-{k}" for n, k in TRANSFORMS])
def test_transpose_by_the_dot_product_identity(name: str, kw: dict[str, Any]) -> None:
    """``Re <g, J v> = Re <vjp(g), v>`` (no conjugation) with ``J v`` from numpy, and for the
    holomorphic ``fft``/``ifft`` the complex identity ``<g, J v> = <vjp(g), v>``.
    """
    ref = getattr(np.fft, name)
    v = RNG.normal(size=(3, 6)) if name == "rfft" else _cplx(3, 6)
    jv = ref(v, **kw)
    g = _cplx(*jv.shape) if jv.dtype.kind == "c" else RNG.normal(size=jv.shape)
    x = hd.Variable.from_array(v, need_grad=True)
    (gx,) = hd.grad([getattr(F, name)(x, **kw)], [x], grad_outputs=[g])
    np.testing.assert_allclose(np.sum(g * jv).real, np.sum(gx.d * v).real, rtol=1e-10)
    if name in ("fft", "ifft"):
        np.testing.assert_allclose(np.sum(g * jv), np.sum(gx.d * v), rtol=1e-10)


def test_transform_forward_mode() -> None:
    x0, v0 = _cplx(3, 5), _cplx(3, 5)
    _, jv = hd.jvp(lambda x: F.fft(x, n=6, norm="ortho"), [x0], [v0])
    np.testing.assert_allclose(jv, np.fft.fft(v0, n=6, norm="ortho"), rtol=1e-12)
    # irfft is real-linear, not complex-linear: its tangent is irfft of the tangent
    _, jv = hd.jvp(lambda x: F.irfft(x, n=7), [x0], [v0])
    np.testing.assert_allclose(jv, np.fft.irfft(v0, n=7), rtol=1e-10, atol=1e-12)


def test_transform_under_vmap() -> None:
    x0 = _cplx(3, 5)
    batched = hd.vmap(lambda x: F.irfft(F.fft(x), n=8))(x0)
    np.testing.assert_allclose(batched.d, np.fft.irfft(np.fft.fft(x0), n=8), atol=1e-12)


def test_transform_dtypes_and_misuse() -> None:
    assert F.fft(np.ones(4, np.float32)).dtype == np.complex64
    assert F.irfft(np.ones(3, np.complex64)).dtype == np.float32
    assert F.rfft(np.ones(4)).dtype == np.complex128
    with pytest.raises(TypeError, match=r"F\.rfft: x has dtype complex128"):
        F.rfft(np.ones(4) + 1j)
    with pytest.raises(ValueError, match="fft: norm must be one of"):
        F.fft(np.ones(4), norm="unitary")
    with pytest.raises(ValueError, match="ifft: n must be >= 1"):
        F.ifft(np.ones(4), n=0)
    with pytest.raises(ValueError, match="irfft: x of shape"):
        F.irfft(np.ones(1, complex))


# ---------------------------------------------------------------- linear algebra
def _near_eye(n: int, scale: float = 3.0) -> np.ndarray:
    return scale * np.eye(n) + 0.4 * _cplx(n, n)


B, BIAS, RHS, A0 = _cplx(4, 2), _cplx(2), _cplx(3, 2), _near_eye(3)
LINALG = [
    ("matmul", lambda a: F.matmul(a, B), lambda a: a @ B, lambda: _cplx(3, 4)),
    (
        "bmm_t",
        lambda a: F.batch_matmul(a, B, transpose_a=True),
        lambda a: a.T @ B,
        lambda: _cplx(4, 3),
    ),
    ("affine", lambda a: F.affine(a, B, BIAS), lambda a: a @ B + BIAS, lambda: _cplx(3, 4)),
    ("einsum", lambda a: F.einsum("ij,jk->ik", a, B), lambda a: a @ B, lambda: _cplx(3, 4)),
    ("tensordot", lambda a: F.tensordot(a, B, 1), lambda a: a @ B, lambda: _cplx(3, 4)),
    ("outer", lambda a: F.outer(a, B[0]), lambda a: np.outer(a, B[0]), lambda: _cplx(3)),
    ("trace", lambda a: F.trace(a), lambda a: np.trace(a), lambda: _cplx(3, 3)),
    ("batch_inv", lambda a: F.batch_inv(a), np.linalg.inv, lambda: _near_eye(3)[None]),
    ("batch_det", lambda a: F.batch_det(a), np.linalg.det, lambda: _near_eye(3)[None]),
    (
        "batch_logdet",
        lambda a: F.batch_logdet(a),
        lambda a: np.log(np.abs(np.linalg.det(a))),
        lambda: _near_eye(3, -3.0)[None],
    ),
    ("solve", lambda a: F.solve(a, RHS), lambda a: np.linalg.solve(a, RHS), lambda: _near_eye(3)),
    ("solve_b", lambda b: F.solve(A0, b), lambda b: np.linalg.solve(A0, b), lambda: _cplx(3, 2)),
]


@pytest.mark.parametrize(("name", "fn", "ref", "draw"), LINALG, ids=[r[0] for r in LINALG])
def test_linear_algebra_on_complex_values(name: str, fn: Any, ref: Any, draw: Any) -> None:
    x0 = draw()
    y = fn(x0)
    np.testing.assert_allclose(y.d, ref(x0), rtol=1e-10, atol=1e-12)
    assert y.dtype == (np.float64 if name == "batch_logdet" else np.complex128)
    _check_orders(fn, ref, x0)


def test_logdet_gradient_is_the_inverse_transpose_not_its_conjugate() -> None:
    """``d log|det A| = Re tr(A^-1 dA)`` gives ``df/dRe A - i df/dIm A = A^-T``."""
    a0 = _near_eye(3)
    a = hd.Variable.from_array(a0, need_grad=True)
    (g,) = hd.grad([F.batch_logdet(a)], [a])
    expected = np.linalg.inv(a0).T
    np.testing.assert_allclose(g.d, expected, rtol=1e-10)
    assert np.abs(g.d - expected.conj()).max() > 1e-3  # the conjugate would be wrong
    np.testing.assert_allclose(
        g.d, _numeric_grad(lambda m: float(np.log(abs(np.linalg.det(m)))), a0), atol=1e-7
    )


def test_real_operand_of_a_complex_product_gets_a_real_gradient() -> None:
    a0, b0 = RNG.normal(size=(3, 4)), _cplx(4, 2)
    w = _cplx(3, 2)
    a = hd.Variable.from_array(a0, need_grad=True)
    (ga,) = hd.grad([_real_loss(F.matmul(a, b0), w)], [a])
    assert ga.dtype == np.float64
    np.testing.assert_allclose(ga.d, _numeric_grad(lambda m: _np_loss(m @ b0, w), a0), atol=1e-7)


# ---------------------------------------------------------------- array functions
KEY = (slice(None, None, -1), np.array([0, 2, 2]))
ARRAYS = [
    ("reshape", lambda x: F.reshape(x, (3, 2)), lambda x: x.reshape(3, 2)),
    ("transpose", lambda x: F.transpose(x, (1, 0)), lambda x: x.T),
    ("broadcast", lambda x: F.broadcast(x[None], (2, 2, 3)), lambda x: np.stack([x, x])),
    ("concatenate", lambda x: F.concatenate(x, 2 * x, axis=1), lambda x: np.hstack([x, 2 * x])),
    ("split", lambda x: F.split(x, axis=1)[2], lambda x: x[:, 2]),
    ("stack", lambda x: F.stack(x, x * 3), lambda x: np.stack([x, 3 * x])),
    ("slice", lambda x: F.slice(x, (0, 1), (2, 3)), lambda x: x[0:2, 1:3]),
    ("getitem", lambda x: F.getitem(x, KEY), lambda x: x[KEY]),
    ("pad", lambda x: F.pad(x, (1, 2)), lambda x: np.pad(x, ((0, 0), (1, 2)))),
    ("flip", lambda x: F.flip(x, (1,)), lambda x: x[:, ::-1]),
    ("tile", lambda x: F.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1))),
    (
        "where",
        lambda x: F.where(np.array([True, False, True]), x, 1j * x),
        lambda x: np.where([True, False, True], x, 1j * x),
    ),
    ("gather", lambda x: F.gather(x, np.array([2, 0]), axis=1), lambda x: x[:, [2, 0]]),
]


@pytest.mark.parametrize(("name", "fn", "ref"), ARRAYS, ids=[r[0] for r in ARRAYS])
def test_array_functions_move_complex_values(name: str, fn: Any, ref: Any) -> None:
    x0 = _cplx(2, 3)
    y = fn(x0)
    assert y.dtype == np.complex128
    np.testing.assert_allclose(y.d, ref(x0), rtol=1e-14)
    _check_orders(fn, ref, x0)


def test_complex_constant() -> None:
    y = F.constant(2 - 1j, (2, 2))
    assert y.dtype == np.complex64
    np.testing.assert_array_equal(y.d, np.full((2, 2), 2 - 1j))


# ---------------------------------------------------------------- solvers
SOLVERS = [
    (S.Sgd, {"lr": 0.1}),
    (S.Momentum, {"lr": 0.05, "momentum": 0.8}),
    (S.Nesterov, {"lr": 0.05, "momentum": 0.8}),
    (S.Adagrad, {"lr": 0.2}),
    (S.RMSprop, {"lr": 0.05}),
    (S.Adam, {"lr": 0.05}),
    (S.AdamW, {"lr": 0.05, "wd": 0.1}),
]


@pytest.mark.parametrize(("cls", "kw"), SOLVERS, ids=[c.__name__ for c, _ in SOLVERS])
def test_solver_steps_a_complex_parameter_as_its_real_coordinates(cls: Any, kw: Any) -> None:
    """As torch.optim on view_as_real: the real run's gradient is torch's, ``conj(g)``."""
    rng = np.random.default_rng(11)
    z = hd.Variable.from_array(_cplx(2, 3, rng=rng), need_grad=True)
    r = hd.Variable.from_array(np.stack([z.d.real, z.d.imag], axis=-1), need_grad=True)
    sz, sr = cls(**kw), cls(**kw)
    sz.set_parameters({"z": z})
    sr.set_parameters({"r": r})
    for step in range(6):
        g = _cplx(2, 3, rng=rng)  # hodiff's gradient, df/dx - i df/dy
        for s, p, gp in ((sz, z, g), (sr, r, np.stack([g.real, -g.imag], axis=-1))):
            s.zero_grad()
            p.g = gp
            if step % 2:
                s.weight_decay(0.01)
            s.update()
        np.testing.assert_allclose(z.d.real, r.d[..., 0], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(z.d.imag, r.d[..., 1], rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(z.g, g if step % 2 == 0 else z.g)  # .g left as it was
    for state in cls.states:
        assert sz._state["z"][state].shape == (2, 3, 2)


def test_sgd_minimises_a_complex_distance() -> None:
    """``|z - c|^2``: the step along conj(grad) converges to ``c``; along grad it would not."""
    c = np.array([1.0 + 2.0j, -0.5j])
    z = hd.Variable.from_array(np.zeros(2, complex), need_grad=True)
    solver = S.Sgd(lr=0.1)
    solver.set_parameters([z])
    for _ in range(200):
        solver.zero_grad()
        F.sum(F.abs(z - c) ** 2).backward()
        solver.update()
    np.testing.assert_allclose(z.d, c, atol=1e-12)


def test_solver_states_of_complex_parameters_round_trip(tmp_path: Any) -> None:
    z = hd.Variable.from_array(_cplx(3), need_grad=True)
    solver = S.Adam(lr=0.1)
    solver.set_parameters({"z": z})
    z.g = _cplx(3)
    solver.update()
    solver.save_states(tmp_path / "s.npz")
    other = S.Adam(lr=0.1)
    other.set_parameters({"z": z})
    other.load_states(tmp_path / "s.npz")
    for s in ("m", "v"):
        np.testing.assert_array_equal(other._state["z"][s], solver._state["z"][s])


def test_parameters_and_graphs_save_and_load_complex_values(tmp_path: Any) -> None:
    hd.clear_parameters()
    try:
        value = np.array([1 + 2j, 3 - 1j, 0.5j])
        w = hd.get_parameter_or_create("w", (3,), initializer=value)
        assert w.dtype == np.complex64  # the complex pair of the context's float32
        hd.save_parameters(tmp_path / "p.npz")
        w.d[...] = 0
        hd.load_parameters(tmp_path / "p.npz")
        np.testing.assert_array_equal(w.d, value.astype(np.complex64))
        real = hd.get_parameter_or_create("r", (3,))
        np.savez(tmp_path / "bad.npz", r=value)
        with pytest.raises(ValueError, match="imaginary part would be lost"):
            hd.load_parameters(tmp_path / "bad.npz")
        assert not real.d.any()
    finally:
        hd.clear_parameters()
    x0, c = _cplx(4), _cplx(4)
    x = hd.Variable.from_array(x0, need_grad=True)
    y = F.irfft(F.fft(x * c), n=6)
    hd.save_graph(tmp_path / "g", y, x)
    f = hd.load_graph(tmp_path / "g")
    x1 = _cplx(4)
    np.testing.assert_allclose(f(x1).d, np.fft.irfft(np.fft.fft(x1 * c), n=6), atol=1e-12)
