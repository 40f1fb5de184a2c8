"""Misuse found by trying the library as a new user: each is now right or a clear error.

Every error test also checks that the leaves' ``.g`` are unchanged and that the
graph still works afterwards (issue 8, item 10). Expected values are derived by
hand (closed forms) or by numpy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


def var(a: Any, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


def unchanged_after(
    error: type[Exception], match: str, call: Callable[[], Any], *leaves: hd.Variable
) -> None:
    """``call`` raises ``error``; every leaf's ``.g`` is what it was before."""
    before = [x.g.copy() for x in leaves]
    with pytest.raises(error, match=match):
        call()
    for x, b in zip(leaves, before, strict=True):
        np.testing.assert_array_equal(x.g, b)


# ---------------------------------------------------------------- 1. values of another shape
def test_static_leaf_rejects_a_value_of_another_shape() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((32, 4), need_grad=True)
        loss = F.mean(x * x)
        x.d = np.full((32, 4), 2.0)
        loss.forward()
        loss.backward()
        g = x.g.copy()
        np.testing.assert_allclose(g, 2 * 2.0 / 128)  # d mean(x^2) / dx = 2x / N

        def feed() -> None:
            x.d = np.ones((17, 4))  # the mean would still divide by 128

        unchanged_after(ValueError, r"shape \(17, 4\).*shape \(32, 4\)", feed, x)
        np.testing.assert_array_equal(x.d, 2.0)  # the old value stays
        loss.forward()
        loss.backward()  # the graph still works
        np.testing.assert_allclose(x.g, 2 * g)


def test_dynamic_leaf_used_in_a_graph_rejects_a_value_of_another_shape() -> None:
    x = var(np.ones(4))
    y = F.mean(x)
    with pytest.raises(ValueError, match=r"shape \(3,\).*shape \(4,\)"):
        x.d = np.ones(3)
    y.forward()
    assert float(y.d) == 1.0


def test_setting_a_scalar_fills_and_the_value_is_copied() -> None:
    x = var(np.zeros(3))
    x.d = 2.5
    np.testing.assert_array_equal(x.d, [2.5, 2.5, 2.5])
    a = np.array([1.0, 2.0, 3.0])
    x.d = a
    a[:] = 7.0  # the caller's array is not the Variable's
    np.testing.assert_array_equal(x.d, [1.0, 2.0, 3.0])


# ---------------------------------------------------------------- 2. freed buffers
def test_grad_after_backward_with_clear_buffer_raises_naming_the_freed_value() -> None:
    w = var([0.3, -1.2])
    y = F.sum(F.exp(F.sin(w) * 2.0))
    y.backward(clear_buffer=True)
    expected = np.exp(2 * np.sin(w.d)) * 2 * np.cos(w.d)
    np.testing.assert_allclose(w.g, expected, rtol=1e-12)
    unchanged_after(RuntimeError, "grad: exp needs its output 0.*freed", lambda: hd.grad(y, w), w)
    unchanged_after(RuntimeError, "backward: exp needs its output 0.*clear_buffer", y.backward, w)
    y.forward()  # recomputing the values makes the graph usable again
    y.backward()
    np.testing.assert_allclose(w.g, 2 * expected, rtol=1e-12)
    (g,) = hd.grad(y, w)
    np.testing.assert_allclose(g.d, expected, rtol=1e-12)


def test_forward_with_clear_buffer_then_reading_a_freed_value_raises() -> None:
    x = var([0.5, 1.0])
    h = x * 2.0
    y = F.sum(F.exp(h))  # exp keeps its output, not its input: h is freed
    y.forward(clear_buffer=True)
    with pytest.raises(RuntimeError, match=r"output of mul_scalar \(shape \(2,\)\) has no value"):
        _ = h.d
    with pytest.raises(RuntimeError, match="add_scalar: input 0 is the output of mul_scalar"):
        h + 1.0
    y.backward()  # the backward rules' values were kept
    np.testing.assert_allclose(x.g, 2 * np.exp(2 * x.d), rtol=1e-12)


# ---------------------------------------------------------------- 3. never forwarded
def test_backward_of_a_static_graph_never_forwarded_says_to_call_forward() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3,), need_grad=True)
        y = F.sum(F.exp(x))
        unchanged_after(RuntimeError, r"static graph was not run.*forward\(\)", y.backward, x)
        x.d = np.array([0.0, 1.0, 2.0])
        y.forward()
        y.backward()
    np.testing.assert_allclose(x.g, np.exp([0.0, 1.0, 2.0]), rtol=1e-6)


