"""Command line and thread pinning (standard library only: runs before numpy is imported)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

#: environment variables read by the BLAS / OpenMP runtimes of numpy, torch and jax at import
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
LIBS = ("hodiff", "hd.jit", "torch", "jax", "autograd", "numpy")
GROUPS = ("mlp", "critic", "chain", "hessian", "cnn", "per_example", "checkpoint", "taylor")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="hodiff against PyTorch, JAX and HIPS autograd: workloads W1..W6 "
        "and the numpy floor (issue 5). Timings are medians of interleaved repeats.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fast run: fewer repeats, no memory pass, results under bench/results/",
    )
    p.add_argument(
        "--size",
        choices=("full", "tiny"),
        default="full",
        help="problem sizes: the issue's (full) or a smoke-test size (tiny)",
    )
    p.add_argument(
        "--workloads",
        nargs="+",
        choices=GROUPS,
        default=list(GROUPS),
        help="workload groups: mlp (W1, W2), critic (W3), chain (W4), "
        "hessian (W5), cnn (W6), per_example (W7), checkpoint (W8-W11), taylor (W12)",
    )
    p.add_argument(
        "--libs",
        nargs="+",
        choices=LIBS,
        default=list(LIBS),
        help="libraries (those not installed are skipped); numpy = the hand floor",
    )
    p.add_argument(
        "--dtypes",
        nargs="+",
        choices=("float32", "float64"),
        default=None,
        help="override each workload's dtypes (default: W1-W3, W6 in both, W4, W5 in float64)",
    )
    p.add_argument("--repeats", type=int, default=None, help="timed samples per function")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first")
    p.add_argument(
        "--min-time",
        type=float,
        default=None,
        help="seconds per sample (fast functions are looped to reach it)",
    )
    p.add_argument("--threads", type=int, default=1, help="threads for every library")
    p.add_argument(
        "--no-pin-cpu",
        dest="pin_cpu",
        action="store_false",
        help="do not restrict the process to --threads CPUs",
    )
    p.add_argument(
        "--no-memory",
        dest="memory",
        action="store_false",
        help="skip the peak-memory pass (a child process)",
    )
    p.add_argument(
        "--docs",
        action="store_true",
        help="also write docs/performance.md and docs/performance.png",
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for the JSON and markdown results (default: bench/results)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="instead of timing, cProfile hodiff on W1 and W4 and print the top entries",
    )
    p.add_argument(
        "--render",
        metavar="JSON",
        default=None,
        help="only re-render the markdown, chart (and --docs) from a run's JSON",
    )
    p.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.memory = False if args.memory_child is None else args.memory
    if args.repeats is None:
        args.repeats = 5 if args.quick else 21
    if args.warmup is None:
        args.warmup = 1 if args.quick else 3
    if args.min_time is None:
        args.min_time = 0.005 if args.quick else 0.02
    if args.threads < 1:
        p.error("--threads must be >= 1")
    return args


def pin_threads(n: int, pin_cpu: bool = True) -> None:
    """Makes every library use ``n`` threads; call before numpy, torch or jax are imported.

    Sets the BLAS/OpenMP variables, XLA's flags, and (``pin_cpu``) restricts the
    process to ``n`` CPUs so that no runtime can use more, whatever it reads.
    """
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags:
        multi = "true" if n > 1 else "false"
        flags += f" --xla_cpu_multi_thread_eigen={multi} intra_op_parallelism_threads={n}"
    os.environ["XLA_FLAGS"] = flags.strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ["JAX_ENABLE_X64"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if pin_cpu and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, cpus[:n])
