"""NNabla's conventions where hodiff follows them (issue 25): each case against a numpy
reference or an equivalent call, and finite differences for the gradients."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF

RNG = np.random.default_rng(25)


# ---------------------------------------------------------------- negative base_axis
@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "negative", "positive"),
    [
        (F.convolution, ((2, 2, 10), (4, 2, 1)), {"pad": (3,), "stride": (2,)}, -2, 1),
        (F.convolution, ((2, 3, 2, 5, 4), (2, 2, 3, 3)), {"pad": (1, 0)}, -3, 2),
        (F.deconvolution, ((2, 2, 5), (2, 3, 2)), {"stride": (2,)}, -2, 1),
        (F.depthwise_convolution, ((2, 3, 6), (3, 2)), {}, -2, 1),
        (F.top_k_data, ((2, 3, 4),), {"k": 2}, -1, 2),
        (F.top_k_data, ((2, 3, 4),), {"k": 3, "reduce": False}, -2, 1),
        (F.kl_multinomial, ((2, 3, 4), (2, 3, 4)), {}, -2, 1),
        (F.prelu, ((2, 3, 4), (3,)), {}, -2, 1),
    ],
)
def test_negative_base_axis_counts_from_the_end(fn, args, kwargs, negative, positive) -> None:
    xs = [RNG.uniform(0.1, 0.9, size=s) for s in args]
    y_neg = fn(*xs, base_axis=negative, **kwargs)
    y_pos = fn(*xs, base_axis=positive, **kwargs)
    np.testing.assert_array_equal(y_neg.d, y_pos.d)
    # and its gradient (the same node underneath)
    hd.gradcheck(lambda *vs: F.sum(fn(*vs, base_axis=negative, **kwargs) ** 2), xs)


@pytest.mark.parametrize(
    ("fn", "args", "base_axis"),
    [
        (F.convolution, ((2, 2, 10), (4, 2, 1)), -1),  # no room for channel and spatial axes
        (F.convolution, ((2, 2, 10), (4, 2, 1)), -4),
        (F.top_k_data, ((2, 3),), -3),
        (F.kl_multinomial, ((2, 3), (2, 3)), -2),  # base_axis 0 leaves no sample axis
    ],
)
def test_base_axis_out_of_range_names_the_function(fn, args, base_axis) -> None:
    xs = [RNG.uniform(0.1, 0.9, size=s) for s in args]
    kw = {"k": 1} if fn is F.top_k_data else {}
    with pytest.raises(ValueError, match=rf"{fn.__name__}: base_axis={base_axis} must be in"):
        fn(*xs, base_axis=base_axis, **kw)


# ---------------------------------------------------------------- one_hot of float ids
def test_one_hot_takes_whole_float_ids_and_refuses_others() -> None:
    y = F.one_hot(np.array([[1.0], [2.0]], dtype=np.float32), (3,))
    np.testing.assert_array_equal(y.d, np.eye(3)[[1, 2]])
    for bad in (np.array([[0.5]]), np.array([[np.nan]])):
        with pytest.raises(ValueError, match=r"one_hot: float ids .* must be whole"):
            F.one_hot(bad, (3,))


# ---------------------------------------------------------------- NNabla's errors
def test_concatenate_of_a_0d_input_raises_value_and_runtime_error() -> None:
    for xs in ((np.array(1.0), np.array(2.0)), (np.ones(2), np.array(2.0))):
        with pytest.raises(ValueError, match=r"concatenate: .* got shape \(\) for input"):
            F.concatenate(*xs, axis=0)
        with pytest.raises(RuntimeError):  # NNabla's error class
            F.concatenate(*xs, axis=0)


def test_split_of_an_array_without_elements_raises_as_nnabla() -> None:
    x = np.ones((1, 6, 0))
    with pytest.raises(ValueError, match=r"split: x of shape \(1, 6, 0\) has no elements"):
        F.split(x, axis=-1)
    with pytest.raises(RuntimeError):  # NNabla's test_zero_value: a non-empty axis too
        F.split(x, axis=1)
    assert [y.shape for y in F.split(np.ones((2, 3)), axis=1)] == [(2,)] * 3


# ---------------------------------------------------------------- spectral_norm
def _power_iteration(w: np.ndarray, u: np.ndarray, itr: int, eps: float = 1e-12):
    for _ in range(itr):
        v = w.T @ u
        v = v / np.sqrt(np.sum(v**2) + eps)
        u = w @ v
        u = u / np.sqrt(np.sum(u**2) + eps)
    return u, v


def test_spectral_norm_gradient_holds_u_and_v_constant_as_nnabla() -> None:
    """Not converged (itr=1): NNabla's gW = (gW_sn - sum(gW_sn W_sn) u v^T) / sigma exactly."""
    w, u0, g = RNG.standard_normal((3, 4)), RNG.standard_normal(3), RNG.standard_normal((3, 4))
    x = hd.Variable.from_array(w, need_grad=True)
    u = hd.Variable.from_array(u0.copy(), need_grad=True)
    y, u_before = F.spectral_norm(x, u, itr=1, output_u=True)
    F.sum(y * g).backward()
    uu, v = _power_iteration(w, u0, 1)
    sigma = uu @ w @ v
    w_sn = w / sigma
    np.testing.assert_allclose(y.d, w_sn, rtol=1e-12)
    np.testing.assert_allclose(x.g, (g - np.sum(g * w_sn) * np.outer(uu, v)) / sigma, rtol=1e-10)
    np.testing.assert_array_equal(u.g, 0.0)  # u is a constant of the gradient
    np.testing.assert_allclose(u.d, uu, rtol=1e-12)  # updated in place (test=False)
    np.testing.assert_array_equal(u_before.d, u0)  # output_u: u as it was passed in


