"""The Hessian spectrum of a small trained network with batch normalization.

A 2-16-16-3 tanh MLP with batch normalization after its first layer is trained
on a three-arm spiral by gradient descent with momentum. Then, with
``hodiff.curvature`` and the loss averaged over four batches of the data set:

* the top eigenvalues (Lanczos) and the Hessian trace (Hutchinson),
* the spectral density by stochastic Lanczos quadrature, drawn to a PNG,

each checked against the dense Hessian (``hd.hessian``, one reverse pass per
row, averaged over the same batches) and ``numpy.linalg.eigvalsh``.

Run: python examples/hessian_spectrum_density.py [--steps 400 --out hessian_density.png]
(the picture goes to the current directory; ``--out docs/img/hessian_density.png`` refreshes
the one the docs ship)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
from hodiff import curvature

HIDDEN = 16
CLASSES = 3
SIGMA = 0.02  # width of the Gaussian that smooths the spectrum


def spiral(n_per_class: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points of a ``CLASSES``-arm spiral with a little noise, and their integer labels."""
    rng = np.random.default_rng(seed)
    xs, ts = [], []
    for c in range(CLASSES):
        r = np.linspace(0.1, 1.0, n_per_class)
        angle = 4.0 * r + 2 * np.pi * c / CLASSES + 0.2 * rng.standard_normal(n_per_class)
        xs.append(np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1))
        ts.append(np.full((n_per_class, 1), c))
    x, t = np.concatenate(xs), np.concatenate(ts)
    order = rng.permutation(len(x))
    return x[order], t[order]


def init_params(seed: int = 0) -> dict[str, hd.Variable]:
    rng = np.random.default_rng(seed)
    shapes = {
        "fc1/W": (2, HIDDEN),
        "fc1/b": (HIDDEN,),
        "bn/beta": (1, HIDDEN),
        "bn/gamma": (1, HIDDEN),
        "fc2/W": (HIDDEN, HIDDEN),
        "fc2/b": (HIDDEN,),
        "fc3/W": (HIDDEN, CLASSES),
        "fc3/b": (CLASSES,),
    }
    params = {}
    for name, shape in shapes.items():
        if name.endswith("/W"):
            value = rng.standard_normal(shape) / np.sqrt(shape[0])
        elif name == "bn/gamma":
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        params[name] = hd.Variable.from_array(value, need_grad=True)
    return params


def make_loss(params: dict[str, hd.Variable]) -> Any:
    """``loss(batch)``: the mean cross entropy of the network on ``batch = (x, t)``."""
    p = params
    running = {"mean": np.zeros((1, HIDDEN)), "var": np.ones((1, HIDDEN))}

    def loss(batch: tuple[np.ndarray, np.ndarray], *ws: hd.Variable) -> hd.Variable:
        w = dict(zip(p, ws, strict=True)) if ws else p
        x, t = batch
        h = F.affine(x, w["fc1/W"], w["fc1/b"])
        h = F.batch_normalization(
            h, w["bn/beta"], w["bn/gamma"], running["mean"], running["var"], axes=(1,)
        )
        h = F.tanh(h)
        h = F.tanh(F.affine(h, w["fc2/W"], w["fc2/b"]))
        return F.mean(F.softmax_cross_entropy(F.affine(h, w["fc3/W"], w["fc3/b"]), t))

    return loss


def train(
    params: dict[str, hd.Variable],
    loss: Any,
    data: tuple[np.ndarray, np.ndarray],
    steps: int,
    lr: float = 0.3,
    momentum: float = 0.9,
) -> list[float]:
    velocity = {k: np.zeros_like(p.d) for k, p in params.items()}
    history = []
    for _ in range(steps):
        for p in params.values():
            p.zero_grad()
        value = loss(data)
        value.backward()
        history.append(float(value.d))
        for k, p in params.items():
            velocity[k] = momentum * velocity[k] - lr * p.g
            p.d = p.d + velocity[k]
    return history


def dense_hessian(params: dict[str, hd.Variable], loss: Any, batches: list[Any]) -> np.ndarray:
    """The mean over ``batches`` of the dense Hessians, assembled into one ``n x n`` matrix."""
    arrays = tuple(p.d for p in params.values())
    sizes = [a.size for a in arrays]
    total = 0.0
    for batch in batches:
        blocks = hd.hessian(lambda *ws, batch=batch: loss(batch, *ws), arrays)
        total = total + np.block(
            [
                [b.reshape(m, n) for b, n in zip(row, sizes, strict=True)]
                for row, m in zip(blocks, sizes, strict=True)
            ]
        )
    return total / len(batches)


