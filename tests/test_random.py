"""Random functions and hd.seed: statistics, shapes, dtypes, static redraws, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


def test_rand_statistics_and_bounds() -> None:
    y = F.rand(-2.0, 3.0, shape=(200, 100), seed=1).d
    assert y.shape == (200, 100)
    assert y.dtype == np.float32
    assert y.min() >= -2.0
    assert y.max() < 3.0
    n = y.size
    # mean 0.5, variance 25/12 of U[-2, 3); 5-sigma bounds on the sample moments
    assert abs(y.mean() - 0.5) < 5 * np.sqrt(25 / 12 / n)
    assert abs(y.var() - 25 / 12) < 0.05
    hist, _ = np.histogram(y, bins=5, range=(-2, 3))
    np.testing.assert_allclose(hist / n, 0.2, atol=0.01)


def test_randn_statistics() -> None:
    y = F.randn(1.5, 0.5, shape=(40000,), seed=2).d.astype(np.float64)
    assert abs(y.mean() - 1.5) < 5 * 0.5 / np.sqrt(y.size)
    assert abs(y.std() - 0.5) < 0.01
    z = (y - 1.5) / 0.5
    assert abs(np.mean(z**3)) < 0.05  # symmetric
    assert abs(np.mean(z**4) - 3) < 0.15  # Gaussian kurtosis


def test_randint_range_dtype_and_uniformity() -> None:
    y = F.randint(-2, 3, shape=(10000,), seed=3).d
    assert y.dtype == np.int32
    assert set(np.unique(y).tolist()) == {-2, -1, 0, 1, 2}
    counts = np.bincount(y + 2)
    np.testing.assert_allclose(counts / y.size, 0.2, atol=0.02)


def test_shapes_and_dtype_follow_the_context() -> None:
    assert F.rand().shape == ()
    assert F.randn(shape=4).shape == (4,)
    with hd.context_scope(hd.Context(dtype="float64")):
        assert F.rand(shape=(2, 3)).dtype == np.float64
        assert F.randn(shape=(2,)).dtype == np.float64
        assert F.randint(0, 2, shape=(2,)).dtype == np.int32


def test_no_gradient_flows_into_random_nodes() -> None:
    r = F.randn(shape=(3,))
    assert not r.need_grad
    assert not r.parent.differentiable
    x = hd.Variable.from_array(np.ones(3), need_grad=True)
    (g,) = hd.grad(F.sum(x * r), x)
    np.testing.assert_array_equal(g.d, r.d)


def test_seed_makes_every_source_reproducible() -> None:
    import hodiff.initializers as I

    def draw():
        return (
            F.rand(shape=(3,)).d,
            F.randn(shape=(3,)).d,
            F.randint(0, 100, shape=(3,)).d,
            F.dropout(np.ones(20), p=0.5).d,
            I.NormalInitializer(1.0)((2, 2)),
        )

    hd.seed(5)
    a = draw()
    hd.seed(5)
    b = draw()
    hd.seed(6)
    c = draw()
    for u, v, w in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(u, v)
        assert not np.array_equal(u, w)


def test_fixed_seed_replays_the_documented_stream() -> None:
    hd.seed(0)
    a = F.rand(shape=(4,), seed=9).d
    hd.seed(1)
    b = F.rand(shape=(4,), seed=9).d  # the node's own seed wins over the global one
    ref = np.random.default_rng(9).random(4).astype(np.float32)
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(b, ref)


@pytest.mark.parametrize(
    "make",
    [
        lambda: F.rand(shape=(5,)),
        lambda: F.randn(shape=(5,)),
        lambda: F.randint(0, 1000, shape=(5,)),
        lambda: F.dropout(F.constant(1.0, (50,)), p=0.5),
    ],
)
def test_static_graph_draws_anew_on_every_forward(make) -> None:
    with hd.auto_forward(False):
        y = make()
    draws = []
    for _ in range(3):
        y.forward()
        draws.append(y.d.copy())
    assert not np.array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[1], draws[2])


def test_static_seeded_graph_replays_its_sequence() -> None:
    def run():
        with hd.auto_forward(False):
            y = F.rand(shape=(3,), seed=4)
        out = []
        for _ in range(2):
            y.forward()
            out.append(y.d.copy())
        return out

    a, b = run(), run()
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    rng = np.random.default_rng(4)
    np.testing.assert_array_equal(a[1], (rng.random(3), rng.random(3))[1].astype(np.float32))


def test_every_order_of_one_forward_sees_the_same_draw() -> None:
    # f = sum(r * x^4): g = 4 r x^3, h = 12 r x^2 (diagonal), t = 24 r x, all with one r.
    with hd.context_scope(hd.Context(dtype="float64")), hd.auto_forward(False):
        x = hd.Variable((4,), need_grad=True)
        r = F.rand(0.5, 1.5, shape=(4,))
        f = F.sum(r * x**4)
        (g,) = hd.grad(f, x)
        (h,) = hd.grad(F.sum(g), x)
        (t,) = hd.grad(F.sum(h), x)
        total = f + F.sum(g) + F.sum(h) + F.sum(t)  # one forward computes every order
    x.d = np.array([0.5, -1.0, 1.5, 2.0])
    seen = []
    for _ in range(2):
        total.forward()
        rd = r.d.copy()
        seen.append(rd)
        xd = x.d
        np.testing.assert_allclose(g.d, 4 * rd * xd**3, rtol=1e-12)
        np.testing.assert_allclose(h.d, 12 * rd * xd**2, rtol=1e-12)
        np.testing.assert_allclose(t.d, 24 * rd * xd, rtol=1e-12)
        np.testing.assert_allclose(f.d, np.sum(rd * xd**4), rtol=1e-12)
        # the plain backward of the whole graph reads the same draw
        x.zero_grad()
        total.backward()
        np.testing.assert_allclose(
            x.g, 4 * rd * xd**3 + 12 * rd * xd**2 + 24 * rd * xd + 24 * rd, rtol=1e-12
        )
    assert not np.array_equal(seen[0], seen[1])


def test_dropout_mask_is_shared_by_every_order_and_redrawn_per_forward() -> None:
    with hd.context_scope(hd.Context(dtype="float64")), hd.auto_forward(False):
        x = hd.Variable((64,), need_grad=True)
        y = F.dropout(x, p=0.5)
        f = F.sum(y**3)
        (g,) = hd.grad(f, x)  # 3 m^3 x^2 with m in {0, 2}
        (h,) = hd.grad(F.sum(g), x)  # 6 m^3 x
        total = f + F.sum(g) + F.sum(h)
    x.d = np.linspace(0.5, 1.5, 64)
    masks = []
    for _ in range(2):
        total.forward()
        m = y.d / x.d
        assert set(np.round(m, 12).tolist()) <= {0.0, 2.0}
        np.testing.assert_allclose(g.d, 3 * m**3 * x.d**2, rtol=1e-12)
        np.testing.assert_allclose(h.d, 6 * m**3 * x.d, rtol=1e-12)
        masks.append(m)
    assert not np.array_equal(masks[0], masks[1])


@pytest.mark.parametrize(
    ("call", "exc", "words"),
    [
        (lambda: F.rand(2.0, 1.0), ValueError, "rand: low"),
        (lambda: F.rand(shape=(2, -1)), ValueError, "rand: shape"),
        (lambda: F.rand(shape="ab"), ValueError, "rand: shape"),
        (lambda: F.rand(seed=1.5), TypeError, "rand: seed"),
        (lambda: F.randn(sigma=-1.0), ValueError, "randn: sigma"),
        (lambda: F.randint(3, 3), ValueError, "randint: low"),
        (lambda: F.randint(0.5, 3), TypeError, "randint: low"),
        (lambda: hd.seed(-1), ValueError, "seed"),
        (lambda: hd.seed(1.0), TypeError, "seed"),
    ],
)
def test_errors_name_the_function_and_argument(call, exc, words) -> None:
    with pytest.raises(exc, match=words):
        call()


def test_beta_binomial_gamma_moments_and_errors() -> None:
    # the moments of the distributions NNabla documents (against the closed forms)
    n = 200000
    for a, b in ((0.5, 0.5), (2.0, 5.0)):
        y = F.rand_beta(a, b, shape=(n,), seed=11).d.astype(np.float64)
        assert abs(y.mean() - a / (a + b)) < 5e-3
        assert abs(y.var() - a * b / ((a + b) ** 2 * (a + b + 1))) < 5e-3
    y = F.rand_binomial(10, 0.45, shape=(n,), seed=12).d.astype(np.float64)
    assert abs(y.mean() - 4.5) < 2e-2
    assert abs(y.var() - 10 * 0.45 * 0.55) < 3e-2
    assert F.rand_binomial(shape=(3,)).dtype == np.float32  # counts as floats, as NNabla's
    y = F.rand_gamma(7.5, 1.0, shape=(n,), seed=13).d.astype(np.float64)
    assert abs(y.mean() - 7.5) < 3e-2
    assert abs(y.var() - 7.5) < 0.1
    for call, match in (
        (lambda: F.rand_beta(0.0, 1.0), "rand_beta: alpha must be > 0"),
        (lambda: F.rand_gamma(1.0, -1.0), "rand_gamma: theta must be > 0"),
        (lambda: F.rand_binomial(2, 1.5), r"rand_binomial: p must be in \[0, 1\]"),
        (lambda: F.rand_binomial(-1, 0.5), "rand_binomial: n must be >= 0, got -1"),
    ):
        with pytest.raises(ValueError, match=match):
            call()
    with pytest.raises(TypeError, match="rand_binomial: n must be an int, got float"):
        F.rand_binomial(1.5, 0.5)  # a wrong type is a TypeError, as the other arguments
