"""Special cases of the math and activation families that the spec table cannot express:
numerical stability in the tails, the scipy-free paths, bare-array (plain backward) calls,
the fused backward nodes and argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.context import flag_raw
from hodiff.functions import math as hmath
from hodiff.grad_functions.math import sigmoid_backward, softplus_backward, tanh_backward

BIG = 1e4
STABLE = {
    "sigmoid": (F.sigmoid, lambda x: np.where(x > 0, 1.0, 0.0)),
    "softplus": (F.softplus, lambda x: np.maximum(x, 0.0)),
    "log_sigmoid": (F.log_sigmoid, lambda x: np.minimum(x, 0.0)),
    "swish": (F.swish, lambda x: np.maximum(x, 0.0)),
    "elu": (F.elu, lambda x: np.where(x > 0, x, -1.0)),
    "selu": (F.selu, lambda x: 1.05070098735548 * np.where(x > 0, x, -1.673263242354377)),
}


@pytest.fixture
def no_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretends scipy is not installed (numpy-only fallbacks)."""
    monkeypatch.setattr(hmath, "special_module", lambda xp: None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(STABLE))
@pytest.mark.parametrize("scipy", [True, False], ids=["scipy", "no_scipy"])
def test_no_overflow_in_the_tails(
    name: str, dtype: type, scipy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not scipy:
        monkeypatch.setattr(hmath, "special_module", lambda xp: None)
    fn, limit = STABLE[name]
    xs = np.array([-BIG, -50.0, 50.0, BIG], dtype=dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        x = hd.Variable.from_array(xs, need_grad=True)
        y = fn(x)
        y.backward()
        (g,) = hd.grad(F.sum(fn(x)), x)
        (gg,) = hd.grad(F.sum(g), x)
    assert y.dtype == dtype
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y.d, limit(xs.astype(np.float64)), rtol=tol, atol=tol)
    for a in (x.g, g.d, gg.d):
        assert np.all(np.isfinite(a)), f"{name}: non-finite derivative {a}"
    np.testing.assert_allclose(g.d, x.g, rtol=1e-6)


def test_sigmoid_tails_are_accurate_relative() -> None:
    x = np.array([-30.0, -700.0])
    np.testing.assert_allclose(F.sigmoid(x).d, np.exp(x), rtol=1e-12)
    np.testing.assert_allclose(F.log_sigmoid(x).d, x, rtol=1e-12)


def test_erf_without_scipy(no_scipy: None) -> None:
    xs = np.linspace(-3.0, 3.0, 7)
    ref = np.array([math.erf(v) for v in xs])
    np.testing.assert_allclose(F.erf(xs).d, ref, rtol=1e-15)
    y32 = F.erf(xs.astype(np.float32))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32.d, ref, rtol=1e-6)
    assert F.erf(np.array(0.5)).shape == ()
    x = hd.Variable.from_array(xs, need_grad=True)
    hd.gradcheck(F.erf, [xs], order=2)
    F.erf(x).backward()
    np.testing.assert_allclose(x.g, 2.0 / np.sqrt(np.pi) * np.exp(-xs * xs), rtol=1e-13)


def test_sigmoid_without_scipy_matches_scipy(no_scipy: None) -> None:
    xs = np.linspace(-20.0, 20.0, 41)
    np.testing.assert_allclose(F.sigmoid(xs).d, 1.0 / (1.0 + np.exp(-xs)), rtol=1e-8, atol=1e-16)
    assert F.sigmoid(xs.astype(np.float32)).dtype == np.float32
    assert F.sigmoid(np.array(0.0)).d == 0.5
    hd.gradcheck(F.sigmoid, [xs[15:26] / 4], order=3)


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (F.leaky_relu, lambda x: np.where(x > 0, x, 0.1 * x)),
        (F.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
        (F.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
        (F.softsign, lambda x: x / (1 + np.abs(x))),
        (F.swish, lambda x: x / (1 + np.exp(-x))),
        (F.relu6, lambda x: np.clip(x, 0, 6)),
        (F.hard_sigmoid, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
        (F.hard_tanh, lambda x: np.clip(x, -1, 1)),
        (F.log_sigmoid, lambda x: -np.log1p(np.exp(-x))),
        (
            lambda x: F.prelu(x, np.array([0.5, 0.25, 2.0])),
            lambda x: np.where(x > 0, x, x * [[0.5, 0.25, 2.0]]),
        ),
        (
            lambda x: F.celu(x, axis=0),
            lambda x: np.concatenate(
                [np.where(x > 0, x, np.expm1(x)), np.where(x < 0, -x, np.expm1(-x))]
            ),
        ),
    ],
)
def test_compositions_run_on_bare_arrays(fn, ref) -> None:
    # a backward rule may call them during a plain .backward(): arrays in, arrays out
    x = np.array([[-2.0, 0.5, 3.0], [1.5, -0.25, -7.0]])
    token = flag_raw.set(True)
    try:
        y = fn(x)
    finally:
        flag_raw.reset(token)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, ref(x), rtol=1e-12)


