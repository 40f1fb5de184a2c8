"""A new user's traps (issue 21): habits from numpy and PyTorch get a clear error or the
right result, never a silently wrong one. docs/pitfalls.md lists each case.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S


def _leaf(values, dtype=np.float64, need_grad=True) -> hd.Variable:
    return hd.Variable.from_array(np.array(values, dtype=dtype), need_grad=need_grad)


# ------------------------------------------------------------ Variable(array)
@pytest.mark.parametrize(
    "array",
    [np.array([3.0, 4.0]), np.array([3, 4]), np.array(2.0), 2.5],
    ids=["float array", "int array", "0-d array", "float"],
)
def test_an_array_as_the_shape_is_refused_pointing_to_from_array(array) -> None:
    # the torch.tensor habit: hd.Variable(np.array([3, 4])) made a 3x4 Variable of zeros
    with pytest.raises(TypeError, match=r"Variable.*from_array"):
        hd.Variable(array)


def test_a_list_of_floats_as_the_shape_points_to_from_array() -> None:
    with pytest.raises(TypeError, match=r"must hold ints, got float.*from_array"):
        hd.Variable([3.0, 4.0])


def test_shapes_still_work() -> None:
    assert hd.Variable([3, 4]).shape == (3, 4)
    assert hd.Variable((2,)).shape == (2,)
    assert hd.Variable(np.int64(5)).shape == (5,)
    assert hd.Variable((np.int64(2), 3)).shape == (2, 3)


# ------------------------------------------------------------ numpy functions on a Variable
@pytest.mark.parametrize(
    ("call", "use"),
    [
        (np.tanh, "F.tanh"),
        (np.exp, "F.exp"),
        (np.arctan, "F.atan"),
        (np.absolute, None),  # abs(v) is an operator: it works (below)
        (np.sum, "F.sum"),
        (np.mean, "F.mean"),
        (lambda v: np.maximum(v, 0.0), "F.maximum2"),
        (lambda v: np.linalg.inv(v), "F.batch_inv"),
        (lambda v: np.concatenate([v, v]), "F.concatenate"),
        (lambda v: np.add(v, 1.0, out=np.zeros(2)), "F.add2"),
    ],
    ids=["tanh", "exp", "arctan", "absolute", "sum", "mean", "maximum", "inv", "concat", "out="],
)
def test_a_numpy_function_on_a_variable_names_the_hodiff_function(call, use) -> None:
    v = _leaf([0.5, -1.0])
    if use is None:
        y = call(v)
        assert isinstance(y, hd.Variable)
        np.testing.assert_array_equal(y.d, [0.5, 1.0])
        return
    with pytest.raises(TypeError, match=use.replace(".", r"\.") + r"\b"):
        call(v)


def test_a_numpy_function_without_a_hodiff_twin_says_so() -> None:
    with pytest.raises(TypeError, match=r"numpy\.cbrt.*hodiff\.functions has no cbrt"):
        np.cbrt(_leaf([1.0]))


def test_asarray_of_a_variable_points_to_d() -> None:
    v = _leaf([1.0, 2.0])
    for make in (np.asarray, np.array):
        with pytest.raises(TypeError, match=r"v\.d"):
            make(v)
    with pytest.raises(TypeError, match=r"F\.stack"):
        np.array([v, v])  # was an object array of Variables


def test_a_list_of_variables_given_to_a_function_points_to_stack() -> None:
    v = _leaf([1.0, 2.0])
    with pytest.raises(TypeError, match=r"exp: input 0 .*F\.stack"):
        F.exp([v, v])


def test_arrays_and_numpy_scalars_on_the_left_still_run_the_operators() -> None:
    v = _leaf([0.5, 2.0])
    a = np.array([3.0, 1.5])
    y = F.sum(a * v + a / v - a**v + np.float64(2.0) * v - a @ v)
    (g,) = hd.grad(y, v)
    d = v.d
    # d/dv sum(a v + a / v - a^v + 2 v - a.v) = a - a / v^2 - a^v log(a) + 2 - 2 a (the
    # scalar a.v is broadcast to both elements before the sum)
    np.testing.assert_allclose(g.d, -a - a / d**2 - a**d * np.log(a) + 2.0, rtol=1e-14)
    assert isinstance(a < v, hd.Variable)
    np.testing.assert_array_equal((a < v).d, [False, True])
    assert (np.float32(1.0) < v).d.tolist() == [False, True]
    assert (a == v).d.tolist() == (a == v.d).tolist()  # elementwise (API: comparisons)
    assert v in [hd.Variable.from_array(a), v]  # between Variables: identity


def test_np_tanh_inside_a_backward_impl_names_f_tanh_when_hd_grad_records() -> None:
    # the most common beginner's bug: numpy in a rule; the plain pass hands arrays, hd.grad
    # hands Variables, so numpy works in one and must say what to do in the other
    class MyTanh(hd.Function):
        def forward_impl(self, inputs, outputs):
            outputs[0] = np.tanh(inputs[0])

        def backward_impl(self, inputs, outputs, prop_down, accum):
            y = np.tanh(inputs[0].data)  # wrong: numpy
            inputs[0].store(outputs[0].grad * (1 - y * y), accum[0])

    x = _leaf([0.3, -0.2])
    with pytest.raises(TypeError, match=r"numpy\.tanh .*F\.tanh"):
        hd.grad(F.sum(MyTanh()(x)), x)


# ------------------------------------------------------------ backward reaching no leaf
def test_backward_that_reaches_no_need_grad_leaf_raises_naming_need_grad() -> None:
    x = _leaf([1.0, 2.0], need_grad=False)
    w = _leaf([3.0, 4.0], need_grad=False)
    y = F.sum(x * w)
    with pytest.raises(RuntimeError, match=r"need_grad=True"):
        y.backward()
    np.testing.assert_array_equal(w.g, [0.0, 0.0])
    w.need_grad = True  # then it works
    y.backward()
    np.testing.assert_array_equal(w.g, [1.0, 2.0])


def test_backward_through_only_non_differentiable_functions_raises() -> None:
    x = _leaf([1.0, -2.0])
    y = F.sum(F.sign(x) * 2.0)  # sign cuts the graph: x gets no gradient
    with pytest.raises(RuntimeError, match=r"need_grad"):
        y.backward()


def test_backward_of_a_need_grad_leaf_itself_still_works() -> None:
    x = _leaf([1.0, 2.0])
    x.backward()
    np.testing.assert_array_equal(x.g, [1.0, 1.0])


# ------------------------------------------------------------ one dtype rule
def test_python_scalars_and_lists_alone_are_float64_as_numpy_makes_them() -> None:
    assert F.exp(2.0).dtype == np.float64
    assert F.exp([2.0]).dtype == np.float64
    assert F.exp(2).dtype == np.float64  # an int, made float as numpy's np.exp(2)
    assert hd.Variable.from_array(2.0).dtype == np.float64
    assert hd.Variable.from_array(2).dtype == np.int64
    assert F.exp(2.0).d == np.exp(np.float64(2.0))


def test_hessian_of_a_python_float_keeps_float64() -> None:
    h = hd.hessian(lambda x: F.exp(x) * x, 2.0)  # d2/dx2 x e^x = (x + 2) e^x
    assert h.dtype == np.float64
    assert abs(float(h) - 4.0 * math.exp(2.0)) < 1e-12
    h_list = hd.hessian(lambda x: F.sum(F.exp(x) * x), [2.0])
    assert h_list.dtype == np.float64
    np.testing.assert_allclose(h_list, [[4.0 * math.exp(2.0)]], rtol=1e-14)


def test_a_python_scalar_or_float_list_next_to_float32_keeps_float32() -> None:
    x32 = _leaf([1.0, 2.0], dtype=np.float32)
    assert (x32 * 2.0).dtype == np.float32
    assert (2.0 - x32).dtype == np.float32
    assert (x32 - [1.0, 2.0]).dtype == np.float32  # a list of Python floats is weak too
    assert F.maximum2(x32, [1.5, 1.5]).dtype == np.float32
    assert F.squared_error(x32, [0.0, 0.0]).dtype == np.float32
    y = F.sum(x32 * [3.0, 4.0])
    y.backward()
    assert x32.g.dtype == np.float32
    np.testing.assert_array_equal(x32.g, [3.0, 4.0])
    # a numpy array keeps its own dtype (numpy's promotion)
    assert (x32 * np.array([3.0, 4.0])).dtype == np.float64


def test_a_list_of_python_ints_stays_integer_labels() -> None:
    x = _leaf([[0.0, 0.0], [1.0, 3.0]], dtype=np.float32)
    loss = F.softmax_cross_entropy(x, [[1], [0]])
    assert loss.dtype == np.float32
    np.testing.assert_allclose(loss.d[:, 0], [math.log(2.0), math.log(1 + math.exp(2.0))], 1e-6)


# ------------------------------------------------------------ integer leaves
def test_an_integer_leaf_cannot_have_need_grad() -> None:
    with pytest.raises(TypeError, match=r"from_array: need_grad=True for dtype int64"):
        hd.Variable.from_array(np.array([1, 2]), need_grad=True)
    with pytest.raises(TypeError, match=r"Variable: need_grad=True for dtype int32"):
        hd.Variable((2,), need_grad=True, dtype=np.int32)
    with pytest.raises(TypeError, match=r"dtype bool"):
        hd.Variable.from_array(np.array([True]), need_grad=True)


def test_need_grad_set_later_on_an_integer_leaf_raises_at_backward_touching_nothing() -> None:
    i = hd.Variable.from_array(np.array([1, 2]))
    w = _leaf([0.5, 0.25])
    i.need_grad = True  # an attribute: seen by the reverse pass
    y = F.sum(i * w)
    with pytest.raises(TypeError, match=r"dtype int64 has need_grad=True"):
        y.backward()
    np.testing.assert_array_equal(w.g, [0.0, 0.0])
    i.need_grad = False
    y.backward()
    np.testing.assert_array_equal(w.g, [1.0, 2.0])


# ------------------------------------------------------------ losses that broadcast
LOSSES = [
    ("squared_error", lambda a, b: F.squared_error(a, b), ("x0", "x1")),
    ("absolute_error", lambda a, b: F.absolute_error(a, b), ("x0", "x1")),
    ("huber_loss", lambda a, b: F.huber_loss(a, b), ("x0", "x1")),
    ("binary_cross_entropy", lambda a, b: F.binary_cross_entropy(a, b), ("x", "t")),
]


@pytest.mark.parametrize(("name", "loss", "args"), LOSSES, ids=[c[0] for c in LOSSES])
def test_a_loss_whose_operands_broadcast_to_a_larger_shape_raises(name, loss, args) -> None:
    pred = _leaf(np.full((4, 1), 0.25))
    target = np.full((4,), 0.5)
    pattern = rf"{name}: {args[0]} of shape \(4, 1\) and {args[1]} of shape \(4,\) .*\(4, 4\)"
    with pytest.raises(ValueError, match=pattern):
        loss(pred, target)
    with pytest.raises(ValueError, match=r"\(4,\) and .* \(4, 1\)"):
        loss(_leaf(np.full((4,), 0.25)), np.full((4, 1), 0.5))


@pytest.mark.parametrize(("name", "loss", "args"), LOSSES, ids=[c[0] for c in LOSSES])
def test_a_loss_may_broadcast_to_the_shape_of_one_operand(name, loss, args) -> None:
    pred = _leaf(np.full((4, 3), 0.25))
    assert loss(pred, np.full((3,), 0.5)).shape == (4, 3)
    assert loss(pred, 0.5).shape == (4, 3)
    assert loss(np.full((3,), 0.5), pred).shape == (4, 3)


def test_squared_error_values_when_shapes_agree() -> None:
    y = F.squared_error(_leaf([[1.0], [3.0]]), np.array([[0.0], [1.0]]))
    np.testing.assert_array_equal(y.d, [[1.0], [4.0]])


# ------------------------------------------------------------ S.Adam(params, lr=...)
def _adam_first_step(w0: np.ndarray, g: np.ndarray, lr: float, eps: float = 1e-8) -> np.ndarray:
    # the first step of Adam: m_hat = g, v_hat = g^2 -> w - lr g / (|g| + eps)
    return w0 - lr * g / (np.abs(g) + eps)


@pytest.mark.parametrize(
    "wrap",
    [lambda w: [w], lambda w: {"w": w}, lambda w: w, lambda w: {"w": w}.values()],
    ids=["list", "dict", "variable", "dict values"],
)
def test_a_solver_takes_the_parameters_first_as_torch_optim(wrap) -> None:
    w = _leaf([1.0, -2.0])
    solver = S.Adam(wrap(w), lr=1e-3)
    assert solver.learning_rate() == 1e-3
    assert list(solver.get_parameters().values()) == [w]
    F.sum(w * w * w).backward()  # g = 3 w^2
    solver.update()
    expected = _adam_first_step(np.array([1.0, -2.0]), 3 * np.array([1.0, 4.0]), 1e-3)
    np.testing.assert_allclose(w.d, expected)


def test_every_solver_takes_the_parameters_first() -> None:
    for cls in (S.Sgd, S.Momentum, S.Nesterov, S.Adagrad, S.RMSprop, S.Adam, S.AdamW):
        w = _leaf([1.0])
        solver = cls([w], 0.5)
        assert solver.learning_rate() == 0.5
        assert list(solver.get_parameters().values()) == [w]
        assert cls(lr=0.25).get_parameters() == {}


def test_sgd_with_params_first_steps_exactly() -> None:
    w = _leaf([1.0, -2.0])
    solver = S.Sgd([w], lr=0.5)
    F.sum(w * w).backward()
    solver.update()
    np.testing.assert_array_equal(w.d, [0.0, 0.0])


# ------------------------------------------------------------ item, numpy, repr
def test_item_gives_a_python_number_of_a_one_element_variable() -> None:
    y = F.sum(_leaf([1.5, 2.0]))
    assert y.item() == 3.5
    assert type(y.item()) is float
    assert _leaf([[7.0]]).item() == 7.0
    with pytest.raises(ValueError, match=r"Variable.item: .*shape \(2,\)"):
        _leaf([1.0, 2.0]).item()


def test_numpy_gives_a_copy_of_the_value() -> None:
    v = _leaf([1.0, 2.0])
    a = v.numpy()
    assert type(a) is np.ndarray
    np.testing.assert_array_equal(a, [1.0, 2.0])
    a[0] = 99.0  # writing into it changes nothing in v (no stale graph through it)
    np.testing.assert_array_equal(v.d, [1.0, 2.0])


def test_repr_shows_values_shape_dtype_and_what_made_it() -> None:
    v = _leaf([1.0, 2.0])
    assert repr(v) == "Variable([1., 2.], shape=(2,), dtype=float64, need_grad=True)"
    r = repr(F.tanh(v))
    assert r.startswith("Variable([0.76159416, 0.96402758], shape=(2,), dtype=float64")
    assert r.endswith("parent=tanh)")
    big = repr(hd.Variable.from_array(np.arange(1000.0)))
    assert "..." in big
    assert "shape=(1000,)" in big
    assert len(big) < 200
    assert "<unfilled>" in repr(hd.Variable((2, 3)))
    with hd.auto_forward(False):
        s = F.exp(hd.Variable((2,)))
    assert repr(s).startswith("Variable(<no value>, shape=(2,), dtype=float32")
