"""The report of :func:`hodiff.gradcheck`: one row per element, a summary per input and
order, the tables, and the error-against-step picture (``plot=``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FAIL",
    "NOT_DIFFERENTIABLE",
    "OK",
    "GradcheckReport",
    "GradcheckRow",
    "SummaryRow",
    "plot_steps",
]

OK, NOT_DIFFERENTIABLE, FAIL = "ok", "not differentiable", "FAIL"
_RANK = {FAIL: 0, NOT_DIFFERENTIABLE: 1, OK: 2}


class GradcheckRow(NamedTuple):
    """One checked element: ``status`` is ``"ok"``, ``"not differentiable"`` or ``"FAIL"``.

    ``ok`` is true for the first two; ``estimate`` is the numeric value's own error
    estimate and ``tolerance`` what ``error = |analytic - numeric|`` was held to.
    ``part`` names the real coordinate of a complex input (``"re"``, ``"im"``), or
    ``"C-R"`` for the Cauchy-Riemann check of ``holomorphic=True``; ``""`` for a real input.
    """

    input: int
    order: int
    element: tuple[int, ...]
    analytic: float
    numeric: float
    error: float
    ok: bool
    estimate: float = 0.0
    tolerance: float = 0.0
    status: str = OK
    part: str = ""


class SummaryRow(NamedTuple):
    """One input at one order: its largest error, and the estimate and tolerance of the
    element closest to failing (the largest ``error / tolerance``).
    """

    input: int
    order: int
    elements: int
    max_error: float
    estimate: float
    tolerance: float
    passed: bool
    not_differentiable: int
    part: str = ""


@dataclass
class GradcheckReport:
    """Result of :func:`gradcheck`: one row per checked element; truthy when all passed.

    ``rows`` holds :class:`GradcheckRow` s (``(input, order, element, analytic,
    numeric, error, ok, estimate, tolerance, status)``); :meth:`summary` one row per
    input and order. ``atol``/``rtol`` are None when the tolerance came from the
    estimate. ``steps`` maps ``(input, order)`` to the step sizes ``h`` and the
    largest error of the plain central difference at each (for ``plot=``).
    """

    rows: list[GradcheckRow] = field(default_factory=list)
    atol: float | None = None
    rtol: float | None = None
    steps: dict[tuple[int, int], tuple[list[float], list[float]]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(r[6] for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    def failures(self) -> list[GradcheckRow]:
        return [r for r in self.rows if not r[6]]

    def not_differentiable(self) -> list[GradcheckRow]:
        """The elements whose stencil crossed a kink (and whose analytic value fit a side)."""
        return [r for r in self.rows if len(r) > 9 and r[9] == NOT_DIFFERENTIABLE]

    def max_errors(self, order: int) -> tuple[float, float]:
        """(max absolute error, max relative error) over the elements of one order."""
        rows = [r for r in self.rows if r[1] == order]
        if not rows:
            return 0.0, 0.0
        abs_err = max(r[5] for r in rows)
        rel_err = max(r[5] / max(abs(r[4]), 1e-300) if r[5] else 0.0 for r in rows)
        return abs_err, rel_err

    def summary(self) -> list[SummaryRow]:
        """One row per (input, order), in order of input then order."""
        out = []
        keys = sorted({(r[0], _part(r), r[1]) for r in self.rows}, key=_in_order)
        for key in keys:
            rows = [r for r in self.rows if (r[0], _part(r), r[1]) == key]
            worst = max(rows, key=_ratio)
            out.append(
                SummaryRow(
                    key[0],
                    key[2],
                    len(rows),
                    max(r[5] for r in rows),
                    worst[7] if len(worst) > 7 else 0.0,
                    worst[8] if len(worst) > 8 else 0.0,
                    all(r[6] for r in rows),
                    sum(1 for r in rows if len(r) > 9 and r[9] == NOT_DIFFERENTIABLE),
                    key[1],
                )
            )
        return out

    def summary_table(self) -> str:
        head = (
            f"{'input':>5} {'order':>5} {'elements':>8} {'max error':>10} {'estimate':>10}"
            f" {'tolerance':>10}  result"
        )
        lines = [head, "-" * len(head)]
        for s in self.summary():
            result = "pass" if s.passed else "FAIL"
            if s.not_differentiable:
                result += f" ({s.not_differentiable} not differentiable)"
            lines.append(
                f"{_label(s.input, s.part):>5} {s.order:>5} {s.elements:>8} {s.max_error:>10.2e}"
                f" {s.estimate:>10.2e} {s.tolerance:>10.2e}  {result}"
            )
        return "\n".join(lines)

    def table(self, only_failures: bool = True, limit: int = 20) -> str:
        """The rows (by default only the failures) as a text table, worst first.

        With nothing to list (every element passed), one readable line instead.
        """
        rows = self.failures() if only_failures else list(self.rows)
        if not rows:
            if not self.rows:
                return "nothing was checked"
            orders = sorted({r[1] for r in self.rows})
            worst = max(r[5] for r in self.rows)
            span = f"order {orders[0]}" if len(orders) == 1 else f"orders {orders[0]}-{orders[-1]}"
            nd = len(self.not_differentiable())
            tail = f"; {nd} not differentiable" if nd else ""
            return f"all {len(self.rows)} elements passed ({span}, largest error {worst:.2e}){tail}"
        rows = sorted(rows, key=_ratio, reverse=True) if only_failures else rows
        head = (
            f"{'input':>5} {'order':>5} {'element':>12} {'analytic':>14} {'numeric':>14}"
            f" {'error':>10} {'estimate':>10} {'tolerance':>10}  status"
        )
        lines = [head, "-" * len(head)]
        for r in rows[:limit]:
            est = r[7] if len(r) > 7 else float("nan")
            tol = r[8] if len(r) > 8 else float("nan")
            status = r[9] if len(r) > 9 else (OK if r[6] else FAIL)
            lines.append(
                f"{_label(r[0], _part(r)):>5} {r[1]:>5} {r[2]!s:>12} {r[3]:>14.6e} {r[4]:>14.6e}"
                f" {r[5]:>10.2e} {est:>10.2e} {tol:>10.2e}  {status}"
            )
        if len(rows) > limit:
            lines.append(f"... and {len(rows) - limit} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        n_bad = len(self.failures())
        status = "passed" if not n_bad else f"{n_bad} of {len(self.rows)} elements failed"
        how = (
            "tolerance from the differences' error estimates"
            if self.atol is None and self.rtol is None
            else f"atol={self.atol or 0:g}, rtol={self.rtol or 0:g}"
        )
        text = f"gradcheck {status} ({how})\n{self.summary_table()}"
        if n_bad:
            return f"{text}\nworst elements:\n{self.table(only_failures=True, limit=10)}"
        nd = self.not_differentiable()
        if nd:
            sub = GradcheckReport(rows=nd)
            return f"{text}\nnot differentiable:\n{sub.table(only_failures=False, limit=10)}"
        worst = sorted(self.rows, key=_ratio, reverse=True)[:5]
        sub = GradcheckReport(rows=worst)
        return f"{text}\nworst elements:\n{sub.table(only_failures=False, limit=5)}"


def _part(r: Sequence[Any]) -> str:
    return str(r[10]) if len(r) > 10 else ""


_PARTS = {"": 0, "re": 1, "im": 2}  # then the Cauchy-Riemann rows


def _in_order(key: tuple[int, str, int]) -> tuple[int, int, int]:
    return key[0], _PARTS.get(key[1], 3), key[2]


def _label(index: int, part: str) -> str:
    """An input's name in the tables: its index, with the part of a complex one (``0.re``)."""
    return f"{index}.{part}" if part else str(index)


