"""Discrete Fourier transforms along the last axis: ``fft``, ``ifft``, ``rfft``, ``irfft``.

numpy's transforms (``numpy.fft``), with its ``n`` (crop or zero-pad the input to
``n`` points first) and its three norms. With ``W[j, k] = exp(-2 pi i j k / n)``:

=========  =======================================  ============  =============
function   ``y`` (length along the last axis)       ``"backward"`` ``"ortho"``
=========  =======================================  ============  =============
``fft``    ``s W x`` (n)                            ``s = 1``      ``1/sqrt(n)``
``ifft``   ``s conj(W) x`` (n)                      ``s = 1/n``    ``1/sqrt(n)``
``rfft``   ``(s W x)[:n//2+1]`` (n//2+1), x real    ``s = 1``      ``1/sqrt(n)``
``irfft``  ``s conj(W) X`` (n), real, X the          ``s = 1/n``    ``1/sqrt(n)``
           Hermitian extension of x[:n//2+1]
=========  =======================================  ============  =============

(``"forward"`` puts the ``1/n`` on the forward transforms instead.)

All four are linear over the reals, so their forward and Taylor rules map each
coefficient (``taylor = "linear"``) and their backward rules are their
transposes, written with these same functions (so every order follows). Under
hodiff's convention (a vjp is the cotangent times the Jacobian, no conjugation):

- ``W`` is symmetric, so the transpose of ``fft`` (``ifft``) is ``fft`` (``ifft``)
  with the same scale, followed by the transpose of the crop/pad to ``n``: a pad/crop
  back to the input's length.
- ``rfft`` is ``fft`` of a real input, cropped to ``n//2+1``: its transpose pads the
  cotangent with zeros to ``n``, applies ``fft`` and keeps the real part (a real input's
  gradient is real). ``fft``, ``ifft`` and ``irfft`` take a real input as complex
  (``F.complex(x)``, whose rule keeps the real part of the gradient).
- ``irfft`` adds each bin ``k`` of ``0 < k < n/2`` twice (``x_k`` and ``conj(x_k)``),
  the bins ``0`` and ``n/2`` once and drops their imaginary parts:
  ``y_j = s sum_k c_k Re(x_k e^{2 pi i j k / n})`` with ``c_k`` in ``{1, 2}``, so
  ``d y_j / d Re x_k - i d y_j / d Im x_k = s c_k e^{2 pi i j k / n}`` and the gradient
  of a real cotangent ``g`` is ``c * ifft(g)[:n//2+1]`` (same norm), padded or cropped
  back to the input's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import math as _math

__all__ = ["fft", "ifft", "irfft", "rfft"]

Spec = list[tuple[tuple[int, ...], Any]]

_NORMS = ("backward", "ortho", "forward")


def complex_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The complex dtype numpy's fft gives for ``dtype``: complex64 from float32/complex64,
    complex128 from every other (float64, complex128, integers, bools).
    """
    single = dtype in (np.float32, np.complex64)
    return np.dtype(np.complex64) if single else np.dtype(np.complex128)


def real_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The real dtype of ``dtype``'s pair: float32 from float32/complex64, else float64."""
    return np.dtype(np.float32) if dtype in (np.float32, np.complex64) else np.dtype(np.float64)


def resize_last(y: Any, length: int) -> Any:
    """``y`` cropped or zero-padded to ``length`` along its last axis (the transpose of the
    other one: cropping from ``length`` pads back to it).
    """
    now = y.shape[-1]
    if now == length:
        return y
    if now > length:
        return y[..., :length]
    return _array.pad(y, (0, length - now))


