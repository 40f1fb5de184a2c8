"""Numbers that must not be silently wrong (issue 21).

A solver given one Variable twice, random functions inside ``hd.vmap``, the dtype of
``hd.grad``'s results, and ``F.pinv``'s higher derivatives at full rank. Every expected
value is computed independently: the same solver given each Variable once, a loop over
the examples, ``.backward()``, ``F.batch_inv`` and finite differences.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S

SOLVERS = [
    lambda: S.Sgd(lr=0.1),
    lambda: S.Momentum(lr=0.1),
    lambda: S.Nesterov(lr=0.1),
    lambda: S.Adagrad(lr=0.1),
    lambda: S.RMSprop(lr=0.1),
    lambda: S.Adam(lr=0.1),
    lambda: S.AdamW(lr=0.1),
]


def _run(make, params_of, steps: int = 3) -> tuple[np.ndarray, np.ndarray, list[float]]:
    rng = np.random.default_rng(0)
    w = hd.Variable.from_array(rng.standard_normal(4), need_grad=True)
    b = hd.Variable.from_array(rng.standard_normal(2), need_grad=True)
    solver = make()
    solver.set_parameters(params_of(w, b))
    norms = []
    for _ in range(steps):
        solver.zero_grad()
        (F.sum(F.sin(w) ** 2) + F.sum(b * b * b)).backward()
        solver.weight_decay(0.1)
        norms.append(solver.clip_grad_by_norm(1.0))
        solver.update()
    return w.d, b.d, norms


@pytest.mark.parametrize("make", SOLVERS)
@pytest.mark.parametrize(
    "params_of",
    [
        lambda w, b: {"enc/W": w, "b": b, "dec/W": w},  # a layer shared under two names
        lambda w, b: [w, b, w],
        lambda w, b: [w, w, b, b],
    ],
)
def test_a_variable_given_twice_is_updated_once(make, params_of) -> None:
    ref = _run(make, lambda w, b: {"w": w, "b": b})
    got = _run(make, params_of)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    assert got[2] == ref[2]  # clip_grad_by_norm counted each gradient once


def test_the_second_name_is_an_alias(tmp_path: Path) -> None:
    w = hd.Variable.from_array(np.ones(3), need_grad=True)
    solver = S.Adam(lr=0.1)
    solver.set_parameters({"enc/W": w, "dec/W": w})
    assert list(solver.get_parameters()) == ["enc/W", "dec/W"]
    w.g = np.ones(3)
    solver.update()
    assert sorted(solver._state) == ["enc/W"]  # one state, under the first name
    solver.save_states(tmp_path / "s.npz")
    with np.load(tmp_path / "s.npz") as z:
        assert sorted(z.files) == ["::lr", "enc/W::m", "enc/W::t", "enc/W::v"]
    other = S.Adam(lr=0.1)
    other.set_parameters({"enc/W": w, "dec/W": w})
    other.load_states(tmp_path / "s.npz")
    assert other._state["enc/W"]["t"] == 1


def test_adding_an_alias_keeps_the_state() -> None:
    w = hd.Variable.from_array(np.ones(3), need_grad=True)
    solver = S.Momentum(lr=0.1)
    solver.set_parameters({"a": w})
    w.g = np.ones(3)
    solver.update()
    solver.set_parameters({"b": w}, reset=False)
    solver.update()  # one step of w, with the momentum of the first
    ref = hd.Variable.from_array(np.ones(3), need_grad=True)
    s2 = S.Momentum(lr=0.1)
    s2.set_parameters({"a": ref})
    ref.g = np.ones(3)
    s2.update()
    s2.update()
    np.testing.assert_array_equal(w.d, ref.d)


# ---------------------------------------------------------------- hd.grad's dtype
def _f32_through_f64() -> tuple[hd.Variable, hd.Variable]:
    x = hd.Variable.from_array(np.array([0.5, -1.0, 2.0], dtype=np.float32), need_grad=True)
    c = hd.Variable.from_array(np.array([3.0, 4.0, 0.25]))  # a float64 constant
    return x, F.sum(F.sin(x * c) * c)


@pytest.mark.parametrize("create_graph", [True, False])
def test_grad_of_a_float32_leaf_through_float64_is_float32(create_graph: bool) -> None:
    x, y = _f32_through_f64()
    assert y.dtype == np.float64
    (g,) = hd.grad(y, x, create_graph=create_graph)
    y.backward()
    assert x.g.dtype == np.float32
    assert g.dtype == np.float32
    assert g.d.dtype == np.float32
    np.testing.assert_array_equal(g.d, x.g)
    c = np.array([3.0, 4.0, 0.25])
    np.testing.assert_allclose(g.d, np.cos(x.d * c) * c * c, rtol=1e-6)


def test_second_order_and_static_graphs_keep_the_leaf_dtype() -> None:
    x, y = _f32_through_f64()
    (g,) = hd.grad(y, x)
    (h,) = hd.grad(F.sum(g), x)
    assert g.dtype == h.dtype == h.d.dtype == np.float32
    c = np.array([3.0, 4.0, 0.25])
    np.testing.assert_allclose(h.d, -np.sin(x.d * c) * c**3, rtol=1e-5)
    with hd.auto_forward(False):
        xs = hd.Variable((3,), need_grad=True, dtype=np.float32)
        ys = F.sum(F.sin(xs * c) * c)
        (gs,) = hd.grad(ys, xs)
    assert gs.dtype == np.float32
    xs.d = x.d
    gs.forward()
    assert gs.d.dtype == np.float32
    np.testing.assert_allclose(gs.d, g.d, rtol=1e-6)


@pytest.mark.parametrize("create_graph", [True, False])
def test_per_example_gradients_in_vmap_keep_the_float32_dtype(create_graph: bool) -> None:
    c = hd.Variable.from_array(np.array([2.0, 3.0]))

    def per_example(x):
        return hd.grad(F.sum(F.sin(x) * c), x, create_graph=create_graph)[0]

    x0 = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    g = hd.vmap(per_example)(x0)
    assert g.dtype == g.d.dtype == np.float32
    np.testing.assert_allclose(g.d, np.cos(x0) * np.array([2.0, 3.0]), rtol=1e-6)


def test_jacobian_and_vjp_of_a_float32_input_are_float32() -> None:
    c = np.array([3.0, 4.0])
    x0 = np.array([0.5, -1.0], dtype=np.float32)
    jac = hd.jacobian(lambda x: F.sin(x * c), x0)
    _, vj = hd.vjp(lambda x: F.sin(x * c), x0, np.ones(2))
    assert jac.dtype == np.float32
    assert vj.dtype == np.float32
    np.testing.assert_allclose(np.diag(jac), np.cos(x0 * c) * c, rtol=1e-6)


# ---------------------------------------------------------------- F.pinv at full rank
def _conditioned(shape: tuple[int, ...], smallest: float, seed: int) -> np.ndarray:
    """Matrices with singular values from 1 down to ``smallest``."""
    rng = np.random.default_rng(seed)
    *lead, m, n = shape
    k = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal((*lead, m, m)))
    v, _ = np.linalg.qr(rng.standard_normal((*lead, n, n)))
    s = np.zeros((*lead, m, n))
    idx = np.arange(k)
    s[..., idx, idx] = np.geomspace(1.0, smallest, k)
    return u @ s @ np.swapaxes(v, -1, -2)


def _grad_of_grad(inverse, x0: np.ndarray) -> np.ndarray:
    """d/dX of ||d/dX sum(inverse(X)^2)||^2 (second derivatives of ``inverse``)."""
    x = hd.Variable.from_array(x0, need_grad=True)
    (g,) = hd.grad(F.sum(inverse(x) ** 2), x)
    (h,) = hd.grad(F.sum(g * g), x)
    return h.d


def _normal_equations(a):
    """pinv of a full-rank matrix through batch_inv: (A^T A)^-1 A^T or A^T (A A^T)^-1."""
    m, n = a.shape[-2:]
    if m >= n:
        return F.batch_matmul(F.batch_inv(F.batch_matmul(a, a, transpose_a=True)), a, False, True)
    return F.batch_matmul(a, F.batch_inv(F.batch_matmul(a, a, transpose_b=True)), True, False)


def test_pinv_second_derivative_of_a_full_rank_gram_matrix_keeps_its_digits() -> None:
    # the case: pinv(X^T X), X of (2, 5, 5); here cond(X^T X) = 1e6
    x0 = _conditioned((2, 5, 5), 1e-3, seed=3)

    def gram(x):
        return F.batch_matmul(x, x, transpose_a=True)

    got = _grad_of_grad(lambda x: F.pinv(gram(x)), x0)
    ref = _grad_of_grad(lambda x: F.batch_inv(gram(x)), x0)
    # rounding of P itself is eps * cond ~ 1e-10; the projector terms gave ~1e-6
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())


@pytest.mark.parametrize("shape", [(2, 4, 4), (6, 3), (3, 6), (2, 5, 2)])
def test_pinv_higher_derivatives_at_full_rank_match_the_normal_equations(shape) -> None:
    # tall, wide and square: the one projector term kept (or none) is the right one
    x0 = _conditioned(shape, 1e-2, seed=4)
    got = _grad_of_grad(F.pinv, x0)
    ref = _grad_of_grad(_normal_equations, x0)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def test_pinv_keeps_the_projector_terms_below_full_rank() -> None:
    # A = B C of rank 2 in (4, 3): the rank is constant as B and C move, and the full
    # constant-rank rule is right to second order (finite differences)
    rng = np.random.default_rng(5)
    b0, c0 = rng.standard_normal((4, 2)), rng.standard_normal((2, 3))
    hd.gradcheck(lambda b, c: F.sum(F.pinv(b @ c) ** 2), (b0, c0), order=2)
    hd.gradcheck(lambda b, c: F.sum(F.pinv((b @ c).T) ** 2), (b0, c0), order=2)


# ---------------------------------------------------------------- random functions in hd.vmap
RANDOM = [
    lambda shape: F.rand(-1.0, 2.0, shape=shape),
    lambda shape: F.randn(0.5, 2.0, shape=shape),
    lambda shape: F.randint(0, 2**30, shape=shape),
    lambda shape: F.rand(shape=shape, seed=3),
]


@pytest.mark.parametrize("draw", RANDOM)
def test_random_functions_draw_per_example_inside_vmap(draw) -> None:
    y = hd.vmap(lambda x: x + draw((3,)))(np.zeros((6, 3)))
    assert y.shape == (6, 3)
    assert len(np.unique(y.d)) == 18  # as a loop over the examples: no two rows alike
    nested = hd.vmap(hd.vmap(lambda x: x + draw(())))(np.zeros((4, 5)))
    assert nested.shape == (4, 5)
    assert len(np.unique(nested.d)) == 20


def test_random_draws_in_vmap_follow_the_node_stream_and_its_distribution() -> None:
    # a seeded node draws the whole batch from default_rng(seed), as the docs give it
    y = hd.vmap(lambda x: x + F.rand(-1.0, 1.0, shape=(2,), seed=7))(np.zeros((3, 2)))
    u = np.random.default_rng(7).random((3, 2))
    np.testing.assert_allclose(y.d, (-1.0 + 2.0 * u).astype(np.float32), rtol=1e-6)
    hd.seed(0)
    z = hd.vmap(lambda x: x + F.randn(shape=()))(np.zeros(4000)).d
    assert abs(z.mean()) < 0.1
    assert abs(z.std() - 1.0) < 0.1


def test_a_per_example_draw_is_the_one_its_gradient_sees() -> None:
    def f(x):
        r = F.randn(shape=(3,))
        return [r, hd.grad(F.sum(x * r), x)[0]]

    r, g = hd.vmap(f)(np.ones((4, 3)))
    np.testing.assert_array_equal(g.d, r.d)
    assert len(np.unique(r.d)) == 12


def test_a_static_graph_in_vmap_redraws_every_example_on_each_forward() -> None:
    with hd.auto_forward(False):
        y = hd.vmap(lambda x: x * F.rand(shape=(2,)))(np.ones((3, 2)))
    y.forward()
    first = y.d.copy()
    y.forward()
    assert len(np.unique(first)) == 6
    assert not np.any(first == y.d)


def test_the_rows_of_a_hessian_share_one_draw() -> None:
    # hd.hessian batches its rows with vmap over the reverse pass: f runs once, one draw
    x0 = np.array([0.3, -0.2, 0.9])
    h = hd.hessian(lambda x: F.sum(x * x * F.rand(shape=(3,), seed=1)), x0)
    r = np.random.default_rng(1).random(3).astype(np.float32)
    np.testing.assert_allclose(h, np.diag(2.0 * r), rtol=1e-6)
