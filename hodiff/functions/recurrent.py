"""Recurrent layers over whole sequences: ``rnn``, ``lstm``, ``gru`` (NNabla's layout).

They are compositions, not primitives: each time step is built from
differentiable functions (``affine``, ``sigmoid``, ``tanh``, ``split``,
``stack``, arithmetic), so every order of derivative works with no rule of
their own. The weights of a layer are single Variables used at every step, so
their gradients are summed over the steps by the engine.

Notation: ``T`` steps, ``B`` batch, ``I`` input size, ``H`` hidden size, ``L``
layers, ``D`` directions (2 when ``bidirectional``). Each layer and direction
owns a weight of shape ``(G, H, In + H)`` (``G`` gates; no gate axis for
``rnn``) applied to ``concat(x_t, h_{t-1})``: ``In = I`` in layer 0 and ``D*H``
above. The input projections of all steps are one GEMM per layer and
direction; only ``h_{t-1}`` is multiplied step by step.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable, as_variable
from hodiff.functions.activation import relu, sigmoid
from hodiff.functions.array import concatenate, reshape, split, stack, transpose
from hodiff.functions.linalg import affine
from hodiff.functions.math import tanh
from hodiff.functions.nn import dropout as _dropout

__all__ = ["gru", "lstm", "rnn"]

Cell = Callable[[Any, list[Any], Any, Any], list[Any]]


# ---------------------------------------------------------------- argument checks
def _var(name: str, arg: str, value: Any) -> Variable:
    try:
        v = as_variable(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name}: {arg} must be a Variable or an array, got {type(value).__name__}"
        ) from None
    if v.dtype.kind != "f":
        raise TypeError(f"{name}: {arg} must be a float array, got dtype {v.dtype}")
    return v


def _options(
    name: str, num_layers: Any, dropout: Any, bidirectional: Any, training: Any
) -> tuple[int, float, int]:
    """(L, dropout ratio, D) after checking the static arguments."""
    if isinstance(num_layers, bool):
        raise TypeError(f"{name}: num_layers must be an int, got bool")
    try:
        n = operator.index(num_layers)
    except TypeError:
        raise TypeError(
            f"{name}: num_layers must be an int, got {type(num_layers).__name__}"
        ) from None
    if n < 1:
        raise ValueError(f"{name}: num_layers must be >= 1, got {n}")
    for arg, flag in (("bidirectional", bidirectional), ("training", training)):
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"{name}: {arg} must be a bool, got {type(flag).__name__}")
    if isinstance(dropout, bool) or not isinstance(dropout, int | float | np.floating):
        raise TypeError(f"{name}: dropout must be a float, got {type(dropout).__name__}")
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout}")
    return n, float(dropout), 2 if bidirectional else 1


def _expect(name: str, arg: str, v: Variable, shape: tuple[int, ...], layout: str) -> None:
    if v.shape != shape:
        raise ValueError(f"{name}: {arg} of shape {v.shape} must have shape {layout} = {shape}")


def _inputs(
    name: str,
    gates: tuple[int, ...],
    x: Any,
    states: list[tuple[str, Any]],
    weight_l0: Any,
    weight: Any,
    bias: Any,
    bias_gates: tuple[int, ...],
    n_layers: int,
    n_dir: int,
) -> tuple[Variable, list[Variable], Variable, Variable | None, Variable | None]:
    """Wraps and checks every input against NNabla's layout; returns them as Variables."""
    x = _var(name, "x", x)
    if x.ndim != 3 or x.shape[0] < 1:
        raise ValueError(f"{name}: x of shape {x.shape} must have shape (T, B, I) with T >= 1")
    _, b, i = x.shape
    hs = [_var(name, arg, s) for arg, s in states]
    h0 = hs[0]
    if h0.ndim != 4:
        raise ValueError(f"{name}: h of shape {h0.shape} must have shape (L, D, B, H)")
    hid = h0.shape[3]
    for (arg, _), s in zip(states, hs, strict=True):
        _expect(name, arg, s, (n_layers, n_dir, b, hid), "(L, D, B, H)")
    gl = "".join(f"{n}, " for n in gates)  # the gate axis in layouts: "4, " or ""
    w0 = _var(name, "weight_l0", weight_l0)
    _expect(name, "weight_l0", w0, (n_dir, *gates, hid, i + hid), f"(D, {gl}H, I + H)")
    w = None
    if n_layers > 1:
        if weight is None:
            raise ValueError(f"{name}: weight is required when num_layers = {n_layers} > 1")
        w = _var(name, "weight", weight)
        shape = (n_layers - 1, n_dir, *gates, hid, n_dir * hid + hid)
        _expect(name, "weight", w, shape, f"(L - 1, D, {gl}H, D * H + H)")
    elif weight is not None:
        raise ValueError(f"{name}: weight must be None when num_layers = 1")
    bv = None
    if bias is not None:
        bv = _var(name, "bias", bias)
        bl = "".join(f"{n}, " for n in bias_gates)
        _expect(name, "bias", bv, (n_layers, n_dir, *bias_gates, hid), f"(L, D, {bl}H)")
    return x, hs, w0, w, bv


