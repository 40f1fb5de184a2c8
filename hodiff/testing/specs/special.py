"""Specs of hodiff/functions/special.py and the mish/tanh_shrink compositions."""

import math

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec, fixed, positive

try:
    import scipy.special as _sp
except ImportError:  # pragma: no cover - scipy is optional: the forward is checked elsewhere
    _sp = None


def _scipy(name: str):
    return None if _sp is None else getattr(_sp, name)


def polygamma(x, n):
    """``F.polygamma(n, x)`` with the input first (the spec table's calling convention)."""
    return F.polygamma(n, x)


def _polygamma_ref(x: np.ndarray, n: int) -> np.ndarray:
    return None if _sp is None else _sp.polygamma(n, x)


_erfc = np.vectorize(math.erfc)
_lgamma = np.vectorize(math.lgamma)

SPECS = [
    Spec(F.square, ((2, 3),), np.square),
    Spec(F.reciprocal, (positive((2, 3)),), np.reciprocal),
    Spec(F.logaddexp, ((2, 3), (2, 3)), np.logaddexp),
    Spec(F.logaddexp, ((2, 3), (3,)), np.logaddexp, id="broadcast"),
    Spec(
        F.logaddexp,
        (fixed(np.array([0.5, 800.0])), fixed(np.array([0.5, 800.0]))),
        np.logaddexp,
        id="ties_large",
    ),
    Spec(F.log2, (positive((2, 3)),), np.log2),
    Spec(F.log10, (positive((2, 3)),), np.log10),
    Spec(F.erfc, ((2, 3),), _erfc),
    Spec(F.erfinv, ((2, 3),), _scipy("erfinv"), domain=(-0.8, 0.8)),
    Spec(F.logit, (positive((2, 3), 0.1, 0.9),), lambda x: np.log(x / (1 - x))),
    Spec(F.gammaln, (positive((2, 3), 0.5, 4.0),), _lgamma),
    Spec(F.digamma, (positive((2, 3), 0.5, 4.0),), _scipy("digamma")),
    Spec(polygamma, (positive((2, 3), 0.5, 4.0),), _polygamma_ref, kwargs={"n": 0}, id="0"),
    Spec(polygamma, (positive((2, 3), 0.5, 4.0),), _polygamma_ref, kwargs={"n": 2}, id="2"),
    # NNabla's sinc, sin(x) / x: numpy's normalized one at x / pi
    Spec(F.sinc, ((2, 3),), lambda x: np.sinc(x / np.pi), domain=(-6.0, 6.0)),
    Spec(
        F.sinc,
        (fixed(np.array([0.0, 1e-4, -2e-4, 5e-4])),),
        lambda x: np.sinc(x / np.pi),
        id="at_zero",
    ),
    Spec(F.mish, ((2, 3),), lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    Spec(F.tanh_shrink, ((2, 3),), lambda x: x - np.tanh(x)),
]
