"""The value-reading tools inside ``hd.vmap``: curvature, solvers, the scipy bridge, gradcheck.

They read arrays and return arrays (or change state in place), so they have no per-example
form inside the mapped function. Given a batched variable (or, for an in-place solver step,
called inside vmap at all) each raises at entry an error naming the function, the argument,
its per-example shape, the batch size and the dtype, before any gradient is recorded or any
parameter touched. Where nothing batched reaches them they run, and give what they give
outside vmap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.curvature as C
import hodiff.functions as F
import hodiff.solvers as S
from hodiff.testing import check_function
from hodiff.transforms import curvature as curvature_impl

B = 4
RNG = np.random.default_rng(0)
X = RNG.standard_normal((B, 3))


def _w() -> hd.Variable:
    return hd.Variable.from_array(np.array([0.3, -1.2, 0.7]), need_grad=True)


def inside(body: Callable[[hd.Variable], Any], xs: Any = X) -> None:
    """Runs ``body(x)`` inside ``hd.vmap`` over the rows of ``xs``."""

    def mapped(x: hd.Variable) -> hd.Variable:
        body(x)
        return x * 1.0

    hd.vmap(mapped)(xs)


def message_names(err: pytest.ExceptionInfo[Any], *parts: str) -> None:
    text = str(err.value)
    for part in parts:
        assert part in text, f"{part!r} not in {text!r}"


class _Spy:
    """Replaces ``module.grad``: records whether a gradient was taken."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
        self.calls = 0
        real = module.grad

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, "grad", spy)


# ---------------------------------------------------------------- hodiff.curvature
CURVATURE = {
    "eigenvalues": lambda loss, params, **kw: C.eigenvalues(loss, params, **kw),
    "trace": lambda loss, params, **kw: C.trace(loss, params, n_samples=3, **kw),
    "density": lambda loss, params, **kw: C.density(loss, params, n_probes=2, n_steps=3, **kw),
}


def _loss(x: hd.Variable, w: hd.Variable) -> hd.Variable:
    return F.sum(F.sin(x * w) ** 2)


@pytest.mark.parametrize("fn", sorted(CURVATURE))
@pytest.mark.parametrize(
    ("case", "label", "shape"),
    [
        ("loss", "loss", "()"),  # the loss depends on the example
        ("params", "params", "(3,)"),  # the mapped argument as a parameter
        ("params list", "params[1]", "(3,)"),
        ("params dict", "params['x']", "(3,)"),
        ("data", "loss(batch 0)", "()"),  # a callable loss over batches
    ],
)
def test_curvature_refuses_batched(
    monkeypatch: pytest.MonkeyPatch, fn: str, case: str, label: str, shape: str
) -> None:
    spy = _Spy(monkeypatch, curvature_impl)
    w = _w()
    w.g = np.array([1.0, 2.0, 3.0])
    d0, g0 = w.d.copy(), w.g.copy()
    call = CURVATURE[fn]
    xs = hd.Variable.from_array(X, need_grad=True)  # batched params with need_grad

    def body(x: hd.Variable) -> None:
        if case == "loss":
            call(_loss(x, w), w)
        elif case == "params":
            call(F.sum(F.sin(w) ** 2), x)
        elif case == "params list":
            call(F.sum(F.sin(w) ** 2), [w, x])
        elif case == "params dict":
            call(F.sum(F.sin(w) ** 2), {"w": w, "x": x})
        else:
            call(lambda b: _loss(b, w), w, data=[x])

    with pytest.raises(TypeError) as err:
        inside(body, xs)
    message_names(
        err, f"curvature.{fn}: {label} is a batched Variable inside hd.vmap", shape, f"batch {B}"
    )
    message_names(err, "float64", "outside hd.vmap")
    assert spy.calls == 0  # no gradient recorded
    np.testing.assert_array_equal(w.d, d0)
    np.testing.assert_array_equal(w.g, g0)


def test_curvature_refuses_a_batched_grid() -> None:
    w = _w()
    with pytest.raises(TypeError) as err:
        inside(lambda x: C.density(F.sum(w**4), w, grid=x))
    message_names(err, "curvature.density: grid is a batched Variable", "(3,)", f"batch {B}")
    with pytest.raises(TypeError) as err:
        inside(lambda x: C.plot_density(x, x, "unused.png"))
    message_names(err, "curvature.plot_density: grid is a batched Variable", "(3,)")


