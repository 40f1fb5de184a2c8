"""Fit a complex FIR filter by gradient descent through ``F.fft``.

A complex baseband signal ``x`` (length ``N``) goes through an unknown filter of ``K``
complex taps ``h``; we see ``y = h (*) x + noise`` (circular convolution, computed in
the frequency domain: ``y = ifft(fft(x) * fft(h, n=N))``). We fit the taps ``w`` by
minimising the mean squared error ``L(w) = mean |ifft(fft(x) fft(w, n=N)) - y|^2``
with ``S.Adam``, which steps a complex parameter along the conjugate of hodiff's
gradient (``dL/dRe w - i dL/dIm w``), exactly as ``torch.optim`` on ``view_as_real``.

The check: the fitted taps against the least-squares solution computed directly by
``numpy.linalg.lstsq`` on the convolution matrix (no gradients involved).

Run: python examples/complex_filter.py [--plot docs/img/complex_filter.png]
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S


def convolution_matrix(x: np.ndarray, k: int) -> np.ndarray:
    """``C`` with ``C @ h = h (*) x`` (circular): column ``j`` is ``x`` rolled by ``j``."""
    return np.stack([np.roll(x, j) for j in range(k)], axis=1)


def main(
    n: int = 64, k: int = 6, steps: int = 400, seed: int = 0, verbose: bool = False
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) + 1j * rng.normal(size=n)
    h_true = (rng.normal(size=k) + 1j * rng.normal(size=k)) * np.exp(-0.4 * np.arange(k))
    y = np.fft.ifft(np.fft.fft(x) * np.fft.fft(h_true, n=n))
    y = y + 0.05 * (rng.normal(size=n) + 1j * rng.normal(size=n))

    w = hd.Variable.from_array(np.zeros(k, dtype=np.complex128), need_grad=True)
    solver = S.Adam(lr=0.05)
    solver.set_parameters({"w": w})
    spectrum = np.fft.fft(x)
    losses = []
    for _ in range(steps):
        solver.zero_grad()
        y_hat = F.ifft(spectrum * F.fft(w, n=n))
        loss = F.mean(F.abs(y_hat - y) ** 2)
        loss.backward()
        solver.update()
        losses.append(float(loss.d))

    h_lstsq = np.linalg.lstsq(convolution_matrix(x, k), y, rcond=None)[0]
    error = float(np.abs(w.d - h_lstsq).max())
    if verbose:
        print(f"loss: {losses[0]:.4f} -> {losses[-1]:.6f} after {steps} Adam steps")
        print(
            f"max |w - least squares| = {error:.2e}; max |w - h_true| = "
            f"{np.abs(w.d - h_true).max():.3f} (noise)"
        )
    return {"w": w.d.copy(), "h_true": h_true, "h_lstsq": h_lstsq, "losses": losses, "error": error}


def plot(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.semilogy(results["losses"], color="tab:blue")
    ax1.set_xlabel("Adam step")
    ax1.set_ylabel("mean squared error  mean |y_hat - y|^2")
    ax1.set_title("Training loss")
    ax1.grid(True, which="both", alpha=0.3)
    taps = np.arange(len(results["w"]))
    h, w = results["h_true"], results["w"]
    ax2.plot(taps, h.real, "o", color="tab:blue", mfc="none", ms=10, label="true Re h")
    ax2.plot(taps, h.imag, "s", color="tab:orange", mfc="none", ms=10, label="true Im h")
    ax2.plot(taps, w.real, "x", color="tab:blue", ms=8, label="fitted Re w")
    ax2.plot(taps, w.imag, "+", color="tab:orange", ms=10, label="fitted Im w")
    ax2.axhline(0.0, color="gray", lw=0.5)
    ax2.set_xlabel("tap index j")
    ax2.set_ylabel("tap value")
    ax2.set_title("Filter taps: true and fitted")
    ax2.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", default=None, help="write the picture to this PNG")
    args = parser.parse_args()
    out = main(verbose=True)
    if args.plot:
        plot(out, args.plot)
