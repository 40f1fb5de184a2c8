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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine.variable import Variable

__all__ = [
    "checked_inputs",
    "complex_dtype",
    "has_complex",
    "is_complex",
    "real_dtype",
    "register_complex_cast",
]

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
