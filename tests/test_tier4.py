"""Tier-4 functions: behaviour the generic spec test cannot express.

Expected values come from independent computations: loops, numpy, closed forms,
finite differences, NNabla's published numpy reference.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.functions import special


def _v(a: np.ndarray, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


# ---------------------------------------------------------------- zero / undefined derivatives
@pytest.mark.parametrize("fn", [F.floor, F.ceil, F.round, F.sign])
def test_piecewise_constant_functions_cut_the_graph(fn) -> None:
    x = _v([0.3, 1.7])
    y = fn(x)
    assert not y.need_grad
    with pytest.raises(ValueError, match=r"outputs do not depend on inputs\[0\]"):
        hd.grad(F.sum(y), [x])


def test_nan_to_num_gradient_is_zero_at_replaced_entries() -> None:
    x = _v([np.nan, 2.0, np.inf, -np.inf, -1.0])
    y = F.nan_to_num(x, nan=5.0, posinf=7.0, neginf=-7.0)
    np.testing.assert_array_equal(y.d, [5.0, 2.0, 7.0, -7.0, -1.0])
    F.sum(y * np.arange(1.0, 6.0)).backward()
    np.testing.assert_array_equal(x.g, [0.0, 2.0, 0.0, 0.0, 5.0])


def test_mod_gradients_are_one_and_minus_floor_of_the_quotient() -> None:
    x0, x1 = _v([5.3, -5.3, 5.3]), _v([2.0, 2.0, -2.0])
    g0, g1 = hd.grad(F.sum(F.mod(x0, x1)), [x0, x1])
    np.testing.assert_array_equal(g0.d, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(g1.d, -np.floor(np.array([5.3, -5.3, 5.3]) / [2, 2, -2]))
    g0, g1 = hd.grad(F.sum(F.fmod(x0, x1)), [x0, x1])
    np.testing.assert_array_equal(g1.d, -np.trunc(np.array([5.3, -5.3, 5.3]) / [2, 2, -2]))


def test_std_of_one_element_has_zero_derivatives_not_nan() -> None:
    x = _v([3.0])
    y = F.std(x)
    assert y.d == 0.0
    (g,) = hd.grad(y, [x])
    (h,) = hd.grad(F.sum(g), [x])
    np.testing.assert_array_equal(g.d, [0.0])
    np.testing.assert_array_equal(h.d, [0.0])


def test_var_with_no_degrees_of_freedom_raises() -> None:
    with pytest.raises(ValueError, match=r"var: ddof=1 leaves 0 degrees"):
        F.var(np.ones((2, 1)), axis=1, ddof=1)


def test_sort_at_a_tie_sends_the_gradient_through_the_stable_permutation() -> None:
    x = _v([1.0, 0.0, 1.0])
    y = F.sort(x)  # permutation [1, 0, 2]
    F.sum(y * np.array([10.0, 20.0, 30.0])).backward()
    np.testing.assert_array_equal(x.g, [20.0, 10.0, 30.0])


def test_top_k_with_index_reports_flat_positions() -> None:
    x = np.array([[[1.0, 9.0], [5.0, -7.0]]])
    y, idx = F.top_k_data(x, 2, abs=True, with_index=True)
    np.testing.assert_array_equal(idx.d, [[1, 3]])
    np.testing.assert_array_equal(y.d, [[9.0, -7.0]])


# ---------------------------------------------------------------- special functions
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_numpy_fallback_matches_scipy(n: int) -> None:
    sp = pytest.importorskip("scipy.special")
    x = np.array([0.1, 0.7, 1.0, 3.3, 12.0, 40.0, -0.5, -2.3])
    np.testing.assert_allclose(special.polygamma_numpy(n, x), sp.polygamma(n, x), rtol=1e-12)


def test_polygamma_closes_the_gamma_family() -> None:
    """The first three derivatives of gammaln are polygamma(0, 1, 2): one primitive."""
    x = _v([1.5, 2.5])
    (g1,) = hd.grad(F.sum(F.gammaln(x)), [x])
    (g2,) = hd.grad(F.sum(g1), [x])
    (g3,) = hd.grad(F.sum(g2), [x])
    for n, g in enumerate((g1, g2, g3)):
        np.testing.assert_allclose(g.d, special.polygamma_numpy(n, x.d), rtol=1e-12)
    # psi(1) = -gamma, psi'(1) = pi^2 / 6
    np.testing.assert_allclose(F.digamma(np.array([1.0])).d, [-0.5772156649015329])
    np.testing.assert_allclose(F.polygamma(1, np.array([1.0])).d, [np.pi**2 / 6])


def test_polygamma_rejects_a_non_integer_order() -> None:
    with pytest.raises(ValueError, match="polygamma: n must be an int"):
        F.polygamma(1.5, np.ones(2))


def test_erfinv_fallback_inverts_erf() -> None:
    import math

    x = np.array([-0.999, -0.5, 0.0, 0.3, 0.9999])
    y = special.erfinv_numpy(x)
    np.testing.assert_allclose([math.erf(v) for v in y], x, rtol=1e-13, atol=1e-15)


def test_sinc_derivatives_at_zero_are_the_taylor_coefficients() -> None:
    x = _v([0.0])
    (g1,) = hd.grad(F.sinc(x), [x])
    (g2,) = hd.grad(F.sum(g1), [x])
    np.testing.assert_allclose(g1.d, [0.0], atol=1e-15)
    np.testing.assert_allclose(g2.d, [-1 / 3], rtol=1e-12)  # sin(x)/x = 1 - x^2/6 + ...


# ---------------------------------------------------------------- linear algebra
def test_cholesky_gradient_on_a_symmetrised_input_is_the_symmetric_gradient() -> None:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 3))
    a = m @ m.T + 3 * np.eye(3)
    w = rng.standard_normal((3, 3))
    x = _v(a)
    F.sum(F.cholesky((x + F.transpose(x, (1, 0))) * 0.5) * w).backward()

    # independent: central differences of the symmetric function
    def f(b: np.ndarray) -> float:
        return float(np.sum(np.linalg.cholesky((b + b.T) / 2) * w))

    fd = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            e = np.zeros((3, 3))
            e[i, j] = 1e-6
            fd[i, j] = (f(a + e) - f(a - e)) / 2e-6
    np.testing.assert_allclose(x.g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(x.g, x.g.T, atol=1e-12)


def test_svd_full_matrices_of_a_non_square_matrix_has_no_gradient() -> None:
    x = _v(np.arange(6.0).reshape(3, 2) + np.eye(3, 2))
    u, _s, _vh = F.svd(x)
    assert u.shape == (3, 3)
    with pytest.raises(NotImplementedError, match="svd: no gradient for full_matrices=True"):
        F.sum(u).backward()


def test_solve_shape_errors_name_the_function_and_shapes() -> None:
    with pytest.raises(ValueError, match=r"solve: b of shape \(2, 1\)"):
        F.solve(np.eye(3), np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"solve: a of shape \(2, 3\)"):
        F.solve(np.ones((2, 3)), np.ones((2, 1)))


def test_pinv_of_full_rank_matches_the_normal_equations() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 2))
    np.testing.assert_allclose(F.pinv(a).d, np.linalg.solve(a.T @ a, a.T), rtol=1e-10)


def test_tensordot_and_trace_against_numpy() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
    np.testing.assert_allclose(
        F.tensordot(a, b, ([1, 2], [1, 0])).d, np.tensordot(a, b, ([1, 2], [1, 0])), rtol=1e-12
    )
    np.testing.assert_allclose(F.trace(a[:, :2, :2]).d, np.trace(a[:, :2, :2], axis1=1, axis2=2))


# ---------------------------------------------------------------- layers
def _nnabla_spectral_norm(w: np.ndarray, u: np.ndarray, itr: int, eps: float = 1e-12):
    """NNabla's numpy reference (test_parametric_functions.py), returning (w_sn, u)."""
    for _ in range(itr):
        v = w.T @ u
        v = v / np.sqrt(np.sum(v**2) + eps)
        u = w @ v
        u = u / np.sqrt(np.sum(u**2) + eps)
    return w / (u @ w @ v), u, v


