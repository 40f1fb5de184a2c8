"""hd.vmap (issue 10): every spec row mapped against a loop, per-example gradients, nesting.

The reference is always an independent computation: the function called on each
example separately (a Python loop) and stacked, and ``hd.grad`` per example.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine import batching
from hodiff.engine.function import REGISTRY
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from hodiff.transforms.vectorize import fallback_primitives
from tests.harness import is_float, outputs_of

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPECS = all_specs()
IDS = spec_ids(SPECS)
B = 2

#: the primitives that batch by the generic loop (docs/vmap.md lists the same)
FALLBACK = {"BatchNormalization", "WriteBack"}
#: random functions: one independent draw per example, not the loop's repeated seed
RANDOM = ("dropout",)


def test_every_primitive_has_a_batch_rule() -> None:
    missing = [c.__name__ for c in REGISTRY if getattr(c, "batch_rule", None) is None]
    assert not missing, f"primitives without a batch_rule: {missing}"


def test_fallback_list_is_short_and_documented() -> None:
    assert set(fallback_primitives()) == FALLBACK
    text = (ROOT / "docs" / "vmap.md").read_text()
    for name in FALLBACK:
        assert f"`{name}`" in text, f"docs/vmap.md does not list the fallback {name}"


def _batch(spec: Spec) -> tuple[list[list[np.ndarray]], list[np.ndarray]]:
    """B samples of the spec's inputs, and the inputs stacked along a new axis 0."""
    samples = [spec.sample(seed=b) for b in range(B)]
    stacked = [np.stack([s[i] for s in samples]) for i in range(len(samples[0]))]
    return samples, stacked


def _f(spec: Spec):
    return lambda *xs: spec.fn(*xs, **spec.kwargs)


def _as_list(y: object) -> list[hd.Variable]:
    return outputs_of(y)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vmap_values_match_loop(spec: Spec) -> None:
    if not spec.args:
        pytest.skip("no inputs to map")
    if spec.name.startswith(RANDOM):
        pytest.skip("random: checked in test_vmap_dropout_draws_per_example")
    samples, stacked = _batch(spec)
    ys = _as_list(hd.vmap(_f(spec))(*stacked))
    loops = [
        _as_list(spec.fn(*[hd.Variable.from_array(a) for a in s], **spec.kwargs)) for s in samples
    ]
    assert len(ys) == len(loops[0])
    for k, y in enumerate(ys):
        ref = np.stack([np.asarray(r[k].d) for r in loops])
        assert y.shape == ref.shape, f"output {k}: {y.shape} != {ref.shape}"
        np.testing.assert_allclose(y.d, ref, rtol=1e-10, atol=1e-12)
    if len(samples[0]) > 1:  # the inputs after the first unmapped (the same for every example)
        axes = (0,) + (None,) * (len(stacked) - 1)
        args = [stacked[0], *samples[0][1:]]
        ys = _as_list(hd.vmap(_f(spec), in_axes=axes)(*args))
        for b in range(B):
            ref = _as_list(spec.fn(stacked[0][b], *samples[0][1:], **spec.kwargs))
            for y, r in zip(ys, ref, strict=True):
                np.testing.assert_allclose(y.d[b], r.d, rtol=1e-10, atol=1e-12)


def _weights(spec: Spec, samples: list[list[np.ndarray]]) -> list[np.ndarray]:
    ys = _as_list(spec.fn(*[hd.Variable.from_array(a) for a in samples[0]], **spec.kwargs))
    rng = np.random.default_rng(7)
    return [rng.standard_normal(y.shape) for y in ys]


def _scalar(spec: Spec, ws: list[np.ndarray], xs: list[hd.Variable]) -> hd.Variable:
    total = None
    for y, w in zip(_as_list(spec.fn(*xs, **spec.kwargs)), ws, strict=True):
        if y.dtype.kind != "f":
            continue
        t = F.sum(y * y * w)  # squared: second derivatives of linear functions are not all 0
        total = t if total is None else total + t
    return total


DIFF = [(s, i) for s, i in zip(SPECS, IDS, strict=True) if s.order >= 1]


