"""The engine: reverse pass flags, fan-out, static/dynamic graphs, buffers, depth, threads."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.context import STATE, array_module, flag_raw, flag_recording, flag_trusted
from hodiff.engine.function import Slot


def var(a: Any, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


class Spy(hd.Function):
    """y = x0 * x1, recording the flags the engine passes to backward_impl."""

    calls: list[tuple[list[bool], list[bool]]] = []  # noqa: RUF012

    def setup_impl(self, inputs: Sequence[hd.Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return [(inputs[0].shape, inputs[0].dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] * inputs[1]

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        Spy.calls.append((list(prop_down), list(accum)))
        gy = outputs[0].grad
        if prop_down[0]:
            inputs[0].store(gy * inputs[1].data, accum[0])
        if prop_down[1]:
            inputs[1].store(gy * inputs[0].data, accum[1])


def test_prop_down_follows_need_grad() -> None:
    Spy.calls.clear()
    a, b = var([1.0, 2.0]), var([3.0, 4.0], need_grad=False)
    Spy()(a, b).backward()
    assert Spy.calls == [([True, False], [False, False])]
    np.testing.assert_array_equal(a.g, [3.0, 4.0])
    np.testing.assert_array_equal(b.g, [0.0, 0.0])  # need_grad=False: no gradient


def test_accum_is_set_from_the_second_contribution_on() -> None:
    Spy.calls.clear()
    x = var([1.0, 2.0])
    h = x * 2.0
    y = Spy()(h, h) + Spy()(h, x)  # h gets three contributions, x two
    y.backward()
    flags = [c[1] for c in Spy.calls]
    # reverse order: Spy(h, x) runs first (created last), then Spy(h, h)
    assert flags[0] == [False, False]
    assert flags[1] == [True, True]
    np.testing.assert_allclose(x.g, 12 * x.d)  # y = 4x^2 + 2x^2


def test_fan_out_sums_gradients() -> None:
    x = var([0.5, -1.5, 2.0])
    y = F.sum(x * x + F.exp(x) * x - x / (x * x + 1.0))
    y.backward()
    xd = x.d
    expected = 2 * xd + np.exp(xd) * (1 + xd) - (1 - xd**2) / (xd**2 + 1) ** 2
    np.testing.assert_allclose(x.g, expected, rtol=1e-12)


def test_backward_accumulates_into_leaves_and_overwrites_intermediates() -> None:
    x = var([1.0, 2.0])
    h = x * 3.0
    y = F.sum(h * h)
    y.backward(retain_grad=True)
    y.backward(retain_grad=True)
    np.testing.assert_allclose(x.g, 2 * (18 * x.d))
    np.testing.assert_allclose(h.g, 2 * h.d)  # intermediate: written per pass
    np.testing.assert_allclose(y.g, 1.0)  # the seed
    h.g = np.full(2, np.nan)
    x.zero_grad()
    y.backward(retain_grad=True)
    np.testing.assert_allclose(h.g, 2 * h.d)  # an overwrite wipes the NaN that was there
    np.testing.assert_allclose(x.g, 18 * x.d)


def test_backward_frees_intermediate_gradients_unless_retained() -> None:
    x = var([1.0, 2.0])
    h = x * 3.0
    y = F.sum(h * h)
    y.backward()
    np.testing.assert_allclose(x.g, 18 * x.d)  # leaves are unchanged: they accumulate
    for v, name in ((h, "mul_scalar"), (y, "sum")):  # reading a freed one is an error, not zeros
        with pytest.raises(RuntimeError, match=rf"{name} \(shape .*retain_grad=True"):
            _ = v.g
    y.backward(retain_grad=True)  # the switch brings them back
    np.testing.assert_allclose(h.g, 2 * h.d)
    np.testing.assert_allclose(x.g, 2 * 18 * x.d)
    y.backward()
    with pytest.raises(RuntimeError, match="retain_grad"):
        _ = h.g
    h.zero_grad()  # .g usable as a buffer again
    np.testing.assert_allclose(h.g, 0.0)


def test_freed_intermediate_gradients_are_released_during_the_pass() -> None:
    # a chain of 20 unary nodes on 1 MB arrays: kept intermediate gradients grow the peak by
    # one array per node; freed ones leave a handful alive at any time
    import tracemalloc

    n, size = 20, 125_000
    x = hd.Variable.from_array(np.linspace(0.0, 1.0, size), need_grad=True)
    h = x
    for _ in range(n):
        h = F.sin(h)
    y = F.sum(h)
    nbytes = 8 * size
    peaks = {}
    for retain in (False, True):
        y.backward(retain_grad=retain)  # warm: the leaf's buffer exists from here on
        h.zero_grad()
        tracemalloc.start()
        y.backward(retain_grad=retain)
        peaks[retain] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[False] < 6 * nbytes, peaks
    assert peaks[True] > n * nbytes, peaks


def test_grad_and_pullback_do_not_touch_intermediate_g() -> None:
    x = var([1.0, 2.0])
    h = x * 3.0
    y = F.sum(h * h)
    h.g = np.array([5.0, 7.0])
    (g,) = hd.grad(y, x)
    np.testing.assert_allclose(g.d, 18 * x.d)
    np.testing.assert_allclose(h.g, [5.0, 7.0])
    from hodiff.engine.api import Pullback

    (gp,) = Pullback([y], [x])([None])
    np.testing.assert_allclose(gp, 18 * x.d)
    np.testing.assert_allclose(h.g, [5.0, 7.0])
    got = list(hd.iter_grads(y))  # iter_grads (the distributed layer's) still yields each leaf
    assert len(got) == 1
    assert got[0][0] is x
    np.testing.assert_allclose(got[0][1], 18 * x.d)


def test_leaf_gradients_never_alias() -> None:
    a, b = var([1.0, 2.0]), var([3.0, 4.0])
    y = a + b  # add2 hands the same gy to both inputs
    y.backward()
    assert not np.shares_memory(a.g, b.g)
    a.g *= 10.0
    np.testing.assert_array_equal(b.g, [1.0, 1.0])
    seed = np.array([2.0, 5.0])
    y.backward(seed)
    np.testing.assert_array_equal(seed, [2.0, 5.0])  # the user's seed is never written
    np.testing.assert_array_equal(b.g, [3.0, 6.0])


def test_backward_with_grad_and_scalar_root() -> None:
    x = var([1.0, 2.0, 3.0])
    y = x * x
    y.backward(np.array([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(x.g, [2.0, 0.0, 12.0])
    with pytest.raises(ValueError, match=r"backward: grad of shape \(2,\).*\(3,\)"):
        y.backward(np.ones(2))
    np.testing.assert_allclose(x.g, [2.0, 0.0, 12.0])  # a failed call changes nothing


def test_grad_is_differentiable_to_any_order() -> None:
    x = var(0.7)
    y = F.exp(x * 2.0) * x
    derivs = [y]
    for _ in range(5):
        (g,) = hd.grad(derivs[-1], x)
        derivs.append(g)
    # d^n/dx^n x e^{2x} = (2^n x + n 2^(n-1)) e^{2x}
    for n, d in enumerate(derivs):
        expected = (2**n * 0.7 + n * 2 ** (n - 1)) * np.exp(1.4)
        np.testing.assert_allclose(d.d, expected, rtol=1e-12)


def test_grad_several_outputs_and_grad_outputs() -> None:
    x, w = var([1.0, 2.0]), var([3.0, -1.0])
    y1, y2 = x * w, F.sum(x * x)
    gx, gw = hd.grad([y1, y2], [x, w], grad_outputs=[np.array([1.0, 2.0]), np.array(3.0)])
    np.testing.assert_allclose(gx.d, [1.0, 2.0] * w.d + 6 * x.d)
    np.testing.assert_allclose(gw.d, [1.0, 2.0] * x.d)
    assert x.g.tolist() == [0.0, 0.0]  # hd.grad writes no .g


def test_grad_outputs_as_variable_is_differentiated_through() -> None:
    x, v = var([1.0, 2.0]), var([0.5, -1.0])
    (g,) = hd.grad(x * x * x, x, grad_outputs=[v])  # 3 x^2 v
    (gv,) = hd.grad(F.sum(g), v)
    np.testing.assert_allclose(gv.d, 3 * x.d**2)


def test_grad_with_respect_to_an_intermediate() -> None:
    x = var([1.0, 2.0])
    h = x * x
    y = F.sum(F.exp(h))
    gh, gx = hd.grad(y, [h, x])
    np.testing.assert_allclose(gh.d, np.exp(h.d))
    np.testing.assert_allclose(gx.d, np.exp(h.d) * 2 * x.d)


def test_unused_input_raises_unless_allowed() -> None:
    x, z = var([1.0]), var([2.0, 3.0])
    y = F.sum(x * 2.0)
    with pytest.raises(ValueError, match=r"inputs\[1\] \(shape \(2,\)\)"):
        hd.grad(y, [x, z])
    gx, gz = hd.grad(y, [x, z], allow_unused=True)
    np.testing.assert_array_equal(gz.d, [0.0, 0.0])
    np.testing.assert_array_equal(gx.d, [2.0])


def test_grad_outputs_default_to_ones_of_any_shape() -> None:
    # the NNabla WGAN-GP idiom: hd.grad([critic(x_hat)], [x_hat]) with a (N, 1) critic output
    x = hd.Variable.from_array(np.array([[1.0], [2.0], [-3.0]]), need_grad=True)
    (g,) = hd.grad([x * x], [x])  # d/dx sum(x^2) = 2x
    np.testing.assert_array_equal(g.d, 2 * x.d)
    (h,) = hd.grad(F.sum(g * g), x)  # d/dx sum(4 x^2) = 8x: the seed is differentiable through
    np.testing.assert_array_equal(h.d, 8 * x.d)
    # one None entry among given seeds is ones too; the same as .backward() with no grad
    a, b = var([1.0, 2.0]), var([3.0])
    ga, gb = hd.grad([a * b, b * b], [a, b], grad_outputs=[None, np.array([2.0])])
    np.testing.assert_array_equal(ga.d, [3.0, 3.0])
    np.testing.assert_array_equal(gb.d, [1.0 + 2.0 + 2 * 2 * 3.0])
    (a * b).backward()
    np.testing.assert_array_equal(a.g, ga.d)


def test_grad_outputs_scalar_broadcasts() -> None:
    x = var([1.0, 2.0, 4.0])
    (g,) = hd.grad(x * x, x, grad_outputs=[0.5])  # 0.5 * 2x
    np.testing.assert_array_equal(g.d, x.d)
    (g,) = hd.grad(x * x, x, grad_outputs=3.0)  # a bare scalar for a single output
    np.testing.assert_array_equal(g.d, 6 * x.d)
    (g,) = hd.grad(x * x, x, grad_outputs=np.array([1.0, 0.0, 2.0]))  # a bare array
    np.testing.assert_array_equal(g.d, [2.0, 0.0, 16.0])
    (g,) = hd.grad(x * x, x, grad_outputs=[np.array(2.0)])  # 0-d, as in .backward()
    np.testing.assert_array_equal(g.d, 4 * x.d)
    u = np.array([1.0, 1.0, 1.0])
    (g,) = hd.grad(x * x, x, grad_outputs=[u])
    u[:] = 0.0  # the seed was copied (or used at once): the result is unchanged
    np.testing.assert_array_equal(g.d, 2 * x.d)


def test_grad_outputs_default_in_static_mode() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3, 1), need_grad=True)
        y = F.exp(x)
        (g,) = hd.grad(y, x)
        x.d = np.array([[0.0], [1.0], [2.0]])
        g.forward()
    np.testing.assert_allclose(g.d, np.exp(x.d), rtol=1e-6)


def test_grad_rejects_grad_outputs_of_another_shape() -> None:
    x = var([1.0, 2.0])
    with pytest.raises(ValueError, match=r"grad_outputs\[0\] has shape \(3,\)"):
        hd.grad(x * x, x, grad_outputs=[np.ones(3)])
    with pytest.raises(ValueError, match=r"grad_outputs\[0\] has shape \(2, 1\)"):
        hd.grad(x * x, x, grad_outputs=[var([[1.0], [2.0]])])
    with pytest.raises(ValueError, match="2 grad_outputs for 1 outputs"):
        hd.grad(x * x, x, grad_outputs=[1.0, 2.0])
    with pytest.raises(TypeError, match="inputs"):
        hd.grad(F.sum(x), np.ones(2))


def test_no_grad_records_nothing() -> None:
    x = var([1.0, 2.0])
    with hd.no_grad():
        y = x * x
    assert y.parent is None
    assert not y.need_grad
    np.testing.assert_array_equal(y.d, [1.0, 4.0])


def test_unlinked_cuts_the_graph() -> None:
    x = var([1.0, 2.0])
    h = (x * x).unlinked()
    assert h.parent is None
    y = F.sum(h * x)
    y.backward()
    np.testing.assert_allclose(x.g, x.d**2)  # h treated as a constant


# ---------------------------------------------------------------- static graphs
def test_static_graph_built_once_run_many_times() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3,), need_grad=True, dtype=np.float64)
        y = F.sum(F.exp(x) * x)
        assert y.shape == ()
        (g,) = hd.grad(y, x)
    for seed in range(3):
        x.d = np.random.default_rng(seed).standard_normal(3)
        y.forward()
        g.forward()
        np.testing.assert_allclose(y.d, np.sum(np.exp(x.d) * x.d))
        np.testing.assert_allclose(g.d, np.exp(x.d) * (1 + x.d))
        x.zero_grad()
        y.backward()
        np.testing.assert_allclose(x.g, g.d)


def test_dynamic_forward_recomputes_from_leaves() -> None:
    x = var([1.0, 2.0], need_grad=False)
    y = F.exp(x) + x
    x.d = np.array([0.0, 0.0])
    y.forward()
    np.testing.assert_allclose(y.d, [1.0, 1.0])


def test_clear_buffer_gives_the_same_leaf_gradients() -> None:
    def build() -> tuple[hd.Variable, hd.Variable, hd.Variable]:
        with hd.auto_forward(False):
            x = hd.Variable((4,), need_grad=True, dtype=np.float64)
            h1 = F.exp(x * 0.5)
            h2 = h1 * h1 + x
            y = F.sum(F.log(h2 * h2 + 1.0))
        x.d = np.linspace(-1, 1, 4)
        return x, y, h1

    x1, y1, _ = build()
    y1.forward()
    y1.backward()
    x2, y2, h = build()
    y2.forward(clear_buffer=True)
    assert h._data is not None  # exp's output is kept: its backward reads it
    y2.backward(clear_buffer=True)
    np.testing.assert_allclose(x2.g, x1.g, rtol=1e-14)
    assert h._data is None  # freed once its backward ran


def test_forward_clear_buffer_frees_unneeded_intermediates() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2,), need_grad=True, dtype=np.float64)
        h = x + 1.0  # add_scalar's output feeds sum, whose backward needs no input value
        y = F.sum(h)
    x.d = np.ones(2)
    y.forward(clear_buffer=True)
    assert h._data is None
    np.testing.assert_allclose(y.d, 4.0)
    y.backward()
    np.testing.assert_allclose(x.g, [1.0, 1.0])


def test_deep_chain_has_no_recursion_limit() -> None:
    x = var(np.ones(2))
    y = x
    n = 100_000
    for _ in range(n):
        y = y + 1e-6
    y.forward()
    np.testing.assert_allclose(y.d, 1 + n * 1e-6)
    y.backward()
    np.testing.assert_allclose(x.g, [1.0, 1.0])
    (g,) = hd.grad(y, x, grad_outputs=[np.ones(2)])
    np.testing.assert_allclose(g.d, [1.0, 1.0])
    del y, g  # freeing a 100,000-long graph must not overflow the C stack either


# ---------------------------------------------------------------- modes and context
def test_modes_and_context_are_thread_local() -> None:
    seen: dict[str, Any] = {}

    def worker() -> None:
        hd.set_auto_forward(False)
        hd.set_default_context(hd.Context(dtype="float64"))
        seen["thread"] = (hd.get_auto_forward(), hd.get_default_context().dtype)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["thread"] == (False, np.dtype("float64"))
    assert hd.get_auto_forward() is True
    assert hd.get_default_context().dtype == np.float32


def test_context_scope_sets_the_default_dtype() -> None:
    with hd.context_scope(hd.Context(backend="numpy", dtype="float64")):
        assert hd.Variable((2,)).dtype == np.float64
    assert hd.Variable((2,)).dtype == np.float32
    with pytest.raises(ValueError, match="backend"):
        hd.Context(backend="tpu")


def test_functions_compute_with_the_array_module_of_their_inputs() -> None:
    x = var([1.0, 2.0])
    assert array_module(F.exp(x).d) is np


# ---------------------------------------------------------------- Variable
def test_operators_with_scalars_and_arrays_on_either_side() -> None:
    a = np.array([1.0, 2.0])
    x = var([3.0, 4.0])
    cases = {
        "x + a": (x + a, x.d + a),
        "a + x": (a + x, a + x.d),
        "x - a": (x - a, x.d - a),
        "a - x": (a - x, a - x.d),
        "2 - x": (2 - x, 2 - x.d),
        "a * x": (a * x, a * x.d),
        "np.float64 * x": (np.float64(2) * x, 2 * x.d),
        "x / 2": (x / 2, x.d / 2),
        "2 / x": (2 / x, 2 / x.d),
        "a / x": (a / x, a / x.d),
        "x ** 2": (x**2, x.d**2),
        "2 ** x": (2**x, 2**x.d),
        "x ** a": (x**a, x.d**a),
        "-x": (-x, -x.d),
        "abs(-x)": (abs(-x), x.d),
        "+x": (+x, x.d),
    }
    for name, (got, want) in cases.items():
        assert isinstance(got, hd.Variable), name
        np.testing.assert_allclose(got.d, want, err_msg=name)
    y = F.sum((a * x) ** 2 / x)  # = sum(a^2 x)
    y.backward()
    np.testing.assert_allclose(x.g, a**2)


def test_variable_members() -> None:
    x = hd.Variable((2, 3), need_grad=True)
    assert (x.shape, x.ndim, x.size, x.dtype) == ((2, 3), 2, 6, np.float32)
    assert x.parent is None
    assert x.need_grad
    np.testing.assert_array_equal(x.d, np.zeros((2, 3)))
    np.testing.assert_array_equal(x.g, np.zeros((2, 3)))
    x.d = np.ones((2, 3), dtype=np.float64)
    assert x.d.dtype == np.float32  # kept in the variable's dtype
    assert x.apply(need_grad=False) is x
    assert not x.need_grad
    assert hd.Variable.from_array(np.arange(3)).dtype.kind == "i"
    assert hd.Variable.from_array(np.ones(2, np.float64)).dtype == np.float64
    y = x * 2.0
    assert y.parent is not None
    assert x.data is x.d


# ---------------------------------------------------------------- protocol
class Cube(hd.Function):
    """y = x^3 with d y = 3 x^2 dx, written in hodiff functions (docs/custom_functions.md)."""

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] ** 3

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:
            x = inputs[0].data
            inputs[0].store(outputs[0].grad * 3.0 * x * x, accum[0])


def test_user_function_to_third_order() -> None:
    hd.gradcheck(lambda x: Cube()(x), np.array([0.3, -1.2, 2.0]), order=3)
    x = var(1.5)
    (g,) = hd.grad(Cube()(x), x)
    (h,) = hd.grad(g, x)
    (t,) = hd.grad(h, x)
    np.testing.assert_allclose([g.d, h.d, t.d], [3 * 1.5**2, 6 * 1.5, 6.0])


def test_missing_rule_raises_naming_the_function() -> None:
    class NoRule(hd.Function):
        def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
            outputs[0] = inputs[0] * 2

    x = var([1.0])
    y = F.sum(NoRule()(x) * x)
    with pytest.raises(NotImplementedError, match="no_rule"):
        y.backward()
    assert x.g.tolist() == [0.0]  # raised before any gradient was touched
    with pytest.raises(NotImplementedError, match="no_rule"):
        hd.grad(y, x)


# ---------------------------------------------------------------- iter_grads
def test_iter_grads_yields_each_parameter_when_final_last_layer_first() -> None:
    w1, w2, w3 = var([0.5, -0.2]), var([1.5, 0.3]), var([0.7, 0.1])
    x = var([1.0, 2.0], need_grad=False)
    h1 = F.exp(x * w1)
    h2 = F.exp(h1 * w2)
    loss = F.sum(h2 * w3)
    order = []
    for p, g in hd.iter_grads(loss):
        order.append(p)
        assert g is p.g
        # while the pass is suspended, user code builds graphs normally (not in raw mode)
        assert isinstance(F.exp(x), hd.Variable)
    assert order == [w3, w2, w1]
    ref = [hd.grad(loss, p)[0].d for p in (w1, w2, w3)]
    for p, r in zip((w1, w2, w3), ref, strict=True):
        np.testing.assert_allclose(p.g, r)
    assert [p for p, _ in hd.iter_grads(loss, params=[w1])] == [w1]


def test_a_leaf_used_by_several_nodes_is_final_after_the_last_one() -> None:
    w = var([0.5, 1.5])
    x = var([1.0, 2.0], need_grad=False)
    h = F.exp(x * w)
    loss = F.sum(h * w)  # w is used at the top and at the bottom of the graph
    ((p, g),) = list(hd.iter_grads(loss))
    assert p is w
    np.testing.assert_allclose(g, hd.grad(loss, w)[0].d)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("clear_buffer", [False, True])
def test_a_leaf_whose_consumer_gets_no_gradient_still_receives_the_others(
    static: bool, clear_buffer: bool
) -> None:
    # The double backprop of a ReLU network: the forward node affine(x, W) gets no
    # gradient (relu's mask is a constant), W's gradient comes only through the recorded
    # gradient graph. loss = sum((m W^T)^2) for a fixed mask m, so dloss/dW = 2 (m W^T)^T m.
    rng = np.random.default_rng(0)
    with hd.auto_forward(not static):
        x = var(rng.standard_normal((5, 3)))
        w = var(rng.standard_normal((3, 4)))
        h = F.affine(x, w)
        (g,) = hd.grad(F.sum(F.relu(h)), x)
        loss = F.sum(g * g)
        if static:
            loss.forward()
    m = (x.d @ w.d > 0).astype(np.float64)
    expected = 2 * (m @ w.d.T).T @ m
    w.g = 0
    loss.backward(clear_buffer=clear_buffer)
    np.testing.assert_allclose(w.g, expected, rtol=1e-13)


def test_iter_grads_yields_a_leaf_whose_last_consumer_gets_no_gradient() -> None:
    w = var([0.5, -1.5])
    x = var([1.0, 2.0], need_grad=False)
    a = x * w  # a consumer of w that no gradient reaches: greater() is not differentiable
    loss = F.sum(w * w) + F.sum(F.greater(a, 0.0) * x)
    got = dict((id(p), g.copy()) for p, g in hd.iter_grads(loss))
    np.testing.assert_allclose(got[id(w)], 2 * w.d)
    w.g = 0
    loss.backward()
    np.testing.assert_allclose(w.g, 2 * w.d)


def test_static_forward_of_a_0d_result_is_an_array() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3,), dtype=np.float64)
        y = F.sum(x * 2.0)
    x.d = np.ones(3)
    y.forward()
    assert isinstance(y.d, np.ndarray)
    assert y.d.shape == ()
    np.testing.assert_allclose(y.d, 6.0)


def test_iteration_and_out_of_range_indexing() -> None:
    x = var([1.0, 2.0, 3.0])
    parts = list(x)
    assert [float(p.d) for p in parts] == [1.0, 2.0, 3.0]
    F.sum(parts[0] * parts[2]).backward()
    np.testing.assert_array_equal(x.g, [3.0, 0.0, 1.0])
    with pytest.raises(IndexError, match=r"getitem: index \(5,\) does not fit x of shape \(3,\)"):
        x[5]
    with pytest.raises(ValueError, match="getitem"):  # also a ValueError, like every bad argument
        x[5]


def test_a_static_graph_is_planned_once_and_replanned_when_need_grad_changes() -> None:
    from hodiff.engine.plan import memo

    with hd.auto_forward(False):
        x = hd.Variable((2,), need_grad=True, dtype=np.float64)
        w = hd.Variable((2,), need_grad=False, dtype=np.float64)
        y = F.sum(F.exp(x * w))
    x.d, w.d = np.array([0.5, 1.0]), np.array([2.0, -1.0])
    y.forward()
    y.backward()
    first = memo(y).plan[1]
    x.zero_grad()
    y.backward()
    assert memo(y).plan[1] is first  # reused
    np.testing.assert_allclose(x.g, w.d * np.exp(x.d * w.d))
    w.need_grad = True  # a leaf's flag changed: a new plan sends w its gradient too
    x.zero_grad()
    y.backward()
    assert memo(y).plan[1] is not first
    np.testing.assert_allclose(w.g, x.d * np.exp(x.d * w.d))
    np.testing.assert_allclose(x.g, w.d * np.exp(x.d * w.d))


def test_a_function_instance_called_twice_makes_two_nodes() -> None:
    cube = Cube()
    x, z = var([1.0, 2.0]), var([3.0])
    a, b = cube(x), cube(z)
    assert a.parent is not b.parent
    F.sum(a).backward()
    F.sum(b).backward()
    np.testing.assert_allclose(x.g, 3 * x.d**2)
    np.testing.assert_allclose(z.g, 3 * z.d**2)
    (g,) = hd.grad(F.sum(a), x)
    np.testing.assert_allclose(g.d, 3 * x.d**2)


def test_grad_after_forward_with_clear_buffer_reads_retained_outputs() -> None:
    # sigmoid keeps its output for its rule; forward(clear_buffer=True) freed the output
    # Variable's own value (nothing downstream needs it), and hd.grad used to read it as zeros
    x = var([0.3, -1.0])
    y = F.sum(F.sigmoid(x) * 1.0)
    y.forward(clear_buffer=True)
    (g,) = hd.grad(y, x)
    s = 1 / (1 + np.exp(-x.d))
    np.testing.assert_allclose(g.d, s * (1 - s), rtol=1e-12)
    (h,) = hd.grad(F.sum(g), x)
    np.testing.assert_allclose(h.d, s * (1 - s) * (1 - 2 * s), rtol=1e-12)


def test_static_graph_with_cleared_buffers_recomputes_for_grad() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2,), need_grad=True)
        y = F.sum(F.exp(F.sin(x) * 2.0))
        x.d = np.array([0.2, 0.7])
        y.forward(clear_buffer=True)
        y.backward(clear_buffer=True)
        (g,) = hd.grad(y, x)
        g.forward()  # recomputes every value it depends on, freed ones included
    expected = np.exp(2 * np.sin(x.d)) * 2 * np.cos(x.d)
    np.testing.assert_allclose(x.g, expected, rtol=1e-6)
    np.testing.assert_allclose(g.d, expected, rtol=1e-6)


def test_static_rerun_schedule_matches_dynamic_and_releases_the_graph() -> None:
    # the flat schedule of a re-run static graph: one-, two- and three-input nodes, a node
    # whose backward reads its output (tanh), a multi-output node (split), a scalar result
    import gc
    import weakref

    def build(x: hd.Variable, w: hd.Variable) -> hd.Variable:
        a, b = F.split(F.tanh(x * w), axis=0)
        return F.sum(F.where(a > 0.0, a, b) * F.exp(b) + a**2)

    x = hd.Variable((2, 3), need_grad=True, dtype=np.float64)
    w = hd.Variable((2, 3), need_grad=True, dtype=np.float64)
    with hd.auto_forward(False):
        y = build(x, w)
        gx, gw = hd.grad(y, [x, w])
        (h,) = hd.grad(F.sum(gx * gw), x)
    rng = np.random.default_rng(0)
    for _ in range(3):
        xd, wd = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
        x.d, w.d = xd, wd
        h.forward()
        xv, wv = var(xd), var(wd)
        gxv, gwv = hd.grad(build(xv, wv), [xv, wv])
        (hv,) = hd.grad(F.sum(gxv * gwv), xv)
        np.testing.assert_array_equal(h.d, hv.d)  # the same arithmetic, in the same order
        y.forward()
        np.testing.assert_array_equal(y.d, build(xv, wv).d)
        assert y.d.shape == ()
    ref = weakref.ref(h)
    del h, gx, gw, y
    gc.collect()
    assert ref() is None  # the schedule does not keep its root alive


# ---------------------------------------------------------------- the call's fast paths
def test_skipped_elementwise_setup_still_raises_its_clear_error_before_linking() -> None:
    # float inputs of one dtype skip _Binary's setup; numpy's failure runs it to name the shapes
    a, b = var(np.ones((2, 3))), var(np.ones((4,)))
    with pytest.raises(ValueError, match=r"add2: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        F.add2(a, b)
    from hodiff.grad_functions.arithmetic import mul_n

    with pytest.raises(ValueError, match="mul_n: shapes"):
        mul_n(a, b, a)


def test_mixed_and_integer_dtypes_still_take_the_declared_dtype() -> None:
    f32 = hd.Variable.from_array(np.ones(3, np.float32))
    f64 = hd.Variable.from_array(np.ones(3, np.float64))
    i8 = hd.Variable.from_array(np.ones(3, np.int8))
    assert (f32 + f64).dtype == np.float64
    assert F.exp(i8).dtype == np.float64  # numpy computes float16 from int8
    assert F.tanh(f32).dtype == np.float32
    assert (f32 * 2).dtype == np.float32  # a Python int keeps the array's dtype (weak scalar)


def test_a_subclass_with_its_own_forward_does_not_take_the_inherited_ufunc() -> None:
    class Twice(F.math.Exp):  # Exp's forward is numpy's exp, run inline by the call
        def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
            outputs[0] = 2.0 * np.exp(inputs[0])

    x = var([0.0, 1.0])
    np.testing.assert_allclose(Twice()(x).d, 2 * np.exp([0.0, 1.0]))
    np.testing.assert_allclose(F.exp(x).d, np.exp([0.0, 1.0]))


def test_scalar_primitives_keep_their_static_arguments() -> None:
    y = var([1.0, 2.0]) * 3
    assert y.parent.static_arguments == ((), {"val": 3.0})
    rebuilt = type(y.parent)(**y.parent.static_arguments[1])
    np.testing.assert_allclose(rebuilt(var([1.0, 2.0])).d, [3.0, 6.0])


def test_modes_set_and_reset_in_any_order_do_not_undo_each_other() -> None:
    from hodiff.engine.context import flag_raw, flag_recording, flag_trusted

    raw = flag_raw.set(True)
    trusted = flag_trusted.set(True)
    flag_raw.reset(raw)  # not the last one set
    assert flag_trusted.get()
    assert not flag_raw.get()
    off = flag_recording.set(False)
    flag_trusted.reset(trusted)
    assert not flag_trusted.get()
    assert not flag_recording.get()
    flag_recording.reset(off)
    assert flag_recording.get()
    assert hd.get_auto_forward()


def test_topological_order_lists_a_shared_node_once() -> None:
    from hodiff.engine import api as graph

    x = var([1.0, 2.0])
    y = F.tanh(x)
    z = y * 2.0
    order = graph.topological_order([z, z, y])
    assert len(order) == len(set(order)) == 2
    assert order[0] is y.parent


def test_a_rule_cannot_change_the_engines_shared_flags() -> None:
    class Meddler(hd.Function):
        def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
            outputs[0] = inputs[0] * 2.0

        def backward_impl(self, inputs, outputs, prop_down, accum) -> None:
            prop_down[0] = False  # not allowed: the flags belong to the engine

    x = var([1.0, 2.0])
    with pytest.raises(TypeError):
        Meddler()(x * 1.0).backward()  # a one-input step on a non-leaf: the shared flags
    y = F.tanh(x)  # later passes are unaffected
    y.backward()
    np.testing.assert_allclose(x.g, 1 - np.tanh([1.0, 2.0]) ** 2)


def test_a_dead_arrays_reused_id_does_not_mark_a_new_array_shared() -> None:
    from hodiff.engine import reverse as graph

    handed: dict[int, Any] = {}
    a = np.ones(3)
    graph._hand(handed, a)
    assert graph._is_handed(handed, a)
    old = id(a)
    del a
    for _ in range(1000):  # a new array soon takes the dead one's address
        b = np.zeros(3)
        if id(b) == old:
            break
    else:
        pytest.skip("no address was reused")
    assert not graph._is_handed(handed, b)
    s = np.float64(2.0)  # no weak references: recorded as itself
    graph._hand(handed, s)
    assert graph._is_handed(handed, s)


def test_leaf_gradients_are_taken_without_copies_when_nothing_shares_them(monkeypatch) -> None:
    from hodiff.engine import reverse as graph  # the pass that commits

    copies = []
    commit = graph._commit

    def spy(leaf, g, handed):
        if leaf._grad is None and g.dtype == leaf._grad_dtype():
            copies.append(g.base is not None or graph._is_handed(handed, g))
        commit(leaf, g, handed)

    monkeypatch.setattr(graph, "_commit", spy)
    rng = np.random.default_rng(0)
    ws = [var(rng.standard_normal(s)) for s in [(8, 16), (16,), (16, 4), (4,)]]
    x = var(rng.standard_normal((5, 8)), need_grad=False)
    for _ in range(20):  # arrays die and their addresses are reused between passes
        for w in ws:
            w.zero_grad()
        h = F.tanh(F.affine(x, ws[0], ws[1]))
        F.mean(F.affine(h, ws[2], ws[3]) ** 2).backward()
    assert len(copies) == 80
    assert not any(copies)
    # a gradient that two leaves share is still copied for each (no aliasing)
    a, b = var([1.0, 2.0]), var([3.0, 4.0])
    (a + b).backward()
    assert a.g is not b.g


# ---------------------------------------------------------- the fast paths of Function.__call__
def _node_facts(v: hd.Variable) -> tuple:
    f = v.parent
    return (
        v.shape,
        v.dtype,
        v.need_grad,
        None if f is None else type(f),
        None if f is None else tuple(id(x) for x in f.inputs),
        None if f is None else (f._ydata is not None),
        None if f is None else len(f._outputs),
    )


_FAST_CASES = [
    ("exp", lambda a, b: F.exp, (np.float64, None)),  # ufunc inline, elementwise setup skipped
    ("tanh", lambda a, b: F.tanh, (np.float32, None)),  # need_outputs
    ("mul", lambda a, b: F.mul2, (np.float64, np.float64)),
    ("add mixed dtypes", lambda a, b: F.add2, (np.float32, np.float64)),  # setup runs
    ("sum", lambda a, b: F.sum, (np.float64, None)),  # a setup of its own
    ("sin of int8", lambda a, b: F.sin, (np.int8, None)),  # the declared dtype is restored
    ("add_scalar", lambda a, b: lambda x: F.add_scalar(x, 2.5), (np.float64, None)),
]


@contextlib.contextmanager
def _mode_of(mode: str) -> Iterator[None]:
    """define-by-run (as is), hd.no_grad(), or the trusted mode of hd.grad's rules."""
    flag = {"no_grad": flag_recording, "trusted": flag_trusted}.get(mode)
    if flag is None:
        yield
        return
    token = flag.set(mode == "trusted")
    try:
        yield
    finally:
        flag.reset(token)


