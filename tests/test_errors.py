"""Bad input: clear exceptions at call time, naming function, argument, shapes; no side effects."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


def var(shape: tuple[int, ...], need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.ones(shape), need_grad=need_grad)


def test_shape_mismatch_names_function_and_both_shapes() -> None:
    with pytest.raises(ValueError, match=r"mul2: shapes \(2, 3\) and \(4,\)"):
        F.mul2(var((2, 3)), var((4,)))
    with pytest.raises(ValueError, match=r"add2: shapes \(2, 3\) and \(4,\)"):
        var((2, 3)) + np.ones(4)


def test_errors_are_raised_in_static_mode_too_before_linking() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2, 3), need_grad=True)
        with pytest.raises(ValueError, match=r"reshape: cannot reshape x of shape \(2, 3\)"):
            F.reshape(x, (4, 2))
        with pytest.raises(ValueError, match="sum: axis 2"):
            F.sum(x, axis=2)


def test_wrong_types() -> None:
    with pytest.raises(TypeError, match="add2: input 1 must be a Variable, an array or a scalar"):
        F.add2(var((2,)), "abc")
    with pytest.raises(TypeError, match="add_scalar: val must be a real scalar"):
        F.add_scalar(var((2,)), np.ones(2))
    with pytest.raises(TypeError, match="from_array"):
        hd.Variable.from_array(np.array(["a"]))


def test_failed_calls_leave_graph_and_gradients_as_they_were() -> None:
    x = var((3,))
    y = F.sum(x * 2.0)
    y.backward()
    before = x.g.copy()
    with pytest.raises(ValueError, match="add2"):
        F.add2(x, var((2,)))
    with pytest.raises(ValueError, match="backward"):
        y.backward(np.ones(5))
    with pytest.raises(ValueError, match="grad_outputs"):
        hd.grad(x * 2.0, x, grad_outputs=[np.ones(2)])
    np.testing.assert_array_equal(x.g, before)
    y.backward()  # the graph still works and gives the same increment
    np.testing.assert_array_equal(x.g, 2 * before)