@pytest.mark.parametrize("spec", [s for s, _ in DIFF], ids=[i for _, i in DIFF])
def test_vmap_per_example_gradients_match_loop(spec: Spec) -> None:
    if spec.name.startswith(RANDOM):
        pytest.skip("random: checked in test_vmap_dropout_draws_per_example")
    samples, stacked = _batch(spec)
    ws = _weights(spec, samples)
    fl = [i for i, a in enumerate(samples[0]) if is_float(a)]

    def per_example(*xs: hd.Variable) -> list[hd.Variable]:
        return hd.grad(_scalar(spec, ws, list(xs)), [xs[i] for i in fl], allow_unused=True)

    got = _as_list(hd.vmap(per_example)(*stacked))
    for b, s in enumerate(samples):
        vs = [hd.Variable.from_array(a, need_grad=is_float(a)) for a in s]
        ref = hd.grad(_scalar(spec, ws, vs), [vs[i] for i in fl], allow_unused=True)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-9, atol=1e-11)
    # the mapped result is differentiable in turn: d/dX sum_b scalar(X[b]) row by row
    Xs = [hd.Variable.from_array(a, need_grad=is_float(a)) for a in stacked]
    ys = _as_list(hd.vmap(_f(spec))(*Xs))
    total = None
    for y, w in zip(ys, ws, strict=True):
        if y.dtype.kind == "f":
            t = F.sum(y * y * w)
            total = t if total is None else total + t
    grads = hd.grad(total, [Xs[i] for i in fl], allow_unused=True)
    for b, s in enumerate(samples):
        vs = [hd.Variable.from_array(a, need_grad=is_float(a)) for a in s]
        ref = hd.grad(_scalar(spec, ws, vs), [vs[i] for i in fl], allow_unused=True)
        for g, r in zip(grads, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-9, atol=1e-11)


SECOND = [(s, i) for s, i in zip(SPECS, IDS, strict=True) if s.order >= 2][::4]


@pytest.mark.parametrize("spec", [s for s, _ in SECOND], ids=[i for _, i in SECOND])
def test_vmap_second_order_matches_loop(spec: Spec) -> None:
    """Per-example Hessian-vector products: hd.grad of hd.grad inside vmap."""
    if spec.name.startswith(RANDOM):
        pytest.skip("random: checked in test_vmap_dropout_draws_per_example")
    samples, stacked = _batch(spec)
    ws = _weights(spec, samples)
    fl = [i for i, a in enumerate(samples[0]) if is_float(a)]
    rng = np.random.default_rng(3)
    vs_dir = [rng.standard_normal(samples[0][i].shape) for i in fl]

    def hvp(*xs: hd.Variable) -> list[hd.Variable]:
        wrt = [xs[i] for i in fl]
        gs = hd.grad(_scalar(spec, ws, list(xs)), wrt)
        dot = None
        for g, v in zip(gs, vs_dir, strict=True):
            t = F.sum(g * v)
            dot = t if dot is None else dot + t
        return hd.grad(dot, wrt, allow_unused=True)

    got = _as_list(hd.vmap(hvp)(*stacked))
    for b, s in enumerate(samples):
        ref = _as_list(hvp(*[hd.Variable.from_array(a) for a in s]))
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------- the API
RNG = np.random.default_rng(0)


def _loop(f, *args, in_axes=0):
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes, strict=True) if ax is not None)
    outs = []
    for b in range(n):
        xs = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, axes, strict=True)]
        y = f(*[hd.Variable.from_array(np.asarray(x)) for x in xs])
        outs.append([o.d for o in _as_list(y)])
    return [np.stack(o) for o in zip(*outs, strict=True)]


def test_in_axes_and_out_axes() -> None:
    x, w = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))

    def f(x, w):
        return F.tanh(F.matmul(x[None, :], w))[0], F.sum(x)

    y, s = hd.vmap(f, in_axes=(1, None))(x.T.copy(), w)
    ry, rs = _loop(f, x, w, in_axes=(0, None))
    np.testing.assert_allclose(y.d, ry, atol=1e-12)
    np.testing.assert_allclose(s.d, rs, atol=1e-12)
    y2 = hd.vmap(f, in_axes=(0, None), out_axes=(1, 0))(x, w)
    assert isinstance(y2, tuple)
    np.testing.assert_allclose(y2[0].d, ry.T, atol=1e-12)
    ys = hd.vmap(lambda x: [x * 2.0, F.sum(x)])(x)
    assert isinstance(ys, list)
    assert ys[0].shape == (3, 4)
    assert ys[1].shape == (3,)