# ---------------------------------------------------------------- the sequence loop
def _run(
    x: Variable,
    states: list[Variable],
    w0: Variable,
    w: Variable | None,
    b: Variable | None,
    cell: Cell,
    split_bias: bool,
    n_layers: int,
    n_dir: int,
    ratio: float,
    training: bool,
) -> tuple[Variable, list[Variable]]:
    """Runs the layers; returns y ``(T, B, D*H)`` and the final states, each ``(L, D, B, H)``."""
    seq = x
    last: list[list[Variable]] = [[] for _ in states]
    hid = states[0].shape[3]
    for layer in range(n_layers):
        if layer > 0 and training and ratio > 0.0:
            seq = _dropout(seq, p=ratio)  # between layers, as cuDNN and PyTorch do
        outs: list[Variable] = []
        for d in range(n_dir):
            wl = w0[d] if layer == 0 else w[layer - 1, d]  # type: ignore[index]
            y, s = _one_direction(seq, states, wl, b, cell, split_bias, layer, d)
            outs.append(y)
            for acc, v in zip(last, s, strict=True):
                acc.append(v)
        seq = outs[0] if n_dir == 1 else concatenate(*outs, axis=2)
    shape = (n_layers, n_dir, x.shape[1], hid)
    return seq, [reshape(stack(*vs, axis=0), shape) for vs in last]


def _one_direction(
    seq: Variable,
    states: list[Variable],
    wl: Variable,
    b: Variable | None,
    cell: Cell,
    split_bias: bool,
    layer: int,
    d: int,
) -> tuple[Variable, list[Variable]]:
    """Layer ``layer`` in direction ``d`` (1: the steps backwards), with its weights ``wl``
    (``([G,] In + H, H)``): the hidden states ``(T, B, H)`` in time order, and the final states.
    """
    n_in = seq.shape[2]
    wt = transpose(wl, (wl.ndim - 1, *range(wl.ndim - 1)))  # (In + H, [G,] H)
    wx, wh = wt[:n_in], wt[n_in:]
    bx = bhn = None
    if b is not None:
        bx = b[layer, d]
        if split_bias:  # gru: b_r, b_z, b_in act on x; b_hn on h inside r * (.)
            bx, bhn = bx[:3], bx[3]
    steps = split(affine(seq, wx, bx, base_axis=2), axis=0)  # x W_x + b, all steps
    s = [st[layer, d] for st in states]
    hs = []
    for p in reversed(steps) if d == 1 else steps:
        s = cell(p, s, wh, bhn)
        hs.append(s[0])
    return stack(*(reversed(hs) if d == 1 else hs), axis=0), s


def _rnn_cell(act: Callable[[Any], Any]) -> Cell:
    def cell(p: Any, s: list[Any], wh: Any, _: Any) -> list[Any]:
        # h_t = act(W_x x_t + b + W_h h_{t-1})
        return [act(p + affine(s[0], wh))]

    return cell


def _lstm_cell(p: Any, s: list[Any], wh: Any, _: Any) -> list[Any]:
    h, c = s
    i, f, g, o = split(p + affine(h, wh), axis=1)  # gate order of NNabla: i, f, g, o
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    return [sigmoid(o) * tanh(c), c]


def _gru_cell(p: Any, s: list[Any], wh: Any, bhn: Any) -> list[Any]:
    h = s[0]
    px_r, px_z, px_n = split(p, axis=1)
    ph_r, ph_z, ph_n = split(affine(h, wh), axis=1)
    r = sigmoid(px_r + ph_r)
    z = sigmoid(px_z + ph_z)
    n = tanh(px_n + r * (ph_n if bhn is None else ph_n + bhn))
    return [n + z * (h - n)]  # = (1 - z) n + z h


