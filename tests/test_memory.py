"""Graphs hold no reference cycles: repeated create-graph loops do not grow memory."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


def test_hvp_loop_of_an_mlp_does_not_grow_memory() -> None:
    rng = np.random.default_rng(0)
    x = hd.Variable.from_array(rng.standard_normal((8, 4)))
    w1 = hd.Variable.from_array(rng.standard_normal((4, 16)), need_grad=True)
    w2 = hd.Variable.from_array(rng.standard_normal((16, 1)), need_grad=True)
    v1, v2 = rng.standard_normal(w1.shape), rng.standard_normal(w2.shape)

    def hvp_step() -> float:
        loss = F.mean(F.tanh(F.affine(F.tanh(F.affine(x, w1)), w2)) ** 2)
        g1, g2 = hd.grad(loss, [w1, w2])
        h1, h2 = hd.grad(F.sum(g1 * v1) + F.sum(g2 * v2), [w1, w2])
        loss.backward()  # the fast path too
        return float(h1.d.sum() + h2.d.sum())

    first = hvp_step()
    gc.collect()
    gc.disable()  # cyclic garbage would now pile up
    try:
        tracemalloc.start()
        for _ in range(200):  # traced warm-up: caches and free lists fill here (once, by
            hvp_step()  # the 200th step; then flat over 1,500 more)
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(800):
            last = hvp_step()
        end, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        cyclic = gc.collect()
    finally:
        gc.enable()
    assert last == first  # same computation every time
    assert cyclic == 0, f"{cyclic} objects were only reclaimable by the cycle collector"
    assert end - start < 32 * 1024, f"memory grew by {end - start} bytes over 800 HVPs"


def test_the_recording_pass_restores_the_collector() -> None:
    x = hd.Variable.from_array(np.ones(3), need_grad=True)
    assert gc.isenabled()
    (g,) = hd.grad(F.sum(F.tanh(x)), x)
    assert gc.isenabled()
    gc.disable()
    try:
        hd.grad(F.sum(g), x)
        assert not gc.isenabled()  # a collector the user disabled stays disabled
    finally:
        gc.enable()

    class Fails(hd.Function):
        def forward_impl(self, inputs, outputs):
            outputs[0] = inputs[0] * 1.0

        def backward_impl(self, inputs, outputs, prop_down, accum):
            assert not gc.isenabled()  # paused while the pass records
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        hd.grad(F.sum(Fails()(x)), x)
    assert gc.isenabled()


def _tracked_per_op(n: int) -> dict[str, float]:
    """GC-tracked objects the graphs keep per op of a chain of n tanh, after each step."""
    x = hd.Variable.from_array(np.linspace(-1.0, 1.0, 16), need_grad=True)

    def count() -> int:
        gc.collect()  # tuples of arrays (kept values) are untracked by a collection
        return len(gc.get_objects())

    before = count()
    y = x
    for _ in range(n):
        y = F.tanh(y)
    forward = count()
    (g,) = hd.grad(F.sum(y), x)
    first = count()
    (h,) = hd.grad(F.sum(g), x)
    second = count()
    assert h.shape == x.shape
    return {
        "forward": (forward - before) / n,
        "grad": (first - forward) / n,
        "grad of grad": (second - first) / n,
    }


def test_a_one_output_node_keeps_four_tracked_objects() -> None:
    # node, output Variable, inputs tuple, the output's weak reference (which is _outputs);
    # every full collection traverses them all (bench/graph_size.py)
    per_op = _tracked_per_op(500)
    assert per_op["forward"] < 4.1, per_op
    assert per_op["grad"] < 4.1, per_op  # one TanhBackward per tanh
    assert per_op["grad of grad"] < 16.1, per_op  # four nodes per TanhBackward, MulN's list


def test_a_one_output_node_reads_as_a_sequence_of_one_reference() -> None:
    x = hd.Variable.from_array(np.ones(3), need_grad=True)
    y = F.tanh(x)
    refs = y.parent._outputs
    assert len(refs) == 1
    assert refs[0]() is y
    assert refs[-1]() is y
    assert [r() for r in refs] == [y]
    with pytest.raises(IndexError):
        refs[1]
    assert y.parent._ydata is not None
    assert y.parent._ydata[0] is y.d


def test_a_plain_backward_restores_the_collector() -> None:
    x = hd.Variable.from_array(np.ones(3), need_grad=True)
    seen = []

    class Spy(hd.Function):
        def forward_impl(self, inputs, outputs):
            outputs[0] = inputs[0] * 1.0

        def backward_impl(self, inputs, outputs, prop_down, accum):
            seen.append(gc.isenabled())
            if len(seen) > 1:
                raise ZeroDivisionError
            inputs[0].store(outputs[0].grad, accum[0])

    F.sum(Spy()(x)).backward()
    assert seen == [False]  # paused during the pass
    assert gc.isenabled()
    np.testing.assert_array_equal(x.g, np.ones(3))
    with pytest.raises(ZeroDivisionError):
        F.sum(Spy()(x)).backward()
    assert gc.isenabled()
    gc.disable()
    try:
        F.sum(F.exp(x)).backward()
        assert not gc.isenabled()  # a collector the user disabled stays disabled
    finally:
        gc.enable()


def _traced_peak(fn: Any) -> tuple[int, Any]:
    fn()  # warm
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        return tracemalloc.get_traced_memory()[1] - base, out
    finally:
        tracemalloc.stop()


def test_hvp_frees_its_first_order_graph_as_its_second_pass_goes() -> None:
    # H v of sum(tanh^L(x)) by reverse over reverse. Written by hand (hd.grad twice), the
    # second pass keeps the first-order graph (its caller holds it) while the gradients of
    # the L layer outputs pile up (each reaches its forward node only at the end of the
    # pass): at its end both are alive. hd.hvp's graphs are its own: its second pass frees
    # each node's values once its rule ran, at least one activation of the first-order graph
    # per layer (its gradient g_l) by the time the next layer's gradient is made, so its
    # peak is lower by at least L - 2 activations (A bytes each).
    n, layers = 50_000, 16
    a = n * 8
    rng = np.random.default_rng(1)
    x0, v0 = 0.1 * rng.standard_normal(n), rng.standard_normal(n)

    def f(x: hd.Variable) -> hd.Variable:
        for _ in range(layers):
            x = F.tanh(x)
        return F.sum(x)

    def by_hand() -> Any:
        x = hd.Variable.from_array(x0, need_grad=True)
        (g,) = hd.grad(f(x), x)
        (hv,) = hd.grad(g, x, grad_outputs=[v0], create_graph=False)
        return hv.d

    ours, hv = _traced_peak(lambda: hd.hvp(f, x0, v0)[1])
    theirs, hv0 = _traced_peak(by_hand)
    np.testing.assert_allclose(hv, hv0, rtol=1e-13)
    assert ours <= theirs - (layers - 2) * a, (ours / a, theirs / a)


def test_a_pullback_that_freed_its_graph_refuses_a_second_pass() -> None:
    from hodiff.engine.api import Pullback

    x = hd.Variable.from_array(np.array([0.3, -0.2]), need_grad=True)
    (g,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
    pb = Pullback([g], [x])
    first = pb([np.ones(2)])[0]
    last = pb([np.ones(2)], clear_buffer=True)[0]
    np.testing.assert_array_equal(first, last)
    with pytest.raises(RuntimeError, match="pullback: called again after a pass with clear"):
        pb([np.ones(2)])


def test_hvp_frees_only_its_own_graph() -> None:
    # f closes over u = 2 tanh(p), a value of the caller's graph: hd.hvp's freeing pass
    # leaves it (and its graph) alone; H = diag(6 u x) for f = sum(u x^3)
    p = hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
    u = F.tanh(p) * 2.0
    x0, v0 = np.array([0.3, 0.5]), np.array([1.0, -2.0])
    _, hv = hd.hvp(lambda x: F.sum(u * x**3), x0, v0)
    np.testing.assert_allclose(hv, 12 * np.tanh(p.d) * x0 * v0, rtol=1e-13)
    np.testing.assert_array_equal(u.d, 2 * np.tanh(p.d))
    F.sum(u).backward()
    np.testing.assert_allclose(p.g, 2 * (1 - np.tanh(p.d) ** 2), rtol=1e-13)
