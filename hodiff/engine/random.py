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
affects the others). It needs no lock of its own: a draw reads it once (``seed`` replaces
it whole, in one step) and numpy's generator serialises concurrent draws.

``hd.checkpoint`` recomputes a segment with the same numbers: while it runs the
segment the first time it *records* the seed every new random node takes from
the global generator (a :class:`Tape`), and while it recomputes it *replays*
them, so the recomputed nodes draw what the first ones drew and the global
generator is not advanced. Tapes nest (a checkpoint inside a checkpoint); they
are a field of the engine's state per thread (``context.State``), so each thread has its
own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from hodiff.engine.context import STATE, swap

__all__ = [
    "Tape",
    "current",
    "generator",
    "node_generator",
    "recording",
    "replaying",
    "restore",
    "seed",
]

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
    _global = np.random.default_rng(int(n))


def generator() -> np.random.Generator:
    """The global generator (replaced by :func:`seed`); draw from it, never keep it."""
    return _global


class Tape:
    """The seeds the random nodes of one run of a segment took, in order (``hd.checkpoint``)."""

    __slots__ = ("seeds",)

    def __init__(self) -> None:
        self.seeds: list[int] = []


class _Replay:
    """A tape being replayed: the next seed is ``tape.seeds[pos]``."""

    __slots__ = ("pos", "tape")

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.pos = 0


def current() -> Any:
    """The tapes in effect, innermost last: a Tape records, a replayed one replays (for
    :func:`restore` in another context).
    """
    return STATE.get().tapes


def restore(tapes: Any) -> None:
    """Puts back tapes read by :func:`current` (in a copied context that runs a segment)."""
    swap("tapes", tapes)


class recording:  # noqa: N801 (a context manager used as a function)
    """Within it, the seed of every new random node (``seed=-1``) is appended to ``tape``.

    A class rather than a generator (``contextlib.contextmanager``): every checkpoint call
    enters one, and a generator's frames cost more than the rest of it.
    """

    __slots__ = ("outer", "tape")

    def __init__(self, tape: Tape) -> None:
        self.tape = tape

    def __enter__(self) -> Tape:
        outer = self.outer = STATE.get().tapes
        swap("tapes", (*outer, self.tape))
        return self.tape

    def __exit__(self, *exc: object) -> None:
        swap("tapes", self.outer)


@contextmanager
def replaying(tape: Tape, name: str = "replay") -> Iterator[None]:
    """Within it, new random nodes (``seed=-1``) take the seeds of ``tape`` in order.

    Raises:
        RuntimeError: the code inside made more random nodes than ``tape`` holds, or
            fewer (it is not the code that recorded it, or it branched differently);
            ``name`` starts the message.
    """
    replay = _Replay(tape)
    outer = swap("tapes", (*STATE.get().tapes, replay))
    try:
        yield
    except _ExhaustedError:
        raise RuntimeError(
            f"{name}: the recomputation made more random nodes than the first run "
            f"({len(tape.seeds)}): the function must make the same random calls every time"
        ) from None
    finally:
        swap("tapes", outer)
    if replay.pos != len(tape.seeds):
        raise RuntimeError(
            f"{name}: the recomputation made {replay.pos} random node(s), the first run "
            f"{len(tape.seeds)}: the function must make the same random calls every time"
        )


class _ExhaustedError(Exception):
    """A replayed tape had no seed left (turned into RuntimeError by :func:`replaying`)."""


def node_generator(seed: int) -> np.random.Generator:
    """A random node's own generator: ``default_rng(seed)``, or seeded from the global one
    (or, inside :func:`replaying`, from the tape; inside :func:`recording`, noted on it).
    """
    if seed >= 0:
        return np.random.default_rng(seed)
    tapes = STATE.get().tapes
    source = None
    for k in range(len(tapes) - 1, -1, -1):  # the innermost replay gives the seed
        t = tapes[k]
        if type(t) is _Replay:
            source = k
            break
    if source is None:
        s = int(_global.integers(0, 2**63))
    else:
        replay = tapes[source]
        assert type(replay) is _Replay
        if replay.pos >= len(replay.tape.seeds):
            raise _ExhaustedError
        s = replay.tape.seeds[replay.pos]
        replay.pos += 1
    for t in tapes if source is None else tapes[source + 1 :]:  # the recordings inside it
        if type(t) is Tape:
            t.seeds.append(s)
    return np.random.default_rng(s)
