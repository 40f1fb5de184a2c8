"""WGAN-GP on a ring of 8 Gaussians, data-parallel over MPI (docs/distributed.md).

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpi4py examples/wgan_gp_mpi.py
    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpi4py examples/wgan_gp_mpi.py --steps 2000 \
        --plot docs/img/wgan_gp_mpi.png

Every rank draws its own share of each batch (``--batch`` is the global batch), computes
the critic loss with its gradient penalty locally (``hd.grad`` of the critic with respect
to its input, inside the loss), and ``comm.backward`` averages the gradients over the
ranks while the reverse pass runs: the same step as one process on the whole batch, up to
rounding. Each rank initializes its parameters from its own seed; ``bcast_parameters``
makes them rank 0's. ``--save`` writes a checkpoint (parameters and both solvers' states)
from rank 0; ``--load`` reads one on rank 0 and broadcasts it, so every rank continues
exactly as rank 0 would. With ``--check`` the ranks verify at the end that their
parameters agree. Also runs as a single process (``python examples/wgan_gp_mpi.py``).

A GAN's run is chaotic: two machines, or 1 and 2 ranks, round differently, and after a few
dozen steps the runs part ways. What the docs state is what every such run reaches
(``python -m bench.examples wgan_gp_mpi`` checks it): the critic's estimate settled near 0,
at least 30% of the samples near a mode, at least 5 of the 8 modes covered. Adam runs
without momentum on the first moment (``beta1=0``, as the WGAN-GP paper's CIFAR-10 models):
with ``beta1=0.5`` a perturbation of 1e-7 of the initial weights could leave the generator
on 5 modes with a fifth of its samples near one. The end of the run prints the measures
(:func:`evaluate`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF
import hodiff.solvers as S
from hodiff.distributed import Communicator

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # the examples extra brings it; without it, numpy's default threads
    threadpool_limits = None

CENTERS = 2.0 * np.stack([np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)], 1)


def sample_real(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` points of the ring: a random center plus N(0, 0.05^2) noise, float32."""
    return (CENTERS[rng.integers(0, 8, size=n)] + 0.05 * rng.standard_normal((n, 2))).astype(
        np.float32
    )


#: a generated point within NEAR of a center counts as on that mode (5 standard deviations)
NEAR = 0.25


def evaluate(rng: np.random.Generator, width: int, n: int = 4000) -> dict[str, Any]:
    """How well ``n`` generated points cover the ring: the fraction of them within ``NEAR`` of
    a center, and within ``NEAR`` of the circle of radius 2 through the centers, the modes
    that hold at least a quarter of their share (1/32 of the points) within ``NEAR``, and
    the error of their mean (0 for the ring) and covariance (``(4/2 + 0.05^2) I``, spectral
    norm).
    """
    with hd.no_grad():
        fake = generator(rng.standard_normal((n, 2)).astype(np.float32), width).d
    dist = np.linalg.norm(fake[:, None, :] - CENTERS[None], axis=2)
    near = dist.min(axis=1) < NEAR
    radius = np.linalg.norm(fake, axis=1)
    share = np.bincount(dist.argmin(axis=1)[near], minlength=8) / n
    cov = np.cov(fake.T) - (2.0 + 0.05**2) * np.eye(2)
    return {
        "samples": fake,
        "near": float(near.mean()),
        "on_ring": float(np.mean(np.abs(radius - 2.0) < NEAR)),
        "modes": int(np.sum(share >= 1 / 32)),
        "mean_error": float(np.linalg.norm(fake.mean(axis=0))),
        "cov_error": float(np.linalg.norm(cov, 2)),
    }


def generator(z: Any, width: int) -> Any:
    with hd.parameter_scope("gen"):
        h = F.relu(PF.affine(z, width, name="l1"))
        h = F.relu(PF.affine(h, width, name="l2"))
        return PF.affine(h, 2, name="out")


def critic(x: Any, width: int) -> Any:
    with hd.parameter_scope("critic"):
        h = F.leaky_relu(PF.affine(x, width, name="l1"), 0.2)
        h = F.leaky_relu(PF.affine(h, width, name="l2"), 0.2)
        return PF.affine(h, 1, name="out")


