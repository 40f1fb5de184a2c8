"""``dot_product_test``: forward mode against reverse mode, with no finite differences.

For a map ``G`` with Jacobian ``J`` and random ``v`` (input space), ``u`` (output
space), ``<J v, u> = <v, J^T u>`` holds to rounding; ``J v`` comes from
:func:`hodiff.jvp` (forward mode) and ``J^T u`` from :func:`hodiff.vjp` (reverse
mode), so a forward rule and a backward rule that disagree are caught (Tapenade's
dot-product test). Order ``k`` applies the test to the gradient map of order
``k - 1``: ``G_1 = f``, ``G_(k+1)(x) = d <w_k, G_k(x)> / dx`` (random ``w_k``, the
gradients of every float input concatenated), whose Jacobian is the
``w``-weighted derivative tensor of order ``k + 1`` -- forward-over-reverse
against reverse-over-reverse at order 2.

The forward side must not share the rule under test: a primitive without a Taylor rule
of its own (on the generic rule, a custom one among them) has its forward derived from
its backward, so ``J v`` would be ``(J^T)^T v`` exactly whatever the rule. Where ``G``'s
graph holds such a node, ``<J v, u>`` is instead the derivative of ``t -> <u, G(x + t
v)>`` at 0 by central differences (steps ``h, h/2, h/4, h/8``, Richardson-extrapolated,
``O(h^8)``), whose tolerance is three times its error estimate (the extrapolation's last
correction plus the rounding of the stencil).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

import hodiff.functions as F
from hodiff.engine import api
from hodiff.engine.autograd import grad
from hodiff.engine.context import array_module
from hodiff.engine.variable import Variable
from hodiff.tools.check import EPS64, NOT_PER_EXAMPLE, GradcheckError
from hodiff.transforms.derivatives import jvp, vjp
from hodiff.transforms.taylor import rule_kind
from hodiff.transforms.vectorize import refuse_batched

__all__ = ["DotProductReport", "DotProductRow", "dot_product_test"]

#: the two sides agree when ``|fwd - rev| <= RTOL (|J v| |u| + |v| |J^T u|)`` (Cauchy-Schwarz)
RTOL = 1e3 * EPS64


class DotProductRow(NamedTuple):
    """One order: ``forward = <J v, u>``, ``reverse = <v, J^T u>``; ``by``: how the forward
    side was computed (``"jvp"``, or ``"differences"`` where a node's forward rule comes
    from its backward, naming the primitives).
    """

    order: int
    forward: float
    reverse: float
    error: float
    tolerance: float
    ok: bool
    by: str = "jvp"


@dataclass
class DotProductReport:
    """Result of :func:`dot_product_test`: one row per order; truthy when all agreed."""

    rows: list[DotProductRow] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.ok for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        status = "passed" if self.passed else "FAILED"
        head = (
            f"{'order':>5} {'<J v, u> (forward)':>22} {'<v, J^T u> (reverse)':>22}"
            f" {'error':>10} {'tolerance':>10}  result"
        )
        lines = [f"dot_product_test {status}", head, "-" * len(head)]
        for r in self.rows:
            lines.append(
                f"{r.order:>5} {r.forward:>22.15e} {r.reverse:>22.15e} {r.error:>10.2e}"
                f" {r.tolerance:>10.2e}  {'pass' if r.ok else 'FAIL'}"
            )
        lines += [f"order {r.order}: forward side by {r.by}" for r in self.rows if r.by != "jvp"]
        return "\n".join(lines)


def _numpy(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)


def _flat(ys: Sequence[Variable]) -> Variable:
    parts = [F.reshape(y, (-1,)) for y in ys]
    return parts[0] if len(parts) == 1 else F.concatenate(*parts, axis=0)


def _float64_inputs(inputs: Any) -> tuple[list[Any], list[int]]:
    """The inputs as arrays (floats in float64 copies) and the positions of the float ones;
    raises when there is none.
    """
    raw = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
    xs: list[Any] = []
    for a in raw:
        a = a.d if isinstance(a, Variable) else a
        a = array_module(a).asarray(a)
        xs.append(a.astype(np.float64) if a.dtype.kind == "f" else a)
    diff = [i for i, a in enumerate(xs) if a.dtype.kind == "f"]
    if not diff:
        raise TypeError("dot_product_test: no float input to differentiate")
    return xs, diff


def _order_row(
    k: int,
    g: Callable[..., Variable],
    floats: tuple[Any, ...],
    u: Any,
    v: tuple[Any, ...],
    derived: list[str],
) -> DotProductRow:
    """The test of one order: ``<J v, u>`` by jvp against ``<v, J^T u>`` by vjp of ``g``,
    held to ``RTOL (|J v| |u| + |v| |J^T u|)``; where a node's forward rule is derived from
    its backward (``derived``), ``<J v, u>`` comes from differences of the forward instead.
    """
    _, jv = jvp(g, floats, v)
    _, jtu = vjp(g, floats, u)
    jtu = jtu if isinstance(jtu, tuple) else (jtu,)
    fwd = float((_numpy(jv) * _numpy(u)).sum())
    rev = float(sum((_numpy(a) * _numpy(b)).sum() for a, b in zip(v, jtu, strict=True)))
    norm = np.linalg.norm
    scale = float(norm(_numpy(jv)) * norm(_numpy(u)))
    scale += float(
        np.sqrt(sum(norm(_numpy(a)) ** 2 for a in v))
        * np.sqrt(sum(norm(_numpy(b)) ** 2 for b in jtu))
    )
    tol = RTOL * scale
    by = "jvp"
    if derived:  # J v would be the backward's own transpose: differences of the forward
        fwd, estimate = _differences(g, floats, v, u)
        tol += 3.0 * estimate
        by = f"differences (the forward rule of {', '.join(derived)} is its backward's)"
    err = abs(fwd - rev)
    return DotProductRow(k, fwd, rev, err, tol, bool(err <= tol), by)


def dot_product_test(
    f: Callable[..., Variable],
    inputs: Any,
    order: int = 1,
    seed: int = 0,
    raise_exception: bool = True,
) -> DotProductReport:
    """Checks forward against reverse mode: ``<J v, u> = <v, J^T u>`` at orders 1..``order``.

    Order 1 tests ``f`` itself (``J = df/dx``, ``J v`` by :func:`hodiff.jvp`, ``J^T u``
    by :func:`hodiff.vjp`); order ``k + 1`` tests the gradient map
    ``x -> d <w_k, G_k(x)> / dx`` of order ``k`` (its Jacobian is the Hessian of
    ``<w, f>`` at order 2). Random ``u``, ``v``, ``w`` are drawn from ``seed``; no finite
    differences are involved, so the two sides agree to rounding:
    ``|<J v, u> - <v, J^T u>| <= 1e3 eps_64 (|J v| |u| + |v| |J^T u|)``.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: arrays, scalars or Variables (one, or a tuple); float inputs are
            differentiated (in float64 copies), integer ones passed through.
        order: the highest order tested.
        seed: of the random vectors.
        raise_exception: raise :class:`hodiff.GradcheckError` (its message the table)
            on a mismatch; otherwise return the report (falsy).

    Returns:
        A :class:`DotProductReport`, one row per order, truthy when every order agreed.

    >>> import numpy as np, hodiff.functions as F
    >>> from hodiff.testing import dot_product_test
    >>> report = dot_product_test(lambda x: F.tanh(x) * x, np.array([0.3, -0.7]), order=2)
    >>> bool(report), [r.order for r in report.rows]
    (True, [1, 2])
    """
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"dot_product_test: order must be an integer >= 1, got {order!r}")
    refuse_batched("dot_product_test", "inputs", inputs, NOT_PER_EXAMPLE)
    xs, diff = _float64_inputs(inputs)
    xp = array_module(xs[diff[0]])
    rng = np.random.default_rng(seed)

    def base(*floats: Variable) -> Variable:
        vs: list[Any] = list(xs)
        for slot, i in enumerate(diff):
            vs[i] = floats[slot]
        y = f(*vs)
        if not isinstance(y, Variable):
            raise TypeError(f"dot_product_test: f must return a Variable, got {type(y).__name__}")
        return _flat([y])

    def lift(g: Callable[..., Variable], w: Any) -> Callable[..., Variable]:
        def gradient(*floats: Variable) -> Variable:
            s = F.sum(g(*floats) * w)
            return _flat(grad(s, list(floats), allow_unused=True))

        return gradient

    floats = tuple(xs[i] for i in diff)
    report = DotProductReport()
    g = base
    for k in range(1, order + 1):
        probe = g(*[Variable.from_array(a, need_grad=True) for a in floats])
        shape = probe.shape
        derived = sorted(
            {f.name for f in api.topological_order([probe]) if rule_kind(type(f)) == "generic"}
        )
        del probe
        u = xp.asarray(rng.standard_normal(shape))
        v = tuple(xp.asarray(rng.standard_normal(a.shape)) for a in floats)
        report.rows.append(_order_row(k, g, floats, u, v, derived))
        if k < order:
            g = lift(g, xp.asarray(rng.standard_normal(shape)))
    if raise_exception and not report.passed:
        raise GradcheckError(str(report))
    return report


def _differences(
    g: Callable[..., Variable], floats: Sequence[Any], v: Sequence[Any], u: Any
) -> tuple[float, float]:
    """``d/dt <u, g(x + t v)>`` at 0 by central differences at ``h, h/2, h/4, h/8``
    (``h = 0.02 max(1, rms(x))`` over rms(v)), extrapolated (Richardson, error terms
    ``h^2, h^4, h^6``), and its error estimate: the last correction plus the stencil's
    rounding (``100 eps_64 sum |u g| / h`` through the weights).
    """
    un = _numpy(u)

    def phi(t: float) -> tuple[float, float]:
        xs = [
            Variable.from_array(a + t * b, need_grad=True) for a, b in zip(floats, v, strict=True)
        ]
        y = _numpy(g(*xs).d)
        return float((un * y).sum()), float(np.abs(un * y).sum())

    rms = max(float(np.sqrt(np.mean(_numpy(a) ** 2))) for a in floats)
    vrms = max(float(np.sqrt(np.mean(_numpy(b) ** 2))) for b in v) or 1.0
    h = 0.02 * max(1.0, rms) / vrms
    table, noise = [], []
    for m in range(4):
        hm = h / 2**m
        (p, mp), (q, mq) = phi(hm), phi(-hm)
        table.append((p - q) / (2 * hm))
        noise.append(100 * EPS64 * max(mp, mq) / hm)
    prev = table[-1]
    for p in (2, 4, 6):
        r = 2.0**p
        prev = table[-1]
        table = [(r * b - a) / (r - 1) for a, b in itertools.pairwise(table)]
        noise = [(r * b + a) / (r - 1) for a, b in itertools.pairwise(noise)]
    return table[-1], abs(table[-1] - prev) + noise[-1]
