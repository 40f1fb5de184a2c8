"""Specs of hodiff/functions/reduction.py and hodiff/grad_functions/reduction.py.

max/min are piecewise linear (``linear=True``); their rows with ties stop at order 1,
where central differences of a two-way tie give exactly the even split (1/2).
"""

import itertools

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.reduction import linear_scan, tie_weights
from hodiff.testing.spec import Spec, fixed

TIES = fixed([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])  # two-way ties in each row
ZEROS = fixed([[0.0, 1.5, -2.0, 0.5], [0.0, 0.0, 3.0, -1.2], [0.7, -1.1, 0.0, 1.3]])


def _logsumexp(x, axis=None, keepdims=False):
    """numpy's reference (scipy is optional): ``m + log(sum(exp(x - m)))`` with ``m = max``."""
    m = np.max(x, axis=axis, keepdims=True)
    y = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return y if keepdims else np.squeeze(y, axis=axis)


def _cumsum(x, axis=0, exclusive=False, reverse=False):
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    y = np.zeros_like(x)
    for k in range(n):
        js = (
            [j for j in range(n) if (j > k if exclusive else j >= k)]
            if reverse
            else [j for j in range(n) if (j < k if exclusive else j <= k)]
        )
        y[..., k] = sum((x[..., j] for j in js), np.zeros(x.shape[:-1]))
    return np.moveaxis(y, -1, axis)


def _cumprod(x, axis=0, exclusive=False, reverse=False):
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    y = np.ones_like(x)
    for k in range(n):
        for j in range(n):
            if (j > k if exclusive else j >= k) if reverse else (j < k if exclusive else j <= k):
                y[..., k] *= x[..., j]
    return np.moveaxis(y, -1, axis)


def _scan(a, b, axis, reverse=False):
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    h = np.zeros_like(b)
    n = b.shape[-1]
    order = range(n - 1, -1, -1) if reverse else range(n)
    prev = np.zeros(b.shape[:-1])
    for k in order:
        prev = a[..., k] * prev + b[..., k]
        h[..., k] = prev
    return np.moveaxis(h, -1, axis)


def _tie_weights(x, axes, mode="max"):
    w = np.zeros_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    for idx in itertools.product(*(range(x.shape[i]) for i in keep)):
        sel = [slice(None)] * x.ndim
        for i, v in zip(keep, idx, strict=True):
            sel[i] = v
        part = x[tuple(sel)]
        ext = part.max() if mode == "max" else part.min()
        w[tuple(sel)] = (part == ext) / np.sum(part == ext)
    return w


def _norm(x, p=2, axis=None, keepdims=False):
    if p == np.inf:
        return np.abs(x).max(axis=axis, keepdims=keepdims)
    return (np.abs(x) ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def _with_index(reduce, arg):
    """(values, index over the reduced axes flattened in order), NNabla's reference."""

    def ref(x, axis, keepdims=False, with_index=True):
        axes = tuple(range(x.ndim)) if axis is None else tuple(np.atleast_1d(axis) % x.ndim)
        kept = [a for a in range(x.ndim) if a not in axes]
        flat = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [-1])
        y = reduce(x, axis=axis, keepdims=keepdims)
        return y, arg(flat, axis=-1).reshape(np.shape(y))

    return ref


