"""PF layers: NNabla's parameter names, shapes and default initializers; outputs equal F on the
created parameters; sharing by name; nested scopes; batch-norm running statistics."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.initializers as I
import hodiff.parametric as PF


@pytest.fixture(autouse=True)
def _clean():
    hd.clear_parameters()
    with hd.context_scope(hd.Context(dtype="float64")):
        yield
    hd.clear_parameters()


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def params():
    return hd.get_parameters(grad_only=False)


def glorot_bound(fan_in, fan_out, k=1):
    return np.sqrt(6.0 / (k * (fan_in + fan_out)))


def test_affine_names_shapes_init_and_output() -> None:
    x = rnd(4, 2, 3)
    y = PF.affine(x, 5)
    p = params()
    assert list(p) == ["affine/W", "affine/b"]
    w, b = p["affine/W"], p["affine/b"]
    assert w.shape == (6, 5)
    assert b.shape == (5,)
    assert np.all(b.d == 0)
    assert np.abs(w.d).max() <= glorot_bound(6, 5)
    assert np.abs(w.d).max() > 0.5 * glorot_bound(6, 5)
    np.testing.assert_allclose(y.d, x.reshape(4, 6) @ w.d + b.d, rtol=1e-12)
    np.testing.assert_array_equal(y.d, F.affine(x, w, b).d)
    # tuple outputs, no bias, base_axis
    y2 = PF.affine(x, (2, 3), base_axis=2, with_bias=False, name="fc2")
    assert params()["fc2/W"].shape == (3, 2, 3)
    assert "fc2/b" not in params()
    assert y2.shape == (4, 2, 2, 3)


def test_same_name_shares_and_scopes_nest() -> None:
    x = rnd(3, 4)
    y1 = PF.affine(x, 2, name="fc")
    y2 = PF.affine(x, 2, name="fc")
    np.testing.assert_array_equal(y1.d, y2.d)
    with hd.parameter_scope("enc"), hd.parameter_scope("block"):
        PF.affine(x, 2, name="fc")
    PF.affine(x, 3, name="other")
    assert list(params()) == [
        "fc/W",
        "fc/b",
        "enc/block/fc/W",
        "enc/block/fc/b",
        "other/W",
        "other/b",
    ]
    with pytest.raises(ValueError, match="fc/W"):
        PF.affine(x, 7, name="fc")  # another shape under an existing name


def test_gradients_reach_the_parameters() -> None:
    x = rnd(3, 4)
    loss = F.sum(F.tanh(PF.affine(x, 2)) ** 2)
    loss.backward()
    w, b = params()["affine/W"], params()["affine/b"]
    h = np.tanh(x @ w.d + b.d)
    gz = 2 * h * (1 - h**2)
    np.testing.assert_allclose(w.g, x.T @ gz, rtol=1e-12)
    np.testing.assert_allclose(b.g, gz.sum(0), rtol=1e-12)


def test_convolution_layouts_and_init() -> None:
    x = rnd(2, 4, 5, 5)
    y = PF.convolution(x, 6, (3, 3), pad=(1, 1), group=2)
    w, b = params()["conv/W"], params()["conv/b"]
    assert w.shape == (6, 2, 3, 3)
    assert b.shape == (6,)
    assert np.abs(w.d).max() <= glorot_bound(4, 6, 9)
    np.testing.assert_array_equal(y.d, F.convolution(x, w, b, pad=(1, 1), group=2).d)
    xl = rnd(2, 5, 5, 4, seed=1)
    yl = PF.convolution(xl, 3, (3, 3), channel_last=True, name="conv_nhwc")
    wl = params()["conv_nhwc/W"]
    assert wl.shape == (3, 3, 3, 4)
    np.testing.assert_array_equal(
        yl.d, F.convolution(xl, wl, params()["conv_nhwc/b"], channel_last=True).d
    )


def test_deconvolution_and_depthwise() -> None:
    x = rnd(2, 4, 3, 3)
    y = PF.deconvolution(x, 6, (2, 2), stride=(2, 2), group=2)
    w, b = params()["deconv/W"], params()["deconv/b"]
    assert w.shape == (4, 3, 2, 2)
    assert np.abs(w.d).max() <= glorot_bound(6, 4, 4)
    assert y.shape == (2, 6, 6, 6)
    np.testing.assert_array_equal(y.d, F.deconvolution(x, w, b, stride=(2, 2), group=2).d)
    z = PF.depthwise_convolution(x, (3, 3), pad=(1, 1), multiplier=2)
    wd, bd = params()["depthwise_conv/W"], params()["depthwise_conv/b"]
    assert wd.shape == (8, 3, 3)
    assert bd.shape == (8,)
    np.testing.assert_array_equal(
        z.d, F.depthwise_convolution(x, wd, bd, pad=(1, 1), multiplier=2).d
    )


def test_batch_normalization_training_updates_running_statistics() -> None:
    x = rnd(8, 3, 2, 2) * 2 + 1
    y = PF.batch_normalization(x, decay_rate=0.9)
    p = params()
    assert list(p) == ["bn/beta", "bn/gamma", "bn/mean", "bn/var"]
    assert all(p[k].shape == (1, 3, 1, 1) for k in p)
    assert not p["bn/mean"].need_grad
    assert not p["bn/var"].need_grad
    assert list(hd.get_parameters()) == ["bn/beta", "bn/gamma"]
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y.d, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-12)
    n = x.size // 3
    np.testing.assert_allclose(p["bn/mean"].d, 0.1 * mu, rtol=1e-12)
    np.testing.assert_allclose(p["bn/var"].d, 0.9 + 0.1 * var * n / (n - 1), rtol=1e-12)
    # inference uses the running statistics
    p["bn/gamma"].d[...] = 2.0
    z = PF.batch_normalization(x, batch_stat=False)
    m, v = p["bn/mean"].d, p["bn/var"].d
    np.testing.assert_allclose(z.d, (x - m) / np.sqrt(v + 1e-5) * 2.0, rtol=1e-12)
    np.testing.assert_array_equal(p["bn/mean"].d, m)  # not updated in inference


def test_batch_normalization_static_graph_updates_on_every_forward() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((6, 2), dtype=np.float64)
        y = PF.batch_normalization(x, axes=1, decay_rate=0.5)
    mean = params()["bn/mean"]
    expected = np.zeros((1, 2))
    for k in range(3):
        x.d = rnd(6, 2, seed=k)
        y.forward()
        expected = 0.5 * expected + 0.5 * x.d.mean(0, keepdims=True)
        np.testing.assert_allclose(mean.d, expected, rtol=1e-12)


def test_layer_normalization_embed_prelu() -> None:
    x = rnd(3, 4, 5)
    y = PF.layer_normalization(x)
    beta, gamma = params()["layer_normalization/beta"], params()["layer_normalization/gamma"]
    assert beta.shape == (1, 4, 5)
    assert np.all(gamma.d == 1)
    np.testing.assert_array_equal(y.d, F.layer_normalization(x, beta, gamma).d)
    ids = np.array([[0, 3], [2, 2]])
    e = PF.embed(ids, 4, 6)
    w = params()["embed/W"]
    assert w.shape == (4, 6)
    assert np.abs(w.d).max() <= np.sqrt(3)
    np.testing.assert_array_equal(e.d, w.d[ids])
    z = PF.prelu(x)
    assert params()["prelu/slope"].shape == ()
    np.testing.assert_allclose(z.d, np.where(x > 0, x, 0.25 * x), rtol=1e-12)
    PF.prelu(x, shared=False, name="prelu_c")
    assert params()["prelu_c/slope"].shape == (4,)


@pytest.mark.parametrize(
    ("layer", "gates", "bias_gates", "states"),
    [
        (PF.rnn, (), (), 1),
        (PF.lstm, (4,), (4,), 2),
        (PF.gru, (3,), (4,), 1),
    ],
)
def test_recurrent_layers(layer, gates, bias_gates, states) -> None:
    t, b, i, h, n_layers = 3, 2, 4, 5, 2
    x = rnd(t, b, i)
    hs = [rnd(n_layers, 2, b, h, seed=s) * 0.1 for s in range(1, 1 + states)]
    out = layer(x, *hs, num_layers=n_layers, bidirectional=True)
    name = layer.__name__
    w0, w, bias = (params()[f"{name}/{k}"] for k in ("weight_l0", "weight", "bias"))
    assert w0.shape == (2, *gates, h, i + h)
    assert w.shape == (1, 2, *gates, h, 2 * h + h)
    assert bias.shape == (2, 2, *bias_gates, h)
    assert np.all(bias.d == 0)
    # the input and hidden blocks have their own Glorot bounds
    assert np.abs(w0.d[..., :i]).max() <= glorot_bound(i, h)
    assert np.abs(w0.d[..., i:]).max() <= glorot_bound(h, h)
    assert np.abs(w.d[..., : 2 * h]).max() <= glorot_bound(2 * h, h)
    ref = getattr(F, name)(x, *hs, w0, w, bias, num_layers=n_layers, bidirectional=True)
    for o, r in zip(out, ref, strict=True):
        np.testing.assert_array_equal(o.d, r.d)


def test_custom_initializers_and_seed() -> None:
    x = rnd(2, 3)
    PF.affine(x, 2, w_init=I.ConstantInitializer(0.5), b_init=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(params()["affine/W"].d, 0.5)
    np.testing.assert_array_equal(params()["affine/b"].d, [1.0, 2.0])
    hd.clear_parameters()
    hd.seed(3)
    PF.affine(x, 2)
    a = params()["affine/W"].d.copy()
    hd.clear_parameters()
    hd.seed(3)
    PF.affine(x, 2)
    np.testing.assert_array_equal(params()["affine/W"].d, a)


def test_layers_in_a_static_graph() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((4, 3), dtype=np.float64)
        y = PF.affine(F.tanh(PF.affine(x, 5, name="l1")), 2, name="l2")
    x.d = rnd(4, 3)
    y.forward()
    p = params()
    h = np.tanh(x.d @ p["l1/W"].d + p["l1/b"].d)
    np.testing.assert_allclose(y.d, h @ p["l2/W"].d + p["l2/b"].d, rtol=1e-12)


def test_spectral_norm() -> None:
    w = hd.Variable.from_array(rnd(4, 6), need_grad=True)
    y = PF.spectral_norm(w, itr=50)
    u = params()["spectral-norm/u"]
    assert u.shape == (4,)
    assert not u.need_grad
    sigma = np.linalg.svd(w.d, compute_uv=False)[0]
    np.testing.assert_allclose(y.d, w.d / sigma, rtol=1e-6)


def test_errors_name_the_layer() -> None:
    with pytest.raises(ValueError, match=r"PF\.convolution.*group"):
        PF.convolution(rnd(1, 3, 4, 4), 4, (3, 3), group=2)
    with pytest.raises(ValueError, match=r"PF\.affine: base_axis"):
        PF.affine(rnd(2, 3), 2, base_axis=3)
    with pytest.raises(ValueError, match=r"PF\.lstm"):
        PF.lstm(rnd(2, 3), rnd(1, 1, 2, 3), rnd(1, 1, 2, 3))