def critic_loss(real: np.ndarray, fake: np.ndarray, eps: np.ndarray, width: int, lam: float):
    """The WGAN-GP critic loss on this rank's share, and its Wasserstein estimate."""
    x_hat = hd.Variable.from_array(eps * real + (1 - eps) * fake, need_grad=True)
    (g,) = hd.grad(F.sum(critic(x_hat, width)), x_hat)  # per-example input gradients
    penalty = F.mean((F.sqrt(F.sum(g * g, axis=1) + 1e-12) - 1.0) ** 2)
    w_distance = F.mean(critic(real, width)) - F.mean(critic(fake, width))
    return -w_distance + lam * penalty, w_distance


#: generator steps of the run behind docs/img/wgan_gp_mpi.png (the ring is learned by then)
FULL_RUN = 2000
SHORT_RUN = (
    "a short run ({steps} generator steps): it shows that data-parallel training runs and "
    "agrees across ranks, not a trained generator (its samples are still far from the ring); "
    "--steps {full} trains it, as for the picture of docs/distributed.md"
)


def main(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`train` with one BLAS thread per process, as the other examples run: MPI runs a
    process per core, and numpy's default of one thread per core each oversubscribes them
    (one process alone too: the small matrices of this model are slower on many threads).
    """
    if threadpool_limits is not None:
        with threadpool_limits(1):
            return train(*args, **kwargs)
    return train(*args, **kwargs)


def train(
    steps: int = 300,
    batch: int = 256,
    n_critic: int = 5,
    width: int = 64,
    lam: float = 10.0,
    lr_critic: float = 1e-3,
    lr_gen: float = 1e-3,
    beta1: float = 0.0,
    seed: int = 0,
    check: bool = False,
    plot: str | None = None,
    save: str | None = None,
    load: str | None = None,
    verbose: bool = True,
    comm: Communicator | None = None,
) -> dict[str, Any]:
    """Trains and returns the Wasserstein estimates (one per generator step), on every rank."""
    if comm is None:
        try:
            comm = Communicator()
        except ImportError:
            comm = Communicator.single_process()
    if batch % comm.size:
        raise ValueError(f"--batch {batch} must be divisible by the {comm.size} ranks")
    local = batch // comm.size
    hd.clear_parameters()
    hd.seed(seed + 1000 * comm.rank)  # a different initialization on every rank ...
    rng = np.random.default_rng([seed, comm.rank])  # ... and a different share of the data
    with hd.no_grad():  # creates the parameters
        critic(generator(np.zeros((1, 2), np.float32), width), width)
    params = hd.get_parameters()
    comm.bcast_parameters(params)  # ... until every rank takes rank 0's
    gen = {k: v for k, v in params.items() if k.startswith("gen/")}
    crit = {k: v for k, v in params.items() if k.startswith("critic/")}
    solver_g = S.Adam(lr=lr_gen, beta1=beta1, beta2=0.9)
    solver_c = S.Adam(lr=lr_critic, beta1=beta1, beta2=0.9)
    solver_g.set_parameters(gen)
    solver_c.set_parameters(crit)
    if load is not None:
        _load(load, comm, params, solver_g, solver_c)

    history = []
    t0 = time.perf_counter()
    for step in range(steps):
        for _ in range(n_critic):
            real = sample_real(rng, local)
            with hd.no_grad():
                fake = generator(rng.standard_normal((local, 2)).astype(np.float32), width).d
            eps = rng.uniform(size=(local, 1)).astype(np.float32)
            loss, w_distance = critic_loss(real, fake, eps, width, lam)
            solver_c.zero_grad()
            comm.backward(loss, crit)  # through the penalty's gradient graph too
            solver_c.update()
        z = rng.standard_normal((local, 2)).astype(np.float32)
        loss_g = -F.mean(critic(generator(z, width), width))
        solver_g.zero_grad()
        comm.backward(loss_g, gen)
        solver_g.update()
        w = comm.all_reduce(np.array([float(w_distance.d)]), op="mean")[0]  # global estimate
        history.append(float(w))
        if verbose and comm.rank == 0 and (step % max(1, steps // 10) == 0 or step == steps - 1):
            print(
                f"step {step:5d}  Wasserstein estimate {w:8.4f}  "
                f"({time.perf_counter() - t0:.1f} s, {comm.size} ranks)",
                flush=True,
            )
    if save is not None and comm.rank == 0:  # every rank holds the same: rank 0 writes
        hd.save_parameters(f"{save}.params.npz")
        solver_g.save_states(f"{save}.gen.npz")
        solver_c.save_states(f"{save}.critic.npz")
    if check:
        comm.check_parameters(params)
        if comm.rank == 0:
            print(f"parameters agree on every rank ({comm.size} ranks)", flush=True)
    tail = max(1, steps // 10)
    result = {"history": history, "rank": comm.rank, "size": comm.size}
    result["w_tail"] = float(np.mean(history[-tail:])) if history else float("nan")
    result.update(evaluate(np.random.default_rng(seed + 1), width))  # the same on every rank
    if verbose and comm.rank == 0:
        print(
            f"Wasserstein estimate over the last {tail} steps {result['w_tail']:.3f}; "
            f"of the samples, {result['on_ring']:.0%} within {NEAR} of the ring and "
            f"{result['near']:.0%} of a mode; {result['modes']} of 8 modes covered",
            flush=True,
        )
    if plot is not None and comm.rank == 0:
        _plot(plot, history, result["samples"], rng)
    if verbose and comm.rank == 0 and steps < FULL_RUN:
        print(SHORT_RUN.format(steps=steps, full=FULL_RUN), flush=True)
    return result


def _load(prefix: str, comm: Communicator, params: dict, solver_g: Any, solver_c: Any) -> None:
    """A checkpoint read by rank 0 only, then sent to every rank."""
    if comm.rank == 0:
        hd.load_parameters(f"{prefix}.params.npz")
        solver_g.load_states(f"{prefix}.gen.npz")
        solver_c.load_states(f"{prefix}.critic.npz")
    comm.bcast_parameters(params)
    comm.bcast_solver_states(solver_g)
    comm.bcast_solver_states(solver_c)


def _plot(path: str, history: list[float], fake: np.ndarray, rng: np.random.Generator) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    real = sample_real(rng, len(fake))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.5))
    a.scatter(real[:, 0], real[:, 1], s=3, alpha=0.4, label="data")
    a.scatter(fake[:, 0], fake[:, 1], s=3, alpha=0.4, label="generator")
    a.set_aspect("equal")
    a.set_xlim(-3.2, 3.2)
    a.set_ylim(-3.2, 3.2)
    a.set_xlabel("$x_1$")
    a.set_ylabel("$x_2$")
    a.set_title("samples after training")
    a.legend(loc="upper right", markerscale=4)
    steps = np.arange(1, len(history) + 1)
    b.plot(steps, history, lw=0.8)
    b.axhline(0.0, c="k", lw=0.6)
    b.set_xscale("log")  # the first steps, where the estimate moves most, get their share
    b.set_xlabel("generator step")
    b.set_ylabel("Wasserstein estimate (mean over ranks)")
    b.set_title("critic's estimate of W(data, generator)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300, help="generator steps")
    p.add_argument("--batch", type=int, default=256, help="global batch (over all ranks)")
    p.add_argument("--n-critic", type=int, default=5, help="critic steps per generator step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="check that the ranks agree at the end")
    p.add_argument("--plot", default=None, help="save a picture of the samples and the estimate")
    p.add_argument("--save", default=None, help="checkpoint prefix written at the end (rank 0)")
    p.add_argument("--load", default=None, help="checkpoint prefix read at the start (rank 0)")
    a = p.parse_args()
    main(
        steps=a.steps,
        batch=a.batch,
        n_critic=a.n_critic,
        seed=a.seed,
        check=a.check,
        plot=a.plot,
        save=a.save,
        load=a.load,
    )
