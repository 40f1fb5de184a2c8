"""Normalization layers, with NNabla's signatures and definitions.

``batch_normalization`` is a fused primitive: its forward computes the batch
statistics in one place and updates the running mean and variance in place (as
NNabla does); its backward is written in F and goes through the batch
statistics, so it is differentiable to any order. Layer, instance, group and
weight normalization are compositions (two-pass mean/variance, stable) and need
no rule of their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.complex_values import real_values
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.function import Function, Slot
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable, as_variable
from hodiff.functions import arithmetic as _arith
from hodiff.functions import array as _array
from hodiff.functions import reduction as _red
from hodiff.functions import state as _state

__all__ = [
    "batch_normalization",
    "clip_by_norm",
    "group_normalization",
    "instance_normalization",
    "layer_normalization",
    "norm_normalization",
    "weight_normalization",
    "weight_standardization",
]

Slots = Sequence[Slot]
Flags = Sequence[bool]
Spec = list[tuple[tuple[int, ...], Any]]


def _axes(name: str, arg: str, axes: Any, ndim: int) -> tuple[int, ...]:
    """``axes`` (an int or a sequence of ints) as sorted non-negative axes of an ``ndim`` array."""
    items = [axes] if isinstance(axes, int | np.integer) else list(axes)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, int | np.integer):
            raise TypeError(f"{name}: {arg} must be ints, got {axes!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"{name}: {arg} {axes!r} is out of range for x of {ndim} dims")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {arg} {axes!r}")
    return tuple(sorted(out))


def _check_eps(name: str, eps: float) -> float:
    eps = _arith.check_scalar(name, "eps", eps)
    if eps < 0:
        raise ValueError(f"{name}: eps must be non-negative, got {eps}")
    return eps


def _check_float(name: str, arg: str, v: Variable) -> None:
    if v.dtype.kind != "f":
        raise TypeError(f"{name}: {arg} must be a float array, got dtype {v.dtype}")


class BatchNormalization(Function, follows_shape=True):
    """Inputs ``x, beta, gamma, mean, variance``; ``axes`` are the kept (channel) axes."""

    need_inputs = (0, 2, 3, 4)
    batch_rule = _batching.loop  # statistics per example
    #: its forward updates the running statistics: a compiler runs it once per call
    effects = True

    def __init__(
        self,
        *,
        axes: Sequence[int] = (1,),
        decay_rate: float = 0.9,
        eps: float = 1e-5,
        batch_stat: bool = True,
    ) -> None:
        self.axes = tuple(axes)
        self.decay_rate = _arith.check_scalar(self.name, "decay_rate", decay_rate)
        self.eps = _check_eps(self.name, eps)
        self.batch_stat = bool(batch_stat)

    def _geometry(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """(reduced axes, parameter shape, number of reduced elements) for an input ``shape``."""
        kept = _axes(self.name, "axes", self.axes, len(shape))
        red = tuple(i for i in range(len(shape)) if i not in kept)
        p_shape = tuple(s if i in kept else 1 for i, s in enumerate(shape))
        return red, p_shape, math.prod(shape[i] for i in red)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        _check_float(self.name, "x", x)
        _, p_shape, _ = self._geometry(x.shape)
        squeezed = tuple(s for s in p_shape if s != 1)
        names = ("beta", "gamma", "mean", "variance")
        for arg, v in zip(names, inputs[1:], strict=True):
            _check_float(self.name, arg, v)
            if v.shape not in (p_shape, squeezed):
                raise ValueError(
                    f"batch_normalization: {arg} of shape {v.shape} does not fit x of shape"
                    f" {x.shape} with axes {list(self.axes)}: expected {p_shape}"
                )
        used = inputs[:3] if self.batch_stat else inputs
        return [(x.shape, np.result_type(*(v.dtype for v in used)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, beta, gamma, rmean, rvar = inputs
        xp = array_module(x)
        red, p_shape, n = self._geometry(x.shape)
        used = inputs[:3] if self.batch_stat else inputs
        dtype = np.result_type(*(a.dtype for a in used))
        beta, gamma = beta.reshape(p_shape), gamma.reshape(p_shape)
        if self.batch_stat:
            mu = x.mean(axis=red, keepdims=True)
            xc = x - mu
            var = (xc * xc).mean(axis=red, keepdims=True)
        if self.batch_stat and not _state.is_replaying():
            # running statistics, in place (NNabla: the unbiased batch variance), once per
            # call of the user's function: not again when a transform recomputes the node
            d = self.decay_rate
            unbiased = n / (n - 1) if n > 1 else 1.0
            rmean[...] = (d * rmean.reshape(p_shape) + (1 - d) * mu).reshape(rmean.shape)
            rvar[...] = (d * rvar.reshape(p_shape) + (1 - d) * unbiased * var).reshape(rvar.shape)
        if not self.batch_stat:
            xc = x - rmean.reshape(p_shape)
            var = rvar.reshape(p_shape)
        y = xc * (gamma / xp.sqrt(var + self.eps)) + beta
        outputs[0] = y.astype(dtype, copy=False)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        x, gy = inputs[0].data, outputs[0].grad
        red, p_shape, n = self._geometry(inputs[0].shape)

        def as_param(i: int) -> Any:
            v = inputs[i].data
            return v if inputs[i].shape == p_shape else _array.reshape(v, p_shape)

        def store_param(i: int, g: Any) -> None:
            g = _red.sum(g, axis=red, keepdims=True)
            if inputs[i].shape != p_shape:
                g = _array.reshape(g, inputs[i].shape)
            inputs[i].store(g, accum[i])

        gamma = as_param(2)
        if self.batch_stat:
            # training: y = xhat gamma + beta with xhat = (x - mu) / sqrt(var + eps) of the batch
            mu = _red.sum(x, axis=red, keepdims=True) * (1.0 / n)
            xc = x - mu
            var = _red.sum(xc * xc, axis=red, keepdims=True) * (1.0 / n)
            rstd = (var + self.eps) ** -0.5
            xhat = xc * rstd
            if prop_down[0]:
                # dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = gy gamma
                g = gy * gamma
                mean_g = _red.sum(g, axis=red, keepdims=True) * (1.0 / n)
                mean_gx = _red.sum(g * xhat, axis=red, keepdims=True) * (1.0 / n)
                inputs[0].store(rstd * (g - mean_g - xhat * mean_gx), accum[0])
            if prop_down[1]:
                store_param(1, gy)  # dbeta = sum(gy)
            if prop_down[2]:
                store_param(2, gy * xhat)  # dgamma = sum(gy xhat)
            return  # the running statistics do not enter y: no gradient flows to them
        # inference: y = (x - mean) gamma / sqrt(variance + eps) + beta
        rmean, rvar = as_param(3), as_param(4)
        rstd = (rvar + self.eps) ** -0.5
        xc = x - rmean
        if prop_down[0]:
            inputs[0].store(gy * (gamma * rstd), accum[0])  # dx = gy gamma rstd
        if prop_down[1]:
            store_param(1, gy)
        if prop_down[2]:
            store_param(2, gy * xc * rstd)
        if prop_down[3]:
            store_param(3, -(gy * (gamma * rstd)))  # dmean = -sum(gy) gamma rstd
        if prop_down[4]:
            # dvariance = -1/2 gamma (variance + eps)^-3/2 sum(gy (x - mean))
            scale = gamma * ((rvar + self.eps) ** -1.5) * -0.5
            store_param(4, gy * xc * scale)


# ---------------------------------------------------------------- helpers of the compositions
def _moments(x: Variable, red: tuple[int, ...]) -> tuple[Variable, Variable, Variable]:
    """``(x - mean, mean, var)`` over the axes ``red`` (keepdims; two-pass, biased variance)."""
    mu = _red.Mean(axis=red, keepdims=True)(x)  # n read at run time: follows reset_shape
    xc = x - mu
    var = _red.Mean(axis=red, keepdims=True)(xc * xc)
    return xc, mu, var


def _standardize(x: Variable, red: tuple[int, ...], eps: float) -> Variable:
    """``(x - mean) / sqrt(var + eps)`` over the axes ``red`` (two-pass variance)."""
    xc, _, var = _moments(x, red)
    return xc * (var + eps) ** -0.5


def _with_stat(name: str, y: Any, x: Variable, red: tuple[int, ...], output_stat: bool) -> Any:
    """``y``, or ``(y, mean, var)`` of ``x`` over ``red`` (NNabla's ``output_stat``)."""
    if not isinstance(output_stat, bool | np.bool_):
        raise TypeError(f"{name}: output_stat must be a bool, got {type(output_stat).__name__}")
    if not output_stat:
        return y
    _, mu, var = _moments(x, red)
    return y, mu, var


def _affine(
    name: str, y: Variable, beta: Any, gamma: Any, no_scale: bool, no_bias: bool
) -> Variable:
    """``y * gamma + beta``, each omitted when None or switched off; both must broadcast to y."""
    for arg, p, off in (("gamma", gamma, no_scale), ("beta", beta, no_bias)):
        if p is None or off:
            continue
        p = as_variable(p)
        try:
            ok = np.broadcast_shapes(p.shape, y.shape) == y.shape
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name}: {arg} of shape {p.shape} does not broadcast to x of shape {y.shape}"
            )
        y = y * p if arg == "gamma" else y + p
    return y


