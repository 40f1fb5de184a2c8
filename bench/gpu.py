"""GPU run: every workload of ``python -m bench`` on cupy (hodiff) and CUDA (PyTorch).

The workloads' own builders are reused: hodiff's get cupy copies of the inputs;
PyTorch's get CUDA tensors (``torch.from_numpy`` is wrapped to move its result to
the GPU for the duration of the build). Each call is timed to completion
(device synchronised), after warm-up; the report is the median per task, the
hodiff/torch ratio, and the largest relative difference of the results.

    python -m bench.gpu [--repeat 30] [--dtypes float32 float64]
"""

from __future__ import annotations

import argparse
import statistics
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.workloads import WORKLOADS


def _to_cupy(obj: Any) -> Any:
    import cupy as cp

    if isinstance(obj, np.ndarray):
        return cp.asarray(obj)
    if isinstance(obj, list | tuple):
        return type(obj)(_to_cupy(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_cupy(v) for k, v in obj.items()}
    return obj


def _host(out: Any) -> list[np.ndarray]:
    if isinstance(out, list | tuple):
        return [a for o in out for a in _host(o)]
    if hasattr(out, "detach"):
        return [out.detach().cpu().numpy()]
    if hasattr(out, "get"):
        return [out.get()]
    if hasattr(out, "d"):
        return _host(out.d)
    return [np.asarray(out)]


def _median_time(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--dtypes", nargs="*", default=["float32", "float64"])
    args = ap.parse_args()
    import cupy as cp
    import torch

    import hodiff as hd

    # new arrays (static graphs' seeds, constants) on the GPU, as a cupy user would set it
    hd.set_default_context(hd.Context(backend="cupy", dtype="float32"))

    sync_cp = cp.cuda.Device().synchronize
    sync_torch = torch.cuda.synchronize
    print(f"cupy {cp.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"{'task':6} {'dtype':8} {'hodiff ms':>10} {'torch ms':>10} {'ratio':>7}  max rel diff")
    from_numpy = torch.from_numpy
    for w in WORKLOADS.values():
        for dtype in args.dtypes:
            if dtype not in w.dtypes:
                continue
            inp = w.make_inputs("full", dtype)
            try:
                hd_fns = w.builders["hodiff"](_to_cupy(inp))
                torch.from_numpy = lambda a: from_numpy(a).cuda()  # type: ignore[assignment]
                try:
                    th_fns = w.builders["torch"](inp)
                finally:
                    torch.from_numpy = from_numpy
            except Exception:
                print(f"{w.name} {dtype}: build failed\n{traceback.format_exc()}")
                continue
            for task in w.tasks:
                if task.id not in hd_fns or task.id not in th_fns:
                    continue
                try:
                    a, b = _host(hd_fns[task.id]()), _host(th_fns[task.id]())
                    diff = max(
                        float(np.max(np.abs(x - y)) / (np.max(np.abs(y)) + 1e-30))
                        for x, y in zip(a, b, strict=True)
                    )
                    t_hd = _median_time(hd_fns[task.id], sync_cp, args.repeat)
                    t_th = _median_time(th_fns[task.id], sync_torch, args.repeat)
                except Exception:
                    print(f"{task.id} {dtype}: failed\n{traceback.format_exc()}")
                    continue
                print(
                    f"{task.id:6} {dtype:8} {t_hd * 1e3:10.3f} {t_th * 1e3:10.3f} "
                    f"{t_hd / t_th:7.2f}  {diff:.1e}"
                )


if __name__ == "__main__":
    main()
