"""Values set through ``.d`` after the forward: a reverse pass that would read them raises.

A node's values are as of its link (``seq``) or of the last forward pass that recomputed
it; a value the user set later (``Variable._version``) makes every node whose backward
reads it stale, until ``.forward()`` recomputes it. Each case asserts the error (naming
the function and the variable) or the value against a closed form.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine import api

RNG = np.random.default_rng(11)
B1 = RNG.standard_normal(5)
B2 = RNG.standard_normal(5)

STALE = r"changed after .* computed with it \(\.d set\); call \.forward\(\) on the output"


def leaf(a: Any, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


# f(x) = sum(sin(x) x) and its derivatives, elementwise
def g1(b: np.ndarray) -> np.ndarray:  # f'
    return np.cos(b) * b + np.sin(b)


def g2(b: np.ndarray) -> np.ndarray:  # f''
    return -np.sin(b) * b + 2 * np.cos(b)


def g3(b: np.ndarray) -> np.ndarray:  # f'''
    return -np.cos(b) * b - 3 * np.sin(b)


def f_of(x: hd.Variable) -> hd.Variable:
    return F.sum(F.sin(x) * x)


# ------------------------------------------------------------ the example of the issue
def test_grad_of_grad_after_a_new_batch_raises_every_time() -> None:
    # 60 iterations of the same lines, every one raises (the issue: the 1st, 18th, 51st, ...
    # gave the derivative at the new batch)
    for it in range(60):
        x = leaf(B1)
        (g,) = hd.grad(f_of(x), x)
        (h,) = hd.grad(F.sum(g * g), x)
        np.testing.assert_allclose(h.d, 2 * g1(B1) * g2(B1))
        x.d = B2  # next batch
        with pytest.raises(RuntimeError, match=STALE) as e:
            hd.grad(F.sum(h), x)
        msg = str(e.value)
        assert re.search(
            r"(sin|mul2) reads its input \d \(a leaf, shape \(5,\), dtype float64\)", msg
        ), (it, msg)
        assert x._grad is None
        # the graph built again gives the derivatives at the new point
        (g,) = hd.grad(f_of(x), x)
        (h,) = hd.grad(F.sum(g * g), x)
        (k,) = hd.grad(F.sum(h), x)
        np.testing.assert_allclose(k.d, 2 * (g2(B2) ** 2 + g1(B2) * g3(B2)))


def test_grad_of_grad_after_a_new_batch_raises_for_grad_and_backward() -> None:
    x = leaf(B1)
    (g,) = hd.grad(f_of(x), x)
    (h,) = hd.grad(F.sum(g * g), x)
    x.d = B2
    with pytest.raises(RuntimeError, match=STALE):
        hd.grad(F.sum(h), x)
    with pytest.raises(RuntimeError, match=STALE):
        F.sum(h).backward()
    with pytest.raises(RuntimeError, match=STALE):
        hd.grad(F.sum(h), x, create_graph=False)
    assert x._grad is None


# ------------------------------------------------------------ leaves
def test_in_place_operator_on_d_then_backward_raises() -> None:
    x = leaf(B1)
    y = F.sum(F.sin(x))
    x.d *= 10  # reads x.d, multiplies that array in place, sets it back: the setter runs
    with pytest.raises(RuntimeError, match=STALE) as e:
        y.backward()
    assert "backward: sin reads its input 0 (a leaf, shape (5,), dtype float64)" in str(e.value)
    assert x._grad is None
    y.forward()
    y.backward()
    np.testing.assert_allclose(x.g, np.cos(10 * B1))


def test_new_batch_between_forward_and_backward_raises() -> None:
    x = leaf(B1)
    y = f_of(x)
    x.d = B2
    with pytest.raises(RuntimeError, match=r"backward: sin reads its input 0 \(a leaf"):
        y.backward()
    with pytest.raises(RuntimeError, match=STALE):
        hd.grad(y, x)
    with pytest.raises(RuntimeError, match=STALE):
        list(hd.iter_grads(y))
    assert x._grad is None
    y.forward()  # recomputed at B2: the graph is current again
    y.backward()
    np.testing.assert_allclose(x.g, g1(B2))


def test_new_batch_between_forward_and_backward_static() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((5,), need_grad=True, dtype=np.float64)
        y = f_of(x)
    x.d = B1
    y.forward()
    x.d = B2
    with pytest.raises(RuntimeError, match=STALE):
        y.backward()
    assert x._grad is None
    y.forward()
    y.backward()
    np.testing.assert_allclose(x.g, g1(B2))


def test_apply_d_and_float32_are_named() -> None:
    x = hd.Variable.from_array(B1.astype(np.float32), need_grad=True)
    y = F.sum(F.tanh(x) * x)
    x.apply(d=B2)
    with pytest.raises(RuntimeError, match=r"\(a leaf, shape \(5,\), dtype float32\)"):
        y.backward()


def test_same_value_set_again_counts_as_a_write() -> None:
    x = leaf(B1)
    y = F.sum(F.sin(x))
    x.d = x.d  # the setter cannot know the value is unchanged (as torch's version counter)
    with pytest.raises(RuntimeError, match=STALE):
        y.backward()


def test_a_failed_check_leaves_every_gradient_untouched() -> None:
    x, w = leaf(B1), leaf(B2)
    x.g, w.g = 1.0, 2.0
    y = F.sum(F.exp(w) * F.sin(x))
    x.d = B2
    for run in (y.backward, lambda: y.backward(retain_grad=True), lambda: hd.grad(y, [x, w])):
        with pytest.raises(RuntimeError, match=r"sin reads its input 0"):
            run()
        np.testing.assert_array_equal(x.g, np.ones(5))
        np.testing.assert_array_equal(w.g, np.full(5, 2.0))


# ------------------------------------------------------------ intermediate variables
def test_intermediate_value_set_raises_for_its_consumer() -> None:
    x = leaf(B1)
    y = F.sin(x)
    z = F.sum(y * y)
    y.d = 0.5
    with pytest.raises(RuntimeError, match=STALE) as e:
        z.backward()
    assert "mul2 reads its input 0 (the output of sin, shape (5,), dtype float64)" in str(e.value)
    with pytest.raises(RuntimeError, match=STALE):
        hd.grad(z, x)
    assert x._grad is None
    z.forward()  # recomputes y from x, then z
    z.backward()
    np.testing.assert_allclose(x.g, 2 * np.sin(B1) * np.cos(B1))


def test_output_read_by_backward_set_raises() -> None:
    x = leaf(B1)
    y = F.exp(x)  # exp's backward reads its output
    s = F.sum(y)  # sum's does not read its input
    y.d = 1.0
    with pytest.raises(RuntimeError, match=r"exp reads its output 0 \(the output of exp"):
        s.backward()
    with pytest.raises(RuntimeError, match=r"exp reads its output 0"):
        hd.grad(s, x)
    assert x._grad is None
    s.forward()
    s.backward()
    np.testing.assert_allclose(x.g, np.exp(B1))


# ------------------------------------------------------------ what does not raise
def test_functions_that_do_not_read_the_changed_value_do_not_raise() -> None:
    x = leaf(B1)
    y = F.sum(x + 1.0)  # neither add_scalar nor sum reads its input
    z = F.sum(F.sin(x + 1.0) * 3.0)  # sin reads x + 1, computed (and kept) from B1
    x.d = B2
    y.backward()
    np.testing.assert_allclose(x.g, np.ones(5))
    x.zero_grad()
    z.backward()  # the derivative at the point the forward computed: consistent
    np.testing.assert_allclose(x.g, 3 * np.cos(B1 + 1.0))
    (g,) = hd.grad(z, x)
    np.testing.assert_allclose(g.d, 3 * np.cos(B1 + 1.0))


def test_unrelated_writes_do_not_raise() -> None:
    x = leaf(B1)
    y = f_of(x)
    other = leaf(B2)
    other.d = B1  # not in y's graph
    x.unlinked().d = B2  # a new leaf sharing the value: setting it replaces its own value
    y.backward()
    np.testing.assert_allclose(x.g, g1(B1))
    y.backward()  # the cached plan, checked once after the writes
    np.testing.assert_allclose(x.g, 2 * g1(B1))


def test_graph_built_after_the_write_does_not_raise() -> None:
    x = leaf(B1)
    x.d = B2
    y = f_of(x)
    y.backward()
    np.testing.assert_allclose(x.g, g1(B2))


# ------------------------------------------------------------ forward makes a graph current
def test_static_loop_stays_correct_for_every_batch() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((5,), need_grad=True, dtype=np.float64)
        y = f_of(x)
        (g,) = hd.grad(y, x)
        s = F.sum(g * g)
    rng = np.random.default_rng(3)
    for _ in range(6):
        b = rng.standard_normal(5)
        x.d = b
        y.forward()
        x.zero_grad()
        y.backward()
        np.testing.assert_allclose(x.g, g1(b))
        np.testing.assert_allclose(y.d, np.sum(np.sin(b) * b))
        s.forward()  # the gradient graph: d/dx sum(f'^2) = 2 f' f''
        x.zero_grad()
        s.backward()
        np.testing.assert_allclose(g.d, g1(b))
        np.testing.assert_allclose(x.g, 2 * g1(b) * g2(b))


def test_static_loop_with_clear_buffer() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((5,), need_grad=True, dtype=np.float64)
        y = F.sum(F.exp(F.sin(x) * x))
    for b in (B1, B2, B1 * 0.5):
        x.d = b
        y.forward(clear_buffer=True)
        x.zero_grad()
        y.backward(clear_buffer=True)
        np.testing.assert_allclose(x.g, np.exp(np.sin(b) * b) * g1(b))


def test_forward_of_another_root_does_not_make_a_graph_current() -> None:
    x = leaf(B1)
    y1 = f_of(x)
    y2 = F.sum(F.sin(x))
    x.d = B2
    y2.forward()  # recomputes y2's nodes only
    y2.backward()
    np.testing.assert_allclose(x.g, np.cos(B2))
    with pytest.raises(RuntimeError, match=STALE):
        y1.backward()


def test_grad_after_forward_rerun() -> None:
    x = leaf(B1)
    y = f_of(x)
    x.d = B2
    with pytest.raises(RuntimeError, match=STALE):
        hd.grad(y, x)
    y.forward()
    (g,) = hd.grad(y, x)
    np.testing.assert_allclose(g.d, g1(B2))
    (h,) = hd.grad(F.sum(g), x)
    np.testing.assert_allclose(h.d, g2(B2))
    (k,) = hd.grad(F.sum(h), x)
    np.testing.assert_allclose(k.d, g3(B2))
    x.d = B1
    with pytest.raises(RuntimeError, match=STALE):
        hd.grad(F.sum(h), x)  # the gradient graphs are stale too
    F.sum(h).forward()  # recomputes h's graph (y's nodes included) at B1
    (k,) = hd.grad(F.sum(h), x)
    np.testing.assert_allclose(k.d, g3(B1))


# ------------------------------------------------------------ Pullback and hvp
def test_pullback_and_hvp_unaffected() -> None:
    v = RNG.standard_normal(5)
    for b in (B1, B2):
        y, hv = hd.hvp(lambda x: F.sum(x**3), b, v)
        np.testing.assert_allclose(y.d if isinstance(y, hd.Variable) else y, np.sum(b**3))
        np.testing.assert_allclose(hv, 6 * b * v)
    x = leaf(B1)
    (g,) = hd.grad(F.sum(x**3), x)
    pb = api.Pullback([g], [x])
    for _ in range(3):  # one graph, many seeds
        (hv,) = pb([v])
        np.testing.assert_allclose(hv, 6 * B1 * v)
    x.d = B2
    with pytest.raises(RuntimeError, match=r"pullback: .* reads its input .* \(a leaf"):
        pb([v])


class Square(hd.Function):
    """x ** 2, refusing (in its forward) inputs above 100; its backward reads x."""

    def forward_impl(self, inputs: Any, outputs: list[Any]) -> None:
        if np.any(inputs[0] > 100):
            raise ValueError("square: input above 100")
        outputs[0] = inputs[0] * inputs[0]

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        inputs[0].store(outputs[0].grad * inputs[0].data * 2.0, accum[0])


@pytest.mark.parametrize("clear_buffer", [False, True])
def test_a_node_whose_forward_failed_stays_stale(clear_buffer: bool) -> None:
    x = leaf(B1)
    y = F.sum(F.sin(Square()(x)))
    x.d = np.full(5, 1e3)
    with pytest.raises(ValueError, match="above 100"):
        y.forward(clear_buffer=clear_buffer)
    with pytest.raises(RuntimeError, match=r"square reads its input 0 \(a leaf"):
        y.backward()
    x.d = B2
    y.forward(clear_buffer=clear_buffer)
    y.backward()
    np.testing.assert_allclose(x.g, np.cos(B2**2) * 2 * B2)


def test_pickled_variable_does_not_carry_its_version() -> None:
    import pickle

    x = leaf(B1)
    x.d = B2
    y = pickle.loads(pickle.dumps(x))
    assert not hasattr(y, "_version")  # a time on this process's clock
    np.testing.assert_array_equal(y.d, B2)
    assert y.need_grad
    F.sum(F.sin(y)).backward()
    np.testing.assert_allclose(y.g, np.cos(B2))
