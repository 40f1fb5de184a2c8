"""Linear algebra beyond the spec table: errors, einsum parsing against numpy, special cases."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.functions.linalg import einsum_plan
from hodiff.grad_functions.linalg import einsum_expand

RNG = np.random.default_rng(0)


def _v(*shape: int, need_grad: bool = False) -> hd.Variable:
    return hd.Variable.from_array(RNG.standard_normal(shape), need_grad=need_grad)


# ---------------------------------------------------------------- argument errors
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: F.affine(np.ones((2, 3)), np.ones((4, 5))),
            r"affine: x of shape \(2, 3\) and w of",
        ),
        (
            lambda: F.affine(np.ones((2, 3)), np.ones((3, 5)), np.ones(4)),
            r"affine: b of shape \(4,\)",
        ),
        (lambda: F.affine(np.ones((2, 3)), np.ones((3, 5)), base_axis=2), "affine: base_axis 2"),
        (lambda: F.affine(np.ones((2, 3)), np.ones(())), "affine: w of shape"),
        (lambda: F.batch_matmul(np.ones((2, 2, 3)), np.ones((2, 4, 2))), "inner sizes 3 and 4"),
        (lambda: F.batch_matmul(np.ones(3), np.ones((3, 2))), "at least 2 dimensions"),
        (lambda: F.batch_matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2))), "cannot be broadcast"),
        (lambda: F.matmul(np.ones(()), np.ones(3)), "matmul: .* at least 1 dimension"),
        (lambda: F.matmul(np.ones((2, 3)), np.ones(2)), "matmul: .* inner sizes 3 and 2"),
        (
            lambda: F.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2))),
            "matmul: .* cannot be broadcast",
        ),
        (lambda: F.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 5))), "einsum: .*index 'j'"),
        (lambda: F.einsum("ij", np.ones((2, 3)), np.ones(3)), "2 were given"),
        (lambda: F.einsum("i"), "at least one operand"),
        (lambda: F.batch_inv(np.ones((2, 2, 3))), "batch_inv: x of shape"),
        (lambda: F.batch_det(np.ones(3)), "batch_det: x of shape"),
        (lambda: F.batch_logdet(np.ones((2, 3, 2))), "batch_logdet: x of shape"),
        (lambda: einsum_expand(np.ones(2), "i", "ii", (2, 3)), "einsum_expand"),
    ],
)
def test_bad_shapes_raise_value_error(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: F.affine(np.ones((2, 3)), np.ones((3, 5)), base_axis=1.0), "affine: base_axis"),
        (lambda: F.batch_matmul(np.ones((2, 2)), np.ones((2, 2)), transpose_a=1), "transpose_a"),
        (lambda: F.einsum(["i"], np.ones(2)), "einsum: subscripts must be a str"),
    ],
)
def test_bad_types_raise_type_error(call, match) -> None:
    with pytest.raises(TypeError, match=match):
        call()


def test_errors_are_raised_in_static_mode_too() -> None:
    with hd.auto_forward(False):
        x, w = hd.Variable((2, 3)), hd.Variable((4, 5))
        with pytest.raises(ValueError, match="affine"):
            F.affine(x, w)
        with pytest.raises(ValueError, match="einsum"):
            F.einsum("ij,jk", x, w)


# ---------------------------------------------------------------- einsum against numpy
VALID = [
    ("ij,kj->ik", [(2, 1), (4, 3)]),
    ("...i,...i->...", [(2, 1, 3), (5, 3)]),
    ("...i->", [(3,)]),
    ("ii", [(3, 3)]),
    ("Ba,a", [(2, 3), (3,)]),
    ("i,i", [(1,), (3,)]),
    ("...", [(2, 3)]),
    ("a...,a...", [(2, 3), (2, 1, 3)]),
    ("i ,i", [(3,), (3,)]),
    ("i,j->", [(2,), (3,)]),
    ("...->...", [()]),
    ("i...i", [(2, 3, 2)]),
    ("ii,i->i", [(1, 1), (3,)]),
    (",i->i", [(), (3,)]),
    ("ab...,...b", [(2, 3, 4, 3), (1, 3)]),
    ("ba", [(2, 3)]),
    ("bA,Ab", [(2, 3), (3, 2)]),
    ("i...,i...->...i", [(2, 3), (2,)]),
    ("iji->j", [(2, 3, 2)]),
    ("ijk,kji->", [(2, 3, 4), (4, 3, 2)]),
]
INVALID = [
    ("...i->", [(2, 3)]),
    ("...i->i", [(2, 3)]),
    ("ii->i", [(1, 3)]),
    ("i->ii", [(3,)]),
    ("ij->k", [(2, 2)]),
    ("ii->", [(2, 3)]),
    ("i", [()]),
    ("ij->i.", [(2, 2)]),
    ("ij,jk", [(2, 3), (4, 5)]),
    ("i,i", [(2,), (3,)]),
    ("ij", [(2, 3), (2, 3)]),
    ("i1", [(2, 2)]),
    ("i->j->k", [(2,)]),
    ("i>", [(2,)]),
    ("i....", [(2,)]),
    ("i,...,...", [(2,), (3,), (2,)]),
]


@pytest.mark.parametrize(("subscripts", "shapes"), VALID)
def test_einsum_matches_numpy(subscripts: str, shapes: list[tuple[int, ...]]) -> None:
    xs = [RNG.standard_normal(s) for s in shapes]
    y = F.einsum(subscripts, *xs)
    ref = np.einsum(subscripts, *xs)
    assert y.shape == np.shape(ref)
    np.testing.assert_allclose(y.d, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("subscripts", "shapes"), INVALID)
def test_einsum_rejects_what_numpy_rejects(subscripts: str, shapes: list[tuple[int, ...]]) -> None:
    xs = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError, match=r"."):
        np.einsum(subscripts, *xs)
    with pytest.raises(ValueError, match="einsum"):
        F.einsum(subscripts, *xs)


@pytest.mark.parametrize(
    ("subscripts", "shapes"),
    [
        ("...i,...i->...", [(2, 1, 3), (2, 3)]),
        ("iji->j", [(2, 3, 2)]),
        ("ii,i->i", [(1, 1), (3,)]),
        ("ab...,...b", [(2, 3, 2, 3), (1, 3)]),
    ],
)
def test_einsum_broadcast_and_diagonal_gradients(subscripts: str, shapes) -> None:
    xs = [RNG.standard_normal(s) for s in shapes]
    hd.gradcheck(lambda *vs: F.sum(F.einsum(subscripts, *vs) ** 3), xs, order=2)


def test_einsum_plan_gives_private_letters_to_broadcast_axes() -> None:
    plan = einsum_plan("ij,ij->ij", ((2, 1), (2, 3)))
    assert plan.terms[1] == "ij"
    assert plan.terms[0][0] == "i"
    assert plan.terms[0][1] not in "ij"
    assert plan.out_shape == (2, 3)


def test_einsum_same_operand_twice() -> None:
    x = _v(3, need_grad=True)
    F.einsum("i,i", x, x).backward()
    np.testing.assert_allclose(x.g, 2 * x.d)


# ---------------------------------------------------------------- products
def test_affine_plain_backward_is_the_matrix_formulas() -> None:
    x, w, b = _v(2, 2, 3, need_grad=True), _v(6, 2, 2, need_grad=True), _v(2, 2, need_grad=True)
    y = F.affine(x, w, b)
    assert y.shape == (2, 2, 2)
    gy = RNG.standard_normal(y.shape)
    y.backward(gy)
    x2, w2, gy2 = x.d.reshape(2, 6), w.d.reshape(6, 4), gy.reshape(2, 4)
    np.testing.assert_allclose(x.g, (gy2 @ w2.T).reshape(x.shape))
    np.testing.assert_allclose(w.g, (x2.T @ gy2).reshape(w.shape))
    np.testing.assert_allclose(b.g, gy.sum(0))


def test_affine_keeps_float32() -> None:
    x = np.ones((2, 3), np.float32)
    w = np.ones((3, 4), np.float32)
    assert F.affine(x, w, np.ones(4, np.float32)).dtype == np.float32
    assert F.affine(x, w, np.ones(4)).dtype == np.float64  # numpy's promotion


def test_int_operands_give_float64() -> None:
    a = np.arange(6).reshape(2, 3)
    y = F.matmul(a, a.T)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.d, a @ a.T)
    assert F.einsum("ij->", a).dtype == np.float64
    assert F.affine(a, a.T).dtype == np.float64


def test_matmul_operator_with_arrays_on_either_side() -> None:
    a = _v(2, 3, need_grad=True)
    m = RNG.standard_normal((3, 4))
    np.testing.assert_allclose((a @ m).d, a.d @ m)
    b = RNG.standard_normal((4, 2))
    y = b @ a  # ndarray @ Variable: numpy defers to Variable.__rmatmul__
    assert isinstance(y, hd.Variable)
    np.testing.assert_allclose(y.d, b @ a.d)
    F.sum(y).backward()
    np.testing.assert_allclose(a.g, b.sum(0)[:, None] * np.ones((1, 3)))


def test_matmul_second_order_hessian_of_bilinear_form() -> None:
    # f(x) = x^T A x has Hessian A + A^T
    a = RNG.standard_normal((3, 3))
    h = hd.hessian(lambda x: F.matmul(x, F.matmul(a, x)), RNG.standard_normal(3))
    np.testing.assert_allclose(h, a + a.T, atol=1e-12)


# ---------------------------------------------------------------- inverse and determinants
def _spd(n: int = 3) -> np.ndarray:
    return 3 * np.eye(n) + 0.3 * RNG.standard_normal((2, n, n))


def test_logdet_is_log_abs_det_like_nnabla() -> None:
    x = _spd()
    x[0] = -x[0]  # a negative determinant (n = 3)
    np.testing.assert_allclose(F.batch_logdet(x).d, np.log(np.abs(np.linalg.det(x))))


def test_logdet_gradient_is_inverse_transpose_and_det_agrees() -> None:
    x = hd.Variable.from_array(_spd(), need_grad=True)
    F.sum(F.batch_logdet(x)).backward()
    np.testing.assert_allclose(x.g, np.linalg.inv(x.d).transpose(0, 2, 1), rtol=1e-12)
    (g_det,) = hd.grad(F.sum(F.batch_det(x)), x)
    det = np.linalg.det(x.d)
    np.testing.assert_allclose(g_det.d, det[:, None, None] * x.g, rtol=1e-12)


def test_inverse_of_inverse_derivatives_to_third_order() -> None:
    hd.gradcheck(lambda x: F.sum(F.batch_inv(F.batch_inv(x)) ** 2), [_spd()], order=3)


def test_batch_ops_accept_a_single_matrix() -> None:
    x = _spd()[0]
    assert F.batch_inv(x).shape == (3, 3)
    assert F.batch_det(x).shape == ()
    np.testing.assert_allclose(F.batch_det(x).d, np.linalg.det(x))


def test_batch_matmul_reads_broadcast_operands_and_outer_products() -> None:
    # a zero-stride gradient (what mean's backward makes) and inner size 1 (an outer
    # product) take their own kernels: same numbers as numpy's matmul on plain copies
    h = RNG.standard_normal((5, 4)).astype(np.float32)
    gy = np.broadcast_to(np.float32(0.25), (5, 1))
    w = RNG.standard_normal((4, 1)).astype(np.float32)
    gw = F.batch_matmul(h, gy, transpose_a=True)
    np.testing.assert_allclose(gw.d, h.T @ np.full((5, 1), 0.25, np.float32), rtol=1e-6)
    gx = F.batch_matmul(gy, w, transpose_b=True)
    assert gx.dtype == np.float32
    np.testing.assert_array_equal(gx.d, np.full((5, 1), 0.25, np.float32) * w.T)
    a, b = np.arange(3).reshape(3, 1), np.arange(4).reshape(1, 4)  # ints: float64 out
    y = F.batch_matmul(a, b)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.d, np.outer(np.arange(3), np.arange(4)))
    rev = RNG.standard_normal((4, 6))[:, ::-2]  # negative strides: copied, then BLAS
    np.testing.assert_allclose(F.batch_matmul(h.astype(np.float64), rev).d, h @ rev)


def test_outer_products_by_einsum_equal_the_broadcast_multiply_bitwise() -> None:
    from hodiff.functions.linalg import _outer

    class Sub(np.ndarray):  # not a plain ndarray: the multiply path (other array modules)
        pass

    cases = [
        (RNG.standard_normal((7, 1)), RNG.standard_normal((1, 5))),  # one matrix
        (RNG.standard_normal((3, 6, 1)), RNG.standard_normal((3, 1, 4))),  # a batch
        (RNG.standard_normal((2, 1, 6, 1)), RNG.standard_normal((5, 1, 4))),  # broadcast
        (RNG.standard_normal((4, 1)).astype(np.float32), RNG.standard_normal((1, 3))),  # mixed
        (RNG.standard_normal((1, 6)).T, RNG.standard_normal((5, 1)).T),  # transposed views
    ]
    for a, b in cases:
        want = a * b
        got = _outer(a, b)
        assert got.dtype == want.dtype
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        sub = _outer(a.view(Sub), b.view(Sub))
        assert isinstance(sub, Sub)
        np.testing.assert_array_equal(sub, want)


def test_per_example_outer_products_inside_vmap_match_a_loop() -> None:
    # hd.vmap of batch_matmul with inner size 1 (per-example weight gradients), both operands
    # batched or one shared, against numpy per example
    xs, gs = RNG.standard_normal((6, 4, 1)), RNG.standard_normal((6, 1, 3))
    both = hd.vmap(F.batch_matmul)(xs, gs).d
    np.testing.assert_array_equal(both, np.stack([x @ g for x, g in zip(xs, gs, strict=True)]))
    g0 = gs[0]
    shared = hd.vmap(lambda x: F.batch_matmul(x, g0))(xs).d
    np.testing.assert_array_equal(shared, np.stack([x @ g0 for x in xs]))
    ta = hd.vmap(lambda x, g: F.batch_matmul(x, g, transpose_a=True))(np.swapaxes(xs, 1, 2), gs).d
    np.testing.assert_array_equal(ta, both)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape",
    [(3, 5), (80, 1), (80, 6), (300, 7)],  # few rows or one column: numpy's sum; else a GEMV
)
def test_affine_plain_backward_kernels_match_the_recorded_rule(dtype: type, shape) -> None:
    # the plain pass runs the products and the bias sum on the arrays, without nodes: same
    # values as the recorded rule and as float64 formulas, dtype kept, accumulation included
    n, m = shape
    rng = np.random.default_rng(1)
    x0, w0, b0 = (rng.standard_normal(s).astype(dtype) for s in ((n, 4), (4, m), (m,)))
    gy = rng.standard_normal((n, m)).astype(dtype)
    x, w, b = (hd.Variable.from_array(a, need_grad=True) for a in (x0, w0, b0))
    y = F.affine(x, w, b)
    y.backward(gy)
    y = F.affine(x, w, b)  # a second pass adds into .g
    y.backward(gy)
    xr, wr, br = (hd.Variable.from_array(a, need_grad=True) for a in (x0, w0, b0))
    rec = hd.grad([F.affine(xr, wr, br)], [xr, wr, br], grad_outputs=[gy])
    g64 = gy.astype(np.float64)
    refs = (g64 @ w0.T.astype(np.float64), x0.T.astype(np.float64) @ g64, g64.sum(0))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for plain, recorded, ref in zip((x.g, w.g, b.g), rec, refs, strict=True):
        assert plain.dtype == dtype
        assert recorded.dtype == dtype
        np.testing.assert_allclose(plain, 2 * ref, rtol=tol, atol=tol * np.abs(ref).max())
        np.testing.assert_allclose(recorded.d, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_bias_sum_of_a_broadcast_or_transposed_gradient() -> None:
    # a gradient that is no C-contiguous array (broadcast by mean's backward, or a transposed
    # view) takes numpy's sum: the GEMV is only for contiguous rows
    from hodiff.functions.linalg import _sum_rows

    g = RNG.standard_normal((6, 100))
    for a in (np.broadcast_to(g[:, 0], (100, 6)), g.T, g[:, ::2].T):
        np.testing.assert_allclose(_sum_rows(a), np.asarray(a).sum(0), rtol=1e-13)
    t = RNG.standard_normal((100, 6)).astype(np.float32)
    assert _sum_rows(t).dtype == np.float32
