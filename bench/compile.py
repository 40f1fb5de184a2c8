"""``python -m bench.compile``: ``hd.jit`` beside hodiff eager (and jax.jit if installed).

W4 (bench/workloads/chain.py): 200 x ``tanh(y) * 1.01 + 0.1`` on a size-16 vector, the
second derivative of ``sum(y)``. Rows: hodiff eager (``hd.grad`` then ``.backward()``),
the static graph re-run (W4s), ``hd.jit`` of the whole second derivative (backend
"replay"), and jax.jit (``lax.fori_loop``) where jax is installed. Also: the first call
(record + simplify + generate), the nodes before/after simplification and replay's cost
per op. Run with one thread::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        taskset -c 1 python -m bench.compile [--size tiny]

``--all`` times every workload's ``hd.jit`` row (the workloads' ``"hd.jit"`` builders)
beside hodiff eager and jax.jit, interleaved per workload group, with each compiled row's
first call (record + simplify + generate + run) and the tracemalloc peak of a W3 step
compiled and not; ``--plot PATH`` draws the ratios (docs/compile.md's picture).
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
from bench.run import rel_err
from bench.timing import interleaved, peak_traced
from bench.workloads import WORKLOADS, chain, to_numpy

#: the groups with an ``hd.jit`` row (W1-W7, W12) and the libraries compared
GROUPS = ("mlp", "critic", "chain", "hessian", "cnn", "per_example", "taylor")
LIBS = ("hodiff", "hd.jit", "jax")


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
    p.add_argument("--all", action="store_true", help="every workload's hd.jit row")
    p.add_argument("--groups", nargs="+", default=list(GROUPS), choices=GROUPS)
    p.add_argument("--plot", default=None, help="with --all: save the picture there")
    p.add_argument("--json", default=None, help="with --all: save the rows there")
    args = p.parse_args(argv)
    if args.all:
        return all_workloads(args)
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


def _group(name: str, size: str, repeats: int) -> list[dict[str, Any]]:
    """One group: build and check each library's callables (timing the hd.jit first calls),
    then time them interleaved.
    """
    w = WORKLOADS[name]
    dtype = "float64"
    inp = w.make_inputs(size, dtype)
    libs = [lib for lib in LIBS if lib in w.builders]
    if "jax" in libs and importlib.util.find_spec("jax") is None:
        libs.remove("jax")
    fns: dict[tuple[str, str], Any] = {}
    outs: dict[tuple[str, str], list[np.ndarray]] = {}
    first: dict[str, float] = {}
    for lib in libs:
        t0 = time.perf_counter()
        built = w.builders[lib](inp)
        setup = time.perf_counter() - t0
        for tid, fn in built.items():
            t0 = time.perf_counter()
            outs[(tid, lib)] = to_numpy(fn())
            if lib == "hd.jit":
                first[tid] = time.perf_counter() - t0 + setup / len(built)
            fns[(tid, lib)] = fn
    res = interleaved(fns, repeats, warmup=2, min_time=0.1)
    rows = []
    for task in w.tasks:
        if (task.id, "hd.jit") not in res:
            continue
        row: dict[str, Any] = {"task": task.id, "title": task.title, "first_call_s": first[task.id]}
        for lib in libs:
            if (task.id, lib) in res:
                row[lib] = res[(task.id, lib)]["median_s"]
                row[f"{lib}_err"] = rel_err(outs[(task.id, lib)], outs[(task.id, "hodiff")])
        if name == "critic":
            row["peak_traced_eager"] = peak_traced(fns[(task.id, "hodiff")])
            row["peak_traced_jit"] = peak_traced(fns[(task.id, "hd.jit")])
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    eager, jit_s, jax_s = row.get("hodiff"), row["hd.jit"], row.get("jax")
    cells = [
        row["task"],
        f"{eager * 1e3:.3f}" if eager else "-",
        f"{jit_s * 1e3:.3f}",
        f"{jax_s * 1e3:.3f}" if jax_s else "-",
        f"{jit_s / eager:.2f}" if eager else "-",
        f"{jit_s / jax_s:.2f}" if jax_s else "-",
        f"{eager / jax_s:.2f}" if eager and jax_s else "-",
        f"{row['first_call_s'] * 1e3:.0f}",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| task | eager ms | hd.jit ms | jax.jit ms | jit / eager | jit / jax | eager / jax "
    "| first call ms |\n|---|---:|---:|---:|---:|---:|---:|---:|"
)


def all_workloads(args: argparse.Namespace) -> int:
    print(HEADER, flush=True)
    rows: list[dict[str, Any]] = []
    for name in args.groups:
        rows += _group(name, args.size, args.repeats)
    for r in rows:
        if "peak_traced_jit" in r:
            print(
                f"{r['task']} tracemalloc peak: eager {r['peak_traced_eager'] / 2**20:.2f} MiB, "
                f"hd.jit {r['peak_traced_jit'] / 2**20:.2f} MiB "
                f"({r['peak_traced_jit'] / r['peak_traced_eager']:.2f}x)"
            )
    bad = [r["task"] for r in rows if r.get("hd.jit_err", 0.0) > 1e-10]
    if bad:
        print(f"hd.jit differs from eager by more than 1e-10 on {bad}")
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    return 1 if bad else 0


def _label(row: dict[str, Any]) -> str:
    """A bar's label: the workload's id and its title, cut to fit the margin."""
    title = str(row.get("title", ""))
    title = title if len(title) <= 38 else title[:37] + "\u2026"
    return f"{row['task']}  {title}".strip()


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """Horizontal bars per task: hd.jit's and jax.jit's time relative to hodiff eager."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("hodiff")]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.4))
    ys = np.arange(len(rows))[::-1]
    h = 0.38
    jit = [r["hd.jit"] / r["hodiff"] for r in rows]
    jax = [r["jax"] / r["hodiff"] if r.get("jax") else np.nan for r in rows]
    backend = "fused" if importlib.util.find_spec("llvmlite") is not None else "replay"
    ax.barh(ys + h / 2, jit, h, color="#9467bd", label=f'hodiff hd.jit (backend "{backend}")')
    ax.barh(ys - h / 2, jax, h, color="#1f77b4", label="jax.jit")
    ax.axvline(1.0, color="#d62728", lw=1.2, label="hodiff eager = 1")
    ax.set_xscale("log")
    ax.set_yticks(ys)
    ax.set_yticklabels([_label(r) for r in rows], fontsize=8)
    ax.set_xlabel("time per call relative to hodiff eager (log scale; < 1 is faster)")
    ax.set_ylabel("workload")
    ax.set_title("Compiled (hd.jit) vs eager vs jax.jit, one CPU thread, float64", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
