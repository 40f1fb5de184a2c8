"""Every spec on cupy == on numpy. Runs when cupy and a GPU are present; skips otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import all_specs
from tests.harness import is_float, outputs_of

cp = pytest.importorskip("cupy")
try:
    if cp.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("no GPU", allow_module_level=True)
except Exception:  # cupy installed without a driver
    pytest.skip("no usable GPU", allow_module_level=True)

SPECS = all_specs()


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_cupy_matches_numpy(spec) -> None:
    xs = spec.sample()
    results = []
    gpu = hd.Context(backend="cupy", dtype=hd.get_default_context().dtype)
    for to, ctx in ((np.asarray, hd.get_default_context()), (cp.asarray, gpu)):
        vs = [hd.Variable.from_array(to(x), need_grad=is_float(x) and spec.order > 0) for x in xs]
        with hd.context_scope(ctx):  # a function without array inputs makes the context's
            ys = outputs_of(spec.fn(*vs, **spec.kwargs))
        grads = []
        if spec.order > 0:
            root = ys[0]
            for o in ys[1:]:
                root = root + o if o.shape == root.shape else root
            root.backward()
            grads = [v.g for v in vs if v.need_grad]
        results.append(([o.d for o in ys], grads))
    (ys_np, gs_np), (ys_cp, gs_cp) = results
    for a, b in zip(ys_np, ys_cp, strict=True):
        assert isinstance(b, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-10, atol=1e-12)
    for a, b in zip(gs_np, gs_cp, strict=True):
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-10, atol=1e-12)


def test_context_backend_cupy_makes_cupy_arrays() -> None:
    with hd.context_scope(hd.Context(backend="cupy", dtype="float64")):
        x = hd.Variable((2, 3))
        assert isinstance(x.d, cp.ndarray)


SECOND_ORDER = [s for s in SPECS if s.order >= 2]


@pytest.mark.parametrize("spec", SECOND_ORDER, ids=[s.name for s in SECOND_ORDER])
def test_cupy_recorded_gradient_and_hvp_match_numpy(spec) -> None:
    """hd.grad records the gradient graph on the GPU; its value and an HVP through it match."""
    xs = spec.sample()
    results = []
    for to in (np.asarray, cp.asarray):
        vs = [hd.Variable.from_array(to(x), need_grad=is_float(x)) for x in xs]
        diff = [v for v in vs if v.need_grad]
        ys = outputs_of(spec.fn(*vs, **spec.kwargs))
        wrng = np.random.default_rng(1)
        total = None
        for o in ys:
            w = to(wrng.standard_normal(o.shape))
            term = hd.functions.sum(o * o * w) if spec.linear else hd.functions.sum(o * w)
            total = term if total is None else total + term
        gs = hd.grad(total, diff, allow_unused=True)
        urng = np.random.default_rng(2)
        dot = None
        for g in gs:
            term = hd.functions.sum(g * to(urng.standard_normal(g.shape)))
            dot = term if dot is None else dot + term
        hs = hd.grad(dot, diff, allow_unused=True)
        results.append(([g.d for g in gs], [h.d for h in hs]))
    (g_np, h_np), (g_cp, h_cp) = results
    for a, b in zip(g_np + h_np, g_cp + h_cp, strict=True):
        assert isinstance(b, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-9, atol=1e-11)


def test_mixed_devices_name_the_function_and_inputs() -> None:
    x = hd.Variable.from_array(np.ones(3))
    y = hd.Variable.from_array(cp.ones(3))
    with pytest.raises(TypeError, match=r"add2: inputs live on different devices"):
        _ = x + y
    # a constant (not a Variable) goes to the GPU instead
    z = hd.functions.affine(np.ones((2, 3)), hd.Variable.from_array(cp.ones((3, 4))))
    assert isinstance(z.d, cp.ndarray)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_gpu_kernels_match_numpy(dtype) -> None:
    """tanh_backward, sigmoid_backward, softplus_backward and mul_n run one fused kernel on cupy
    arrays of one float dtype (broadcasting too); mixed dtypes take the numpy-style path. Both
    match numpy."""
    from hodiff.engine import cuda as _cuda
    from hodiff.grad_functions.arithmetic import mul_n
    from hodiff.grad_functions.math import sigmoid_backward, softplus_backward, tanh_backward

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 4, 3)).astype(dtype)
    c = rng.standard_normal(3).astype(dtype)
    assert _cuda.fusable(cp.asarray(a), cp.asarray(c))
    assert not _cuda.fusable(cp.asarray(a), cp.asarray(c.astype("float16")))
    assert not _cuda.fusable(a, c)
    rtol = 1e-6 if dtype == "float32" else 1e-14
    cases = [
        (lambda *xs: tanh_backward(*xs), (a, b), a * (1 - b * b)),
        (lambda *xs: tanh_backward(*xs), (c, b), c * (1 - b * b)),
        (lambda *xs: sigmoid_backward(*xs), (a, b), a * b * (1 - b)),
        (lambda *xs: softplus_backward(*xs), (a, b), a / (1 + np.exp(-b))),
        (lambda *xs: softplus_backward(*xs, beta=-2.5), (c, b), c / (1 + np.exp(2.5 * b))),
        (lambda *xs: softplus_backward(*xs), (a, b.astype("float64")), a / (1 + np.exp(-b))),
        (lambda *xs: mul_n(*xs, val=-2.0), (a, b, c), -2.0 * a * b * c),
        (lambda *xs: mul_n(*xs, val=0.5), (a, b, c.astype("float64")), 0.5 * a * b * c),
    ]
    for fn, xs, want in cases:
        got = fn(*[cp.asarray(x) for x in xs]).d
        assert isinstance(got, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("beta", [1.0, -0.5, 3.0])
def test_fused_gpu_softplus_matches_numpy_in_the_tails(dtype, beta) -> None:
    import hodiff.functions as F

    x = np.array([-np.inf, -1e4, -90.0, -3.0, -1e-3, 0.0, 2e-3, 5.0, 80.0, 1e4, np.inf, np.nan])
    x = x.astype(dtype)
    want = F.softplus(x, beta=beta).d
    got = F.softplus(cp.asarray(x), beta=beta).d
    assert isinstance(got, cp.ndarray)
    rtol = 1e-6 if dtype == "float32" else 1e-14
    tiny = np.finfo(dtype).tiny  # below it, the GPU may flush to zero
    np.testing.assert_allclose(cp.asnumpy(got), want, rtol=rtol, atol=tiny)


def test_labels_out_of_range_raise_on_the_gpu() -> None:
    import hodiff.functions as F

    x = cp.asarray(np.random.default_rng(1).standard_normal((4, 3)))
    ok = F.softmax_cross_entropy(x, cp.asarray([[0], [2], [1], [2]]))
    want = F.softmax_cross_entropy(cp.asnumpy(x), np.array([[0], [2], [1], [2]])).d
    np.testing.assert_allclose(cp.asnumpy(ok.d), want, rtol=1e-12)
    for bad in ([[0], [3], [1], [2]], [[0], [-2], [1], [2]]):  # -1: ignored, as NNabla
        with pytest.raises(ValueError, match=r"must lie in \[0, 3\)"):
            F.softmax_cross_entropy(x, cp.asarray(bad))


def test_taylor_mode_on_cupy_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((3, 16)), rng.standard_normal(16), rng.standard_normal((16, 1))]
    x = rng.standard_normal((5, 3))
    results = []
    for to in (np.asarray, cp.asarray):
        w1, b1, w2 = (hd.Variable.from_array(to(w)) for w in ws)

        def f(z, w1=w1, b1=b1, w2=w2):
            return hd.functions.affine(hd.functions.tanh(hd.functions.affine(z, w1, b1)), w2)

        lap = hd.laplacian(f, to(x), batch_axis=0)
        _, jv = hd.jvp(f, to(x), to(np.ones_like(x)))
        results.append(
            [
                cp.asnumpy(lap) if to is cp.asarray else lap,
                cp.asnumpy(jv) if to is cp.asarray else jv,
            ]
        )
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- checkpointing (issue 23)
def _checkpoint_paths(to: Any, ckpt: bool) -> dict[str, list[Any]]:
    """A plain backward, a gradient penalty (the gradient's hand-over), ``hd.hvp`` (its
    freeing pass) and a Laplacian loss through three residual tanh layers, each layer
    checkpointed or not; ``to`` makes the arrays (numpy's or cupy's)."""
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((6, 4))
    ws0 = [0.5 * rng.standard_normal((4, 4)) for _ in range(3)]
    bs0 = [0.1 * rng.standard_normal(4) for _ in range(3)]
    vs0 = [rng.standard_normal(a.shape) for a in (*ws0, *bs0)]

    def layer(h: Any, w: Any, b: Any) -> Any:
        return h + F.tanh(F.affine(h, w, b))

    def net(h: Any, ws: list[Any], bs: list[Any]) -> Any:
        for w, b in zip(ws, bs, strict=True):
            h = hd.checkpoint(layer, h, w, b) if ckpt else layer(h, w, b)
        return h

    x = hd.Variable.from_array(to(x0), need_grad=True)
    ws = [hd.Variable.from_array(to(w), need_grad=True) for w in ws0]
    bs = [hd.Variable.from_array(to(b), need_grad=True) for b in bs0]
    leaves = [x, *ws, *bs]
    out: dict[str, list[Any]] = {}
    F.sum(net(x, ws, bs) ** 2).backward(clear_buffer=True)
    out["plain"] = [v.g.copy() for v in leaves]
    for v in leaves:
        v.zero_grad()
    (g,) = hd.grad(F.sum(net(x, ws, bs)), x)
    pen = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
    (F.mean(net(x, ws, bs)) + 10.0 * pen).backward(clear_buffer=True)
    out["penalty"] = [v.g.copy() for v in leaves]

    def loss(*p: Any) -> Any:
        return F.sum(net(hd.Variable.from_array(to(x0)), list(p[:3]), list(p[3:])) ** 2)

    _, hv = hd.hvp(loss, tuple(to(a) for a in (*ws0, *bs0)), tuple(to(a) for a in vs0))
    out["hvp"] = list(hv)
    lap = hd.laplacian(
        lambda a: F.sum(net(a, ws, bs), axis=1), to(x0), batch_axis=0, create_graph=True
    )
    out["laplacian"] = [lap.d, *[gw.d for gw in hd.grad(F.mean(lap**2), ws)]]
    return out


def test_checkpoint_paths_on_cupy_match_numpy_without_checkpoints() -> None:
    want = _checkpoint_paths(np.asarray, False)
    with hd.context_scope(hd.Context(backend="cupy", dtype="float64")):
        got = _checkpoint_paths(cp.asarray, True)
    for key, arrays in want.items():
        for a, b in zip(arrays, got[key], strict=True):
            assert isinstance(b, cp.ndarray), key
            np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-10, atol=1e-12, err_msg=key)
