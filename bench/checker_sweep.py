"""False alarms of the derivative checker: every spec row at many random points.

``python -m bench.checker_sweep --points 1000`` draws ``--points`` inputs per spec row
(``spec.sample(seed)`` for seeds ``--start ..``, away from the row's kinks as the
table declares), checks orders ``1..min(3, spec.order)`` exactly as ``python -m
hodiff check`` does (tolerances from the differences' estimates unless the row sets
them), and counts the elements that FAIL and those reported "not differentiable":
on smooth sampled points both should be zero. Prints one line per row with an alarm
and a total; ``--out`` appends a JSON line per seed, and seeds already in it are
skipped (resumable). ``--summarize FILE ...`` prints the counts of such files as JSON
(points, seeds, failures and not-differentiable reports per row). ``--rows NAME ...``
checks only those rows; their lines replace those rows' results of the seed when
summarized (a row whose sampling changed, run again).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

from hodiff.engine.variable import Variable
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.harness import outputs_of, scalarized
from hodiff.tools.check import NOT_DIFFERENTIABLE, gradcheck


def sweep_one(spec, seed: int, top: int) -> tuple[int, int, int, str]:
    """(elements checked, failures, not-differentiable, first message) at one point."""
    xs = spec.sample(seed)
    y = spec.fn(*[Variable.from_array(a) for a in xs], **spec.kwargs)
    rng = np.random.default_rng(seed + 1)
    ws = [rng.standard_normal(o.shape) for o in outputs_of(y)]
    plans = (
        [(1, [1], 1), (3, list(range(2, top + 1)), top)]
        if spec.linear and top >= 2
        else [(1, list(range(1, top + 1)), top)]
    )
    n = bad = nd = 0
    msg = ""
    for power, orders, k in plans:
        rep = gradcheck(
            scalarized(spec, ws, power),
            xs,
            order=k,
            atol=spec.atol,
            rtol=spec.rtol,
            raise_exception=False,
            seed=seed,
        )
        rows = [r for r in rep.rows if r[1] in orders]
        n += len(rows)
        fails = [r for r in rows if not r[6]]
        bad += len(fails)
        nd += sum(1 for r in rows if r[9] == NOT_DIFFERENTIABLE)
        if (fails or nd) and not msg:
            msg = rep.table(limit=3) if fails else str(rep).splitlines()[-1]
    return n, bad, nd, msg


def summarize(paths: list[str]) -> dict:
    """The counts of ``--out`` files: every seed once (the last full line of a seed wins),
    then the lines of ``--rows`` runs replace those rows' results, in the order written,
    wherever they stand (before or after their seed's full line, in any file).
    """
    lines = []
    for path in paths:
        with open(path) as fh:
            lines += [json.loads(line) for line in fh if line.strip()]
    per: dict[int, dict] = {}
    for d in lines:
        if d.get("rows") is None:
            per[d["seed"]] = {key: dict(d[key]) for key in ("fail", "nd", "crash")}
    for d in lines:
        rows = d.get("rows")
        if rows is None:
            continue
        if d["seed"] not in per:  # a seed run for some rows only
            per[d["seed"]] = {key: {} for key in ("fail", "nd", "crash")}
        old = per[d["seed"]]
        for key in ("fail", "nd", "crash"):
            for name in rows:
                old[key].pop(name, None)
            old[key].update(d[key])
    fail: dict[str, list[int]] = {}
    nd: dict[str, int] = {}
    crash: dict[str, list[int]] = {}
    for seed, d in sorted(per.items()):
        for name in d["fail"]:
            fail.setdefault(name, []).append(seed)
        for name, n in d["nd"].items():
            nd[name] = nd.get(name, 0) + n
        for name in d["crash"]:
            crash.setdefault(name, []).append(seed)
    return {
        "points": len(per),
        "seeds": _ranges(sorted(per)),
        "fail": fail,
        "not_differentiable": nd,
        "crash": crash,
    }


def _ranges(seeds: list[int]) -> str:
    out: list[str] = []
    for s in seeds:
        if out and int(out[-1].split("-")[-1]) == s - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{s}"
        else:
            out.append(str(s))
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--start", type=int, default=1)
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("--summarize", nargs="+", default=None, metavar="FILE")
    parser.add_argument("--rows", nargs="+", default=None, metavar="NAME")
    args = parser.parse_args(argv)
    if args.summarize:
        print(json.dumps(summarize(args.summarize), indent=1))
        return 0
    # a point is done when the file has it for the same rows (all, or this --rows set)
    done: set[tuple[int, tuple[str, ...] | None]] = set()
    if args.out and os.path.exists(args.out):
        with open(args.out) as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    rows = rec.get("rows")
                    done.add((rec["seed"], None if rows is None else tuple(sorted(rows))))
    mine = None if args.rows is None else tuple(sorted(set(args.rows)))
    specs = [(s, n) for s, n in zip(all_specs(), spec_ids(all_specs()), strict=True) if s.order]
    if args.rows:
        unknown = set(args.rows) - {n for _, n in specs}
        if unknown:
            parser.error(f"unknown rows: {sorted(unknown)}")
        specs = [(s, n) for s, n in specs if n in args.rows]
    totals = {"elements": 0, "fail": 0, "nd": 0, "rows": 0, "crash": 0}
    start = time.perf_counter()
    for seed in range(args.start, args.start + args.points):
        if (seed, mine) in done:
            continue
        per: dict = {"seed": seed, "fail": {}, "nd": {}, "crash": {}}
        if args.rows:
            per["rows"] = [n for _, n in specs]
        for spec, name in specs:
            top = min(args.order, spec.order)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    n, bad, nd, msg = sweep_one(spec, seed, top)
            except Exception as e:  # a row that cannot be sampled at this seed
                per["crash"][name] = f"{type(e).__name__}: {e}"[:200]
                totals["crash"] += 1
                continue
            totals["elements"] += n
            totals["rows"] += 1
            if bad:
                per["fail"][name] = msg
                totals["fail"] += bad
                print(f"seed {seed} {name}: {bad} FAIL\n{msg}", flush=True)
            if nd:
                per["nd"][name] = nd
                totals["nd"] += nd
                print(f"seed {seed} {name}: {nd} not differentiable", flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(per) + "\n")
    elapsed = time.perf_counter() - start
    print(
        f"{args.points} points x {len(specs)} spec rows (orders 1..{args.order}): "
        f"{totals['rows']} row checks, {totals['elements']} elements, {totals['fail']} FAIL, "
        f"{totals['nd']} not differentiable, {totals['crash']} crashed rows, {elapsed:.0f}s"
    )
    return 1 if totals["fail"] or totals["nd"] else 0


if __name__ == "__main__":
    sys.exit(main())
