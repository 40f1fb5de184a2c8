"""The random sources of hodiff, and :func:`seed` that makes them reproducible.

One process-wide numpy ``Generator`` (the *global generator*) feeds every
random draw that has no seed of its own: initializers (``hodiff.initializers``),
the random functions ``F.rand``/``F.randn``/``F.randint`` and ``F.dropout``
called with ``seed=-1``. ``hd.seed(n)`` replaces it with ``default_rng(n)``,
so a program that calls ``hd.seed(n)`` first and then builds and runs the same
graphs draws the same numbers.

A random *node* (one call of a random function or of dropout) owns a
generator made when the node is created: ``default_rng(seed)`` for
``seed >= 0`` (NNabla's rule: the node replays the same sequence), otherwise
seeded by one draw from the global generator. Each forward of the node takes
the next numbers from its own generator, so in a static graph every
``.forward()`` draws anew, while a derivative (which reads the stored draw and
never re-runs the node) sees the draw of its forward. Numbers are drawn on the
host with numpy and moved to the device, so numpy and cupy give the same ones.

The global generator is shared by all threads (``seed`` from one thread
affects the others); numpy's generator serialises concurrent draws.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["generator", "node_generator", "seed"]

_lock = threading.Lock()
_global = np.random.default_rng()


def seed(n: int) -> None:
    """Seeds every random source of hodiff (initializers, random functions, dropout).

    After ``hd.seed(n)`` the same program draws the same numbers: parameters
    created by ``hodiff.parametric``, values of ``F.rand``/``F.randn``/``F.randint``
    and dropout masks (those created with ``seed=-1``; a node with its own
    ``seed >= 0`` always replays its own sequence).

    Args:
        n: a non-negative integer.

    >>> import hodiff as hd, hodiff.functions as F
    >>> hd.seed(0); a = F.rand(shape=(3,)).d
    >>> hd.seed(0); b = F.rand(shape=(3,)).d
    >>> bool((a == b).all())
    True
    """
    global _global
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"seed: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"seed: n must be non-negative, got {n}")
    with _lock:
        _global = np.random.default_rng(int(n))


def generator() -> np.random.Generator:
    """The global generator (replaced by :func:`seed`); draw from it, never keep it."""
    return _global


def node_generator(seed: int) -> np.random.Generator:
    """A random node's own generator: ``default_rng(seed)``, or seeded from the global one."""
    if seed >= 0:
        return np.random.default_rng(seed)
    with _lock:
        s = int(_global.integers(0, 2**63))
    return np.random.default_rng(s)
