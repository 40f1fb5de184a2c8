"""One solver step over the W1 MLP's parameters, relative to the W1 gradient time.

W1 is the gradient of the 784-512-512-10 tanh MLP with softmax cross-entropy,
batch 128 (``bench/workloads/mlp.py``): ``zero_grad`` + building the graph +
``loss.backward()``. The solver step is ``solver.update()`` over the same
parameters (about 670k values) with their gradients in place, done in place
with no allocation (hodiff.solvers); torch.optim's step on the same arrays
is timed alongside when torch is installed. Target: an Adam step under 5 % of
W1. Run: python bench/solver.py [--size tiny] [--repeats 30]
(single thread; medians of interleaved repeats).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import hodiff as hd
import hodiff.solvers as S
from bench.workloads import mlp

SOLVERS = ("Adam", "AdamW", "Momentum", "Sgd")


def median_times(
    fns: dict[str, Callable[[], object]],
    repeats: int,
    stat: Callable[[list[float]], float] = statistics.median,
) -> dict[str, float]:
    for fn in fns.values():  # warm up (solver states are made on the first step)
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: stat(v) for k, v in times.items()}


def torch_steps(inp: dict[str, Any], grads: list[Any]) -> dict[str, Callable[[], object]]:
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(1)
    ps = [torch.tensor(p, requires_grad=True) for p in inp["params"]]
    for p, g in zip(ps, grads, strict=True):
        p.grad = torch.tensor(g)
    opts = {
        "Adam": torch.optim.Adam(ps, lr=1e-3),
        "AdamW": torch.optim.AdamW(ps, lr=1e-3),
        "Momentum": torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
        "Sgd": torch.optim.SGD(ps, lr=1e-3),
    }
    return {f"torch {k}": o.step for k, o in opts.items()}


def run(
    size: str = "full",
    dtype: str = "float32",
    repeats: int = 30,
    stat: Callable[[list[float]], float] = statistics.median,
) -> dict[str, float]:
    """Seconds (``stat`` of the repeats) of W1 and of each solver's step."""
    inp = mlp.make_inputs(size, dtype)
    ps = [hd.Variable.from_array(p, need_grad=True) for p in inp["params"]]
    x = hd.Variable.from_array(inp["x"])
    t = hd.Variable.from_array(inp["t"][:, None])

    def w1() -> None:
        for p in ps:
            p.zero_grad()
        mlp.hodiff_loss(ps, x, t).backward()

    w1()  # every parameter holds a gradient for the solver steps
    fns: dict[str, Callable[[], object]] = {"W1": w1}
    for name in SOLVERS:
        solver = getattr(S, name)(1e-3)
        solver.set_parameters({str(i): p for i, p in enumerate(ps)})
        fns[name] = solver.update
    fns.update(torch_steps(inp, [p.g for p in ps]))
    return median_times(fns, repeats, stat)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=sorted(mlp.SIZES), default="full")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument(
        "--stat",
        choices=["median", "min"],
        default="median",
        help="min: the best of the repeats (a loaded machine)",
    )
    args = parser.parse_args(argv)
    stat = statistics.median if args.stat == "median" else min
    results = {}
    for dtype in args.dtypes:
        times = run(args.size, dtype, args.repeats, stat)
        results[dtype] = times
        w1 = times["W1"]
        print(
            f"MLP {mlp.SIZES[args.size][0]}, batch {mlp.SIZES[args.size][1]}, {dtype}, "
            f"1 thread, {args.stat} of {args.repeats}: W1 {w1 * 1e3:.2f} ms"
        )
        for k, s in times.items():
            if k != "W1":
                print(f"  {k:<16} {s * 1e3:8.3f} ms  ({100 * s / w1:5.2f} % of W1)")
    return results


if __name__ == "__main__":
    main()
