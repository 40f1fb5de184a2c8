"""A new user's traps on Variable: each gives the right result or an error saying what to do.

Expected values are numpy's on the same arrays (comparisons, formatting, lists).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F

X = np.array([1.0, 2.0, 3.0])


def var(need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(X, need_grad=need_grad)


def test_equality_with_a_scalar_or_an_array_is_elementwise() -> None:
    x = var()
    np.testing.assert_array_equal((x == 2.0).d, X == 2.0)
    np.testing.assert_array_equal((x != 2.0).d, X != 2.0)
    np.testing.assert_array_equal((x == np.array([1.0, 0.0, 3.0])).d, [True, False, True])
    np.testing.assert_array_equal((np.array([1.0, 0.0, 3.0]) == x).d, [True, False, True])
    np.testing.assert_array_equal((np.array([1.0, 0.0, 3.0]) != x).d, [False, True, False])
    assert float(F.sum(x != 2.0).d) == 2.0
    np.testing.assert_array_equal(F.where(x == 2.0, x, 0.0).d, [0.0, 2.0, 0.0])
    np.testing.assert_array_equal((x * (x == 2.0)).d, [0.0, 2.0, 0.0])


def test_a_mask_from_equality_passes_no_gradient_and_the_product_does() -> None:
    x = var()
    (g,) = hd.grad(F.sum(x * (x == 2.0)), x)
    np.testing.assert_array_equal(g.d, [0.0, 1.0, 0.0])


def test_between_variables_equality_stays_identity() -> None:
    x, y = var(), var()
    assert (x == x) is True
    assert (x == y) is False
    assert (x != y) is True
    assert (x == None) is False  # noqa: E711 (the comparison under test)
    assert {x: 1, y: 2}[y] == 2
    assert x in [y, x]
    assert len({x, y, x}) == 2


def test_float_format_and_tolist() -> None:
    loss = F.sum(var() * var())
    assert float(loss) == 14.0
    assert f"{loss:.3f}" == "14.000"
    assert f"{loss}" == str(loss)
    assert loss.tolist() == 14.0
    assert var().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match=r"unsupported format string '\.3f' for a Variable of "):
        f"{var():.3f}"


def test_item_assignment_points_to_where() -> None:
    h = var()
    with pytest.raises(TypeError, match=r"item assignment.*F\.where\(mask, new, v\)"):
        h[0] = 0.0
    np.testing.assert_array_equal(h.d, X)


def test_grad_takes_any_iterable_of_variables() -> None:
    params = {"a": var(), "b": var()}
    loss = F.sum(params["a"] * params["b"] * 2.0)
    ga, gb = hd.grad(loss, params.values())
    np.testing.assert_array_equal(ga.d, 2 * X)
    np.testing.assert_array_equal(gb.d, 2 * X)
    (g,) = hd.grad(loss, (v for v in [params["a"]]))
    np.testing.assert_array_equal(g.d, 2 * X)
    with pytest.raises(TypeError, match=r"inputs is a dict: pass its values"):
        hd.grad(loss, params)


def test_nnabla_spellings() -> None:
    v = hd.Variable.from_numpy_array(X, need_grad=True)
    a = X.copy()
    w = hd.Variable.from_numpy_array(a)
    a[0] = 100.0  # a copy, as NNabla's
    assert w.d[0] == 1.0
    assert v.need_grad
    with hd.auto_forward(False):
        y = F.tanh(v) * 2.0
    y.forward(clear_no_need_grad=True)
    np.testing.assert_allclose(y.d, np.tanh(X) * 2.0)
    with pytest.raises(AttributeError, match=r"persistent \(NNabla's flag\).*retain_grad"):
        v.persistent = True
    with pytest.raises(AttributeError, match="persistent"):
        _ = v.persistent


def test_a_variable_pickles_with_its_value() -> None:
    v = var()
    w = pickle.loads(pickle.dumps(v))
    np.testing.assert_array_equal(w.d, X)
    assert w.need_grad


def test_a_python_bool_where_a_mask_is_wanted_raises_naming_f_equal() -> None:
    x = var()
    with pytest.raises(TypeError, match=r"where: condition is the Python bool True.*F\.equal"):
        F.where(True, x, 0.0)
    with pytest.raises(TypeError, match=r"Python bool \(False\) as an operand.*F\.equal"):
        _ = x * False
    with pytest.raises(TypeError, match=r"Python bool"):
        _ = True + x
    np.testing.assert_array_equal((x * 1).d, X)  # ints stay numbers


@pytest.mark.parametrize("make", [F.add_n, F.mul_n], ids=["add_n", "mul_n"])
def test_nnablas_input_mask_says_how_hodiff_switches_inputs(make) -> None:
    xs = [hd.Variable.from_array(X * (k + 1), need_grad=True) for k in range(3)]
    y = make(*xs)
    with pytest.raises(NotImplementedError, match=r"set_active_input_mask: .*0/1 Variables"):
        y.parent.set_active_input_mask([True, False, True])


def test_the_input_mask_idiom_is_nnablas_semantics_in_a_static_graph() -> None:
    # NNabla: inputs masked off are left out of the sum (product) and get no gradient
    values = [X * (k + 1) for k in range(3)]
    with hd.auto_forward(False):
        xs = [hd.Variable.from_array(v, need_grad=True) for v in values]
        ms = [hd.Variable(()) for _ in values]
        s = F.add_n(*[x * m for x, m in zip(xs, ms, strict=True)])
        p = F.mul_n(*[x * m + (1.0 - m) for x, m in zip(xs, ms, strict=True)])
        loss = F.sum(s) + F.sum(p)
    for mask in ([True, False, True], [False, True, False], [True, True, True]):
        for m, on in zip(ms, mask, strict=True):
            m.d = np.array(float(on))
        loss.forward()
        for x in xs:
            x.g = 0.0
        loss.backward()
        on = [v for v, k in zip(values, mask, strict=True) if k]
        np.testing.assert_allclose(s.d, np.sum(on, axis=0))
        np.testing.assert_allclose(p.d, np.prod(on, axis=0))
        for k, (x, active) in enumerate(zip(xs, mask, strict=True)):
            others = [v for j, v in enumerate(values) if mask[j] and j != k]
            want = 1.0 + np.prod(others, axis=0) if active else 0.0 * X
            np.testing.assert_allclose(x.g, want)


def test_reading_a_variable_attribute_of_grads_result_says_it_is_a_list() -> None:
    x = var()
    g = hd.grad(F.sum(x * x), x)
    with pytest.raises(AttributeError, match=r"hd\.grad returns a list .*\(g,\) = hd\.grad"):
        _ = g.d
    with pytest.raises(AttributeError, match=r"then g\.backward"):
        g.backward()
    assert isinstance(g, list)
    np.testing.assert_array_equal(g[0].d, 2 * X)  # the list works as a list
    (g0,) = hd.grad(F.sum(x * x), x, create_graph=False)
    np.testing.assert_array_equal(g0.d, 2 * X)
    y = hd.checkpoint(lambda a: hd.grad(F.sum(a**3), a), x)  # a checkpoint keeps the list
    assert type(y) is list
    np.testing.assert_allclose(y[0].d, 3 * X**2)


def test_float_labels_say_to_pass_integers() -> None:
    x = hd.Variable.from_array(np.array([[0.0, 0.0], [1.0, 3.0]]), need_grad=True)
    with pytest.raises(TypeError, match=r"got dtype float64.*t\.astype\(np\.int64\)"):
        F.softmax_cross_entropy(x, np.array([[1.0], [0.0]]))
    got = F.softmax_cross_entropy(x, np.array([[1.0], [0.0]]).astype(np.int64))
    np.testing.assert_allclose(got.d[:, 0], [np.log(2.0), np.log(1.0 + np.exp(2.0))])


def test_pickling_a_functions_output_says_what_to_pickle() -> None:
    y = F.tanh(var())
    with pytest.raises(TypeError, match=r"pickle: this Variable is the output of tanh.*unlinked"):
        pickle.dumps(y)
    w = pickle.loads(pickle.dumps(y.unlinked()))
    np.testing.assert_array_equal(w.d, np.tanh(X))
