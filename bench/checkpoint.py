"""Checkpointing (issue 23): memory and time with and without it, and against PyTorch's.

The workloads are those of ``bench/workloads/checkpoint.py`` (W8-W11, the PINN steps
W12e, W12g and W13, each with a ``c`` twin that checkpoints every layer). Run (one
thread, one CPU)::

    unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
    taskset -c 0 python -m bench.checkpoint [--repeats 7] [--no-torch]

It reports, from one run:

* time: the best of ``--repeats`` interleaved samples of every callable's CPU time (the
  machine is shared: CPU time leaves out the waits for a core, and the best sample is the
  least disturbed one), and the ratios ``Wc / W`` (hodiff)
  and hodiff's ``W8c`` / PyTorch's ``W8c`` (``torch.utils.checkpoint``,
  ``use_reentrant=False``);
* memory: the tracemalloc peak of one call (numpy's arrays; hodiff's ratios), and the
  growth of the resident set at its peak in a child process per callable in which glibc
  maps every array of 64 KiB or more on its own (counts every allocator: hodiff against
  PyTorch);
* paired time: per time ratio, ``--paired`` ratios of one call against the mean of the
  calls of its denominator just before and after it, and their quartiles (the median is
  steadier than the ratio of two bests when the machine's speed drifts during the run);
* work: the matrix products one call of each hodiff callable makes (every product of
  hodiff's linear algebra passes both operands through ``linalg._blas_ready``), which
  unlike time does not depend on the machine's load, and the ``tanh`` values it computes;
* floors (W8-W11): the time ratio that the checkpointed step's extra products and
  ``tanh`` values alone would give at their cost on this machine (one layer's product
  and ``tanh`` timed alone): what the recomputation costs before any bookkeeping. It
  depends on the machine: where numpy's float32 ``tanh`` is vectorised with AVX-512 it
  is a tenth of a layer's product, elsewhere (AVX2) nearly as much;
* the sweep: the WGAN-GP step of W8 cut into 1, 2, 3, 4, 6, 8, 12 and 24 checkpointed
  segments, peak memory (tracemalloc) and time against the segment count, drawn in
  ``docs/img/checkpoint_memory.png`` (``--plot``) and written with the rest as JSON
  (``--out``, default ``bench/results/checkpoint.json``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import timing
from bench.run import rel_err
from bench.workloads import checkpoint as W
from bench.workloads import to_numpy

ROOT = Path(__file__).resolve().parent.parent
PAIRS = (
    ("W8", "W8c"),
    ("W9", "W9c"),
    ("W10", "W10c"),
    ("W10b", "W10bc"),
    ("W10h", "W10hc"),
    ("W11", "W11c"),
    ("W12e", "W12ec"),
    ("W12g", "W12gc"),
    ("W13", "W13c"),
)
SEGMENTS = (1, 2, 3, 4, 6, 8, 12, 24)
#: the issue's targets: (numerator, denominator, measure, bound)
TARGETS = (
    ("hodiff W8c", "hodiff W8", "memory", 0.4),
    ("hodiff W8c", "hodiff W8", "time", 1.35),
    ("hodiff W9c", "hodiff W9", "memory", 0.4),
    ("hodiff W9c", "hodiff W9", "time", 1.35),
    ("hodiff W10c", "hodiff W10", "memory", 0.4),
    ("hodiff W10c", "hodiff W10", "time", 1.35),
    ("hodiff W10hc", "hodiff W10h", "memory", 0.4),  # the HVP by hd.hvp
    ("hodiff W10hc", "hodiff W10h", "time", 1.35),
    ("hodiff W12ec", "hodiff W12e", "memory", 0.4),
    ("hodiff W12ec", "hodiff W12e", "time", 1.35),
    ("hodiff W8c", "torch W8c", "memory", 1.0),
    ("hodiff W8c", "torch W8c", "time", 1.0),
)


def builders(libs: list[str], size: str) -> dict[str, Any]:
    inp = W.make_inputs(size, "float32")
    fns = {}
    if "hodiff" in libs:
        fns.update({f"hodiff {k}": f for k, f in W.hodiff_fns(inp).items()})
    if "torch" in libs:
        import torch

        torch.set_num_threads(1)
        fns.update({f"torch {k}": f for k, f in W.torch_fns(inp).items()})
    return fns


def check(fns: dict[str, Any]) -> dict[str, float]:
    """Relative error of each callable against hodiff's uncheckpointed task."""
    outs = {k: to_numpy(f()) for k, f in fns.items()}
    errs = {}
    for k, o in outs.items():
        ref = "hodiff " + k.split()[1].rstrip("c")
        errs[k] = rel_err(o, outs[ref])
    return errs