@pytest.mark.parametrize("mode", ["define-by-run", "no_grad", "trusted"])
@pytest.mark.parametrize(("name", "make", "dtypes"), _FAST_CASES, ids=[c[0] for c in _FAST_CASES])
def test_the_fast_paths_give_what_the_general_path_gives(name, make, dtypes, mode, monkeypatch):
    """__call__'s fast path (one or two Variables with values, one output) against _call."""
    rng = np.random.default_rng(3)
    args = [
        hd.Variable.from_array(  # (an integer leaf cannot have need_grad)
            (rng.normal(size=(3, 4)) * 3).astype(dt), need_grad=i == 0 and dt is not np.int8
        )
        for i, dt in enumerate(dtypes)
        if dt is not None
    ]
    fn = make(*dtypes)
    general = hd.Function._call
    fell_back: list[str] = []
    with monkeypatch.context() as m:
        m.setattr(
            hd.Function, "_call", lambda f, a, md: fell_back.append(f.name) or general(f, a, md)
        )
        with _mode_of(mode):
            fast = fn(*args)
    assert not fell_back, f"{name}: the fast path fell back to the general one"
    with monkeypatch.context() as m:  # every call through the general path
        m.setattr(hd.Function, "__call__", lambda f, *a: general(f, a, STATE.get().modes))
        with _mode_of(mode):
            slow = fn(*args)
    assert _node_facts(fast) == _node_facts(slow)
    np.testing.assert_array_equal(fast.d, slow.d)
    assert fast.d.dtype == slow.d.dtype


