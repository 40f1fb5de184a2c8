"""Specs of hodiff/functions/loss.py and hodiff/grad_functions/loss.py.

References are plain numpy: the naive (unshifted) softmax, explicit loops over
the labels, the textbook loss formulas. The piecewise losses (absolute error,
Huber) sample their inputs away from the kinks; absolute_error is piecewise
linear, so it is checked as ``linear`` (orders >= 2 on ``y**3``).
"""

from collections.abc import Callable
from itertools import product
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.loss import (
    scatter_by_label,
    select_by_label,
    softmax_cross_entropy_grad,
)
from hodiff.testing.spec import Spec, fixed, labels, positive


def _softmax(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    axis = -1 if axis is None else axis
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    axis = -1 if axis is None else axis
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def _kept(x: np.ndarray, t: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """``t`` with size 1 on ``axis`` and ``x`` moved so that ``axis`` is last."""
    shape = list(x.shape)
    shape[axis] = 1
    return np.moveaxis(x, axis, -1), np.moveaxis(t.reshape(shape), axis, -1)


def _pick_loop(x: np.ndarray, t: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``out[j] = x[j, t_j]`` by an explicit loop over the slices."""
    axis = x.ndim - 1 if axis is None else axis % x.ndim
    xm, tm = _kept(x, t, axis)
    out = np.empty(tm.shape)
    for idx in product(*(range(s) for s in tm.shape[:-1])):
        here = (*idx, 0)
        picked = (*idx, int(tm[here]))
        out[here] = xm[picked]
    return np.moveaxis(out, -1, axis)


def _sce_ref(x: np.ndarray, t: np.ndarray, axis: int | None = None) -> np.ndarray:
    ax = -1 if axis is None else axis
    return -np.log(_pick_loop(_softmax(x, ax), t, axis))


def _sce_grad_ref(
    x: np.ndarray, t: np.ndarray, gy: np.ndarray, axis: int | None = None
) -> np.ndarray:
    ax = x.ndim - 1 if axis is None else axis
    onehot = np.moveaxis(np.eye(x.shape[ax])[_kept(x, t, ax)[1][..., 0]], -1, ax)
    return gy * (_softmax(x, ax) - onehot)


def _scatter_ref(g: np.ndarray, t: np.ndarray, axis: int, size: int) -> np.ndarray:
    gm, tm = _kept(g, t, axis)
    out = np.zeros((*gm.shape[:-1], size))
    for idx in product(*(range(s) for s in gm.shape[:-1])):
        here = (*idx, 0)
        there = (*idx, int(tm[here]))
        out[there] = gm[here]
    return np.moveaxis(out, -1, axis)


def _ignoring(ref: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``ref`` where the label counts, 0 where it is -1 (NNabla's ignored sample)."""

    def masked(x: np.ndarray, t: np.ndarray, *rest: Any, **kw: Any) -> np.ndarray:
        y = ref(x, np.maximum(t, 0), *rest, **kw)
        axis = x.ndim - 1 if kw.get("axis") is None else kw["axis"] % x.ndim
        keep = _kept(x, t, axis)[1] >= 0  # axis moved last, like t's size-1 axis
        return y * np.moveaxis(keep, -1, axis)

    return masked


# two samples of four ignored
_T_IGNORE = fixed(np.array([[0], [-1], [2], [-1]]))


def _sigmoid_ce_ref(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-x))
    return -(t * np.log(s) + (1 - t) * np.log(1 - s))


def _huber_ref(x0: np.ndarray, x1: np.ndarray, delta: float = 1.0) -> np.ndarray:
    d = x0 - x1
    return np.where(np.abs(d) < delta, d**2, delta * (2 * np.abs(d) - delta))


def _kl_ref(p: np.ndarray, q: np.ndarray, base_axis: int = 1) -> np.ndarray:
    lead = p.shape[:base_axis]
    pp, qq = p.reshape((*lead, -1)), q.reshape((*lead, -1))
    d = (pp * (np.log(pp + 1e-8) - np.log(qq + 1e-8))).sum(axis=-1)
    return d.reshape((*lead, 1))


def _probs(shape: tuple[int, ...]) -> Callable[[np.random.Generator], Any]:
    return positive(shape, 0.1, 0.9)


SPECS = [
    Spec(F.softmax, ((2, 3),), _softmax),
    Spec(F.softmax, ((3, 2, 2),), _softmax, kwargs={"axis": 0}, id="axis0"),
    Spec(F.log_softmax, ((2, 3),), _log_softmax),
    Spec(F.log_softmax, ((2, 3, 2),), _log_softmax, kwargs={"axis": -2}, id="axis-2"),
    Spec(F.softmax_cross_entropy, ((2, 3), labels((2, 1), 3)), _sce_ref),
    Spec(F.softmax_cross_entropy, ((2, 3), labels((2,), 3)), _sce_ref, id="flat_labels"),
    Spec(
        F.softmax_cross_entropy,
        ((2, 3, 2), labels((2, 1, 2), 3)),
        _sce_ref,
        kwargs={"axis": 1},
        id="axis1",
    ),
    Spec(F.softmax_cross_entropy, ((4, 3), _T_IGNORE), _ignoring(_sce_ref), id="ignore_label"),
    Spec(softmax_cross_entropy_grad, ((2, 3), labels((2, 1), 3), (2, 1)), _sce_grad_ref),
    Spec(
        softmax_cross_entropy_grad,
        ((4, 3), _T_IGNORE, (4, 1)),
        _ignoring(_sce_grad_ref),
        id="ignore_label",
    ),
    Spec(
        softmax_cross_entropy_grad,
        ((2, 2, 3), labels((2, 1, 3), 2), (2, 1, 3)),
        _sce_grad_ref,
        kwargs={"axis": 1},
        id="axis1",
    ),
    Spec(select_by_label, ((2, 3), labels((2, 1), 3)), _pick_loop, linear=True),
    Spec(
        select_by_label,
        ((3, 2), labels((1, 2), 3)),
        _pick_loop,
        kwargs={"axis": 0},
        linear=True,
        id="axis0",
    ),
    Spec(
        scatter_by_label,
        ((2, 1), labels((2, 1), 3)),
        _scatter_ref,
        kwargs={"axis": 1, "size": 3},
        linear=True,
    ),
    Spec(
        F.categorical_cross_entropy,
        (_probs((2, 3)), labels((2, 1), 3)),
        lambda x, t: -np.log(_pick_loop(x, t)),
    ),
    Spec(
        F.categorical_cross_entropy,
        (_probs((4, 3)), _T_IGNORE),
        _ignoring(lambda x, t: -np.log(_pick_loop(x, t))),
        id="ignore_label",
    ),
    Spec(select_by_label, ((4, 3), _T_IGNORE), _ignoring(_pick_loop), linear=True, id="ignore"),
    Spec(F.sigmoid_cross_entropy, ((2, 3), labels((2, 3), 2)), _sigmoid_ce_ref),
    Spec(F.sigmoid_cross_entropy, ((2, 3), _probs((2, 3))), _sigmoid_ce_ref, id="soft"),
    Spec(
        F.binary_cross_entropy,
        (_probs((2, 3)), _probs((2, 3))),
        lambda x, t: -(t * np.log(x) + (1 - t) * np.log(1 - x)),
    ),
    Spec(F.squared_error, ((2, 3), (2, 3)), lambda a, b: (a - b) ** 2),
    Spec(F.squared_error, ((2, 3), (3,)), lambda a, b: (a - b) ** 2, id="broadcast"),
    Spec(
        F.absolute_error,
        ((2, 3), fixed(np.full((2, 3), 0.3))),
        lambda a, b: np.abs(a - b),
        kinks=(0.3,),
        linear=True,
    ),
    Spec(F.huber_loss, ((2, 3), fixed(np.zeros((2, 3)))), _huber_ref, kinks=(-1.0, 0.0, 1.0)),
    Spec(
        F.epsilon_insensitive_loss,
        ((2, 3), fixed(np.zeros((2, 3)))),
        lambda a, b, epsilon: np.maximum(np.abs(a - b) - epsilon, 0.0),
        kwargs={"epsilon": 0.5},
        kinks=(-0.5, 0.0, 0.5),
        linear=True,
    ),
    Spec(
        F.huber_loss,
        ((2, 3), fixed(np.zeros((2, 3)))),
        _huber_ref,
        kwargs={"delta": 0.5},
        kinks=(-0.5, 0.5),
        id="delta0.5",
    ),
    Spec(F.kl_multinomial, (_probs((2, 3)), _probs((2, 3))), _kl_ref),
    Spec(
        F.kl_multinomial,
        (_probs((2, 2, 2)), _probs((2, 2, 2))),
        _kl_ref,
        kwargs={"base_axis": 2},
        id="base_axis2",
    ),
]
