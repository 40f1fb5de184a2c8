"""WGAN-GP on a ring of 8 Gaussians, built with PF layers and S.Adam, in static graphs.

Gulrajani et al. (2017): the critic ``D`` minimises
``mean D(fake) - mean D(real) + lam * mean (||grad_x D(x_hat)|| - 1)^2`` at
random interpolates ``x_hat = eps real + (1 - eps) fake``; the generator ``G``
minimises ``-mean D(G(z))``. The gradient penalty is a derivative inside the
loss, so training differentiates it once more (with respect to the critic's
weights): hodiff records ``grad_x D`` as a graph and the plain backward of the
loss runs through it.

Both losses are static graphs built once (``hd.auto_forward(False)``) and run
every step with ``.forward()``: the noise ``z`` (``F.randn``) and the
interpolation weights ``eps`` (``F.rand``) are nodes of the graphs, so every
forward draws them anew, and the backward of one step sees that step's draw.

The picture (``wgan_gp_2d.png``) shows real and generated samples over the
critic's contours, the critic's Wasserstein estimate and the gradient
penalty during training, and the mean norm of ``grad_x D`` at the
interpolates, which WGAN-GP drives to 1.

Run: python examples/wgan_gp_2d.py        (about a minute on 2 cores)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF
import hodiff.solvers as S

try:
    from tqdm import tqdm
except ImportError:  # the progress bar is optional
    tqdm = None
try:  # small matrices: one BLAS thread is fastest (and fair on a shared machine)
    from threadpoolctl import threadpool_limits
except ImportError:
    threadpool_limits = None


def ring(n: int, rng: np.random.Generator, radius: float = 2.0, std: float = 0.02) -> np.ndarray:
    """``n`` samples of the mixture of 8 Gaussians on a circle of ``radius``."""
    k = rng.integers(0, 8, n)
    angle = 2 * np.pi * k / 8
    centers = radius * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return (centers + std * rng.standard_normal((n, 2))).astype(np.float32)


def generator(z: Any, width: int) -> hd.Variable:
    with hd.parameter_scope("gen"):
        h = F.relu(PF.affine(z, width, name="fc1"))
        h = F.relu(PF.affine(h, width, name="fc2"))
        return PF.affine(h, 2, name="out")


def critic(x: Any, width: int) -> hd.Variable:
    """Same names on every call: real, fake and interpolates share the critic's parameters."""
    with hd.parameter_scope("critic"):
        h = F.relu(PF.affine(x, width, name="fc1"))
        h = F.relu(PF.affine(h, width, name="fc2"))
        h = F.relu(PF.affine(h, width, name="fc3"))
        return PF.affine(h, 1, name="out")


def build(batch: int, width: int, lam: float) -> dict[str, Any]:
    """The two static graphs: the critic's loss and the generator's loss."""
    with hd.auto_forward(False):
        real = hd.Variable((batch, 2))
        fake_in = hd.Variable((batch, 2))  # a generator sample, fed as data to the critic step
        eps = F.rand(shape=(batch, 1))  # fresh on every forward
        x_hat = eps * real + (1 - eps) * fake_in
        d_real, d_fake, d_hat = critic(real, width), critic(fake_in, width), critic(x_hat, width)
        (g,) = hd.grad(F.sum(d_hat), x_hat)  # (batch, 2): row i is grad D at x_hat[i]
        grad_norm = F.norm(g, axis=1)
        penalty = F.mean((grad_norm - 1) ** 2)
        w_dist = F.mean(d_real) - F.mean(d_fake)
        d_loss = -w_dist + lam * penalty

        z = F.randn(shape=(batch, 2))  # fresh on every forward
        fake = generator(z, width)
        g_loss = -F.mean(critic(fake, width))
    return {
        "real": real,
        "fake_in": fake_in,
        "d_loss": d_loss,
        "w_dist": w_dist,
        "penalty": penalty,
        "grad_norm": grad_norm,
        "fake": fake,
        "g_loss": g_loss,
    }


def critic_field(width: int, lim: float = 3.0, n: int = 80) -> tuple[np.ndarray, ...]:
    xs = np.linspace(-lim, lim, n, dtype=np.float32)
    gx, gy = np.meshgrid(xs, xs)
    pts = np.stack([gx.ravel(), gy.ravel()], axis=1)
    with hd.no_grad():
        d = critic(pts, width).d.reshape(n, n)
    return gx, gy, d