# ---------------------------------------------------------------- public functions
@traced
def rnn(
    x: Any,
    h: Any,
    weight_l0: Any,
    weight: Any = None,
    bias: Any = None,
    num_layers: int = 1,
    nonlinearity: str = "tanh",
    dropout: float = 0.0,
    bidirectional: bool = False,
    training: bool = True,
) -> tuple[Variable, Variable]:
    r"""Elman RNN over a whole sequence, as NNabla's ``rnn``.

    .. math:: h_t = \mathrm{act}(W [x_t; h_{t-1}] + b),

    with ``act`` tanh or relu, ``W = weight_l0[d]`` in layer 0 and
    ``weight[l - 1, d]`` above. A backward direction reads the sequence in
    reverse; its outputs are concatenated after the forward ones.

    Args:
        x: input sequence of shape ``(T, B, I)``.
        h: initial hidden states of shape ``(L, D, B, H)``.
        weight_l0: layer-0 weights of shape ``(D, H, I + H)``.
        weight: weights of the layers above, ``(L - 1, D, H, D * H + H)``;
            required when ``num_layers > 1``, None otherwise.
        bias: optional biases of shape ``(L, D, H)``.
        num_layers: number of stacked layers ``L``.
        nonlinearity: ``"tanh"`` or ``"relu"``.
        dropout: drop ratio applied to the input of every layer but the first
            while ``training``.
        bidirectional: ``D = 2`` when true, else 1.
        training: dropout is applied only when true. Unlike NNabla, ``False``
            keeps the graph (derivatives at inference time stay available).

    Returns:
        ``(y, h_n)``: outputs of the last layer ``(T, B, D * H)`` and the last
        hidden state of every layer and direction ``(L, D, B, H)``.

    >>> import numpy as np, hodiff.functions as F
    >>> x, h = np.ones((3, 2, 1)), np.zeros((1, 1, 2, 2))
    >>> w0 = np.full((1, 2, 3), 0.5)
    >>> y, hn = F.rnn(x, h, w0)
    >>> y.shape, hn.shape
    ((3, 2, 2), (1, 1, 2, 2))
    >>> bool(np.allclose(hn.d, np.tanh(0.5 + 2 * 0.5 * np.tanh(0.5 + np.tanh(0.5)))))
    True

    """
    n_layers, ratio, n_dir = _options("rnn", num_layers, dropout, bidirectional, training)
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"rnn: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    xv, hs, w0, w, b = _inputs(
        "rnn", (), x, [("h", h)], weight_l0, weight, bias, (), n_layers, n_dir
    )
    act = tanh if nonlinearity == "tanh" else relu
    y, (hn,) = _run(xv, hs, w0, w, b, _rnn_cell(act), False, n_layers, n_dir, ratio, bool(training))
    return y, hn


@traced
def lstm(
    x: Any,
    h: Any,
    c: Any,
    weight_l0: Any,
    weight: Any = None,
    bias: Any = None,
    num_layers: int = 1,
    dropout: float = 0.0,
    bidirectional: bool = False,
    training: bool = True,
) -> tuple[Variable, Variable, Variable]:
    r"""Long short-term memory over a whole sequence, as NNabla's ``lstm``.

    With ``W = (W_i, W_f, W_g, W_o)`` the four gates of a layer and direction,
    each applied to ``[x_t; h_{t-1}]``:

    .. math::
        i_t &= \sigma(W_i [x_t; h_{t-1}] + b_i), \quad
        f_t = \sigma(W_f [x_t; h_{t-1}] + b_f), \quad
        o_t = \sigma(W_o [x_t; h_{t-1}] + b_o) \\
        c_t &= f_t \odot c_{t-1} + i_t \odot \tanh(W_g [x_t; h_{t-1}] + b_g), \quad
        h_t = o_t \odot \tanh(c_t).

    Args:
        x: input sequence of shape ``(T, B, I)``.
        h: initial hidden states of shape ``(L, D, B, H)``.
        c: initial cell states of shape ``(L, D, B, H)``.
        weight_l0: layer-0 weights of shape ``(D, 4, H, I + H)`` (gates i, f, g, o).
        weight: weights of the layers above, ``(L - 1, D, 4, H, D * H + H)``;
            required when ``num_layers > 1``, None otherwise.
        bias: optional biases of shape ``(L, D, 4, H)``.
        num_layers: number of stacked layers ``L``.
        dropout: drop ratio applied to the input of every layer but the first
            while ``training``.
        bidirectional: ``D = 2`` when true (the backward direction reads the
            sequence in reverse; its outputs follow the forward ones), else 1.
        training: dropout is applied only when true. Unlike NNabla, ``False``
            keeps the graph (derivatives at inference time stay available).

    Returns:
        ``(y, h_n, c_n)``: outputs of the last layer ``(T, B, D * H)`` and the
        last hidden and cell states of every layer and direction ``(L, D, B, H)``.

    >>> import numpy as np, hodiff.functions as F
    >>> x, h = np.ones((3, 2, 1)), np.zeros((2, 1, 2, 4))
    >>> w0, w = np.zeros((1, 4, 4, 5)), np.zeros((1, 1, 4, 4, 8))
    >>> y, hn, cn = F.lstm(x, h, h, w0, w, num_layers=2)
    >>> y.shape, hn.shape, cn.shape
    ((3, 2, 4), (2, 1, 2, 4), (2, 1, 2, 4))
    >>> float(cn.d.max())  # zero weights: every gate is 1/2 and tanh(0) = 0
    0.0

    """
    n_layers, ratio, n_dir = _options("lstm", num_layers, dropout, bidirectional, training)
    xv, hs, w0, w, b = _inputs(
        "lstm", (4,), x, [("h", h), ("c", c)], weight_l0, weight, bias, (4,), n_layers, n_dir
    )
    y, (hn, cn) = _run(xv, hs, w0, w, b, _lstm_cell, False, n_layers, n_dir, ratio, bool(training))
    return y, hn, cn