def test_nnabla_definitions() -> None:
    np.testing.assert_allclose(F.hard_sigmoid(np.array([-2.5, 2.5, 3.0])).d, [0.0, 1.0, 1.0])
    x = np.array([-1.0, 1.0])
    np.testing.assert_allclose(
        F.selu(x).d, [1.05070098735548 * 1.673263242354377 * np.expm1(-1.0), 1.05070098735548]
    )
    np.testing.assert_allclose(F.celu(np.ones((2, 3)), axis=1).shape, (2, 6))
    np.testing.assert_allclose(F.softplus(np.array([1.0]), beta=2.0).d, np.log1p(np.e**2) / 2)
    # relu's gradient at 0 is 0, as NNabla's
    x = hd.Variable.from_array(np.zeros(3), need_grad=True)
    F.relu(x).backward()
    np.testing.assert_array_equal(x.g, 0.0)


def test_gradients_at_zero_follow_nnabla() -> None:
    # the point x = 0 belongs to the negative branch (x <= 0), so elu(alpha=1) gets its true 1
    cases = [
        (lambda x: F.leaky_relu(x, alpha=0.2), 0.2),
        (lambda x: F.elu(x, alpha=1.0), 1.0),
        (lambda x: F.elu(x, alpha=0.5), 0.5),
        (lambda x: F.prelu(x, np.array(0.3)), 0.3),
        (F.softsign, 1.0),
    ]
    for fn, slope in cases:
        x = hd.Variable.from_array(np.zeros(2), need_grad=True)
        fn(x).backward()
        np.testing.assert_allclose(x.g, slope)


def test_infinite_inputs() -> None:
    x = np.array([-np.inf, np.inf])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        np.testing.assert_array_equal(F.relu(x).d, [0.0, np.inf])
        np.testing.assert_array_equal(F.elu(x).d, [-1.0, np.inf])
        np.testing.assert_array_equal(F.leaky_relu(x).d, [-np.inf, np.inf])
        np.testing.assert_array_equal(F.sigmoid(x).d, [0.0, 1.0])
        np.testing.assert_array_equal(F.tanh(x).d, [-1.0, 1.0])


def test_fused_backward_nodes_leave_inputs_alone_and_promote() -> None:
    gy = np.array([1.0, -2.0, 3.0])
    y = np.array([0.25, 0.5, -0.75], dtype=np.float32)
    gy0, y0 = gy.copy(), y.copy()
    for fn, ref in (
        (tanh_backward, gy * (1 - y.astype(np.float64) ** 2)),
        (sigmoid_backward, gy * y.astype(np.float64) * (1 - y.astype(np.float64))),
        (softplus_backward, gy / (1 + np.exp(-y.astype(np.float64)))),
    ):
        out = fn(gy, y)
        assert out.dtype == np.float64
        np.testing.assert_allclose(out.d, ref, rtol=1e-7)
        out = fn(y, y)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(gy, gy0)
        np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: F.prelu(np.ones((2, 3)), np.ones(4)), ValueError, ["prelu", "(4,)", "(2, 3)"]),
        (
            lambda: F.prelu(np.ones((2, 3)), np.ones(3), base_axis=2),
            ValueError,
            ["prelu", "base_axis"],
        ),
        (lambda: F.celu(np.ones((2, 3)), axis=2), ValueError, ["celu", "axis 2", "(2, 3)"]),
        (lambda: F.softplus(np.ones(2), beta=0.0), ValueError, ["softplus", "beta"]),
        (lambda: F.leaky_relu(np.ones(2), alpha=np.ones(2)), TypeError, ["leaky_relu", "alpha"]),
        (lambda: F.elu(np.ones(2), alpha="a"), TypeError, ["elu", "alpha"]),
        (lambda: F.atan2(np.ones((2, 3)), np.ones((4,))), ValueError, ["atan2", "(2, 3)", "(4,)"]),
        (lambda: tanh_backward(np.ones(3), np.ones(2)), ValueError, ["tanh_backward", "(3,)"]),
    ],
)
def test_argument_errors(call, error, words) -> None:
    with pytest.raises(error) as info:
        call()
    for w in words:
        assert w in str(info.value)