def test_spectral_norm_updates_u_in_place_unless_test() -> None:
    rng = np.random.default_rng(3)
    w, u0 = rng.standard_normal((3, 4)), rng.standard_normal(3)
    ref, u_ref, _ = _nnabla_spectral_norm(w, u0.copy(), itr=2)
    u = hd.Variable.from_array(u0.copy())
    y = F.spectral_norm(w, u, itr=2)
    np.testing.assert_allclose(y.d, ref, rtol=1e-12)
    np.testing.assert_allclose(u.d, u_ref, rtol=1e-12)
    u2 = hd.Variable.from_array(u0.copy())
    F.spectral_norm(w, u2, itr=2, test=True)
    np.testing.assert_array_equal(u2.d, u0)


def test_spectral_norm_gradient_equals_nnabla_once_converged() -> None:
    """Converged, the constant-u formula gW = (g - sum(g W_sn) u v^T) / sigma agrees."""
    rng = np.random.default_rng(4)
    w = np.diag([3.0, 1.0, 0.5]) @ rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4))
    x = _v(w)
    F.sum(F.spectral_norm(x, rng.standard_normal(3), itr=200, test=True) * g).backward()
    w_sn, u, v = _nnabla_spectral_norm(w, rng.standard_normal(3), itr=200)
    sigma = u @ w @ v
    expected = (g - np.sum(g * w_sn) * np.outer(u, v)) / sigma
    np.testing.assert_allclose(x.g, expected, rtol=1e-8, atol=1e-10)