@traced
def gru(
    x: Any,
    h: Any,
    weight_l0: Any,
    weight: Any = None,
    bias: Any = None,
    num_layers: int = 1,
    dropout: float = 0.0,
    bidirectional: bool = False,
    training: bool = True,
) -> tuple[Variable, Variable]:
    r"""Gated recurrent unit over a whole sequence, as NNabla's ``gru``.

    With the three gates ``W = (W_r, W_z, W_n)`` of a layer and direction, each
    of shape ``(H, In + H)`` and split as ``W_* = [W_*x, W_*h]``:

    .. math::
        r_t &= \sigma(W_r [x_t; h_{t-1}] + b_r), \quad
        z_t = \sigma(W_z [x_t; h_{t-1}] + b_z) \\
        n_t &= \tanh(W_{nx} x_t + b_{in} + r_t \odot (W_{nh} h_{t-1} + b_{hn})), \quad
        h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}.

    Args:
        x: input sequence of shape ``(T, B, I)``.
        h: initial hidden states of shape ``(L, D, B, H)``.
        weight_l0: layer-0 weights of shape ``(D, 3, H, I + H)`` (gates r, z, n).
        weight: weights of the layers above, ``(L - 1, D, 3, H, D * H + H)``;
            required when ``num_layers > 1``, None otherwise.
        bias: optional biases of shape ``(L, D, 4, H)``: ``b_r, b_z, b_in, b_hn``.
        num_layers: number of stacked layers ``L``.
        dropout: drop ratio applied to the input of every layer but the first
            while ``training``.
        bidirectional: ``D = 2`` when true (the backward direction reads the
            sequence in reverse; its outputs follow the forward ones), else 1.
        training: dropout is applied only when true. Unlike NNabla, ``False``
            keeps the graph (derivatives at inference time stay available).

    Returns:
        ``(y, h_n)``: outputs of the last layer ``(T, B, D * H)`` and the last
        hidden state of every layer and direction ``(L, D, B, H)``.

    >>> import numpy as np, hodiff.functions as F
    >>> x, h = np.ones((3, 2, 1)), np.ones((1, 2, 2, 4))
    >>> y, hn = F.gru(x, h, np.zeros((2, 3, 4, 5)), bidirectional=True)
    >>> y.shape, hn.shape
    ((3, 2, 8), (1, 2, 2, 4))
    >>> float(hn.d[0, 0, 0, 0])  # zero weights: h_t = h_{t-1} / 2 (z = 1/2, n = 0)
    0.125

    """
    n_layers, ratio, n_dir = _options("gru", num_layers, dropout, bidirectional, training)
    xv, hs, w0, w, b = _inputs(
        "gru", (3,), x, [("h", h)], weight_l0, weight, bias, (4,), n_layers, n_dir
    )
    y, (hn,) = _run(xv, hs, w0, w, b, _gru_cell, True, n_layers, n_dir, ratio, bool(training))
    return y, hn
