"""Specs of hodiff/functions/normalization.py.

References are written per group with explicit loops over the statistics'
index (numpy's mean/var on each slice). batch_normalization updates its
running statistics in place; in training mode they do not enter the output
(their gradient is zero, as the finite differences see), in inference mode
they are ordinary inputs.
"""

from itertools import product
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec, fixed, positive


def _standardize_loop(x: np.ndarray, keep: tuple[int, ...], eps: float) -> np.ndarray:
    """Standardizes ``x`` per index of the ``keep`` axes, slice by slice."""
    out = np.empty_like(x)
    for idx in product(*(range(x.shape[a]) for a in keep)):
        sl: list[Any] = [slice(None)] * x.ndim
        for a, i in zip(keep, idx, strict=True):
            sl[a] = i
        s = x[tuple(sl)]
        out[tuple(sl)] = (s - s.mean()) / np.sqrt(s.var() + eps)
    return out


def _bn_ref(
    x: np.ndarray,
    beta: np.ndarray,
    gamma: np.ndarray,
    mean: np.ndarray,
    variance: np.ndarray,
    axes: Any = (1,),
    decay_rate: float = 0.9,
    eps: float = 1e-5,
    batch_stat: bool = True,
) -> np.ndarray:
    keep = (axes,) if isinstance(axes, int) else tuple(axes)
    shape = [s if i in keep else 1 for i, s in enumerate(x.shape)]
    beta, gamma = beta.reshape(shape), gamma.reshape(shape)
    if batch_stat:
        return _standardize_loop(x, keep, eps) * gamma + beta
    return (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + eps) * gamma + beta


def _ln_ref(
    x: np.ndarray, beta: Any, gamma: Any, batch_axis: int = 0, eps: float = 1e-5
) -> np.ndarray:
    y = _standardize_loop(x, (batch_axis,), eps)
    return y * (1 if gamma is None else gamma) + (0 if beta is None else beta)


def _in_ref(
    x: np.ndarray,
    beta: np.ndarray,
    gamma: np.ndarray,
    channel_axis: int = 1,
    batch_axis: int = 0,
    eps: float = 1e-5,
) -> np.ndarray:
    keep = tuple(sorted((batch_axis, channel_axis)))
    return _standardize_loop(x, keep, eps) * gamma + beta


def _gn_ref(
    x: np.ndarray, beta: np.ndarray, gamma: np.ndarray, num_groups: int = 1, eps: float = 1e-5
) -> np.ndarray:
    b, c = x.shape[:2]
    out = np.empty_like(x)
    size = c // num_groups
    for i in range(b):
        for g in range(num_groups):
            s = x[i, g * size : (g + 1) * size]
            out[i, g * size : (g + 1) * size] = (s - s.mean()) / np.sqrt(s.var() + eps)
    return out * gamma + beta


def _wn_ref(w: np.ndarray, g: np.ndarray, dim: int = 0, eps: float = 1e-12) -> np.ndarray:
    wm = np.moveaxis(w, dim, 0)
    out = np.empty_like(wm)
    for k in range(wm.shape[0]):
        out[k] = g[k] * wm[k] / np.sqrt((wm[k] ** 2).sum() + eps)
    return np.moveaxis(out, 0, dim)


def _stat(ref: Any, red: tuple[int, ...], grouped: Any = None) -> Any:
    """``ref`` followed by the biased mean and variance of ``x`` over ``red`` (keepdims),
    ``x`` first reshaped by ``grouped(x)`` when given (``output_stat``).
    """

    def out(x: np.ndarray, *rest: Any, output_stat: bool, **kw: Any) -> Any:
        xs = x if grouped is None else grouped(x)
        return (
            ref(x, *rest, **kw),
            xs.mean(axis=red, keepdims=True),
            xs.var(axis=red, keepdims=True),
        )

    return out


