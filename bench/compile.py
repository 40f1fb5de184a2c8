"""``python -m bench.compile``: ``hd.jit`` beside hodiff eager (and jax.jit if installed).

W4 (bench/workloads/chain.py): 200 x ``tanh(y) * 1.01 + 0.1`` on a size-16 vector, the
second derivative of ``sum(y)``. Rows: hodiff eager (``hd.grad`` then ``.backward()``),
the static graph re-run (W4s), ``hd.jit`` of the whole second derivative (backend
"replay"), and jax.jit (``lax.fori_loop``) where jax is installed. Also: the first call
(record + simplify + generate), the nodes before/after simplification and replay's cost
per op. Run with one thread::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        taskset -c 1 python -m bench.compile [--size tiny]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
from bench.timing import interleaved
from bench.workloads import chain


def _d2(steps: int) -> Any:
    def d2(x: Any) -> Any:
        (g,) = hd.grad(F.sum(chain._chain(x, steps, F.tanh)), x)
        (h,) = hd.grad(F.sum(g), x)
        return h

    return d2


_WARM = """
import sys, time
t0 = time.perf_counter()
import hodiff as hd
from bench.compile import _d2
from bench.workloads import chain
inp = chain.make_inputs(sys.argv[1], "float64")
t1 = time.perf_counter()
hd.jit(_d2(inp["steps"]), backend="fused")(inp["x"])
print(time.perf_counter() - t1, t1 - t0)
"""


def _new_process(size: str, cache_dir: str) -> float:
    """Seconds of the first fused call in a new process with the cache warm (after imports)."""
    env = dict(os.environ, HODIFF_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-c", _WARM, size], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compile")
    p.add_argument("--size", default="full", choices=sorted(chain.SIZES))
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    inp = chain.make_inputs(args.size, "float64")
    x0, steps = inp["x"], inp["steps"]
    fns = dict(chain.hodiff_fns(inp))
    t0 = time.perf_counter()
    g = hd.jit(_d2(steps), backend="replay")
    h = g(x0)
    first = time.perf_counter() - t0
    stats = g.lower(x0)
    np.testing.assert_allclose(h, fns["W4"](), rtol=1e-12)
    rows = {"hodiff eager (W4)": fns["W4"], "hodiff static (W4s)": fns["W4s"]}
    rows["hd.jit replay"] = lambda: g(x0)
    fused_first = fused_warm = None
    if importlib.util.find_spec("llvmlite") is not None:
        with tempfile.TemporaryDirectory() as cache_dir:  # a cold cache, then a new process
            os.environ["HODIFF_CACHE_DIR"] = cache_dir
            t0 = time.perf_counter()
            gf = hd.jit(_d2(steps), backend="fused")
            hf = gf(x0)
            fused_first = time.perf_counter() - t0
            fused_warm = _new_process(args.size, cache_dir)
        np.testing.assert_allclose(hf, h, rtol=1e-10)  # libm's tanh through 400 steps
        print(f"fused: {gf.lower(x0)}")
        rows["hd.jit fused"] = lambda: gf(x0)
    if importlib.util.find_spec("jax") is not None:
        rows["jax.jit (fori_loop)"] = chain.jax_fns(inp)["W4"]
    res = interleaved(rows, args.repeats, warmup=2, min_time=0.2)
    eager = res["hodiff eager (W4)"]["median_s"]
    jit_s = res["hd.jit replay"]["median_s"]
    print(f"W4, size {args.size}: {stats}")
    print(f"first call (record + simplify + generate + run): {first * 1e3:.0f} ms")
    if fused_first is not None:
        print(f"fused first call, cold cache (record + simplify + compile): {fused_first:.2f} s")
        print(f"fused first call in a new process, warm cache: {fused_warm:.2f} s")
    print(f"{'row':24s} {'median ms':>10s} {'vs eager':>9s} {'vs hd.jit':>10s}")
    for k, r in res.items():
        m = r["median_s"]
        print(f"{k:24s} {m * 1e3:10.3f} {m / eager:9.3f} {m / jit_s:10.2f}")
    print(f"replay: {jit_s / stats.nodes_after * 1e6:.2f} us per op ({stats.nodes_after} ops)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