def rss_child(key: str, size: str) -> None:
    """(child) The resident-set peak of one call of ``key``, after one warm-up call."""
    lib = key.split()[0]
    fn = builders([lib], size)[key]
    fn()
    print(json.dumps({"rss": timing.peak_rss(fn)}))


def rss(key: str, size: str) -> int | None:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    cmd = [sys.executable, "-m", "bench.checkpoint", "--rss-child", key, "--size", size]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["rss"]


def count_work(fns: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """The matrix products and the ``tanh`` values one call of each hodiff callable
    computes (after a warm-up call): every product of hodiff's linear algebra passes both
    operands through ``linalg._blas_ready``, every ``tanh`` forward calls ``Tanh``'s ufunc.
    """
    from hodiff.functions import linalg
    from hodiff.functions.math import Tanh

    products, tanhs = {}, {}
    ready, ufunc = linalg._blas_ready, Tanh._np_ufunc
    seen = [0, 0]

    def counted(a: Any) -> Any:
        seen[0] += 1
        return ready(a)

    def tanh(x: Any, *args: Any, **kw: Any) -> Any:
        seen[1] += 1
        return ufunc(x, *args, **kw)

    for k, f in fns.items():
        if not k.startswith("hodiff"):
            continue
        f()
        linalg._blas_ready = counted  # type: ignore[assignment]
        Tanh._np_ufunc = Tanh._fast_forward = staticmethod(tanh)  # type: ignore[assignment]
        try:
            seen[:] = [0, 0]
            f()
        finally:
            linalg._blas_ready = ready  # type: ignore[assignment]
            Tanh._np_ufunc = Tanh._fast_forward = ufunc
        products[k] = seen[0] // 2  # both operands of each product
        tanhs[k] = seen[1]
    return products, tanhs


def op_times(size: str, repeats: int) -> dict[str, dict[str, float]]:
    """Per configuration of W8-W11 (``a``, ``b``), the best CPU time of one layer's matrix
    product (``(batch, width) @ (width, width)``) and of its ``tanh``, in float32."""
    rng = np.random.default_rng(0)
    out = {}
    for key, (width, batch, _, _) in W.SIZES[size].items():
        x = rng.standard_normal((batch, width)).astype(np.float32)
        w = rng.standard_normal((width, width)).astype(np.float32)
        best = {}
        for name, fn in (("product", lambda x=x, w=w: x @ w), ("tanh", lambda x=x: np.tanh(x))):
            samples = []
            for _ in range(max(repeats, 3)):
                t0 = time.process_time()
                for _ in range(20):
                    fn()
                samples.append((time.process_time() - t0) / 20)
            best[name] = min(samples)
        out[key] = best
    return out


#: the configuration (of :data:`W.SIZES`) of each task whose floor is estimated
FLOOR_CONFIG = {"W8": "a", "W9": "a", "W10": "a", "W10b": "a", "W10h": "a", "W11": "b"}


def floors(result: dict[str, Any]) -> dict[str, float]:
    """Per pair of W8-W11, the time ratio that the checkpointed step's extra work alone
    would give on this machine: ``(T + dP t_product + dT t_tanh) / T``, with ``T`` the
    uncheckpointed step's time and ``dP``, ``dT`` the products and ``tanh`` values it
    computes more (the recomputations and the rules run again), at their measured cost.
    """
    out = {}
    for p, c in PAIRS:
        if p not in FLOOR_CONFIG:
            continue
        a, b = f"hodiff {p}", f"hodiff {c}"
        if a not in result["time_s"] or b not in result["time_s"]:
            continue
        ops = result["op_times"][FLOOR_CONFIG[p]]
        d_p = result["products"][b] - result["products"][a]
        d_t = result["tanhs"][b] - result["tanhs"][a]
        extra = d_p * ops["product"] + d_t * ops["tanh"]
        out[f"{b} / {a}"] = (result["time_s"][a] + extra) / result["time_s"][a]
    return out


def best_times(fns: dict[Any, Any], repeats: int) -> dict[Any, float]:
    """The best of ``repeats`` samples of each callable's CPU time (``time.process_time``),
    interleaved in an order rotated by one each round, each after a collection and an
    untimed call (as ``bench.timing.interleaved``). CPU time leaves out the time the process
    waits for a core, which on a shared machine is most of the noise of wall time.
    """
    keys = list(fns)
    best = dict.fromkeys(keys, float("inf"))
    for r in range(repeats):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            gc.collect()
            fns[k]()
            t0 = time.process_time()
            fns[k]()
            best[k] = min(best[k], time.process_time() - t0)
    return best


def paired_ratios(fns: dict[str, Any], pairs: list[tuple[str, str]], rounds: int) -> dict:
    """Per pair ``(num, den)``: ``rounds`` ratios of CPU time, each of one call of ``num``
    against the mean of the calls of ``den`` just before and after it (each call after a
    collection and an untimed call), and their quartiles. A slow drift of the machine's
    speed, which can put the best samples of two callables in different minutes, cancels in
    each ratio; the median is the pair's ratio, the quartiles its spread.
    """

    def timed(f: Any) -> float:
        gc.collect()
        f()
        t0 = time.process_time()
        f()
        return time.process_time() - t0

    out = {}
    for num, den in pairs:
        before = timed(fns[den])
        ratios = []
        for _ in range(rounds):
            t = timed(fns[num])
            after = timed(fns[den])
            ratios.append(2 * t / (before + after))
            before = after
        q = np.percentile(ratios, [25, 50, 75])
        out[f"{num} / {den}"] = {"ratios": ratios, "quartiles": [float(v) for v in q]}
    return out


def sweep(size: str, repeats: int) -> list[dict[str, Any]]:
    """The WGAN-GP step of W8 with ``k`` checkpointed segments: peak memory and time."""
    cfg = W.make_inputs(size, "float32")["a"]
    layers = (len(cfg["params"]) - 2) // 2
    rows = []
    steps = {None: W.hodiff_steps(cfg, None)["wgan"]}
    for k in SEGMENTS:
        if k <= layers:
            steps[k] = W.hodiff_steps(cfg, -(-layers // k))["wgan"]
    best = best_times(steps, repeats)
    for k, f in steps.items():
        f()
        rows.append({"segments": k, "peak_traced": timing.peak_traced(f), "time_s": best[k]})
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = next(r for r in rows if r["segments"] is None)
    seg = [r for r in rows if r["segments"] is not None]
    ks = [r["segments"] for r in seg]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    a.plot(ks, [r["peak_traced"] / 2**20 for r in seg], "o-", label="checkpointed")
    a.axhline(base["peak_traced"] / 2**20, color="C3", ls="--", label="no checkpointing")
    a.set_xscale("log", base=2)
    a.set_xticks(ks, [str(k) for k in ks])
    a.set_xlabel("checkpointed segments (24 layers)")
    a.set_ylabel("peak memory (MiB, tracemalloc)")
    a.set_ylim(bottom=0)
    a.legend()
    b.plot(ks, [r["time_s"] / base["time_s"] for r in seg], "o-")
    b.axhline(1.0, color="C3", ls="--")
    b.set_xscale("log", base=2)
    b.set_xticks(ks, [str(k) for k in ks])
    b.set_xlabel("checkpointed segments (24 layers)")
    b.set_ylabel("time / time without")
    b.set_ylim(bottom=0)
    fig.suptitle("WGAN-GP critic step, residual tanh MLP 24 x 128, batch 1024, float32")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def compute_ratios(result: dict[str, Any], fns: dict[str, Any], torch: bool) -> list[dict]:
    """The issue's ratios (with their bounds), W11's, and PyTorch's own (for reference)."""

    def ratio(num: str, den: str, what: str) -> float:
        if what == "time":
            return result["time_s"][num] / result["time_s"][den]
        if what == "work":
            return result["products"][num] / result["products"][den]
        key = "peak_rss" if den.startswith("torch") or num.startswith("torch") else "peak_traced"
        a, b = result.get(key, {}).get(num), result.get(key, {}).get(den)
        return a / b if a and b else float("nan")

    rows = [(n, d, w, b) for n, d, w, b in TARGETS]
    untargeted = ("W10b", "W11", "W12g", "W13")  # reported without a bound
    rows += [
        (f"hodiff {p}c", f"hodiff {p}", w, None) for p in untargeted for w in ("memory", "time")
    ]
    rows += [(f"hodiff {c}", f"hodiff {p}", "work", None) for p, c in PAIRS]
    if torch:
        rows += [
            (f"torch {c}", f"torch {p}", w, None) for p, c in PAIRS for w in ("memory", "time")
        ]
    return [
        {"num": n, "den": d, "measure": w, "ratio": ratio(n, d, w), "bound": b}
        for n, d, w, b in rows
        if n in fns and d in fns
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.checkpoint", description=__doc__)
    p.add_argument("--size", choices=("full", "tiny"), default="full")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--no-torch", dest="torch", action="store_false")
    p.add_argument("--no-rss", dest="rss", action="store_false")
    p.add_argument("--no-sweep", dest="sweep", action="store_false")
    p.add_argument(
        "--paired", type=int, default=9, help="rounds of the paired time ratios (0: none)"
    )
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "checkpoint.json"))
    p.add_argument("--plot", default=str(ROOT / "docs" / "img" / "checkpoint_memory.png"))
    p.add_argument("--rss-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child, args.size)
        return 0
    libs = ["hodiff"] + (["torch"] if args.torch else [])
    fns = builders(libs, args.size)
    errors = check(fns)
    print("relative error against hodiff's uncheckpointed task:")
    for k, e in errors.items():
        print(f"  {k:12s} {e:.1e}")
    result: dict[str, Any] = {"errors": errors, "time_s": best_times(fns, args.repeats)}
    result["peak_traced"] = {k: timing.peak_traced(f) for k, f in fns.items() if "hodiff" in k}
    result["products"], result["tanhs"] = count_work(fns)
    result["op_times"] = op_times(args.size, args.repeats)
    if args.rss:
        result["peak_rss"] = {k: rss(k, args.size) for k in fns}
    print(f"\n{'callable':12s} {'best time':>10s} {'traced MiB':>11s} {'RSS MiB':>9s} products")
    for k in fns:
        tr = result["peak_traced"].get(k)
        rs = result.get("peak_rss", {}).get(k)
        pr = result["products"].get(k)
        print(
            f"{k:12s} {result['time_s'][k] * 1e3:8.1f}ms "
            f"{'' if tr is None else f'{tr / 2**20:11.1f}'} "
            f"{'' if rs is None else f'{rs / 2**20:9.1f}'} "
            f"{'' if pr is None else f'{pr:8d}'}"
        )
    ratios = compute_ratios(result, fns, args.torch)
    result["ratios"] = ratios
    result["floors"] = floors(result)
    print("\nratios (target in brackets):")
    for r in ratios:
        tgt = "" if r["bound"] is None else f"  [<= {r['bound']}]"
        ok = "" if r["bound"] is None else ("  ok" if r["ratio"] <= r["bound"] else "  MISSED")
        print(f"  {r['measure']:6s} {r['num']:12s} / {r['den']:12s} {r['ratio']:6.3f}{tgt}{ok}")
    print("\nfloors (the time ratio of the extra products and tanh values alone, at their cost):")
    for key, v in result["floors"].items():
        print(f"  floor  {key:28s} {v:6.3f}")
    if args.paired:
        pairs = sorted({(r["num"], r["den"]) for r in ratios if r["measure"] == "time"})
        result["paired"] = paired_ratios(fns, pairs, args.paired)
        print(f"\ntime ratios paired ({args.paired} rounds: 25%, median, 75%):")
        for key, v in result["paired"].items():
            lo, mid, hi = v["quartiles"]
            print(f"  {key:28s} {lo:6.3f} {mid:6.3f} {hi:6.3f}")
    if args.sweep:
        rows = sweep(args.size, args.repeats)
        result["sweep"] = rows
        print("\nsegments  peak MiB  time")
        for r in rows:
            print(f"  {r['segments']!s:6s} {r['peak_traced'] / 2**20:8.1f} {r['time_s']:7.3f}s")
        if args.plot:
            plot(rows, Path(args.plot))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
