"""Complex inputs and outputs of ``hd.jacobian`` and ``hd.hessian``.

The convention (API.md, "Complex numbers"): a vjp is the cotangent times the Jacobian with
no conjugation. For a holomorphic ``f`` (``df = f'(z) dz``) the reverse pass seeded with a
unit vector ``e_o`` gives the row ``e_o^T J`` of the complex Jacobian ``J = df/dz``, so the
rows (or columns) of the real algorithm are the complex Jacobian's. For any other function
of complex inputs there is no complex Jacobian (``df`` depends on ``dz`` and ``conj(dz)``):
``hd.jacobian``/``hd.hessian`` refuse it unless ``holomorphic=True`` is promised (a promise
``hd.gradcheck(..., holomorphic=True)`` checks), and point to ``hd.jvp``/``hd.vjp``, whose
directional derivatives exist for every function.

Real inputs with a complex output have a complex Jacobian ``J = d Re f/dx + i d Im f/dx``
(no promise needed): the reverse pass of a complex output keeps only the real part of a
real input's gradient, so it is computed as the Jacobian of the real map
``x -> (Re f(x), Im f(x))`` and put together (:func:`split` and :func:`join`). With
``holomorphic=True`` and complex inputs beside real ones, the real ones are made complex
(:func:`promoted`): a holomorphic ``f`` has one complex derivative in each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hodiff.functions as F
from hodiff.engine.arguments import array_module_of
from hodiff.engine.variable import Variable

__all__ = ["check_promise", "join", "promoted", "split", "unit_cotangent"]


def _has_complex(xs: Sequence[Variable]) -> bool:
    return any(x.dtype.kind == "c" for x in xs)


def check_promise(name: str, xs: Sequence[Variable], multi: bool, holomorphic: bool) -> None:
    """Raises TypeError when an input is complex and ``holomorphic`` was not promised."""
    if holomorphic:
        return
    for i, x in enumerate(xs):
        if x.dtype.kind == "c":
            label = f"inputs[{i}]" if multi else "inputs"
            along = "hd.hvp or hd.vjp" if name == "hessian" else "hd.jvp or hd.vjp"
            raise TypeError(
                f"{name}: {label} has dtype {x.dtype}; a function of complex inputs has a "
                f"complex {name.capitalize()} only when it is holomorphic: pass "
                f"holomorphic=True (a promise hd.gradcheck(f, inputs, holomorphic=True) "
                f"checks), or take derivatives along directions with {along}, which hold "
                f"for every function"
            )


def promoted(xs: list[Variable], holomorphic: bool) -> list[Variable]:
    """With ``holomorphic`` and a complex input, the real float inputs made complex."""
    if not holomorphic or not _has_complex(xs):
        return xs
    return [F.complex(x) if x.dtype.kind == "f" else x for x in xs]


def split(y: Variable, xs: Sequence[Variable]) -> tuple[Variable, bool]:
    """``y``, or ``stack(Re y, Im y)`` (and True) for a complex ``y`` of real inputs only."""
    if y.dtype.kind != "c" or _has_complex(xs):
        return y, False
    return F.stack(F.real(y), F.imag(y), axis=0), True


def join(j: Any, parts: bool) -> Any:
    """The Jacobian block of :func:`split`'s map made complex: ``J[0] + i J[1]``."""
    if not parts:
        return j
    if isinstance(j, Variable):
        return F.complex(j[0], j[1])
    return j[0] + 1j * j[1]


def unit_cotangent(y: Variable) -> list[Any] | None:
    """The seed of ``hd.grad`` for a scalar ``y``: 1 of its complex dtype (None for real)."""
    if y.dtype.kind != "c":
        return None
    return [array_module_of(y).ones(y.shape, dtype=y.dtype)]
