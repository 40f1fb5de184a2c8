"""``hd.gradcheck`` of complex values: through real and imaginary parts, and the
Cauchy-Riemann check of a ``holomorphic=True`` promise.

* A complex input ``z`` is checked as its two real coordinates: ``f`` is called on
  ``F.complex(re, im)``, so the analytic side is ``hd.grad``'s ``df/dx - i df/dy`` of ``z``
  read through the cast (``d/d re = Re g``, ``d/d im = -Im g``), at every order, against
  differences along ``x`` and along ``iy``. Report rows name the part (``"re"``/``"im"``)
  of the input they check.
* A complex-valued ``f`` is checked through ``(Re f, Im f)``: the random real weights of
  the check apply to both (a random real linear functional of the output's parts).
* ``holomorphic=True``: for every complex input and element ``j``, the derivative along
  ``i e_j`` must be ``i`` times the derivative along ``e_j`` (Cauchy-Riemann). With the
  convention's vjp (``g(c)``, checked at order 1 by the same call), the derivative of
  ``Re <c, f>`` along ``e_j`` is ``Re g(c)_j`` and along ``i e_j`` is ``-Im g(c)_j``; so the
  promise holds at ``j`` exactly when ``g(i c)_j = i g(c)_j`` (for a non-holomorphic ``f``,
  ``g(i c) - i g(c) = -2i conj(c df/d conj(z))``), with ``c`` a random complex cotangent.
  Rows of part ``"C-R"``: analytic ``-Im g(c)_j`` (along ``i e_j``), numeric
  ``Re g(i c)_j`` (``i`` times along ``e_j``), error ``|g(i c)_j - i g(c)_j|``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.engine.autograd import grad
from hodiff.engine.context import array_module, auto_forward
from hodiff.engine.variable import Variable
from hodiff.tools.check_report import FAIL, OK, GradcheckReport, GradcheckRow

__all__ = ["by_parts", "cauchy_riemann", "has_complex", "real_valued"]

#: the Cauchy-Riemann residual allowed, relative to the largest derivative (rounding only:
#: both sides come from the same rules; a non-holomorphic f misses by O(1))
CR_RTOL = 1e-9


def _arrays(inputs: Any) -> tuple[list[Any], bool]:
    multi = isinstance(inputs, tuple | list)
    raw = list(inputs) if multi else [inputs]
    out = []
    for a in raw:
        a = a.d if isinstance(a, Variable) else a
        out.append(array_module(a).asarray(a) if hasattr(a, "shape") else np.asarray(a))
    return out, multi


def has_complex(inputs: Any) -> bool:
    """Whether one of ``inputs`` (an array, a Variable, or a tuple of them) is complex."""
    return any(a.dtype.kind == "c" for a in _arrays(inputs)[0])


def real_valued(f: Callable[..., Variable]) -> Callable[..., Variable]:
    """``f``, with a complex output replaced by ``stack(Re f, Im f)`` (a real one kept)."""

    def parts(*xs: Any) -> Variable:
        y = f(*xs)
        if isinstance(y, Variable) and y.dtype.kind == "c":
            return F.stack(F.real(y), F.imag(y), axis=0)
        return y

    return parts


def by_parts(
    check: Callable[..., GradcheckReport], f: Callable[..., Variable], inputs: Any, **kw: Any
) -> GradcheckReport:
    """``check`` (the real gradcheck, ``raise_exception=False``) of ``f`` with every complex
    input split into its real and imaginary parts; the rows renamed to ``f``'s inputs.
    """
    arrays, _ = _arrays(inputs)
    parts: list[Any] = []
    names: list[tuple[int, str]] = []  # per real coordinate: (input of f, part)
    for i, a in enumerate(arrays):
        if a.dtype.kind == "c":
            parts += [a.real.astype(np.float64), a.imag.astype(np.float64)]
            names += [(i, "re"), (i, "im")]
        else:
            parts.append(a)
            names.append((i, ""))

    def on_parts(*ps: Any) -> Variable:
        zs, k = [], 0
        for a in arrays:
            if a.dtype.kind == "c":
                zs.append(F.complex(ps[k], ps[k + 1]))
                k += 2
            else:
                zs.append(ps[k])
                k += 1
        return f(*zs)

    report = check(real_valued(on_parts), tuple(parts), **kw)
    report.rows = [_renamed(r, names) for r in report.rows]
    report.steps = {}  # the pictures' keys are coordinates, not inputs: not drawn
    return report


def _renamed(r: GradcheckRow, names: Sequence[tuple[int, str]]) -> GradcheckRow:
    if r.input < 0:  # the fast check's one row per order
        return r
    index, part = names[r.input]
    return r._replace(input=index, part=part)


def cauchy_riemann(
    f: Callable[..., Variable],
    inputs: Any,
    atol: float | None,
    rtol: float | None,
    seed: int,
) -> list[GradcheckRow]:
    """The rows of the Cauchy-Riemann check (module docstring), one per complex element."""
    arrays, _ = _arrays(inputs)
    rng = np.random.default_rng(seed + 1)
    with auto_forward(True):
        vs = [Variable.from_array(a, need_grad=a.dtype.kind in "fc") for a in arrays]
        wanted = [v for v in vs if v.dtype.kind == "c"]
        y = f(*vs)
        if y.dtype.kind != "c":
            y = F.complex(y)  # a real-valued f: holomorphic only where it is constant
        xp = array_module(y.d)
        c = xp.asarray(rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape))
        g = [a.d for a in grad([y], wanted, grad_outputs=[c], allow_unused=True)]
        gi = [a.d for a in grad([y], wanted, grad_outputs=[1j * c], allow_unused=True)]
    complex_inputs = [i for i, a in enumerate(arrays) if a.dtype.kind == "c"]
    scale = max([float(np.max(np.abs(a), initial=0.0)) for a in g + gi] + [1e-300])
    rows = []
    for i, a, b in zip(complex_inputs, g, gi, strict=True):
        a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
        shape = arrays[i].shape
        for j in range(a.size):
            along_iy, i_along_x = -float(a[j].imag), float(b[j].real)
            err = float(abs(b[j] - 1j * a[j]))
            if atol is None and rtol is None:
                tol = CR_RTOL * scale
            else:
                tol = (atol or 0.0) + (rtol or 0.0) * abs(i_along_x)
            idx = tuple(int(t) for t in np.unravel_index(j, shape)) if shape else ()
            ok = err <= tol
            rows.append(
                GradcheckRow(
                    i, 1, idx, along_iy, i_along_x, err, ok, 0.0, tol, OK if ok else FAIL, "C-R"
                )
            )
    return rows
