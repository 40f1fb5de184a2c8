"""Specs of hodiff/functions/logic.py: forward only (bool results, not differentiable).

Inputs hold zeros and repeated values so that every branch of a comparison is taken.
"""

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec, fixed

_A = fixed(np.array([[0.0, 1.0, 2.0], [-1.0, 0.0, 2.0]]))
_B = fixed(np.array([0.0, 2.0, 2.0]))


def _nz(x):
    return np.asarray(x) != 0


SPECS = [
    Spec(F.not_equal, (_A, _B), np.not_equal, order=0),
    Spec(F.logical_and, (_A, _B), lambda a, b: _nz(a) & _nz(b), order=0),
    Spec(F.logical_or, (_A, _B), lambda a, b: _nz(a) | _nz(b), order=0),
    Spec(F.logical_xor, (_A, _B), lambda a, b: _nz(a) ^ _nz(b), order=0),
    Spec(F.logical_not, (_A,), lambda a: ~_nz(a), order=0),
    Spec(F.equal_scalar, (_A,), lambda a, val: a == val, kwargs={"val": 2.0}, order=0),
    Spec(F.not_equal_scalar, (_A,), lambda a, val: a != val, kwargs={"val": 2.0}, order=0),
    Spec(F.greater_scalar, (_A,), lambda a, val: a > val, kwargs={"val": 1.0}, order=0),
    Spec(F.greater_equal_scalar, (_A,), lambda a, val: a >= val, kwargs={"val": 1.0}, order=0),
    Spec(F.less_scalar, (_A,), lambda a, val: a < val, kwargs={"val": 1.0}, order=0),
    Spec(F.less_equal_scalar, (_A,), lambda a, val: a <= val, kwargs={"val": 1.0}, order=0),
    Spec(F.logical_and_scalar, (_A,), lambda a, val: _nz(a) & val, kwargs={"val": True}, order=0),
    Spec(F.logical_or_scalar, (_A,), lambda a, val: _nz(a) | val, kwargs={"val": False}, order=0),
    Spec(F.logical_xor_scalar, (_A,), lambda a, val: _nz(a) ^ val, kwargs={"val": True}, order=0),
]