def test_spectral_norm_grad_through_iteration_differs_before_convergence() -> None:
    w, u0 = RNG.standard_normal((3, 4)), RNG.standard_normal(3)
    g = RNG.standard_normal((3, 4))
    grads = []
    for through in (False, True):
        x = hd.Variable.from_array(w, need_grad=True)
        kw = {"itr": 1, "test": True, "grad_through_iteration": through}
        F.sum(F.spectral_norm(x, u0, **kw) * g).backward()
        grads.append(x.g.copy())
    assert not np.allclose(grads[0], grads[1], atol=1e-6)
    # the second is the derivative of the function computed: finite differences agree
    hd.gradcheck(lambda v: F.sum(F.spectral_norm(v, u0, **kw) * g), [w], order=2)


# ---------------------------------------------------------------- Variable.d of another shape
def test_setting_d_with_leading_unit_axes_reshapes_as_nnabla() -> None:
    x = hd.Variable((6,))
    x.d = np.arange(6.0).reshape(1, 1, 6)
    assert x.d.shape == (6,)
    np.testing.assert_array_equal(x.d, np.arange(6.0))
    y = hd.Variable((1, 2, 3))
    y.d = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(y.d, np.arange(6.0).reshape(1, 2, 3))
    # the same size in another order of axes is not the same elements: refused
    for bad in ((3, 2), (2, 3, 1), (6,)):
        with pytest.raises(ValueError, match=rf"a value of shape \({bad[0]},"):
            y.d = np.zeros(bad)


# ---------------------------------------------------------------- added functions: edge cases
def test_sign_alpha_is_the_value_at_zero_and_abs_keeps_zero_gradient() -> None:
    x = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_array_equal(F.sign(x).d, [-1.0, 1.0, 1.0])  # NNabla's default alpha=1
    np.testing.assert_array_equal(F.sign(x, alpha=-0.5).d, [-1.0, -0.5, 1.0])
    v = hd.Variable.from_array(x, need_grad=True)
    F.sum(F.abs(v)).backward()
    np.testing.assert_array_equal(v.g, [-1.0, 0.0, 1.0])  # |x|' at 0 stays 0


