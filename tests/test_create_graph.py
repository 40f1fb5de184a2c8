"""``hd.grad(..., create_graph=...)``: values only or a differentiable graph, never history.

Expected values are closed forms (derivatives of ``sum(sin(x) * x)`` and of ``x^4``),
the recorded path (``create_graph=True``) or finite differences.
"""

from __future__ import annotations

import _thread
import threading

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

RNG = np.random.default_rng(0)


def _f(x: hd.Variable) -> hd.Variable:
    return F.sum(F.sin(x) * x)


def _d1(x: np.ndarray) -> np.ndarray:  # d/dx sin(x) x
    return np.cos(x) * x + np.sin(x)


def _d2(x: np.ndarray) -> np.ndarray:
    return -np.sin(x) * x + 2 * np.cos(x)


def _d3(x: np.ndarray) -> np.ndarray:
    return -np.cos(x) * x - 3 * np.sin(x)


def test_values_only_equal_the_recorded_gradient_at_orders_one_to_three() -> None:
    x0 = RNG.normal(size=6)
    x = hd.Variable.from_array(x0, need_grad=True)
    (g1,) = hd.grad(_f(x), x, create_graph=False)
    assert g1.parent is None
    assert not g1.need_grad
    np.testing.assert_allclose(g1.d, _d1(x0), rtol=1e-13)
    (g,) = hd.grad(_f(x), x)
    assert g.parent is not None
    (g2,) = hd.grad(F.sum(g), x, create_graph=False)
    np.testing.assert_allclose(g2.d, _d2(x0), rtol=1e-13)
    (h,) = hd.grad(F.sum(g), x)
    (g3,) = hd.grad(F.sum(h), x, create_graph=False)
    np.testing.assert_allclose(g3.d, _d3(x0), rtol=1e-12)
    (g3r,) = hd.grad(F.sum(h), x)  # the recorded third derivative agrees
    np.testing.assert_allclose(g3.d, g3r.d, rtol=1e-14)


def test_a_value_cannot_be_differentiated_again_and_the_error_says_why() -> None:
    x = hd.Variable.from_array(RNG.normal(size=3), need_grad=True)
    (g,) = hd.grad(_f(x), x, create_graph=False)
    with pytest.raises(ValueError, match=r"create_graph=False"):
        hd.grad(F.sum(g * g), x)


def test_what_a_call_returns_does_not_depend_on_earlier_calls() -> None:
    """The same line, 60 times, a second derivative each time: the same kind of result
    (recorded, with a parent of the same type) and its derivative right at every call."""
    x = hd.Variable.from_array(np.zeros(5), need_grad=True)
    kinds = set()
    for _ in range(60):
        x0 = RNG.normal(size=5)
        x.d = x0
        (g,) = hd.grad(_f(x), x)
        (h,) = hd.grad(F.sum(g * g), x)  # 2 g g'
        kinds.add(type(h.parent).__name__)
        (k,) = hd.grad(F.sum(h), x)  # 2 (g'^2 + g g'')
        np.testing.assert_allclose(h.d, 2 * _d1(x0) * _d2(x0), rtol=1e-12)
        np.testing.assert_allclose(k.d, 2 * (_d2(x0) ** 2 + _d1(x0) * _d3(x0)), rtol=1e-11)
    assert len(kinds) == 1


def test_a_value_of_order_two_reads_the_point_of_the_call() -> None:
    """With create_graph=False the result is a value: a later x.d changes nothing in it."""
    x0, x1 = RNG.normal(size=4), RNG.normal(size=4)
    x = hd.Variable.from_array(x0, need_grad=True)
    (g,) = hd.grad(_f(x), x)
    (h,) = hd.grad(F.sum(g), x, create_graph=False)
    x.d = x1
    np.testing.assert_allclose(h.d, _d2(x0), rtol=1e-13)


def test_values_share_memory_with_no_seed_and_no_input() -> None:
    v = RNG.normal(size=4)
    x = hd.Variable.from_array(RNG.normal(size=4), need_grad=True)
    (gx,) = hd.grad(x, x, grad_outputs=v, create_graph=False)  # the seed itself
    np.testing.assert_array_equal(gx.d, v)
    gx.d[...] = 0.0
    assert np.all(v != 0.0)
    y = F.reshape(x, (2, 2))
    (gy,) = hd.grad(y, x, grad_outputs=v.reshape(2, 2), create_graph=False)  # a view of it
    assert not np.shares_memory(gy.d, v)