def _prepare(name: str, x: Any, eps: float) -> tuple[Variable, float]:
    x = as_variable(x)
    _check_float(name, "x", x)
    if x.ndim == 0:
        raise ValueError(f"{name}: x must have at least one dimension, got a 0-d array")
    return x, _check_eps(name, eps)


# ---------------------------------------------------------------- wrappers
@traced
@real_values
def batch_normalization(
    x: Any,
    beta: Any,
    gamma: Any,
    mean: Any,
    variance: Any,
    axes: Sequence[int] | int = (1,),
    decay_rate: float = 0.9,
    eps: float = 1e-5,
    batch_stat: bool = True,
    output_stat: bool = False,
) -> Any:
    """Batch normalization (NNabla's): ``y = (x - mu) / sqrt(sigma^2 + eps) * gamma + beta``.

    ``axes`` are the axes KEPT (the channel axis 1 by default): ``mu`` and
    ``sigma^2`` are taken over all the other axes.

    * ``batch_stat=True`` (training): ``mu``, ``sigma^2`` are the batch mean and
      (biased) variance, and the gradient goes through them. The running
      statistics are updated in place, in the arrays of ``mean`` and ``variance``:
      ``mean = decay_rate * mean + (1 - decay_rate) * mu`` and likewise ``variance``
      with the unbiased batch variance ``sigma^2 n / (n - 1)``. They get no gradient.
    * ``batch_stat=False`` (inference): ``mu = mean``, ``sigma^2 = variance`` (the
      stored statistics, which then get gradients too).

    Args:
        x: input, e.g. ``(N, C, H, W)``.
        beta: shift of shape ``(1, C, 1, 1)`` (1 on the reduced axes) or ``(C,)``; None omits it.
        gamma: scale, same shape; None omits it.
        mean: running mean, same shape, updated in place in training; None (training only)
            uses a throw-away buffer.
        variance: running variance, likewise.
        axes: kept axes (int or list).
        decay_rate: weight of the old running statistics.
        eps: added to the variance.
        batch_stat: use batch statistics (training) or the stored ones (inference).
        output_stat: also return the batch ``mu`` and (biased) ``sigma^2``, differentiable,
            of the shape of the parameters (``batch_stat`` only, as NNabla).

    Returns:
        ``y`` of the shape of ``x``; with ``output_stat``, ``(y, mu, sigma^2)``.

    >>> import numpy as np, hodiff.functions as F
    >>> x = np.array([[1.0], [3.0]])
    >>> m, v = np.zeros((1, 1)), np.ones((1, 1))
    >>> F.batch_normalization(x, None, None, m, v, eps=0.0).d
    array([[-1.],
           [ 1.]])
    >>> m, v  # running statistics updated in place
    (array([[0.2]]), array([[1.1]]))

    """
    name = "batch_normalization"
    x = as_variable(x)
    _check_float(name, "x", x)
    kept = _axes(name, "axes", axes, x.ndim)
    p_shape = tuple(s if i in kept else 1 for i, s in enumerate(x.shape))
    xp = array_module(x._data) if x._data is not None else get_default_context().xp
    params = _bn_parameters(name, (beta, gamma, mean, variance), p_shape, x.dtype, xp, batch_stat)
    if batch_stat:
        _check_running_leaves(name, params[2:])
    if output_stat and not batch_stat:
        raise ValueError(f"{name}: output_stat=True needs batch_stat=True (the batch statistics)")
    fn = BatchNormalization(axes=kept, decay_rate=decay_rate, eps=eps, batch_stat=batch_stat)
    y = fn(x, *params)
    red = tuple(i for i in range(x.ndim) if i not in kept)
    out = _with_stat(name, y, x, red, output_stat)
    if output_stat and params[2].shape != p_shape:  # the stored statistics' shape, as NNabla
        out = (y, _array.reshape(out[1], params[2].shape), _array.reshape(out[2], params[2].shape))
    return out


