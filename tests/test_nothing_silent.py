"""Nothing silently wrong: Taylor mode, checkpoints, the checker, saved graphs and a new
user's traps.

Each case gives the right number or a clear error naming the function, the argument and
what to do. Expected values come from closed forms, finite differences, a loop of plain
calls or numpy, never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


# ---------------------------------------------------------------- tangents and series
def test_jvp_refuses_a_complex_tangent_for_a_real_input() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"jvp: v is complex .*inputs is real"):
        hd.jvp(F.sin, x, np.array([1j, 1.0]))
    with pytest.raises(ValueError, match=r"jvp: v\[1\] is complex"):
        hd.jvp(lambda a, b: a * b, (x, x), (np.ones(2), np.array([0.0, 2j])))


def test_jet_refuses_a_complex_coefficient_for_a_real_primal() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"jet: series\[0\]\[1\] is complex"):
        hd.jet(F.sin, (x,), ([np.ones(2), np.array([1j, 0.0])],))


def test_jet_takes_variables_in_series() -> None:
    x = np.array([0.5, 1.0])
    v = np.array([1.0, -2.0])
    _y0, (y1, y2) = hd.jet(F.sin, (x,), ([hd.Variable.from_array(v), np.zeros(2)],))
    np.testing.assert_allclose(y1, np.cos(x) * v, rtol=1e-14)
    np.testing.assert_allclose(y2, -np.sin(x) * v * v, rtol=1e-14)


def test_jet_with_one_list_too_few_shows_the_nesting() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"series\[0\] must be a list.*\(\[v\],\)"):
        hd.jet(F.tanh, (x,), [np.ones(2)])


# ---------------------------------------------------------------- checkpoints and solvers
def _layer_checkpoint_loss(x: hd.Variable) -> hd.Variable:
    import hodiff.parametric as PF

    def block(a: hd.Variable) -> hd.Variable:
        with hd.parameter_scope("block"):
            return F.tanh(PF.affine(a, 3))

    return F.sum(hd.checkpoint(block, x) ** 2)


@pytest.mark.parametrize("kind", ["Sgd", "Adam"])
def test_a_solver_update_between_forward_and_backward_of_a_checkpoint_raises(kind) -> None:
    import hodiff.solvers as S

    hd.clear_parameters()
    hd.seed(0)
    x = hd.Variable.from_array(np.random.default_rng(0).standard_normal((4, 2)))
    loss = _layer_checkpoint_loss(x)
    params = hd.get_parameters()
    solver = getattr(S, kind)(lr=0.1)
    solver.set_parameters(params)
    solver.zero_grad()
    for p in params.values():
        p.g = np.ones(p.shape)
    solver.update()
    with pytest.raises(RuntimeError, match=rf"parameter 'block/affine/W' .*{kind}\.update\(\)"):
        loss.backward()
    # a gradient recorded through the checkpoint (a gradient penalty) refuses too
    xv = hd.Variable.from_array(x.d, need_grad=True)
    loss = _layer_checkpoint_loss(xv)
    (gx,) = hd.grad(loss, xv, create_graph=True)
    solver.update()
    with pytest.raises(RuntimeError, match=r"parameter 'block/affine/"):
        F.sum(gx * gx).backward()
    # the forward computed again after the update: the gradient of the new values
    solver.zero_grad()
    loss = _layer_checkpoint_loss(x)
    loss.backward()
    w, b = params["block/affine/W"].d, params["block/affine/b"].d
    h = np.tanh(x.d @ w + b)
    gw = x.d.T @ (2 * h * (1 - h * h))  # d sum(tanh(xW + b)^2) / dW, by hand
    np.testing.assert_allclose(params["block/affine/W"].g, gw, rtol=1e-5)  # float32 weights
    hd.clear_parameters()


# ---------------------------------------------------------------- state updated once per call
_X = np.random.default_rng(3).standard_normal((5, 3))


def _bn(x: hd.Variable) -> hd.Variable:
    import hodiff.parametric as PF

    with hd.parameter_scope("bn"):
        return PF.batch_normalization(x, batch_stat=True, decay_rate=0.5)


def _bn_loss(x: hd.Variable) -> hd.Variable:
    return F.sum(F.tanh(_bn(x)) ** 2)


def _bn_checkpointed(x: hd.Variable) -> hd.Variable:
    return F.sum(F.tanh(hd.checkpoint(_bn, x)) ** 2)


def _grad_of_checkpoint(x: np.ndarray) -> None:
    xv = hd.Variable.from_array(x, need_grad=True)
    _bn_checkpointed(xv).backward()


def _penalty_of_checkpoint(x: np.ndarray) -> None:
    xv = hd.Variable.from_array(x, need_grad=True)
    (g,) = hd.grad(_bn_checkpointed(xv), xv, create_graph=True)
    F.sum(g * g).backward()


ONE_CALL = {
    "jvp": lambda x: hd.jvp(_bn_loss, x, np.ones_like(x)),
    "jet": lambda x: hd.jet(_bn_loss, (x,), ([np.ones_like(x), np.ones_like(x)],)),
    "laplacian taylor": lambda x: hd.laplacian(_bn_loss, x),
    "laplacian taylor recorded": lambda x: hd.laplacian(_bn_loss, x, create_graph=True),
    "laplacian stochastic": lambda x: hd.laplacian(_bn_loss, x, method="stochastic", num_samples=6),
    "laplacian nested": lambda x: hd.laplacian(_bn_loss, x, method="nested"),
    "biharmonic": lambda x: hd.biharmonic(_bn_loss, x),
    "hessian": lambda x: hd.hessian(_bn_loss, x),
    "checkpoint backward": _grad_of_checkpoint,
    "checkpoint penalty": _penalty_of_checkpoint,
    "jvp of checkpoint": lambda x: hd.jvp(_bn_checkpointed, x, np.ones_like(x)),
}


@pytest.mark.parametrize("name", list(ONE_CALL))
def test_a_transform_updates_running_statistics_once(name) -> None:
    hd.clear_parameters()
    ONE_CALL[name](_X.copy())
    stats = hd.get_parameters(grad_only=False)
    mean, var = stats["bn/bn/mean"].d.ravel(), stats["bn/bn/var"].d.ravel()
    # one update from mean 0, variance 1 with decay 0.5 (NNabla: the unbiased variance)
    np.testing.assert_allclose(mean, 0.5 * _X.mean(0), rtol=1e-6)
    np.testing.assert_allclose(var, 0.5 + 0.5 * _X.var(0, ddof=1), rtol=1e-6)
    hd.clear_parameters()


def test_the_jvp_through_batch_normalization_is_the_directional_derivative() -> None:
    hd.clear_parameters()
    v = np.random.default_rng(4).standard_normal(_X.shape)

    def plain(x: np.ndarray) -> float:
        m = x.mean(0)
        s = np.sqrt(x.var(0) + 1e-5)
        return float(np.sum(np.tanh((x - m) / s) ** 2))

    eps = 1e-6
    fd = (plain(_X + eps * v) - plain(_X - eps * v)) / (2 * eps)
    _, jv = hd.jvp(_bn_loss, _X, v)
    np.testing.assert_allclose(jv, fd, rtol=1e-6)
    hd.clear_parameters()


# ---------------------------------------------------------------- the checker
_P = np.array([0.5, -1.5, 0.7])


class _RecordedIgnoresAccum(hd.Function):
    """y = x^2 whose recorded path (hd.grad) overwrites where it must add."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] ** 2

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            gx = outputs[0].grad * 2.0 * inputs[0].data
            if isinstance(gx, hd.Variable):
                inputs[0].grad = gx
            else:
                inputs[0].store(gx, accum[0])


