"""Array backends and thread-local modes.

Everything here is per thread (``contextvars``): the array context (backend,
dtype, device), whether functions compute as soon as they are called
(``auto_forward``), whether graphs are recorded (``no_grad``), and the private
"raw" flag the engine sets while a plain ``.backward()`` runs functions on bare
arrays.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "Context",
    "array_module",
    "auto_forward",
    "context_scope",
    "get_auto_forward",
    "get_default_context",
    "no_grad",
    "set_auto_forward",
    "set_default_context",
]

_BACKENDS = ("numpy", "cupy")


@dataclasses.dataclass(frozen=True)
class Context:
    """Where new arrays are made and with which default dtype.

    Args:
        backend: ``"numpy"`` (CPU) or ``"cupy"`` (GPU).
        dtype: default float dtype of new Variables, e.g. ``"float32"``.
        device_id: GPU index for the cupy backend.

    >>> Context(backend="numpy", dtype="float64").dtype
    dtype('float64')
    """

    backend: str = "numpy"
    dtype: Any = "float32"
    device_id: int = 0

    def __post_init__(self) -> None:
        if self.backend not in _BACKENDS:
            raise ValueError(f"Context: backend must be one of {_BACKENDS}, got {self.backend!r}")
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.dtype.kind != "f":
            raise TypeError(f"Context: dtype must be a float dtype, got {self.dtype}")

    @property
    def xp(self) -> ModuleType:
        """The array module (numpy or cupy) of this context."""
        if self.backend == "numpy":
            return np
        try:
            cp = importlib.import_module("cupy")
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise ImportError(
                "Context(backend='cupy') needs cupy: pip install cupy, or "
                'pip install -e ".[cuda]" in the hodiff source checkout'
            ) from e
        cp.cuda.Device(self.device_id).use()
        return cp


_context: contextvars.ContextVar[Context] = contextvars.ContextVar("hodiff_context")
_DEFAULT = Context()

# The engine's modes, one bit each of a single context variable (one lookup per function call):
RAW = 1  # a plain .backward() runs backward rules on bare arrays
STATIC = 2  # define-then-run: functions link nodes without computing (auto_forward(False))
NO_GRAD = 4  # hd.no_grad(): nothing is recorded
TRUSTED = 8  # hd.grad runs backward rules: their calls are consistent by construction, so in
# define-by-run mode their argument checks (setup_impl) are skipped
SYMBOLIC = 16  # a compiler records a function (hd.jit): no value exists, so the transforms
# that return arrays (hd.hvp, hd.jvp, hd.hessian, ...) record their passes and return Variables
MODE_BITS: contextvars.ContextVar[int] = contextvars.ContextVar("hodiff_mode", default=0)


class _Flag:
    """One mode of :data:`MODE_BITS`, read and set like a boolean context variable.

    ``set`` returns a token (the previous state of this mode only) for ``reset``, so that
    modes set and reset in any order never undo each other.
    """

    __slots__ = ("bit", "on_when_set")

    def __init__(self, bit: int, on_when_set: bool) -> None:
        self.bit = bit
        self.on_when_set = on_when_set  # False: the bit means the mode is off (auto_forward)

    def get(self) -> bool:
        return bool(MODE_BITS.get() & self.bit) is self.on_when_set

    def set(self, value: bool) -> bool:
        mode = MODE_BITS.get()
        previous = bool(mode & self.bit)
        bit_on = bool(value) is self.on_when_set
        MODE_BITS.set(mode | self.bit if bit_on else mode & ~self.bit)
        return previous

    def reset(self, token: bool) -> None:
        mode = MODE_BITS.get()
        MODE_BITS.set(mode | self.bit if token else mode & ~self.bit)


flag_auto_forward = _Flag(STATIC, False)
flag_recording = _Flag(NO_GRAD, False)
flag_raw = _Flag(RAW, True)
flag_trusted = _Flag(TRUSTED, True)


def get_default_context() -> Context:
    """The context of this thread (``Context()`` unless set)."""
    return _context.get(_DEFAULT)


def set_default_context(ctx: Context) -> None:
    """Sets the context of this thread."""
    if not isinstance(ctx, Context):
        raise TypeError(f"set_default_context: expected a hodiff.Context, got {type(ctx).__name__}")
    _context.set(ctx)


@contextlib.contextmanager
def context_scope(ctx: Context) -> Iterator[Context]:
    """Uses ``ctx`` inside the ``with`` block, then restores the previous one."""
    if not isinstance(ctx, Context):
        raise TypeError(f"context_scope: expected a hodiff.Context, got {type(ctx).__name__}")
    token = _context.set(ctx)
    try:
        yield ctx
    finally:
        _context.reset(token)


def get_auto_forward() -> bool:
    """True when functions compute their outputs as soon as they are called."""
    return flag_auto_forward.get()


def set_auto_forward(enabled: bool) -> None:
    """Sets define-by-run (True, the default) or define-then-run (False) for this thread."""
    flag_auto_forward.set(_check_bool("set_auto_forward", enabled))


@contextlib.contextmanager
def auto_forward(enabled: bool = True) -> Iterator[None]:
    """Context manager: define-by-run inside when ``enabled``, static graphs otherwise.

    >>> import hodiff as hd
    >>> with hd.auto_forward(False):
    ...     hd.get_auto_forward()
    False
    """
    token = flag_auto_forward.set(_check_bool("auto_forward", enabled))
    try:
        yield
    finally:
        flag_auto_forward.reset(token)


def _check_bool(name: str, value: Any) -> bool:
    """``value`` as a bool; a TypeError for anything but a bool (``"no"`` is truthy)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise TypeError(f"{name}: enabled must be a bool, got {type(value).__name__} {value!r}")


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Context manager: functions called inside record no graph."""
    token = flag_recording.set(False)
    try:
        yield
    finally:
        flag_recording.reset(token)


def is_recording() -> bool:
    """False inside :func:`no_grad`."""
    return flag_recording.get()


def array_module(x: Any) -> ModuleType:
    """numpy or cupy, whichever ``x`` (an array, or a Variable's array) belongs to."""
    t = type(x)
    if t is np.ndarray:
        return np
    # a cupy type: cupy is imported (its arrays exist), one read of sys.modules
    return sys.modules["cupy"] if t.__module__.startswith("cupy") else np