def _bn_parameters(
    name: str,
    given: tuple[Any, Any, Any, Any],
    p_shape: tuple[int, ...],
    dtype: Any,
    xp: Any,
    batch_stat: bool,
) -> list[Any]:
    """beta, gamma, mean, variance: each given one, or a constant of ``p_shape`` (0, 1, 0, 1)
    where None (the running statistics must be given in inference); a running statistic
    given as an array is wrapped without a copy, so that it is updated in place.
    """
    params = []
    for (arg, fill), v in zip(
        (("beta", 0.0), ("gamma", 1.0), ("mean", 0.0), ("variance", 1.0)), given, strict=True
    ):
        if v is None:
            if not batch_stat and arg in ("mean", "variance"):
                raise ValueError(f"{name}: {arg} must be given when batch_stat is False")
            v = Variable.from_array(xp.full(p_shape, fill, dtype=dtype))
        elif arg in ("mean", "variance") and not isinstance(v, Variable) and hasattr(v, "shape"):
            v = Variable.from_array(v, copy=False)  # the caller's array is updated in place
        params.append(v)
    return params


def _check_running_leaves(name: str, running: list[Any]) -> None:
    """Raises unless the running mean and variance are leaves (training writes into them)."""
    for arg, v in zip(("mean", "variance"), running, strict=True):
        if isinstance(v, Variable) and v.parent is not None:
            raise ValueError(
                f"{name}: {arg} must be a leaf Variable (it is updated in place) when"
                " batch_stat is True"
            )