def test_unbatched_output_is_broadcast() -> None:
    w = hd.Variable.from_array(RNG.standard_normal(2))
    y = hd.vmap(lambda x: w * 2.0)(np.zeros((3, 5)))
    np.testing.assert_allclose(y.d, np.broadcast_to(w.d * 2.0, (3, 2)))


def test_mismatched_sizes_name_the_arguments() -> None:
    with pytest.raises(
        ValueError,
        match=r"argument 0 \(shape \(3, 2\)\).*argument 1 "
        r"\(shape \(4, 2\)\)",
    ):
        hd.vmap(lambda a, b: a + b)(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="out of range"):
        hd.vmap(lambda a: a, in_axes=2)(np.ones((3, 2)))
    with pytest.raises(ValueError, match="no argument"):
        hd.vmap(lambda a: a, in_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="2 entries for 1"):
        hd.vmap(lambda a: a, in_axes=(0, 0))(np.ones(3))


def test_batched_values_are_not_readable_and_do_not_escape() -> None:
    kept = []

    def f(x):
        kept.append(x)
        with pytest.raises(TypeError, match="no per-example value"):
            _ = x.d
        return x * 2.0

    hd.vmap(f)(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match=r"outside the hd\.vmap"):
        F.exp(kept[0])


def test_nesting_equals_double_loop() -> None:
    X, Y = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 4))

    def pair(x, y):
        return F.sum(F.sin(x) * y)

    got = hd.vmap(lambda x: hd.vmap(lambda y: pair(x, y))(Y))(X)
    ref = np.array([[np.sum(np.sin(x) * y) for y in Y] for x in X])
    np.testing.assert_allclose(got.d, ref, atol=1e-12)
    # gradients through both levels: d/dx of pair per (x, y)
    g = hd.vmap(lambda x: hd.vmap(lambda y: hd.grad(pair(x, y), x)[0])(Y))(X)
    np.testing.assert_allclose(g.d, np.cos(X)[:, None, :] * Y[None, :, :], atol=1e-12)


def _mlp(params, x, t):
    w1, b1, w2, b2 = params
    h = F.tanh(F.affine(F.reshape(x, (1, -1)), w1, b1))
    return F.sum(F.softmax_cross_entropy(F.affine(h, w2, b2), F.reshape(t, (1, 1))))


def test_per_example_gradients_of_an_mlp_equal_a_loop() -> None:
    params = [
        hd.Variable.from_array(RNG.standard_normal(s) * 0.5, need_grad=True)
        for s in [(4, 5), (5,), (5, 3), (3,)]
    ]
    X, T = RNG.standard_normal((6, 4)), RNG.integers(0, 3, size=6)
    per = hd.vmap(lambda x, t: hd.grad(_mlp(params, x, t), params), in_axes=(0, 0))(X, T)
    for b in range(6):
        ref = hd.grad(
            _mlp(params, hd.Variable.from_array(X[b]), hd.Variable.from_array(T[b : b + 1])), params
        )
        for g, r in zip(per, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-12, atol=1e-14)
    # the summed per-example gradients are the batch gradient
    for p in params:
        p.zero_grad()
    total = None
    for b in range(6):
        term = _mlp(params, hd.Variable.from_array(X[b]), hd.Variable.from_array(T[b : b + 1]))
        total = term if total is None else total + term
    total.backward()
    for g, p in zip(per, params, strict=True):
        np.testing.assert_allclose(g.d.sum(0), p.g, rtol=1e-12, atol=1e-13)


def test_clipped_per_example_gradients_are_differentiable() -> None:
    """DP-SGD style: d/dw of sum_b |g_b|, with g_b the per-example gradient, vs a loop."""
    w = hd.Variable.from_array(RNG.standard_normal(3), need_grad=True)
    X = RNG.standard_normal((4, 3))

    def norm_of_grad(x):
        (g,) = hd.grad(F.sum(F.tanh(x * w)) ** 2, w)
        return F.sum(g * g) ** 0.5

    (got,) = hd.grad(F.sum(hd.vmap(norm_of_grad)(X)), w)
    total = None
    for x in X:
        t = norm_of_grad(hd.Variable.from_array(x))
        total = t if total is None else total + t
    (ref,) = hd.grad(total, w)
    np.testing.assert_allclose(got.d, ref.d, rtol=1e-12)


