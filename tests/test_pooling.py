"""Pooling family: forward against loop references over many argument mixes, NNabla's
tie and padding rules, the transposes, interpolation modes, bad input."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.functions.pooling import max_pooling_index
from hodiff.grad_functions.pooling import (
    average_pooling_backward,
    interpolate_backward,
    max_pooling_backward,
    sum_pooling_backward,
)
from hodiff.testing.specs.pooling import ref_interpolate, ref_max_pooling_index, ref_pooling

RNG = np.random.default_rng(0)

# (x shape, kernel, stride, pad)
CASES = [
    ((2, 3, 7), (3,), None, (1,)),
    ((2, 3, 8), (2,), (3,), (0,)),
    ((2, 2, 5, 6), (2, 2), None, None),
    ((2, 2, 5, 6), (3, 2), (2, 1), (1, 1)),
    ((1, 2, 7, 5), (3, 3), (3, 2), (2, 0)),
    ((2, 1, 4, 5, 3), (2, 3, 2), (1, 2, 2), (1, 1, 0)),
]
MODES = {
    "max": (F.max_pooling, {}),
    "sum": (F.sum_pooling, {}),
    "average": (F.average_pooling, {"including_pad": True}),
    "average_excluding": (F.average_pooling, {"including_pad": False}),
}


def _config(case, ignore_border):
    shape, kernel, stride, pad = case
    return shape, {"kernel": kernel, "stride": stride, "pad": pad, "ignore_border": ignore_border}


@pytest.mark.parametrize(
    ("case", "ignore_border", "mode", "channel_last"),
    list(itertools.product(CASES, (True, False), MODES, (False, True))),
)
def test_pooling_matches_loops(case, ignore_border, mode, channel_last):
    shape, kw = _config(case, ignore_border)
    fn, extra = MODES[mode]
    x = RNG.standard_normal(shape)
    ref_mode = "average" if mode.startswith("average") else mode
    want = ref_pooling(x, **kw, **extra, mode=ref_mode)
    if channel_last:
        x, want = np.moveaxis(x, 0, -1), np.moveaxis(want, 0, -1)
    y = fn(x, **kw, **extra, channel_last=channel_last)
    np.testing.assert_allclose(y.d, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("case", "ignore_border"), list(itertools.product(CASES, (True, False))))
def test_max_pooling_index_and_gradient(case, ignore_border):
    shape, kw = _config(case, ignore_border)
    x = RNG.standard_normal(shape)
    index = max_pooling_index(x, **kw).d
    np.testing.assert_array_equal(index, ref_max_pooling_index(x, **kw))
    xv = hd.Variable.from_array(x, need_grad=True)
    y = F.max_pooling(xv, **kw)
    gy = RNG.standard_normal(y.shape)
    y.backward(gy)
    want = np.zeros(x.size)
    np.add.at(want, index.reshape(-1), gy.reshape(-1))
    np.testing.assert_allclose(xv.g, want.reshape(shape), rtol=1e-12)


def test_max_pooling_ties_go_to_the_first_and_padding_never_wins():
    x = hd.Variable.from_array(np.array([[[-3.0, -3.0, -5.0, -5.0]]]), need_grad=True)
    y = F.max_pooling(x, (3,), stride=(2,), pad=(1,))
    np.testing.assert_array_equal(y.d, [[[-3.0, -3.0]]])  # not the zero padding
    y.backward()
    np.testing.assert_array_equal(x.g, [[[1.0, 1.0, 0.0, 0.0]]])  # window 0 ties: index 0 wins


def test_overlapping_windows_share_a_maximum():
    x = hd.Variable.from_array(np.array([[1.0, 9.0, 2.0, 3.0]]), need_grad=True)
    y = F.max_pooling(x, (2,), stride=(1,))
    np.testing.assert_array_equal(y.d, [[9.0, 9.0, 3.0]])
    y.backward(np.array([[1.0, 2.0, 4.0]]))
    np.testing.assert_array_equal(x.g, [[0.0, 3.0, 0.0, 4.0]])


@pytest.mark.parametrize("case", CASES)
def test_backward_functions_are_transposes(case):
    shape, kernel, stride, pad = case
    kw = {"kernel": kernel, "stride": stride, "pad": pad, "ignore_border": False}
    x = RNG.standard_normal(shape)
    for fn, back, extra in [
        (F.sum_pooling, sum_pooling_backward, {}),
        (F.average_pooling, average_pooling_backward, {"including_pad": False}),
        (F.average_pooling, average_pooling_backward, {"including_pad": True}),
    ]:
        y = fn(x, **kw, **extra).d
        u = RNG.standard_normal(y.shape)
        xt = back(u, shape, **kw, **extra).d
        np.testing.assert_allclose(np.vdot(y, u), np.vdot(x, xt), rtol=1e-11)
    index = max_pooling_index(x, **kw)
    y = F.max_pooling(x, **kw).d
    u = RNG.standard_normal(y.shape)
    np.testing.assert_allclose(
        np.vdot(y, u), np.vdot(x, max_pooling_backward(u, index, shape).d), rtol=1e-11
    )


def test_global_average_pooling_is_n_c_1_1():
    for shape in [(2, 3), (2, 3, 4), (2, 3, 4, 5), (2, 3, 2, 2, 2)]:
        x = RNG.standard_normal(shape)
        y = F.global_average_pooling(x)
        assert y.shape == (2, 3, 1, 1)
        np.testing.assert_allclose(y.d[..., 0, 0], x.reshape(2, 3, -1).mean(-1), rtol=1e-12)


def test_unpooling_repeats_and_its_gradient_is_a_sum_pooling():
    x = hd.Variable.from_array(RNG.standard_normal((2, 3, 2, 4)), need_grad=True)
    y = F.unpooling(x, (3, 2))
    np.testing.assert_array_equal(y.d, x.d.repeat(3, 2).repeat(2, 3))
    gy = RNG.standard_normal(y.shape)
    y.backward(gy)
    np.testing.assert_allclose(x.g, F.sum_pooling(gy, (3, 2)).d, rtol=1e-12)


INTERP = [
    {"mode": "linear"},
    {"mode": "linear", "align_corners": True},
    {"mode": "linear", "half_pixel": True},
    {"mode": "nearest"},
    {"mode": "nearest", "align_corners": True},
    {"mode": "nearest", "half_pixel": True},
    {"mode": "nearest", "half_pixel_for_nn": True},
]


@pytest.mark.parametrize(
    ("kw", "sizes", "channel_last"),
    list(
        itertools.product(
            INTERP,
            [
                ((5,), (9,)),
                ((6,), (4,)),
                ((3, 4), (7, 2)),
                ((2, 3, 4), (3, 5, 4)),
                ((4, 1), (1, 3)),
            ],
            (False, True),
        )
    ),
)
def test_interpolate_matches_per_axis_reference(kw, sizes, channel_last):
    size, out = sizes
    x = RNG.standard_normal((2, 2, *size))
    want = ref_interpolate(x, output_size=out, **kw)
    if channel_last:
        x, want = np.moveaxis(x, 1, -1), np.moveaxis(want, 1, -1)
    y = F.interpolate(x, output_size=out, channel_last=channel_last, **kw)
    np.testing.assert_allclose(y.d, want, rtol=1e-12, atol=1e-12)
    u = RNG.standard_normal(y.shape)
    spatial = tuple(x.shape[-len(size) - 1 : -1]) if channel_last else tuple(x.shape[-len(size) :])
    xt = interpolate_backward(u, spatial, out, channel_last=channel_last, **kw).d
    np.testing.assert_allclose(np.vdot(y.d, u), np.vdot(x, xt), rtol=1e-11)


def test_interpolate_scale_gives_floor_of_scaled_size():
    x = RNG.standard_normal((1, 1, 5, 4))
    y = F.interpolate(x, scale=(1.5, 0.6))
    assert y.shape == (1, 1, 7, 2)
    np.testing.assert_array_equal(y.d, F.interpolate(x, output_size=(7, 2)).d)
    # align_corners keeps the corners
    z = F.interpolate(x, scale=(2, 2), align_corners=True).d
    np.testing.assert_allclose(z[..., [0, -1], :][..., [0, -1]], x[..., [0, -1], :][..., [0, -1]])


def test_interpolate_second_order_through_a_resize_chain():
    x0 = RNG.standard_normal((1, 2, 3, 3))
    f = functools.partial(F.interpolate, output_size=(5, 4), half_pixel=True)
    hd.gradcheck(lambda x: F.sum(f(x * x) ** 2), x0, order=3)


# ---------------------------------------------------------------- bad input
def test_pooling_bad_input():
    x = np.zeros((2, 3, 4, 4))
    with pytest.raises(
        ValueError,
        match=r"max_pooling: kernel=\(5, 2\) is larger than the "
        r"padded input along spatial axis 0 of x of shape "
        r"\(2, 3, 4, 4\)",
    ):
        F.max_pooling(x, (5, 2))
    F.max_pooling(x, (5, 2), ignore_border=False)  # a partial window is kept
    with pytest.raises(
        ValueError,
        match=r"average_pooling: pad=\(2, 0\) must be smaller than "
        r"kernel=\(2, 2\)",
    ):
        F.average_pooling(x, (2, 2), pad=(2, 0))
    with pytest.raises(ValueError, match=r"sum_pooling: stride=\(1,\) must be 2 ints"):
        F.sum_pooling(x, (2, 2), stride=(1,))
    with pytest.raises(ValueError, match=r"max_pooling: x of shape \(3, 4\) has fewer than 3"):
        F.max_pooling(np.zeros((3, 4)), (2, 2, 2))
    with pytest.raises(ValueError, match=r"before its channel axis"):
        F.max_pooling(np.zeros((3, 4)), (2, 2), channel_last=True)
    with pytest.raises(ValueError, match=r"unpooling: kernel=\(0,\) must be >= 1"):
        F.unpooling(x, (0,))
    with pytest.raises(TypeError, match=r"max_pooling: kernel=\(2.0, 2\) must be ints"):
        F.max_pooling(x, (2.0, 2))


def test_interpolate_bad_input():
    x = np.zeros((1, 1, 4, 4))
    with pytest.raises(ValueError, match="interpolate: give scale or output_size"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="interpolate: mode='cubic'"):
        F.interpolate(x, output_size=(2, 2), mode="cubic")
    with pytest.raises(ValueError, match="align_corners and half_pixel"):
        F.interpolate(x, output_size=(2, 2), align_corners=True, half_pixel=True)
    with pytest.raises(ValueError, match=r"interpolate: output_size=\(0, 2\) must be >= 1"):
        F.interpolate(x, output_size=(0, 2))


def test_static_mode_shapes_and_errors():
    with hd.auto_forward(False):
        x = hd.Variable((2, 3, 5, 5))
        assert F.max_pooling(x, (2, 2)).shape == (2, 3, 2, 2)
        assert F.max_pooling(x, (2, 2), ignore_border=False).shape == (2, 3, 3, 3)
        assert F.interpolate(x, scale=(2, 2)).shape == (2, 3, 10, 10)
        with pytest.raises(ValueError, match="sum_pooling"):
            F.sum_pooling(x, (6, 6))
