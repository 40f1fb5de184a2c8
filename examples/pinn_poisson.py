"""A physics-informed network for Poisson's equation on the unit square, trained through its
Laplacian in collapsed Taylor mode.

Solve ``-Laplace(u) = f`` on ``(0, 1)^2`` with ``u = 0`` on the boundary, for
``f = 2 pi^2 sin(pi x) sin(pi y)``, whose solution is ``u = sin(pi x) sin(pi y)``. The
network ``N`` (PF layers, tanh) enters as ``u(x, y) = x (1 - x) y (1 - y) N(x, y)``, so the
boundary condition holds exactly and the loss is the mean squared residual at random
collocation points::

    loss = mean_n (Laplace u(x_n) + f(x_n))^2

Each step computes the per-point Laplacians with ``hd.laplacian(..., batch_axis=0,
create_graph=True)`` (one Taylor pass: the value, two first-order coefficients and one
summed second-order coefficient per point), the loss, and its gradient with respect to
every weight by ``.backward()`` through the Taylor graph; Adam from ``hodiff.solvers``
updates the weights. The picture shows the solution, its error and the loss curve.

Run: ``python examples/pinn_poisson.py`` (``pip install -e ".[plot]"`` in the hodiff
checkout for the picture).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF
import hodiff.solvers as S

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # the examples extra brings it; without it, numpy's default threads
    threadpool_limits = None


def source(xy: np.ndarray) -> np.ndarray:
    """``f = 2 pi^2 sin(pi x) sin(pi y)``."""
    return 2 * np.pi**2 * np.sin(np.pi * xy[:, 0]) * np.sin(np.pi * xy[:, 1])


def exact(xy: np.ndarray) -> np.ndarray:
    """``u = sin(pi x) sin(pi y)``."""
    return np.sin(np.pi * xy[:, 0]) * np.sin(np.pi * xy[:, 1])


def model(width: int, depth: int) -> Any:
    """``u(x, y) = x (1 - x) y (1 - y) N(x, y)`` for a batch ``(N, 2)``; returns ``(N,)``."""

    def u(xy: hd.Variable) -> hd.Variable:
        with hd.parameter_scope("pinn"):
            h = xy
            for i in range(depth):
                h = F.tanh(PF.affine(h, width, name=f"fc{i}"))
            n = F.reshape(PF.affine(h, 1, name="out"), (xy.shape[0],))
        x, y = xy[:, 0], xy[:, 1]
        return x * (1.0 - x) * y * (1.0 - y) * n

    return u


def relative_error(u: Any, n: int = 101) -> tuple[float, np.ndarray, np.ndarray]:
    """The relative L2 error on an ``n x n`` grid, the prediction and the exact solution."""
    g = np.linspace(0.0, 1.0, n)
    xy = np.stack(np.meshgrid(g, g, indexing="xy"), axis=-1).reshape(-1, 2)
    with hd.no_grad():
        pred = u(hd.Variable.from_array(xy)).d
    ref = exact(xy)
    err = float(np.linalg.norm(pred - ref) / np.linalg.norm(ref))
    return err, pred.reshape(n, n), ref.reshape(n, n)


def plot(path: Path, pred: np.ndarray, ref: np.ndarray, history: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ext = (0.0, 1.0, 0.0, 1.0)
    im = axes[0].imshow(pred, origin="lower", extent=ext, cmap="viridis")
    axes[0].set_title("PINN solution u(x, y)")
    fig.colorbar(im, ax=axes[0])
    im = axes[1].imshow(pred - ref, origin="lower", extent=ext, cmap="coolwarm")
    axes[1].set_title("error u - sin(pi x) sin(pi y)")
    fig.colorbar(im, ax=axes[1])
    for ax in axes[:2]:
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    axes[2].semilogy(np.arange(1, len(history) + 1), history)
    axes[2].set_xlabel("Adam step")
    axes[2].set_ylabel("mean squared residual")
    axes[2].set_title("loss: mean (Laplace u + f)^2")
    axes[2].grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(
    iterations: int = 2000,
    batch: int = 256,
    width: int = 32,
    depth: int = 3,
    lr: float = 3e-3,
    seed: int = 0,
    out: str | Path | None = "pinn_poisson.png",
    verbose: bool = True,
) -> dict[str, Any]:
    """Trains; returns the loss history, the relative L2 error of the solution on a grid and
    the time taken; writes the picture to ``out`` (None: no picture)."""
    settings = (iterations, batch, width, depth, lr, seed)
    return solve(loss_of, plot, settings, out, verbose)


def loss_of(u: Any, xy: np.ndarray) -> hd.Variable:
    """The mean squared residual ``(Laplace u + f)^2`` at the points ``xy``."""
    lap = hd.laplacian(u, xy, batch_axis=0, create_graph=True)
    return F.mean((lap + source(xy)) ** 2)


def solve(
    loss_of: Any, plot: Any, settings: tuple[Any, ...], out: str | Path | None, verbose: bool
) -> dict[str, Any]:
    """Trains on ``loss_of`` with ``settings`` ``(iterations, batch, width, depth, lr, seed)``
    in one BLAS thread, then reports (:func:`report`)."""
    t0 = time.perf_counter()
    if threadpool_limits is not None:
        with threadpool_limits(1):
            u, history = train(loss_of, *settings)
    else:
        u, history = train(loss_of, *settings)
    return report(u, history, time.perf_counter() - t0, plot, out, verbose)


def train(
    loss_of: Any, iterations: int, batch: int, width: int, depth: int, lr: float, seed: int
) -> tuple[Any, list[float]]:
    """Adam on ``loss_of(u, xy)`` at ``batch`` new random points of the square per step (the
    learning rate cut by 0.3 at half and three quarters); returns ``u`` and the losses."""
    hd.seed(seed)
    rng = np.random.default_rng(seed)
    hd.clear_parameters()
    u = model(width, depth)
    u(hd.Variable.from_array(np.full((1, 2), 0.5)))  # creates the parameters
    solver = S.Adam(lr)
    solver.set_parameters(hd.get_parameters())
    history: list[float] = []
    for step in range(iterations):
        if step == iterations // 2 or step == (3 * iterations) // 4:
            solver.set_learning_rate(solver.learning_rate() * 0.3)
        loss = loss_of(u, rng.uniform(0.0, 1.0, (batch, 2)))
        solver.zero_grad()
        loss.backward()
        solver.update()
        history.append(float(loss.d))
    return u, history


def report(
    u: Any, history: list[float], seconds: float, plot: Any, out: str | Path | None, verbose: bool
) -> dict[str, Any]:
    """The relative L2 error of ``u`` on a grid, the picture (``plot(path, pred, ref,
    history)``, unless ``out`` is None) and a printed summary."""
    err, pred, ref = relative_error(u)
    result: dict[str, Any] = {"history": history, "rel_l2": err, "seconds": seconds}
    if out is not None:
        try:
            plot(Path(out), pred, ref, history)
            result["png"] = Path(out)
        except ImportError:
            if verbose:
                print('matplotlib is not installed: pip install -e ".[plot]" for the picture')
    if verbose:
        print(
            f"{len(history)} Adam steps in {seconds:.1f} s; final loss {history[-1]:.2e}; "
            f"relative L2 error of u: {err:.2e}"
        )
        if "png" in result:
            print(f"picture: {result['png']}")
    return result


if __name__ == "__main__":
    main()