SPECS = [
    Spec(F.sum, ((2, 3),), np.sum, linear=True),
    Spec(
        F.sum,
        ((2, 3, 4),),
        np.sum,
        kwargs={"axis": (0, 2), "keepdims": True},
        linear=True,
        id="axes_keepdims",
    ),
    Spec(F.sum, ((),), np.sum, kwargs={"axis": None}, linear=True, id="0d"),
    Spec(F.mean, ((2, 3),), np.mean, kwargs={"axis": 0}, linear=True),
    Spec(
        F.mean,
        ((2, 3, 4),),
        np.mean,
        kwargs={"axis": (1, 2), "keepdims": True},
        linear=True,
        id="keepdims",
    ),
    Spec(F.max, ((2, 3),), np.max, kwargs={"axis": 1}, linear=True, kink_args=(TIES,)),
    Spec(
        F.max,
        ((2, 3, 4),),
        np.max,
        kwargs={"axis": (0, 2), "keepdims": True},
        linear=True,
        id="axes_keepdims",
    ),
    Spec(F.max, (TIES,), np.max, kwargs={"axis": 1}, order=1, id="ties"),
    Spec(
        F.max,
        ((2, 3, 4),),
        _with_index(np.max, np.argmax),
        kwargs={"axis": (0, 2), "keepdims": True, "with_index": True},
        linear=True,
        id="with_index",
    ),
    Spec(
        F.min,
        ((3, 4),),
        _with_index(np.min, np.argmin),
        kwargs={"axis": 1, "with_index": True},
        linear=True,
        id="with_index",
    ),
    Spec(
        F.max,
        ((2, 3, 4),),
        lambda x, axis, only_index: _with_index(np.max, np.argmax)(x, axis)[1],
        kwargs={"axis": (1, 2), "only_index": True},
        order=0,
        id="only_index",
    ),
    Spec(
        F.min,
        ((2, 3),),
        np.min,
        linear=True,
        kink_args=(fixed([[0.5, -1.0, 2.0], [-1.0, 0.3, 0.4]]),),
    ),
    Spec(F.min, ((2, 3, 4),), np.min, kwargs={"axis": -1}, linear=True, id="last"),
    Spec(
        F.min,
        (fixed([[3.0, -1.0, -1.0], [0.5, 2.0, 0.5]]),),
        np.min,
        kwargs={"axis": 1},
        order=1,
        id="ties",
    ),
    Spec(F.prod, ((2, 3),), np.prod, kwargs={"axis": 1}),
    Spec(
        F.prod, ((2, 3, 2),), np.prod, kwargs={"axis": (0, 2), "keepdims": True}, id="axes_keepdims"
    ),
    Spec(F.prod, (ZEROS,), np.prod, kwargs={"axis": 1}, id="zeros"),
    Spec(F.prod, (ZEROS,), np.prod, id="zeros_all"),
    Spec(F.logsumexp, ((2, 3),), _logsumexp, kwargs={"axis": 1}),
    Spec(
        F.logsumexp,
        ((2, 3, 2),),
        _logsumexp,
        kwargs={"axis": (0, 2), "keepdims": True},
        id="axes_keepdims",
    ),
    Spec(F.cumsum, ((2, 3),), _cumsum, kwargs={"axis": 1}, linear=True),
    Spec(
        F.cumsum,
        ((3, 2),),
        _cumsum,
        kwargs={"axis": 0, "exclusive": True},
        linear=True,
        id="exclusive",
    ),
    Spec(
        F.cumsum,
        ((2, 3),),
        _cumsum,
        kwargs={"axis": -1, "reverse": True},
        linear=True,
        id="reverse",
    ),
    Spec(
        F.cumsum,
        ((2, 3),),
        _cumsum,
        kwargs={"axis": 1, "exclusive": True, "reverse": True},
        linear=True,
        id="exclusive_reverse",
    ),
    Spec(F.cumprod, ((2, 3),), _cumprod, kwargs={"axis": 1}),
    Spec(F.cumprod, (ZEROS,), _cumprod, kwargs={"axis": 1}, id="zeros"),
    Spec(
        F.cumprod, (ZEROS,), _cumprod, kwargs={"axis": 0, "exclusive": True}, id="zeros_exclusive"
    ),
    Spec(F.cumprod, ((2, 4),), _cumprod, kwargs={"axis": 1, "reverse": True}, id="reverse"),
    Spec(
        F.cumprod,
        ((2, 4),),
        _cumprod,
        kwargs={"axis": 1, "exclusive": True, "reverse": True},
        id="exclusive_reverse",
    ),
    Spec(F.norm, ((2, 3),), _norm, kwargs={"axis": 1}),
    Spec(F.norm, ((2, 3),), _norm, kwargs={"p": 1}, kinks=(0.0,), linear=True, id="p1"),
    Spec(
        F.norm,
        ((2, 3),),
        _norm,
        kwargs={"p": 3, "axis": 0, "keepdims": True},
        kinks=(0.0,),
        id="p3",
    ),
    Spec(
        F.norm,
        ((2, 3),),
        _norm,
        kwargs={"p": np.inf, "axis": 1},
        kinks=(0.0,),
        distinct=1e-3,
        linear=True,
        id="inf",
    ),
    Spec(tie_weights, (TIES,), _tie_weights, kwargs={"axes": (1,)}, order=0),
    Spec(
        tie_weights,
        ((2, 3, 2),),
        _tie_weights,
        kwargs={"axes": (0, 2), "mode": "min"},
        order=0,
        id="min",
    ),
    Spec(linear_scan, ((2, 3), (2, 3)), _scan, kwargs={"axis": 1}),
    Spec(linear_scan, ((4, 2), (4, 2)), _scan, kwargs={"axis": 0, "reverse": True}, id="reverse"),
    Spec(linear_scan, (ZEROS, (3, 4)), _scan, kwargs={"axis": -1}, id="zeros"),
]

SPECS += [
    Spec(F.sum, ((2, 3),), np.sum, kwargs={"axis": 1}, linear=True, complex=True),
    Spec(F.mean, ((2, 3),), np.mean, kwargs={"axis": 0}, linear=True, complex=True),
    Spec(F.prod, ((2, 3),), np.prod, kwargs={"axis": 1}, complex=True),
    Spec(F.cumsum, ((2, 3),), np.cumsum, kwargs={"axis": 1}, linear=True, complex=True),
    Spec(F.cumprod, ((2, 3),), np.cumprod, kwargs={"axis": 1}, complex=True),
    Spec(F.norm, ((2, 3),), lambda x: np.sqrt(np.sum(np.abs(x) ** 2)), complex=True),
]
