"""Top Hessian eigenvalues of a small MLP's loss: scipy's eigsh on hodiff's Hessian-vector
products, checked against the eigenvalues of the dense Hessian.

The Hessian is never formed for eigsh: ``HessianOperator(loss, params)`` records
the gradient graph once, and each product ``H @ v`` is one reverse pass over it.
The check builds the dense Hessian with ``hd.hessian`` (one reverse pass per
row) and compares with ``numpy.linalg.eigvalsh``.

Run: python examples/hessian_spectrum.py [--batch 64 --sizes 8 16 3 --k 5]
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse.linalg

import hodiff as hd
import hodiff.functions as F
from hodiff.scipy import HessianOperator


def make_problem(batch: int, sizes: Sequence[int], seed: int = 0):
    """Inputs, integer labels and initial weights/biases of an MLP ``sizes[0] -> ... -> C``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0]))
    t = rng.integers(0, sizes[-1], size=(batch, 1))
    params = []
    for a, b in itertools.pairwise(sizes):
        params += [rng.standard_normal((a, b)) / np.sqrt(a), 0.1 * rng.standard_normal(b)]
    return x, t, params


def mlp_loss(x: np.ndarray, t: np.ndarray):
    """``(W1, b1, W2, b2, ...) -> mean cross entropy`` of a tanh MLP."""

    def loss(*params: hd.Variable) -> hd.Variable:
        h = x
        n = len(params) // 2
        for i in range(n):
            h = F.affine(h, params[2 * i], params[2 * i + 1])
            if i < n - 1:
                h = F.tanh(h)
        return F.mean(F.softmax_cross_entropy(h, t))

    return loss


def dense_hessian(loss, params: Sequence[np.ndarray]) -> np.ndarray:
    """The blocks of ``hd.hessian`` assembled into one ``n x n`` matrix."""
    blocks = hd.hessian(loss, tuple(params))
    sizes = [p.size for p in params]
    return np.block(
        [
            [b.reshape(m, n) for b, n in zip(row, sizes, strict=True)]
            for row, m in zip(blocks, sizes, strict=True)
        ]
    )


def main(
    batch: int = 64,
    sizes: Sequence[int] = (8, 16, 3),
    k: int = 5,
    seed: int = 0,
    verbose: bool = True,
) -> dict[str, Any]:
    x, t, arrays = make_problem(batch, sizes, seed)
    loss = mlp_loss(x, t)

    t0 = time.perf_counter()
    params = [hd.Variable.from_array(a, need_grad=True) for a in arrays]
    hess = HessianOperator(loss(*params), params)
    top = np.sort(scipy.sparse.linalg.eigsh(hess, k=k, which="LA", return_eigenvectors=False))
    t_eigsh = time.perf_counter() - t0

    t0 = time.perf_counter()
    dense = dense_hessian(loss, arrays)
    reference = np.linalg.eigvalsh(dense)[-k:]
    t_dense = time.perf_counter() - t0

    err = float(np.max(np.abs(top - reference)))
    if verbose:
        print(f"MLP {list(sizes)}, batch {batch}: {hess.shape[0]} parameters")
        print(f"top-{k} eigenvalues, eigsh ({hess.n_matvec} HVPs, {t_eigsh:.2f}s): {top}")
        print(f"top-{k} eigenvalues, dense Hessian ({t_dense:.2f}s):    {reference}")
        print(
            f"max difference {err:.2e}; dense Hessian symmetric to "
            f"{np.max(np.abs(dense - dense.T)):.1e}"
        )
    return {
        "eigsh": top,
        "dense": reference,
        "max_error": err,
        "n_matvec": hess.n_matvec,
        "n_params": hess.shape[0],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 3])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    main(a.batch, a.sizes, a.k, a.seed)
