"""The benchmark driver: build, check, time, measure memory, report.

``python -m bench`` calls :func:`main` after :func:`bench.cli.pin_threads`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from bench import report, timing
from bench.workloads import WORKLOADS, Workload, to_numpy

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("torch", "jax", "autograd")
#: float64 relative error allowed against hodiff (issue 5); float32 gets a sanity bound
TOLERANCE = {"float64": 1e-10, "float32": 1e-4}
_keep_alive: list[Any] = []  # threadpoolctl's limiter


def available(lib: str) -> bool:
    if lib in ("hodiff", "hd.jit", "numpy"):
        return True
    return importlib.util.find_spec(lib) is not None


def limit_threads(n: int, libs: list[str]) -> dict[str, Any]:
    """Sets every loaded runtime to ``n`` threads (after import) and reports what they use."""
    info: dict[str, Any] = {"requested": n}
    if hasattr(os, "sched_getaffinity"):
        info["cpu_affinity"] = sorted(os.sched_getaffinity(0))
    if "torch" in libs:
        import torch

        torch.set_num_threads(n)
        with contextlib.suppress(RuntimeError):  # already set: the pool has started
            torch.set_num_interop_threads(n)
        info["torch"] = {
            "intra_op": torch.get_num_threads(),
            "inter_op": torch.get_num_interop_threads(),
        }
    if "jax" in libs:
        importlib.import_module("jax")  # loads XLA under XLA_FLAGS
        info["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    try:
        import threadpoolctl
    except ImportError:
        info["blas"] = "threadpoolctl not installed: set by the environment variables only"
    else:
        _keep_alive.append(threadpoolctl.threadpool_limits(limits=n))
        info["blas"] = [
            {k: p.get(k) for k in ("user_api", "internal_api", "version", "num_threads", "prefix")}
            for p in threadpoolctl.threadpool_info()
        ]
    info["env"] = {
        k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    return info


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "memory_gib": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": None if load is None else [round(v, 2) for v in load],
    }


def versions(libs: list[str]) -> dict[str, str]:
    out = {"numpy": np.__version__}
    for lib in ("hodiff", *PEERS):
        if lib in libs and available(lib):
            try:
                out[lib] = importlib.metadata.version(lib)
            except importlib.metadata.PackageNotFoundError:
                out[lib] = getattr(importlib.import_module(lib), "__version__", "?")
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        out["hodiff_commit"] = commit or "?"
    except (OSError, subprocess.SubprocessError):
        out["hodiff_commit"] = "?"
    return out


def rel_err(out: list[np.ndarray], ref: list[np.ndarray]) -> float:
    """Largest norm-wise relative error ``max|a - r| / max|r|`` over the result arrays."""
    if len(out) != len(ref):
        return float("inf")
    worst = 0.0
    for a, r in zip(out, ref, strict=True):
        a, r = np.asarray(a, dtype=np.float64), np.asarray(r, dtype=np.float64)
        if a.shape != r.shape:
            return float("inf")
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(r))):
            return float("inf")
        if a.size == 0:
            continue
        scale = float(np.max(np.abs(r)))
        diff = float(np.max(np.abs(a - r)))
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


def build(w: Workload, dtype: str, libs: list[str], size: str) -> tuple[dict, dict, list]:
    """Inputs, then each library's callables (run once: jit compiles, warm caches)."""
    inp = w.make_inputs(size, dtype)
    fns: dict[tuple[str, str], Any] = {}
    outs: dict[tuple[str, str], list[np.ndarray]] = {}
    errors = []
    for lib in libs:
        if lib not in w.builders:
            continue
        try:
            built = w.builders[lib](inp)
            for tid, fn in built.items():
                outs[(tid, lib)] = to_numpy(fn())
                fns[(tid, lib)] = fn
        except Exception as e:  # a library that fails is reported, not fatal
            traceback.print_exc()
            errors.append(
                {"lib": lib, "dtype": dtype, "group": w.name, "error": f"{type(e).__name__}: {e}"}
            )
    return fns, outs, errors


def run_group(w: Workload, dtype: str, libs: list[str], args: argparse.Namespace) -> tuple:
    log(f"{w.name} {dtype}: building and checking")
    fns, outs, errors = build(w, dtype, libs, args.size)
    rows = []
    for task in w.tasks:
        ref_lib = next((lib for lib in libs if (task.id, lib) in outs), None)
        for lib in libs:
            key = (task.id, lib)
            if key not in outs:
                continue
            row = {
                "task": task.id,
                "title": task.title,
                "group": w.name,
                "dtype": dtype,
                "lib": lib,
                "reference": ref_lib,
                "tolerance": TOLERANCE[dtype],
            }
            row["rel_err"] = 0.0 if lib == ref_lib else rel_err(outs[key], outs[(task.id, ref_lib)])
            row["check_ok"] = row["rel_err"] <= TOLERANCE[dtype]
            if not row["check_ok"]:
                log(
                    f"  CHECK FAILED: {task.id} {dtype} {lib}: relative error {row['rel_err']:.3g} "
                    f"against {ref_lib} (tolerance {TOLERANCE[dtype]:g}); not timed"
                )
                del fns[key]
            rows.append(row)
    log(f"{w.name} {dtype}: timing {len(fns)} functions, {args.repeats} interleaved rounds")
    stats = timing.interleaved(
        fns, args.repeats, args.warmup, args.min_time, progress=sys.stderr.isatty()
    )
    for row in rows:
        row.update(stats.get((row["task"], row["lib"]), {}))
    return rows, errors


