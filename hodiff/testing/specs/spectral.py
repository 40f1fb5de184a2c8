"""Specs of hodiff/functions/spectral.py: the Fourier transforms on the last axis.

They are linear (``linear=True``: orders >= 2 are checked on ``y**3``); the rows
cover every norm, ``n`` cropping and zero-padding, and even and odd lengths (the
bin ``n/2`` of ``irfft``'s Hermitian halving exists only for even ``n``).
"""

from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec


def _numpy(name: str) -> Any:
    transform = getattr(np.fft, name)

    def ref(x: np.ndarray, n: int | None = None, norm: str = "backward") -> np.ndarray:
        return transform(x, n=n, norm=norm)

    return ref


def _real(shape: tuple[int, ...]) -> Any:
    """A real signal (rfft's input) in a complex row: drawn as a callable, so kept real."""
    return lambda rng: rng.uniform(-2.0, 2.0, size=shape)


def _rows(fn: Any, arg: Any) -> list[Spec]:
    ref = _numpy(fn.__name__)
    kw: dict[str, Any] = {"linear": True, "complex": True}
    return [
        Spec(fn, (arg,), ref, id="backward", **kw),
        Spec(fn, (arg,), ref, kwargs={"norm": "ortho"}, id="ortho", **kw),
        Spec(fn, (arg,), ref, kwargs={"norm": "forward", "n": 7}, id="pad", **kw),
        Spec(fn, (arg,), ref, kwargs={"n": 4}, id="crop", **kw),
    ]


SPECS = [
    *_rows(F.fft, (2, 5)),
    *_rows(F.ifft, (2, 5)),
    *_rows(F.rfft, _real((2, 5))),
    *_rows(F.irfft, (2, 5)),
    Spec(F.irfft, ((2, 4),), _numpy("irfft"), linear=True, complex=True, id="even"),
    Spec(F.irfft, ((3,),), _numpy("irfft"), kwargs={"n": 5}, linear=True, complex=True, id="odd"),
]