SPECS = [
    Spec(
        F.batch_normalization,
        ((3, 2, 2), (1, 2, 1), (1, 2, 1), (1, 2, 1), positive((1, 2, 1))),
        _bn_ref,
    ),
    Spec(
        F.batch_normalization,
        ((2, 2, 3), (3,), (3,), (3,), positive((3,))),
        _bn_ref,
        kwargs={"axes": [2], "decay_rate": 0.5, "eps": 1e-3},
        id="flat_params",
    ),
    Spec(
        F.batch_normalization,
        ((2, 3), (1, 3), (1, 3), (1, 3), positive((1, 3))),
        _bn_ref,
        kwargs={"batch_stat": False},
        id="inference",
    ),
    Spec(F.layer_normalization, ((2, 3, 2), (1, 3, 2), (1, 3, 2)), _ln_ref),
    Spec(
        F.layer_normalization,
        ((2, 4),),
        _ln_ref,
        kwargs={"beta": None, "gamma": None},
        id="no_affine",
    ),
    Spec(F.instance_normalization, ((2, 2, 3), (1, 2, 1), (1, 2, 1)), _in_ref),
    Spec(
        F.group_normalization, ((2, 4, 2), (1, 4, 1), (1, 4, 1)), _gn_ref, kwargs={"num_groups": 2}
    ),
    # output_stat=True (NNabla's): the batch statistics too, differentiable
    Spec(
        F.batch_normalization,
        ((3, 2, 2), (1, 2, 1), (1, 2, 1), (1, 2, 1), positive((1, 2, 1))),
        _stat(_bn_ref, (0, 2)),
        kwargs={"output_stat": True},
        id="output_stat",
    ),
    Spec(
        F.layer_normalization,
        ((2, 3, 2), (1, 3, 2), (1, 3, 2)),
        _stat(_ln_ref, (1, 2)),
        kwargs={"output_stat": True},
        id="output_stat",
    ),
    Spec(
        F.instance_normalization,
        ((2, 2, 3), (1, 2, 1), (1, 2, 1)),
        _stat(_in_ref, (2,)),
        kwargs={"output_stat": True},
        id="output_stat",
    ),
    Spec(
        F.group_normalization,
        ((2, 4, 2), (1, 4, 1), (1, 4, 1)),
        _stat(_gn_ref, (2, 3), lambda x: x.reshape(2, 2, 2, 2)),
        kwargs={"num_groups": 2, "output_stat": True},
        id="output_stat",
    ),
    # clip_by_norm: clipped (norm > clip_norm) and not, over all axes and per row
    Spec(
        F.clip_by_norm,
        ((2, 3),),
        lambda x, clip_norm: x * clip_norm / max(np.sqrt((x**2).sum()), clip_norm),
        kwargs={"clip_norm": 0.5},
    ),
    Spec(
        F.clip_by_norm,
        (fixed(np.array([[0.1, -0.2, 0.1], [2.0, 1.0, -1.5]])),),
        lambda x, clip_norm, axis: (
            x * clip_norm / np.maximum(np.sqrt((x**2).sum(axis=axis, keepdims=True)), clip_norm)
        ),
        kwargs={"clip_norm": 1.0, "axis": 1},
        id="axis",
    ),
    Spec(
        F.weight_standardization,
        ((3, 2, 2),),
        lambda w: (
            (w - w.mean(axis=(1, 2), keepdims=True))
            / np.sqrt(w.var(axis=(1, 2), keepdims=True) + 1e-5)
        ),
    ),
    Spec(
        F.weight_standardization,
        ((4, 3),),
        _stat(
            lambda w, channel_axis: (
                (w - w.mean(axis=0, keepdims=True)) / np.sqrt(w.var(axis=0, keepdims=True) + 1e-5)
            ),
            (0,),
        ),
        kwargs={"channel_axis": -1, "output_stat": True},
        id="affine_output_stat",
    ),
    Spec(
        F.norm_normalization,
        ((2, 3, 2),),
        lambda x: x / np.sqrt((x**2).sum() + 1e-12),
    ),
    Spec(
        F.norm_normalization,
        ((2, 3, 2),),
        lambda x, p, axes: x / ((np.abs(x) ** p).sum(axis=axes, keepdims=True) + 1e-12) ** (1 / p),
        kwargs={"p": 3.0, "axes": (0, 2)},
        kinks=(0.0,),
        id="p3_axes",
    ),
    Spec(F.weight_normalization, ((3, 2, 2), (3,)), _wn_ref),
    Spec(F.weight_normalization, ((2, 3), (3,)), _wn_ref, kwargs={"dim": 1}, id="dim1"),
]