def test_unused_inputs_and_several_outputs() -> None:
    x = hd.Variable.from_array(RNG.normal(size=3), need_grad=True)
    w = hd.Variable.from_array(RNG.normal(size=3), need_grad=True)
    y1, y2 = F.sum(x * x), F.sum(F.exp(x))
    gx, gw = hd.grad([y1, y2], [x, w], allow_unused=True, create_graph=False)
    np.testing.assert_allclose(gx.d, 2 * x.d + np.exp(x.d), rtol=1e-14)
    np.testing.assert_array_equal(gw.d, np.zeros(3))
    with pytest.raises(ValueError, match=r"inputs\[1\]"):
        hd.grad([y1, y2], [x, w], create_graph=False)


def test_the_gradients_leave_dot_g_alone() -> None:
    x = hd.Variable.from_array(RNG.normal(size=3), need_grad=True)
    x.g = np.full(3, 7.0)
    hd.grad(_f(x), x, create_graph=False)
    np.testing.assert_array_equal(x.g, np.full(3, 7.0))


def test_static_graph_values_at_the_call_after_forward() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((4,), need_grad=True, dtype=np.float64)
        y = _f(x)
        (g,) = hd.grad(y, x)  # recorded: computed by .forward()
        s = F.sum(g)
        with pytest.raises(RuntimeError, match=r"create_graph=False.*forward"):
            hd.grad(s, x, create_graph=False)  # nothing was run yet
        for _ in range(3):
            x0 = RNG.normal(size=4)
            x.d = x0
            s.forward()
            (h,) = hd.grad(s, x, create_graph=False)
            np.testing.assert_allclose(g.d, _d1(x0), rtol=1e-13)
            np.testing.assert_allclose(h.d, _d2(x0), rtol=1e-13)


def test_inside_vmap_values_are_batched_and_unlinked() -> None:
    X = RNG.normal(size=(5, 3))

    def second(x: hd.Variable, create_graph: bool) -> hd.Variable:
        (g,) = hd.grad(_f(x), x)
        (h,) = hd.grad(F.sum(g), x, create_graph=create_graph)
        return h

    got = hd.vmap(lambda x: second(x, False))(X)
    want = hd.vmap(lambda x: second(x, True))(X)
    np.testing.assert_allclose(got.d, _d2(X), rtol=1e-13)
    np.testing.assert_allclose(got.d, want.d, rtol=1e-14)


def test_hvp_through_values_matches_finite_differences() -> None:
    x0, v = RNG.normal(size=5), RNG.normal(size=5)

    def grad_at(a: np.ndarray) -> np.ndarray:
        x = hd.Variable.from_array(a, need_grad=True)
        return hd.grad(F.sum(F.tanh(x) ** 3), x, create_graph=False)[0].d

    x = hd.Variable.from_array(x0, need_grad=True)
    (g,) = hd.grad(F.sum(F.tanh(x) ** 3), x)
    (hv,) = hd.grad(F.sum(g * v), x, create_graph=False)
    eps = 1e-6
    fd = (grad_at(x0 + eps * v) - grad_at(x0 - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hv.d, fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("start", ["threading", "_thread"])
def test_grad_in_a_thread(start: str) -> None:
    """No frame walking: hd.grad works at any stack depth, in any kind of thread."""
    x0 = RNG.normal(size=4)
    out: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            x = hd.Variable.from_array(x0, need_grad=True)
            (g,) = hd.grad(_f(x), x)
            (h,) = hd.grad(F.sum(g), x)
            (k,) = hd.grad(F.sum(g), x, create_graph=False)
            out["h"], out["k"] = h.d, k.d
        except BaseException as e:  # reported in the main thread
            out["error"] = e
        finally:
            done.set()

    if start == "threading":
        threading.Thread(target=work).start()
    else:
        _thread.start_new_thread(work, ())
    assert done.wait(30)
    assert "error" not in out, out.get("error")
    np.testing.assert_allclose(out["h"], _d2(x0), rtol=1e-13)
    np.testing.assert_allclose(out["k"], _d2(x0), rtol=1e-13)


def test_under_no_grad_both_give_values() -> None:
    x0 = RNG.normal(size=3)
    x = hd.Variable.from_array(x0, need_grad=True)
    (g,) = hd.grad(_f(x), x)
    s = F.sum(g)
    with hd.no_grad():
        (a,) = hd.grad(s, x)
        (b,) = hd.grad(s, x, create_graph=False)
    assert a.parent is None
    assert b.parent is None
    np.testing.assert_allclose(a.d, _d2(x0), rtol=1e-13)
    np.testing.assert_allclose(b.d, _d2(x0), rtol=1e-13)
