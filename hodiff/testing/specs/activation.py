"""Specs of hodiff/functions/activation.py.

References are written independently with numpy (``np.where`` on the defining
cases); piecewise functions sample away from their kinks, and the piecewise
linear ones are ``linear=True`` (orders >= 2 are checked through ``y**3``).
"""

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec, positive


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(x) - 1.0))


def _selu(x, scale=1.05070098735548, alpha=1.673263242354377):
    return scale * _elu(x, alpha)


def _celu(x, alpha=1.0, axis=1):
    return np.concatenate([_elu(x, alpha), _elu(-x, alpha)], axis=axis)


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _softplus(x, beta=1.0):
    return np.log(1.0 + np.exp(beta * x)) / beta


def _prelu(x, w, base_axis=1):
    w = np.reshape(w, (-1,) + (1,) * (x.ndim - base_axis - 1)) if np.ndim(w) else w
    return np.where(x > 0, x, w * x)


SPECS = [
    Spec(F.sigmoid, ((2, 3),), _sigmoid, domain=(-4.0, 4.0)),
    Spec(F.relu, ((2, 3),), lambda x: np.where(x > 0, x, 0.0), kinks=(0.0,), linear=True),
    Spec(
        F.leaky_relu,
        ((2, 3),),
        lambda x, alpha: np.where(x > 0, x, alpha * x),
        kwargs={"alpha": 0.2},
        kinks=(0.0,),
        linear=True,
    ),
    Spec(F.elu, ((2, 3),), _elu, kwargs={"alpha": 1.5}, kinks=(0.0,)),
    Spec(F.selu, ((2, 3),), _selu, kinks=(0.0,)),
    Spec(F.celu, ((2, 3),), _celu, kwargs={"alpha": 0.5}, kinks=(0.0,)),
    Spec(
        F.crelu,
        ((2, 3),),
        lambda x: np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=1),
        kinks=(0.0,),
        linear=True,
    ),
    Spec(
        F.crelu,
        ((2, 3, 2),),
        lambda x, axis: np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=axis),
        kwargs={"axis": -1},
        kinks=(0.0,),
        linear=True,
        id="axis-1",
    ),
    Spec(F.celu, ((2, 3, 2),), _celu, kwargs={"axis": -1}, kinks=(0.0,), id="axis-1"),
    Spec(F.gelu, ((2, 3),), _gelu, domain=(-3.0, 3.0)),
    Spec(F.softplus, ((2, 3),), _softplus, domain=(-4.0, 4.0)),
    Spec(F.softplus, ((2, 3),), _softplus, kwargs={"beta": 2.5}, id="beta"),
    # softsign'' = -2 sign(x) / (1 + |x|)^3 jumps at 0
    Spec(F.softsign, ((2, 3),), lambda x: x / (1.0 + np.abs(x)), kinks=(0.0,)),
    Spec(F.swish, ((2, 3),), lambda x: x / (1.0 + np.exp(-x)), domain=(-4.0, 4.0)),
    Spec(
        F.relu6,
        ((2, 3),),
        lambda x: np.minimum(np.maximum(x, 0.0), 6.0),
        domain=(-2.0, 8.0),
        kinks=(0.0, 6.0),
        linear=True,
    ),
    Spec(
        F.hard_sigmoid,
        ((2, 3),),
        lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0),
        domain=(-4.0, 4.0),
        kinks=(-2.5, 2.5),
        linear=True,
    ),
    Spec(F.hard_tanh, ((2, 3),), lambda x: np.clip(x, -1.0, 1.0), kinks=(-1.0, 1.0), linear=True),
    Spec(F.log_sigmoid, ((2, 3),), lambda x: np.log(_sigmoid(x)), domain=(-4.0, 4.0)),
    Spec(F.prelu, ((2, 3), (3,)), _prelu, kinks=(0.0,)),
    Spec(F.prelu, ((2, 3, 2), ()), _prelu, kinks=(0.0,), id="shared"),
    Spec(F.prelu, ((2, 3), (1,)), _prelu, kinks=(0.0,), id="shared1"),
    Spec(F.prelu, ((2, 2, 3), (2,)), _prelu, kwargs={"base_axis": 1}, kinks=(0.0,), id="channel"),
    Spec(
        F.prelu,
        ((2, 2, 3), positive((3,))),
        _prelu,
        kwargs={"base_axis": 2},
        kinks=(0.0,),
        id="base_axis",
    ),
]