class _Mul(hd.Function):
    def setup_impl(self, inputs):
        return [(inputs[0].shape, inputs[0].dtype)]

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] * inputs[1]

    def backward_impl(self, inputs, outputs, prop_down, accum):
        a, b = inputs
        if prop_down[0]:
            a.store(outputs[0].grad * b.data, accum[0])
        if prop_down[1]:
            b.store(outputs[0].grad * a.data, accum[1])


class _MulOffWhenPartlyAskedRecorded(_Mul):
    """Off by 1e-3 when prop_down is partly false, on the recorded path only."""

    def backward_impl(self, inputs, outputs, prop_down, accum):
        a, b = inputs
        recorded = isinstance(a.data, hd.Variable)
        off = 1.0 + 1e-3 if recorded and not all(prop_down) else 1.0
        if prop_down[0]:
            a.store(outputs[0].grad * b.data * off, accum[0])
        if prop_down[1]:
            b.store(outputs[0].grad * a.data * off, accum[1])


class _MulGradOff(_Mul):
    """``gy * other``, off by 1e-3 when prop_down is partly false."""

    def backward_impl(self, inputs, outputs, prop_down, accum):
        a, b = inputs
        off = 1.0 if all(prop_down) else 1.0 + 1e-3
        if prop_down[0]:
            a.store(outputs[0].grad * b.data * off, accum[0])
        if prop_down[1]:
            b.store(outputs[0].grad * a.data * off, accum[1])


