"""Array functions beyond the spec table: indexing, repeats, NNabla layouts, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


def var(a: Any, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


# ---------------------------------------------------------------- Variable indexing
@pytest.mark.parametrize(
    "key",
    [
        1,
        -1,
        (slice(None), 2),
        (slice(None, None, -1), slice(1, None, 2)),
        (None, Ellipsis, 0),
        (Ellipsis, None),
        [2, 0, 2],
        (np.array([1, 1]), np.array([0, 3])),
        (slice(0, 2), [3, 3, 0]),
        np.array([[True, False, True, False]] * 3),
        (),
    ],
)
def test_variable_getitem_matches_numpy(key: Any) -> None:
    a = np.arange(12.0).reshape(3, 4)
    x = var(a)
    y = x[key]
    np.testing.assert_array_equal(y.d, a[key])
    y.backward(np.ones(y.shape))
    expected = np.zeros_like(a)
    np.add.at(expected, key if isinstance(key, tuple) else (key,), 1.0)
    np.testing.assert_array_equal(x.g, expected)


def test_getitem_repeated_indices_add_up_at_every_order() -> None:
    x = var([1.0, 2.0, 3.0])
    y = F.sum(x[[0, 0, 2, 0]] ** 3)
    (g,) = hd.grad(y, [x])
    np.testing.assert_allclose(g.d, [9.0, 0.0, 27.0])  # 3 * 3 x0^2, 3 x2^2
    (h,) = hd.grad(F.sum(g), [x])
    np.testing.assert_allclose(h.d, [18.0, 0.0, 18.0])  # 9 * 2 x0, 3 * 2 x2


def test_getitem_key_errors() -> None:
    x = var(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="a Variable cannot be an index"):
        _ = x[var([0.0])]
    with pytest.raises(TypeError, match="index arrays must hold integers"):
        _ = x[np.array([0.5])]
    with pytest.raises(TypeError, match="boolean scalar"):
        _ = x[True]
    with pytest.raises(ValueError, match=r"does not fit x of shape \(2, 3\)"):
        _ = x[:, 3]
    with pytest.raises(ValueError, match="zero step"):
        _ = x[::0]


def test_getitem_in_a_static_graph_raises_at_call_time() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2, 3))
        with pytest.raises(ValueError, match="getitem"):
            _ = x[5]
        y = x[:, [2, 2]]
        assert y.shape == (2, 2)
        x.d = np.arange(6.0).reshape(2, 3)
        y.forward()
    np.testing.assert_array_equal(y.d, [[2, 2], [5, 5]])


def test_index_add_shape_mismatch() -> None:
    from hodiff.grad_functions.array import index_add

    with pytest.raises(ValueError, match=r"index_add: y of shape \(2,\) does not match"):
        index_add(np.zeros(2), ([0, 1, 1],), (3,))


# ---------------------------------------------------------------- gather
def test_gather_matches_take_and_adds_repeats() -> None:
    a = np.arange(12.0).reshape(3, 4)
    x = var(a)
    idx = np.array([[3, 3], [0, 3]])
    y = F.gather(x, idx, axis=1)
    np.testing.assert_array_equal(y.d, np.take(a, idx, axis=1))
    y.backward(np.ones(y.shape))
    np.testing.assert_array_equal(x.g, np.tile([1.0, 0.0, 0.0, 3.0], (3, 1)))


def test_gather_batch_dims_selects_rows() -> None:
    a = np.arange(6.0).reshape(2, 3)
    y = F.gather(a, np.array([[2], [0]]), axis=1, batch_dims=1)
    np.testing.assert_array_equal(y.d, [[2.0], [3.0]])


def test_gather_indices_variable_can_change_in_a_static_graph() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3, 2), need_grad=True, dtype=np.float64)
        idx = hd.Variable((2,), dtype=np.int64)
        y = F.gather(x, idx)
        x.d = np.arange(6.0).reshape(3, 2)
        idx.d = np.array([0, 2])
        y.forward()
        np.testing.assert_array_equal(y.d, [[0, 1], [4, 5]])
        idx.d = np.array([1, 1])
        y.forward()
        np.testing.assert_array_equal(y.d, [[2, 3], [2, 3]])
        y.backward(np.ones((2, 2)))
    np.testing.assert_array_equal(x.g, [[0, 0], [2, 2], [0, 0]])


def test_gather_errors() -> None:
    x = np.zeros((2, 3))
    with pytest.raises(TypeError, match="gather: indices must be integers"):
        F.gather(x, np.array([0.0]))
    with pytest.raises(ValueError, match="gather: axis 2 is out of range"):
        F.gather(x, np.array([0]), axis=2)
    with pytest.raises(ValueError, match="differ in their first batch_dims=1 axes"):
        F.gather(x, np.array([[0], [1], [1]]), axis=1, batch_dims=1)


# ---------------------------------------------------------------- joining and splitting
def test_concatenate_default_axis_is_the_last() -> None:
    y = F.concatenate(np.zeros((2, 3)), np.ones((2, 2)))
    assert y.shape == (2, 5)
    assert F.concatenate([np.zeros((1, 2)), np.ones((3, 2))], axis=0).shape == (4, 2)
    with pytest.raises(ValueError, match=r"concatenate: shapes \(2, 3\) and \(3, 2\) differ"):
        F.concatenate(np.zeros((2, 3)), np.zeros((3, 2)))


def test_split_returns_a_tuple_of_slices() -> None:
    a = np.arange(6.0).reshape(2, 3)
    (y,) = F.split(a[:1], axis=0)
    np.testing.assert_array_equal(y.d, [0.0, 1.0, 2.0])
    ys = F.split(a, axis=-1)
    assert len(ys) == 3
    np.testing.assert_array_equal(ys[2].d, [2.0, 5.0])


def test_split_of_an_unused_piece_gets_zero_gradient() -> None:
    x = var(np.arange(6.0).reshape(2, 3))
    _, b, _ = F.split(x, axis=1)
    F.sum(b * b).backward()
    np.testing.assert_array_equal(x.g, [[0, 2, 0], [0, 8, 0]])


def test_stack_errors() -> None:
    with pytest.raises(ValueError, match=r"stack: inputs of shapes \(2,\) and \(3,\) differ"):
        F.stack(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="stack: axis 3 is out of range"):
        F.stack(np.zeros(2), np.zeros(2), axis=3)


# ---------------------------------------------------------------- NNabla layouts
def test_slice_with_nnabla_lists() -> None:
    a = np.arange(24.0).reshape(2, 3, 4)
    y = F.slice(a, start=(0, 1, 0), stop=(2, 3, 4), step=(1, 1, 2))
    np.testing.assert_array_equal(y.d, a[0:2, 1:3, 0:4:2])
    np.testing.assert_array_equal(F.slice(a).d, a)
    with pytest.raises(ValueError, match="equal lengths"):
        F.slice(a, start=(0,), stop=(1, 2))


def test_pad_widths_cover_the_last_axes_in_order() -> None:
    x = np.ones((3, 3, 4, 2))
    assert F.pad(x, (1, 2)).shape == (3, 3, 4, 5)
    assert F.pad(x, (2, 2, 1, 1)).shape == (3, 3, 8, 4)
    assert F.pad(x, (0, 1, 2, 1, 3, 3)).shape == (3, 4, 7, 8)


def test_pad_modes_match_nnabla_examples() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(
        F.pad(x, (3, 3), "constant", constant_value=-1).d, [-1, -1, -1, 1, 2, 3, 4, -1, -1, -1]
    )
    np.testing.assert_array_equal(F.pad(x, (3, 3), "reflect").d, [4, 3, 2, 1, 2, 3, 4, 3, 2, 1])
    np.testing.assert_array_equal(F.pad(x, (3, 3), "repeat").d, [1, 1, 1, 1, 2, 3, 4, 4, 4, 4])


def test_pad_reflect_gradient_folds_back() -> None:
    x = var([1.0, 2.0, 3.0])
    F.pad(x, (2, 1), mode="reflect").backward(np.ones(6))
    np.testing.assert_array_equal(x.g, [1.0, 3.0, 2.0])  # [3 2 | 1 2 3 | 2]


def test_pad_errors() -> None:
    with pytest.raises(ValueError, match="pad: pad_width"):
        F.pad(np.zeros((2, 3)), (1, 2, 3))
    with pytest.raises(ValueError, match="must be non-negative"):
        F.pad(np.zeros((2, 3)), (1, -1))
    with pytest.raises(ValueError, match="pad: mode must be"):
        F.pad(np.zeros((2, 3)), (1, 1), mode="wrap")


def test_flip_default_is_the_last_axis() -> None:
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(F.flip(a).d, a[:, ::-1])
    np.testing.assert_array_equal(F.flip(a, 0).d, a[::-1])
    with pytest.raises(ValueError, match="flip: repeated axis"):
        F.flip(a, (0, -2))


@pytest.mark.parametrize(
    ("shape", "reps"),
    [((3,), (2,)), ((2, 3), (2,)), ((3,), (2, 1, 2)), ((2, 1), (1, 3)), ((), (2, 2))],
)
def test_tile_matches_numpy(shape: tuple[int, ...], reps: tuple[int, ...]) -> None:
    a = np.arange(float(np.prod(shape))).reshape(shape)
    np.testing.assert_array_equal(F.tile(a, reps).d, np.tile(a, reps))


def test_transpose_errors() -> None:
    with pytest.raises(ValueError, match=r"transpose: axes \(0, 0\) are not a permutation"):
        F.transpose(np.zeros((2, 3)), (0, 0))
    assert F.transpose(np.zeros((2, 3, 4)), (-1, 0, 1)).shape == (4, 2, 3)


# ---------------------------------------------------------------- others
def test_clip_by_value_gradient() -> None:
    x = var([-2.0, 0.5, 3.0])
    F.clip_by_value(x, -1.0, 1.0).backward(np.ones(3))
    np.testing.assert_array_equal(x.g, [0.0, 1.0, 0.0])


def test_constant_and_one_hot_follow_the_context_dtype() -> None:
    with hd.context_scope(hd.Context(dtype="float64")):
        assert F.constant(1.0, (2,)).dtype == np.float64
        assert F.one_hot(np.array([[0]]), (2,)).dtype == np.float64
    c = F.constant(0.5, (2, 2))
    assert c.dtype == np.float32
    assert not c.need_grad


def test_one_hot_nd_and_errors() -> None:
    y = F.one_hot(np.array([[1, 7], [4, 7]]), (10, 8))
    assert y.shape == (2, 10, 8)
    assert y.d[0, 1, 7] == 1
    assert y.d.sum() == 2
    with pytest.raises(TypeError, match="one_hot: x must hold integer ids"):
        F.one_hot(np.zeros((2, 1), dtype=bool), (3,))
    with pytest.raises(ValueError, match="last axis of len"):
        F.one_hot(np.zeros((2, 2), dtype=int), (3,))
    np.testing.assert_array_equal(F.one_hot(np.array([[3]]), (3,)).d, [[0, 0, 0]])  # NNabla's


def test_comparisons_cut_the_graph() -> None:
    x = var([1.0, 2.0])
    for f in (F.less, F.less_equal, F.greater, F.greater_equal, F.equal):
        y = f(x, 1.5)
        assert y.dtype == np.bool_
        assert not y.need_grad


# ---------------------------------------------------------------- declared needs
def _specs_of(module: str) -> list[Any]:
    import importlib

    return [
        s
        for s in importlib.import_module(f"hodiff.testing.specs.{module}").SPECS
        if s.order >= 1 and not s.complex
    ]


def check_freed_buffers_suffice(spec: Any) -> None:
    """forward(clear_buffer=True) frees what need_inputs/need_outputs do not claim; the
    backward must still give the gradient of the unfreed graph."""
    xs = spec.sample()

    def run(clear: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(5)
        with hd.auto_forward(False):
            leaves = [hd.Variable.from_array(x, need_grad=x.dtype.kind == "f") for x in xs]
            mids = [v * 1.0 if v.need_grad else v for v in leaves]  # non-leaf inputs
            ys = spec.fn(*mids, **spec.kwargs)
            ys = ys if isinstance(ys, tuple) else (ys,)
            loss = None
            for y in ys:
                term = F.sum(y * rng.standard_normal(y.shape))
                loss = term if loss is None else loss + term
            loss.forward(clear_buffer=clear)
            loss.backward()
        return [v.g for v in leaves if v.need_grad]

    for a, b in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", _specs_of("array"), ids=lambda s: s.name)
def test_array_backward_after_clear_buffer(spec: Any) -> None:
    check_freed_buffers_suffice(spec)
