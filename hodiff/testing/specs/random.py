"""Specs of hodiff/functions/random.py.

The rows use fixed seeds; the references replay the documented streams of
``numpy.random.default_rng(seed)`` and cast to the context's dtype (float32 by
default; int32 for randint). Statistics, static redraws and ``hd.seed`` are
tested in tests/test_random.py.
"""

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec


def _rand(low, high, shape, seed):
    u = np.random.default_rng(seed).random(shape)
    return (low + (high - low) * u).astype(np.float32)


def _randn(mu, sigma, shape, seed):
    z = np.random.default_rng(seed).standard_normal(shape)
    return (mu + sigma * z).astype(np.float32)


def _randint(low, high, shape, seed):
    return np.random.default_rng(seed).integers(low, high, shape, dtype=np.int32)


def _rand_beta(alpha, beta, shape, seed):
    return np.random.default_rng(seed).beta(alpha, beta, shape).astype(np.float32)


def _rand_binomial(n, p, shape, seed):
    return np.random.default_rng(seed).binomial(n, p, shape).astype(np.float32)


def _rand_gamma(k, theta, shape, seed):
    return np.random.default_rng(seed).gamma(k, theta, shape).astype(np.float32)


SPECS = [
    Spec(F.rand, (), _rand, kwargs={"low": -2.0, "high": 3.0, "shape": (3, 4), "seed": 3}, order=0),
    Spec(
        F.rand,
        (),
        _rand,
        kwargs={"low": 0.0, "high": 1.0, "shape": (), "seed": 0},
        order=0,
        id="0d",
    ),
    Spec(F.randn, (), _randn, kwargs={"mu": 1.0, "sigma": 2.0, "shape": (5,), "seed": 7}, order=0),
    Spec(
        F.randint, (), _randint, kwargs={"low": -3, "high": 4, "shape": (2, 5), "seed": 1}, order=0
    ),
    Spec(
        F.rand_beta,
        (),
        _rand_beta,
        kwargs={"alpha": 2.0, "beta": 0.5, "shape": (3, 4), "seed": 4},
        order=0,
    ),
    Spec(
        F.rand_binomial,
        (),
        _rand_binomial,
        kwargs={"n": 5, "p": 0.3, "shape": (2, 6), "seed": 5},
        order=0,
    ),
    Spec(
        F.rand_gamma,
        (),
        _rand_gamma,
        kwargs={"k": 0.5, "theta": 2.0, "shape": (7,), "seed": 6},
        order=0,
    ),
]