def test_static_graph_inside_vmap() -> None:
    X = RNG.standard_normal((3, 2))
    with hd.auto_forward(False):
        x = hd.Variable(X.shape, dtype=np.float64)
        y = hd.vmap(lambda v: F.sum(F.exp(v)))(x)
    x.d = X
    y.forward()
    np.testing.assert_allclose(y.d, np.exp(X).sum(1))


def test_dropout_draws_per_example() -> None:
    y = hd.vmap(lambda x: F.dropout(x, p=0.5))(np.ones((8, 50)))
    assert set(np.unique(y.d)) <= {0.0, 2.0}
    assert len({tuple(r) for r in y.d}) == 8  # independent masks, as in a batch


def test_custom_function_without_rule_batches_by_loop_and_with_rule_by_its_rule() -> None:
    calls = []

    class Cube(hd.Function):
        def forward_impl(self, inputs, outputs):
            calls.append(np.shape(inputs[0]))
            outputs[0] = inputs[0] ** 3

        def backward_impl(self, inputs, outputs, prop_down, accum):
            if prop_down[0]:
                inputs[0].store(outputs[0].grad * 3.0 * inputs[0].data ** 2, accum[0])

    X = RNG.standard_normal((4, 2))
    np.testing.assert_allclose(hd.vmap(lambda x: Cube()(x))(X).d, X**3)
    assert calls == [(2,)] * 4  # one call per example
    Cube.batch_rule = batching.elementwise
    calls.clear()
    g = hd.vmap(lambda x: hd.grad(F.sum(Cube()(x)), x)[0])(X)
    np.testing.assert_allclose(g.d, 3 * X**2)
    assert calls == [(4, 2)]


# ---------------------------------------------------------------- batched transforms
def _lse(x):
    return F.logsumexp(F.matmul(hd.Variable.from_array(MAT), x))


MAT = RNG.standard_normal((7, 5))


def _lse_hessian(x):
    z = MAT @ x
    p = np.exp(z - z.max())
    p /= p.sum()
    return MAT.T @ (np.diag(p) - np.outer(p, p)) @ MAT


@pytest.mark.parametrize("chunk", [None, 1, 2, 5, 100])
def test_hessian_and_jacobian_in_chunks(chunk) -> None:
    x = RNG.standard_normal(5)
    np.testing.assert_allclose(hd.hessian(_lse, x, chunk_size=chunk), _lse_hessian(x), atol=1e-12)
    J = hd.jacobian(lambda v: F.exp(v) * 2.0, x, chunk_size=chunk)
    np.testing.assert_allclose(J, np.diag(2 * np.exp(x)), atol=1e-12)
    J = hd.jacobian(lambda v: F.matmul(hd.Variable.from_array(MAT), v), x, chunk_size=chunk)
    np.testing.assert_allclose(J, MAT, atol=1e-12)  # more outputs than inputs: columns


def test_bad_chunk_size() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        hd.hessian(_lse, np.ones(5), chunk_size=0)


def test_create_graph_gives_differentiable_variables() -> None:
    x = RNG.standard_normal(3)
    xv = hd.Variable.from_array(x, need_grad=True)
    H = hd.hessian(lambda v: F.sum(v**4), xv, create_graph=True)
    assert isinstance(H, hd.Variable)
    np.testing.assert_allclose(H.d, np.diag(12 * x**2))
    (g,) = hd.grad(F.sum(H), xv)  # d/dx sum(diag(12 x^2)) = 24 x
    np.testing.assert_allclose(g.d, 24 * x)


def test_jacobian_of_jacobian_is_the_hessian_stack() -> None:
    x = RNG.standard_normal(3)

    def g(v):
        return F.sin(v) * F.sum(v * v)

    JJ = hd.jacobian(lambda v: hd.jacobian(g, v, create_graph=True), x)
    ref = np.stack([hd.hessian(lambda v, i=i: g(v)[i], x) for i in range(3)])
    np.testing.assert_allclose(JJ, ref, atol=1e-12)


