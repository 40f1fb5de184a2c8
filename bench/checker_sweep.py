"""False alarms of the derivative checker: every spec row at many random points.

``python -m bench.checker_sweep --points 1000`` draws ``--points`` inputs per spec row
(``spec.sample(seed)`` for seeds ``--start ..``, away from the row's kinks as the
table declares), checks orders ``1..min(3, spec.order)`` exactly as ``python -m
hodiff check`` does (tolerances from the differences' estimates unless the row sets
them), and counts the elements that FAIL and those reported "not differentiable":
on smooth sampled points both should be zero. Prints one line per row with an alarm
and a total; ``--out`` appends a JSON line per seed (resumable).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np

from hodiff.check import NOT_DIFFERENTIABLE, gradcheck
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.harness import outputs_of, scalarized
from hodiff.variable import Variable


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--start", type=int, default=1)
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    specs = [(s, n) for s, n in zip(all_specs(), spec_ids(all_specs()), strict=True) if s.order]
    totals = {"elements": 0, "fail": 0, "nd": 0, "rows": 0, "crash": 0}
    start = time.perf_counter()
    for seed in range(args.start, args.start + args.points):
        per = {"seed": seed, "fail": {}, "nd": {}, "crash": {}}
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
