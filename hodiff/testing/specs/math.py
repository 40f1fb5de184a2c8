"""Specs of hodiff/functions/math.py and hodiff/grad_functions/math.py."""

import math

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.math import sigmoid_backward, softplus_backward, tanh_backward
from hodiff.testing.spec import Spec, positive

_erf = np.vectorize(math.erf)

SPECS = [
    Spec(F.exp, ((2, 3),), np.exp),
    Spec(F.exp, ((),), np.exp, id="0d"),
    Spec(F.log, (positive((2, 3)),), np.log),
    Spec(F.log1p, ((2, 3),), np.log1p, domain=(-0.5, 2.0)),
    Spec(F.expm1, ((2, 3),), np.expm1),
    Spec(F.sqrt, (positive((2, 3)),), np.sqrt),
    Spec(F.sin, ((2, 3),), np.sin, domain=(-3.0, 3.0)),
    Spec(F.cos, ((2, 3),), np.cos, domain=(-3.0, 3.0)),
    Spec(F.tan, ((2, 3),), np.tan, domain=(-1.2, 1.2)),
    Spec(F.sinh, ((2, 3),), np.sinh),
    Spec(F.cosh, ((2, 3),), np.cosh),
    Spec(F.tanh, ((2, 3),), np.tanh),
    Spec(F.tanh, ((),), np.tanh, id="0d"),
    Spec(F.asin, ((2, 3),), np.arcsin, domain=(-0.8, 0.8)),
    Spec(F.acos, ((2, 3),), np.arccos, domain=(-0.8, 0.8)),
    Spec(F.atan, ((2, 3),), np.arctan),
    Spec(F.asinh, ((2, 3),), np.arcsinh),
    Spec(F.acosh, (positive((2, 3), 1.2, 3.0),), np.arccosh),
    Spec(F.atanh, ((2, 3),), np.arctanh, domain=(-0.8, 0.8)),
    # all four quadrants, away from the origin and from the branch cut (x0 = 0, x1 < 0)
    Spec(F.atan2, ((2, 3), (2, 3)), np.arctan2, kinks=(0.0,), gap=0.3),
    Spec(F.atan2, ((2, 3), (3,)), np.arctan2, kinks=(0.0,), gap=0.3, id="broadcast"),
    Spec(F.atan2, ((), (2, 1)), np.arctan2, kinks=(0.0,), gap=0.3, id="0d"),
    Spec(F.erf, ((2, 3),), _erf),
    Spec(tanh_backward, ((2, 3), (2, 3)), lambda gy, y: gy * (1 - y**2)),
    Spec(tanh_backward, ((3,), (2, 3)), lambda gy, y: gy * (1 - y**2), id="broadcast"),
    Spec(sigmoid_backward, ((2, 3), (2, 3)), lambda gy, y: gy * y * (1 - y)),
    Spec(sigmoid_backward, ((), ()), lambda gy, y: gy * y * (1 - y), id="0d"),
    Spec(softplus_backward, ((2, 3), (2, 3)), lambda gy, x: gy / (1 + np.exp(-x))),
    Spec(
        softplus_backward,
        ((2, 3), (2, 3)),
        lambda gy, x, beta: gy / (1 + np.exp(-beta * x)),
        kwargs={"beta": -1.5},
        id="beta",
    ),
    Spec(softplus_backward, ((3,), (2, 3)), lambda gy, x: gy / (1 + np.exp(-x)), id="broadcast"),
    Spec(softplus_backward, ((), ()), lambda gy, x: gy / (1 + np.exp(-x)), id="0d"),
]

# complex values: the parts, the conjugate, the argument, the composition of a complex number
_positive_args = positive((2, 3))


def _real(shape: tuple[int, ...]) -> object:
    """Real inputs of a complex row (the parts of ``F.complex``)."""
    return lambda rng: rng.uniform(-2.0, 2.0, size=shape)


SPECS += [
    Spec(F.real, ((2, 3),), np.real, linear=True),
    Spec(F.imag, ((2, 3),), lambda x: np.zeros_like(x), linear=True),
    Spec(F.conj, ((2, 3),), np.conj, linear=True),
    Spec(F.angle, (_positive_args,), np.angle),
    Spec(
        F.complex,
        (_real((2, 3)), _real((3,))),
        lambda a, b: a + 1j * b,
        linear=True,
        id="parts",
        complex=True,
    ),
    Spec(F.complex, (_real((2, 3)),), lambda a: a + 0j, linear=True, id="cast", complex=True),
    Spec(F.real, ((2, 3),), np.real, linear=True, complex=True),
    Spec(F.imag, ((2, 3),), np.imag, linear=True, complex=True),
    Spec(F.conj, ((2, 3),), np.conj, linear=True, complex=True),
    Spec(F.angle, ((2, 3),), np.angle, domain=(0.3, 2.0), complex=True),
    Spec(F.angle, ((3,),), np.angle, domain=(-2.0, -0.3), id="left", complex=True),
    Spec(F.exp, ((2, 3),), np.exp, complex=True),
    Spec(F.log, ((2, 3),), np.log, domain=(0.3, 2.0), complex=True),
    Spec(F.log1p, ((2, 3),), np.log1p, domain=(0.0, 1.0), complex=True),
    Spec(F.expm1, ((2, 3),), np.expm1, complex=True),
    Spec(F.sqrt, ((2, 3),), np.sqrt, domain=(0.3, 2.0), complex=True),
    Spec(F.sin, ((2, 3),), np.sin, complex=True),
    Spec(F.cos, ((2, 3),), np.cos, complex=True),
    Spec(F.tan, ((2, 3),), np.tan, domain=(-0.7, 0.7), complex=True),
    Spec(F.sinh, ((2, 3),), np.sinh, complex=True),
    Spec(F.cosh, ((2, 3),), np.cosh, complex=True),
    Spec(F.tanh, ((2, 3),), np.tanh, domain=(-0.7, 0.7), complex=True),
]


# real rows through complex intermediates: the complex primitives' rules at every order on
# the real harness (float32 in, float32 out: complex64 between)
def abs_of_parts(a: object, b: object) -> object:
    """``|a + ib|``."""
    return F.abs(F.complex(a, b))


def angle_of_parts(a: object, b: object) -> object:
    """``atan2(b, a)`` through ``F.angle``."""
    return F.angle(F.complex(a, b))


def cube_of_cast(a: object, b: object) -> object:
    """``Re((a + 0i)^2 (b + 0i))``: the cast of real values, and a real part."""
    za, zb = F.complex(a), F.complex(b)
    return F.real(za * za * zb)


def imag_of_conj(a: object, b: object) -> object:
    """``Im(conj(z)^2 z) = -|z|^2 b`` of ``z = a + ib``."""
    z = F.complex(a, b)
    w = F.conj(z)
    return F.imag(w * w * z)


SPECS += [
    Spec(abs_of_parts, ((2, 3), (3,)), lambda a, b: np.hypot(a, b), domain=(0.3, 2.0)),
    Spec(angle_of_parts, ((2, 3), (2, 3)), lambda a, b: np.arctan2(b, a), domain=(0.3, 2.0)),
    Spec(cube_of_cast, ((2, 3), (2, 3)), lambda a, b: a * a * b),
    Spec(imag_of_conj, ((2, 3), (2, 3)), lambda a, b: -(a * a + b * b) * b),
]