def test_hvp_with_a_batch_of_directions() -> None:
    x, V = RNG.standard_normal(5), RNG.standard_normal((4, 5))
    for mode in ("rev-rev", "fwd-rev"):
        _, HV = hd.hvp(_lse, x, V, mode=mode)
        np.testing.assert_allclose(HV, V @ _lse_hessian(x), atol=1e-12)
    _, (h1, h2) = hd.hvp(lambda a, b: F.sum(a * a * b), (x, x), (V, V))
    np.testing.assert_allclose(h1, 2 * (V * x + V * x), atol=1e-12)  # 2 b va + 2 a vb
    np.testing.assert_allclose(h2, 2 * V * x, atol=1e-12)  # 2 a va


def test_jacobian_of_a_list_of_inputs_is_a_tuple() -> None:
    x = RNG.standard_normal(3)
    J = hd.jacobian(lambda a, b: a * b, [x, 2 * x])
    assert isinstance(J, tuple)
    np.testing.assert_allclose(J[0], np.diag(2 * x))


NESTED = [
    (s, i) for s, i in zip(SPECS, IDS, strict=True) if s.args and not s.name.startswith(RANDOM)
][::6]


@pytest.mark.parametrize("spec", [s for s, _ in NESTED], ids=[i for _, i in NESTED])
def test_nested_vmap_matches_double_loop(spec: Spec) -> None:
    """vmap(vmap(f)) over a (2, 2) grid of samples; the outer level maps only the first input."""
    grid = [[spec.sample(seed=2 * a + b) for b in range(2)] for a in range(2)]
    first = np.stack([np.stack([g[0] for g in row]) for row in grid])  # (2, 2, ...)
    rest = [np.stack([g[i] for g in grid[0]]) for i in range(1, len(grid[0][0]))]  # (2, ...)
    n = len(rest)

    def inner(x, *others):
        return hd.vmap(lambda x, *o: spec.fn(x, *o, **spec.kwargs))(x, *others)

    got = _as_list(hd.vmap(inner, in_axes=(0,) + (None,) * n)(first, *rest))
    for a in range(2):
        for b in range(2):
            args = [first[a, b], *[r[b] for r in rest]]
            ref = _as_list(
                spec.fn(*[hd.Variable.from_array(np.asarray(v)) for v in args], **spec.kwargs)
            )
            for y, r in zip(got, ref, strict=True):
                np.testing.assert_allclose(y.d[a, b], r.d, rtol=1e-10, atol=1e-12)


def test_default_chunks_bound_the_memory(monkeypatch) -> None:
    from hodiff.transforms import derivatives as transforms

    monkeypatch.setattr(transforms, "CHUNK_BYTES", 8 * 40)  # a few rows per pass
    sizes = []
    real = transforms._auto_chunk
    monkeypatch.setattr(
        transforms, "_auto_chunk", lambda roots: sizes.append(real(roots)) or sizes[-1]
    )
    x = RNG.standard_normal(5)
    np.testing.assert_allclose(hd.hessian(_lse, x), _lse_hessian(x), atol=1e-12)
    assert sizes
    assert 1 <= sizes[0] < 5


def test_float32_stays_float32_under_vmap() -> None:
    for spec in SPECS:
        if not spec.float32 or not spec.args or spec.name.startswith(RANDOM):
            continue
        xs = [np.stack([a, a]) for a in spec.sample()]
        xs = [x.astype(np.float32) if x.dtype.kind == "f" else x for x in xs]
        for y in _as_list(hd.vmap(_f(spec))(*xs)):
            if y.dtype.kind == "f":
                assert y.dtype == np.float32, f"{spec.name} gave {y.dtype} for float32 inputs"


def test_argument_errors_name_per_example_shapes_and_bad_rules_are_caught() -> None:
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        hd.vmap(lambda a, b: a + b)(np.ones((2, 3)), np.ones((2, 4)))

    class Bad(hd.Function):
        def forward_impl(self, inputs, outputs):
            outputs[0] = inputs[0] * 2

        def batch_rule(self, inputs, axes):
            return F.sum(inputs[0], axis=1)  # drops a per-example axis

    with pytest.raises(RuntimeError, match=r"bad: batch_rule gave output 0 of shape \(2,\)"):
        hd.vmap(lambda x: Bad()(x))(np.ones((2, 3)))
