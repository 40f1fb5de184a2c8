"""Random numbers as graph nodes: ``rand``, ``randn``, ``randint``, ``rand_beta``,
``rand_binomial``, ``rand_gamma`` (NNabla's signatures).

Each call makes a node with no inputs and no gradient. The node owns a numpy
generator (``default_rng(seed)`` for ``seed >= 0``, otherwise seeded from
hodiff's global generator, see :func:`hodiff.seed`); every forward of the node
draws the next numbers from it. So in a static graph each ``.forward()`` draws
anew (a WGAN-GP interpolation weight is fresh on every step), while every
derivative of one forward reads the stored draw: the nodes are never re-run by
a reverse pass. The streams are documented so that they can be replayed:
``low + (high - low) * rng.random(shape)``, ``mu + sigma * rng.standard_normal(shape)``,
``rng.integers(low, high, shape)``, ``rng.beta(alpha, beta, shape)``,
``rng.binomial(n, p, shape)`` and ``rng.gamma(k, theta, shape)`` with
``rng = numpy.random.default_rng(seed)``, cast to the context's float dtype (``int32`` for
``randint``; binomial counts are floats, as NNabla's). Numbers are drawn on
the host, so numpy and cupy give the same ones. Inside ``hd.vmap`` a node draws one
``shape`` per example (``rng.random((B, *shape))`` for a batch of ``B``; docs/vmap.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import get_default_context
from hodiff.engine.function import Function
from hodiff.engine.random import node_generator
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions.arithmetic import check_scalar

__all__ = ["rand", "rand_beta", "rand_binomial", "rand_gamma", "randint", "randn"]

Spec = list[tuple[tuple[int, ...], Any]]


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(shape)
    except TypeError:
        raise TypeError(
            f"{name}: shape must be a tuple of ints, got {type(shape).__name__}"
        ) from None
    for s in out:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0:
            raise ValueError(f"{name}: shape must hold non-negative ints, got {shape!r}")
    return tuple(int(s) for s in out)


def _seed(name: str, seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"{name}: seed must be an int, got {type(seed).__name__}")
    return int(seed)


class _Random(Function, register=False):
    """A node with no inputs whose every forward draws the next numbers of its generator."""

    differentiable = False
    need_inputs = False
    #: its forward does more than compute its outputs (draws): a compiler runs it once per call
    effects = True

    def __init__(self, *, shape: tuple[int, ...], seed: int) -> None:
        ctx = get_default_context()
        self.shape = shape
        self.seed = seed
        self.backend = ctx.backend
        self.dtype = ctx.dtype
        self.rng = node_generator(seed)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        return [(self.shape, self.dtype)]

    def draw(self) -> np.ndarray:
        raise NotImplementedError

    def batch_rule(self, inputs: Sequence[Variable], axes: Sequence[int | None]) -> Variable:
        """Never reached: a random function has no inputs, so no input of it is batched
        (``hd.vmap`` calls :meth:`batch_rule_no_inputs`).
        """
        raise AssertionError(f"{self.name}: a function without inputs is never batched")

    def batch_rule_no_inputs(self, sizes: tuple[int, ...]) -> Variable:
        """Inside ``hd.vmap`` (batch sizes ``sizes``, outermost first): one draw per example.

        The node draws ``sizes + shape`` numbers at once from its generator, as a loop
        over the examples draws once per example (and as ``F.dropout`` draws a mask per
        example): every forward of a static graph draws the whole batch anew.
        """
        return _batching.renew(self, shape=(*sizes, *self.shape))()

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        y = self.draw()
        if self.backend == "numpy":
            outputs[0] = y
        else:  # drawn on the host: numpy and cupy give the same numbers for one seed
            outputs[0] = get_default_context().xp.asarray(y)


class Rand(_Random, follows_shape=False):
    def __init__(self, *, low: float, high: float, shape: tuple[int, ...], seed: int) -> None:
        super().__init__(shape=shape, seed=seed)
        self.low, self.high = low, high

    def draw(self) -> np.ndarray:
        u = self.rng.random(self.shape)
        return (self.low + (self.high - self.low) * u).astype(self.dtype, copy=False)


class Randn(_Random, follows_shape=False):
    def __init__(self, *, mu: float, sigma: float, shape: tuple[int, ...], seed: int) -> None:
        super().__init__(shape=shape, seed=seed)
        self.mu, self.sigma = mu, sigma

    def draw(self) -> np.ndarray:
        z = self.rng.standard_normal(self.shape)
        return (self.mu + self.sigma * z).astype(self.dtype, copy=False)


class RandBeta(_Random, follows_shape=True):
    def __init__(self, *, alpha: float, beta: float, shape: tuple[int, ...], seed: int) -> None:
        super().__init__(shape=shape, seed=seed)
        self.alpha, self.beta = alpha, beta

    def draw(self) -> np.ndarray:
        return self.rng.beta(self.alpha, self.beta, self.shape).astype(self.dtype, copy=False)


class RandBinomial(_Random, follows_shape=True):
    def __init__(self, *, n: int, p: float, shape: tuple[int, ...], seed: int) -> None:
        super().__init__(shape=shape, seed=seed)
        self.n, self.p = n, p

    def draw(self) -> np.ndarray:
        return self.rng.binomial(self.n, self.p, self.shape).astype(self.dtype, copy=False)


class RandGamma(_Random, follows_shape=True):
    def __init__(self, *, k: float, theta: float, shape: tuple[int, ...], seed: int) -> None:
        super().__init__(shape=shape, seed=seed)
        self.k, self.theta = k, theta

    def draw(self) -> np.ndarray:
        return self.rng.gamma(self.k, self.theta, self.shape).astype(self.dtype, copy=False)


class Randint(_Random, follows_shape=False):
    def __init__(self, *, low: int, high: int, shape: tuple[int, ...], seed: int) -> None:
        super().__init__(shape=shape, seed=seed)
        self.low, self.high = low, high
        self.dtype = np.dtype(np.int32)

    def draw(self) -> np.ndarray:
        return self.rng.integers(self.low, self.high, self.shape, dtype=np.int32)


@traced
def rand(low: float = 0, high: float = 1, shape: Any = (), seed: int = -1) -> Variable:
    """Uniform samples: ``y = low + (high - low) * u`` with ``u ~ U[0, 1)``, of shape ``shape``.

    No inputs and no gradient. In a static graph every ``.forward()`` draws anew;
    every derivative of one forward sees that forward's draw. Inside ``hd.vmap`` each
    example gets its own draw.

    Args:
        low: lower bound (included).
        high: upper bound (excluded), ``high >= low``.
        shape: output shape.
        seed: ``>= 0``: the node's own stream ``default_rng(seed)``; -1: seeded from
            hodiff's global generator (reproducible after ``hd.seed(n)``).

    Returns:
        A Variable of shape ``shape`` in the context's float dtype.

    >>> import hodiff.functions as F
    >>> y = F.rand(-1.0, 1.0, shape=(2, 3), seed=0)
    >>> y.shape, bool(((y.d >= -1) & (y.d < 1)).all())
    ((2, 3), True)
    """
    lo = check_scalar("rand", "low", low)
    hi = check_scalar("rand", "high", high)
    if not lo <= hi:
        raise ValueError(f"rand: low must not exceed high, got low={low}, high={high}")
    return Rand(low=lo, high=hi, shape=_shape("rand", shape), seed=_seed("rand", seed))()


@traced
def randn(mu: float = 0, sigma: float = 1, shape: Any = (), seed: int = -1) -> Variable:
    """Gaussian samples: ``y = mu + sigma * z`` with ``z ~ N(0, 1)``, of shape ``shape``.

    No inputs and no gradient; redrawn by every forward of a static graph, drawn per
    example inside ``hd.vmap``.

    Args:
        mu: mean.
        sigma: standard deviation, ``>= 0``.
        shape: output shape.
        seed: ``>= 0`` for the node's own stream, -1 for hodiff's global generator.

    Returns:
        A Variable of shape ``shape`` in the context's float dtype.

    >>> import hodiff.functions as F
    >>> F.randn(1.0, 0.0, shape=(2,)).d
    array([1., 1.], dtype=float32)
    """
    m = check_scalar("randn", "mu", mu)
    s = check_scalar("randn", "sigma", sigma)
    if not s >= 0:
        raise ValueError(f"randn: sigma must be non-negative, got {sigma}")
    return Randn(mu=m, sigma=s, shape=_shape("randn", shape), seed=_seed("randn", seed))()


@traced
def randint(low: int = 0, high: int = 1, shape: Any = (), seed: int = -1) -> Variable:
    """Uniform integers ``y = rng.integers(low, high)`` in ``[low, high)`` (int32).

    No inputs and no gradient; redrawn by every forward of a static graph, drawn per
    example inside ``hd.vmap``.

    Args:
        low: smallest value (included).
        high: bound (excluded), ``high > low``.
        shape: output shape.
        seed: ``>= 0`` for the node's own stream, -1 for hodiff's global generator.

    >>> import hodiff.functions as F
    >>> y = F.randint(0, 3, shape=(100,), seed=0)
    >>> y.dtype, sorted(set(y.d.tolist()))
    (dtype('int32'), [0, 1, 2])
    """
    for arg, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"randint: {arg} must be an int, got {type(v).__name__}")
    if not low < high:
        raise ValueError(f"randint: low must be below high, got low={low}, high={high}")
    if low < -(2**31) or high > 2**31:
        raise ValueError(f"randint: [low, high) = [{low}, {high}) does not fit int32")
    return Randint(
        low=int(low), high=int(high), shape=_shape("randint", shape), seed=_seed("randint", seed)
    )()


def _positive(name: str, arg: str, value: Any) -> float:
    v = check_scalar(name, arg, value)
    if not v > 0:
        raise ValueError(f"{name}: {arg} must be > 0, got {value}")
    return v


@traced
def rand_beta(alpha: float = 0.5, beta: float = 0.5, shape: Any = (), seed: int = -1) -> Variable:
    """Beta samples: ``y ~ Beta(alpha, beta)``, density ``x^(a-1) (1-x)^(b-1) / B(a, b)`` on
    ``(0, 1)``, of shape ``shape`` (mean ``a / (a + b)``; mixup's mixing weight).

    No inputs and no gradient; redrawn by every forward of a static graph.

    Args:
        alpha: ``a > 0``.
        beta: ``b > 0``.
        shape: output shape.
        seed: ``>= 0`` for the node's own stream, -1 for hodiff's global generator.

    >>> import hodiff.functions as F
    >>> y = F.rand_beta(2.0, 5.0, shape=(20000,), seed=0).d
    >>> round(float(y.mean()), 2), bool(((y > 0) & (y < 1)).all())
    (0.29, True)
    """
    a = _positive("rand_beta", "alpha", alpha)
    b = _positive("rand_beta", "beta", beta)
    return RandBeta(
        alpha=a, beta=b, shape=_shape("rand_beta", shape), seed=_seed("rand_beta", seed)
    )()


@traced
def rand_binomial(n: int = 1, p: float = 0.5, shape: Any = (), seed: int = -1) -> Variable:
    """Binomial samples: the number of successes in ``n`` trials of probability ``p``,
    ``P(y = k) = C(n, k) p^k (1 - p)^(n - k)``, of shape ``shape``, as floats (NNabla's).

    No inputs and no gradient; redrawn by every forward of a static graph.

    Args:
        n: the number of trials, an int ``>= 0``.
        p: the success probability, in ``[0, 1]``.
        shape: output shape.
        seed: ``>= 0`` for the node's own stream, -1 for hodiff's global generator.

    >>> import hodiff.functions as F
    >>> y = F.rand_binomial(5, 0.5, shape=(20000,), seed=0).d
    >>> round(float(y.mean()), 1), float(y.min()) >= 0, float(y.max()) <= 5
    (2.5, True, True)
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"rand_binomial: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"rand_binomial: n must be >= 0, got {n}")
    q = check_scalar("rand_binomial", "p", p)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"rand_binomial: p must be in [0, 1], got {p}")
    return RandBinomial(
        n=int(n), p=q, shape=_shape("rand_binomial", shape), seed=_seed("rand_binomial", seed)
    )()


@traced
def rand_gamma(k: float = 0.5, theta: float = 1, shape: Any = (), seed: int = -1) -> Variable:
    """Gamma samples: ``y ~ Gamma(k, theta)``, density ``x^(k-1) e^(-x/theta) /
    (Gamma(k) theta^k)`` on ``x > 0``, of shape ``shape`` (mean ``k theta``, variance
    ``k theta^2``).

    No inputs and no gradient; redrawn by every forward of a static graph.

    Args:
        k: the shape, ``> 0``.
        theta: the scale, ``> 0``.
        shape: output shape.
        seed: ``>= 0`` for the node's own stream, -1 for hodiff's global generator.

    >>> import hodiff.functions as F
    >>> y = F.rand_gamma(3.0, 2.0, shape=(20000,), seed=0).d
    >>> round(float(y.mean())), bool((y > 0).all())
    (6, True)
    """
    kk = _positive("rand_gamma", "k", k)
    th = _positive("rand_gamma", "theta", theta)
    return RandGamma(
        k=kk, theta=th, shape=_shape("rand_gamma", shape), seed=_seed("rand_gamma", seed)
    )()
