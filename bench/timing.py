"""Interleaved timing and peak memory.

Timing: every callable of a group is warmed up, then the group is run ``repeats``
times; each round calls every callable once (looped ``number`` times when one
call is shorter than ``min_time``), in an order rotated by one each round, so
that slow drifts and bursts of machine noise hit every library alike. The
statistic is the median over rounds.

Memory, two measures (see :func:`peak_rss` and :func:`peak_traced`).
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["interleaved", "peak_rss", "peak_traced"]


def _calibrate(fn: Callable[[], Any], warmup: int, min_time: float) -> int:
    """Runs ``fn`` ``warmup`` times (at least once) and returns the loop count of one sample."""
    t = math.inf
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return max(1, min(10_000, math.ceil(min_time / max(t, 1e-9))))


def interleaved(
    fns: dict[Hashable, Callable[[], Any]],
    repeats: int,
    warmup: int,
    min_time: float,
    progress: bool = False,
) -> dict[Hashable, dict[str, float]]:
    """Median (and quartiles, min) seconds per call of each callable, timed interleaved."""
    keys = list(fns)
    numbers = {k: _calibrate(fns[k], warmup, min_time) for k in keys}
    samples: dict[Hashable, list[float]] = {k: [] for k in keys}
    for r in range(repeats):
        shift = r % len(keys) if keys else 0
        for k in keys[shift:] + keys[:shift]:
            fn, number = fns[k], numbers[k]
            # a full collection first (no garbage of another sample lands in this one), then one
            # untimed call: a collection walks every object and leaves the caches cold, which a
            # loop that calls fn again and again (a training loop) never sees
            gc.collect()
            fn()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t0) / number)
        if progress:
            print(f"\r    round {r + 1}/{repeats}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    out = {}
    for k in keys:
        s = sorted(samples[k])
        q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0]] * 3
        out[k] = {
            "median_s": statistics.median(s),
            "q1_s": q[0],
            "q3_s": q[2],
            "min_s": s[0],
            "repeats": len(s),
            "number": numbers[k],
        }
    return out


# ---------------------------------------------------------------- memory
def _status_kib() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0])
    return out


def peak_rss(fn: Callable[[], Any]) -> int | None:
    """Bytes by which the resident set grows at its peak during one call of ``fn``.

    Linux only (``/proc/self/clear_refs`` resets the high-water mark); None elsewhere.
    Counts every allocator (numpy's, torch's, XLA's) alike, but only memory that
    the allocator newly touches: run with glibc's ``MALLOC_MMAP_THRESHOLD_`` set low
    so that large buffers are mapped and unmapped per use, not recycled unseen.
    """
    try:
        gc.collect()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = _status_kib()["VmRSS"]
        out = fn()
        peak = _status_kib()["VmHWM"]
        del out
    except OSError:
        return None
    return max(0, peak - base) * 1024


def peak_traced(fn: Callable[[], Any]) -> int:
    """Peak bytes of Python and numpy allocations during one call (tracemalloc).

    numpy reports its array buffers to tracemalloc; torch and XLA do not, so this
    measure is meaningful for the numpy-based libraries only.
    """
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
        del out
    finally:
        tracemalloc.stop()
    return max(0, peak - base)