def plot(
    path: Path,
    real: np.ndarray,
    fake: np.ndarray,
    field: tuple[np.ndarray, ...],
    history: dict[str, list[float]],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    ax = axes[0]
    gx, gy, d = field
    cs = ax.contourf(gx, gy, d, levels=20, cmap="coolwarm", alpha=0.8)
    fig.colorbar(cs, ax=ax, label="critic D(x)")
    ax.scatter(real[:, 0], real[:, 1], s=4, c="k", alpha=0.5, label="real")
    ax.scatter(fake[:, 0], fake[:, 1], s=4, c="yellow", edgecolors="none", label="generated")
    ax.set_aspect("equal")
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.set_title("samples over the critic's contours")
    ax.legend(loc="upper right", markerscale=3, fontsize=8)
    steps = np.arange(1, len(history["w_dist"]) + 1)
    ax = axes[1]
    ax.plot(steps, history["w_dist"], label="Wasserstein estimate  E D(real) - E D(fake)")
    ax.plot(steps, history["penalty"], label="gradient penalty  E (||grad D|| - 1)^2")
    ax.plot(steps, history["g_loss"], label="generator loss  -E D(G(z))", alpha=0.6)
    ax.set_xlabel("generator step")
    ax.set_ylabel("value (linear within +-1, logarithmic beyond)")
    # symlog, not a clipped linear axis: the early steps' large values stay in the picture
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_title("losses")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(steps, history["grad_norm"], c="C3")
    ax.axhline(1.0, c="k", ls="--", lw=1)
    ax.set_xlabel("generator step")
    ax.set_ylabel("mean gradient norm")
    ax.set_title("mean ||grad_x D|| at the interpolates")
    ax.set_ylim(0, max(3.0, 1.05 * float(np.max(history["grad_norm"]))))
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(
    iterations: int = 1500,
    batch: int = 256,
    n_critic: int = 5,
    width: int = 64,
    lam: float = 1.0,
    lr: float = 1e-3,
    seed: int = 0,
    out: str | Path | None = "wgan_gp_2d.png",
    verbose: bool = True,
) -> dict[str, Any]:
    """Trains and returns the history, the final mean gradient norm at the interpolates, the
    samples and the time taken; writes the picture to ``out`` (None: no picture)."""
    if threadpool_limits is not None:
        with threadpool_limits(1):
            return _main(iterations, batch, n_critic, width, lam, lr, seed, out, verbose)
    return _main(iterations, batch, n_critic, width, lam, lr, seed, out, verbose)


def _main(
    iterations: int,
    batch: int,
    n_critic: int,
    width: int,
    lam: float,
    lr: float,
    seed: int,
    out: str | Path | None,
    verbose: bool,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    hd.seed(seed)
    rng = np.random.default_rng(seed)
    hd.clear_parameters()
    with hd.context_scope(hd.Context(dtype="float32")):
        g = build(batch, width, lam)
        params = hd.get_parameters()
        d_solver = S.Adam(lr, beta1=0.5, beta2=0.9)
        d_solver.set_parameters({k: v for k, v in params.items() if k.startswith("critic/")})
        g_solver = S.Adam(lr, beta1=0.5, beta2=0.9)
        g_solver.set_parameters({k: v for k, v in params.items() if k.startswith("gen/")})
        history: dict[str, list[float]] = {
            "w_dist": [],
            "penalty": [],
            "grad_norm": [],
            "g_loss": [],
        }
        steps = range(iterations)
        # no progress bar in a redirected log (it would write hundreds of updates there)
        quiet = not verbose or not sys.stderr.isatty()
        bar = tqdm(steps, desc="WGAN-GP", disable=quiet) if tqdm is not None else steps
        for _ in bar:
            for _ in range(n_critic):
                g["fake"].forward()  # a fresh z
                g["fake_in"].d = g["fake"].d
                g["real"].d = ring(batch, rng)
                g["d_loss"].forward()  # fresh interpolation weights
                d_solver.zero_grad()
                g["d_loss"].backward()
                d_solver.update()
            g["g_loss"].forward()
            g_solver.zero_grad()
            g["g_loss"].backward()
            g_solver.update()
            history["w_dist"].append(float(g["w_dist"].d))
            history["penalty"].append(float(g["penalty"].d))
            history["grad_norm"].append(float(g["grad_norm"].d.mean()))
            history["g_loss"].append(float(g["g_loss"].d))
        real = ring(1000, rng)
        with hd.no_grad():
            fake = generator(
                np.random.default_rng(seed + 1).standard_normal((1000, 2)).astype(np.float32), width
            ).d
        field = critic_field(width)
    seconds = time.perf_counter() - t0
    tail = max(1, iterations // 10)
    result = {
        "history": history,
        "grad_norm": float(np.mean(history["grad_norm"][-tail:])),
        "real": real,
        "fake": fake,
        "seconds": seconds,
    }
    if out is not None:
        try:
            plot(Path(out), real, fake, field, history)
            result["png"] = Path(out)
        except ImportError:
            if verbose:
                print('matplotlib is not installed: pip install -e ".[plot]" for the picture')
    if verbose:
        print(
            f"{iterations} generator steps in {seconds:.1f} s; "
            f"mean ||grad_x D|| at the interpolates (last {tail} steps): "
            f"{result['grad_norm']:.3f}"
        )
        if "png" in result:
            print(f"picture: {result['png']}")
    return result


if __name__ == "__main__":
    main()