class _Transform(Function, register=False, follows_shape=True):
    """A transform along the last axis with numpy's ``n`` and ``norm``."""

    need_inputs = False
    taylor = "linear"
    #: the transform's output is real (irfft)
    real_output: ClassVar[bool] = False

    def __init__(self, *, n: int | None = None, norm: str = "backward") -> None:
        if n is not None and (isinstance(n, bool) or not isinstance(n, int | np.integer)):
            raise TypeError(f"{self.name}: n must be None or an int, got {type(n).__name__}")
        if n is not None and n < 1:
            raise ValueError(f"{self.name}: n must be >= 1, got {n}")
        if norm is None:
            norm = "backward"
        if norm not in _NORMS:
            raise ValueError(f"{self.name}: norm must be one of {_NORMS} or None, got {norm!r}")
        self.n = None if n is None else int(n)
        self.norm = norm

    def points(self, length: int) -> int:
        """The transform's size ``n`` for an input of ``length`` points on the last axis."""
        return length if self.n is None else self.n

    def out_length(self, n: int) -> int:
        return n

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x = inputs[0]
        if x.ndim == 0:
            raise ValueError(f"{self.name}: x of shape {x.shape} must have at least 1 dimension")
        if x.dtype.kind not in "biufc":
            raise TypeError(f"{self.name}: x has dtype {x.dtype}; a numeric array is needed")
        n = self.points(x.shape[-1])
        if n < 1:
            raise ValueError(f"{self.name}: x of shape {x.shape} gives n = {n} points; give n >= 1")
        dtype = real_dtype(x.dtype) if self.real_output else complex_dtype(x.dtype)
        return [((*x.shape[:-1], self.out_length(n)), dtype)]

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        return self(inputs[0])  # the batch axis is in front: the last axis is unchanged


class Fft(_Transform):
    complex_values = "holomorphic"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        y = array_module(x).fft.fft(x, n=self.n, norm=self.norm)
        outputs[0] = y.astype(complex_dtype(x.dtype), copy=False)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = s W P x (P: crop/pad to n), W = W^T  =>  gx = P^T (s W g)
        if prop_down[0]:
            gx = fft(outputs[0].grad, norm=self.norm)
            inputs[0].store(resize_last(gx, inputs[0].shape[-1]), accum[0])


class Ifft(_Transform):
    complex_values = "holomorphic"

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        y = array_module(x).fft.ifft(x, n=self.n, norm=self.norm)
        outputs[0] = y.astype(complex_dtype(x.dtype), copy=False)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = s conj(W) P x, conj(W) symmetric  =>  gx = P^T (s conj(W) g)
        if prop_down[0]:
            gx = ifft(outputs[0].grad, norm=self.norm)
            inputs[0].store(resize_last(gx, inputs[0].shape[-1]), accum[0])


class Rfft(_Transform):
    # real inputs only (numpy would drop an imaginary part): the default fact refuses complex

    def out_length(self, n: int) -> int:
        return n // 2 + 1

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        y = array_module(x).fft.rfft(x, n=self.n, norm=self.norm)
        outputs[0] = y.astype(complex_dtype(x.dtype), copy=False)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = R s W P x (R keeps n//2+1 bins)  =>  gx = Re P^T (s W R^T g), R^T pads zeros
        if prop_down[0]:
            length = inputs[0].shape[-1]
            g = outputs[0].grad
            gx = fft(resize_last(g, self.points(length)), norm=self.norm)
            inputs[0].store(_math.real(resize_last(gx, length)), accum[0])


class Irfft(_Transform):
    complex_values = "own"
    real_output = True

    def points(self, length: int) -> int:
        return 2 * (length - 1) if self.n is None else self.n

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        y = array_module(x).fft.irfft(x, n=self.n, norm=self.norm)
        outputs[0] = y.astype(real_dtype(x.dtype), copy=False)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y_j = s sum_k c_k Re(x_k e^{+2 pi i jk/n}), k < m = n//2+1, c_k = 2 but for the bins
        # 0 and n/2 (c = 1)  =>  gx_k = c_k s sum_j g_j e^{+2 pi i jk/n} = c_k ifft(g)_k
        if prop_down[0]:
            length = inputs[0].shape[-1]
            g = outputs[0].grad
            n = g.shape[-1]
            m = n // 2 + 1
            spectrum = ifft(g, norm=self.norm)[..., :m]
            end = m - 1 if n % 2 == 0 else m  # the bins counted twice: 1 .. end - 1
            if end > 1:
                spectrum = spectrum + _array.pad(spectrum[..., 1:end], (1, m - end))
            inputs[0].store(resize_last(spectrum, length), accum[0])


def _transform(cls: type[_Transform], x: Any, n: int | None, norm: str) -> Variable:
    f = cls(n=n, norm=norm)  # checks n and norm first
    if cls is not Rfft and np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype).kind != "c":
        x = _math.complex(x)  # a real signal: its gradient is the real part of the complex one
    return f(x)


