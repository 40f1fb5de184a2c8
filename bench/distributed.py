"""Data-parallel WGAN-GP critic step over MPI: N ranks against 1 rank at the same global batch.

    python -m bench.distributed                  # 1 and 2 ranks, float32 and float64
    python -m bench.distributed --batch 1024 --dtypes float64

The step is W3 of ``python -m bench`` (bench/workloads/critic.py: critic 2-256-256-1,
softplus, a gradient penalty through ``hd.grad``), on a global batch split evenly over
the ranks, its gradient averaged by ``Communicator.backward``. Each rank runs in its own
process pinned to its own CPU with one BLAS thread. Runs of 1 and N ranks alternate
(``--repeats`` times) so that both see the same background load; within a run, rounds
of ``--steps`` steps are timed on rank 0 between barriers and the median is kept.

Also timed: the same N processes doing the same local work without exchanging gradients
(plain ``backward``), the ideal that data-parallel training can approach on this machine
at this moment. Reported: global samples per second; the ratio N ranks / 1 rank (the
issue's target is >= 1.6 on 2 cores) from the median rounds and from the fastest ones
(on a shared machine the fastest round is the one least disturbed by other processes);
the spread of the rounds (max - min over the median); the share of the step spent in
communication work (bucket copies, launches, progress calls and the final wait:
``Communicator.comm_time``), in the final wait alone (what the reverse pass did not hide,
and waiting for the slower rank), and in an all-reduce of all gradients timed alone with
both ranks ready (what the communication itself costs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.distributed", description=__doc__.split("\n")[0]
    )
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--batch", type=int, default=256, help="global batch (W3: 256)")
    p.add_argument("--steps", type=int, default=20, help="steps per timed round")
    p.add_argument("--rounds", type=int, default=7, help="timed rounds per run")
    p.add_argument("--repeats", type=int, default=3, help="alternating runs of each rank count")
    p.add_argument("--bucket-size", type=int, default=None, help="bytes (default: hodiff's)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    p.add_argument("--no-comm", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------- one run, inside mpiexec
def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})

    import numpy as np

    import hodiff as hd
    import hodiff.functions as F
    from bench.workloads import critic as W3
    from hodiff.distributed import Communicator

    kwargs = {} if args.bucket_size is None else {"bucket_size": args.bucket_size}
    comm = Communicator(**kwargs)
    W3.SIZES["bench"] = ((2, 256, 256, 1), args.batch)
    inp = W3.make_inputs("bench", args.dtype)
    if args.batch % size:
        raise SystemExit(f"--batch {args.batch} is not divisible by {size} ranks")
    m = args.batch // size
    shard = slice(rank * m, (rank + 1) * m)
    params = [hd.Variable.from_array(a.copy(), need_grad=True) for a in inp["params"]]
    x_real = hd.Variable.from_array(inp["x_real"][shard])
    x_fake = hd.Variable.from_array(inp["x_fake"][shard])
    x_hat = hd.Variable.from_array(inp["x_hat"][shard], need_grad=True)
    comm.bcast_parameters(params)

    def critic(h: Any) -> Any:
        return W3._critic(params, h, F.affine, F.softplus)

    comm_s = [0.0]
    wait_s = [0.0]

    def step() -> None:
        for p in params:
            p.zero_grad()
        (g,) = hd.grad(F.sum(critic(x_hat)), x_hat)
        penalty = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
        loss = F.mean(critic(x_fake)) - F.mean(critic(x_real)) + W3.LAMBDA * penalty
        if args.no_comm:  # the same local work, no gradient exchange: the ideal to compare with
            loss.backward()
            return
        comm.backward(loss, params)
        comm_s[0] += comm.comm_time
        wait_s[0] += comm.wait_time

    for _ in range(3):
        step()
    times = []
    comm_shares = []
    wait_shares = []
    for _ in range(args.rounds):
        comm_s[0] = wait_s[0] = 0.0
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        world.Barrier()
        dt = time.perf_counter() - t0
        times.append(dt / args.steps)
        comm_shares.append(comm_s[0] / dt)
        wait_shares.append(wait_s[0] / dt)
    # the all-reduce alone, both ranks ready: what the communication itself costs
    grads = [p.g for p in params]
    reduce_times = []
    for _ in range(20):
        world.Barrier()
        t0 = time.perf_counter()
        comm.all_reduce(grads)
        reduce_times.append(time.perf_counter() - t0)
    shares = world.gather((statistics.median(comm_shares), statistics.median(wait_shares)))
    if not args.no_comm:
        comm.check_parameters(params)
    if rank == 0:
        assert shares is not None
        result = {
            "ranks": size,
            "dtype": args.dtype,
            "step_s": statistics.median(times),
            "step_s_min": min(times),
            "step_s_max": max(times),
            "comm_share": max(s[0] for s in shares),
            "wait_share": max(s[1] for s in shares),
            "reduce_s": statistics.median(reduce_times),
            "grad_bytes": int(sum(p.size * p.dtype.itemsize for p in params)),
            "numpy": np.__version__,
        }
        print("RESULT " + json.dumps(result), flush=True)


# ---------------------------------------------------------------- the driver
def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def launch(args: argparse.Namespace, ranks: int, dtype: str, no_comm: bool) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    for var in THREAD_VARS:
        env[var] = "1"
    cmd = [
        mpiexec(),
        "-n",
        str(ranks),
        sys.executable,
        "-m",
        "mpi4py",
        "-m",
        "bench.distributed",
        "--worker",
        "--dtype",
        dtype,
        "--batch",
        str(args.batch),
        "--steps",
        str(args.steps),
        "--rounds",
        str(args.rounds),
    ]
    if args.bucket_size is not None:
        cmd += ["--bucket-size", str(args.bucket_size)]
    if no_comm:
        cmd.append("--no-comm")
    r = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    load_start = os.getloadavg()
    # (ranks, exchange gradients): N ranks without the exchange are the ideal to compare with
    configs = [(n, True) for n in args.ranks] + [(n, False) for n in args.ranks if n > 1]
    runs: dict[tuple[str, int, bool], list[dict[str, Any]]] = {}
    for dtype in args.dtypes:
        for _ in range(args.repeats):
            for n, exchange in configs:
                runs.setdefault((dtype, n, exchange), []).append(
                    launch(args, n, dtype, not exchange)
                )
    load_end = os.getloadavg()
    rows = []
    for dtype in args.dtypes:
        first = runs[(dtype, args.ranks[0], True)]
        base = statistics.median(r["step_s"] for r in first)
        base_best = min(r["step_s_min"] for r in first)
        for n, exchange in configs:
            rs = runs[(dtype, n, exchange)]
            t = statistics.median(r["step_s"] for r in rs)
            best = min(r["step_s_min"] for r in rs)
            rows.append(
                {
                    "dtype": dtype,
                    "ranks": n if exchange else f"{n}, no exchange",
                    "step_ms": 1e3 * t,
                    "best_ms": 1e3 * best,
                    "samples_per_s": args.batch / t,
                    "speedup": base / t,
                    "speedup_best": base_best / best,
                    "spread": (max(r["step_s_max"] for r in rs) - min(r["step_s_min"] for r in rs))
                    / t,
                    "comm_share": statistics.median(r["comm_share"] for r in rs),
                    "wait_share": statistics.median(r["wait_share"] for r in rs),
                    "reduce_share": statistics.median(r["reduce_s"] for r in rs) / t,
                }
            )
    print(
        f"WGAN-GP critic step (2-256-256-1, global batch {args.batch}), one BLAS thread and "
        f"one CPU per rank; {os.cpu_count()} CPUs; load average {load_start} -> {load_end}"
    )
    print(
        "| dtype | ranks | ms / step | samples / s | vs 1 rank | best round: ms, vs 1 rank | "
        "spread | communication | final wait | all-reduce alone |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['dtype']} | {r['ranks']} | {r['step_ms']:.2f} | {r['samples_per_s']:.0f} | "
            f"{r['speedup']:.2f}x | {r['best_ms']:.2f}, {r['speedup_best']:.2f}x | "
            f"{100 * r['spread']:.0f}% | {100 * r['comm_share']:.1f}% | "
            f"{100 * r['wait_share']:.1f}% | {100 * r['reduce_share']:.1f}% |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": rows,
                    "runs": {f"{k[0]}/{k[1]}/{k[2]}": v for k, v in runs.items()},
                    "load": [load_start, load_end],
                    "batch": args.batch,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