class _MulWithOffGradient(_Mul):
    """A correct first-order rule whose gradient graph uses ``_MulGradOff``: wrong from
    order 2 on, and only when some inputs are not asked for.
    """

    def backward_impl(self, inputs, outputs, prop_down, accum):
        a, b = inputs
        gy = outputs[0].grad
        if not isinstance(gy, hd.Variable):
            super().backward_impl(inputs, outputs, prop_down, accum)
            return
        if prop_down[0]:
            a.store(_MulGradOff()(gy, b.data), accum[0])
        if prop_down[1]:
            b.store(_MulGradOff()(gy, a.data), accum[1])


def test_check_function_checks_accumulate_on_the_recorded_path() -> None:
    from hodiff.testing import check_function

    x = hd.Variable.from_array(_P, need_grad=True)
    (g,) = hd.grad(F.sum(_RecordedIgnoresAccum()(x) + x), x)
    assert not np.allclose(g.d, 2 * _P + 1)  # the defect: the graph loses the "+ x" path
    report = check_function(_RecordedIgnoresAccum(), _P, order=1, raise_exception=False)
    row = report["accumulate vs overwrite"]
    assert not row.ok
    assert "recorded path" in row.detail


def test_check_function_catches_a_rule_off_when_some_inputs_are_not_asked_for() -> None:
    from hodiff.testing import check_function

    q = _P[::-1].copy()
    report = check_function(_MulOffWhenPartlyAskedRecorded(), (_P, q), raise_exception=False)
    assert not report["prop_down=False untouched"].ok
    assert not report["finite differences, order 2"].ok
    report = check_function(_MulWithOffGradient(), (_P, q), order=3, raise_exception=False)
    assert report["finite differences, order 1"].ok  # the first-order rule is right
    for k in (2, 3):
        row = report[f"finite differences, order {k}"]
        assert not row.ok
        assert "(alone)" in row.detail
    assert check_function(_Mul(), (_P, q), order=3)  # and a right rule passes