def memory_pass(args: argparse.Namespace, libs: list[str]) -> dict[str, dict[str, Any]]:
    """Peak memory of every function, measured in a child process (see :func:`memory_child`)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "memory.json")
        cmd = [
            sys.executable,
            "-m",
            "bench",
            "--memory-child",
            path,
            "--size",
            args.size,
            "--threads",
            str(args.threads),
            "--workloads",
            *args.workloads,
            "--libs",
            *libs,
        ]
        if args.dtypes:
            cmd += ["--dtypes", *args.dtypes]
        if not args.pin_cpu:
            cmd.append("--no-pin-cpu")
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONPATH=str(ROOT))
        log("memory: one child process, one call of each function")
        proc = subprocess.run(cmd, env=env, cwd=str(ROOT))
        if proc.returncode != 0 or not os.path.exists(path):
            log("memory pass failed; no memory numbers")
            return {}
        with open(path) as f:
            return json.load(f)


def memory_child(args: argparse.Namespace) -> int:
    """In a fresh process with large buffers mapped per use: one measured call per function."""
    libs = [lib for lib in args.libs if available(lib)]
    limit_threads(args.threads, libs)
    out: dict[str, dict[str, Any]] = {}
    for name in args.workloads:
        w = WORKLOADS[name]
        for dtype in args.dtypes or w.dtypes:
            fns, _, _ = build(w, dtype, libs, args.size)
            for (tid, lib), fn in fns.items():
                fn()  # second call: caches warm
                m: dict[str, Any] = {"peak_rss_bytes": timing.peak_rss(fn)}
                if lib in ("hodiff", "hd.jit", "autograd", "numpy"):
                    m["peak_traced_bytes"] = timing.peak_traced(fn)
                out[f"{tid}|{dtype}|{lib}"] = m
            del fns
    with open(args.memory_child, "w") as f:
        json.dump(out, f)
    return 0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    libs = [lib for lib in args.libs if available(lib)]
    if args.memory_child:
        return memory_child(args)
    if args.profile:
        from bench import hotspots

        return hotspots.main(args)
    if args.render:  # re-render the reports of an earlier run
        with open(args.render) as f:
            result = json.load(f)
        result["summary"] = report.summarize(result)
        out = Path(args.out) if args.out else ROOT / "bench" / "results"
        for p in report.write_all(result, out, docs=args.docs, root=ROOT):
            log(f"wrote {p}")
        return 0
    missing = [lib for lib in args.libs if lib not in libs]
    if missing:
        hint = 'pip install -e ".[bench]" in the source checkout'
        log(f"not installed, skipped: {', '.join(missing)}  ({hint})")
    threads = limit_threads(args.threads, libs)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions(libs),
        "threads": threads,
        "settings": {
            k: getattr(args, k)
            for k in ("size", "repeats", "warmup", "min_time", "quick", "threads", "pin_cpu")
        },
        "notes": {w: WORKLOADS[w].notes for w in args.workloads},
    }
    blas = threads["blas"]
    if isinstance(blas, list):
        blas = [(b["internal_api"], b["num_threads"]) for b in blas]
    log(
        f"threads: {args.threads} for every library; CPUs {threads.get('cpu_affinity')}; "
        f"torch {threads.get('torch')}; BLAS {blas}"
    )
    rows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for name in args.workloads:
        w = WORKLOADS[name]
        for dtype in args.dtypes or w.dtypes:
            r, e = run_group(w, dtype, libs, args)
            rows += r
            errors += e
    if args.memory:
        mem = memory_pass(args, libs)
        for row in rows:
            row.update(mem.get(f"{row['task']}|{row['dtype']}|{row['lib']}", {}))
    result = {**meta, "results": rows, "errors": errors}
    result["summary"] = report.summarize(result)
    out = Path(args.out) if args.out else ROOT / "bench" / "results"
    paths = report.write_all(result, out, docs=args.docs, root=ROOT)
    print(report.markdown_tables(result))
    for p in paths:
        log(f"wrote {p}")
    failed = [r for r in rows if not r["check_ok"]]
    return 1 if failed or errors else 0
