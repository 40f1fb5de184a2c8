"""Layers with parameters (NNabla's ``parametric_functions``): ``import hodiff.parametric as PF``.

Each function opens the parameter scope ``name`` inside the current one,
creates (or reuses) its parameters there under NNabla's names with
:func:`hodiff.get_parameter_or_create`, and calls the matching function of
``hodiff.functions`` on them. Calling a layer twice with the same ``name`` in
the same scope shares its parameters (NNabla's rule); use another ``name``
(or an enclosing :func:`hodiff.parameter_scope`) for a new layer. Default
initializers follow NNabla: Glorot-uniform weights
(:func:`hodiff.initializers.calc_uniform_lim_glorot`), zero biases, unit
normalization scales, running statistics 0 and 1, PReLU slopes 0.25,
embeddings ``U(-sqrt(3), sqrt(3))``, spectral-norm vectors ``N(0, 1)``.
An initializer is a callable ``shape -> array`` or an array.

>>> import numpy as np, hodiff as hd, hodiff.parametric as PF
>>> hd.clear_parameters()
>>> with hd.parameter_scope("mlp"):
...     h = PF.affine(np.ones((4, 3)), 5, name="fc1")
...     y = PF.affine(h, 2, name="fc2")
>>> {k: v.shape for k, v in hd.get_parameters().items()}
{'mlp/fc1/W': (3, 5), 'mlp/fc1/b': (5,), 'mlp/fc2/W': (5, 2), 'mlp/fc2/b': (2,)}
>>> hd.clear_parameters()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.engine.variable import Variable, as_variable
from hodiff.training import initializers as I
from hodiff.training.parameter import get_parameter_or_create, parameter_scope
from hodiff.transforms.checkpointing.node import checkpoint

__all__ = [
    "affine",
    "batch_normalization",
    "checkpoint_sequential",
    "convolution",
    "deconvolution",
    "depthwise_convolution",
    "depthwise_deconvolution",
    "embed",
    "gru",
    "layer_normalization",
    "lstm",
    "prelu",
    "rnn",
    "spectral_norm",
]

Init = Callable[[tuple[int, ...]], Any] | Any


def _shape_of(name: str, x: Any) -> tuple[int, ...]:
    if isinstance(x, Variable):
        return x.shape
    try:
        return tuple(np.shape(x))
    except Exception:
        raise TypeError(
            f"PF.{name}: x must be a Variable or an array, got {type(x).__name__}"
        ) from None


def _axis(name: str, arg: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"PF.{name}: {arg}={axis} is out of range for an input of {ndim} axes")
    return axis % ndim


def _channels(name: str, shape: tuple[int, ...], base_axis: int, channel_last: bool) -> int:
    axis = -1 if channel_last else base_axis
    return shape[_axis(name, "base_axis" if not channel_last else "channel axis", axis, len(shape))]


def _glorot(inmaps: int, outmaps: int, kernel: Sequence[int] = (1, 1)) -> I.UniformInitializer:
    return I.UniformInitializer(I.calc_uniform_lim_glorot(inmaps, outmaps, tuple(kernel)))


def _weight_and_bias(
    name: str,
    w_shape: tuple[int, ...],
    w_default: Init,
    b_shape: tuple[int, ...],
    with_bias: bool,
    w_init: Init,
    b_init: Init,
) -> tuple[Variable, Variable | None]:
    """``name/W`` (``w_default``, Glorot uniform, unless ``w_init``) and, with a bias,
    ``name/b`` (zeros unless ``b_init``): the parameters of the affine and convolution layers.
    """
    with parameter_scope(name):
        w = get_parameter_or_create("W", w_shape, w_default if w_init is None else w_init)
        b = None
        if with_bias:
            b = get_parameter_or_create(
                "b", b_shape, I.ConstantInitializer() if b_init is None else b_init
            )
    return w, b


def affine(
    x: Any,
    n_outmaps: int | Sequence[int],
    base_axis: int = 1,
    w_init: Init = None,
    b_init: Init = None,
    with_bias: bool = True,
    name: str = "affine",
) -> Variable:
    """Fully connected layer ``y = x W + b`` with parameters ``name/W``, ``name/b``.

    ``x`` is flattened to ``(prod(x.shape[:base_axis]), prod(x.shape[base_axis:]))``.

    Args:
        x: input ``(M_0, ..., M_{B-1}, D_B, ..., D_N)``.
        n_outmaps: output size ``L`` (an int or a tuple).
        base_axis: axes before it are sample axes.
        w_init: initializer of ``W`` of shape ``(D_B * ... * D_N, *n_outmaps)``;
            Glorot uniform by default.
        b_init: initializer of ``b`` of shape ``n_outmaps``; zeros by default.
        with_bias: create and add ``b``.
        name: the parameter scope.

    Returns:
        ``(M_0, ..., M_{B-1}, *n_outmaps)``.
    """
    shape = _shape_of("affine", x)
    base_axis = _axis("affine", "base_axis", base_axis, len(shape))
    if isinstance(n_outmaps, int | np.integer):
        outs = [int(n_outmaps)]
    else:
        outs = [int(n) for n in n_outmaps]
    inmaps = int(np.prod(shape[base_axis:]))
    w, b = _weight_and_bias(
        name,
        (inmaps, *outs),
        _glorot(inmaps, int(np.prod(outs))),
        tuple(outs),
        with_bias,
        w_init,
        b_init,
    )
    return F.affine(x, w, b, base_axis=base_axis)


def convolution(
    x: Any,
    outmaps: int,
    kernel: Sequence[int],
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    group: int = 1,
    with_bias: bool = True,
    channel_last: bool = False,
    name: str = "conv",
    w_init: Init = None,
    b_init: Init = None,
    base_axis: int = 1,
) -> Variable:
    """N-D convolution layer (:func:`hodiff.functions.convolution`) with ``name/W``, ``name/b``.

    Args:
        x: input ``(*batch, C, L_1, ..., L_N)`` (``channel_last``: channels last).
        outmaps: output channels ``C'``.
        kernel: kernel size ``(K_1, ..., K_N)``.
        pad: padding per spatial axis (as F.convolution).
        stride: stride per spatial axis.
        dilation: dilation per spatial axis.
        group: number of channel groups.
        channel_last: channels on the last axis (NHWC).
        with_bias: create and add ``b`` of shape ``(C',)``.
        name: the parameter scope.
        w_init: initializer of ``W`` of shape ``(C', C / group, *kernel)``
            (``channel_last``: ``(C', *kernel, C / group)``); Glorot uniform by default.
        b_init: initializer of ``b``; zeros by default.
        base_axis: the channel axis (when not ``channel_last``).

    Returns:
        ``(*batch, C', L'_1, ..., L'_N)``.
    """
    shape = _shape_of("convolution", x)
    kernel = tuple(int(k) for k in kernel)
    c = _channels("convolution", shape, base_axis, channel_last)
    if group < 1 or c % group:
        raise ValueError(f"PF.convolution: {c} input channels are not divisible by group={group}")
    w_shape = (outmaps, *kernel, c // group) if channel_last else (outmaps, c // group, *kernel)
    w, b = _weight_and_bias(
        name, w_shape, _glorot(c, outmaps, kernel), (outmaps,), with_bias, w_init, b_init
    )
    return F.convolution(
        x,
        w,
        b,
        base_axis=base_axis,
        pad=pad,
        stride=stride,
        dilation=dilation,
        group=group,
        channel_last=channel_last,
    )


def deconvolution(
    x: Any,
    outmaps: int,
    kernel: Sequence[int],
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    group: int = 1,
    with_bias: bool = True,
    channel_last: bool = False,
    output_padding: Sequence[int] | None = None,
    name: str = "deconv",
    w_init: Init = None,
    b_init: Init = None,
    base_axis: int = 1,
) -> Variable:
    """Transposed convolution layer (F.deconvolution) with ``name/W`` and ``name/b``.

    ``W`` has shape ``(C, C' / group, *kernel)`` (``channel_last``:
    ``(C, *kernel, C' / group)``), Glorot uniform with fans ``(C', C)`` by default;
    ``b`` has shape ``(C',)``, zeros by default.

    Returns:
        ``(*batch, C', L'_1, ..., L'_N)``.
    """
    shape = _shape_of("deconvolution", x)
    kernel = tuple(int(k) for k in kernel)
    c = _channels("deconvolution", shape, base_axis, channel_last)
    if group < 1 or outmaps % group:
        raise ValueError(f"PF.deconvolution: outmaps={outmaps} is not divisible by group={group}")
    w_shape = (c, *kernel, outmaps // group) if channel_last else (c, outmaps // group, *kernel)
    w, b = _weight_and_bias(
        name, w_shape, _glorot(outmaps, c, kernel), (outmaps,), with_bias, w_init, b_init
    )
    return F.deconvolution(
        x,
        w,
        b,
        base_axis=base_axis,
        pad=pad,
        stride=stride,
        dilation=dilation,
        group=group,
        channel_last=channel_last,
        output_padding=output_padding,
    )


def depthwise_convolution(
    x: Any,
    kernel: Sequence[int],
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    multiplier: int = 1,
    with_bias: bool = True,
    name: str = "depthwise_conv",
    w_init: Init = None,
    b_init: Init = None,
    base_axis: int = 1,
) -> Variable:
    """Depthwise convolution layer: ``name/W`` of shape ``(C * multiplier, *kernel)``, ``name/b``.

    ``W`` is Glorot uniform with fans ``(C * multiplier, C)`` by default; ``b``
    (shape ``(C * multiplier,)``) zeros.

    Returns:
        ``(*batch, C * multiplier, L'_1, ..., L'_N)``.
    """
    shape = _shape_of("depthwise_convolution", x)
    kernel = tuple(int(k) for k in kernel)
    c = _channels("depthwise_convolution", shape, base_axis, False)
    out = c * int(multiplier)
    w, b = _weight_and_bias(
        name, (out, *kernel), _glorot(out, c, kernel), (out,), with_bias, w_init, b_init
    )
    return F.depthwise_convolution(
        x,
        w,
        b,
        base_axis=base_axis,
        pad=pad,
        stride=stride,
        dilation=dilation,
        multiplier=multiplier,
    )


def depthwise_deconvolution(
    x: Any,
    kernel: Sequence[int],
    pad: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    divisor: int = 1,
    with_bias: bool = True,
    name: str = "depthwise_deconv",
    w_init: Init = None,
    b_init: Init = None,
    base_axis: int = 1,
) -> Variable:
    """Depthwise deconvolution layer (NNabla's): ``name/W`` of shape ``(C, *kernel)``, ``name/b``.

    The transpose of :func:`depthwise_convolution`: ``C / divisor`` output channels, each
    the sum of the transposed convolutions of its ``divisor`` input channels
    (:func:`hodiff.functions.depthwise_deconvolution`). ``W`` is Glorot uniform with fans
    ``(C, C / divisor)`` by default; ``b`` (shape ``(C / divisor,)``) zeros.

    Returns:
        ``(*batch, C / divisor, L'_1, ..., L'_N)``.
    """
    shape = _shape_of("depthwise_deconvolution", x)
    kernel = tuple(int(k) for k in kernel)
    c = _channels("depthwise_deconvolution", shape, base_axis, False)
    if int(divisor) < 1 or c % int(divisor):
        raise ValueError(
            f"depthwise_deconvolution: divisor={divisor} must divide the {c} channels of x "
            f"of shape {shape}"
        )
    out = c // int(divisor)
    w, b = _weight_and_bias(
        name, (c, *kernel), _glorot(c, out, kernel), (out,), with_bias, w_init, b_init
    )
    return F.depthwise_deconvolution(
        x, w, b, base_axis=base_axis, pad=pad, stride=stride, dilation=dilation, divisor=divisor
    )


def _beta_gamma(
    shape: tuple[int, ...], param_init: dict[str, Init] | None, no_bias: bool, no_scale: bool
) -> tuple[Variable | None, Variable | None]:
    init = param_init or {}
    beta = (
        None
        if no_bias
        else get_parameter_or_create("beta", shape, init.get("beta", I.ConstantInitializer(0)))
    )
    gamma = (
        None
        if no_scale
        else get_parameter_or_create("gamma", shape, init.get("gamma", I.ConstantInitializer(1)))
    )
    return beta, gamma


def batch_normalization(
    x: Any,
    axes: Sequence[int] | int = (1,),
    decay_rate: float = 0.9,
    eps: float = 1e-5,
    batch_stat: bool = True,
    name: str = "bn",
    no_scale: bool = False,
    no_bias: bool = False,
    param_init: dict[str, Init] | None = None,
    output_stat: bool = False,
) -> Any:
    """Batch normalization layer: ``y = (x - mu) / sqrt(sigma^2 + eps) * gamma + beta``.

    Parameters ``name/beta`` (zeros), ``name/gamma`` (ones), and the running
    statistics ``name/mean`` (zeros) and ``name/var`` (ones) with
    ``need_grad=False``, all of shape ``x.shape`` with 1 on every axis not in
    ``axes`` (e.g. ``(1, C, 1, 1)``). With ``batch_stat=True`` (training) the
    batch statistics are used and the running ones updated in place on every
    forward: ``mean = decay_rate * mean + (1 - decay_rate) * mu`` (``var`` with
    the unbiased batch variance); with ``batch_stat=False`` (inference) the
    running statistics are used. See :func:`hodiff.functions.batch_normalization`.

    Args:
        x: input, e.g. ``(N, C, H, W)``.
        axes: the kept (channel) axes.
        decay_rate: weight of the old running statistics.
        eps: added to the variance.
        batch_stat: training (True) or inference (False).
        name: the parameter scope.
        no_scale: omit ``gamma``.
        no_bias: omit ``beta``.
        param_init: initializers by name (``beta``, ``gamma``, ``mean``, ``var``).
        output_stat: also return the batch mean and variance (NNabla's; training only).
    """
    shape = _shape_of("batch_normalization", x)
    kept = [axes] if isinstance(axes, int) else list(axes)
    kept = [_axis("batch_normalization", "axes", a, len(shape)) for a in kept]
    stat = tuple(s if i in kept else 1 for i, s in enumerate(shape))
    init = param_init or {}
    with parameter_scope(name):
        beta, gamma = _beta_gamma(stat, init, no_bias, no_scale)
        mean = get_parameter_or_create(
            "mean", stat, init.get("mean", I.ConstantInitializer(0)), need_grad=False
        )
        var = get_parameter_or_create(
            "var", stat, init.get("var", I.ConstantInitializer(1)), need_grad=False
        )
    return F.batch_normalization(
        x,
        beta,
        gamma,
        mean,
        var,
        axes=kept,
        decay_rate=decay_rate,
        eps=eps,
        batch_stat=batch_stat,
        output_stat=output_stat,
    )


def layer_normalization(
    x: Any,
    batch_axis: int | Sequence[int] = 0,
    eps: float = 1e-5,
    no_scale: bool = False,
    no_bias: bool = False,
    name: str = "layer_normalization",
    param_init: dict[str, Init] | None = None,
    output_stat: bool = False,
) -> Any:
    """Layer normalization layer (:func:`hodiff.functions.layer_normalization`).

    Parameters ``name/beta`` (zeros) and ``name/gamma`` (ones) of shape
    ``x.shape`` with 1 on the batch axes (e.g. ``(1, C, H, W)``), as NNabla. With
    ``output_stat`` (NNabla's) the result is ``(y, mean, variance)``.
    """
    shape = _shape_of("layer_normalization", x)
    batch = [batch_axis] if isinstance(batch_axis, int) else list(batch_axis)
    batch = [_axis("layer_normalization", "batch_axis", a, len(shape)) for a in batch]
    stat = tuple(1 if i in batch else s for i, s in enumerate(shape))
    with parameter_scope(name):
        beta, gamma = _beta_gamma(stat, param_init, no_bias, no_scale)
    return F.layer_normalization(x, beta, gamma, batch_axis=batch, eps=eps, output_stat=output_stat)


def embed(
    x: Any, n_inputs: int, n_features: int, initializer: Init = None, name: str = "embed"
) -> Variable:
    """Embedding layer ``y[i...] = W[x[i...]]``, ``name/W`` of shape ``(n_inputs, n_features)``.

    ``W`` is ``U(-sqrt(3), sqrt(3))`` by default (unit variance), as NNabla.
    """
    with parameter_scope(name):
        w = get_parameter_or_create(
            "W",
            (int(n_inputs), int(n_features)),
            I.UniformInitializer((-np.sqrt(3.0), np.sqrt(3.0)))
            if initializer is None
            else initializer,
        )
    return F.embed(x, w)


def prelu(
    x: Any,
    base_axis: int = 1,
    shared: bool = True,
    slope_init: Init = None,
    name: str = "prelu",
) -> Variable:
    """Parametric ReLU ``y = max(0, x) + w min(0, x)`` with the slope ``name/slope``.

    ``slope`` has shape ``()`` when ``shared``, else ``(x.shape[base_axis],)``; 0.25 by default.
    """
    shape = _shape_of("prelu", x)
    w_shape = () if shared else (shape[_axis("prelu", "base_axis", base_axis, len(shape))],)
    with parameter_scope(name):
        w = get_parameter_or_create(
            "slope", w_shape, I.ConstantInitializer(0.25) if slope_init is None else slope_init
        )
    return F.prelu(x, w, base_axis=base_axis)


def _recurrent_init(
    gates: tuple[int, ...], n_dir: int, hidden: int, first_in: int, layers: int
) -> Callable[[tuple[int, ...]], np.ndarray]:
    """NNabla's default: Glorot-uniform input and hidden blocks, concatenated on the last axis."""
    lead = (layers,) if layers else ()

    def init(shape: tuple[int, ...]) -> np.ndarray:
        wx = _glorot(first_in, hidden)((*lead, n_dir, *gates, hidden, first_in))
        wh = _glorot(hidden, hidden)((*lead, n_dir, *gates, hidden, hidden))
        return np.concatenate((wx, wh), axis=-1)

    return init


def _recurrent_params(
    name: str,
    x: Any,
    h: Any,
    gates: tuple[int, ...],
    bias_gates: tuple[int, ...],
    num_layers: int,
    bidirectional: bool,
    with_bias: bool,
    w0_init: Init,
    w_init: Init,
    b_init: Init,
) -> tuple[Variable, Variable | None, Variable | None]:
    xs, hs = _shape_of(name, x), _shape_of(name, h)
    if len(xs) != 3 or len(hs) != 4:
        raise ValueError(
            f"PF.{name}: x must be (T, B, I) and h (L, D, B, H), got shapes {xs} and {hs}"
        )
    n_in, hidden, n_dir = xs[2], hs[3], 2 if bidirectional else 1
    w0 = get_parameter_or_create(
        "weight_l0",
        (n_dir, *gates, hidden, n_in + hidden),
        _recurrent_init(gates, n_dir, hidden, n_in, 0) if w0_init is None else w0_init,
    )
    w = None
    if num_layers > 1:
        w = get_parameter_or_create(
            "weight",
            (num_layers - 1, n_dir, *gates, hidden, n_dir * hidden + hidden),
            _recurrent_init(gates, n_dir, hidden, n_dir * hidden, num_layers - 1)
            if w_init is None
            else w_init,
        )
    b = None
    if with_bias:
        b = get_parameter_or_create(
            "bias",
            (num_layers, n_dir, *bias_gates, hidden),
            I.ConstantInitializer() if b_init is None else b_init,
        )
    return w0, w, b


def rnn(
    x: Any,
    h: Any,
    w0_init: Init = None,
    w_init: Init = None,
    b_init: Init = None,
    num_layers: int = 1,
    nonlinearity: str = "tanh",
    dropout: float = 0.0,
    bidirectional: bool = False,
    training: bool = True,
    with_bias: bool = True,
    name: str = "rnn",
) -> tuple[Variable, Variable]:
    """Elman RNN layer (:func:`hodiff.functions.rnn`) with NNabla's parameters.

    ``name/weight_l0`` ``(D, H, I + H)``, ``name/weight`` ``(L - 1, D, H, D H + H)``
    (when ``num_layers > 1``) and ``name/bias`` ``(L, D, H)``; the weights are
    Glorot uniform (input and hidden blocks separately), the bias zeros.

    Returns:
        ``(y, h_n)`` as F.rnn.
    """
    with parameter_scope(name):
        w0, w, b = _recurrent_params(
            "rnn", x, h, (), (), num_layers, bidirectional, with_bias, w0_init, w_init, b_init
        )
    return F.rnn(
        x,
        h,
        w0,
        w,
        b,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        dropout=dropout,
        bidirectional=bidirectional,
        training=training,
    )


def lstm(
    x: Any,
    h: Any,
    c: Any,
    w0_init: Init = None,
    w_init: Init = None,
    b_init: Init = None,
    num_layers: int = 1,
    dropout: float = 0.0,
    bidirectional: bool = False,
    training: bool = True,
    with_bias: bool = True,
    name: str = "lstm",
) -> tuple[Variable, Variable, Variable]:
    """LSTM layer (:func:`hodiff.functions.lstm`) with NNabla's parameters.

    ``name/weight_l0`` ``(D, 4, H, I + H)``, ``name/weight``
    ``(L - 1, D, 4, H, D H + H)`` and ``name/bias`` ``(L, D, 4, H)``.

    Returns:
        ``(y, h_n, c_n)`` as F.lstm.
    """
    with parameter_scope(name):
        w0, w, b = _recurrent_params(
            "lstm", x, h, (4,), (4,), num_layers, bidirectional, with_bias, w0_init, w_init, b_init
        )
    return F.lstm(
        x,
        h,
        c,
        w0,
        w,
        b,
        num_layers=num_layers,
        dropout=dropout,
        bidirectional=bidirectional,
        training=training,
    )


def gru(
    x: Any,
    h: Any,
    w0_init: Init = None,
    w_init: Init = None,
    b_init: Init = None,
    num_layers: int = 1,
    dropout: float = 0.0,
    bidirectional: bool = False,
    training: bool = True,
    with_bias: bool = True,
    name: str = "gru",
) -> tuple[Variable, Variable]:
    """GRU layer (:func:`hodiff.functions.gru`) with NNabla's parameters.

    ``name/weight_l0`` ``(D, 3, H, I + H)``, ``name/weight``
    ``(L - 1, D, 3, H, D H + H)`` and ``name/bias`` ``(L, D, 4, H)``
    (``b_r, b_z, b_in, b_hn``).

    Returns:
        ``(y, h_n)`` as F.gru.
    """
    with parameter_scope(name):
        w0, w, b = _recurrent_params(
            "gru", x, h, (3,), (4,), num_layers, bidirectional, with_bias, w0_init, w_init, b_init
        )
    return F.gru(
        x,
        h,
        w0,
        w,
        b,
        num_layers=num_layers,
        dropout=dropout,
        bidirectional=bidirectional,
        training=training,
    )


def spectral_norm(
    w: Any,
    dim: int = 0,
    itr: int = 1,
    eps: float = 1e-12,
    test: bool = False,
    u_init: Init = None,
    name: str = "spectral-norm",
) -> Variable:
    """Spectral normalization ``W_sn = W / sigma(W)`` (:func:`hodiff.functions.spectral_norm`).

    Creates the power-iteration vector ``name/u`` of shape ``(w.shape[dim],)``
    (``N(0, 1)`` by default, ``need_grad=False``; F.spectral_norm updates it in
    place when ``test`` is False) and returns ``F.spectral_norm(w, u, dim, itr,
    eps, test)``. Typical use: ``PF.affine(x, n, w_init=...)`` is replaced by
    ``F.affine(x, PF.spectral_norm(W))`` on a weight made with
    :func:`hodiff.get_parameter_or_create`.
    """
    if not hasattr(F, "spectral_norm"):
        raise NotImplementedError("PF.spectral_norm needs F.spectral_norm (not in this build)")
    wv = as_variable(w)
    d = _axis("spectral_norm", "dim", dim, wv.ndim)
    with parameter_scope(name):
        u = get_parameter_or_create(
            "u",
            (wv.shape[d],),
            I.NormalInitializer() if u_init is None else u_init,
            need_grad=False,
        )
    return F.spectral_norm(wv, u, dim=dim, itr=itr, eps=eps, test=test)


def checkpoint_sequential(
    blocks: Sequence[Callable[[Any], Any]], x: Any, segments: int | None = None
) -> Any:
    """``x`` through ``blocks`` in order, the blocks cut into ``segments`` checkpointed runs.

    ``y = b_{n-1}(... b_1(b_0(x)))``, where each run of consecutive blocks is one
    :func:`hodiff.checkpoint`: only the runs' inputs and outputs are kept, and a reverse
    pass recomputes one run at a time. ``segments=None`` (the default) checkpoints every
    block; ``segments=k`` makes ``k`` runs of ``n // k`` or ``n // k + 1`` blocks (about
    ``sqrt(n)`` runs keeps the fewest values, see docs/checkpointing.md). Values and
    every derivative equal those of the blocks called without it.

    A block is a callable ``h -> h`` (a Variable in, a Variable out) that may create
    its parameters with PF functions: they are created by the first call, in the
    parameter scope the blocks are called in, and reused by the recomputations.

    Args:
        blocks: the callables, in order (at least one).
        x: the input Variable (or array).
        segments: the number of checkpointed runs, ``1 <= segments <= len(blocks)``.

    Returns:
        The output of the last block.

    Raises:
        ValueError: no blocks, or ``segments`` out of range.
        TypeError: a block is not callable, or ``segments`` is not an int.

    >>> import functools, numpy as np, hodiff as hd, hodiff.parametric as PF
    >>> import hodiff.functions as F
    >>> hd.clear_parameters()
    >>> def block(h, name):
    ...     return h + F.tanh(PF.affine(h, 4, name=name))
    >>> blocks = [functools.partial(block, name=f"b{i}") for i in range(6)]
    >>> x = hd.Variable.from_array(np.ones((2, 4)), need_grad=True)
    >>> y = PF.checkpoint_sequential(blocks, x, segments=3)
    >>> y.shape, len(hd.get_parameters())
    ((2, 4), 12)
    >>> hd.clear_parameters()
    """
    blocks = list(blocks)
    if not blocks:
        raise ValueError("checkpoint_sequential: blocks is empty")
    for i, b in enumerate(blocks):
        if not callable(b):
            raise TypeError(
                f"checkpoint_sequential: blocks[{i}] is a {type(b).__name__}, not callable"
            )
    n = len(blocks)
    if segments is None:
        segments = n
    if isinstance(segments, bool) or not isinstance(segments, int | np.integer):
        raise TypeError(
            f"checkpoint_sequential: segments must be an int, got {type(segments).__name__}"
        )
    if not 1 <= segments <= n:
        raise ValueError(
            f"checkpoint_sequential: segments must be between 1 and len(blocks) = {n}, "
            f"got {segments}"
        )
    size, extra = divmod(n, int(segments))
    h = x
    start = 0
    for k in range(int(segments)):
        stop = start + size + (1 if k < extra else 0)
        h = checkpoint(_run_blocks, blocks[start:stop], h)
        start = stop
    return h


def _run_blocks(blocks: Sequence[Callable[[Any], Any]], h: Any) -> Any:
    for b in blocks:
        h = b(h)
    return h
