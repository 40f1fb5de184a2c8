"""Taylor mode: every spec row's jet against nested reverse-mode derivatives.

For each differentiable spec, random directions ``v`` (one per float input) and output
weights ``u``: the jet of order order along ``x(t) = x + t v`` must give
``<u, y_k> = d^k/dt^k <u, f(x + t v)>``, the latter from order nested ``hd.grad`` of a scalar
with respect to the scalar ``t`` (reverse mode only: the backward rules, not the jet
rules). Also with a curve that has higher coefficients, the collapsed mode against the
sum of per-direction jets, create_graph against the plain pass, and float32.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from hodiff.transforms import taylor
from tests.harness import is_float, outputs_of

SPECS = [s for s in all_specs() if s.order >= 1]
IDS = spec_ids(SPECS)


def _nested(spec: Spec, xs: list[Any], vs: list[Any], us: list[Any], order: int) -> list[float]:
    """``d^k/dt^k <u, f(x + t v)>`` at t = 0, k = 1..order, by nested hd.grad."""
    cs = [None if v is None else [v, None, None] for v in vs]
    return _curve_nested(spec, xs, cs, us, order)


def _jet(spec: Spec, xs: list[Any], series: list[Any], order: int, record: bool = False) -> Any:
    prim = [hd.Variable.from_array(x, need_grad=is_float(x)) for x in xs]
    coeffs = [None if s is None else [None if c is None else c[None] for c in s] for s in series]
    y, outs = taylor.run_jet(
        lambda *a: spec.fn(*a, **spec.kwargs), prim, coeffs, order, record=record
    )
    return y, outs


def _project(y: Any, outs: list[Any], us: list[Any], order: int) -> list[float]:
    ys = outputs_of(y)
    got = [0.0] * order
    for (
        o,
        s,
    ) in zip(ys, outs, strict=True):
        if o.dtype.kind != "f":
            continue
        u = us.pop(0)
        for k in range(order):
            c = s[k]
            if c is not None:
                c = c.d if isinstance(c, hd.Variable) else c
                got[k] += float(np.sum(np.asarray(c)[0] * u))
    return got


def _setup(spec: Spec, seed: int = 1) -> tuple[list[Any], list[Any], list[Any]]:
    xs = spec.sample()
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(x.shape) if is_float(x) else None for x in xs]
    if spec.fn is F.batch_normalization and spec.kwargs.get("batch_stat", True):
        vs[3] = vs[4] = None  # running statistics, updated in place: not inputs of the map
    y = spec.fn(*[hd.Variable.from_array(x) for x in xs], **spec.kwargs)
    us = [rng.standard_normal(o.shape) for o in outputs_of(y) if o.dtype.kind == "f"]
    return xs, vs, us


def _close(got: list[float], want: list[float], spec: Spec) -> None:
    scale = max(1.0, *[abs(w) for w in want])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9 * scale, err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jet_equals_nested_derivatives(spec: Spec) -> None:
    order = min(spec.order, 3)
    xs, vs, us = _setup(spec)
    want = _nested(spec, xs, vs, us, order)
    series = [None if v is None else [v] + [None] * (order - 1) for v in vs]
    y, outs = _jet(spec, xs, series, order)
    _close(_project(y, outs, list(us), order), want, spec)


def _curve_nested(spec: Spec, xs: list[Any], cs: list[Any], us: list[Any], order: int) -> Any:
    """Nested derivatives along ``x(t) = x + t c1 + t^2/2 c2 + t^3/6 c3``."""
    t = hd.Variable.from_array(np.zeros(()), need_grad=True)
    args = []
    for x, c in zip(xs, cs, strict=True):
        if c is None:
            args.append(x)
        else:
            a = x + t * c[0]
            if c[1] is not None:
                a = a + (t * t) * (c[1] / 2)
            if c[2] is not None:
                a = a + (t * t * t) * (c[2] / 6)
            args.append(a)
    ys = [o for o in outputs_of(spec.fn(*args, **spec.kwargs)) if o.dtype.kind == "f"]
    s: Any = None
    for o, u in zip(ys, us, strict=True):
        term = F.sum(o * u)
        s = term if s is None else s + term
    out = []
    cur = s
    for _ in range(order):
        (cur,) = hd.grad(cur, t, allow_unused=True)
        if cur is None:
            out.extend([0.0] * (order - len(out)))
            break
        out.append(float(cur.d))
    return out


THIRD = [s for s in SPECS if s.order >= 3]
THIRD_IDS = spec_ids(THIRD)


@pytest.mark.parametrize("spec", THIRD, ids=THIRD_IDS)
def test_jet_of_a_curved_path(spec: Spec) -> None:
    # second and third coefficients of the input curve enter every rule
    xs, vs, us = _setup(spec)
    rng = np.random.default_rng(3)
    cs = [
        None if v is None else [v, rng.standard_normal(v.shape), rng.standard_normal(v.shape)]
        for v in vs
    ]
    want = _curve_nested(spec, xs, cs, us, 3)
    y, outs = _jet(spec, xs, cs, 3)
    _close(_project(y, outs, list(us), 3), want, spec)


@pytest.mark.parametrize("spec", THIRD, ids=THIRD_IDS)
def test_collapsed_top_is_the_sum_of_the_directions(spec: Spec) -> None:
    # three directions in one pass; the collapsed second coefficient = the sum of the three
    xs = spec.sample()
    rng = np.random.default_rng(4)
    prim = [hd.Variable.from_array(x, need_grad=is_float(x)) for x in xs]
    dirs = [rng.standard_normal((3, *x.shape)) if is_float(x) else None for x in xs]
    if spec.fn is F.batch_normalization and spec.kwargs.get("batch_stat", True):
        dirs[3] = dirs[4] = None

    def fn(*a: Any) -> Any:
        return spec.fn(*a, **spec.kwargs)

    full = [None if d is None else [d, None] for d in dirs]
    _, outs = taylor.run_jet(fn, prim, full, 2)
    prim = [hd.Variable.from_array(x, need_grad=is_float(x)) for x in xs]
    _, coll = taylor.run_jet(fn, prim, full, 2, collapsed=True)
    for s, c in zip(outs, coll, strict=True):
        if s[1] is None:
            assert c[1] is None or not np.any(c[1])
            continue
        assert c[1].shape == (1, *s[1].shape[1:])
        np.testing.assert_allclose(c[1][0], s[1].sum(axis=0), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_recorded_jet_equals_the_plain_pass(spec: Spec) -> None:
    order = min(spec.order, 2)
    xs, vs, _ = _setup(spec)
    series = [None if v is None else [v] + [None] * (order - 1) for v in vs]
    _, plain = _jet(spec, xs, series, order)
    _, rec = _jet(spec, xs, series, order, record=True)
    for s, r in zip(plain, rec, strict=True):
        for a, b in zip(s, r, strict=True):
            b = b.d if isinstance(b, hd.Variable) else b  # an array where the rule made none
            if a is None:
                assert b is None or not np.any(b)
                continue
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- the public functions
def _mlp(rng: np.random.Generator, sizes: tuple[int, ...]) -> tuple[list[Any], Any]:
    ws = [
        hd.Variable.from_array(rng.standard_normal((a, b)) / np.sqrt(a), need_grad=True)
        for a, b in itertools.pairwise(sizes)
    ]
    bs = [hd.Variable.from_array(rng.standard_normal(b) * 0.1, need_grad=True) for b in sizes[1:]]

    def f(x: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            h = F.affine(h, w, b)
            if i < len(ws) - 1:
                h = F.tanh(h)
        return h

    return [*ws, *bs], f


def _trace_hessian(f: Any, x: np.ndarray) -> float:
    h = hd.hessian(lambda z: F.sum(f(z)), x)
    return float(np.trace(h.reshape(x.size, x.size)))


def test_laplacian_methods_agree_with_the_trace_of_the_hessian() -> None:
    rng = np.random.default_rng(0)
    _, f = _mlp(rng, (4, 16, 16, 1))
    x = rng.standard_normal(4)
    want = _trace_hessian(lambda z: F.reshape(f(F.reshape(z, (1, 4))), ()), x)

    def g(z: Any) -> Any:
        return F.reshape(f(F.reshape(z, (1, 4))), ())

    for method in ("taylor", "nested"):
        got = hd.laplacian(g, x, method=method)
        assert isinstance(got, np.ndarray)
        assert got.shape == ()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # finite differences: sum_i (f(x + h e_i) - 2 f(x) + f(x - h e_i)) / h^2
    h = 1e-4
    f0 = float(g(hd.Variable.from_array(x)).d)
    fd = (
        sum(
            float(g(hd.Variable.from_array(x + h * e)).d)
            - 2 * f0
            + float(g(hd.Variable.from_array(x - h * e)).d)
            for e in np.eye(4)
        )
        / h**2
    )
    np.testing.assert_allclose(hd.laplacian(g, x), fd, rtol=1e-5)


def test_batched_laplacian_is_per_datum() -> None:
    rng = np.random.default_rng(1)
    _, f = _mlp(rng, (3, 8, 8, 1))
    x = rng.standard_normal((5, 3))
    want = [
        _trace_hessian(lambda z: F.reshape(f(F.reshape(z, (1, 3))), ()), x[n]) for n in range(5)
    ]
    for method in ("taylor", "nested"):
        got = hd.laplacian(f, x, batch_axis=0, method=method)
        assert got.shape == (5,)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # (N,) outputs too
    got = hd.laplacian(lambda z: F.reshape(f(z), (5,)), x, batch_axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_laplacian_with_create_graph_is_differentiable_with_respect_to_the_weights() -> None:
    rng = np.random.default_rng(2)
    params, f = _mlp(rng, (2, 6, 6, 1))
    x = rng.standard_normal((4, 2))
    grads = {}
    for method in ("taylor", "nested"):
        lap = hd.laplacian(f, x, batch_axis=0, method=method, create_graph=True)
        assert isinstance(lap, hd.Variable)
        assert lap.shape == (4,)
        loss = F.sum(lap * lap)
        g = hd.grad(loss, params, allow_unused=True)  # the last bias does not matter
        assert g[-1] is None or not np.any(g[-1].d)
        # and once more: the Hessian-vector product of the loss along the first weight
        (gg,) = hd.grad(F.sum(g[0] * g[0]), params[0])
        grads[method] = [a.d for a in g[:-1]] + [np.zeros(1), gg.d]
    for a, b in zip(grads["taylor"], grads["nested"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    # backward() through the Taylor graph gives the same weight gradients
    lap = hd.laplacian(f, x, batch_axis=0, create_graph=True)
    for p in params:
        p.g = 0
    F.sum(lap * lap).backward()
    for p, want in zip(params, grads["nested"][:-1], strict=True):
        np.testing.assert_allclose(p.g, want, rtol=1e-9, atol=1e-11)


def test_stochastic_laplacian_is_unbiased_and_reproducible() -> None:
    a = np.diag([1.0, 2.0, 3.0]) + 0.1

    def f(x: Any) -> Any:
        return 0.5 * F.sum(x * F.reshape(F.affine(F.reshape(x, (1, 3)), a), (3,)))

    x = np.array([0.3, -0.2, 0.5])
    exact = float(np.trace(a))  # f = x^T A x / 2 with A symmetric: Laplacian = tr A
    est = hd.laplacian(f, x, method="stochastic", num_samples=4000, seed=3)
    np.testing.assert_allclose(est, exact, rtol=0.05)
    again = hd.laplacian(f, x, method="stochastic", num_samples=4000, seed=3)
    assert est == again
    # Rademacher directions: v^T A v = tr A + off-diagonal terms that average out
    other = hd.laplacian(f, x, method="stochastic", num_samples=4000, seed=4)
    assert other != est


def test_biharmonic_of_a_radial_power_and_of_a_network() -> None:
    for d in (1, 2, 3):
        x = np.linspace(0.5, 1.5, d)
        r4 = hd.biharmonic(lambda z: F.sum(z * z) ** 2, x)
        np.testing.assert_allclose(r4, 8 * d * (d + 2), rtol=1e-12)
    rng = np.random.default_rng(5)
    _, f = _mlp(rng, (3, 8, 1))
    x = rng.standard_normal((2, 3))
    exact = hd.biharmonic(f, x, batch_axis=0)
    nested = hd.biharmonic(f, x, batch_axis=0, method="nested")
    np.testing.assert_allclose(exact, nested, rtol=1e-9, atol=1e-10)
    est = hd.biharmonic(f, x, batch_axis=0, method="stochastic", num_samples=20000)
    np.testing.assert_allclose(est, exact, rtol=0.1, atol=0.05 * np.abs(exact).max())


def test_operators_keep_float32() -> None:
    rng = np.random.default_rng(6)
    w1, w2 = rng.standard_normal((3, 8)), rng.standard_normal((8, 1))
    x = rng.standard_normal((4, 3))

    def mlp(dtype: Any) -> Any:
        a, b = (hd.Variable.from_array(w.astype(dtype)) for w in (w1, w2))
        return lambda z: F.affine(F.tanh(F.affine(z, a)), b)

    lap64 = hd.laplacian(mlp(np.float64), x, batch_axis=0)
    for method in ("taylor", "nested"):
        lap32 = hd.laplacian(mlp(np.float32), x.astype(np.float32), batch_axis=0, method=method)
        assert lap32.dtype == np.float32, method
        np.testing.assert_allclose(lap32, lap64, rtol=1e-4, atol=1e-5)


def test_operator_errors_name_the_argument() -> None:
    x = np.ones(3)

    def f(z: Any) -> Any:
        return F.sum(z * z)

    with pytest.raises(ValueError, match="method"):
        hd.laplacian(f, x, method="fast")
    with pytest.raises(ValueError, match="batch_axis"):
        hd.laplacian(f, x, batch_axis=1)
    with pytest.raises(ValueError, match="num_samples"):
        hd.laplacian(f, x, method="stochastic")
    with pytest.raises(ValueError, match="scalar"):
        hd.laplacian(lambda z: z * z, x)
    with pytest.raises(ValueError, match=r"\(3,\) or \(3, 1\)"):
        hd.laplacian(lambda z: z * z, np.ones((3, 2)), batch_axis=0)
    with pytest.raises(ValueError, match="num_samples"):
        hd.biharmonic(f, x, method="stochastic", num_samples=0)


def test_jet_api_matches_closed_forms_and_checks_shapes() -> None:
    x = np.array([0.2, -0.4])
    v = np.array([1.0, 2.0])
    y0, (y1, y2, y3) = hd.jet(F.exp, (x,), ([v, np.zeros(2), np.zeros(2)],))
    e = np.exp(x)
    np.testing.assert_allclose(y0, e)
    np.testing.assert_allclose(y1, e * v)
    np.testing.assert_allclose(y2, e * v**2)
    np.testing.assert_allclose(y3, e * v**3)
    # two primals: d^k/dt^k of (a + t va) (b + t vb) sin(...) checked against nested grads
    _, ks = hd.jet(lambda a, b: a * b, (x, x[::-1].copy()), ([v, v], [v, -v]))
    np.testing.assert_allclose(ks[0], v * x[::-1] + x * v)
    np.testing.assert_allclose(ks[1], 2 * v * v + x * (-v) + v * 0 + x[::-1] * v)
    with pytest.raises(ValueError, match=r"series\[0\]\[1\] has shape \(3,\)"):
        hd.jet(F.exp, (x,), ([v, np.zeros(3)],))
    with pytest.raises(ValueError, match="one list per primal"):
        hd.jet(F.exp, (x,), ([v], [v]))
    y, ks = hd.jet(F.sin, (x,), ([v],), create_graph=True)
    assert isinstance(y, hd.Variable)
    assert isinstance(ks[0], hd.Variable)


def test_jvp_is_forward_mode_and_matches_the_transposed_vjp() -> None:
    rng = np.random.default_rng(7)
    _, f = _mlp(rng, (5, 7, 3))
    x = rng.standard_normal((2, 5))
    v = rng.standard_normal((2, 5))
    y, jv = hd.jvp(f, x, v)
    # <u, J v> = <J^T u, v> for a random u
    u = rng.standard_normal(y.shape)
    _, jtu = hd.vjp(f, x, u)
    np.testing.assert_allclose(np.sum(u * jv), np.sum(jtu * v), rtol=1e-12)
    h = 1e-6
    fd = (f(hd.Variable.from_array(x + h * v)).d - f(hd.Variable.from_array(x - h * v)).d) / (2 * h)
    np.testing.assert_allclose(jv, fd, rtol=1e-6, atol=1e-8)


def test_every_primitive_has_a_rule_kind() -> None:
    kinds = taylor.rule_kinds()
    assert set(kinds.values()) <= {
        "linear",
        "multilinear",
        "elementwise",
        "custom",
        "composite",
        "constant",
        "own",
        "generic",
    }
    assert kinds["Checkpoint"] == "own"  # hd.checkpoint's node brings its own rule
    # the hot ones have their own rules, not the generic one
    for name in ("Affine", "Mul2", "Add2", "Tanh", "Exp", "Sum", "Reshape", "BatchMatmul"):
        assert kinds[name] != "generic", name


F32 = [s for s in SPECS if s.float32]
F32_IDS = spec_ids(F32)


@pytest.mark.parametrize("spec", F32, ids=F32_IDS)
def test_jets_in_float32_stay_float32_and_agree(spec: Spec) -> None:
    order = min(spec.order, 2)
    xs, vs, _ = _setup(spec)
    series = [None if v is None else [v] + [None] * (order - 1) for v in vs]
    _, outs64 = _jet(spec, xs, series, order)
    xs32 = [x.astype(np.float32) if is_float(x) else x for x in xs]
    s32 = [
        None if s is None else [None if c is None else c.astype(np.float32) for c in s]
        for s in series
    ]
    _, outs32 = _jet(spec, xs32, s32, order)
    for a, b in zip(outs64, outs32, strict=True):
        for c64, c32 in zip(a, b, strict=True):
            if c64 is None or c32 is None:
                continue
            assert c32.dtype == np.float32, f"{spec.name}: a float32 jet gave {c32.dtype}"
            scale = max(1.0, float(np.abs(c64).max()))
            np.testing.assert_allclose(c32, c64, rtol=2e-3, atol=2e-3 * scale, err_msg=spec.name)


@pytest.mark.parametrize("spec", THIRD, ids=THIRD_IDS)
def test_fourth_order_jet_equals_nested_derivatives(spec: Spec) -> None:
    xs, vs, us = _setup(spec, seed=5)
    want = _nested(spec, xs, vs, us, 4)
    series = [None if v is None else [v, None, None, None] for v in vs]
    y, outs = _jet(spec, xs, series, 4)
    _close(_project(y, outs, list(us), 4), want, spec)


def test_jets_through_a_checkpoint_equal_those_without() -> None:
    rng = np.random.default_rng(9)
    w, w2 = rng.standard_normal((3, 8)), rng.standard_normal((8, 1))

    def block(h: Any) -> Any:
        return F.tanh(F.affine(h, w))

    def plain(x: Any) -> Any:
        return F.affine(block(x), w2)

    def checkpointed(x: Any) -> Any:
        return F.affine(hd.checkpoint(block, x), w2)

    x, v = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(hd.jvp(checkpointed, x, v)[1], hd.jvp(plain, x, v)[1], rtol=1e-12)
    np.testing.assert_allclose(
        hd.laplacian(checkpointed, x, batch_axis=0),
        hd.laplacian(plain, x, batch_axis=0),
        rtol=1e-12,
    )


def test_a_recorded_elementwise_jet_holds_no_ones_of_the_inputs_size() -> None:
    # the derivatives f^(m) come from a jet along the unit curve x0 + t: its products
    # z_j x_1 with x_1 = ones are z_j itself, so the recorded graph holds no array of ones
    from hodiff.engine import api

    x = hd.Variable.from_array(np.linspace(-1.0, 1.0, 12).reshape(3, 4), need_grad=True)
    f = lambda z: F.sum(F.tanh(z) * F.exp(z), axis=1)  # noqa: E731
    lap = hd.laplacian(f, x, batch_axis=0, create_graph=True)
    ones = [
        v
        for g in api.topological_order([lap])
        for v in g.inputs
        if v.parent is None and not v.need_grad and v.size >= x.size and np.all(v.d == 1.0)
    ]
    assert not ones
    np.testing.assert_allclose(lap.d, hd.laplacian(f, x.d, batch_axis=0, method="nested"))
