"""Forward and Taylor mode: jets pushed through the graph of a call, rule by rule.

A *jet* of a variable ``x`` along a curve ``x(t)`` is its value ``x0 = x(0)`` and the
derivatives ``x_k = d^k x / dt^k (0)`` for ``k = 1..K`` (factorial-scaled, as
``jax.experimental.jet``). Here every coefficient carries a leading *direction* axis:
``x_k`` has shape ``(nr, *x.shape)`` for ``nr`` curves through the same point, so that one
pass computes the jets of many directions (the ``D`` unit vectors of a Laplacian) with
one matrix product per layer.

How a pass runs: ``f`` is called once on the primals (recording its graph); then the
nodes that depend on the primals are visited in order, and each node's rule computes its
outputs' coefficients from its inputs' coefficients. The rules are written in hodiff
functions, so:

- with ``create_graph=False`` they run in raw mode on arrays (nothing recorded);
- with ``create_graph=True`` they run on Variables and record a graph connected to
  everything ``f`` uses (its parameters too), differentiable again at any order.

Each primitive declares the kind of its rule in its class body (``taylor = ...``, beside
``batch_rule``; :attr:`hodiff.engine.function.Function.taylor`), and the kinds are
implemented here, once: a ``"linear"`` primitive applies to each coefficient (its linear
part, :meth:`Function.linear_part`, through its ``batch_rule``, the rule that makes it
carry a leading axis for ``hd.vmap``), in the inputs ``linear_in``; a ``"multilinear"``
one follows Leibniz' rule in its ``linear_in`` inputs (plus a bias); an ``"elementwise"``
one follows from its derivative ``z = f'(x)`` (its ``dydx``, the fact its backward reads
too), itself a graph of primitives whose jet is computed the same way: ``y' = z x'``
gives ``y_k = sum_j C(k-1, j) z_j x_{k-j}``; a ``"composite"`` one is the jet of its
``composition``, a short expression in other primitives; a ``"constant"`` one (and any
non-differentiable one) has no coefficient. A primitive that declares nothing takes
:func:`_generic`: nested first derivatives in ``t`` of the primitive along its input
curves (each a transposed vjp), exact and differentiable, only slower; :func:`rule_kinds`
says which rule each primitive takes, and tests/test_taylor_facts.py pins the list of
those on the generic one. A rule module never imports this one: the class says what it
is, the transform asks.

A class may also bring its *own* rule (kind ``"own"``; ``div2``, ``max``): a method
``jet_rule(self, jp, ins, outs)`` (``jp`` the :class:`JetPass`, ``ins`` per input its
coefficients or None, ``outs`` the output Variables, None where dead) returning per output
its coefficients 1..K (None where zero), computed in the pass's mode (raw arrays, or
recorded Variables when ``jp.record``); primal values are read through ``jp.val``, and a
recorded rule that recomputes its outputs' values may give them to the later rules in
place of the outputs (``jp.alias``); the pass then links every later node that reads an
alias again to it (:meth:`Function.relinked`, without running it), so that the rules after
it read its values too. A node that is a whole sub-computation uses it:
``hd.checkpoint``'s node pushes the jet through its recomputed segment
(:meth:`hodiff.transforms.checkpointing.node.Checkpoint.jet_rule`).

*Collapsed* Taylor mode (Dangel et al., 2025): when only the sum over directions of the
top coefficient is wanted (a Laplacian is ``sum_d y_2[d]``), that coefficient is carried
summed, with a leading axis of 1. Every rule is linear in the top coefficient of its
inputs, ``y_K = J x_K + N(x_1..x_{K-1})``, so the sum commutes through it: the terms
with a top coefficient are kept as they are, the others (products of lower-order,
per-direction coefficients) are summed over the direction axis.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from math import comb
from typing import Any

import numpy as np

from hodiff import functions as F
from hodiff.engine import api
from hodiff.engine.arguments import array_module_of
from hodiff.engine.context import auto_forward
from hodiff.engine.function import Elementwise, Function
from hodiff.engine.variable import Variable
from hodiff.functions import linalg as _linalg
from hodiff.functions import state as _state
from hodiff.transforms.generic_jet import generic as _generic

__all__ = ["JetPass", "clock", "jet", "push", "rule_kind", "rule_kinds", "run_jet"]

Coeffs = list[Any]  # c_1..c_K, each (R_k, *shape) or None (zero)


#: the rule kinds a primitive may declare in its class body (``taylor = ...``)
KINDS = ("linear", "multilinear", "elementwise", "composite", "constant")


def rule_kinds() -> dict[str, str]:
    """Which rule each primitive takes, by class name, as its class declares it (see
    :attr:`hodiff.engine.function.Function.taylor`): ``"linear"``, ``"multilinear"``,
    ``"elementwise"``, ``"composite"``, ``"constant"``, ``"own"`` (the class's ``jet_rule``
    method) or ``"generic"`` (it declares none: :func:`_generic`, exact but slow).
    """
    out = {}
    for cls in _all_primitives(Function):
        out[cls.__name__] = _kind(cls)
    return dict(sorted(out.items()))


def rule_kind(cls: type) -> str:
    """The rule kind of the primitive class ``cls`` (see :func:`rule_kinds`); ``"generic"``
    is derived from its backward rule (nested vjps), so it cannot check that rule.
    """
    return _kind(cls)


def _all_primitives(base: type) -> list[type]:
    found: list[type] = []
    stack: list[type] = list(base.__subclasses__())
    while stack:
        c = stack.pop()
        stack.extend(c.__subclasses__())
        if not c.__name__.startswith("_") and c is not Elementwise:
            found.append(c)
    return found


def _kind(cls: Any) -> str:
    """The rule ``cls`` declares (a non-differentiable primitive: ``"constant"``); a kind it
    declares without the method that kind reads raises TypeError naming it.
    """
    if not cls.differentiable:
        return "constant"
    if callable(getattr(cls, "jet_rule", None)):
        return "own"
    kind: str = cls.taylor
    if not kind:
        return "generic"
    if kind not in KINDS:
        raise TypeError(f"{cls.__name__}: taylor = {kind!r} is not a rule kind {KINDS}")
    if kind == "composite" and not callable(getattr(cls, "composition", None)):
        raise TypeError(f"{cls.__name__}: taylor = 'composite' needs a method composition")
    if kind == "elementwise" and not _has_dydx(cls):
        return "generic"  # an Elementwise whose backward is its own, without dydx
    return kind


def _has_dydx(cls: Any) -> bool:
    dydx = getattr(cls, "dydx", None)
    return callable(dydx) and dydx is not Elementwise.dydx


# ---------------------------------------------------------------- the pass
class JetPass:
    """One jet pass of order ``K`` over a recorded graph (see the module's docstring).

    ``collapsed``: the top coefficient is carried summed over the directions (axis of 1).
    ``record``: rules run on Variables and record (``create_graph=True``); otherwise in raw
    mode on arrays.
    """

    def __init__(self, order: int, collapsed: bool = False, record: bool = False) -> None:
        self.kk = order
        self.collapsed = collapsed
        self.record = record
        self.series: dict[Variable, Coeffs] = {}
        #: recorded passes: per primal, a Variable of the same value that later rules read
        #: in its place (set by a rule that recomputed it, e.g. a checkpoint's jet, so the
        #: recorded graph reaches what the primal depends on through that rule's nodes only)
        self.alias: dict[Variable, Variable] = {}

    # -- values of primals as the rules see them
    def val(self, v: Variable) -> Any:
        if self.record:
            return self.alias.get(v, v)
        return api.value_of(v)

    def run(self, nodes: Sequence[Function], keep: Sequence[Variable] | None = None) -> None:
        """Visits ``nodes`` (inputs before consumers) and fills :attr:`series`.

        With ``keep`` (the variables whose coefficients are wanted), the coefficients of
        every other variable are dropped once its last consumer among ``nodes`` has run,
        so that a plain pass holds only a few layers' coefficients at a time.
        """
        uses = None if keep is None else self._uses(nodes, keep)
        series = self.series
        token = None if self.record else api.raw_mode()
        if token is not None:
            token.__enter__()
        try:
            alias = self.alias
            for f in nodes:
                if alias and self.record:
                    self._follow_alias(f)
                ins = [series.get(x) for x in f.inputs]
                if all(s is None for s in ins):
                    continue
                outs = api.outputs_of(f)
                self._store(outs, _rule(self, f, ins, outs))
                if uses is not None:
                    self._release(f, uses)
        finally:
            if token is not None:
                token.__exit__()

    def _store(self, outs: list[Any], result: list[Any]) -> None:
        """Keeps each output's coefficients unless every one is zero (None)."""
        series = self.series
        for o, s in zip(outs, result, strict=True):
            if o is not None and s is not None and any(c is not None for c in s):
                series[o] = s

    def _release(self, f: Function, uses: dict[Variable, int]) -> None:
        """Counts ``f``'s reads of its inputs and drops the coefficients (and aliases) of
        those it was the last to read.
        """
        for x in f.inputs:
            left = uses[x] - 1
            uses[x] = left
            if left == 0:
                self.series.pop(x, None)
                self.alias.pop(x, None)

    @staticmethod
    def _uses(nodes: Sequence[Function], keep: Sequence[Variable]) -> dict[Variable, int]:
        """Per variable, how many of ``nodes`` read it; ``keep`` counted past any release."""
        uses: dict[Variable, int] = {}
        for f in nodes:
            for x in f.inputs:
                uses[x] = uses.get(x, 0) + 1
        for v in keep:
            uses[v] = uses.get(v, 0) + len(nodes) + 1  # never dropped
        return uses

    def _follow_alias(self, f: Function) -> None:
        """Gives ``f``'s outputs aliases when one of its inputs has one: ``f`` linked again to
        the aliases (:meth:`Function.relinked`: its own output arrays, no forward), so that
        the values every later rule reads, downstream of a recomputed value too (the loss
        after a network of checkpoints), reach what they depend on through the alias (the
        jet's checkpoints) and not through the first graph (the values' checkpoints, which
        the reverse pass would otherwise run again). A node with its own rule sets its own.
        """
        alias = self.alias
        got = [alias.get(x) for x in f.inputs]
        if all(a is None for a in got) or _kind(type(f)) == "own":
            return
        made = f.relinked([x if a is None else a for x, a in zip(f.inputs, got, strict=True)])
        if made is None:
            return
        for o, y in zip(api.outputs_of(f), made, strict=True):
            if o is not None:
                alias[o] = y

    # -- helpers for rules
    def top(self, k: int) -> bool:
        """Whether order ``k`` is the collapsed top coefficient."""
        return self.collapsed and k == self.kk

    def sum_dirs(self, c: Any) -> Any:
        """``c`` summed over the direction axis, kept as an axis of 1."""
        return F.sum(c, axis=0, keepdims=True)

    def sum_prod(self, a: Any, b: Any) -> Any:
        """``sum_r a[r] b[r]``, kept as an axis of 1, without the ``(R, ...)`` product in
        memory on arrays (``einsum``).
        """
        if not self.record and type(a) is np.ndarray and type(b) is np.ndarray:
            return np.einsum("r...,r...->...", a, b)[None]
        return F.sum(a * b, axis=0, keepdims=True)

    def combine(self, k: int, per_dir: list[Any], with_top: list[Any]) -> Any:
        """The coefficient of order ``k`` from terms without (``per_dir``) and with
        (``with_top``) a top coefficient: at a collapsed top the first are summed over the
        directions. None if there is no term.
        """
        terms = [t for t in per_dir if t is not None]
        if terms and self.top(k):
            terms = [self.sum_dirs(_add_all(terms))]
        terms += [t for t in with_top if t is not None]
        return _add_all(terms) if terms else None


def _add_all(terms: list[Any]) -> Any:
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _rule(jp: JetPass, f: Function, ins: list[Coeffs | None], outs: list[Any]) -> list[Any]:
    kind = _kind(type(f))
    if kind == "constant":
        return [None] * len(outs)
    if kind == "linear":
        return _linear(jp, f, ins, outs)
    if kind == "multilinear":
        return _multilinear(jp, f, ins, outs)
    if kind == "own":
        return f.jet_rule(jp, ins, outs)  # type: ignore[attr-defined,no-any-return]
    if kind == "composite":
        return _composite(jp, f, ins, outs)
    if kind == "elementwise":
        return [_elementwise(jp, f, ins[0], outs[0])]
    return _generic(jp, f, ins, outs)


def _as_tuple(y: Any) -> tuple[Any, ...]:
    return tuple(y) if isinstance(y, tuple | list) else (y,)


def _batched(f: Function, inputs: list[Any], axes: list[int | None]) -> tuple[Any, ...]:
    """``f`` run on inputs of which those with axis 0 carry a leading direction axis."""
    return _as_tuple(type(f).batch_rule(f, inputs, axes))  # type: ignore[attr-defined]


def _zeros(jp: JetPass, x: Variable, r: int) -> Any:
    xp = array_module_of(x)
    return xp.zeros((r, *x.shape), dtype=x.dtype if x.dtype.kind in "fc" else np.float64)


def _dirs(jp: JetPass, ins: list[Coeffs | None], k: int) -> int:
    """The direction count of order ``k`` among the inputs' coefficients."""
    for s in ins:
        if s is not None and s[k - 1] is not None:
            return int(s[k - 1].shape[0])
    return 1


def _linear(jp: JetPass, f: Function, ins: list[Coeffs | None], outs: list[Any]) -> list[Any]:
    """``y_k = L(x_k)``, ``L`` the primitive's linear part applied through its ``batch_rule``
    to the stacked coefficients of the inputs it declares (``linear_in``); its other inputs
    do not move the output (indices, masks) and enter as values.
    """
    which = f.linear_in
    g = f.linear_part()
    result: list[Coeffs] = [[] for _ in outs]
    for k in range(1, jp.kk + 1):
        cs = [
            None if s is None or (which is not None and i not in which) else s[k - 1]
            for i, s in enumerate(ins)
        ]
        if all(c is None for c in cs):
            for r in result:
                r.append(None)
            continue
        r_k = _dirs(jp, ins, k)
        args: list[Any] = []
        axes: list[int | None] = []
        for i, (x, c) in enumerate(zip(f.inputs, cs, strict=True)):
            if which is not None and i not in which:
                args.append(jp.val(x))
                axes.append(None)
            elif c is None:
                args.append(_zeros(jp, x, r_k))
                axes.append(0)
            else:
                args.append(c)
                axes.append(0)
        ys = _batched(g, args, axes)
        for r, y in zip(result, ys, strict=True):
            r.append(y)
    return result


def _multilinear(jp: JetPass, f: Function, ins: list[Coeffs | None], outs: list[Any]) -> list[Any]:
    """Leibniz' rule in the ``n`` inputs ``linear_in`` (all when None)::

        y_k = sum_{j_1 + ... + j_n = k} k! / (j_1! ... j_n!) f(x1_{j_1}, ..., xn_{j_n})

    (``x_0`` the value), plus each other input's own coefficient (a bias, added). A term
    with the whole order on one input holds its top coefficient; the others are products
    of lower orders, summed over the directions at a collapsed top.
    """
    which = f.linear_in if f.linear_in is not None else tuple(range(len(ins)))
    vals = [jp.val(f.inputs[i]) for i in which]
    series = [ins[i] for i in which]
    out: Coeffs = []
    for k in range(1, jp.kk + 1):
        per_dir, with_top = _leibniz(jp, f, vals, series, k)
        for i, s in enumerate(ins):
            if i not in which and s is not None and s[k - 1] is not None:
                with_top.append(_bias_term(f, s[k - 1]))
        out.append(jp.combine(k, per_dir, with_top))
    return [out]


def _leibniz(
    jp: JetPass, f: Function, vals: list[Any], series: list[Coeffs | None], k: int
) -> tuple[list[Any], list[Any]]:
    """The terms of Leibniz' rule of order ``k`` in the multilinear inputs (``vals``,
    their coefficients ``series``): those without and those with a top coefficient.
    """
    per_dir: list[Any] = []
    with_top: list[Any] = []
    for js in _compositions(k, len(vals)):
        cs = [
            v if j == 0 else (None if s is None else s[j - 1])
            for v, s, j in zip(vals, series, js, strict=True)
        ]
        if any(c is None for c in cs):
            continue
        t = _product(jp, f, cs, js)
        m = math.factorial(k) // math.prod(math.factorial(j) for j in js)
        t = t if m == 1 else t * float(m)
        (with_top if k in js else per_dir).append(t)
    return per_dir, with_top


def _compositions(k: int, n: int) -> list[tuple[int, ...]]:
    """Every ``(j_1, ..., j_n)`` of non-negative integers with sum ``k``."""
    if n == 1:
        return [(k,)]
    return [(j, *rest) for j in range(k, -1, -1) for rest in _compositions(k - j, n - 1)]


def _product(jp: JetPass, f: Function, cs: list[Any], js: tuple[int, ...]) -> Any:
    """``f`` of the multilinear inputs ``cs`` (values where ``j = 0``, coefficients with a
    direction axis elsewhere); an affine weight times a coefficient of ``x`` as one GEMM.
    """
    if len(cs) == 2 and js[1] == 0:
        ca, cb = cs
        if _rows_repeat(f, ca):
            return _on_one_row(f, ca, cb)  # the same direction for every row (a Laplacian's)
        if _plain_affine(jp, f, ca, cb):
            return (ca.reshape(-1, ca.shape[-1]) @ cb).reshape((*ca.shape[:-1], cb.shape[1]))
    (t,) = _batched(f, cs, [None if j == 0 else 0 for j in js])
    return t


def _plain_affine(jp: JetPass, f: Function, c: Any, w: Any) -> bool:
    """Whether ``affine``'s ``x`` coefficient times its weight is one GEMM on arrays (a plain
    pass, ``x`` of ``(N, K)``, ``w`` of ``(K, M)``), done without the batching rule's calls.
    """
    return (
        not jp.record
        and type(f) is _linalg.Affine
        and type(c) is np.ndarray
        and type(w) is np.ndarray
        and c.ndim == 3
        and w.ndim == 2
        and c.dtype == w.dtype
        and f._axis(c.ndim - 1) == 1  # type: ignore[attr-defined]
    )


def _rows_repeat(f: Function, c: Any) -> bool:
    """Whether ``c`` (a numpy coefficient ``(R, N, K)`` of ``affine``'s ``x``) repeats one row
    for every ``n`` (a broadcast view, stride 0): then one row is computed and broadcast.
    """
    return (
        type(f) is _linalg.Affine
        and type(c) is np.ndarray
        and c.ndim == 3
        and c.strides[1] == 0
        and f._axis(c.ndim - 1) == 1  # type: ignore[attr-defined]
    )


def _on_one_row(f: Function, c: Any, w: Any) -> Any:
    (t,) = _batched(f, [c[:, :1], w], [0, None])
    shape = (c.shape[0], c.shape[1], *t.shape[2:])
    return F.broadcast(t, shape) if isinstance(t, Variable) else np.broadcast_to(t, shape)


def _bias_term(f: Function, c: Any) -> Any:
    """A bias coefficient ``(nr, *b.shape)`` broadcast as the function adds its bias."""
    y = f.output_shape(0)
    b_shape = tuple(f.inputs[2].shape)
    if isinstance(f, _linalg.Affine):
        lead = y[: len(y) - len(f.inputs[1].shape[1:])]
        c = F.reshape(c, (c.shape[0], *(1,) * len(lead), *f.inputs[1].shape[1:]))
        return F.broadcast(c, (c.shape[0], *y))
    # convolution-like: bias (C,) over axis base_axis of the output
    ba = getattr(f, "base_axis", 1)
    ba = ba + len(y) if ba < 0 else ba
    if getattr(f, "channel_last", False):
        ba = len(y) - 1
    shape = [c.shape[0]] + [1] * len(y)
    shape[1 + ba] = b_shape[0]
    return F.broadcast(F.reshape(c, tuple(shape)), (c.shape[0], *y))


# ---------------------------------------------------------------- elementwise
def _derivative(jp: JetPass, f: Function, x: Any, y: Any) -> Any:
    """``f'(x)`` elementwise: the class's ``dydx``, the fact its backward reads too."""
    return f.dydx(x, y)  # type: ignore[attr-defined]


def _elementwise(jp: JetPass, f: Function, sx: Coeffs | None, y: Variable) -> Coeffs:
    """``y = f(x)`` elementwise, by Faa di Bruno's formula::

        y_k = sum_{m=1..k} f^(m)(x0) B_{k,m}(x_1, ..., x_{k-m+1})

    (``B`` the partial Bell polynomials: ``y2 = f^(1) x2 + f^(2) x1^2``, ``y3 = f^(1) x3 +
    3 f^(2) x1 x2 + f^(3) x1^3``). The derivatives ``f^(m)(x0)`` are those of a jet along
    the unit curve ``x0 + t`` (one direction: cheap), computed by :func:`_recurrence`. At a
    collapsed top the Bell polynomials (``m >= 2``: lower orders only) are summed over the
    directions before the product with ``f^(m)``.
    """
    assert sx is not None
    x = f.inputs[0]
    if f.piecewise_linear:  # a locally constant dydx: y_k = dydx(x0) x_k
        m = _derivative(jp, f, jp.val(x), jp.val(y))
        return [None if c is None else c * m for c in sx]
    kk = jp.kk
    ds = _unit_derivatives(jp, f, x, y)  # f^(1), f^(2), ...
    ys: Coeffs = []
    table: dict[tuple[int, int], Any] = {(0, 0): _ONE}  # B_{n,m}, per direction
    for k in range(1, kk + 1):
        terms = []
        for m in range(1, k + 1):
            d = ds[m - 1]
            summed = jp.top(k) and m >= 2  # sum_r B_{k,m}[r], without B_{k,m} in memory
            total = _bell(jp, sx, table, k, m, summed)
            if not summed:
                table[(k, m)] = total
            if d is not None and total is not None:
                terms.append(d * total)
        ys.append(_add_all(terms) if terms else None)
    return ys


_ONE = object()  # B_{0,0} = 1


def _unit_derivatives(jp: JetPass, f: Function, x: Variable, y: Variable) -> list[Any]:
    """``f^(1)(x0), ..., f^(K)(x0)``: ``dydx`` and the jet of its graph along the unit
    curve ``x0 + t`` (one direction), by :func:`_recurrence`.
    """
    kk = jp.kk
    z0 = _derivative(jp, f, jp.val(x), jp.val(y))
    ds: list[Any] = [z0]
    if kk >= 2:
        xp = array_module_of(x)
        ones = xp.ones((1, *x.shape), dtype=x.dtype if x.dtype.kind in "fc" else np.float64)
        unit = JetPass(kk, collapsed=False, record=jp.record)
        unit.alias = jp.alias  # it reads the primal values as jp does
        ds += [None if d is None else d[0] for d in _recurrence(unit, f, [ones], y, z0, True)[1:]]
    return ds


def _bell(
    jp: JetPass,
    sx: Coeffs,
    table: dict[tuple[int, int], Any],
    k: int,
    m: int,
    summed: bool,
) -> Any:
    """``B_{k,m}(x_1, ..., x_{k-m+1}) = sum_i C(k-1, i-1) x_i B_{k-i,m-1}`` per direction
    (from ``table``, the lower ones), or summed over the directions (``summed``); None
    where every term is zero.
    """
    total = None
    for i in range(1, k - m + 2):
        xi, b = sx[i - 1], table.get((k - i, m - 1))
        if xi is None or b is None:
            continue
        if summed:  # sum_r B_{k,m}[r]
            term = jp.sum_prod(xi, b)
        elif b is _ONE:
            term = xi
        else:
            term = xi * b
        c = comb(k - 1, i - 1)
        term = term if c == 1 else term * float(c)
        total = term if total is None else total + term
    return total


def _recurrence(
    jp: JetPass, f: Function, sx: Coeffs, y: Variable, z0: Any, unit: bool = False
) -> Coeffs:
    """``y = f(x)`` elementwise: ``y_k = sum_{j<k} C(k-1, j) z_j x_{k-j}`` (from ``y' = z x'``)
    with ``z = f'(x)``, whose coefficients come from a jet of the derivative's own graph.
    ``sx`` may be shorter than the order (the rest zero). ``unit``: ``sx`` is the unit
    curve ``x0 + t`` (``x_1`` ones, one direction), and a product ``z_j x_1`` is ``z_j``
    itself (a recorded graph does not hold the ones, a constant of ``x``'s size).
    """
    x = f.inputs[0]
    sx = list(sx) + [None] * (jp.kk - len(sx))
    ys: Coeffs = []
    zs: Coeffs = []  # z_1.. as they become computable
    one = (1, *x.shape)
    for k in range(1, jp.kk + 1):
        if k >= 2:
            zs = _derivative_series(jp, f, x, y, sx[: k - 1], ys[: k - 1])
        per_dir: list[Any] = []
        with_top: list[Any] = []
        for j in range(k):
            cx = sx[k - j - 1]
            cz = z0 if j == 0 else zs[j - 1]
            if cx is None or cz is None:
                continue
            if (
                unit
                and j == k - 1
                and tuple(getattr(cz, "shape", ())) == (one[1:] if j == 0 else one)
                and cz.dtype == cx.dtype  # the product would be cz itself
            ):
                t = F.reshape(cz, one) if j == 0 else cz  # z_j x_1, x_1 ones
            else:
                t = cz * cx
            if comb(k - 1, j) != 1:
                t = t * float(comb(k - 1, j))
            (with_top if j == 0 else per_dir).append(t)
        ys.append(jp.combine(k, per_dir, with_top))
    return ys


def _derivative_series(
    jp: JetPass, f: Function, x: Variable, y: Variable, sx: Coeffs, sy: Coeffs
) -> Coeffs:
    """The coefficients 1..len(sx) of ``z(t) = f'(x(t))`` (all per direction)."""
    with api.recording():
        xv = jp.val(x) if jp.record else _leaf(api.value_of(x))
        yv = jp.val(y) if jp.record else _leaf(api.value_of(y))
        start = api.clock()
        z = _derivative(jp, f, xv, yv)
    if not isinstance(z, Variable):  # a constant derivative
        return [None] * len(sx)
    nodes = api.nodes_since([z], start)
    sub = JetPass(len(sx), collapsed=False, record=jp.record)
    sub.series[xv] = sx
    sub.series[yv] = sy
    sub.run(nodes)
    return sub.series.get(z, [None] * len(sx))


def _leaf(a: Any) -> Variable:
    """A leaf holding ``a`` (not copied); with need_grad when it is float (a graph is wanted)."""
    kind = getattr(getattr(a, "dtype", None), "kind", "f")
    return Variable.from_array(a, need_grad=kind in "fc", copy=False)


# ---------------------------------------------------------------- composite rules
def _composite(jp: JetPass, f: Function, ins: list[Coeffs | None], outs: list[Any]) -> list[Any]:
    with api.recording():
        xs = [jp.val(x) if jp.record else _leaf(api.value_of(x)) for x in f.inputs]
        start = api.clock()
        y = f.composition(*xs)  # type: ignore[attr-defined]
    sub = JetPass(jp.kk, collapsed=jp.collapsed, record=jp.record)
    for x, s in zip(xs, ins, strict=True):
        if s is not None:
            sub.series[x] = s
    sub.run(api.nodes_since([y], start))
    return [sub.series.get(y)]


def run_jet(
    f: Callable[..., Any],
    primals: Sequence[Variable],
    series: Sequence[Coeffs | None],
    order: int,
    collapsed: bool = False,
    record: bool = False,
    name: str = "jet",
    check: Callable[[Any], None] | None = None,
) -> tuple[Any, list[Coeffs]]:
    """Calls ``f(*primals)`` and pushes ``series`` (per primal, coefficients with a leading
    direction axis) through its graph. Returns ``f``'s output(s) and, per output, its
    coefficients 1..order (None where zero). ``check(y)`` runs on the output before the pass
    (a caller's validation: an error raises before any coefficient is computed).
    """
    with api.recording(), _computing():
        start = api.clock()
        y = f(*primals)
    for o in _as_tuple(y):
        if not isinstance(o, Variable):
            raise TypeError(f"{name}: f must return a hodiff.Variable, got {type(o).__name__}")
    if check is not None:
        check(y)
    return y, push(y, start, primals, series, order, collapsed, record)


def _computing() -> Any:
    """Define-by-run for the call of ``f`` (the pass reads values), but while a compiler
    records (``hd.jit``) the static mode stays: the pass records on Variables.
    """
    return contextlib.nullcontext() if api.is_symbolic() else auto_forward(True)


def push(
    y: Any,
    start: int,
    primals: Sequence[Variable],
    series: Sequence[Coeffs | None],
    order: int,
    collapsed: bool = False,
    record: bool = False,
) -> list[Coeffs]:
    """The jet pass over the nodes made since the clock read ``start`` (see :func:`run_jet`)
    towards the output(s) ``y``.
    """
    ys = _as_tuple(y)
    jp = JetPass(order, collapsed=collapsed, record=record)
    for x, s in zip(primals, series, strict=True):
        if s is not None:
            jp.series[x] = list(s)
    with _state.replaying():  # rules that run a node again update no state (f's call did)
        jp.run(api.nodes_since(ys, start), keep=ys)
    return [jp.series.get(o) or [None] * order for o in ys]


def clock() -> int:
    """A reading of the node clock: nodes made after it have a larger ``seq``."""
    return api.clock()


# ---------------------------------------------------------------- the public function
def jet(
    f: Callable[..., Variable],
    primals: Any,
    series: Any,
    create_graph: bool = False,
) -> tuple[Any, list[Any]]:
    """Taylor mode: the derivatives of ``f`` along a curve, in one forward pass.

    As ``jax.experimental.jet.jet`` (factorial-scaled): for a curve ``x(t)`` through the
    primals with derivatives ``x1 = x'(0), x2 = x''(0), ..., xK`` (``series``), returns
    ``y0 = f(x(0))`` and ``[y1, ..., yK]`` with ``yk = d^k/dt^k f(x(t))`` at ``t = 0``::

        y1 = J x1
        y2 = J x2 + D2f[x1, x1]
        y3 = J x3 + 3 D2f[x1, x2] + D3f[x1, x1, x1]

    Args:
        f: called as ``f(*primals)`` with Variables; returns a Variable.
        primals: a tuple of arrays (or Variables, scalars), one per argument of ``f``.
        series: a tuple, one per primal, of lists of ``K`` arrays of that primal's shape
            (every list of the same length ``K``).
        create_graph: return Variables recorded in a graph (differentiable again, with
            respect to the primals when they are Variables and to everything ``f`` uses);
            otherwise arrays, and nothing is kept.

    Returns:
        ``(y0, [y1, ..., yK])``, each of ``f``'s output shape.

    Raises:
        ValueError: ``series`` does not match ``primals`` (count, length or a shape).

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> y0, (y1, y2) = hd.jet(F.sin, (np.array(0.5),), ([np.array(1.0), np.array(0.0)],))
    >>> bool(np.allclose([y1, y2], [np.cos(0.5), -np.sin(0.5)]))
    True

    """
    if not isinstance(primals, tuple | list):
        raise TypeError(f"jet: primals must be a tuple of arrays, got {type(primals).__name__}")
    if not isinstance(series, tuple | list) or len(series) != len(primals):
        n = len(series) if isinstance(series, tuple | list) else type(series).__name__
        raise ValueError(
            f"jet: series must be a tuple with one list per primal ({len(primals)}), got {n}"
        )
    for i, s in enumerate(series):
        if not isinstance(s, tuple | list):
            raise ValueError(
                f"jet: series[{i}] must be a list of the K coefficients of primals[{i}], got "
                f"{type(s).__name__}; series nests as ([x1, x2, ...], [...], ...), one list "
                f"per primal, e.g. hd.jet(f, (x,), ([v],)) for one primal and order 1"
            )
    create_graph = create_graph or api.is_symbolic()  # inside hd.jit: Variables
    with api.recording():
        xs = [_primal(p, create_graph) for p in primals]
    orders = {len(s) for s in series}
    if len(orders) != 1:
        raise ValueError(f"jet: every list of series must have the same length, got {orders}")
    kk = orders.pop()
    coeffs: list[Coeffs | None] = []
    for i, (x, s) in enumerate(zip(xs, series, strict=True)):
        row: Coeffs = []
        for k, c in enumerate(s):
            shape = tuple(c.shape) if hasattr(c, "shape") else np.shape(c)
            if shape != x.shape:
                raise ValueError(
                    f"jet: series[{i}][{k}] has shape {shape}, primals[{i}] has shape {x.shape}"
                )
            check_tangent("jet", f"series[{i}][{k}]", c, x)
            row.append(_coefficient(c, x, create_graph))
        coeffs.append(row)
    if kk == 0:
        with api.recording():
            y0 = f(*xs)
        _check_output(y0)
        return (y0 if create_graph else _copy(y0.d)), []
    y, outs = run_jet(f, xs, coeffs, kk, collapsed=False, record=create_graph)
    _check_output(y)
    ks = [_squeeze(c, y, create_graph) for c in outs[0]]
    if create_graph:
        return y, ks
    return _copy(y.d), ks


def _check_output(y: Any) -> None:
    if not isinstance(y, Variable):
        raise TypeError(f"jet: f must return one hodiff.Variable, got {type(y).__name__}")


def _primal(p: Any, keep: bool) -> Variable:
    if isinstance(p, Variable):
        if keep:
            return p
        return Variable.from_array(p.d, need_grad=True, copy=False)
    a = p if hasattr(p, "dtype") else np.asarray(p)
    if a.dtype.kind not in "fc":  # complex primals stay complex (their tangents may be)
        a = a.astype(np.float64)
    return Variable.from_array(a, need_grad=True, copy=False)


def check_tangent(name: str, label: str, c: Any, x: Variable, of: str = "its primal") -> None:
    """Raises ValueError when the tangent ``c`` is complex and ``x`` is real: casting it to
    ``x``'s dtype would drop the imaginary part (the derivative along ``a + ib`` of a real
    map is ``J a + i J b``: two real calls).
    """
    dtype = c.dtype if hasattr(c, "dtype") else np.asarray(c).dtype
    if np.dtype(dtype).kind == "c" and np.dtype(x.dtype).kind != "c":
        raise ValueError(
            f"{name}: {label} is complex ({dtype}) but {of} is real ({x.dtype}); the "
            f"imaginary part would be dropped: pass a real tangent, or the real and "
            f"imaginary parts in two calls (J (a + ib) = J a + i J b)"
        )


def _coefficient(c: Any, x: Variable, record: bool) -> Any:
    if isinstance(c, Variable):
        if record:
            return F.reshape(c, (1, *x.shape))
        c = c.d
    xp = array_module_of(x)
    a = xp.asarray(c, dtype=x.dtype)
    return a.reshape((1, *x.shape))


def _squeeze(c: Any, y: Variable, record: bool) -> Any:
    if c is None:
        z = array_module_of(y).zeros(y.shape, dtype=y.dtype)
        return Variable.from_array(z) if record else z
    if record:
        return F.reshape(c, tuple(y.shape))
    return _copy(c.reshape(y.shape))


def _copy(a: Any) -> Any:
    return a.copy() if hasattr(a, "copy") else a