@traced
@real_values
def layer_normalization(
    x: Any,
    beta: Any,
    gamma: Any,
    batch_axis: int | Sequence[int] = 0,
    eps: float = 1e-5,
    output_stat: bool = False,
    no_scale: bool = False,
    no_bias: bool = False,
) -> Any:
    """Layer normalization: standardize each sample over all axes but ``batch_axis``.

    ``y = (x - mu) / sqrt(sigma^2 + eps) * gamma + beta`` with ``mu``, ``sigma^2`` taken
    per sample (for ``(B, C, H, W)`` and ``batch_axis=0``: shape ``(B, 1, 1, 1)``).
    ``beta``/``gamma`` broadcast to ``x`` (e.g. ``(1, C, H, W)``); None or
    ``no_bias``/``no_scale`` omit them. With ``output_stat`` (NNabla's) the result is
    ``(y, mu, sigma^2)``, the statistics differentiable, of shape ``(B, 1, 1, 1)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.layer_normalization(np.array([[1.0, 3.0]]), None, None, eps=0.0).d
    array([[-1.,  1.]])
    """
    name = "layer_normalization"
    x, eps = _prepare(name, x, eps)
    keep = _axes(name, "batch_axis", batch_axis, x.ndim)
    red = tuple(i for i in range(x.ndim) if i not in keep)
    y = _affine(name, _standardize(x, red, eps), beta, gamma, no_scale, no_bias)
    return _with_stat(name, y, x, red, output_stat)


