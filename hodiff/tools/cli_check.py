"""``python -m hodiff check``: every function of the spec table against finite differences.

Each spec of :func:`hodiff.testing.all_specs` is checked exactly as the test
suite checks it: its outputs are turned into a scalar with fixed random
weights, ``sum_k sum(w_k * y_k)``, and :func:`hodiff.gradcheck` compares the
derivatives of orders ``1..min(N, spec.order)`` with Richardson-extrapolated
central differences in float64, each element held to its differences' own error
estimate. A function linear in its inputs has zero second derivatives, so its
orders >= 2 are checked on ``sum_k sum(w_k * y_k**3)``, whose higher
derivatives run the backward of its backward. The command prints one line per
(function, order) and a summary, and exits with status 1 if anything failed.
``--mutate`` (:func:`run_mutate`) checks the checker: every primitive's rule broken
a little (:mod:`hodiff.testing.mutate`) must be caught.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.engine.variable import Variable
from hodiff.testing import Spec, all_specs, complex_specs, spec_ids
from hodiff.testing.harness import outputs_of, scalarized
from hodiff.testing.mutate import Mutant, mutation_report
from hodiff.tools.check import GradcheckReport, gradcheck

__all__ = [
    "Row",
    "add_parser",
    "check_spec",
    "list_functions",
    "run_check",
    "run_mutate",
    "spec_reports",
]

DESCRIPTION = """\
Checks every function of hodiff (its spec table) against central finite
differences in float64 (Richardson-extrapolated, each element held to their
own error estimate), at derivative orders 1 to --order, exactly as the
test suite does: each function's outputs are turned into a scalar with fixed
random weights; a function linear in its inputs is checked at orders >= 2 on
the cube of its outputs, so that the backward of its backward runs. Prints one
line per (function, order) and a summary; exits with status 1 if a check
failed and 2 for bad arguments. --mutate breaks each primitive's rule by a
relative 1e-6 (order 1) or 1e-4 (orders 2, 3) and reports the share of those
mutants the check catches, per family."""


@dataclass(frozen=True)
class Row:
    """One line of the table: a function (spec) at one derivative order."""

    name: str
    order: int
    abs_err: float
    rel_err: float
    passed: bool
    details: str = ""


def _order_rows(name: str, report: GradcheckReport, orders: Iterable[int]) -> list[Row]:
    rows = []
    for k in orders:
        abs_err, rel_err = report.max_errors(k)
        failed = [r for r in report.failures() if r[1] == k]
        details = ""
        if failed:
            only = GradcheckReport(rows=failed, atol=report.atol, rtol=report.rtol)
            details = only.table(limit=5)
        rows.append(Row(name, k, abs_err, rel_err, not failed, details))
    return rows


def spec_reports(
    spec: Spec, top: int, cube: bool = False
) -> list[tuple[list[int], GradcheckReport]]:
    """The derivative checks of one spec row up to order ``top``, as the test suite runs them:
    ``(orders, report)`` pairs (a linear row's orders >= 2 come from the cube of its outputs;
    with ``cube``, every row's do, so that the rules run on gradients that depend on ``x``).
    Tolerances are the row's ``atol``/``rtol`` when it sets them, else the differences' own
    error estimates. Raises what the row raises.
    """
    xs = spec.sample()
    y = spec.fn(*[Variable.from_array(a) for a in xs], **spec.kwargs)
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal(o.shape) for o in outputs_of(y)]

    def check(power: int, k: int) -> GradcheckReport:
        return gradcheck(
            scalarized(spec, ws, power),
            xs,
            order=k,
            atol=spec.atol,
            rtol=spec.rtol,
            raise_exception=False,
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a NaN fails the check anyway
        if (spec.linear or cube) and top >= 2:
            return [([1], check(1, 1)), (list(range(2, top + 1)), check(3, top))]
        return [(list(range(1, top + 1)), check(1, top))]


def check_spec(spec: Spec, order: int, name: str | None = None) -> list[Row]:
    """Rows for orders ``1..min(order, spec.order)`` of one spec (an exception fails them)."""
    name = name or spec.name
    top = min(order, spec.order)
    try:
        rows = []
        for orders, report in spec_reports(spec, top):
            rows += _order_rows(name, report, orders)
        return rows
    except Exception as e:  # a crash is a failure of every order, reported, not raised
        msg = f"{type(e).__name__}: {e}"
        return [Row(name, k, float("nan"), float("nan"), False, msg) for k in range(1, top + 1)]


def _spec_passes(spec: Spec, k: int) -> tuple[bool, np.ndarray]:
    """Whether the row's checks of orders 1..k all pass (a crash is a failure), and the
    analytic values of order k. Orders >= 2 are checked on the cube of the outputs (a
    rule's gradient graph then sees output gradients that depend on ``x``).
    """
    try:
        reports = spec_reports(spec, k, cube=True)
    except Exception:
        return False, np.zeros(0)
    passed = all(not [r for r in report.failures() if r[1] in orders] for orders, report in reports)
    values = [r[3] for orders, report in reports for r in report.rows if r[1] == k and k in orders]
    return passed, np.array(values)


def _named(specs: list[Spec], functions: Sequence[str] | None) -> list[Spec]:
    """The rows of the named functions or variants (all rows when none is named)."""
    if not functions:
        return specs
    wanted = set(functions)
    return [s for s in specs if s.fn.__name__ in wanted or s.name in wanted]


def _print_scores(mutants: Sequence[Mutant]) -> None:
    """The score table: per family, the mutants caught of those a check can see."""
    head = f"{'family':<24} {'caught':>7} {'mutants':>8} {'score':>7}"
    print(head)
    print("-" * len(head))
    for fam in sorted({m.family for m in mutants}):
        mine = [m for m in mutants if m.family == fam and not m.equivalent]
        if not mine:
            continue
        caught = sum(m.caught for m in mine)
        print(f"{fam:<24} {caught:>7} {len(mine):>8} {100 * caught / len(mine):>6.1f}%")


def _print_survivors(survivors: Sequence[Mutant], equivalent: Sequence[Mutant]) -> None:
    """The mutants no check caught, then those no check can see, each with why."""
    if survivors:
        print("\nsurvivors:")
        for m in survivors:
            print(f"  {m.primitive} (order {m.order}, {m.family}): {m.why}")
    if equivalent:
        print("\nequivalent mutants (not counted: no check can see them):")
        for m in equivalent:
            print(f"  {m.primitive} (order {m.order}, {m.family}, {m.spec}): {m.why}")


def run_mutate(order: int = 3, functions: Sequence[str] | None = None) -> int:
    """The mutation mode: every primitive's rule broken a little at orders 1..``order``
    (:mod:`hodiff.testing.mutate`), each caught or listed as a survivor with why.

    Prints the mutation score per family and the survivors; returns 0 when every
    mutant was caught, 1 otherwise.
    """
    # the complex rows too: a primitive of complex values only (F.fft) is checked by them
    specs = _named(all_specs() + complex_specs(), functions)
    start = time.perf_counter()
    mutants = mutation_report(specs, _spec_passes, orders=range(1, order + 1))
    if functions:  # only the primitives the selected rows use
        mutants = [m for m in mutants if m.spec != "-"]
    elapsed = time.perf_counter() - start
    _print_scores(mutants)
    equivalent = [m for m in mutants if m.equivalent]
    counted = [m for m in mutants if not m.equivalent]
    survivors = [m for m in counted if not m.caught]
    _print_survivors(survivors, equivalent)
    caught = len(counted) - len(survivors)
    score = 100 * caught / len(counted) if counted else 100.0
    n_primitives = len({m.primitive for m in mutants})
    print(
        f"{caught} of {len(counted)} mutants caught ({score:.1f}%; {len(equivalent)} "
        f"equivalent), {n_primitives} primitives, orders 1..{order}, in {elapsed:.1f}s"
    )
    return 1 if survivors else 0


def _progress(items: Sequence[Any], names: Sequence[str]) -> Iterator[Any]:
    """Tqdm's bar on stderr if tqdm is installed, else a plain ``[i/n] name`` counter."""
    try:
        from tqdm import tqdm
    except ImportError:
        n = len(items)
        tty = sys.stderr.isatty()  # a terminal: one line rewritten; a log: one line per spec
        for i, (item, name) in enumerate(zip(items, names, strict=True)):
            line = f"[{i + 1}/{n}] {name}"
            print(
                f"\r{line:<50.50}" if tty else line,
                end="" if tty else "\n",
                file=sys.stderr,
                flush=True,
            )
            yield item
        if n and tty:
            print(file=sys.stderr)
        return
    yield from tqdm(items, desc="hodiff check", unit="spec", file=sys.stderr, leave=False)


def _function_names(specs: Sequence[Spec]) -> list[str]:
    """Function names of the table, in its order, each once."""
    return list(dict.fromkeys(s.fn.__name__ for s in specs))


def list_functions(specs: Sequence[Spec] | None = None) -> str:
    """One line per spec: its name (``fn[variant]``) and the orders it is checked at."""
    specs = all_specs() if specs is None else specs
    names = spec_ids(specs)
    width = max([len(n) for n in names] + [8])
    lines = []
    for s, n in zip(specs, names, strict=True):
        orders = f"orders 1..{s.order}" if s.order >= 1 else "not differentiable"
        lines.append(f"{n:<{width}}  {orders}")
    return "\n".join(lines)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``check`` subcommand on an ``argparse`` subparsers object."""
    names = ", ".join(_function_names(all_specs()))
    epilog = (
        "functions:\n"
        + textwrap.fill(names, width=78, initial_indent="  ", subsequent_indent="  ")
        + "\n\nexamples:\n  python -m hodiff check --order 2 --functions exp tanh\n"
        "  python -m hodiff check --list"
    )
    check = sub.add_parser(
        "check",
        help="verify every function against finite differences",
        description=DESCRIPTION,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("--order", type=int, default=3, help="highest order to check (default 3)")
    check.add_argument(
        "--functions",
        nargs="*",
        metavar="NAME",
        help="only these functions (a name, or a variant such as add2[broadcast])",
    )
    check.add_argument(
        "--mutate",
        action="store_true",
        help="mutation mode: break each primitive's rule by 1e-6 (order 1) or 1e-4 (orders "
        "2, 3) and report how many mutants the check catches, per family",
    )
    check.add_argument(
        "--list",
        action="store_true",
        help="list the functions (spec variants) and their orders, then exit",
    )
    return check


def _fmt(x: float) -> str:
    return f"{x:12.2e}" if np.isfinite(x) else f"{'-':>12}"


def _pick(
    specs: Sequence[Spec], names: Sequence[str], functions: Sequence[str] | None
) -> list[tuple[Spec, str]] | None:
    """The ``(spec, name)`` pairs the command checks: all, or those of the named functions or
    variants; None (after printing why, with close matches) when a name has no spec.
    """
    if not functions:
        return list(zip(specs, names, strict=True))
    wanted = set(functions)
    known = {s.fn.__name__ for s in specs} | {s.name for s in specs}
    unknown = sorted(wanted - known)
    if unknown:
        for u in unknown:
            close = difflib.get_close_matches(u, sorted(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            print(f"hodiff check: no spec for {u}{hint}", file=sys.stderr)
        print("hodiff check: --list shows every function", file=sys.stderr)
        return None
    return [
        (s, n)
        for s, n in zip(specs, names, strict=True)
        if s.fn.__name__ in wanted or s.name in wanted
    ]


def _print_rows(rows: Sequence[Row]) -> None:
    """The table (one line per function and order), then the details of each failure."""
    width = max([len(r.name) for r in rows] + [8])
    head = f"{'function':<{width}}  order  {'max abs err':>12}  {'max rel err':>12}  result"
    print(head)
    print("-" * len(head))
    for r in rows:
        result = "pass" if r.passed else "FAIL"
        print(f"{r.name:<{width}}  {r.order:>5}  {_fmt(r.abs_err)}  {_fmt(r.rel_err)}  {result}")
    failed = [r for r in rows if not r.passed]
    if failed:
        print("\nfailures:")
        for r in failed:
            print(f"{r.name} order {r.order}:")
            print("  " + r.details.replace("\n", "\n  "))


def _summary(
    rows: Sequence[Row], todo: Sequence[tuple[Spec, str]], skipped: int, order: int, elapsed: float
) -> str:
    """The last line: checks, functions, specs, time, passed and failed (by name), skipped."""
    failed = [r for r in rows if not r.passed]
    bad = {r.name for r in failed}
    n_functions = len({s.fn.__name__ for s, _ in todo})
    summary = (
        f"{len(rows)} checks of {n_functions} functions ({len(todo)} specs, orders 1..{order})"
        f" in {elapsed:.1f}s: {len(rows) - len(failed)} passed, {len(failed)} failed"
    )
    if bad:
        summary += f" ({', '.join(sorted(bad))})"
    if skipped:
        summary += f"; {skipped} not differentiable, skipped"
    return summary


def run_check(order: int = 3, functions: Sequence[str] | None = None) -> int:
    """Checks the spec table (or the named functions) at orders ``1..order``; prints a table.

    Args:
        order: highest derivative order (each spec stops at its own ``order``).
        functions: names of functions (``add2``) or of spec variants
            (``add2[broadcast]``); None or empty: all.

    Returns:
        The exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments.

    """
    if order < 1:
        print(f"hodiff check: --order must be >= 1, got {order}", file=sys.stderr)
        return 2
    specs = all_specs()
    picked = _pick(specs, spec_ids(specs), functions)
    if picked is None:
        return 2
    top = max([s.order for s, _ in picked] + [0])
    if top >= 1 and order > top:
        print(
            f"hodiff check: --order {order} is above what the specs support: the selected "
            f"functions are checked up to order {top}",
            file=sys.stderr,
        )
        return 2
    skipped = [n for s, n in picked if s.order < 1]
    todo = [(s, n) for s, n in picked if s.order >= 1]

    start = time.perf_counter()
    rows: list[Row] = []
    for spec, name in _progress(todo, [n for _, n in todo]):
        rows.extend(check_spec(spec, order, name))
    elapsed = time.perf_counter() - start

    _print_rows(rows)
    print(_summary(rows, todo, len(skipped), order, elapsed))
    return 0 if all(r.passed for r in rows) else 1
