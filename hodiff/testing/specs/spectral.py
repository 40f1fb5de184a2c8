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


# real rows through complex intermediates: the real harness (graph files, mutants, the plain
# pass against the recorded one) sees every transform
def fft_parts(x: Any, n: int | None = None, norm: str = "backward") -> Any:
    """``[Re fft(x), Im ifft(x)]`` on the last axis: a real function of a real ``x``."""
    return F.concatenate(F.real(F.fft(x, n, norm)), F.imag(F.ifft(x, n, norm)), axis=-1)


def _fft_parts_ref(x: np.ndarray, n: int | None = None, norm: str = "backward") -> np.ndarray:
    return np.concatenate([np.fft.fft(x, n, norm=norm).real, np.fft.ifft(x, n, norm=norm).imag], -1)


def rfft_round_trip(x: Any, n: int = 8, m: int = 6, norm: str = "backward") -> Any:
    """``irfft(rfft(x, n), m)``: the spectrum of ``n`` points read back on ``m``."""
    return F.irfft(F.rfft(x, n, norm), m, norm)


def _round_trip_ref(x: np.ndarray, n: int = 8, m: int = 6, norm: str = "backward") -> np.ndarray:
    return np.fft.irfft(np.fft.rfft(x, n, norm=norm), m, norm=norm)


SPECS += [
    Spec(fft_parts, ((2, 5),), _fft_parts_ref, linear=True, ref_atol=1e-11),
    Spec(
        fft_parts,
        ((2, 5),),
        _fft_parts_ref,
        kwargs={"n": 4, "norm": "ortho"},
        linear=True,
        ref_atol=1e-11,
        id="crop",
    ),
    Spec(rfft_round_trip, ((2, 5),), _round_trip_ref, linear=True, ref_atol=1e-11),
    Spec(
        rfft_round_trip,
        ((2, 5),),
        _round_trip_ref,
        kwargs={"n": 7, "m": 9, "norm": "forward"},
        linear=True,
        ref_atol=1e-11,
        id="odd",
    ),
]
