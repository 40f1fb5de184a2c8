"""HVP time / gradient time on an MLP, for each hvp strategy (and PyTorch's when installed).

The MLP: x (batch, n_in) -> affine -> tanh -> affine -> tanh -> affine -> softmax cross
entropy, mean over the batch. "gradient" is building the graph plus a plain
``loss.backward()``; "hvp" is ``hd.hvp(loss, params, v, mode=...)`` (building the graph
included). Run: python bench/hvp.py [--batch 128 --sizes 256 128 64 10 --repeats 20]
(single thread; medians of interleaved repeats).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

import numpy as np

import hodiff as hd
import hodiff.functions as F


def make_problem(batch: int, sizes: list[int], seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0]))
    t = rng.integers(0, sizes[-1], size=(batch, 1))
    params = []
    for a, b in itertools.pairwise(sizes):
        params += [rng.standard_normal((a, b)) / np.sqrt(a), np.zeros(b)]
    v = tuple(rng.standard_normal(p.shape) for p in params)
    return x, t, tuple(params), v


def hodiff_loss(x: np.ndarray, t: np.ndarray) -> Callable[..., hd.Variable]:
    def loss(*params: hd.Variable) -> hd.Variable:
        h = x
        n = len(params) // 2
        for i in range(n):
            h = F.affine(h, params[2 * i], params[2 * i + 1])
            if i < n - 1:
                h = F.tanh(h)
        return F.mean(F.softmax_cross_entropy(h, t))

    return loss


def median_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    for fn in fns.values():  # warm up
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def hodiff_fns(x, t, params, v) -> dict[str, Callable[[], object]]:
    loss = hodiff_loss(x, t)

    def gradient() -> None:
        ps = [hd.Variable.from_array(p, need_grad=True) for p in params]
        loss(*ps).backward()

    return {
        "gradient": gradient,
        "hvp rev-rev": lambda: hd.hvp(loss, params, v, mode="rev-rev"),
        "hvp fwd-rev": lambda: hd.hvp(loss, params, v, mode="fwd-rev"),
    }


def torch_fns(x, t, params, v) -> dict[str, Callable[[], object]] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    tx = torch.tensor(x)
    tt = torch.tensor(t[:, 0])
    tp = [torch.tensor(p) for p in params]
    tv = [torch.tensor(a) for a in v]

    def loss(ps):
        h = tx
        n = len(ps) // 2
        for i in range(n):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i < n - 1:
                h = torch.tanh(h)
        return torch.nn.functional.cross_entropy(h, tt)

    def gradient() -> None:
        ps = [p.clone().requires_grad_(True) for p in tp]
        loss(ps).backward()

    def hvp() -> None:
        ps = [p.clone().requires_grad_(True) for p in tp]
        gs = torch.autograd.grad(loss(ps), ps, create_graph=True)
        torch.autograd.grad(gs, ps, grad_outputs=tv)

    return {"gradient": gradient, "hvp rev-rev": hvp}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 128, 64, 10])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    problem = make_problem(args.batch, args.sizes)
    results = {"hodiff": median_times(hodiff_fns(*problem), args.repeats)}
    tf = torch_fns(*problem)
    if tf is not None:
        results["torch"] = median_times(tf, args.repeats)
    print(f"MLP {args.sizes}, batch {args.batch}, float64, 1 thread")
    for lib, times in results.items():
        g = times["gradient"]
        for k, s in times.items():
            ratio = "" if k == "gradient" else f"  ({s / g:.2f} x gradient)"
            print(f"{lib:>7} {k:<12} {s * 1e3:8.2f} ms{ratio}")
    if tf is None:
        print("  torch: not installed")
    return results


if __name__ == "__main__":
    main()
