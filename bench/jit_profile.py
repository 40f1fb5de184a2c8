"""``python -m bench.jit_profile W5a W7a W12e ...``: where a compiled (``hd.jit``, backend
``"replay"``) workload spends its time.

For each task the workload's ``"hd.jit"`` row is built and run once; its program is then
run step by step, each step's kernel timed alone (the best of ``--repeats`` runs), and the
steps are grouped: library calls (BLAS products, convolutions, decompositions), copies
(reshape, transpose, broadcast, slicing, concatenation, casts), reductions and the
elementwise rest. The per-op cost of the replay is measured on a size-1 kernel (what every
step pays above numpy's own work) and multiplied by the number of steps. Run with one
thread (see bench/compile.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any

import numpy as np

import hodiff.functions as F
from bench.workloads import WORKLOADS
from hodiff.transforms.compile.compiled import Built, Jit
from hodiff.transforms.compile.replay import run_step

LIBRARY = {
    "affine",
    "matmul",
    "batch_matmul",
    "dot",
    "einsum",
    "convolution",
    "deconvolution",
    "solve",
    "batch_inv",
    "batch_det",
    "svd",
}
COPIES = {
    "reshape",
    "transpose",
    "broadcast",
    "broadcast_to",
    "slice",
    "getitem",
    "concatenate",
    "stack",
    "split",
    "cast",
    "astype",
    "identity",
    "pad",
    "tile",
    "repeat",
    "expand_dims",
    "squeeze",
    "flip",
    "moveaxis",
    "swapaxes",
}
REDUCTIONS = {"sum", "mean", "max", "min", "prod", "logsumexp", "sum_to", "reduce_sum"}


def _kind(name: str) -> str:
    n = name.lower()
    if n in LIBRARY:
        return "library (BLAS, conv)"
    if n in COPIES or "transpose" in n or "reshape" in n or "broadcast" in n:
        return "copies and views"
    if n in REDUCTIONS or n.startswith("sum") or n.startswith("mean"):
        return "reductions"
    return "elementwise"


def _task(group: str, tid: str) -> tuple[Any, Any]:
    w = WORKLOADS[group]
    inp = w.make_inputs("full", "float64")
    fns = w.builders["hd.jit"](inp)
    jax_fn = None
    if importlib.util.find_spec("jax") is not None and "jax" in w.builders:
        jax_fn = w.builders["jax"](inp).get(tid)
    return fns[tid], jax_fn


def _jit_of(fn: Any) -> Jit:
    for cell in fn.__closure__ or ():
        if isinstance(cell.cell_contents, Jit):
            return cell.cell_contents
    raise LookupError("no hd.jit function in the task's closure")


def _best(fn: Any, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return float(best)


def _values(fn: Any, built: Built) -> tuple[Any, ...]:
    """The argument and external arrays the program is called with (one spied call)."""
    assert built.replay is not None
    seen: dict[str, tuple[Any, ...]] = {}
    run = built.replay.run

    def spy(*a: Any) -> Any:
        seen["a"] = a
        return run(*a)

    built.replay.run = spy
    try:
        fn()
    finally:
        built.replay.run = run
    return seen["a"]


def profile(group: str, tid: str, repeats: int) -> None:
    fn, jax_fn = _task(group, tid)
    fn()
    jit = _jit_of(fn)
    built = next(iter(jit.cache.values()))[0]
    values = _values(fn, built)
    assert built.replay is not None
    prog = built.prog
    whole = _best(lambda: built.replay.run(*values), repeats)  # type: ignore[union-attr]
    slots = dict(zip(prog.args + [s for _, s in prog.externals], values, strict=True))
    slots.update(prog.constants)
    per_step = np.full(len(prog.steps), np.inf)
    for _ in range(repeats):
        for i, step in enumerate(prog.steps):
            xs = [slots[s] for s in step.ins]
            specs = [prog.specs[o] for o in step.outs]
            t0 = time.perf_counter()
            ys = run_step(step.node, xs, specs)
            per_step[i] = min(per_step[i], time.perf_counter() - t0)
            for o, y in zip(step.outs, ys, strict=True):
                slots[o] = y
    by_kind: dict[str, list[float]] = {}
    by_name: dict[str, list[float]] = {}
    for step, t in zip(prog.steps, per_step, strict=True):
        by_kind.setdefault(_kind(step.name), []).append(t)
        by_name.setdefault(step.name, []).append(t)
    # the per-op floor: one tiny elementwise kernel through the same call
    tiny = np.ones(1)
    node = F.tanh(__import__("hodiff").Variable.from_array(tiny)).parent
    floor = _best(lambda: node.forward_impl([tiny], [None]), 2000)
    numpy_floor = _best(lambda: np.tanh(tiny), 2000)
    jax_s = _best(jax_fn, repeats) if jax_fn is not None else None
    n = len(prog.steps)
    print(f"\n## {tid} ({group}): {n} steps, program {whole * 1e3:.3f} ms", end="")
    print(f", jax.jit {jax_s * 1e3:.3f} ms ({whole / jax_s:.2f}x)" if jax_s else "")
    print(f"sum of the steps timed alone: {per_step.sum() * 1e3:.3f} ms")
    print(
        f"per-op call cost: {floor * 1e6:.2f} us per step (numpy's own tanh of one element "
        f"{numpy_floor * 1e6:.2f} us): {n * floor * 1e3:.3f} ms for {n} steps "
        f"({n * floor / whole:.0%} of the program)"
    )
    print("| kind | steps | ms | share |\n|---|---:|---:|---:|")
    for k, ts in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {k} | {len(ts)} | {sum(ts) * 1e3:.3f} | {sum(ts) / per_step.sum():.0%} |")
    print("top primitives:", end=" ")
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:6]
    print(", ".join(f"{k} x{len(v)} {sum(v) * 1e3:.3f} ms" for k, v in top))


TASKS = {
    "W5a": "hessian",
    "W5b": "hessian",
    "W7a": "per_example",
    "W7c": "per_example",
    "W12a": "taylor",
    "W12b": "taylor",
    "W12e": "taylor",
    "W4": "chain",
    "W3": "critic",
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.jit_profile")
    p.add_argument("tasks", nargs="*", default=["W5a", "W7a", "W12a", "W12e"])
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args(argv)
    for tid in args.tasks:
        profile(TASKS[tid], tid, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
