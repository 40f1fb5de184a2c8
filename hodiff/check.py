"""Checking derivatives of any order against central finite differences.

Order 1 compares the gradient of ``S1(x) = <u, f(x)>`` (``u`` random) with
central differences of ``S1``. Order ``k + 1`` does the same for
``S(k+1)(x) = sum_i <v_i, d Sk / d x_i>`` along fresh random directions ``v``:
the analytic side differentiates the recorded gradient graph once more, the
numeric side re-evaluates ``S(k+1)`` -- calling ``f`` again -- at perturbed
inputs. Every element of every input is checked, in float64.

``gradcheck(..., fast=True)`` (:func:`fast_gradcheck`, as PyTorch's fast mode)
first compares one number per order, the directional derivative along a random
direction ``d`` (all inputs at once):

    analytic = sum_i <dS_k/dx_i, d_i>,  numeric = (S_k(x + eps d) - S_k(x - eps d)) / (2 eps)

two calls of ``S_k`` per order whatever the input size, where the full check
makes two per input element. A wrong derivative is caught with probability one
(a random projection of a nonzero error is nonzero); when it is,
:func:`gradcheck` falls back to the full check, whose table names the elements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hodiff.autograd import grad
from hodiff.context import array_module, auto_forward
from hodiff.functions.reduction import sum as _sum_all
from hodiff.variable import Variable
from hodiff.vmap import refuse_batched

__all__ = [
    "GradcheckError",
    "GradcheckReport",
    "fast_gradcheck",
    "gradcheck",
    "gradgradcheck",
]


class GradcheckError(AssertionError):
    """Raised by :func:`gradcheck` when an analytic derivative disagrees with finite differences."""


@dataclass
class GradcheckReport:
    """Result of :func:`gradcheck`: one row per checked element; truthy when all passed.

    ``rows`` holds ``(input, order, element, analytic, numeric, error, ok)``.
    """

    rows: list[tuple[int, int, tuple[int, ...], float, float, float, bool]] = field(
        default_factory=list
    )
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def passed(self) -> bool:
        return all(r[6] for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    def failures(self) -> list[tuple[int, int, tuple[int, ...], float, float, float, bool]]:
        return [r for r in self.rows if not r[6]]

    def max_errors(self, order: int) -> tuple[float, float]:
        """(max absolute error, max relative error) over the elements of one order."""
        rows = [r for r in self.rows if r[1] == order]
        if not rows:
            return 0.0, 0.0
        abs_err = max(r[5] for r in rows)
        rel_err = max(r[5] / max(abs(r[4]), 1e-300) if r[5] else 0.0 for r in rows)
        return abs_err, rel_err

    def table(self, only_failures: bool = True, limit: int = 20) -> str:
        """The rows (by default only the failures) as a text table.

        With nothing to list (every element passed), one readable line instead.
        """
        rows = self.failures() if only_failures else self.rows
        if not rows:
            if not self.rows:
                return "nothing was checked"
            orders = sorted({r[1] for r in self.rows})
            worst = max(r[5] for r in self.rows)
            span = f"order {orders[0]}" if len(orders) == 1 else f"orders {orders[0]}-{orders[-1]}"
            return f"all {len(self.rows)} elements passed ({span}, largest error {worst:.2e})"
        head = (
            f"{'input':>5} {'order':>5} {'element':>12} {'analytic':>14} {'numeric':>14}"
            f" {'error':>10}"
        )
        lines = [head, "-" * len(head)]
        for i, k, idx, a, n, e, _ in rows[:limit]:
            lines.append(f"{i:>5} {k:>5} {idx!s:>12} {a:>14.6e} {n:>14.6e} {e:>10.2e}")
        if len(rows) > limit:
            lines.append(f"... and {len(rows) - limit} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        n_bad = len(self.failures())
        status = "passed" if not n_bad else f"{n_bad} of {len(self.rows)} elements failed"
        return f"gradcheck {status} (atol={self.atol:g}, rtol={self.rtol:g})\n" + self.table(
            only_failures=bool(n_bad)
        )


def _to_numpy(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def directional(
    f: Callable[..., Any],
    k: int,
    arrays: Sequence[Any],
    diff: Sequence[int],
    u: Any,
    directions: Sequence[Sequence[Any]],
) -> tuple[Variable, list[Variable]]:
    """``S_k`` at ``arrays`` and the Variables it was built from: ``S_1 = sum(u * f(x))``,
    ``S_(j+1) = sum_i <directions[j][i], d S_j / d x_i>`` over the float inputs ``diff``
    (the recursion of autograd's ``check_grads``: each order is a first derivative of the last).
    """
    vs = [Variable.from_array(a, need_grad=i in diff) for i, a in enumerate(arrays)]
    s = _sum_all(f(*vs) * u)
    for level in range(k - 1):
        gs = grad(s, [vs[i] for i in diff], allow_unused=True)
        terms = [_sum_all(g * v) for g, v in zip(gs, directions[level], strict=True)]
        s = terms[0]
        for t in terms[1:]:
            s = s + t
    return s, vs


#: why a batched variable (inside ``hd.vmap``) is refused
NOT_PER_EXAMPLE = (
    "a derivative check compares values with finite differences and returns a report, "
    "which has no per-example form inside vmap"
)


def refuse_batched_output(name: str, y: Any) -> None:
    """``f``'s output must not be batched: ``f`` closes over a batched variable of an hd.vmap."""
    refuse_batched(
        name,
        "f(*inputs)",
        y,
        "f closes over a batched variable of the enclosing hd.vmap; " + NOT_PER_EXAMPLE,
    )


def _probes(f: Callable[..., Variable], inputs: Any, order: int, seed: int) -> tuple[Any, ...]:
    """What both checks start from: float64 copies ``xs`` of the inputs, the indices ``diff``
    of the float ones, the random generator (after the projection directions were drawn), the
    array module, and ``scalar(k, arrays)``, the k-th directional derivative scalar of ``f``.
    Raises for inputs or an output that would leave nothing to check.
    """
    raw = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
    xs: list[Any] = []
    for a in raw:
        a = a.d if isinstance(a, Variable) else a
        a = array_module(a).asarray(a)
        xs.append(a.astype(np.float64) if a.dtype.kind == "f" else a)
    diff = [i for i, a in enumerate(xs) if a.dtype.kind == "f"]
    if not diff:
        raise TypeError("gradcheck: no float input to differentiate")
    for i in diff:
        if xs[i].size == 0:
            raise ValueError(
                f"gradcheck: input {i} has no elements (shape {xs[i].shape}): nothing would be "
                "checked"
            )
    rng = np.random.default_rng(seed)
    y0 = f(*[Variable.from_array(a) for a in xs])
    if not isinstance(y0, Variable):
        raise TypeError(f"gradcheck: f must return a Variable, got {type(y0).__name__}")
    refuse_batched_output("gradcheck", y0)
    if y0.size == 0:
        raise ValueError(
            f"gradcheck: f returned an empty output (shape {y0.shape}): nothing would be checked"
        )
    xp = array_module(y0.d)
    u = xp.asarray(rng.standard_normal(y0.shape))
    directions = [
        [xp.asarray(rng.standard_normal(xs[i].shape)) for i in diff] for _ in range(order - 1)
    ]

    def scalar(k: int, arrays: Sequence[Any]) -> tuple[Variable, list[Variable]]:
        return directional(f, k, arrays, diff, u, directions)

    return xs, diff, rng, xp, scalar


def fast_gradcheck(
    f: Callable[..., Variable],
    inputs: Any,
    order: int,
    eps: float,
    atol: float,
    rtol: float,
    seed: int = 0,
) -> GradcheckReport:
    """One row per order ``k``: input ``-1`` (all inputs, projected), element ``()``."""
    report = GradcheckReport(atol=atol, rtol=rtol)
    with auto_forward(True):
        xs, diff, rng, xp, scalar = _probes(f, inputs, order, seed)
        for k in range(1, order + 1):
            d = [xp.asarray(rng.standard_normal(xs[i].shape)) for i in diff]
            s, vs = scalar(k, xs)
            analytic = grad(s, [vs[i] for i in diff], allow_unused=True)
            ana = float(sum(float((g.d * di).sum()) for g, di in zip(analytic, d, strict=True)))
            plus = list(xs)
            minus = list(xs)
            for slot, i in enumerate(diff):
                plus[i] = xs[i] + eps * d[slot]
                minus[i] = xs[i] - eps * d[slot]
            num = (float(scalar(k, plus)[0].d) - float(scalar(k, minus)[0].d)) / (2 * eps)
            err = abs(ana - num)
            report.rows.append((-1, k, (), ana, num, err, bool(err <= atol + rtol * abs(num))))
    return report


def gradcheck(
    f: Callable[..., Variable],
    inputs: Any,
    order: int = 1,
    eps: float | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    raise_exception: bool = True,
    seed: int = 0,
    fast: bool = False,
) -> GradcheckReport:
    """Checks the derivatives of ``f`` of every order 1..``order`` against finite differences.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: arrays, scalars or Variables (one, or a tuple). Float inputs are
            checked (in float64 copies); integer inputs (labels) are passed through.
        order: highest derivative order to check.
        eps: central-difference step (default 1e-6).
        atol: absolute tolerance (default 1e-6); an element passes when
            ``|analytic - numeric| <= atol + rtol |numeric|``.
        rtol: relative tolerance (default 1e-5).
        raise_exception: raise :class:`GradcheckError` with the table on failure;
            otherwise return the report.
        seed: of the random projection directions.
        fast: first compare one random directional derivative per order (two
            calls of ``f``'s k-th derivative scalar per order, see
            :func:`fast_gradcheck`); if that passes, return its report (one row
            per order, input -1); otherwise fall back to the full check.

    Returns:
        A :class:`GradcheckReport`, truthy when every element passed.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> bool(hd.gradcheck(lambda x: F.exp(x) * x, np.array([0.5, -1.0]), order=3))
    True
    """
    if order < 1:
        raise ValueError(f"gradcheck: order must be >= 1, got {order}")
    refuse_batched("gradcheck", "inputs", inputs, NOT_PER_EXAMPLE)
    eps = 1e-6 if eps is None else eps
    atol = 1e-6 if atol is None else atol
    rtol = 1e-5 if rtol is None else rtol
    if fast:
        quick = fast_gradcheck(f, inputs, order, eps, atol, rtol, seed)
        if quick.passed:
            return quick
    report = GradcheckReport(atol=atol, rtol=rtol)
    with auto_forward(True):
        xs, diff, _, _, scalar = _probes(f, inputs, order, seed)
        for k in range(1, order + 1):
            s, vs = scalar(k, xs)
            analytic = grad(s, [vs[i] for i in diff], allow_unused=True)
            for slot, i in enumerate(diff):
                a_grad = _to_numpy(analytic[slot].d)
                flat = xs[i].reshape(-1)
                for j in range(flat.size):
                    plus = [a.copy() for a in xs]
                    minus = [a.copy() for a in xs]
                    plus[i].reshape(-1)[j] += eps
                    minus[i].reshape(-1)[j] -= eps
                    num = (float(scalar(k, plus)[0].d) - float(scalar(k, minus)[0].d)) / (2 * eps)
                    ana = float(a_grad.reshape(-1)[j])
                    err = abs(ana - num)
                    ok = bool(err <= atol + rtol * abs(num))  # NaN fails
                    idx = tuple(int(t) for t in np.unravel_index(j, xs[i].shape))
                    report.rows.append((i, k, idx, ana, num, err, ok))
    if raise_exception and not report.passed:
        raise GradcheckError(str(report))
    return report


def gradgradcheck(f: Callable[..., Variable], inputs: Any, **kwargs: Any) -> GradcheckReport:
    """:func:`gradcheck` with ``order=2``."""
    kwargs.setdefault("order", 2)
    return gradcheck(f, inputs, **kwargs)
