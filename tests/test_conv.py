"""Convolution family: forward against loop references over many argument mixes, the
transpose pairing, depthwise layout, higher orders through a small network, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.grad_functions.conv import convolution_filter_grad
from hodiff.testing.specs.conv import (
    ref_convolution,
    ref_deconvolution,
    ref_depthwise_convolution,
    ref_filter_grad,
)

RNG = np.random.default_rng(0)

# (x spatial, kernel, pad, stride, dilation) per number of spatial axes
CASES = [
    ((7,), (3,), (0,), (1,), (1,)),
    ((8,), (2,), (2,), (3,), (2,)),
    ((5, 6), (3, 2), (1, 0), (2, 1), (1, 2)),
    ((6, 5), (1, 3), (0, 2), (1, 3), (1, 1)),
    ((4, 5, 3), (2, 3, 1), (1, 1, 0), (1, 2, 1), (2, 1, 1)),
]


@pytest.mark.parametrize(
    ("case", "group", "channel_last"), list(itertools.product(CASES, (1, 2), (False, True)))
)
def test_convolution_matches_loops(case, group, channel_last):
    size, kernel, pad, stride, dilation = case
    c, oc = 2 * group, 3 * group
    x = RNG.standard_normal((2, c, *size))
    w = RNG.standard_normal((oc, c // group, *kernel))
    b = RNG.standard_normal(oc)
    want = ref_convolution(x, w, b, pad=pad, stride=stride, dilation=dilation, group=group)
    if channel_last:
        x, w, want = np.moveaxis(x, 1, -1), np.moveaxis(w, 1, -1), np.moveaxis(want, 1, -1)
    y = F.convolution(
        x, w, b, pad=pad, stride=stride, dilation=dilation, group=group, channel_last=channel_last
    )
    np.testing.assert_allclose(y.d, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("case", "group", "channel_last"), list(itertools.product(CASES, (1, 2), (False, True)))
)
def test_deconvolution_matches_loops(case, group, channel_last):
    size, kernel, pad, stride, dilation = case
    size = tuple(max(2, s // 2) for s in size)
    op = tuple(s - 1 for s in stride)
    c, ocg = 2 * group, 3
    x = RNG.standard_normal((2, c, *size))
    w = RNG.standard_normal((c, ocg, *kernel))
    b = RNG.standard_normal(ocg * group)
    want = ref_deconvolution(
        x, w, b, pad=pad, stride=stride, dilation=dilation, group=group, output_padding=op
    )
    if channel_last:
        x, w, want = np.moveaxis(x, 1, -1), np.moveaxis(w, 1, -1), np.moveaxis(want, 1, -1)
    y = F.deconvolution(
        x,
        w,
        b,
        pad=pad,
        stride=stride,
        dilation=dilation,
        group=group,
        channel_last=channel_last,
        output_padding=op,
    )
    np.testing.assert_allclose(y.d, want, rtol=1e-12, atol=1e-12)


def test_base_axis_batches_and_unbatched_input():
    x = RNG.standard_normal((2, 3, 2, 6))
    w = RNG.standard_normal((4, 2, 3))
    y = F.convolution(x, w, base_axis=2, pad=(1,))
    want = ref_convolution(x.reshape(6, 2, 6), w, pad=(1,)).reshape(2, 3, 4, 6)
    np.testing.assert_allclose(y.d, want, rtol=1e-12, atol=1e-12)
    y0 = F.convolution(x[0, 0], w, base_axis=0)  # no batch axis at all
    np.testing.assert_allclose(y0.d, ref_convolution(x[0, 0][None], w)[0], rtol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_deconvolution_is_the_transpose_of_convolution(case):
    size, kernel, pad, stride, dilation = case
    x = RNG.standard_normal((2, 4, *size))
    w = RNG.standard_normal((6, 2, *kernel))
    y = F.convolution(x, w, pad=pad, stride=stride, dilation=dilation, group=2).d
    u = RNG.standard_normal(y.shape)
    op = tuple(
        n + 2 * p - d * (k - 1) - 1 - s * (o - 1)
        for n, o, k, p, s, d in zip(size, y.shape[2:], kernel, pad, stride, dilation, strict=True)
    )
    xt = F.deconvolution(
        u, w, pad=pad, stride=stride, dilation=dilation, group=2, output_padding=op
    ).d
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.vdot(y, u), np.vdot(x, xt), rtol=1e-11)


def test_filter_grad_matches_loops_and_the_backward():
    x = RNG.standard_normal((2, 4, 6, 5))
    w = RNG.standard_normal((2, 2, 3, 3))
    kw = {"pad": (1, 0), "stride": (2, 1), "dilation": (1, 2), "group": 2}
    xv, wv = hd.Variable.from_array(x), hd.Variable.from_array(w, need_grad=True)
    y = F.convolution(xv, wv, **kw)
    gy = RNG.standard_normal(y.shape)
    y.backward(gy)
    gw = convolution_filter_grad(x, gy, kernel=(3, 3), **kw).d
    np.testing.assert_allclose(gw, ref_filter_grad(x, gy, (3, 3), **kw), rtol=1e-12)
    np.testing.assert_allclose(wv.g, gw, rtol=1e-12)


def test_depthwise_layout_is_nnabla_s():
    x = RNG.standard_normal((2, 3, 6, 5))
    w = RNG.standard_normal((6, 3, 2))
    b = RNG.standard_normal(6)
    y = F.depthwise_convolution(x, w, b, pad=(1, 1), stride=(1, 2), multiplier=2)
    want = ref_depthwise_convolution(x, w, b, pad=(1, 1), stride=(1, 2), multiplier=2)
    np.testing.assert_allclose(y.d, want, rtol=1e-12, atol=1e-12)
    # output channel c * multiplier + m sees input channel c only
    y2 = F.depthwise_convolution(x * (np.arange(3) == 1)[:, None, None], w, multiplier=2)
    assert np.abs(y2.d[:, [0, 1, 4, 5]]).max() == 0
    assert np.abs(y2.d[:, [2, 3]]).max() > 0


def test_float32_stays_float32_through_backward():
    x = hd.Variable.from_array(RNG.standard_normal((2, 3, 5, 5)).astype(np.float32), need_grad=True)
    w = hd.Variable.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), need_grad=True)
    b = hd.Variable.from_array(np.zeros(4, np.float32), need_grad=True)
    y = F.deconvolution(
        F.convolution(x, w, b, stride=(2, 2)), w, stride=(2, 2), output_padding=(0, 0)
    )
    assert y.dtype == np.float32
    F.sum(y * y).backward()
    assert x.g.dtype == w.g.dtype == b.g.dtype == np.float32


def test_gradient_penalty_through_a_small_cnn_is_second_order_exact():
    """d/dw |d loss / d x|^2 through conv -> pool -> deconv, against finite differences."""
    x0 = RNG.standard_normal((2, 2, 6, 6))
    w0 = 0.5 * RNG.standard_normal((3, 2, 3, 3))
    v0 = 0.5 * RNG.standard_normal((3, 2, 2, 2))

    def penalty(w, v):
        x = hd.Variable.from_array(x0, need_grad=True)
        h = F.convolution(x, w, pad=(1, 1))
        h = F.max_pooling(h * h, (2, 2))
        out = F.sum(F.deconvolution(h, v, stride=(2, 2)) ** 2)
        (gx,) = hd.grad(out, [x])
        return F.sum(gx * gx)

    hd.gradcheck(penalty, (w0, v0), order=1, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- bad input
def test_channel_group_mismatch():
    x = np.zeros((2, 3, 5, 5))
    with pytest.raises(
        ValueError,
        match=r"convolution: x of shape \(2, 3, 5, 5\) and w of "
        r"shape \(4, 2, 3, 3\) with group=1",
    ):
        F.convolution(x, np.zeros((4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"divisible by group"):
        F.convolution(x, np.zeros((4, 1, 3, 3)), group=2)
    with pytest.raises(
        ValueError,
        match=r"deconvolution: x of shape \(2, 3, 5, 5\) and w of "
        r"shape \(2, 2, 3, 3\)",
    ):
        F.deconvolution(x, np.zeros((2, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"depthwise_convolution: w of shape \(3, 3, 3\)"):
        F.depthwise_convolution(x, np.zeros((3, 3, 3)), multiplier=2)
    with pytest.raises(ValueError, match=r"b of shape \(3,\) must be \(4,\)"):
        F.convolution(x, np.zeros((4, 3, 3, 3)), np.zeros(3))


def test_kernel_larger_than_padded_input():
    with pytest.raises(
        ValueError,
        match=r"convolution: the kernel of w of shape \(1, 1, 3, 5\) "
        r".*larger than the padded input along spatial axis 1 "
        r"of x of shape \(1, 1, 4, 4\)",
    ):
        F.convolution(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 3, 5)))
    with pytest.raises(ValueError, match=r"larger than the padded input"):
        F.convolution(np.zeros((1, 1, 4)), np.zeros((1, 1, 3)), dilation=(2,))
    F.convolution(np.zeros((1, 1, 4)), np.zeros((1, 1, 3)), dilation=(2,), pad=(1,))  # fits
    with pytest.raises(ValueError, match=r"deconvolution: pad=\(3,\) is too large"):
        F.deconvolution(np.zeros((1, 1, 2)), np.zeros((1, 1, 2)), pad=(3,))


def test_bad_arguments():
    x, w = np.zeros((1, 2, 5, 5)), np.zeros((2, 2, 3, 3))
    with pytest.raises(ValueError, match=r"convolution: pad=\(1,\) must be 2 ints"):
        F.convolution(x, w, pad=(1,))
    with pytest.raises(ValueError, match=r"convolution: stride=\(0, 1\) must be >= 1"):
        F.convolution(x, w, stride=(0, 1))
    with pytest.raises(ValueError, match=r"convolution: base_axis=3 must be in \[0, 2\]"):
        F.convolution(x, w, base_axis=3)
    with pytest.raises(ValueError, match=r"convolution: w of shape \(2, 2, 3\) must have 4 dims"):
        F.convolution(x, np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match=r"output_padding=\(2, 0\) must be smaller than stride"):
        F.deconvolution(x, w, stride=(2, 1), output_padding=(2, 0))
    with pytest.raises(TypeError, match=r"convolution: dilation=\(1.5, 1\) must be ints"):
        F.convolution(x, w, dilation=(1.5, 1))


def test_errors_are_raised_in_static_mode_before_anything_is_linked():
    with hd.auto_forward(False):
        x = hd.Variable((2, 3, 5, 5), need_grad=True)
        with pytest.raises(ValueError, match="convolution"):
            F.convolution(x, hd.Variable((4, 2, 3, 3)))
        y = F.convolution(x, hd.Variable((4, 3, 3, 3)), stride=(2, 2))
        assert y.shape == (2, 4, 2, 2)


def test_int_accepted_for_spatial_arguments():
    x, w = RNG.standard_normal((1, 1, 5, 5)), RNG.standard_normal((1, 1, 3, 3))
    np.testing.assert_array_equal(
        F.convolution(x, w, pad=1, stride=2).d, F.convolution(x, w, pad=(1, 1), stride=(2, 2)).d
    )
