"""Per-op cost of a second derivative against the size of the graph, with the collector on and off.

The workload of W4 at growing lengths: ``x`` of 16 float64, ``y`` = a chain of ``n`` tanh,
``(g,) = hd.grad(F.sum(y), x)``, then the second derivative, either ``hd.grad(F.sum(g), x)``
recorded at once (``grad``) or ``F.sum(g).backward()`` (``backward``). A sample times the
whole step (building the chain included) over about ``--ops`` ops in all (``ops // n``
steps of ``n`` ops), after ``gc.collect()``; ``off`` runs it with Python's cyclic collector
disabled. The per-op cost should not grow with ``n``: Python's full collections traverse
every live tracked object, so a graph that holds many of them per node costs more per node
the larger it is. Run: ``python -m bench.graph_size [--sizes 200 800 3200 12800 --repeats 5]``
(single thread; the CPU time of the process, which does not count the time it waits for a
core on a shared machine; the minimum of interleaved repeats, or their median; microseconds
per op).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

SIZES = (200, 800, 3200, 12800)
STEPS = ("grad", "values", "backward")


def step(x: Any, n: int, second: str) -> Any:
    """One second derivative of ``sum(chain of n tanh)`` w.r.t. ``x`` (the value, for checks)."""
    import hodiff as hd
    import hodiff.functions as F

    y = x
    for _ in range(n):
        y = F.tanh(y)
    (g,) = hd.grad(F.sum(y), x)
    if second in ("grad", "values"):  # recorded, or values only (create_graph=False)
        (h,) = hd.grad(F.sum(g), x, create_graph=second == "grad")
        return h.d
    x.zero_grad()
    F.sum(g).backward()
    return x.g


def sample(n: int, second: str, collector: bool, ops: int) -> float:
    """Seconds per op of ``step`` over about ``ops`` ops, the collector on or off."""
    import hodiff as hd

    x = hd.Variable.from_array(np.random.default_rng(0).standard_normal(16), need_grad=True)
    reps = max(1, ops // n)
    clock = time.process_time
    gc.collect()
    was = gc.isenabled()
    if not collector:
        gc.disable()
    try:
        t = clock()
        for _ in range(reps):
            step(x, n, second)
        t = clock() - t
    finally:
        if was:
            gc.enable()
    return t / (reps * n)


def measure(
    sizes: Sequence[int] = SIZES,
    steps: Sequence[str] = STEPS,
    repeats: int = 5,
    ops: int = 12800,
    stat: Any = min,
) -> dict[str, dict[int, float]]:
    """``{"grad|on": {n: us per op}, ...}`` for each second step and collector state, the
    ``stat`` (min, statistics.median) of the repeats.

    The cases are interleaved (each repeat runs every case once) so that machine noise
    hits them alike; one warm-up round is not timed.
    """
    cases = [(s, c) for s in steps for c in (True, False)]
    times: dict[str, dict[int, list[float]]] = {
        f"{s}|{'on' if c else 'off'}": {n: [] for n in sizes} for s, c in cases
    }
    for r in range(repeats + 1):
        for n in sizes:
            for s, c in cases:
                t = sample(n, s, c, ops if r else min(ops, 2 * n))
                if r:
                    times[f"{s}|{'on' if c else 'off'}"][n].append(t * 1e6)
    return {k: {n: stat(v) for n, v in d.items()} for k, d in times.items()}


def table(results: dict[str, dict[int, float]]) -> str:
    """The results as text: one row per case, us per op at each size and the last / first."""
    sizes = sorted(next(iter(results.values())))
    head = f"{'second step':12} {'gc':3} " + " ".join(f"{f'n={n}':>9}" for n in sizes)
    lines = [head + f" {f'{sizes[-1]}/{sizes[0]}':>11}"]
    for key, d in results.items():
        s, c = key.split("|")
        cells = " ".join(f"{d[n]:9.2f}" for n in sizes)
        lines.append(f"{s:12} {c:3} {cells} {d[sizes[-1]] / d[sizes[0]]:10.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, dict[int, float]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    ap.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ops", type=int, default=12800, help="ops per sample (steps of n ops)")
    ap.add_argument("--median", action="store_true", help="the median of the repeats, not the min")
    args = ap.parse_args(argv)
    stat = statistics.median if args.median else min
    results = measure(args.sizes, args.steps, args.repeats, args.ops, stat)
    print(
        f"second derivative of n tanh on size-16 x: us per op ({stat.__name__} of {args.repeats})"
    )
    print(table(results))
    return results


if __name__ == "__main__":
    main()