@traced
@real_values
def instance_normalization(
    x: Any,
    beta: Any,
    gamma: Any,
    channel_axis: int = 1,
    batch_axis: int | Sequence[int] = 0,
    eps: float = 1e-5,
    output_stat: bool = False,
    no_scale: bool = False,
    no_bias: bool = False,
) -> Any:
    """Instance normalization: standardize each (sample, channel) over the remaining axes.

    For ``(B, C, H, W)`` the statistics have shape ``(B, C, 1, 1)``;
    ``beta``/``gamma`` broadcast to ``x`` (typically ``(1, C, 1, 1)``). With
    ``output_stat`` (NNabla's) the result is ``(y, mu, sigma^2)``, the statistics
    differentiable.

    >>> import numpy as np, hodiff.functions as F
    >>> F.instance_normalization(np.array([[[1.0, 3.0]]]), None, None, eps=0.0).d
    array([[[-1.,  1.]]])
    """
    name = "instance_normalization"
    x, eps = _prepare(name, x, eps)
    (ca,) = _axes(name, "channel_axis", channel_axis, x.ndim)
    keep = _axes(name, "batch_axis", batch_axis, x.ndim)
    if ca in keep:
        raise ValueError(f"{name}: channel_axis {channel_axis} is also in batch_axis {keep}")
    red = tuple(i for i in range(x.ndim) if i not in keep and i != ca)
    y = _affine(name, _standardize(x, red, eps), beta, gamma, no_scale, no_bias)
    return _with_stat(name, y, x, red, output_stat)