def _warp_loops(  # noqa: C901 (a loop reference implementation, written plainly)
    x: np.ndarray,
    grid: np.ndarray,
    mode: str,
    padding_mode: str,
    align: bool,
) -> np.ndarray:
    """NNabla's C++ reference, point by point (3-D, channel first)."""

    def unnorm(g: float, n: int) -> float:
        return (g + 1) * (n - 1) / 2 if align else ((g + 1) * n - 1) / 2

    def reflect(s: float, lo: float, hi: float) -> float:
        span = hi - lo
        if s < lo:
            d = lo - s
            n, r = int(d / span), d - int(d / span) * span
            return lo + r if n % 2 == 0 else hi - r
        if s > hi:
            d = s - hi
            n, r = int(d / span), d - int(d / span) * span
            return hi - r if n % 2 == 0 else lo + r
        return s

    def source(g: float, n: int) -> float:
        s = unnorm(g, n)
        if padding_mode == "repeat":
            return min(max(s, 0.0), n - 1.0)
        if padding_mode == "reflect":
            if align:
                return reflect(s, 0.0, n - 1.0)
            return min(max(reflect(2 * s, -1.0, 2.0 * n - 1) / 2, 0.0), n - 1.0)
        return s

    b, c, dd, h, w = x.shape
    out = np.zeros((b, c, *grid.shape[1:4]))
    for n in range(b):
        for i, j, k in np.ndindex(*grid.shape[1:4]):
            gx, gy, gz = grid[n, i, j, k]
            sx, sy, sz = source(gx, w), source(gy, h), source(gz, dd)
            if mode == "nearest":  # C's round: halves away from zero

                def rnd(v: float) -> int:
                    return int(np.sign(v) * np.floor(abs(v) + 0.5))

                pts = [((rnd(sz), rnd(sy), rnd(sx)), 1.0)]
            else:
                z0, y0, x0 = int(np.floor(sz)), int(np.floor(sy)), int(np.floor(sx))
                pts = []
                for zz, wz in ((z0, 1 - (sz - z0)), (z0 + 1, sz - z0)):
                    for yy, wy in ((y0, 1 - (sy - y0)), (y0 + 1, sy - y0)):
                        for xx, wx in ((x0, 1 - (sx - x0)), (x0 + 1, sx - x0)):
                            pts.append(((zz, yy, xx), wz * wy * wx))
            for (zz, yy, xx), wt in pts:
                if 0 <= zz < dd and 0 <= yy < h and 0 <= xx < w:
                    out[n, :, i, j, k] += wt * x[n, :, zz, yy, xx]
    return out


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zero", "repeat", "reflect"])
@pytest.mark.parametrize("align", [False, True])
def test_warp_by_grid_3d_matches_point_by_point_loops(
    mode: str, padding_mode: str, align: bool
) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 2, 2, 3, 4))
    grid = rng.uniform(-1.7, 1.7, size=(2, 2, 2, 3, 3))
    y = F.warp_by_grid(x, grid, mode, padding_mode, align)
    np.testing.assert_allclose(y.d, _warp_loops(x, grid, mode, padding_mode, align), atol=1e-12)
    yl = F.warp_by_grid(np.moveaxis(x, 1, -1), grid, mode, padding_mode, align, channel_last=True)
    np.testing.assert_allclose(yl.d, np.moveaxis(y.d, 1, -1), atol=1e-12)