def _ratio(r: Sequence[Any]) -> float:
    """How close a row is to failing: error over tolerance (a failure first, NaN worst)."""
    tol = r[8] if len(r) > 8 else 0.0
    e = r[5]
    if not np.isfinite(e):
        return float("inf")
    return (e / tol if tol > 0 else (0.0 if e == 0 else float("inf"))) + (0.0 if r[6] else 1e300)


def plot_steps(report: GradcheckReport, path: Any, steps: tuple[float, float]) -> None:
    """Error against step size, one panel per input, one line per order (log-log); the
    band ``steps`` (smallest, largest) is shaded: the steps the extrapolation used.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "gradcheck(plot=...) needs matplotlib, an optional dependency: "
            'pip install matplotlib, or pip install -e ".[plot]" in the hodiff source checkout'
        ) from e
    inputs = sorted({i for i, _ in report.steps})
    fig, axes = plt.subplots(1, len(inputs), figsize=(5 * len(inputs), 4), squeeze=False)
    for ax, i in zip(axes[0], inputs, strict=True):
        for (j, k), (hs, errs) in sorted(report.steps.items()):
            if j != i:
                continue
            ax.loglog(hs, np.maximum(errs, 1e-17), marker="o", ms=3, label=f"order {k}")
            rows = [r for r in report.rows if r[0] == i and r[1] == k]
            worst = max(r[5] for r in rows)
            ref = max(max(abs(r[3]) for r in rows), 1e-300)
            ax.axhline(max(worst / ref, 1e-17), ls="--", lw=0.8, color=ax.lines[-1].get_color())
        ax.axvspan(*steps, color="0.85", label="Richardson steps")
        ax.set_xlabel("step h (relative to the input's scale)")
        ax.set_ylabel("max |central difference - analytic| / max |analytic|")
        ax.set_title(f"input {i}: central differences (dashed: Richardson)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
