"""Gradients of gradients recorded when first walked (hodiff/deferred.py).

Every expected value comes from another computation: the same gradient recorded at once
(``record_at_once``), closed forms, or finite differences.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff import deferred, graph
from hodiff.deferred import DeferredGrad, is_enabled, record_at_once
from hodiff.functions.arithmetic import Identity


@pytest.fixture(autouse=True)
def _fresh_sites() -> None:
    """Each test starts with no call site whose deferred results were walked."""
    deferred._sites.clear()


def _leaf(a: object) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=True)


def _chain(x: hd.Variable, w: hd.Variable) -> hd.Variable:
    return F.sum(F.tanh(x * w) * F.sin(x) + F.exp(w * 0.3) * x**2)


def _second(x: hd.Variable, w: hd.Variable, wrt: list[hd.Variable]) -> list[hd.Variable]:
    (gx,) = hd.grad(_chain(x, w), x)
    return hd.grad(F.sum(gx * gx), wrt)


def _assert_numbering(roots: list[hd.Variable]) -> None:
    """Every node is numbered after the nodes its inputs come from, and none is deferred."""
    for f in graph.topological_order(roots):
        assert not isinstance(f, DeferredGrad)
        for x in f.inputs:
            if x.parent is not None:
                assert x.parent.seq < f.seq, (f.name, x.parent.name)


RNG = np.random.default_rng(0)
X0, W0 = RNG.standard_normal(5), RNG.standard_normal(5)


def test_first_order_is_recorded_at_once() -> None:
    x = _leaf(X0)
    (g,) = hd.grad(_chain(x, _leaf(W0)), x)
    assert not isinstance(g.parent, DeferredGrad)


def test_a_gradient_of_a_gradient_is_deferred_with_the_recorded_values() -> None:
    x, w = _leaf(X0), _leaf(W0)
    x.g = np.full(5, 7.0)
    hx, hw = _second(x, w, [x, w])
    np.testing.assert_array_equal(x.g, 7.0)  # hd.grad writes no .g, deferred or not
    assert isinstance(hx.parent, DeferredGrad)
    assert isinstance(hw.parent, DeferredGrad)
    assert hx.need_grad
    assert hx.shape == (5,)
    assert hx.dtype == np.float64
    with record_at_once():
        ex, ew = _second(x, w, [x, w])
    assert not isinstance(ex.parent, DeferredGrad)
    np.testing.assert_allclose(hx.d, ex.d, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(hw.d, ew.d, rtol=1e-13, atol=1e-13)


def test_closed_form_orders_two_to_four() -> None:
    # y = x^5: y' = 5x^4, y'' = 20x^3, y''' = 60x^2, y'''' = 120x
    a = np.array([0.7, -1.3, 2.0])
    x = _leaf(a)
    (g1,) = hd.grad(F.sum(x**5), x)
    (g2,) = hd.grad(F.sum(g1), x)
    (g3,) = hd.grad(F.sum(g2), x)
    (g4,) = hd.grad(F.sum(g3), x)
    np.testing.assert_allclose(g2.d, 20 * a**3, rtol=1e-13)
    np.testing.assert_allclose(g3.d, 60 * a**2, rtol=1e-13)
    np.testing.assert_allclose(g4.d, 120 * a, rtol=1e-13)
    assert isinstance(g4.parent, DeferredGrad)
    assert isinstance(g2.parent, Identity)
    assert isinstance(g3.parent, Identity)


def test_third_order_matches_finite_differences_and_recording_at_once() -> None:
    x, w = _leaf(X0), _leaf(W0)
    (hx,) = _second(x, w, [x])
    (t,) = hd.grad(F.sum(hx * np.cos(X0)), w)  # walks the deferred gradient: records it
    assert isinstance(hx.parent, Identity)
    with record_at_once():
        (ex,) = _second(x, w, [x])
        (et,) = hd.grad(F.sum(ex * np.cos(X0)), w)
    np.testing.assert_allclose(t.d, et.d, rtol=1e-12, atol=1e-12)

    def s(wa: np.ndarray) -> float:
        xv, wv = _leaf(X0), _leaf(wa)
        (h,) = _second(xv, wv, [xv])
        return float((h.d * np.cos(X0)).sum())

    eps = 1e-6
    fd = [(s(W0 + eps * e) - s(W0 - eps * e)) / (2 * eps) for e in np.eye(5)]
    np.testing.assert_allclose(t.d, fd, rtol=1e-6, atol=1e-7)


def test_backward_through_a_deferred_gradient() -> None:
    a = np.array([0.5, -0.4])
    x = _leaf(a)
    (g1,) = hd.grad(F.sum(F.sin(x)), x)  # cos x
    (g2,) = hd.grad(F.sum(g1), x)  # -sin x, deferred
    F.sum(g2 * g2).backward()  # d/dx sin^2 x = 2 sin x cos x
    np.testing.assert_allclose(x.g, 2 * np.sin(a) * np.cos(a), rtol=1e-13)
    _assert_numbering([g2])


def test_consumers_made_before_the_recording_keep_a_valid_order() -> None:
    x, w = _leaf(X0), _leaf(W0)
    (hx,) = _second(x, w, [x])
    later = F.exp(hx) * w  # linked before the gradient is recorded
    after = F.sum(later * x)
    (gw,) = hd.grad(after, w)  # records hx now: its nodes must sort before `later`
    _assert_numbering([gw, after])
    with record_at_once():
        (ex,) = _second(x, w, [x])
        (ew,) = hd.grad(F.sum(F.exp(ex) * w * x), w)
    np.testing.assert_allclose(gw.d, ew.d, rtol=1e-12)


def test_walkers_record_it_to_dot_and_save_graph(tmp_path: object) -> None:
    x, w = _leaf(X0), _leaf(W0)
    (hx,) = _second(x, w, [x])
    dot = hd.to_dot(hx)
    assert "deferred" not in dot
    assert "tanh_backward" in dot
    assert isinstance(hx.parent, Identity)
    x2, w2 = _leaf(X0), _leaf(W0)
    (h2,) = _second(x2, w2, [x2])
    path = f"{tmp_path}/g.hodiff"
    hd.save_graph(path, h2, [x2, w2])
    loaded = hd.load_graph(path)
    np.testing.assert_allclose(loaded(X0, W0).d, h2.d, rtol=1e-13)


def test_static_forward_of_a_deferred_gradient_records_it() -> None:
    x, w = _leaf(X0), _leaf(W0)
    (hx,) = _second(x, w, [x])
    before = hx.d.copy()
    hx.forward()  # re-runs the (now recorded) graph from the leaves
    np.testing.assert_allclose(hx.d, before, rtol=1e-13)
    x.d = X0 * 2
    hx.forward()
    x2 = _leaf(X0 * 2)
    (ex,) = _second(x2, _leaf(W0), [x2])
    np.testing.assert_allclose(hx.d, ex.d, rtol=1e-12)


def test_unused_inputs_same_input_twice_and_an_output_as_input() -> None:
    x, w, c = _leaf(X0), _leaf(W0), _leaf(np.ones(5))
    (gx,) = hd.grad(_chain(x, w), x)
    s = F.sum(gx * gx)
    h = hd.grad(s, [x, c, x], allow_unused=True)
    assert isinstance(h[0].parent, DeferredGrad)
    assert h[0] is not h[2]
    np.testing.assert_array_equal(h[1].d, np.zeros(5))
    np.testing.assert_array_equal(h[0].d, h[2].d)
    assert not np.shares_memory(h[0].d, h[2].d)
    with pytest.raises(ValueError, match=r"do not depend on inputs\[1\]"):
        hd.grad(s, [x, c])
    (hs,) = hd.grad(s, s)  # d s / d s = the seed: a copy, never the seed's array
    np.testing.assert_array_equal(hs.d, 1.0)
    (ones,) = hd.grad(s, gx, grad_outputs=np.full((), 2.0))  # 2 * 2 gx
    np.testing.assert_allclose(ones.d, 4 * gx.d, rtol=1e-14)


def test_a_seed_with_a_graph_is_differentiated_through() -> None:
    x, v = _leaf(X0), _leaf(W0)
    (g,) = hd.grad(F.sum(x**3), x)  # 3 x^2
    (hv,) = hd.grad(g, x, grad_outputs=v)  # 6 x v, deferred
    assert isinstance(hv.parent, DeferredGrad)
    (dv,) = hd.grad(F.sum(hv), v)  # 6 x
    np.testing.assert_allclose(dv.d, 6 * X0, rtol=1e-14)


def test_results_share_no_memory_with_seeds_or_values() -> None:
    x = _leaf(X0)
    (g,) = hd.grad(F.sum(F.reshape(x, (5, 1)) ** 2), x)
    seed = np.ones(5)
    (h,) = hd.grad(g, x, grad_outputs=seed)
    assert isinstance(h.parent, DeferredGrad)
    h.d[...] = 0.0
    np.testing.assert_array_equal(seed, 1.0)
    np.testing.assert_array_equal(x.d, X0)


def test_a_freed_value_raises_when_recorded_and_touches_no_gradient() -> None:
    x, w = _leaf(X0), _leaf(W0)
    (gx,) = hd.grad(_chain(x, w), x)
    (hx,) = hd.grad(F.sum(gx * gx), x)
    values = hx.d.copy()
    F.sum(gx).backward(clear_buffer=True)  # frees values the recording needs
    x.zero_grad()
    w.zero_grad()
    with pytest.raises(RuntimeError, match=r"recording a gradient deferred by hd\.grad"):
        F.sum(hx).backward()
    np.testing.assert_array_equal(x.g, 0.0)
    np.testing.assert_array_equal(w.g, 0.0)
    np.testing.assert_array_equal(hx.d, values)  # the values computed at once stay


def test_record_at_once_and_static_graphs_do_not_defer() -> None:
    assert is_enabled()
    with record_at_once():
        assert not is_enabled()
        with record_at_once():
            assert not is_enabled()
        assert not is_enabled()
    assert is_enabled()
    x = hd.Variable((3,), need_grad=True)
    with hd.auto_forward(False):
        (g,) = hd.grad(F.sum(F.sin(x)), x)
        (h,) = hd.grad(F.sum(g), x)
    assert not isinstance(h.parent, DeferredGrad)
    x.d = np.array([0.1, 0.2, 0.3])
    h.forward()
    np.testing.assert_allclose(h.d, -np.sin(x.d), rtol=1e-14)


def test_inside_vmap_nothing_is_deferred() -> None:
    def per_example(v: hd.Variable) -> hd.Variable:
        (g,) = hd.grad(F.sum(v**3), v)
        (h,) = hd.grad(F.sum(g), v)
        assert not isinstance(h.parent, DeferredGrad)
        return h

    xs = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(hd.vmap(per_example)(xs).d, 6 * xs, rtol=1e-14)


def test_the_recipe_is_dropped_once_recorded() -> None:
    x, w = _leaf(X0), _leaf(W0)
    hx, hw = _second(x, w, [x, w])
    pending = hx.parent.inputs
    recipe = pending.recipe  # type: ignore[attr-defined]
    assert len(pending) == 1
    assert recipe.plan is not None
    assert pending[0] is hx.parent.inputs[0]  # reading an input records the gradient
    assert isinstance(hx.parent, Identity)
    assert isinstance(hw.parent, Identity)
    assert recipe.plan is None
    assert recipe.outs == []
    assert recipe.nodes == []
    _assert_numbering([hx, hw])


def test_a_dead_result_is_not_turned() -> None:
    x, w = _leaf(X0), _leaf(W0)
    hx, hw = _second(x, w, [x, w])
    del hw
    gc.collect()
    (t,) = hd.grad(F.sum(hx), w)
    with record_at_once():
        (ex,) = _second(x, w, [x])
        (et,) = hd.grad(F.sum(ex), w)
    np.testing.assert_allclose(t.d, et.d, rtol=1e-12)


def test_a_reused_instance_does_not_carry_the_mark_of_a_gradient() -> None:
    from hodiff.functions.math import Tanh

    fn = Tanh()
    x = _leaf(X0)
    y = fn(x)
    y.parent._of_grad = True  # as if this node had made a gradient hd.grad returned
    z = fn(x)  # the same instance called again: a copy, without the mark
    assert z.parent is not y.parent
    assert not z.parent._of_grad
    (g,) = hd.grad(F.sum(z), x)  # a first derivative: recorded at once
    assert not isinstance(g.parent, DeferredGrad)


def test_under_no_grad_nothing_is_deferred_nor_recorded() -> None:
    x = _leaf(X0)
    (g,) = hd.grad(F.sum(F.sin(x)), x)
    s = F.sum(g)
    with hd.no_grad():
        (h,) = hd.grad(s, x)
    assert not isinstance(h.parent, DeferredGrad)
    assert not h.need_grad
    np.testing.assert_allclose(h.d, -np.sin(X0), rtol=1e-14)


def _d3_tanh_squared(a: np.ndarray) -> np.ndarray:
    """d^3/dx^3 tanh(x)^2 by hand: with t = tanh x, s = 1 - t^2 (dt = s, ds = -2ts),
    f' = 2ts, f'' = 2s^2 - 4t^2 s, f''' = -8ts^2 - 8ts^2 + 8t^3 s = 8ts(t^2 - 2s)."""
    t = np.tanh(a)
    s = 1 - t**2
    return 8 * t * s * (t**2 - 2 * s)


def test_a_call_site_whose_results_are_walked_records_at_once_for_a_while() -> None:
    x = _leaf(X0)
    kinds = []
    for _ in range(deferred.CREDIT + 3):
        (g1,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
        (g2,) = hd.grad(F.sum(g1), x)  # one call site
        kinds.append(isinstance(g2.parent, DeferredGrad))
        F.sum(g2).backward()  # walks (and records) g2 each time
    # deferred once, then recorded at once for CREDIT calls, then deferred again (a probe)
    assert kinds == [True] + [False] * deferred.CREDIT + [True, False]
    np.testing.assert_allclose(x.g, (deferred.CREDIT + 3) * _d3_tanh_squared(X0), rtol=1e-12)


def test_a_call_site_whose_results_are_not_walked_keeps_deferring() -> None:
    x = _leaf(X0)
    (g1,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
    for _ in range(deferred.CREDIT + 3):
        (g2,) = hd.grad(F.sum(g1), x)
        assert isinstance(g2.parent, DeferredGrad)
    other = [hd.grad(F.sum(g1), x)[0] for _ in range(2)]  # another site, walked
    F.sum(other[0]).backward()
    (g2,) = hd.grad(F.sum(g1), x)  # the first site is not affected by the other's walk
    assert isinstance(g2.parent, DeferredGrad)


def test_walked_deferrals_in_a_row_double_the_calls_recorded_at_once() -> None:
    x = _leaf(X0)
    (g1,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
    s = F.sum(g1)

    def call(walk: bool) -> bool:
        (g2,) = hd.grad(s, x)  # one call site
        deferred_here = isinstance(g2.parent, DeferredGrad)
        if walk:
            hd.grad(F.sum(g2), x)
        return deferred_here

    kinds = [call(walk=True) for _ in range(1 + 16 + 1 + 32 + 1 + 64 + 1)]
    probes = [i for i, k in enumerate(kinds) if k]
    assert probes == [0, 17, 50, 115]  # gaps of 16, 32, 64 calls recorded at once
    gaps = []
    for _ in range(8):  # the gap grows to MAX_CREDIT and stays there
        n = 0
        while not call(walk=True):
            n += 1
        gaps.append(n)
    assert gaps[0] == 128
    assert gaps[1:] == [deferred.MAX_CREDIT] * 7
    # a deferral not walked by the next call starts again from CREDIT
    n = 0
    while not call(walk=False):
        n += 1
    assert n == deferred.MAX_CREDIT
    assert call(walk=True)  # the unwalked probe was followed by a deferral, now walked
    assert [call(walk=True) for _ in range(deferred.CREDIT + 1)] == [False] * deferred.CREDIT + [
        True
    ]