def test_clip_by_norm_with_a_variable_threshold_and_its_errors() -> None:
    x = RNG.standard_normal((3, 4))
    c = hd.Variable.from_array(np.array(0.7), need_grad=True)
    y = F.clip_by_norm(x, c, axis=1)
    norms = np.sqrt((x**2).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(y.d, x * 0.7 / np.maximum(norms, 0.7), rtol=1e-12)
    hd.gradcheck(lambda v: F.sum(F.clip_by_norm(x, v, axis=1) ** 2), [np.array(0.7)], order=2)
    with pytest.raises(ValueError, match="clip_by_norm: clip_norm must be positive"):
        F.clip_by_norm(x, 0.0)


def test_broadcast_to_refuses_mismatched_axes() -> None:
    with pytest.raises(ValueError, match=r"broadcast_to: y of shape \(4,\) does not match"):
        F.broadcast_to(np.zeros((2, 3, 4)), np.zeros(4), axis=1)
    with pytest.raises(ValueError, match="has more axes"):
        F.broadcast_to(np.zeros(3), np.zeros((1, 3)))


def test_broadcast_to_gives_the_shape_source_no_gradient_from_y() -> None:
    # x only gives the shape: its gradient is d/dx of the rest of the loss (sum(x): ones),
    # even where y's own gradient is infinite (sqrt at 0), to every order
    b = hd.Variable.from_array(np.array([0.0, 1.0]), need_grad=True)
    x = hd.Variable.from_array(np.ones((2, 2)), need_grad=True)
    with np.errstate(divide="ignore"):
        loss = F.sum(F.sqrt(F.broadcast_to(x, b))) + F.sum(x)
        loss.backward()
        (g,) = hd.grad(loss, x)
        (gg,) = hd.grad(F.sum(g * g), x, allow_unused=True)
    np.testing.assert_array_equal(x.g, np.ones((2, 2)))
    np.testing.assert_array_equal(g.d, np.ones((2, 2)))
    np.testing.assert_array_equal(gg.d, np.zeros((2, 2)))
    np.testing.assert_array_equal(b.g, [np.inf, 1.0])  # 2 rows of d sqrt(b) = 1 / (2 sqrt b)


def test_max_with_index_under_ties_gives_the_first_and_min_matches_numpy() -> None:
    x = np.array([[1.0, 3.0, 3.0], [2.0, -1.0, -1.0]])
    y, i = F.max(x, axis=1, with_index=True)
    np.testing.assert_array_equal(i.d, [1, 0])
    y, i = F.min(x, axis=1, keepdims=True, with_index=True)
    np.testing.assert_array_equal(y.d, x.min(axis=1, keepdims=True))
    np.testing.assert_array_equal(i.d, [[0], [1]])
    assert i.dtype.kind == "i"
    assert not i.need_grad
    with pytest.raises(ValueError, match="with_index needs a non-empty reduction"):
        F.max(np.zeros((2, 0)), axis=1, with_index=True)


def test_logical_functions_match_numpy_on_broadcast_inputs() -> None:
    a = RNG.integers(-1, 2, size=(3, 4)).astype(float)
    b = RNG.integers(0, 2, size=(4,)).astype(float)
    np.testing.assert_array_equal(F.logical_and(a, b).d, np.logical_and(a, b))
    np.testing.assert_array_equal(F.logical_or(a, b).d, np.logical_or(a, b))
    np.testing.assert_array_equal(F.logical_xor(a, b).d, np.logical_xor(a, b))
    np.testing.assert_array_equal(F.logical_not(a).d, np.logical_not(a))
    np.testing.assert_array_equal(F.not_equal(a, b).d, a != b)
    with pytest.raises(TypeError, match="equal_scalar: val must be a real scalar"):
        F.equal_scalar(a, np.ones(2))


def test_add_n_and_errors_of_the_new_losses() -> None:
    with pytest.raises(ValueError, match="add_n: needs at least one input"):
        F.add_n()
    with pytest.raises(ValueError, match="mul_n: needs at least one input"):
        F.mul_n()
    with pytest.raises(ValueError, match=r"epsilon_insensitive_loss: epsilon=-1\.0 must be >= 0"):
        F.epsilon_insensitive_loss(np.zeros(2), np.zeros(2), -1.0)
    with pytest.raises(ValueError, match=r"max_pooling_backward: dy of shape \(1, 3\)"):
        F.max_pooling_backward(np.zeros((1, 3)), np.zeros((1, 4)), (2,))


def test_output_stat_needs_batch_stat() -> None:
    x = RNG.standard_normal((4, 3))
    with pytest.raises(ValueError, match="output_stat=True needs batch_stat=True"):
        F.batch_normalization(
            x, None, None, np.zeros(3), np.ones(3), batch_stat=False, output_stat=True
        )


def test_pf_normalizations_output_stat() -> None:
    x = RNG.standard_normal((4, 3))
    with hd.parameter_scope("i25"):
        y, m, v = PF.batch_normalization(x, output_stat=True)
        np.testing.assert_allclose(m.d, x.mean(axis=0, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(v.d, x.var(axis=0, keepdims=True), rtol=1e-12)
        y, m, v = PF.layer_normalization(x, output_stat=True)
        np.testing.assert_allclose(v.d, x.var(axis=1, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(y.d, (x - m.d) / np.sqrt(v.d + 1e-5), rtol=1e-10)
    hd.clear_parameters()


def test_straight_through_estimator_recipe_of_the_porting_table() -> None:
    x = hd.Variable.from_array(np.array([0.4, 1.6]), need_grad=True)
    y = x + (F.round(x) - x).unlinked()
    F.sum(y * np.array([2.0, 3.0])).backward()
    np.testing.assert_array_equal(y.d, [0.0, 2.0])
    np.testing.assert_array_equal(x.g, [2.0, 3.0])  # NNabla's identity gradient


def test_depthwise_deconvolution_is_the_transpose_of_depthwise_convolution() -> None:
    """<conv(u), v> = <u, deconv(v)> with the same filters (divisor 1: one filter per channel)."""
    w = RNG.standard_normal((3, 2, 2))
    u, v = RNG.standard_normal((2, 3, 5, 4)), RNG.standard_normal((2, 3, 4, 3))
    lhs = np.sum(F.depthwise_convolution(u, w).d * v)
    rhs = np.sum(u * F.depthwise_deconvolution(v, w).d)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)
    with pytest.raises(ValueError, match="not a multiple of divisor=2"):
        F.depthwise_deconvolution(v, w, divisor=2)


def test_multi_head_attention_errors_name_the_function() -> None:
    x, w = np.ones((2, 1, 4)), np.eye(4)
    with pytest.raises(ValueError, match="multi_head_attention: the embedding sizes E=4"):
        F.multi_head_attention(x, x, x, 3, w, w, w, w)
    with pytest.raises(ValueError, match="attn_bias_k and attn_bias_v go together"):
        F.multi_head_attention(x, x, x, 2, w, w, w, w, attn_bias_k=np.zeros(4))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_row_by_row_as_numpy(right: bool) -> None:
    seq = np.sort(RNG.integers(-2, 5, size=(3, 2, 6)).astype(float), axis=-1)
    values = RNG.integers(-4, 7, size=(3, 2, 5)).astype(float)
    y = F.searchsorted(seq, values, right=right)
    side = "right" if right else "left"
    for i, j in np.ndindex(3, 2):
        np.testing.assert_array_equal(y.d[i, j], np.searchsorted(seq[i, j], values[i, j], side))
    with pytest.raises(ValueError, match="searchsorted: sorted_sequence of shape"):
        F.searchsorted(seq, values[0])


# ---------------------------------------------------------------- one_hot: NNabla's id range
def test_one_hot_negative_ids_count_from_the_end_and_out_of_range_gives_zeros() -> None:
    ids = np.array([[-1, 0], [3, -2], [4, 1], [0, -3], [-5, 0]])
    y = F.one_hot(ids, (4, 2)).d
    expected = np.zeros((5, 4, 2))
    expected[0, 3, 0] = 1  # -1 -> 3 on the first axis
    expected[1, 3, 0] = 1  # -2 -> 0 on the second axis
    # rows 2 (4 >= 4), 3 (-3 < -2) and 4 (-5 < -4) have an id out of range: zeros
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(RuntimeError, match=r"one_hot: x of shape \(5, 2\) must have"):
        F.one_hot(ids, (4,))  # NNabla's error class (also a ValueError)


# ---------------------------------------------------------------- NNabla's error classes
def test_dropout_p_out_of_range_raises_value_and_runtime_error() -> None:
    for p in (-0.01, 1.0):
        with pytest.raises(RuntimeError, match=r"dropout: p must be in \[0, 1\)"):
            F.dropout(np.ones((2, 3)), p)
        with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\)"):
            F.dropout(np.ones((2, 3)), p)


# ---------------------------------------------------------------- einsum: NNabla's signature
def test_einsum_takes_nnablas_equation_keyword_and_numpys_order() -> None:
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4))
    np.testing.assert_allclose(F.einsum(a, b, equation="ij,jk->ik").d, a @ b, rtol=1e-12)
    np.testing.assert_allclose(F.einsum("ij,jk->ik", a, b).d, a @ b, rtol=1e-12)
    hd.gradcheck(lambda x, y: F.sum(F.einsum(x, y, equation="ij,jk->ik") ** 2), [a, b])
    with pytest.raises(TypeError, match=r"einsum: subscripts must be a str, first .* equation="):
        F.einsum(a, b)
    with pytest.raises(TypeError, match="einsum: subscripts 'ij' first and equation="):
        F.einsum("ij", a, equation="ij")


# ---------------------------------------------------------------- max/min with_index: one run
@pytest.mark.parametrize(("fn", "ref"), [(F.max, np.argmax), (F.min, np.argmin)])
def test_forward_of_the_index_computes_the_value_too(fn, ref) -> None:
    # NNabla's max/min(with_index=True) is one function: idx.forward() also gives val
    x = hd.Variable((3, 4, 5))
    x.d = RNG.normal(size=(3, 4, 5))
    with hd.auto_forward(False):
        val, idx = fn(x, (1, 2), True, with_index=True)
    idx.forward()
    reduce = np.max if fn is F.max else np.min
    np.testing.assert_array_equal(val.d, reduce(x.d, axis=(1, 2), keepdims=True))
    np.testing.assert_array_equal(idx.d.ravel(), ref(x.d.reshape(3, -1), axis=1))
    # numpy's ties (the first) and NaN (the first NaN)
    y = np.array([[1.0, 5.0, 5.0], [np.nan, 2.0, np.nan], [-1.0, 3.0, -1.0]])
    np.testing.assert_array_equal(fn(y, axis=1, with_index=True)[1].d, ref(y, axis=1))


def test_pf_depthwise_deconvolution_makes_its_parameters_and_equals_f() -> None:
    hd.clear_parameters()
    try:
        x = hd.Variable.from_array(np.random.default_rng(0).standard_normal((2, 4, 5)))
        y = PF.depthwise_deconvolution(x, (3,), divisor=2, name="dd")
        params = hd.get_parameters()
        assert params["dd/W"].shape == (4, 3)
        assert params["dd/b"].shape == (2,)
        ref = F.depthwise_deconvolution(x, params["dd/W"], params["dd/b"], divisor=2)
        np.testing.assert_array_equal(y.d, ref.d)
        assert y.shape == (2, 2, 7)
        with pytest.raises(ValueError, match="divisor=3 must divide the 4 channels"):
            PF.depthwise_deconvolution(x, (3,), divisor=3, name="bad")
    finally:
        hd.clear_parameters()
