"""Specs of hodiff/functions/rounding.py.

floor/ceil/round cut the graph (order 0). The remainders jump where ``x0 / x1``
is an integer: ``x1`` is fixed at +-1.5 and ``x0`` sampled away from the
multiples of 1.5.
"""

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec, fixed

_INTS = (-2.0, -1.0, 0.0, 1.0, 2.0)
_HALVES = (-1.5, -0.5, 0.5, 1.5)
_JUMPS = (-3.0, -1.5, 0.0, 1.5, 3.0)
_X1 = fixed(np.array([[1.5, -1.5, 1.5], [-1.5, 1.5, -1.5]]))

SPECS = [
    Spec(F.floor, ((2, 3),), np.floor, kinks=_INTS, order=0),
    Spec(F.ceil, ((2, 3),), np.ceil, kinks=_INTS, order=0),
    Spec(F.round, ((2, 3),), np.round, kinks=_HALVES, order=0),
    Spec(
        F.round,
        ((2, 3),),
        lambda x, decimals: np.round(x, decimals),
        kwargs={"decimals": 1},
        order=0,
        kinks=tuple(np.arange(-1.95, 2.0, 0.1)),
        gap=0.01,
        id="decimals",
    ),
    Spec(F.mod, ((2, 3), _X1), np.mod, domain=(-2.9, 2.9), kinks=_JUMPS, gap=0.15),
    Spec(
        F.mod,
        ((2, 3), fixed(np.array(1.5))),
        np.mod,
        domain=(-2.9, 2.9),
        kinks=_JUMPS,
        gap=0.15,
        id="broadcast",
    ),
    Spec(F.remainder, ((2, 3), _X1), np.remainder, domain=(-2.9, 2.9), kinks=_JUMPS, gap=0.15),
    Spec(F.fmod, ((2, 3), _X1), np.fmod, domain=(-2.9, 2.9), kinks=_JUMPS, gap=0.15),
    Spec(F.nan_to_num, ((2, 3),), np.nan_to_num),
]
