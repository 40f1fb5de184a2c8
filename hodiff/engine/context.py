"""Array backends, and the engine's state per thread: one :class:`State` in one context
variable (:data:`STATE`): the array context (backend, dtype, device); the modes, one bit
each (functions compute as soon as they are called (``auto_forward``), graphs are recorded
(``no_grad``), the private "raw" mode of a plain ``.backward()``'s rules on bare arrays);
the plain reverse pass whose rules run (``reverse.current_pass``); the random tapes of
checkpointing (``random.py``).
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


_DEFAULT = Context()

# The engine's modes, one bit each of :attr:`State.modes` (one read per function call):
RAW = 1  # a plain .backward() runs backward rules on bare arrays
STATIC = 2  # define-then-run: functions link nodes without computing (auto_forward(False))
NO_GRAD = 4  # hd.no_grad(): nothing is recorded
TRUSTED = 8  # hd.grad runs backward rules: their calls are consistent by construction, so in
# define-by-run mode their argument checks (setup_impl) are skipped
SYMBOLIC = 16  # a compiler records a function (hd.jit): no value exists, so the transforms
# that return arrays (hd.hvp, hd.jvp, hd.hessian, ...) record their passes and return Variables


class State:
    """The engine's state in one thread: ``context``, ``modes`` (the bits above), ``scope``
    (the plain pass whose rules run, or None), ``tapes`` (the random tapes, innermost last).
    Never changed once set (:func:`swap` sets a new one): a copied context keeps its state.
    """

    __slots__ = ("context", "modes", "scope", "tapes")

    def __init__(self, context: Context, modes: int, scope: Any, tapes: tuple[Any, ...]) -> None:
        self.context = context
        self.modes = modes
        self.scope = scope
        self.tapes = tapes


#: this thread's :class:`State`; ``STATE.get().modes`` is read by every call
STATE = contextvars.ContextVar("hodiff_state", default=State(_DEFAULT, 0, None, ()))  # noqa: B039


def swap(field: str, value: Any) -> Any:
    """Sets ``field`` of this thread's state to ``value``; returns its previous value, for
    ``swap(field, previous)``: fields set and reset in any order never undo each other.
    """
    s = STATE.get()
    previous = getattr(s, field)
    new = State(s.context, s.modes, s.scope, s.tapes)
    setattr(new, field, value)
    STATE.set(new)
    return previous


class _Flag:
    """One mode of :attr:`State.modes`, read and set like a boolean context variable;
    ``set`` returns the previous state of this mode only (the token for ``reset``).
    """

    __slots__ = ("bit", "on_when_set")

    def __init__(self, bit: int, on_when_set: bool) -> None:
        self.bit = bit
        self.on_when_set = on_when_set  # False: the bit means the mode is off (auto_forward)

    def get(self) -> bool:
        return bool(STATE.get().modes & self.bit) is self.on_when_set

    def set(self, value: bool) -> bool:
        previous = bool(STATE.get().modes & self.bit)
        self.reset(bool(value) is self.on_when_set)
        return previous

    def reset(self, token: bool) -> None:
        mode = STATE.get().modes
        swap("modes", mode | self.bit if token else mode & ~self.bit)


flag_auto_forward = _Flag(STATIC, False)
flag_recording = _Flag(NO_GRAD, False)
flag_raw = _Flag(RAW, True)
flag_trusted = _Flag(TRUSTED, True)


def get_default_context() -> Context:
    """The context of this thread (``Context()`` unless set)."""
    return STATE.get().context


def set_default_context(ctx: Context) -> None:
    """Sets the context of this thread."""
    if not isinstance(ctx, Context):
        raise TypeError(f"set_default_context: expected a hodiff.Context, got {type(ctx).__name__}")
    swap("context", ctx)


@contextlib.contextmanager
def context_scope(ctx: Context) -> Iterator[Context]:
    """Uses ``ctx`` inside the ``with`` block, then restores the previous one."""
    if not isinstance(ctx, Context):
        raise TypeError(f"context_scope: expected a hodiff.Context, got {type(ctx).__name__}")
    previous = swap("context", ctx)
    try:
        yield ctx
    finally:
        swap("context", previous)


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