def test_the_raw_fast_path_gives_what_forward_impl_gives() -> None:
    x = np.random.default_rng(4).normal(size=(5,))
    token = flag_raw.set(True)
    try:
        fast = [F.exp(x), F.tanh(x), F.mul_scalar(x, 3.0), F.sum(x)]
        prims = (F.math.Exp(), F.math.Tanh(), F.arithmetic.MulScalar(val=3.0), F.reduction.Sum())
        slow = [f._forward_arrays([x]) for f in prims]
    finally:
        flag_raw.reset(token)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)
        assert type(a) is type(b)


def test_relinked_links_a_copy_that_holds_the_same_arrays() -> None:
    # Function.relinked: the node again on inputs holding the very same arrays (a value
    # computed again and shared), its outputs the node's own arrays; nothing runs again
    x = hd.Variable.from_array(np.array([0.5, -2.0]), need_grad=True)
    y = F.tanh(x)
    x2 = hd.Variable.from_array(x.d, need_grad=True, copy=False)
    made = y.parent.relinked([x2])
    assert made is not None
    (z,) = made
    assert z.d is y.d
    assert z.parent is not y.parent
    assert z.parent.inputs[0] is x2
    (g,) = hd.grad(F.sum(z), x2)  # the gradient reaches x2, not x
    np.testing.assert_allclose(g.d, 1 - np.tanh(x.d) ** 2, rtol=1e-15)
    assert y.parent.relinked([hd.Variable.from_array(x.d.copy())]) is None  # another array