@pytest.mark.parametrize("fn", sorted(CURVATURE))
def test_curvature_of_an_unbatched_loss_runs_inside_vmap(fn: str) -> None:
    """Nothing batched reaches it: the same result as outside vmap (as a loop would give)."""
    w = _w()
    outside = CURVATURE[fn](F.sum(w**4) / 12, w)
    got: list[Any] = []
    inside(lambda x: got.append(CURVATURE[fn](F.sum(w**4) / 12, w)))
    if fn == "eigenvalues":
        np.testing.assert_allclose(got[0][0], outside[0], rtol=1e-12)
        np.testing.assert_allclose(got[0][0], [np.max(w.d**2)], rtol=1e-10)  # H = diag(w^2)
    elif fn == "trace":
        assert float(got[0]) == pytest.approx(float(outside), rel=1e-12)
        assert float(got[0]) == pytest.approx(float(np.sum(w.d**2)), rel=1e-12)
    else:
        np.testing.assert_allclose(got[0][1], outside[1], rtol=1e-12)


# ---------------------------------------------------------------- hodiff.solvers
def _solver_after_one_step() -> tuple[S.Solver, hd.Variable]:
    w = _w()
    solver = S.Adam(lr=0.1)
    solver.set_parameters({"w": w})
    w.g = np.array([0.5, -1.0, 2.0])
    solver.update()  # outside vmap: a state to compare
    w.g = np.array([1.0, 1.0, -3.0])
    return solver, w


def _snapshot(solver: S.Solver, w: hd.Variable) -> dict[str, Any]:
    state = {
        k: {s: np.array(a, copy=True) for s, a in st.items()} for k, st in solver._state.items()
    }
    return {"d": w.d.copy(), "g": w.g.copy(), "state": state, "params": dict(solver._params)}


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    np.testing.assert_array_equal(a["d"], b["d"])
    np.testing.assert_array_equal(a["g"], b["g"])
    assert a["params"] == b["params"]
    assert a["state"].keys() == b["state"].keys()
    for k in a["state"]:
        for s in a["state"][k]:
            np.testing.assert_array_equal(a["state"][k][s], b["state"][k][s])


@pytest.mark.parametrize(
    ("method", "args"),
    [("update", ()), ("weight_decay", (0.1,)), ("clip_grad_by_norm", (0.01,))],
)
def test_solver_in_place_steps_are_refused_inside_vmap(method: str, args: tuple[Any, ...]) -> None:
    solver, w = _solver_after_one_step()
    before = _snapshot(solver, w)
    with pytest.raises(RuntimeError) as err:
        inside(lambda x: getattr(solver, method)(*args))
    message_names(err, f"Adam.{method}: called inside hd.vmap (batch {B})", "once per example")
    _same(before, _snapshot(solver, w))
    getattr(solver, method)(*args)  # outside vmap it runs, and changes something
    after = _snapshot(solver, w)
    changed = not np.array_equal(after["d"], before["d"]) or not np.array_equal(
        after["g"], before["g"]
    )
    assert changed


def test_nested_vmap_names_both_batches() -> None:
    solver, _ = _solver_after_one_step()

    def outer(x: hd.Variable) -> hd.Variable:
        def inner(y: hd.Variable) -> hd.Variable:
            solver.update()
            return y * 1.0

        return hd.vmap(inner)(np.zeros((2, 5)))

    with pytest.raises(RuntimeError, match=re.escape(f"(batch 2 x {B})")):
        hd.vmap(outer)(X)


def test_solver_set_parameters_refuses_a_batched_variable() -> None:
    solver, w = _solver_after_one_step()
    before = _snapshot(solver, w)
    with pytest.raises(TypeError) as err:
        inside(lambda x: solver.set_parameters({"w": w, "x": x}))
    message_names(
        err,
        "Adam.set_parameters: params['x'] is a batched Variable inside hd.vmap",
        "(3,)",
        f"batch {B}",
        "float64",
    )
    _same(before, _snapshot(solver, w))  # not reset: the parameters and states are kept


def test_solver_read_only_methods_run_inside_vmap() -> None:
    """Idempotent ones give what one call (or a loop of them) gives outside vmap."""
    solver, w = _solver_after_one_step()
    seen: list[Any] = []

    def body(x: hd.Variable) -> None:
        seen.append(solver.check_inf_or_nan_grad())
        seen.append(solver.learning_rate())
        solver.set_learning_rate(0.05)
        solver.set_parameters({"w": w}, reset=False)
        solver.zero_grad()

    inside(body)
    assert seen == [False, 0.1]
    assert solver.learning_rate() == 0.05
    assert solver.get_parameters() == {"w": w}
    assert not solver._grads()  # zero_grad reset the gradient


