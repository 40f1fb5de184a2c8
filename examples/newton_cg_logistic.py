"""L2-regularised logistic regression solved by scipy's Newton-CG with hodiff's Hessian-vector
products, compared with BFGS (gradients only).

    loss(w) = mean_i softplus(-y_i x_i . w) + lam/2 |w|^2,   y_i in {-1, +1}

Newton-CG takes a few outer iterations, each solving H p = -g by conjugate
gradients with ``hessp`` (one reverse pass over the gradient graph per
product); BFGS takes many more iterations of gradients only. Both must reach
the same minimiser (the loss is strictly convex).

Run: python examples/newton_cg_logistic.py [--n 2000 --d 50]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import scipy.optimize

import hodiff as hd
import hodiff.functions as F
from hodiff.scipy import Objective


def make_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features with correlated columns and noisy +-1 labels from a random linear model."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) @ (np.eye(d) + 0.3 * rng.standard_normal((d, d)))
    w_true = rng.standard_normal(d)
    y = np.where(x @ w_true + rng.standard_normal(n) > 0, 1.0, -1.0)
    return x, y


def logistic_loss(x: np.ndarray, y: np.ndarray, lam: float):
    def loss(w: hd.Variable) -> hd.Variable:
        margins = y * (x @ w)
        return F.mean(F.softplus(-margins)) + 0.5 * lam * F.sum(w * w)

    return loss


def main(
    n: int = 2000, d: int = 50, lam: float = 1e-2, seed: int = 0, verbose: bool = True
) -> dict[str, Any]:
    x, y = make_data(n, d, seed)
    loss = logistic_loss(x, y, lam)
    w0 = np.zeros(d)
    results = {}
    for method in ("Newton-CG", "BFGS"):
        obj = Objective(loss)
        t0 = time.perf_counter()
        kwargs = obj.kwargs(method)
        res = scipy.optimize.minimize(kwargs.pop("fun"), w0, method=method, tol=1e-12, **kwargs)
        elapsed = time.perf_counter() - t0
        results[method] = {
            "x": res.x,
            "fun": res.fun,
            "nit": res.nit,
            "forward": obj.n_forward,
            "gradients": obj.n_grad,
            "hessp": obj.n_hessp,
            "seconds": elapsed,
            "grad_norm": float(np.linalg.norm(obj.jac(res.x))),
        }
    if verbose:
        print(f"logistic regression, n={n}, d={d}, lam={lam}")
        print(
            f"{'method':<10} {'iterations':>10} {'f evals':>8} {'gradients':>9} {'hessp':>6} "
            f"{'loss':>14} {'|grad|':>9} {'time':>8}"
        )
        for method, r in results.items():
            print(
                f"{method:<10} {r['nit']:>10} {r['forward']:>8} {r['gradients']:>9} "
                f"{r['hessp']:>6} {r['fun']:>14.10f} {r['grad_norm']:>9.1e} "
                f"{r['seconds']:>7.2f}s"
            )
        gap = np.max(np.abs(results["Newton-CG"]["x"] - results["BFGS"]["x"]))
        print(f"max |w_newton_cg - w_bfgs| = {gap:.2e}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--lam", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    main(a.n, a.d, a.lam, a.seed)