def test_a_partially_forwarded_static_graph_raises() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2,), need_grad=True)
        h = F.exp(x)
        y = F.sum(h * h)
        h.forward()  # not y
        unchanged_after(RuntimeError, "output of sum", y.backward, x)


# ---------------------------------------------------------------- 4. deepcopy
def test_deepcopy_of_a_variable_with_a_graph_raises() -> None:
    x = var([1.0, 2.0])
    y = F.sum(x * x)
    with pytest.raises(TypeError, match=r"deepcopy.*output of sum"):
        copy.deepcopy(y)
    with pytest.raises(TypeError, match=r"copy\.copy.*output of sum"):
        copy.copy(y)
    y.backward()
    np.testing.assert_array_equal(x.g, [2.0, 4.0])


def test_deepcopy_of_a_leaf_is_independent() -> None:
    x = var([1.0, 2.0])
    x.g = np.array([5.0, 6.0])
    c = copy.deepcopy(x)
    assert c is not x
    assert c.need_grad
    assert c.parent is None
    c.d[...] = 0.0
    c.g[...] = 0.0
    np.testing.assert_array_equal(x.d, [1.0, 2.0])
    np.testing.assert_array_equal(x.g, [5.0, 6.0])
    params = copy.deepcopy({"w": x})  # a dict of parameters (a snapshot) works
    np.testing.assert_array_equal(params["w"].d, [1.0, 2.0])


# ---------------------------------------------------------------- 5. truth and comparisons
def test_bool_follows_numpy() -> None:
    x = var([1.0])
    assert not bool(x > 5.0)
    assert bool(x < 5.0)
    assert bool(var(3.0) > 2.0)
    assert not bool(var(1.0) > 2.0)
    assert not bool(var(0.0))
    with pytest.raises(ValueError, match=r"truth value of a Variable of shape \(2,\)"):
        bool(var([1.0, 2.0]))
    cond = var(np.ones((2, 2))) > 0.0
    with pytest.raises(ValueError, match="ambiguous"):
        bool(cond)  # as in `if x > 0.0:`


def test_comparisons_are_elementwise_and_not_differentiable() -> None:
    x, y = var([1.0, 5.0, 7.0]), var([2.0, 5.0, 6.0])
    for op, ref in (
        (lambda a, b: a < b, np.less),
        (lambda a, b: a <= b, np.less_equal),
        (lambda a, b: a > b, np.greater),
        (lambda a, b: a >= b, np.greater_equal),
    ):
        r = op(x, y)
        np.testing.assert_array_equal(r.d, ref(x.d, y.d))
        assert r.dtype == np.bool_
        assert not r.need_grad
        np.testing.assert_array_equal(op(x, 5.0).d, ref(x.d, 5.0))
        np.testing.assert_array_equal(op(5.0, x).d, ref(5.0, x.d))
        np.testing.assert_array_equal(op(y.d, x).d, ref(y.d, x.d))  # an ndarray on the left
    assert (x == x) is True
    assert (x == y) is False
    assert len({x, y, x}) == 2


# ---------------------------------------------------------------- 6. from_array copies
def test_from_array_copies_so_later_mutation_does_not_change_the_gradient() -> None:
    a = np.array([1.0, 2.0])
    x = hd.Variable.from_array(a, need_grad=True)
    y = F.sum(x * x)
    a[:] = 10.0
    y.backward()
    np.testing.assert_array_equal(x.g, [2.0, 4.0])
    shared = hd.Variable.from_array(a, copy=False)  # the explicit zero-copy path
    assert shared.d is a


def test_constants_passed_to_functions_are_captured_at_call_time() -> None:
    c = np.array([3.0, 4.0])
    x = var([1.0, 1.0])
    y = F.sum(x * c)
    c[:] = 0.0
    y.backward()
    np.testing.assert_array_equal(x.g, [3.0, 4.0])


# ---------------------------------------------------------------- 7. one float dtype
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.bool_])
def test_small_int_and_bool_inputs_compute_in_float64_in_both_modes(dtype: Any) -> None:
    a = np.array([1, 0, 1]).astype(dtype)
    y = F.exp(a)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.d, np.exp(a.astype(np.float64)))  # not float16-rounded
    with hd.auto_forward(False):
        x = hd.Variable.from_array(a)
        z = F.sin(x)
        assert z.dtype == np.float64
        z.forward()
    assert z.d.dtype == np.float64
    assert z.dtype == np.float64
    np.testing.assert_array_equal(z.d, np.sin(a.astype(np.float64)))


