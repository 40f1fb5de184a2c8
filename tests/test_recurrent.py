"""rnn / lstm / gru beyond the spec table: unpacked outputs, a gradient penalty
through an LSTM critic, shared-weight gradients, dropout and training, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing.specs.recurrent import _reference

RNG = np.random.default_rng(0)


def _u(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape)


# ---------------------------------------------------------------- outputs
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("num_layers", [1, 3])
def test_lstm_outputs_match_reference(num_layers: int, bidirectional: bool) -> None:
    T, B, N, H, D = 4, 2, 3, 2, 2 if bidirectional else 1
    x, h, c = _u(T, B, N), _u(num_layers, D, B, H), _u(num_layers, D, B, H)
    w0, b = _u(D, 4, H, N + H), _u(num_layers, D, 4, H)
    w = _u(num_layers - 1, D, 4, H, D * H + H) if num_layers > 1 else None
    y, hn, cn = F.lstm(x, h, c, w0, w, b, num_layers=num_layers, bidirectional=bidirectional)
    ry, rh, rc = _reference("lstm", x, [h, c], w0, w, b, num_layers, bidirectional)
    assert (y.shape, hn.shape, cn.shape) == ((T, B, D * H), (num_layers, D, B, H), rh.shape)
    for got, want in ((y, ry), (hn, rh), (cn, rc)):
        np.testing.assert_allclose(got.d, want, rtol=1e-12, atol=1e-12)
    # the last forward output is the final state; the backward one is y at t = 0
    np.testing.assert_allclose(y.d[-1, :, :H], hn.d[-1, 0])
    if bidirectional:
        np.testing.assert_allclose(y.d[0, :, H:], hn.d[-1, 1])


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_and_gru_outputs_match_reference(nonlinearity: str) -> None:
    T, B, N, H, L, D = 3, 2, 2, 3, 2, 2
    x, h = _u(T, B, N), _u(L, D, B, H)
    w0, w, b = _u(D, H, N + H), _u(L - 1, D, H, D * H + H), _u(L, D, H)
    y, hn = F.rnn(x, h, w0, w, b, num_layers=L, nonlinearity=nonlinearity, bidirectional=True)
    ry, rh = _reference("rnn", x, [h], w0, w, b, L, True, nonlinearity)
    np.testing.assert_allclose(y.d, ry, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hn.d, rh, rtol=1e-12, atol=1e-12)
    w0, w, b = _u(D, 3, H, N + H), _u(L - 1, D, 3, H, D * H + H), _u(L, D, 4, H)
    y, hn = F.gru(x, h, w0, w, b, num_layers=L, bidirectional=True)
    ry, rh = _reference("gru", x, [h], w0, w, b, L, True)
    np.testing.assert_allclose(y.d, ry, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hn.d, rh, rtol=1e-12, atol=1e-12)


def test_rnn_forward_relu_matches_reference() -> None:
    x, h, w0, b = _u(3, 2, 2), _u(1, 1, 2, 3), _u(1, 3, 5), _u(1, 1, 3)
    y, hn = F.rnn(x, h, w0, bias=b, nonlinearity="relu")
    ry, rh = _reference("rnn", x, [h], w0, None, b, nonlinearity="relu")
    np.testing.assert_allclose(y.d, ry, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hn.d, rh, rtol=1e-12, atol=1e-12)


def test_static_graph_reruns_with_new_inputs() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3, 2, 2), dtype=np.float64)
        h = hd.Variable((1, 1, 2, 3), dtype=np.float64)
        w0 = hd.Variable((1, 3, 3, 5), dtype=np.float64)
        y, hn = F.gru(x, h, w0)
        assert y.shape == (3, 2, 3)
        assert hn.shape == (1, 1, 2, 3)
        for _ in range(2):
            xs = [_u(*v.shape) for v in (x, h, w0)]
            x.d, h.d, w0.d = xs
            hn.forward()
            np.testing.assert_allclose(
                hn.d,
                _reference("gru", xs[0], [xs[1]], xs[2], None, None)[1],
                rtol=1e-12,
                atol=1e-12,
            )


def test_float32_stays_float32() -> None:
    f32 = [
        a.astype(np.float32) for a in (_u(2, 1, 2), _u(1, 1, 1, 2), _u(1, 1, 1, 2), _u(1, 4, 2, 4))
    ]
    for o in F.lstm(*f32):
        assert o.dtype == np.float32


# ---------------------------------------------------------------- derivatives
def test_weight_gradient_is_the_sum_over_steps() -> None:
    # the RNN unrolled by hand with one copy of the weight per step: the shared
    # weight's gradient is the sum of the copies' gradients
    T, B, N, H = 3, 2, 2, 3
    x, h, w0 = _u(T, B, N), _u(1, 1, B, H), _u(1, H, N + H)
    wv = hd.Variable.from_array(w0, need_grad=True)
    _, hn = F.rnn(x, h, wv)
    (g,) = hd.grad(F.sum(hn), [wv])
    copies = [hd.Variable.from_array(w0[0], need_grad=True) for _ in range(T)]
    s = hd.Variable.from_array(h[0, 0])
    for t in range(T):
        s = F.tanh(
            F.affine(
                F.concatenate(hd.Variable.from_array(x[t]), s, axis=1),
                F.transpose(copies[t], (1, 0)),
            )
        )
    gs = hd.grad(F.sum(s), copies)
    np.testing.assert_allclose(g.d[0], sum(c.d for c in gs), rtol=1e-12, atol=1e-12)


def test_gradient_penalty_through_an_lstm_critic() -> None:
    # critic(x) = v . h_T; penalty = (||d critic / dx|| - 1)^2, differentiated w.r.t.
    # the LSTM weights; hd.gradcheck then checks two more orders (4th derivatives of
    # the LSTM in all)
    T, B, N, H = 2, 1, 1, 2
    x, h, c, v = _u(T, B, N), _u(1, 1, B, H), _u(1, 1, B, H), _u(B, H)

    def penalty(w0: hd.Variable, b: hd.Variable) -> hd.Variable:
        xv = hd.Variable.from_array(x, need_grad=True)
        y, _, _ = F.lstm(xv, h, c, w0, bias=b)
        critic = F.sum(y[-1] * v)
        (gx,) = hd.grad(critic, [xv])
        norm = F.sqrt(F.sum(gx * gx))
        return (norm - 1.0) ** 2

    w0, b = _u(1, 4, H, N + H), _u(1, 1, 4, H)
    # the weight gradient of the penalty exists and is not zero
    wv, bv = (hd.Variable.from_array(a, need_grad=True) for a in (w0, b))
    gw, gb = hd.grad(penalty(wv, bv), [wv, bv])
    assert np.abs(gw.d).max() > 1e-6
    assert np.abs(gb.d).max() > 1e-6
    hd.gradcheck(penalty, (w0, b), order=2, atol=1e-5, rtol=1e-4)


def test_backward_accumulates_into_the_shared_weights() -> None:
    x, h, w0 = _u(3, 2, 2), _u(1, 1, 2, 3), _u(1, 3, 3, 5)
    wv = hd.Variable.from_array(w0, need_grad=True)
    y, hn = F.gru(x, h, wv)
    loss = F.sum(y * y) + F.sum(hn)
    (g,) = hd.grad(loss, [wv])
    loss.backward()
    np.testing.assert_allclose(wv.g, g.d, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- dropout and training
def test_dropout_between_layers_only_while_training() -> None:
    L, D, T, B, N, H = 2, 1, 3, 2, 2, 3
    args = (_u(T, B, N), _u(L, D, B, H), _u(D, H, N + H), _u(L - 1, D, H, D * H + H))
    plain, _ = F.rnn(*args, num_layers=L)
    off, _ = F.rnn(*args, num_layers=L, dropout=0.5, training=False)
    on, _ = F.rnn(*args, num_layers=L, dropout=0.5, training=True)
    np.testing.assert_array_equal(plain.d, off.d)
    assert not np.allclose(plain.d, on.d)
    # a single layer has nothing between layers to drop
    one, _ = F.rnn(args[0], args[1][:1], args[2], dropout=0.5)
    ref, _ = F.rnn(args[0], args[1][:1], args[2])
    np.testing.assert_array_equal(one.d, ref.d)


def test_inference_mode_is_still_differentiable() -> None:
    x = hd.Variable.from_array(_u(2, 1, 1), need_grad=True)
    y, _ = F.rnn(x, _u(1, 1, 1, 2), _u(1, 2, 3), training=False)
    (gx,) = hd.grad(F.sum(y), [x])
    assert gx.shape == x.shape
    assert np.abs(gx.d).max() > 0


# ---------------------------------------------------------------- bad input
def _lstm_args(**over: object) -> dict[str, object]:
    args: dict[str, object] = {
        "x": np.zeros((3, 2, 2)),
        "h": np.zeros((1, 1, 2, 3)),
        "c": np.zeros((1, 1, 2, 3)),
        "weight_l0": np.zeros((1, 4, 3, 5)),
    }
    args.update(over)
    return args


@pytest.mark.parametrize(
    ("over", "exc", "match"),
    [
        (
            {"x": np.zeros((3, 2))},
            ValueError,
            r"lstm: x of shape \(3, 2\) must have shape \(T, B, I\)",
        ),
        (
            {"x": np.zeros((3, 2, 2), int)},
            TypeError,
            "lstm: x must be a float array, got dtype int",
        ),
        (
            {"h": np.zeros((1, 1, 3, 3))},
            ValueError,
            r"lstm: h of shape \(1, 1, 3, 3\) must have shape \(L, D, B, H\) = \(1, 1, 2, 3\)",
        ),
        ({"c": np.zeros((1, 1, 2, 4))}, ValueError, r"lstm: c of shape \(1, 1, 2, 4\)"),
        (
            {"weight_l0": np.zeros((1, 4, 3, 4))},
            ValueError,
            r"lstm: weight_l0 of shape \(1, 4, 3, 4\) must have shape \(D, 4, H, I \+ H\) = "
            r"\(1, 4, 3, 5\)",
        ),
        (
            {"weight": np.zeros((1, 1, 4, 3, 6))},
            ValueError,
            "lstm: weight must be None when num_layers = 1",
        ),
        (
            {"num_layers": 2, "h": np.zeros((2, 1, 2, 3)), "c": np.zeros((2, 1, 2, 3))},
            ValueError,
            "lstm: weight is required when num_layers = 2 > 1",
        ),
        (
            {
                "num_layers": 2,
                "h": np.zeros((2, 1, 2, 3)),
                "c": np.zeros((2, 1, 2, 3)),
                "weight": np.zeros((1, 1, 4, 3, 5)),
            },
            ValueError,
            r"lstm: weight of shape \(1, 1, 4, 3, 5\) must have shape "
            r"\(L - 1, D, 4, H, D \* H \+ H\) = \(1, 1, 4, 3, 6\)",
        ),
        (
            {"bias": np.zeros((1, 1, 3))},
            ValueError,
            r"lstm: bias of shape \(1, 1, 3\) must have shape \(L, D, 4, H\) = \(1, 1, 4, 3\)",
        ),
        (
            {"bidirectional": True},
            ValueError,
            r"lstm: h of shape \(1, 1, 2, 3\) must have shape \(L, D, B, H\) = \(1, 2, 2, 3\)",
        ),
        ({"num_layers": 0}, ValueError, "lstm: num_layers must be >= 1, got 0"),
        ({"num_layers": 1.0}, TypeError, "lstm: num_layers must be an int"),
        ({"dropout": 1.0}, ValueError, r"lstm: dropout must be in \[0, 1\), got 1.0"),
        ({"dropout": "0.5"}, TypeError, "lstm: dropout must be a float"),
        ({"training": 1}, TypeError, "lstm: training must be a bool"),
        ({"x": "abc"}, TypeError, "lstm: x must be"),
    ],
)
def test_bad_input_raises_at_call_time(over: dict[str, object], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        F.lstm(**_lstm_args(**over))
    with hd.auto_forward(False), pytest.raises(exc, match=match):  # static graphs too
        F.lstm(**_lstm_args(**over))


def test_bad_nonlinearity_and_gru_bias() -> None:
    x, h = np.zeros((2, 1, 1)), np.zeros((1, 1, 1, 2))
    with pytest.raises(ValueError, match="rnn: nonlinearity must be 'tanh' or 'relu', got 'sig'"):
        F.rnn(x, h, np.zeros((1, 2, 3)), nonlinearity="sig")
    with pytest.raises(
        ValueError,
        match=r"rnn: bias of shape \(1, 1, 1, 2\) must have shape "
        r"\(L, D, H\) = \(1, 1, 2\)",
    ):
        F.rnn(x, h, np.zeros((1, 2, 3)), bias=np.zeros((1, 1, 1, 2)))
    with pytest.raises(
        ValueError,
        match=r"gru: bias of shape \(1, 1, 3, 2\) must have shape "
        r"\(L, D, 4, H\) = \(1, 1, 4, 2\)",
    ):
        F.gru(x, h, np.zeros((1, 3, 2, 3)), bias=np.zeros((1, 1, 3, 2)))
    with pytest.raises(
        ValueError,
        match=r"gru: weight_l0 of shape \(1, 4, 2, 3\) must have "
        r"shape \(D, 3, H, I \+ H\)",
    ):
        F.gru(x, h, np.zeros((1, 4, 2, 3)))
