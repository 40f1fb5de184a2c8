"""Time and minor page faults per step of hodiff alone, with and without ``hodiff/_malloc.py``.

Each case runs in a fresh process that imports hodiff only (no peer library, whose own
allocations would move glibc's malloc thresholds too): the workload's hodiff function,
warmed up, then timed; ``HODIFF_MALLOC_TUNE=0`` turns the import-time adjustment off. Run:
``python -m bench.faults [--workloads critic cnn mlp --size full --steps 30]``
(single thread; the median step, and the minor faults of the timed steps).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, os, resource, sys, time
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from bench.workloads import WORKLOADS
w = WORKLOADS[sys.argv[1]]
fns = w.builders["hodiff"](w.make_inputs(sys.argv[2], sys.argv[3]))
out = {}
for tid, fn in sorted(fns.items()):
    for _ in range(5):
        fn()
    steps = int(sys.argv[4])
    times = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    out[tid] = (sorted(times)[steps // 2], faults / steps)
print(json.dumps(out))
"""


def run_case(workload: str, size: str, dtype: str, steps: int, tune: bool) -> dict[str, list]:
    """``{task: [median seconds per step, minor faults per step]}`` in a fresh process."""
    env = dict(os.environ, HODIFF_MALLOC_TUNE="1" if tune else "0", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, workload, size, dtype, str(steps)],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    from bench.workloads import WORKLOADS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["critic", "cnn", "mlp"])
    ap.add_argument("--size", default="full", choices=["full", "tiny"])
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args(argv)
    results: dict[str, list[float]] = {}
    head = f"{'task':6} {'dtype':8} {'ms/step':>16} {'faults/step':>16}"
    print(f"{head}   (tuned vs HODIFF_MALLOC_TUNE=0)")
    for name in args.workloads:
        for dtype in WORKLOADS[name].dtypes:
            tuned = run_case(name, args.size, dtype, args.steps, tune=True)
            plain = run_case(name, args.size, dtype, args.steps, tune=False)
            for tid in sorted(tuned):
                (t1, f1), (t0, f0) = tuned[tid], plain[tid]
                results[f"{tid}|{dtype}"] = [t1, f1, t0, f0]
                print(
                    f"{tid:6} {dtype:8} {t1 * 1e3:7.2f} vs {t0 * 1e3:6.2f} {f1:7.0f} vs {f0:6.0f}"
                )
    return results


if __name__ == "__main__":
    main()