def main(
    n_per_class: int = 128,
    steps: int = 400,
    n_batches: int = 4,
    k: int = 4,
    n_probes: int = 10,
    n_steps: int = 80,
    out: str | Path | None = "hessian_density.png",
    seed: int = 0,
    verbose: bool = True,
) -> dict[str, Any]:
    x, t = spiral(n_per_class, seed)
    params = init_params(seed)
    loss = make_loss(params)
    history = train(params, loss, (x, t), steps)
    accuracy = float(np.mean(np.argmax(_logits(params, loss, x), axis=1) == t[:, 0]))
    batches = [
        (xb, tb)
        for xb, tb in zip(np.array_split(x, n_batches), np.array_split(t, n_batches), strict=True)
    ]
    n = sum(p.size for p in params.values())

    top, _ = curvature.eigenvalues(loss, params, k=k, data=batches)
    bottom, _ = curvature.eigenvalues(loss, params, k=1, which="SA", data=batches)
    tr = curvature.trace(loss, params, n_samples=100, data=batches)
    grid, values = curvature.density(
        loss, params, n_probes=n_probes, n_steps=n_steps, sigma=SIGMA, data=batches
    )
    exact = np.linalg.eigvalsh(dense_hessian(params, loss, batches))

    dt = grid[1] - grid[0]
    near = np.min(np.abs(grid[:, None] - exact[None, :]), axis=1) < 0.05 * (grid[-1] - grid[0])
    results = {
        "n_params": n,
        "loss": history,
        "accuracy": accuracy,
        "top": top,
        "bottom": bottom,
        "exact": exact,
        "top_error": float(np.max(np.abs(top - exact[::-1][:k]))),
        "bottom_error": float(abs(bottom[0] - exact[0])),
        "trace": tr,
        "exact_trace": float(exact.sum()),
        "grid": grid,
        "density": values,
        "mass": float(np.sum((values[1:] + values[:-1]) * np.diff(grid)) / 2),
        "mass_near_exact": float(np.sum(values[near]) * dt),
    }
    if out is not None:
        results["png"] = curvature.plot_density(
            grid,
            values,
            out,
            eigenvalues=exact,
            sigma=SIGMA,
            title=f"Hessian spectrum of a trained 2-16-16-3 MLP with batch norm ({n} params)",
        )
    if verbose:
        print(f"spiral, {len(x)} points; MLP with batch norm, {n} parameters")
        print(
            f"trained {steps} steps: loss {history[0]:.3f} -> {history[-1]:.3f}, "
            f"accuracy {accuracy:.1%}"
        )
        print(
            f"Hessian of the loss averaged over {n_batches} batches: hodiff.curvature "
            "vs eigvalsh of the dense Hessian"
        )
        print(f"top-{k} eigenvalues: {np.round(top, 5)}")
        print(f"           exact:   {np.round(exact[::-1][:k], 5)}")
        print(f"smallest eigenvalue {bottom[0]:.5f}   exact {exact[0]:.5f}")
        print(f"trace {float(tr):.4f} +- {tr.stderr:.4f}   exact {exact.sum():.4f}")
        print(
            f"density integrates to {results['mass']:.6f}; "
            f"{results['mass_near_exact']:.1%} of its mass lies near exact eigenvalues"
        )
        if out is not None:
            print(f"picture: {results['png']}")
    return results


def _logits(params: dict[str, hd.Variable], loss: Any, x: np.ndarray) -> np.ndarray:
    """The network's outputs on ``x`` (batch statistics of ``x`` itself)."""
    w = params
    with hd.no_grad():
        h = F.affine(x, w["fc1/W"], w["fc1/b"])
        h = F.batch_normalization(h, w["bn/beta"], w["bn/gamma"], None, None, axes=(1,))
        h = F.tanh(F.affine(F.tanh(h), w["fc2/W"], w["fc2/b"]))
        return F.affine(h, w["fc3/W"], w["fc3/b"]).d


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-per-class", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--out", default="hessian_density.png")
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    main(a.n_per_class, a.steps, k=a.k, out=a.out, seed=a.seed)