# ---------------------------------------------------------------- 8. bad arguments
def test_bad_variable_arguments_raise_at_call_time() -> None:
    with pytest.raises(ValueError, match=r"shape \(-1, 3\) has a negative size"):
        hd.Variable((-1, 3))
    with pytest.raises(TypeError, match="shape"):
        hd.Variable((2.5, 3))
    with pytest.raises(TypeError, match="set_auto_forward: enabled must be a bool"):
        hd.set_auto_forward("no")
    assert hd.get_auto_forward() is True
    with pytest.raises(TypeError, match="auto_forward"), hd.auto_forward("no"):  # type: ignore
        pass
    x = var([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"cannot set None.*\(3,\)"):
        x.d = None
    unchanged_after(
        ValueError, r"gradient of shape \(5,\).*shape \(3,\)", lambda: x.apply(g=np.ones(5)), x
    )
    x.g = 1.5  # a scalar fills
    np.testing.assert_array_equal(x.g, [1.5, 1.5, 1.5])


def test_non_integer_axis_raises_type_error() -> None:
    x = var(np.ones((2, 3)))
    with pytest.raises(TypeError, match="sum: axis must be None, an int or a sequence of ints"):
        F.sum(x, axis=1.0)
    with hd.auto_forward(False), pytest.raises(TypeError, match="mean: axis"):
        F.mean(hd.Variable((2, 3)), axis=(0, 1.0))


def test_gradcheck_rejects_zero_size_inputs() -> None:
    with pytest.raises(ValueError, match=r"input 0 has no elements \(shape \(0, 3\)\)"):
        hd.gradcheck(lambda x: F.sum(x * x), [np.ones((0, 3))])


def test_division_by_zero_follows_numpy() -> None:
    x = var([1.0, -2.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        y = x / 0.0
        np.testing.assert_array_equal(y.d, np.array([1.0, -2.0, 0.0]) / 0.0)
        (g,) = hd.grad(F.sum(x / 0.0), x)
    np.testing.assert_array_equal(g.d, [np.inf, np.inf, np.inf])  # d(x / 0) / dx = 1 / 0


def test_jacobian_and_hessian_take_a_list_of_inputs_as_a_tuple() -> None:
    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    ja, jb = hd.jacobian(lambda u, v: u * v, [a, b])
    np.testing.assert_array_equal(ja, np.diag(b))
    np.testing.assert_array_equal(jb, np.diag(a))
    h = hd.hessian(lambda u, v: F.sum(u * v), [a, b])
    np.testing.assert_array_equal(h[0][1], np.eye(2))
    np.testing.assert_array_equal(hd.jacobian(lambda u: u * u, [1.0, 2.0]), np.diag([2.0, 4.0]))


# ---------------------------------------------------------------- 9. no_grad
def test_backward_of_a_graph_built_under_no_grad_raises() -> None:
    x = var([1.0, 2.0])
    with hd.no_grad():
        y = F.sum(x * x)
    unchanged_after(RuntimeError, r"no graph and need_grad=False.*no_grad", y.backward, x)
    with pytest.raises(ValueError, match=r"outputs\[0\] has no graph.*no_grad"):
        hd.grad(y, x)
    with hd.no_grad(), pytest.raises(ValueError, match="recording is off"):
        hd.grad(F.sum(x * x), x)


# ---------------------------------------------------------------- 10. no side effects
def test_failed_calls_leave_gradients_and_graph_as_they_were() -> None:
    x, w = var([1.0, 2.0]), var([0.5, -0.5])
    y = F.sum(F.tanh(x * w))
    y.backward()
    gx, gw = x.g.copy(), w.g.copy()
    failing = [
        (ValueError, "backward", lambda: y.backward(np.ones(3))),
        (ValueError, "grad_outputs", lambda: hd.grad(y, x, grad_outputs=[np.ones(2)])),
        (ValueError, "inputs", lambda: hd.grad(y, [x, var([1.0])])),
        (ValueError, "mul2", lambda: x * var([1.0, 2.0, 3.0])),
        (ValueError, "Variable.g", lambda: w.apply(g=np.ones(4))),
        (ValueError, "Variable.d", lambda: w.apply(d=np.ones(4))),
    ]
    for error, match, call in failing:
        unchanged_after(error, match, call, x, w)
    y.backward()
    np.testing.assert_allclose(x.g, 2 * gx, rtol=1e-14)
    np.testing.assert_allclose(w.g, 2 * gw, rtol=1e-14)


# ---------------------------------------------------------------- 11. powers at zero
def test_powers_at_zero_have_zero_derivatives_at_every_order() -> None:
    x = var([0.0, 1.5])
    (g1,) = hd.grad(F.sum(x**0.0), x)
    (g2,) = hd.grad(F.sum(g1 * g1 + g1), x, allow_unused=True)  # g1 is constant
    np.testing.assert_array_equal(g1.d, [0.0, 0.0])
    np.testing.assert_array_equal(g2.d, [0.0, 0.0])
    y = var([2.0, 0.5])
    (h1,) = hd.grad(F.sum(0.0**y), y)  # 0^y = 0 for y > 0: no math domain error
    np.testing.assert_array_equal(h1.d, [0.0, 0.0])
    # x0 ** x1 at x0 = 0: d/dx0 = x1 x0^(x1-1), d/dx1 = x0^x1 log x0 -> 0
    a, b = var([0.0, 0.0, 2.0]), var([2.0, 0.0, 0.0])
    ga, gb = hd.grad(F.sum(a**b), [a, b])
    np.testing.assert_array_equal(ga.d, [0.0, 0.0, 0.0])
    np.testing.assert_allclose(gb.d, [0.0, 0.0, np.log(2.0)], rtol=1e-15)
    (gaa,) = hd.grad(F.sum(ga), a)  # x1 (x1 - 1) x0^(x1-2): 2 at (0, 2), 0 where x1 = 0
    np.testing.assert_array_equal(gaa.d, [2.0, 0.0, 0.0])
    (gab,) = hd.grad(F.sum(ga), b)  # x0^(x1-1) (1 + x1 log x0): 1/2 at (2, 0)
    np.testing.assert_allclose(gab.d, [0.0, 0.0, 0.5], rtol=1e-15)


# ---------------------------------------------------------------- custom rules of another shape
class SumsTooMuch(hd.Function):
    """y = 2 x with a rule that stores a gradient of shape x.shape[1:] (a bug)."""

    def forward_impl(self, inputs: Any, outputs: Any) -> None:
        outputs[0] = inputs[0] * 2.0

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if prop_down[0]:
            inputs[0].store(F.sum(outputs[0].grad, axis=0) * 2.0, accum[0])


class WritesGrad(hd.Function):
    """y = 2 x with a rule that bypasses store and writes a (1, n) gradient (a bug)."""

    def forward_impl(self, inputs: Any, outputs: Any) -> None:
        outputs[0] = inputs[0] * 2.0

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if prop_down[0]:
            inputs[0].grad = F.sum(outputs[0].grad, axis=0, keepdims=True) * 2.0


def test_a_rule_storing_a_gradient_of_another_shape_is_named() -> None:
    x = var(np.ones((3, 2)))
    match = r"sums_too_much: backward_impl: a gradient of shape \(2,\).*shape \(3, 2\)"
    unchanged_after(ValueError, match, lambda: F.sum(SumsTooMuch()(x)).backward(), x)
    unchanged_after(ValueError, match, lambda: hd.grad(F.sum(SumsTooMuch()(x)), x), x)
    match = r"leaf of shape \(3, 2\) came out with shape \(1, 2\)"
    unchanged_after(ValueError, match, lambda: F.sum(WritesGrad()(x)).backward(), x)
    with pytest.raises(ValueError, match=r"inputs\[0\] \(shape \(3, 2\)\) came out with shape"):
        hd.grad(F.sum(WritesGrad()(x)), x)


def test_from_array_keeps_a_numpy_scalars_dtype() -> None:
    # np.float64 subclasses Python's float: it must keep float64, not take the context's dtype
    assert hd.Variable.from_array(np.float64(1.5)).dtype == np.float64
    assert hd.Variable.from_array(np.float32(1.5)).dtype == np.float32
    assert hd.Variable.from_array(np.int64(2)).dtype == np.int64
    # a Python number alone is what numpy makes of it (NumPy 2: float64), as a list is
    assert hd.Variable.from_array(1.5).dtype == np.float64
    assert hd.Variable.from_array([1.5]).dtype == np.float64


def test_numpy_and_cupy_inputs_mixed_give_a_clear_error() -> None:
    # no GPU here: a stand-in array type from a module named cupy, and a forward that fails
    # the way cupy does on a numpy argument
    class FakeCupyArray(np.ndarray):
        pass

    FakeCupyArray.__module__ = "cupy._core.core"

    class Fails(hd.Function):
        def forward_impl(self, inputs, outputs):
            raise TypeError("Unsupported type <class 'numpy.ndarray'>")

    a = hd.Variable.from_array(np.ones(3))
    b = hd.Variable.from_array(np.ones(3), need_grad=True)
    b._data = np.ones(3).view(FakeCupyArray)
    with pytest.raises(TypeError, match=r"fails: inputs live on different devices \(input 0 numpy"):
        Fails()(a, b)
    with pytest.raises(TypeError, match="Unsupported type"):  # one device: cupy's own error
        Fails()(a, a)
