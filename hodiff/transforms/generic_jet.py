"""The generic Taylor rule: any primitive, through nested first derivatives of its backward.

A primitive that declares no Taylor rule (:attr:`hodiff.engine.function.Function.taylor`)
takes this one: per direction, the derivatives in ``t`` of the primitive along its input
curves ``x(t) = x0 + sum_k x_k t^k / k!``, each a transposed vjp of the previous one.
Exact at every order and differentiable, only slower (one reverse pass per direction and
order); :func:`hodiff.transforms.taylor.rule_kinds` names the primitives that take it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hodiff import functions as F
from hodiff.engine import api
from hodiff.engine import batching as _batching
from hodiff.engine.arguments import array_module_of
from hodiff.engine.autograd import grad as _autograd_grad
from hodiff.engine.complex_values import real_dtype
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable

if TYPE_CHECKING:
    from hodiff.transforms.taylor import JetPass

__all__ = ["generic"]

Coeffs = list[Any]  # c_1..c_K, each (R_k, *shape) or None (zero)


def _as_tuple(y: Any) -> tuple[Any, ...]:
    return y if isinstance(y, tuple) else (y,)


def _leaf(a: Any) -> Variable:
    """A leaf holding ``a`` (not copied); with need_grad when it is float (a graph is wanted)."""
    kind = getattr(getattr(a, "dtype", None), "kind", "f")
    return Variable.from_array(a, need_grad=kind in "fc", copy=False)


def generic(jp: JetPass, f: Function, ins: list[Coeffs | None], outs: list[Any]) -> list[Any]:
    """Any primitive: per direction, the derivatives in ``t`` of ``f`` along its input
    curves ``x(t) = x0 + sum_k x_k t^k / k!``, nested first derivatives (each the transposed
    vjp of the previous one). Exact to any order and differentiable; slower than a rule.
    At a collapsed top, the top coefficient enters through one more first derivative (the
    rule is linear in it).
    """
    kk = jp.kk
    sizes = [c.shape[0] for s in ins if s is not None for c in s[:kk] if c is not None]
    if not sizes:  # every coefficient zero
        return [None] * len(outs)
    nr = max(sizes)
    low = kk - 1 if jp.collapsed else kk  # orders computed per direction
    # per direction r: per output, coefficients 1..kk
    per = [_curve_derivatives(jp, f, _curves(ins, r, low, kk), kk) for r in range(nr)]
    result = [_stacked(jp, per, i, nr) for i in range(len(outs))]
    if jp.collapsed:  # + J x_K, from the summed top coefficients
        _add_top(jp, f, ins, result)
    return result


def _curves(ins: list[Coeffs | None], r: int, low: int, kk: int) -> list[Coeffs | None]:
    """Per input, direction ``r``'s coefficients 1..``low`` (the rest zero), or None."""
    curves: list[Coeffs | None] = []
    for s in ins:
        if s is None:
            curves.append(None)
            continue
        curves.append([_row(c, r) for c in s[:low]] + [None] * (kk - low))
    return curves


def _stacked(jp: JetPass, per: list[list[list[Any]]], i: int, nr: int) -> Coeffs:
    """Output ``i``'s coefficients 1..K, its ``nr`` directions' rows stacked on the direction
    axis (summed at a collapsed top); None where a row is zero.
    """
    coeffs: Coeffs = []
    for k in range(1, jp.kk + 1):
        rows = [per[r][i][k - 1] for r in range(nr)]
        if any(v is None for v in rows):
            coeffs.append(None)
            continue
        c = F.stack(*rows, axis=0) if nr > 1 else F.reshape(rows[0], (1, *rows[0].shape))
        if jp.top(k):
            c = jp.sum_dirs(c)
        coeffs.append(c)
    return coeffs


def _add_top(jp: JetPass, f: Function, ins: list[Coeffs | None], result: list[Any]) -> None:
    """Adds ``J x_K`` to each output's top coefficient, from the inputs' summed tops."""
    kk = jp.kk
    tops: list[Coeffs | None] = [
        None if s is None or s[kk - 1] is None else [_row(s[kk - 1], 0)] for s in ins
    ]
    if not any(top is not None for top in tops):
        return
    d1 = _curve_derivatives(jp, f, tops, 1)
    for i, di in enumerate(d1):
        if di[0] is None:
            continue
        t = F.reshape(di[0], (1, *di[0].shape))
        old = result[i][kk - 1]
        result[i][kk - 1] = t if old is None else old + t


def _row(c: Any, r: int) -> Any:
    return None if c is None else c[r]


def _curve_derivatives(
    jp: JetPass, f: Function, curves: list[Coeffs | None], kk: int
) -> list[list[Any]]:
    """``d^k/dt^k f(x(t))`` at ``t = 0`` for ``k = 1..K``, per output (None: zero)."""
    with api.recording():
        dtypes = [real_dtype(x.dtype) for x in f.inputs if x.dtype.kind in "fc"]
        xp = array_module_of(*f.inputs)
        t = Variable.from_array(xp.zeros((), dtype=dtypes[0] if dtypes else np.float64), True)
        args = [_on_curve(jp, x, cs, t) for x, cs in zip(f.inputs, curves, strict=True)]
        g = _batching.renew(f)
        ys = _as_tuple(g(*args))
        out = [_t_derivatives(y, t, kk) for y in ys]
    if not jp.record:
        out = [[None if d is None else d.d for d in ds] for ds in out]
    return out


def _on_curve(jp: JetPass, x: Variable, cs: Coeffs | None, t: Variable) -> Any:
    """``x(t) = x0 + sum_k x_k t^k / k!`` (``cs``: ``x_1..x_K``, None where zero), by
    Horner's scheme; ``x0`` itself when every coefficient is zero.
    """
    x0 = jp.val(x) if jp.record else _leaf(api.value_of(x))
    if cs is None or all(c is None for c in cs):
        return x0
    acc: Any = None  # Horner: x1 + t/2 (x2 + t/3 (x3 + ...))
    for k in range(len(cs), 0, -1):
        c = cs[k - 1]
        if c is not None and not jp.record:
            c = _const(c)
        if acc is None:
            acc = c
        elif c is None:
            acc = acc * t * (1.0 / (k + 1))
        else:
            acc = c + acc * t * (1.0 / (k + 1))
    return x0 + acc * t if acc is not None else x0


def _t_derivatives(y: Any, t: Variable, kk: int) -> list[Any]:
    """``d^k y / dt^k`` for ``k = 1..kk``, nested first derivatives (None: zero)."""
    derivs: list[Any] = []
    cur: Any = y
    for _ in range(kk):
        cur = None if cur is None else _d_dt(cur, t)
        derivs.append(cur)
    return derivs


def _const(a: Any) -> Any:
    return Variable.from_array(a, need_grad=False, copy=False)


def _d_dt(v: Variable, t: Variable) -> Variable | None:
    """``dv/dt`` for a scalar ``t``: the transpose of ``u -> (dv/dt)^T u``."""
    from_array = Variable.from_array
    if v.dtype.kind not in "fc":
        return None
    xp = array_module_of(v)
    u = from_array(xp.zeros(v.shape, dtype=v.dtype), need_grad=True)
    (w,) = _grad([v], [t], [u])
    if w is None:
        return None
    (d,) = _grad([w], [u], None)
    return d


def _grad(outs: list[Variable], wrt: list[Variable], seeds: list[Any] | None) -> list[Any]:
    return _autograd_grad(outs, wrt, grad_outputs=seeds, allow_unused=True)
