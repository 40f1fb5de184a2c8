"""Complex values at a call: the one check of a primitive's ``complex_values`` fact.

A call that is not made by ``hd.grad``'s rules (those are consistent by construction)
passes its inputs through :func:`checked_inputs` when one of them is complex, before
anything is computed or linked (define-by-run, define-then-run and ``hd.vmap`` calls):

* ``complex_values == ""`` (real only): a complex input raises TypeError naming the
  function, the argument and the dtype;
* ``"holomorphic"``: real float inputs next to a complex one are first made complex by
  the registered differentiable cast (``F.complex(x)``), whose rule keeps the real part
  of the gradient. So a holomorphic rule sees inputs of one dtype, and a real input's
  gradient is real (JAX's transpose of the real-to-complex map) in both passes;
* ``"own"``: the inputs go to the primitive as they are (its rules handle them).

Dtypes pair as numpy's: complex64 with float32, complex128 with float64.

A public composition of primitives that is real only (``F.leaky_relu``, ``F.var``, ...) is
declared :func:`real_values` at its definition: a complex argument is refused there, naming
the public function, before any inner primitive sees it (and names itself instead).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from hodiff.engine.variable import Variable

__all__ = [
    "checked_inputs",
    "complex_dtype",
    "has_complex",
    "is_complex",
    "real_dtype",
    "real_values",
    "register_complex_cast",
]

_Fn = TypeVar("_Fn", bound=Callable[..., Any])

_C64 = np.dtype(np.complex64)
_C128 = np.dtype(np.complex128)


def complex_dtype(dtype: Any) -> np.dtype[Any]:
    """The complex dtype paired with a real one (float32 -> complex64, else complex128)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    return _C64 if dtype.kind == "f" and dtype.itemsize <= 4 else _C128


def real_dtype(dtype: Any) -> np.dtype[Any]:
    """The real dtype of a complex one's parts (complex64 -> float32); a real dtype itself."""
    dtype = np.dtype(dtype)
    if dtype.kind != "c":
        return dtype
    return np.dtype(np.float32) if dtype == _C64 else np.dtype(np.float64)


def is_complex(dtype: Any) -> bool:
    """Whether ``dtype`` is complex64 or complex128."""
    return np.dtype(dtype).kind == "c"


def has_complex(inputs: Sequence[Variable]) -> bool:
    """Whether one of ``inputs`` holds complex values."""
    for x in inputs:  # noqa: SIM110 (a loop: a generator costs a frame)
        if x._dtype.kind == "c":
            return True
    return False


def _uncast(x: Any) -> Any:
    raise RuntimeError(
        "complex values: no cast is registered (import hodiff: hodiff.functions registers it)"
    )


#: the differentiable real-to-complex cast (``hodiff.functions.complex``), registered there
_CAST: Any = _uncast


def register_complex_cast(cast: Any) -> None:
    """Registers the differentiable cast of a real Variable to its complex dtype."""
    global _CAST
    _CAST = cast


def checked_inputs(f: Any, inputs: Sequence[Variable]) -> Sequence[Variable]:
    """``inputs`` of a call of ``f`` that has a complex one, as ``f``'s fact says (module doc).

    Raises:
        TypeError: ``f`` is real only (``complex_values == ""``).
    """
    kind = f.complex_values
    if not kind:
        i, x = next((i, x) for i, x in enumerate(inputs) if x._dtype.kind == "c")
        names = getattr(f, "input_names", ())
        arg = names[i] if i < len(names) else "x" if len(inputs) == 1 else f"x{i}"
        why = getattr(f, "complex_refusal", "")
        raise TypeError(
            f"F.{f.name}: {arg} has dtype {x._dtype}; {f.name} is defined for real values "
            f"only{f' ({why})' if why else ''}: take F.real, F.imag or F.abs of it first"
        )
    if kind != "holomorphic":
        return inputs
    return [_CAST(x) if x._dtype.kind == "f" else x for x in inputs]


def _complex_arg(a: Any) -> bool:
    """Whether the argument ``a`` (a Variable, an array, a number, or a list of them) holds
    complex values: one dtype test per array.
    """
    if isinstance(a, Variable):
        return a._dtype.kind == "c"
    if isinstance(a, list | tuple):
        return any(_complex_arg(b) for b in a)
    if isinstance(a, complex):
        return True
    dtype = getattr(a, "dtype", None)
    return dtype is not None and getattr(dtype, "kind", "") == "c"


def _refuse(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raises the TypeError of a complex argument of the real-only composition ``fn``."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    except TypeError:  # a wrong call: fn's own error names it
        bound = {f"x{i}": a for i, a in enumerate(args)} | kwargs
    arg, value = next((k, v) for k, v in bound.items() if _complex_arg(v))
    if isinstance(value, list | tuple):
        i, value = next((i, v) for i, v in enumerate(value) if _complex_arg(v))
        arg = f"{arg}[{i}]"
    dtype = value._dtype if isinstance(value, Variable) else getattr(value, "dtype", type(value))
    dtype = np.dtype(complex) if dtype is complex else dtype
    raise TypeError(
        f"F.{fn.__name__}: {arg} has dtype {dtype}; {fn.__name__} is defined for real values "
        "only: take F.real, F.imag or F.abs of it first"
    )


def real_values(fn: _Fn) -> _Fn:
    """``fn`` (a public composition of primitives defined for real values only) as a function
    that refuses a complex argument naming itself (``F.<name>``), the argument and the dtype,
    before anything is computed or linked: one dtype test per array argument.

    Raises:
        TypeError: (at a call) an argument holds complex values.
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        for a in args:
            if _complex_arg(a):
                _refuse(fn, args, kwargs)
        if kwargs:
            for a in kwargs.values():
                if _complex_arg(a):
                    _refuse(fn, args, kwargs)
        return fn(*args, **kwargs)

    return call  # type: ignore[return-value]
