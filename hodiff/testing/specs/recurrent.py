"""Specs of hodiff/functions/recurrent.py (rnn, lstm, gru: compositions, no rule of their own).

The references below run the recurrences step by step in numpy on the
concatenation ``[x_t; h_{t-1}]``, as NNabla's documentation writes them (the
library instead projects all steps' inputs in one GEMM and splits the gates).
Tiny sizes: T=3, B=2, I=N=2, H=3 at order 3 for one layer; the stacked and
bidirectional variants use T=2, B=1, I=1, H=2 and order 1 or 2 to keep finite
differences cheap (they run once per input element per order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec

T, B, N, H = 3, 2, 2, 3  # steps, batch, input size, hidden size


def _sig(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def _step(
    kind: str, xt: np.ndarray, s: list[np.ndarray], w: np.ndarray, b: Any, nonlinearity: str
) -> list[np.ndarray]:
    """One step of one layer and direction, written on ``[x_t; h_{t-1}]``."""
    h = s[0]
    xh = np.concatenate([xt, h], axis=1)
    if kind == "rnn":
        a = xh @ w.T + (0.0 if b is None else b)
        return [np.tanh(a) if nonlinearity == "tanh" else np.maximum(a, 0.0)]
    bias = np.zeros((4, *w.shape[1:2])) if b is None else b
    if kind == "lstm":
        i, f, g, o = (xh @ w[k].T + bias[k] for k in range(4))
        c = _sig(f) * s[1] + _sig(i) * np.tanh(g)
        return [_sig(o) * np.tanh(c), c]
    n_in = xt.shape[1]
    r = _sig(xh @ w[0].T + bias[0])
    z = _sig(xh @ w[1].T + bias[1])
    n = np.tanh(xt @ w[2][:, :n_in].T + bias[2] + r * (h @ w[2][:, n_in:].T + bias[3]))
    return [(1.0 - z) * n + z * h]


def _reference(
    kind: str,
    x: np.ndarray,
    states: list[np.ndarray],
    w0: np.ndarray,
    w: Any,
    b: Any,
    num_layers: int = 1,
    bidirectional: bool = False,
    nonlinearity: str = "tanh",
) -> tuple[np.ndarray, ...]:
    n_dir = 2 if bidirectional else 1
    seq = x
    finals: list[np.ndarray] = [np.zeros_like(s) for s in states]
    for layer in range(num_layers):
        outs: list[np.ndarray] = []
        for d in range(n_dir):
            wl = w0[d] if layer == 0 else w[layer - 1, d]
            bl = None if b is None else b[layer, d]
            s = [st[layer, d] for st in states]
            ys: list[Any] = [None] * seq.shape[0]
            order = range(seq.shape[0] - 1, -1, -1) if d == 1 else range(seq.shape[0])
            for t in order:
                s = _step(kind, seq[t], s, wl, bl, nonlinearity)
                ys[t] = s[0]
            outs.append(np.stack(ys))
            for k, v in enumerate(s):
                finals[k][layer, d] = v
        seq = np.concatenate(outs, axis=2)
    return (seq, *finals)


# ---------------------------------------------------------------- packing
def _packed(name: str, call: Any) -> Any:
    """``call``'s outputs flattened and concatenated: one output, one last node.

    The generic test runs the backward_impl of the node that made the first
    output with the gradients of all outputs, which assumes one node made them
    all; y, h_n and c_n come from different nodes, so the rows check them packed.
    """

    def fn(*xs: Any, **kw: Any) -> Any:
        return F.concatenate(*(F.reshape(o, (-1,)) for o in call(*xs, **kw)), axis=0)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _packed_ref(kind: str, n_states: int, bias_only: bool = False) -> Any:
    """The reference of ``kind`` called as the packed function is (bias last, no weight)."""

    def ref(*xs: np.ndarray, **kw: Any) -> np.ndarray:
        x, states, rest = xs[0], list(xs[1 : 1 + n_states]), list(xs[1 + n_states :])
        w0 = rest.pop(0)
        w = None if bias_only or not rest else rest.pop(0)
        b = rest.pop(0) if rest else None
        outs = _reference(kind, x, states, w0, w, b, **kw)
        return np.concatenate([o.ravel() for o in outs])

    return ref


rnn = _packed("rnn", F.rnn)
lstm = _packed("lstm", F.lstm)
gru = _packed("gru", F.gru)
# one layer with a bias and no `weight` (None cannot be a spec input)
rnn_b = _packed("rnn", lambda x, h, w0, b, **kw: F.rnn(x, h, w0, bias=b, **kw))
lstm_b = _packed("lstm", lambda x, h, c, w0, b: F.lstm(x, h, c, w0, bias=b))
gru_b = _packed("gru", lambda x, h, w0, b: F.gru(x, h, w0, bias=b))

# stacked, bidirectional sizes
t2, b1, i1, h2 = 2, 1, 1, 2

SPECS = [
    Spec(rnn, ((T, B, N), (1, 1, B, H), (1, H, N + H)), _packed_ref("rnn", 1)),
    Spec(
        rnn_b,
        ((T, B, N), (1, 1, B, H), (1, H, N + H), (1, 1, H)),
        _packed_ref("rnn", 1, bias_only=True),
        kwargs={"nonlinearity": "relu"},
        id="relu_bias",
    ),
    Spec(
        rnn,
        ((t2, b1, i1), (2, 2, b1, h2), (2, h2, i1 + h2), (1, 2, h2, 3 * h2), (2, 2, h2)),
        _packed_ref("rnn", 1),
        kwargs={"num_layers": 2, "bidirectional": True},
        order=2,
        id="2layers_bidirectional",
    ),
    Spec(
        lstm_b,
        ((T, B, N), (1, 1, B, H), (1, 1, B, H), (1, 4, H, N + H), (1, 1, 4, H)),
        _packed_ref("lstm", 2, bias_only=True),
    ),
    Spec(
        lstm,
        ((T, B, N), (1, 1, B, H), (1, 1, B, H), (1, 4, H, N + H)),
        _packed_ref("lstm", 2),
        order=1,
        id="no_bias",
    ),
    Spec(
        lstm,
        (
            (t2, b1, i1),
            (2, 2, b1, h2),
            (2, 2, b1, h2),
            (2, 4, h2, i1 + h2),
            (1, 2, 4, h2, 3 * h2),
            (2, 2, 4, h2),
        ),
        _packed_ref("lstm", 2),
        kwargs={"num_layers": 2, "bidirectional": True},
        order=1,
        id="2layers_bidirectional",
    ),
    Spec(
        gru_b,
        ((T, B, N), (1, 1, B, H), (1, 3, H, N + H), (1, 1, 4, H)),
        _packed_ref("gru", 1, bias_only=True),
    ),
    Spec(
        gru,
        ((t2, b1, i1), (2, 2, b1, h2), (2, 3, h2, i1 + h2), (1, 2, 3, h2, 3 * h2)),
        _packed_ref("gru", 1),
        kwargs={"num_layers": 2, "bidirectional": True},
        order=1,
        id="2layers_bidirectional",
    ),
]
