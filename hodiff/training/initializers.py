"""Parameter initializers (NNabla's ``nnabla.initializer``): ``import hodiff.initializers as I``.

An initializer is a callable ``init(shape) -> numpy array``; it draws from
hodiff's global generator (see :func:`hodiff.seed`) unless given its own
``rng`` (a ``numpy.random.Generator`` or ``RandomState``).
:func:`hodiff.get_parameter_or_create` casts the result to the context's dtype
and moves it to the context's device.

>>> import hodiff.initializers as I
>>> lo, hi = I.calc_uniform_lim_glorot(3, 5)
>>> round(hi, 4), I.ConstantInitializer(2.0)((2,))
(0.866, array([2., 2.]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import random as _random

__all__ = [
    "BaseInitializer",
    "ConstantInitializer",
    "NormalInitializer",
    "UniformInitializer",
    "calc_normal_std_glorot",
    "calc_normal_std_he_backward",
    "calc_normal_std_he_forward",
    "calc_uniform_lim_glorot",
]


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    out = tuple(int(s) for s in shape)
    if any(s < 0 for s in out):
        raise ValueError(f"{name}: shape must hold non-negative ints, got {shape!r}")
    return out


class BaseInitializer:
    """``init(shape)`` returns a float64 numpy array of that shape."""

    def __call__(self, shape: Sequence[int] | int) -> np.ndarray:
        raise NotImplementedError

    def _rng(self) -> Any:
        rng = getattr(self, "rng", None)
        return _random.generator() if rng is None else rng


class UniformInitializer(BaseInitializer):
    """Samples of ``U[lim[0], lim[1])``; a number ``lim`` means ``(-lim, lim)``.

    >>> import hodiff.initializers as I
    >>> w = I.UniformInitializer((-0.5, 0.5))((100,))
    >>> bool((abs(w) <= 0.5).all())
    True
    """

    def __init__(self, lim: Sequence[float] | float = (-1, 1), rng: Any = None) -> None:
        if isinstance(lim, int | float | np.number):
            lim = (-float(lim), float(lim))
        lo, hi = (float(v) for v in lim)
        if lo > hi:
            raise ValueError(
                f"UniformInitializer: lim must be (low, high) with low <= high, got {lim}"
            )
        self.lim = (lo, hi)
        self.rng = rng

    def __call__(self, shape: Sequence[int] | int) -> np.ndarray:
        shape = _shape("UniformInitializer", shape)
        return np.asarray(
            self._rng().uniform(self.lim[0], self.lim[1], size=shape), dtype=np.float64
        )

    def __repr__(self) -> str:
        return f"UniformInitializer(lim={self.lim})"


class NormalInitializer(BaseInitializer):
    """Samples of ``N(0, sigma^2)``.

    >>> import hodiff.initializers as I
    >>> w = I.NormalInitializer(0.5)((10000,))
    >>> bool(abs(w.std() - 0.5) < 0.02)
    True
    """

    def __init__(self, sigma: float = 1.0, rng: Any = None) -> None:
        if not float(sigma) >= 0:
            raise ValueError(f"NormalInitializer: sigma must be non-negative, got {sigma}")
        self.sigma = float(sigma)
        self.rng = rng

    def __call__(self, shape: Sequence[int] | int) -> np.ndarray:
        shape = _shape("NormalInitializer", shape)
        rng = self._rng()
        z = rng.standard_normal(shape) if hasattr(rng, "standard_normal") else rng.randn(*shape)
        return np.asarray(z, dtype=np.float64) * self.sigma

    def __repr__(self) -> str:
        return f"NormalInitializer(sigma={self.sigma})"


class ConstantInitializer(BaseInitializer):
    """Every element ``value`` (zeros by default)."""

    def __init__(self, value: float = 0) -> None:
        self.value = float(value)

    def __call__(self, shape: Sequence[int] | int) -> np.ndarray:
        return np.full(_shape("ConstantInitializer", shape), self.value)

    def __repr__(self) -> str:
        return f"ConstantInitializer(value={self.value})"


def calc_uniform_lim_glorot(
    inmaps: int, outmaps: int, kernel: Sequence[int] = (1, 1)
) -> tuple[float, float]:
    """Glorot uniform limits ``(-d, d)``, ``d = sqrt(6 / (prod(kernel) (inmaps + outmaps)))``.

    >>> import hodiff.initializers as I
    >>> I.calc_uniform_lim_glorot(1, 2, kernel=(1,))
    (-1.4142135623730951, 1.4142135623730951)
    """
    d = float(np.sqrt(6.0 / (np.prod(kernel) * (inmaps + outmaps))))
    return -d, d


def calc_normal_std_glorot(inmaps: int, outmaps: int, kernel: Sequence[int] = (1, 1)) -> float:
    """Glorot normal standard deviation ``sqrt(2 / (prod(kernel) (inmaps + outmaps)))``."""
    return float(np.sqrt(2.0 / (np.prod(kernel) * (inmaps + outmaps))))


def calc_normal_std_he_forward(inmaps: int, outmaps: int, kernel: Sequence[int] = (1, 1)) -> float:
    """He (Kaiming) standard deviation for the forward pass, ``sqrt(2 / (prod(kernel) inmaps))``."""
    return float(np.sqrt(2.0 / (np.prod(kernel) * inmaps)))


def calc_normal_std_he_backward(inmaps: int, outmaps: int, kernel: Sequence[int] = (1, 1)) -> float:
    """He standard deviation for the backward pass, ``sqrt(2 / (prod(kernel) outmaps))``."""
    return float(np.sqrt(2.0 / (np.prod(kernel) * outmaps)))
