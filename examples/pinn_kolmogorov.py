"""A physics-informed network for a stationary Kolmogorov equation with a state-dependent
diffusion, trained through its weighted Laplacian in collapsed Taylor mode.

Solve ``-1/2 trace(a(x) H u(x)) = g(x)`` on ``(0, 1)^2`` with ``u = 0`` on the boundary,
where the diffusion ``a = sigma sigma^T`` changes across the square (anisotropic, with a
cross term) and ``g`` is chosen so that ``u = sin(pi x) sin(pi y)`` solves it::

    sigma(x, y) = [[1 + x / 2,  0],
                   [y / 2,      1]]

``-1/2 trace(a H u) = -1/2 sum_ij a_ij d^2 u / dx_i dx_j`` is the generator of the diffusion
``dX = sigma(X) dW`` (Kolmogorov's backward equation; a Fokker-Planck or Black-Scholes
operator has the same second-order term). Each step computes it at every collocation point
with ``hd.laplacian(u, xy, batch_axis=0, coefficients=sigma(xy), create_graph=True)``: one
Taylor pass whose directions are the columns of each point's ``sigma``, ``trace(sigma^T H
sigma) = trace(a H)``. The network enters as ``u = x (1 - x) y (1 - y) N(x, y)`` (the
boundary condition exact), trained by Adam on the mean squared residual.

Run: ``python examples/pinn_kolmogorov.py`` (``pip install -e ".[plot]"`` for the picture).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the Poisson example's network
from pinn_poisson import solve


def sigma(xy: np.ndarray) -> np.ndarray:
    """The diffusion's square root per point: ``(N, 2)`` gives ``(N, 2, 2)``."""
    s = np.zeros((len(xy), 2, 2))
    s[:, 0, 0] = 1.0 + xy[:, 0] / 2
    s[:, 1, 0] = xy[:, 1] / 2
    s[:, 1, 1] = 1.0
    return s


def source(xy: np.ndarray) -> np.ndarray:
    """``g = -1/2 trace(a H u)`` for ``u = sin(pi x) sin(pi y)``, ``a = sigma sigma^T``."""
    s = sigma(xy)
    a = s @ s.transpose(0, 2, 1)
    px, py = np.pi * xy[:, 0], np.pi * xy[:, 1]
    u = np.sin(px) * np.sin(py)
    uxy = np.pi**2 * np.cos(px) * np.cos(py)
    uxx = uyy = -(np.pi**2) * u
    return -0.5 * (a[:, 0, 0] * uxx + 2 * a[:, 0, 1] * uxy + a[:, 1, 1] * uyy)


def plot(path: Path, pred: np.ndarray, ref: np.ndarray, history: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4.4))
    ext = (0.0, 1.0, 0.0, 1.0)
    g = np.linspace(0.0, 1.0, 11)
    gx, gy = np.meshgrid(g, g, indexing="xy")
    s = sigma(np.stack([gx.ravel(), gy.ravel()], axis=-1))
    a = s @ s.transpose(0, 2, 1)
    axes[0].quiver(gx.ravel(), gy.ravel(), a[:, 0, 0], a[:, 1, 0], angles="xy", color="C0")
    axes[0].quiver(gx.ravel(), gy.ravel(), a[:, 0, 1], a[:, 1, 1], angles="xy", color="C1")
    axes[0].set_title("diffusion a(x, y): columns 1 (blue), 2 (orange)")
    axes[0].set_xlim(-0.05, 1.15)
    axes[0].set_ylim(-0.05, 1.15)
    im = axes[1].imshow(pred, origin="lower", extent=ext, cmap="viridis")
    axes[1].set_title("PINN solution u(x, y)")
    fig.colorbar(im, ax=axes[1])
    im = axes[2].imshow(pred - ref, origin="lower", extent=ext, cmap="coolwarm")
    axes[2].set_title("error u - sin(pi x) sin(pi y)")
    fig.colorbar(im, ax=axes[2])
    for ax in axes[:3]:
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    axes[3].semilogy(np.arange(1, len(history) + 1), history)
    axes[3].set_xlabel("Adam step")
    axes[3].set_ylabel("mean squared residual")
    axes[3].set_title("loss: mean (-1/2 trace(a H u) - g)^2")
    axes[3].grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def loss_of(u: Any, xy: np.ndarray) -> hd.Variable:
    """The mean squared residual ``(-1/2 trace(sigma^T H u sigma) - g)^2`` at the points."""
    op = hd.laplacian(u, xy, batch_axis=0, coefficients=sigma(xy), create_graph=True)
    return F.mean((-0.5 * op - source(xy)) ** 2)


def main(
    iterations: int = 2000,
    batch: int = 256,
    width: int = 32,
    depth: int = 3,
    lr: float = 3e-3,
    seed: int = 0,
    out: str | Path | None = "pinn_kolmogorov.png",
    verbose: bool = True,
) -> dict[str, Any]:
    """Trains; returns the loss history, the relative L2 error of the solution on a grid and
    the time taken; writes the picture to ``out`` (None: no picture)."""
    settings = (iterations, batch, width, depth, lr, seed)
    return solve(loss_of, plot, settings, out, verbose)


if __name__ == "__main__":
    main()
