"""Where a GPU call spends its time: one benchmark task on cupy under cProfile.

Prints the functions with the most time of their own: Python, and the cupy calls they make
(with a GPU, most of a small workload's time is kernel launches and the Python around them).

    python -m bench.gpu_profile W1 float32 [--calls 20] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

from bench.gpu import _to_cupy
from bench.workloads import WORKLOADS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", help="a task id, e.g. W1")
    ap.add_argument("dtype", nargs="?", default="float64")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    import cupy as cp

    import hodiff as hd

    hd.set_default_context(hd.Context(backend="cupy", dtype=args.dtype))
    for w in WORKLOADS.values():
        if args.task in [t.id for t in w.tasks]:
            fn = w.builders["hodiff"](_to_cupy(w.make_inputs("full", args.dtype)))[args.task]
            break
    else:
        raise SystemExit(f"no task {args.task}")
    sync = cp.cuda.Device().synchronize
    for _ in range(3):
        fn()
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        fn()
    sync()
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"{args.task} {args.dtype}: {stats.total_tt / args.calls * 1e3:.2f} ms a call (profiled)")
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
