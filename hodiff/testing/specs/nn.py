"""Specs of hodiff/functions/nn.py and hodiff/grad_functions/nn.py.

Dropout rows use a fixed seed, so every call (the finite differences call the
function many times) draws the same mask; the reference redraws it from the
documented stream ``default_rng(seed).random(x.shape) >= p``. Embedding
references are explicit loops.
"""

from itertools import product

import numpy as np

import hodiff.functions as F
from hodiff.functions.nn import dropout_mask
from hodiff.grad_functions.nn import embed_weight_grad
from hodiff.testing.spec import Spec, labels


def _mask(shape: tuple[int, ...], p: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(shape) >= p) / (1.0 - p)


def _embed_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape + w.shape[1:])
    for idx in product(*(range(s) for s in x.shape)):
        out[idx] = w[x[idx]]
    return out


def _embed_grad_ref(gy: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, *gy.shape[x.ndim :]))
    for idx in product(*(range(s) for s in x.shape)):
        out[x[idx]] += gy[idx]
    return out


SPECS = [
    Spec(
        F.dropout,
        ((2, 3),),
        lambda x, p, seed: x * _mask(x.shape, p, seed),
        kwargs={"p": 0.5, "seed": 3},
        linear=True,
    ),
    Spec(
        F.dropout,
        ((4, 5),),
        lambda x, p, seed: x * _mask(x.shape, p, seed),
        kwargs={"p": 0.25, "seed": 11},
        linear=True,
        id="p0.25",
    ),
    Spec(
        dropout_mask,
        ((2, 3),),
        lambda x, p, seed: _mask(x.shape, p, seed),
        kwargs={"p": 0.5, "seed": 3},
        order=0,
    ),
    Spec(F.embed, (labels((2, 3), 4), (4, 2)), _embed_ref, linear=True),
    Spec(F.embed, (labels((3,), 2), (2, 2, 2)), _embed_ref, linear=True, id="3d_weight"),
    Spec(
        embed_weight_grad,
        ((2, 3, 2), labels((2, 3), 4)),
        _embed_grad_ref,
        kwargs={"n": 4},
        linear=True,
    ),
]
