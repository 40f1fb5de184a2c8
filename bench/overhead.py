"""Per-op overhead of the plain backward path.

A chain of 1,000 elementwise ops on a size-16 array (250 x [y*0.01, exp, *1.01, +0.1]).
Reports time(y.backward()) / time(the same backward arithmetic written by hand in
numpy), and the same for building the graph (forward) against numpy's forward.
Run: python bench/overhead.py  (single thread; medians of interleaved repeats)
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import time

import numpy as np

import hodiff as hd
import hodiff.functions as F

N_BLOCKS = 250  # 4 ops each
SIZE = 16


def hodiff_forward(x: hd.Variable) -> hd.Variable:
    y = x
    for _ in range(N_BLOCKS):
        y = F.exp(y * 0.01) * 1.01 + 0.1
    return y


def numpy_forward(x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    saved = []
    y = x
    for _ in range(N_BLOCKS):
        e = np.exp(y * 0.01)
        saved.append(e)
        y = e * 1.01 + 0.1
    return y, saved


def numpy_backward(saved: list[np.ndarray], g: np.ndarray) -> np.ndarray:
    for e in reversed(saved):
        g = g * 1.01  # (+0.1 passes g through)
        g = g * e
        g = g * 0.01
    return g


def timeit(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    a = np.random.default_rng(0).standard_normal(SIZE)
    x = hd.Variable.from_array(a, need_grad=True)
    y = hodiff_forward(x)
    ones = np.ones(SIZE)
    _, saved = numpy_forward(a)
    # warm-up, then interleave so that machine noise hits both sides alike
    for _ in range(3):
        y.backward()
        numpy_backward(saved, ones)
    t_hd_b, t_np_b, t_hd_f, t_np_f = [], [], [], []
    for _ in range(15):
        t_hd_b.append(timeit(y.backward, 1))
        t_np_b.append(timeit(lambda: numpy_backward(saved, ones), 1))
        t_hd_f.append(timeit(lambda: hodiff_forward(x), 1))
        t_np_f.append(timeit(lambda: numpy_forward(a), 1))
    n_ops = 4 * N_BLOCKS
    hb, nb = statistics.median(t_hd_b), statistics.median(t_np_b)
    hf, nf = statistics.median(t_hd_f), statistics.median(t_np_f)
    check = numpy_backward(saved, ones)
    x.zero_grad()
    y.backward()
    assert np.allclose(x.g, check, rtol=1e-12), "hodiff and the hand-written backward disagree"
    print(f"chain of {n_ops} elementwise ops on size-{SIZE} arrays (median of 15)")
    print(
        f"  plain backward: hodiff {hb * 1e6 / n_ops:6.2f} us/op, numpy by hand "
        f"{nb * 1e6 / n_ops:6.2f} us/op, ratio {hb / nb:5.1f}"
    )
    print(
        f"  forward (build): hodiff {hf * 1e6 / n_ops:6.2f} us/op, numpy by hand "
        f"{nf * 1e6 / n_ops:6.2f} us/op, ratio {hf / nf:5.1f}"
    )


if __name__ == "__main__":
    main()