def test_errors_are_raised_in_static_mode_too() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2, 3))
        with pytest.raises(ValueError, match="prelu"):
            F.prelu(x, hd.Variable((5,)))
        with pytest.raises(ValueError, match="atan2"):
            F.atan2(x, hd.Variable((2,)))
        y = F.celu(x, axis=-1)
        assert y.shape == (2, 6)
        x.d = np.arange(6.0).reshape(2, 3) - 2.5
        y.forward()
    np.testing.assert_allclose(y.d[:, :3], np.where(x.d > 0, x.d, np.expm1(x.d)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_and_softplus_are_accurate_relative_in_float32_and_float64(dtype: type) -> None:
    # references in float64 with log1p/exp on the defining branches (x < 0: e^x / (1 + e^x))
    x = np.concatenate([np.linspace(-80.0, 30.0, 221), [-1e-30, 0.0, 1e-30, 1e4, -1e4]])
    xs = x.astype(dtype)
    xd = xs.astype(np.float64)
    e = np.exp(-np.abs(xd))
    sig = np.where(xd >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    sp = np.maximum(xd, 0.0) + np.log1p(e)
    tol = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(F.sigmoid(xs).d, sig, rtol=tol, atol=0)
    np.testing.assert_allclose(F.softplus(xs).d, sp, rtol=tol, atol=0)
    np.testing.assert_allclose(
        F.softplus(xs, beta=-2.0).d, -0.5 * np.logaddexp(0.0, -2 * xd), rtol=tol, atol=0
    )


def test_softplus_float32_log1p_without_svml(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPUs without numpy's SVML loops take log1p(t) = log(u) - ((u - 1) - t) / u
    from hodiff.functions import activation

    t = np.concatenate([[0.0, 1e-30, 1e-8, 6e-8, 1e-7], np.linspace(1e-6, 1.0, 500)])
    got = activation._log1p_small(np, t.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(
        got,
        np.log1p(t.astype(np.float32).astype(np.float64)),
        rtol=2 * np.finfo(np.float32).eps,
        atol=0,
    )
    monkeypatch.setattr(activation, "_FAST_LOG1P", False)
    x = np.linspace(-30.0, 30.0, 61).astype(np.float32)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(F.softplus(x).d, np.logaddexp(0.0, xd), rtol=4e-7, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_and_softplus_at_infinities_and_nan(dtype: type) -> None:
    # softplus(-inf) = 0 (its max(z, 0) = h + |h| would be -inf + inf), NaN stays NaN
    x = np.array([-np.inf, np.nan, np.inf, -1.0, 2.0], dtype)
    with np.errstate(all="raise"):
        sp = F.softplus(x).d
        sg = F.sigmoid(x).d
        ls = F.log_sigmoid(x).d
        spb = F.softplus(x, beta=-3.0).d  # z = -3 x: the infinities swap
    np.testing.assert_array_equal(sp[[0, 2]], [0.0, np.inf])
    np.testing.assert_array_equal(sg[[0, 2]], [0.0, 1.0])
    np.testing.assert_array_equal(ls[[0, 2]], [-np.inf, 0.0])
    np.testing.assert_array_equal(spb[[0, 2]], [-np.inf, 0.0])
    for y in (sp, sg, ls, spb):
        assert np.isnan(y[1])
        assert np.all(np.isfinite(y[3:]))
    np.testing.assert_allclose(sp[3:], np.log1p(np.exp([-1.0, 2.0])), rtol=1e-6)
    assert F.softplus(np.full((2, 0), -np.inf, dtype)).shape == (2, 0)


@pytest.mark.parametrize("x", [np.array([True, False]), np.array([3, -2], np.int8)])
def test_sigmoid_and_softplus_of_bool_and_int_arrays_are_float64(x: np.ndarray) -> None:
    xd = x.astype(np.float64)
    for fn, ref in ((F.sigmoid, 1.0 / (1.0 + np.exp(-xd))), (F.softplus, np.log1p(np.exp(xd)))):
        y = fn(x)
        assert y.dtype == np.float64
        np.testing.assert_allclose(y.d, ref, rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta", [1.0, -2.5])
def test_softplus_backward_kernel_is_accurate_in_both_paths(dtype: type, beta: float) -> None:
    # gy * sigmoid(beta x) against a float64 reference on the defining branches, through the
    # in-place path (gy and x of one shape and dtype) and the promoting one (a 0-d gy)
    x = np.concatenate([np.linspace(-80.0, 30.0, 221), [-1e-30, 0.0, 1e-30, 1e4, -1e4]]).astype(
        dtype
    )
    gy = np.linspace(-3.0, 2.0, x.size).astype(dtype)
    x0, gy0 = x.copy(), gy.copy()
    z = beta * x.astype(np.float64)
    e = np.exp(-np.abs(z))
    sig = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tol = 6 * np.finfo(dtype).eps
    with np.errstate(all="raise"):  # e^(-beta x) overflows silently to the limit 0
        for g in (gy, gy[3]):
            got = softplus_backward(g, x, beta=beta).d  # a node
            token = flag_raw.set(True)  # as the plain pass calls it: the kernel on arrays
            try:
                raw = softplus_backward(g, x, beta=beta)
            finally:
                flag_raw.reset(token)
            for out in (got, raw):
                assert out.dtype == dtype
                assert out.shape == x.shape
                np.testing.assert_allclose(out, g.astype(np.float64) * sig, rtol=tol, atol=0)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(gy, gy0)