# ---------------------------------------------------------------- hodiff.scipy
def test_scipy_bridge_refuses_batched(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("scipy")
    import hodiff.scipy as HS
    from hodiff.transforms import scipy as scipy_impl

    w = _w()
    operator = HS.HessianOperator(F.sum(w**3), [w])
    spy = _Spy(monkeypatch, scipy_impl)
    cases = [
        (lambda x: HS.HessianOperator(_loss(x, w), [w]), "HessianOperator: loss", "()"),
        (
            lambda x: HS.HessianOperator(F.sum(w**3), [w, x], allow_unused=True),
            "HessianOperator: params[1]",
            "(3,)",
        ),
        (lambda x: HS.minimize(lambda u: F.sum(u**2), x), "hodiff.scipy.minimize: x0", "(3,)"),
        (
            lambda x: HS.minimize(lambda u: F.sum((u - x) ** 2), np.zeros(3)),
            "hodiff.scipy.minimize: f(x)",
            "()",
        ),
        (lambda x: HS.Objective(lambda u: F.sum(u**2)).fun(x), "Objective: x", "(3,)"),
        (
            lambda x: HS.Objective(lambda u: F.sum(u * x)).jac(np.ones(3)),
            "Objective: f(x)",
            "()",
        ),
        (
            lambda x: HS.Objective(lambda u: F.sum(u**3)).hessp(np.ones(3), x),
            "Objective.hessp: p",
            "(3,)",
        ),
        (lambda x: operator @ x, "HessianOperator: v", "(3,)"),  # built outside vmap
        (lambda x: operator.matvec(x), "HessianOperator: v", "(3,)"),
        (lambda x: operator.rmatvec(x), "HessianOperator: v", "(3,)"),
    ]
    for body, where, shape in cases:
        with pytest.raises(TypeError) as err:
            inside(body)
        message_names(err, f"{where} is a batched Variable inside hd.vmap", shape, f"batch {B}")
    assert spy.calls == 0
    assert w.g is None or not np.any(w.g)


def test_scipy_bridge_runs_inside_vmap_when_nothing_batched_reaches_it() -> None:
    pytest.importorskip("scipy")
    import hodiff.scipy as HS

    got: list[Any] = []
    inside(lambda x: got.append(HS.minimize(lambda u: F.sum((u - 2.0) ** 2), np.zeros(3)).x))
    np.testing.assert_allclose(got[0], [2.0, 2.0, 2.0], atol=1e-8)


# ---------------------------------------------------------------- derivative checks
@pytest.mark.parametrize("fast", [False, True])
def test_gradcheck_refuses_batched(fast: bool) -> None:
    with pytest.raises(TypeError) as err:
        inside(lambda x: hd.gradcheck(F.sin, (np.ones(3), x), fast=fast))
    message_names(err, "gradcheck: inputs[1] is a batched Variable inside hd.vmap", "(3,)")
    with pytest.raises(TypeError) as err:
        inside(lambda x: hd.gradcheck(lambda u: F.sin(u * x), np.ones(3), fast=fast))
    message_names(err, "gradcheck: f(*inputs) is a batched Variable", f"batch {B}")


def test_check_function_refuses_batched() -> None:
    with pytest.raises(TypeError) as err:
        inside(lambda x: check_function(F.sin, x))
    message_names(err, "check_function: inputs is a batched Variable inside hd.vmap", "(3,)")
    with pytest.raises(TypeError) as err:
        inside(lambda x: check_function(lambda u: F.sin(u * x), np.ones(3), order=1))
    message_names(err, "check_function: f(*inputs)[0] is a batched Variable", f"batch {B}")


def test_gradcheck_of_an_unbatched_function_runs_inside_vmap() -> None:
    got: list[Any] = []
    inside(lambda x: got.append(hd.gradcheck(F.sin, np.array([0.2, -0.4]), order=2)))
    assert bool(got[0])
    assert len(got[0].rows) == 4  # 2 elements x 2 orders, all checked


# ---------------------------------------------------------------- the batched variable itself
def test_batched_variable_refuses_bool_and_asarray() -> None:
    with pytest.raises(TypeError, match=r"truth value of a batched variable.*F\.where"):
        inside(lambda x: bool(F.sum(x) > 0.0))
    with pytest.raises(TypeError, match=r"per-example shape \(3,\), batch 4.*cannot become an"):
        inside(lambda x: np.asarray(x))


def test_a_kept_batched_variable_is_named_as_such() -> None:
    kept: list[hd.Variable] = []
    inside(kept.append)
    w = _w()
    with pytest.raises(
        TypeError, match=r"params is a batched Variable of an hd\.vmap that has returned"
    ):
        C.trace(F.sum(w**2), kept[0])