@traced
@real_values
def group_normalization(
    x: Any,
    beta: Any,
    gamma: Any,
    num_groups: int = 1,
    channel_axis: int = 1,
    batch_axis: int | Sequence[int] = 0,
    eps: float = 1e-5,
    output_stat: bool = False,
    no_scale: bool = False,
    no_bias: bool = False,
) -> Any:
    """Group normalization: the ``C`` channels are split into ``num_groups`` groups and each
    (sample, group) is standardized over its channels and the remaining axes.

    ``(B, C, H, W)`` is viewed as ``(B, G, C/G, H, W)``, standardized with statistics
    of shape ``(B, G, 1, 1, 1)``, reshaped back, then scaled by ``gamma`` and shifted by
    ``beta`` (broadcast to ``x``, typically ``(1, C, 1, 1)``). With ``output_stat``
    (NNabla's) the result is ``(y, mu, sigma^2)``, the statistics differentiable, of the
    grouped shape ``(B, G, 1, 1, 1)``.

    >>> import numpy as np, hodiff.functions as F
    >>> x = np.array([[1.0, 3.0, 0.0, 4.0]])
    >>> F.group_normalization(x, None, None, num_groups=2, eps=0.0).d
    array([[-1.,  1., -1.,  1.]])
    """
    name = "group_normalization"
    x, eps = _prepare(name, x, eps)
    (ca,) = _axes(name, "channel_axis", channel_axis, x.ndim)
    keep = _axes(name, "batch_axis", batch_axis, x.ndim)
    if ca in keep:
        raise ValueError(f"{name}: channel_axis {channel_axis} is also in batch_axis {keep}")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int | np.integer):
        raise TypeError(f"{name}: num_groups must be an int, got {type(num_groups).__name__}")
    c = x.shape[ca]
    if num_groups < 1 or c % num_groups:
        raise ValueError(
            f"{name}: the {c} channels of x of shape {x.shape} (axis {ca}) are not a multiple of"
            f" num_groups={num_groups}"
        )
    grouped = (*x.shape[:ca], int(num_groups), c // num_groups, *x.shape[ca + 1 :])
    keep_g = {a if a < ca else a + 1 for a in keep} | {ca}
    red = tuple(i for i in range(len(grouped)) if i not in keep_g)
    xg = _array.reshape(x, grouped)
    y = _array.reshape(_standardize(xg, red, eps), x.shape)
    return _with_stat(name, _affine(name, y, beta, gamma, no_scale, no_bias), xg, red, output_stat)


@traced
@real_values
def weight_normalization(w: Any, g: Any, dim: int = 0, eps: float = 1e-12) -> Variable:
    """Weight normalization: ``w_WN = g * w / ||w||``, the norm taken over all axes but ``dim``.

    ``||w|| = sqrt(sum w^2 + eps)`` per index of ``dim``; ``g`` has shape ``(w.shape[dim],)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.weight_normalization(np.array([[3.0, 4.0]]), np.array([2.0]), eps=0.0).d
    array([[1.2, 1.6]])
    """
    name = "weight_normalization"
    w, eps = _prepare(name, w, eps)
    g = as_variable(g)
    (d,) = _axes(name, "dim", dim, w.ndim)
    if g.shape != (w.shape[d],):
        raise ValueError(
            f"{name}: g of shape {g.shape} must have shape ({w.shape[d]},) for w of shape"
            f" {w.shape} and dim {dim}"
        )
    gb = _array.reshape(g, tuple(s if i == d else 1 for i, s in enumerate(w.shape)))
    red = tuple(i for i in range(w.ndim) if i != d)
    return w * gb * (_red.sum(w * w, axis=red, keepdims=True) + eps) ** -0.5


@traced
@real_values
def clip_by_norm(x: Any, clip_norm: Any, axis: Any = None) -> Variable:
    """NNabla's ``y = clip_norm * x / max(||x||_2, clip_norm)``, the norm over ``axis``.

    ``x`` is rescaled to the L2 norm ``clip_norm`` where its norm is larger; the norm is
    taken over ``axis`` with keepdims.

    Args:
        x: input of any shape.
        clip_norm: the largest norm, a positive float or a Variable (broadcast to the
            norm's shape).
        axis: None (the whole array), an int or a sequence of ints.

    Returns:
        The shape of ``x``. Differentiable through the norm (where it is clipped).

    >>> import numpy as np, hodiff.functions as F
    >>> F.clip_by_norm(np.array([3.0, 4.0]), 1.0).d, F.clip_by_norm(np.array([0.3, 0.4]), 1.0).d
    (array([0.6, 0.8]), array([0.3, 0.4]))
    """
    x = as_variable(x)
    red = _red.normalize_axes("clip_by_norm", axis, x.ndim)
    norm = _red.sum(x * x, axis=red, keepdims=True) ** 0.5
    if isinstance(clip_norm, Variable):
        return x * clip_norm / _arith.maximum2(norm, clip_norm)
    c = _arith.check_scalar("clip_by_norm", "clip_norm", clip_norm)
    if not c > 0:
        raise ValueError(f"clip_by_norm: clip_norm must be positive, got {clip_norm}")
    return x * (c / _arith.maximum_scalar(norm, c))


@traced
@real_values
def weight_standardization(
    w: Any, channel_axis: int = 0, eps: float = 1e-5, output_stat: bool = False
) -> Any:
    """Weight standardization (NNabla's): ``(w - mu) / sqrt(sigma^2 + eps)`` per output channel.

    Qiao et al. 2019: each output channel of ``w`` is standardized over its other axes.

    Args:
        w: a weight, e.g. ``(C_out, C_in, kH, kW)`` (``channel_axis=0``) or an affine
            ``(C_in, C_out)`` (``channel_axis=1``).
        channel_axis: the output-channel axis (negative counts from the end).
        eps: added to the variance.
        output_stat: also return the mean and the (biased) variance, keepdims.

    Returns:
        The shape of ``w``; with ``output_stat``, ``(w_hat, mu, sigma^2)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.weight_standardization(np.array([[1.0, 3.0], [0.0, 4.0]]), eps=0.0).d[1]
    array([-1.,  1.])
    """
    name = "weight_standardization"
    w, eps = _prepare(name, w, eps)
    (ca,) = _axes(name, "channel_axis", channel_axis, w.ndim)
    red = tuple(i for i in range(w.ndim) if i != ca)
    return _with_stat(name, _standardize(w, red, eps), w, red, output_stat)


@traced
@real_values
def norm_normalization(
    x: Any, p: float | None = None, axes: Any = None, eps: float = 1e-12
) -> Variable:
    """NNabla's ``y = x / (sum |x|^p + eps)^(1/p)``, the sum over ``axes`` (keepdims).

    Args:
        x: input of any shape.
        p: the order of the norm (None: 2), > 0.
        axes: None (all axes), an int or a sequence of ints.
        eps: added to the sum before the p-th root.

    Returns:
        The shape of ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.norm_normalization(np.array([3.0, 4.0])).d
    array([0.6, 0.8])
    """
    x = as_variable(x)
    p = 2.0 if p is None else _arith.check_scalar("norm_normalization", "p", p)
    if not p > 0:
        raise ValueError(f"norm_normalization: p={p} must be positive")
    red = _red.normalize_axes("norm_normalization", axes, x.ndim)
    ax = _arith.abs(x) if p != 2.0 else x
    total = _red.sum(ax * ax if p == 2.0 else ax**p, axis=red, keepdims=True) + float(eps)
    return x * total ** (-1.0 / p)