def test_r1_penalty_through_warp_is_differentiable_twice_in_the_grid() -> None:
    """d/dgrid of |d warp / d x|^2-like penalty: the grid is differentiated twice."""
    rng = np.random.default_rng(6)
    x = _v(rng.standard_normal((1, 1, 3, 4)))
    theta = np.array([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.02]]])

    def penalty(th: hd.Variable) -> hd.Variable:
        grid = F.affine_grid(th, (3, 4))
        y = F.warp_by_grid(x, grid)
        (gx,) = hd.grad(F.sum(F.tanh(y)), [x])
        return F.sum(gx * gx)

    hd.gradcheck(penalty, [theta], order=2, atol=1e-6, rtol=1e-5)


def test_attention_boolean_mask_equals_minus_infinity_float_mask() -> None:
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((3, 2)), rng.standard_normal((4, 2)), rng.standard_normal((4, 3))
    mask = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    a = F.scaled_dot_product_attention(q, k, v, mask).d
    b = F.scaled_dot_product_attention(q, k, v, np.where(mask, 0.0, -1e30)).d
    np.testing.assert_allclose(a, b, rtol=1e-12)


# ---------------------------------------------------------------- Variable methods
def test_numpy_style_variable_methods_are_the_functions() -> None:
    a = np.arange(1.0, 7.0).reshape(2, 3)
    x = _v(a)
    np.testing.assert_array_equal(x.T.d, a.T)
    np.testing.assert_array_equal(x.reshape(3, 2).d, a.reshape(3, 2))
    np.testing.assert_array_equal(x.reshape((6,)).d, a.reshape(6))
    np.testing.assert_array_equal(x.transpose(1, 0).d, a.T)
    np.testing.assert_array_equal(x.transpose().d, a.T)
    np.testing.assert_array_equal(x.flatten().d, a.flatten())
    np.testing.assert_array_equal(x.reshape(1, 6).squeeze().d, a.reshape(6))
    np.testing.assert_array_equal(x.sum(axis=0).d, a.sum(0))
    np.testing.assert_array_equal(x.mean(1, keepdims=True).d, a.mean(1, keepdims=True))
    np.testing.assert_array_equal(x.max().d, a.max())
    np.testing.assert_array_equal(x.min(axis=1).d, a.min(1))
    np.testing.assert_array_equal(x.prod(axis=1).d, a.prod(1))
    assert x.astype(np.float32).dtype == np.float32
    assert x.astype(np.int32).dtype == np.int32
    (g,) = hd.grad(x.T.reshape(6).prod(), [x])
    np.testing.assert_allclose(g.d, a.prod() / a)


