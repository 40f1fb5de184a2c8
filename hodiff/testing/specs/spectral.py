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


def _rows(fn: Any, shape: tuple[int, ...], cplx: bool) -> list[Spec]:
    name = fn.__name__
    kw: dict[str, Any] = {"linear": True, "complex": True} if cplx else {"linear": True}
    tag = "c" if cplx else ""
    return [
        Spec(fn, (shape,), _numpy(name), id=f"{tag}backward", **kw),
        Spec(fn, (shape,), _numpy(name), kwargs={"norm": "ortho"}, id=f"{tag}ortho", **kw),
        Spec(fn, (shape,), _numpy(name), kwargs={"norm": "forward", "n": 7}, id=f"{tag}pad", **kw),
        Spec(fn, (shape,), _numpy(name), kwargs={"n": 4}, id=f"{tag}crop", **kw),
    ]


SPECS = [
    *_rows(F.fft, (2, 5), False),
    *_rows(F.ifft, (2, 5), False),
    *_rows(F.rfft, (2, 5), False),
    *_rows(F.rfft, (6,), False)[:1],
    *_rows(F.irfft, (2, 5), False),
    *_rows(F.irfft, (2, 4), False)[:2],
]
