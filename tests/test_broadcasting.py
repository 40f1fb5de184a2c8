"""Property tests: every broadcasting binary op, on random broadcast-compatible shapes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hodiff as hd
import hodiff.functions as F

OPS = {
    "add2": (F.add2, lambda a, b, g: (g, g)),
    "sub2": (F.sub2, lambda a, b, g: (g, -g)),
    "mul2": (F.mul2, lambda a, b, g: (g * b, g * a)),
    "div2": (F.div2, lambda a, b, g: (g / b, -g * a / b**2)),
}


def reduce_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """numpy reference for summing a broadcast gradient back to ``shape``."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, s in enumerate(shape):
        if s == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


@settings(max_examples=40, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    op=st.sampled_from(sorted(OPS)),
    seed=st.integers(0, 2**16),
)
def test_broadcast_gradients_sum_back_to_each_input(shapes, op, seed) -> None:
    fn, rule = OPS[op]
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, size=shapes.input_shapes[0])
    b = rng.uniform(0.5, 2.0, size=shapes.input_shapes[1])
    x0 = hd.Variable.from_array(a, need_grad=True)
    x1 = hd.Variable.from_array(b, need_grad=True)
    y = fn(x0, x1)
    assert y.shape == shapes.result_shape
    g = rng.standard_normal(shapes.result_shape)
    y.backward(g)
    ga, gb = rule(np.broadcast_to(a, y.shape), np.broadcast_to(b, y.shape), g)
    np.testing.assert_allclose(x0.g, reduce_to(ga, a.shape), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x1.g, reduce_to(gb, b.shape), rtol=1e-12, atol=1e-12)
    g0, g1 = hd.grad(y, [x0, x1], grad_outputs=[g])
    np.testing.assert_allclose(g0.d, x0.g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g1.d, x1.g, rtol=1e-12, atol=1e-12)
