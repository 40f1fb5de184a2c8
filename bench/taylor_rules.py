"""The cost of a Taylor rule: a Laplacian through ``F.pad`` against the same through
``F.concatenate``.

``f(x) = sum(tanh(W pad(x, (1, 1))))`` for ``x`` of ``(D,)``: padding with zeros is
concatenating two zeros, so both Laplacians are equal, and with both primitives on the
linear rule (``y_k = f(x_k)``, one call on the stacked coefficients of the ``D``
directions) their costs are too. A primitive left on the generic rule pays ``D`` nested
vjps instead. Run: ``python -m bench.taylor_rules [--dims 16 64 256 --repeats 15]``
(one thread; medians of interleaved repeats).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
from bench.timing import interleaved


def problem(d: int, seed: int = 0) -> tuple[np.ndarray, dict[str, Callable[[Any], Any]]]:
    """A point ``x`` of ``(d,)`` and the two functions, ``"pad"`` and ``"concatenate"``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(d)
    w = rng.standard_normal((d + 2, d)) / np.sqrt(d)
    zero = np.zeros(1)

    def through_pad(v: Any) -> Any:
        return F.sum(F.tanh(F.affine(F.reshape(F.pad(v, (1, 1)), (1, d + 2)), w)))

    def through_concatenate(v: Any) -> Any:
        y = F.concatenate(zero, v, zero, axis=0)
        return F.sum(F.tanh(F.affine(F.reshape(y, (1, d + 2)), w)))

    return x, {"pad": through_pad, "concatenate": through_concatenate}


def main(argv: list[str] | None = None) -> dict[int, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--min-time", type=float, default=0.05)
    args = p.parse_args(argv)
    results: dict[int, dict[str, float]] = {}
    print(f"{'D':>5} {'pad (ms)':>10} {'concatenate (ms)':>17} {'pad/concatenate':>16}")
    for d in args.dims:
        x, fs = problem(d)
        a, b = (float(hd.laplacian(f, x)) for f in fs.values())
        if not np.isclose(a, b, rtol=1e-10, atol=1e-12):
            raise AssertionError(f"D={d}: the two Laplacians differ: {a} and {b}")
        calls = {k: (lambda f=f, x=x: hd.laplacian(f, x)) for k, f in fs.items()}
        times = interleaved(calls, args.repeats, 1, args.min_time)  # type: ignore[arg-type]
        t = {k: v["median_s"] for k, v in times.items()}
        t["ratio"] = t["pad"] / t["concatenate"]
        results[d] = t
        print(f"{d:>5} {t['pad'] * 1e3:>10.3f} {t['concatenate'] * 1e3:>17.3f} {t['ratio']:>16.2f}")
    return results


if __name__ == "__main__":
    main()