class _SinOnePercentOff(hd.Function):
    """sin whose backward is 1% wrong; no Taylor rule of its own."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = np.sin(inputs[0])

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * F.cos(inputs[0].data) * 1.01, accum[0])


class _Sin(_SinOnePercentOff):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * F.cos(inputs[0].data), accum[0])


def test_dot_product_test_compares_with_something_independent_of_the_rule() -> None:
    from hodiff.testing import dot_product_test

    report = dot_product_test(lambda x: _SinOnePercentOff()(x) * x, _P, raise_exception=False)
    assert not report
    row = report.rows[0]
    # the reverse side is 1% off in the cos term: far above the tolerance
    assert row.error > 1e-4 * abs(row.reverse)
    assert row.error > 1e3 * row.tolerance
    assert "differences" in row.by
    good = dot_product_test(lambda x: _Sin()(x) * x, _P, order=2)
    assert good
    assert all(r.error <= r.tolerance for r in good.rows)
    # hodiff's own primitives keep the rounding-level comparison of two rule sets
    own = dot_product_test(lambda x: F.sin(x) * x, _P, order=2)
    assert [r.by for r in own.rows] == ["jvp", "jvp"]


@pytest.mark.parametrize(
    "f",
    [
        lambda x: F.sum(F.dropout(x, p=0.5) ** 2),
        lambda x: F.sum(F.sin(x) * F.rand(shape=(5,))),
        lambda x: F.sum(F.tanh(x * F.randn(shape=(5,)))),
    ],
)
def test_gradcheck_evaluates_a_random_function_with_the_same_draws(f) -> None:
    hd.seed(0)
    x = np.array([0.5, -1.5, 0.7, 0.2, 1.1])
    assert hd.gradcheck(f, x, order=2)
    # and a rule that is wrong is still caught with random draws in f
    assert not hd.gradcheck(
        lambda x: F.sum(_SinOnePercentOff()(F.dropout(x, p=0.5))), x, raise_exception=False
    )


# ---------------------------------------------------------------- saved graphs
def _net(in_dim: int):
    rng = np.random.default_rng(0)
    w1 = hd.Variable.from_array(rng.standard_normal((in_dim, 5)), need_grad=True)
    w2 = hd.Variable.from_array(rng.standard_normal((5, 1)), need_grad=True)
    return lambda x: F.affine(F.tanh(F.affine(x, w1)), w2)


def _penalty(net, x: hd.Variable) -> hd.Variable:
    (g,) = hd.grad(F.sum(net(x)), x, create_graph=True)
    return F.sum((F.sqrt(F.sum(g * g, axis=1)) - 1) ** 2)


def test_a_saved_gradient_penalty_refuses_another_batch_by_name(tmp_path) -> None:
    net = _net(2)
    rng = np.random.default_rng(1)
    x = hd.Variable.from_array(rng.standard_normal((4, 2)), need_grad=True)
    hd.save_graph(tmp_path / "gp", _penalty(net, x), x)
    f = hd.load_graph(tmp_path / "gp")
    x4 = rng.standard_normal((4, 2))
    ref = _penalty(net, hd.Variable.from_array(x4, need_grad=True)).d
    np.testing.assert_allclose(f(x4).d, ref, rtol=1e-13)
    for n in (1, 3):
        with pytest.raises(ValueError, match=r"saved for inputs of shapes \[\(4, 2\)\].*cannot"):
            f(rng.standard_normal((n, 2)))


def test_a_saved_nested_laplacian_refuses_another_batch_by_name(tmp_path) -> None:
    net = _net(3)
    rng = np.random.default_rng(2)
    x = hd.Variable.from_array(rng.standard_normal((4, 3)), need_grad=True)
    lap = hd.laplacian(net, x, batch_axis=0, method="nested", create_graph=True)
    hd.save_graph(tmp_path / "lap", lap, x)
    f = hd.load_graph(tmp_path / "lap")
    x4 = rng.standard_normal((4, 3))
    ref = [hd.laplacian(net, x4[n : n + 1], method="nested") for n in range(4)]  # one by one
    np.testing.assert_allclose(f(x4).d, ref, rtol=1e-12)
    with pytest.raises(ValueError, match=r"function \d+ \(\w+\) has shape=\(4, "):
        f(rng.standard_normal((1, 3)))


def test_a_graph_that_cannot_be_rebuilt_is_not_saved(tmp_path) -> None:
    net = _net(3)
    x = hd.Variable.from_array(np.random.default_rng(3).standard_normal((4, 3)), need_grad=True)
    lap = hd.laplacian(net, x, batch_axis=0, method="taylor", create_graph=True)
    with pytest.raises(ValueError, match=r"save_graph: .*cannot be rebuilt.*method=\"nested\""):
        hd.save_graph(tmp_path / "lap", lap, x)
    assert not (tmp_path / "lap").exists()


# ---------------------------------------------------------------- random draws in vmap
@pytest.mark.parametrize(
    "draw", [lambda: F.rand(low=0.5, high=1.5, shape=(4,)), lambda: F.randn(shape=(4,))]
)
def test_random_functions_inside_a_checkpoint_inside_vmap(draw) -> None:
    x = np.random.default_rng(5).uniform(0.3, 1.2, (3, 4))  # sin(x) away from 0

    def seg(a: hd.Variable) -> hd.Variable:
        return F.sin(a) * draw()

    xv = hd.Variable.from_array(x, need_grad=True)
    y = hd.vmap(lambda a: hd.checkpoint(seg, a))(xv)
    F.sum(y).backward()
    r = y.d / np.sin(x)  # the draws, read back from the values
    assert np.ptp(r, axis=0).max() > 1e-3  # one draw per example
    np.testing.assert_allclose(xv.g, np.cos(x) * r, rtol=1e-12)  # d/dx sin(x) r, same r
    (g,) = hd.grad(F.sum(hd.vmap(lambda a: hd.checkpoint(seg, a))(xv) ** 2), xv)
    y2 = hd.vmap(lambda a: hd.checkpoint(seg, a))(xv).d
    assert g.shape == x.shape
    assert np.isfinite(g.d).all()
    assert y2.shape == x.shape


# ---------------------------------------------------------------- static graphs
@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_a_static_laplacian_follows_reset_shape(method) -> None:
    rng = np.random.default_rng(6)
    w = hd.Variable.from_array(rng.standard_normal((16, 1)), need_grad=True)

    def net(x: hd.Variable) -> hd.Variable:
        return F.tanh(F.affine(x, w)) ** 2

    with hd.auto_forward(False):
        x = hd.Variable((64, 16), need_grad=True, dtype=np.float64)
        lap = hd.laplacian(net, x, batch_axis=0, method=method, create_graph=True)
    for n in (64, 1, 5):
        x.reset_shape((n, 16), force=True)
        x.d = rng.standard_normal((n, 16))
        lap.forward()
        # closed form: f = t^2, t = tanh(a), a = x w: d2f/dx_i^2 = w_i^2 (2 - 8 t^2 + 6 t^4)
        t = np.tanh(x.d @ w.d)[:, 0]
        want = np.sum(w.d**2) * (2 - 8 * t**2 + 6 * t**4)
        np.testing.assert_allclose(lap.d, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- a new user's traps
def test_laplacian_says_batch_axis_and_one_input() -> None:
    x = np.random.default_rng(7).standard_normal((4, 3))
    with pytest.raises(ValueError, match="pass batch_axis=0"):
        hd.laplacian(lambda a: F.sum(F.tanh(a), axis=1), x)
    with pytest.raises(TypeError, match=r"laplacian: f takes 2 arguments \(a, b\).*one input"):
        hd.laplacian(lambda a, b: F.sum(a * b), x)
    with pytest.raises(TypeError, match=r"biharmonic: f takes 2 arguments"):
        hd.biharmonic(lambda a, b: F.sum(a * b), x)


def test_adam_takes_nnablas_alpha() -> None:
    import hodiff.solvers as S

    def step(solver) -> np.ndarray:
        w = hd.Variable.from_array(np.array([1.0, -2.0]), need_grad=True)
        solver.set_parameters({"w": w})
        w.g = np.array([0.5, 0.25])
        solver.update()
        return w.d

    # Adam's first step moves each weight by lr (m/(sqrt(v)) = sign(g))
    np.testing.assert_allclose(step(S.Adam(alpha=0.01)), [0.99, -2.01], rtol=1e-6)
    with pytest.raises(TypeError, match="alpha is NNabla's name of lr"):
        S.Adam(lr=0.1, alpha=0.01)


def test_saved_files_take_the_umask_and_h5_is_named(tmp_path, monkeypatch) -> None:
    import os

    monkeypatch.chdir(tmp_path)
    hd.clear_parameters()
    with hd.parameter_scope("net"):
        hd.get_parameter_or_create("w", (2,), need_grad=True)
    old = os.umask(0o022)
    try:
        np.save(tmp_path / "ref.npy", np.ones(2))
        hd.save_parameters(tmp_path / "p.npz")
        with pytest.warns(UserWarning, match=r"not the \.h5 format.*name it \.npz"):
            hd.save_parameters(tmp_path / "p.h5")
    finally:
        os.umask(old)
    want = os.stat(tmp_path / "ref.npy").st_mode & 0o777
    assert want == 0o644
    assert os.stat(tmp_path / "p.npz").st_mode & 0o777 == want
    assert os.stat(tmp_path / "p.h5").st_mode & 0o777 == want
    hd.clear_parameters()


def test_the_mpi_example_limits_blas_threads() -> None:
    import ast
    from pathlib import Path

    source = (Path(__file__).parent.parent / "examples" / "wgan_gp_mpi.py").read_text()
    main = next(
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "main"
    )
    calls = [n for n in ast.walk(main) if isinstance(n, ast.Call)]
    assert any(getattr(c.func, "id", "") == "threadpool_limits" for c in calls)


def test_the_docs_command_works_without_a_source_checkout(tmp_path, monkeypatch, capsys) -> None:
    import hodiff.__main__ as cli

    # an installed hodiff: the docs folder two levels above hodiff/tools/ does not exist
    monkeypatch.setattr(cli, "PATH", tmp_path / "site-packages" / "docs" / "functions.md")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["docs"]) == 0
    text = (tmp_path / "functions.md").read_text()
    assert "softmax_cross_entropy" in text
    assert cli.main(["docs", str(tmp_path / "ref.md")]) == 0
    assert (tmp_path / "ref.md").read_text() == text
    assert cli.main(["docs", str(tmp_path / "missing" / "f.md")]) == 2
    assert "does not exist" in capsys.readouterr().err