# ---------------------------------------------------------------- against PyTorch (optional)
def test_r1_through_the_warp_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 2, 5, 6))
    theta = np.array([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.02]], [[1.05, -0.2, 0.1], [0.1, 0.95, 0.0]]])
    tx, tth = torch.tensor(x, requires_grad=True), torch.tensor(theta, requires_grad=True)
    grid = torch.nn.functional.affine_grid(tth, (2, 2, 5, 6), align_corners=False)
    y = torch.nn.functional.grid_sample(tx, grid, align_corners=False, padding_mode="zeros")
    (gx,) = torch.autograd.grad(torch.tanh(y).sum(), tx, create_graph=True)
    try:
        (expected,) = torch.autograd.grad((gx * gx).sum(), tth)
    except RuntimeError as e:  # older torch (2.11) has no double backward of grid_sample
        pytest.skip(f"this torch cannot give the reference: {e}")
    xv, th = _v(x), _v(theta)
    yv = F.warp_by_grid(xv, F.affine_grid(th, (5, 6)))
    np.testing.assert_allclose(yv.d, y.detach().numpy(), atol=1e-12)
    (g,) = hd.grad(F.sum(F.tanh(yv)), [xv])
    (h,) = hd.grad(F.sum(g * g), [th])
    np.testing.assert_allclose(h.d, expected.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["solve", "cholesky", "eigh", "svd", "pinv"])
def test_hessian_vector_products_match_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    m = rng.standard_normal((4, 4))
    a, v, b = m @ m.T + 4 * np.eye(4), rng.standard_normal((4, 4)), rng.standard_normal((4, 2))
    ours = {
        "solve": lambda z: F.sum(F.solve(z, b) ** 3),
        "cholesky": lambda z: F.sum(F.cholesky((z + z.T) * 0.5) ** 3),
        "eigh": lambda z: F.sum(F.eigh((z + z.T) * 0.5)[0] ** 3),
        "svd": lambda z: F.sum(F.svd(z, compute_uv=False) ** 3),
        "pinv": lambda z: F.sum(F.pinv(z[:, :3]) ** 3),
    }[name]
    theirs = {
        "solve": lambda z: (torch.linalg.solve(z, torch.tensor(b)) ** 3).sum(),
        "cholesky": lambda z: (torch.linalg.cholesky((z + z.T) * 0.5) ** 3).sum(),
        "eigh": lambda z: (torch.linalg.eigh((z + z.T) * 0.5)[0] ** 3).sum(),
        "svd": lambda z: (torch.linalg.svdvals(z) ** 3).sum(),
        "pinv": lambda z: (torch.linalg.pinv(z[:, :3]) ** 3).sum(),
    }[name]
    x = _v(a)
    (g,) = hd.grad(ours(x), [x])
    (h,) = hd.grad(F.sum(g * v), [x])
    t = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad(theirs(t), t, create_graph=True)
    (ht,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), t)
    np.testing.assert_allclose(g.d, gt.detach().numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(h.d, ht.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_repeated_eigen_and_singular_values_give_exact_gradients_of_the_values(dtype) -> None:
    """d sum(w^3) / dA = 3 V diag(w^2) V^T = 12 I at A = 2 I (a triple eigenvalue), no NaN."""
    x = hd.Variable.from_array(np.eye(3, dtype=dtype) * 2, need_grad=True)
    F.sum(F.eigh(x)[0] ** 3).backward()
    assert x.g.dtype == dtype
    np.testing.assert_allclose(x.g, 12 * np.eye(3), rtol=1e-6)
    y = hd.Variable.from_array(np.eye(3, dtype=dtype) * 2, need_grad=True)
    F.sum(F.svd(y, compute_uv=True)[1] ** 3).backward()
    np.testing.assert_allclose(y.g, 12 * np.eye(3), rtol=1e-6)
