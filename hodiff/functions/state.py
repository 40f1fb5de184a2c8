"""State that a forward updates in place (batch normalization's running statistics),
updated once per call of the user's function.

A transform that computes a node again on the values of a call it already made (a Taylor
pass re-running a primitive along its directions, a checkpoint's recomputation in the
reverse pass) does so inside :func:`replaying`; a primitive whose forward updates state
(``BatchNormalization``) skips its update there. So ``hd.jvp``, ``hd.jet``,
``hd.laplacian``, ``hd.biharmonic`` and a checkpointed segment change the state as one
plain call of ``f`` does, whatever the number of directions or recomputations.

>>> from hodiff.functions import state
>>> state.is_replaying()
False
>>> with state.replaying():
...     state.is_replaying()
True
"""

from __future__ import annotations

import contextvars

__all__: list[str] = []  # nothing for ``F``: used by the transforms and stateful rules

_REPLAYING = contextvars.ContextVar("hodiff_replaying_state", default=False)


def is_replaying() -> bool:
    """Whether nodes run now are a transform's recomputation (state is not updated)."""
    return _REPLAYING.get()


class _Replaying:
    """Sets the flag of :func:`is_replaying` for the ``with`` block (a class, not a
    generator: a transform enters it around every pass).
    """

    __slots__ = ("token",)

    def __enter__(self) -> None:
        self.token = _REPLAYING.set(True)

    def __exit__(self, *exc: object) -> None:
        _REPLAYING.reset(self.token)


def replaying() -> _Replaying:
    """For the ``with`` block, forwards are recomputations: they update no state."""
    return _Replaying()
