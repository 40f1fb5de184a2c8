"""Graphs hold no reference cycles: repeated create-graph loops do not grow memory."""

from __future__ import annotations

import gc
import tracemalloc

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