@traced
def fft(x: Any, n: int | None = None, norm: str = "backward") -> Variable:
    """Discrete Fourier transform along the last axis, as ``numpy.fft.fft``:
    ``y[..., k] = s sum_j x[..., j] exp(-2 pi i j k / n)``.

    ``x`` is cropped or zero-padded to ``n`` points first. ``s`` is 1
    (``norm="backward"``, the default), ``1/sqrt(n)`` (``"ortho"``) or ``1/n``
    (``"forward"``). Holomorphic (linear): its gradient is ``fft`` of the
    cotangent, cropped or padded back to ``x``'s length.

    Args:
        x: real or complex, shape ``(..., L)``.
        n: number of points (default ``L``).
        norm: ``"backward"``, ``"ortho"`` or ``"forward"`` (None: ``"backward"``).

    Returns:
        complex ``y`` of shape ``(..., n)`` (complex64 from float32/complex64, else
        complex128).

    >>> import numpy as np, hodiff.functions as F
    >>> F.fft(np.array([1.0, 2.0, 3.0, 4.0])).d
    array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
    """
    return _transform(Fft, x, n, norm)


@traced
def ifft(x: Any, n: int | None = None, norm: str = "backward") -> Variable:
    """Inverse discrete Fourier transform along the last axis, as ``numpy.fft.ifft``:
    ``y[..., j] = s sum_k x[..., k] exp(2 pi i j k / n)``.

    ``x`` is cropped or zero-padded to ``n`` points first. ``s`` is ``1/n``
    (``norm="backward"``), ``1/sqrt(n)`` (``"ortho"``) or 1 (``"forward"``), so
    ``ifft(fft(x, norm=a), norm=a) == x`` for each norm.

    Args:
        x: real or complex, shape ``(..., L)``.
        n: number of points (default ``L``).
        norm: ``"backward"``, ``"ortho"`` or ``"forward"`` (None: ``"backward"``).

    Returns:
        complex ``y`` of shape ``(..., n)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.ifft(np.array([4.0, 0.0, 0.0, 0.0])).d
    array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _transform(Ifft, x, n, norm)


@traced
def rfft(x: Any, n: int | None = None, norm: str = "backward") -> Variable:
    """Fourier transform of a real signal along the last axis, as ``numpy.fft.rfft``:
    the bins ``0 .. n//2`` of ``fft(x, n, norm)`` (the others are their conjugates).

    Args:
        x: real, shape ``(..., L)`` (a complex ``x`` raises TypeError: use :func:`fft`).
        n: number of points (default ``L``).
        norm: ``"backward"``, ``"ortho"`` or ``"forward"`` (None: ``"backward"``).

    Returns:
        complex ``y`` of shape ``(..., n // 2 + 1)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.rfft(np.array([1.0, 2.0, 3.0, 4.0])).d
    array([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return _transform(Rfft, x, n, norm)


@traced
def irfft(x: Any, n: int | None = None, norm: str = "backward") -> Variable:
    """Inverse of :func:`rfft`, as ``numpy.fft.irfft``: the real signal of ``n`` points whose
    spectrum has the bins ``x[..., :n//2+1]`` (the rest by Hermitian symmetry).

    ``y[..., j] = s sum_k c_k Re(x[..., k] exp(2 pi i j k / n))`` over
    ``k < n//2+1``, with ``c_k = 1`` for the bin 0 (and ``n/2`` for even ``n``),
    whose imaginary parts are ignored, and ``c_k = 2`` for the others; ``x`` is
    cropped or zero-padded to ``n//2+1`` bins first. ``s`` as :func:`ifft`.

    Args:
        x: complex (or real), shape ``(..., L)``.
        n: output length (default ``2 (L - 1)``).
        norm: ``"backward"``, ``"ortho"`` or ``"forward"`` (None: ``"backward"``).

    Returns:
        real ``y`` of shape ``(..., n)`` (float32 from complex64/float32, else float64).

    >>> import numpy as np, hodiff.functions as F
    >>> F.irfft(np.array([10.0, -2 + 2j, -2.0])).d
    array([1., 2., 3., 4.])
    """
    return _transform(Irfft, x, n, norm)
