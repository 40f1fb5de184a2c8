"""``python -m bench --profile``: where hodiff spends its time on W1 and W4 (cProfile).

cProfile attributes numpy's kernels to the Python function that calls them
(ufuncs and operators are not profiled calls), so a rule's ``tottime`` is
mostly its arithmetic while the engine's entries are pure overhead.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

from bench.workloads import WORKLOADS

#: (group, task, dtype, calls profiled)
CASES = (("mlp", "W1", "float32", 40), ("mlp", "W1", "float64", 20), ("chain", "W4", "float64", 20))


def profile(group: str, task: str, dtype: str, calls: int, size: str, top: int = 25) -> str:
    w = WORKLOADS[group]
    fn = w.builders["hodiff"](w.make_inputs(size, dtype))[task]
    fn()
    fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    plain = (time.perf_counter() - t0) / calls
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    buf.write(
        f"## {task} {dtype} ({group}, size {size}): {plain * 1e3:.2f} ms per call "
        f"unprofiled; {stats.total_calls / calls:.0f} profiled calls per call\n"
    )
    buf.write("\n### by own time (tottime)\n")
    stats.sort_stats("tottime").print_stats(top)
    buf.write("\n### by cumulative time, hodiff only\n")
    stats.sort_stats("cumulative").print_stats("hodiff", top)
    return buf.getvalue()


def main(args: argparse.Namespace) -> int:
    parts = [profile(*case, size=args.size) for case in CASES]
    text = "\n\n".join(parts)
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.txt").write_text(text)
    print(text)
    print(f"wrote {out / 'profile.txt'}", file=sys.stderr)
    return 0
