"""The examples the docs quote, run at the docs' size, against the ranges the docs state.

    python -m bench.examples                 # every example (about 15 minutes on 2 cores)
    python -m bench.examples pinn_poisson    # some of them
    python -m bench.examples --seeds 0 1 2   # each at several seeds

Each claim names the page that states it and the words that state the range; the tests
check that the page still says them (tests/test_examples.py), and run every example at a
small size. This command runs the full size, which takes minutes, and exits non-zero when a
number falls outside its range. The ranges are what a run on another machine lands in:
training is float32, and a different BLAS or summation order changes the last bits, so the
docs state a range, never one run's digits.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Claim:
    """A number an example gives, the range the docs state for it, and where they state it."""

    page: str  # under docs/
    words: str  # what the page says (the range in its words)
    what: str  # the quantity, for the table
    measure: Callable[[dict[str, Any]], float]
    low: float
    high: float


@dataclass(frozen=True)
class Run:
    """An example's full run: the keyword arguments of its ``main`` and the claims on it."""

    kwargs: dict[str, Any]
    claims: tuple[Claim, ...]
    picture: str | None = "out"  # the name of main's picture argument (None: no picture)


def _fgsm_gain(r: dict[str, Any]) -> float:
    i = r["eps"].index(0.1)
    return float(r["penalty"]["fgsm"][i] - r["plain"]["fgsm"][i])


def _tail_ratio(r: dict[str, Any]) -> float:
    plain, penalty = (np.percentile(r[k]["grad_norms"], 99) for k in ("plain", "penalty"))
    return float(plain / penalty)


def _wgan_mpi(**kwargs: Any) -> dict[str, Any]:
    """The MPI example in one process (the docs' run on 1 rank: the same step, up to rounding)."""
    from hodiff.distributed import Communicator

    return load("wgan_gp_mpi").main(comm=Communicator.single_process(), **kwargs)


RUNS: dict[str, Run] = {
    "complex_filter": Run(
        {},
        (
            Claim(
                "complex.md",
                "to within 1e-8",
                "max |w - least squares|",
                lambda r: r["error"],
                0,
                1e-8,
            ),
        ),
        None,
    ),
    "pinn_poisson": Run(
        {},
        (Claim("taylor.md", "below 1e-3", "relative L2 error", lambda r: r["rel_l2"], 0, 1e-3),),
    ),
    "pinn_kolmogorov": Run(
        {},
        (Claim("taylor.md", "below 1e-3", "relative L2 error", lambda r: r["rel_l2"], 0, 1e-3),),
    ),
    "wgan_gp_2d": Run(
        {},
        (
            Claim(
                "training.md",
                "between 0.8 and 1.3",
                "mean ||grad_x D|| (last 10%)",
                lambda r: r["grad_norm"],
                0.8,
                1.3,
            ),
        ),
    ),
    "double_backprop_digits": Run(
        {},
        (
            Claim(
                "training.md",
                "94-98 % test accuracy",
                "accuracy, no penalty",
                lambda r: r["plain"]["accuracy"],
                0.94,
                0.98,
            ),
            Claim(
                "training.md",
                "94-98 % test accuracy",
                "accuracy, penalty",
                lambda r: r["penalty"]["accuracy"],
                0.94,
                0.98,
            ),
            Claim(
                "training.md",
                "to 0.3-0.7 of the unpenalised model's",
                "mean input gradient, penalty / none",
                lambda r: r["penalty"]["mean_grad_norm"] / r["plain"]["mean_grad_norm"],
                0.3,
                0.7,
            ),
            Claim(
                "training.md",
                "falls by more than 2 times",
                "99th percentile of input gradients, none / penalty",
                _tail_ratio,
                2,
                1e9,
            ),
            Claim(
                "training.md",
                "at least 15 points more",
                "accuracy under attack (eps 0.1), penalty - none",
                _fgsm_gain,
                0.15,
                1.0,
            ),
        ),
    ),
    "hessian_spectrum_density": Run(
        {},
        (
            Claim(
                "curvature.md",
                "agree with the dense Hessian's",
                "max error of the top eigenvalues",
                lambda r: r["top_error"],
                0,
                1e-6,
            ),
            Claim(
                "curvature.md",
                "more than 99% of the density's mass",
                "density's mass near exact eigenvalues",
                lambda r: r["mass_near_exact"],
                0.99,
                1.0 + 1e-9,  # a sum of 1000 terms: 1 up to rounding
            ),
            Claim(
                "curvature.md",
                "within 3 standard errors",
                "|trace - exact| / standard error",
                lambda r: abs(r["trace"] - r["exact_trace"]) / r["trace"].stderr,
                0,
                3,
            ),
        ),
    ),
    "newton_cg_logistic": Run(
        {},
        (
            Claim(
                "scipy.md",
                "at most 20 Newton iterations",
                "Newton-CG iterations",
                lambda r: r["Newton-CG"]["nit"],
                1,
                20,
            ),
            Claim(
                "scipy.md",
                "more than 50 quasi-Newton ones",
                "BFGS iterations",
                lambda r: r["BFGS"]["nit"],
                50,
                10_000,
            ),
        ),
        picture=None,
    ),
    "hessian_spectrum": Run(
        {},
        (
            Claim(
                "scipy.md",
                "agree with the dense Hessian's",
                "max error of the top eigenvalues",
                lambda r: r["max_error"],
                0,
                1e-8,
            ),
        ),
        picture=None,
    ),
    "third_derivative": Run(
        {},
        (
            Claim(
                "hvp.md",
                "to 1e-12",
                "error of T(x) u against its closed form",
                lambda r: r["tensor"],
                0,
                1e-12,
            ),
        ),
        picture=None,
    ),
    "wgan_gp_mpi": Run(
        {"steps": 2000},
        (
            Claim(
                "distributed.md",
                "settles between 0 and 0.4",
                "Wasserstein estimate (last 200 steps)",
                lambda r: r["w_tail"],
                0.0,
                0.4,
            ),
            Claim(
                "distributed.md",
                "at least 30% of 4000 generated samples lie within 0.25",
                "samples within 0.25 of a mode",
                lambda r: r["near"],
                0.3,
                1.0,
            ),
            Claim(
                "distributed.md",
                "at least 5 of the 8 modes",
                "modes holding 1/32 of the samples",
                lambda r: r["modes"],
                5,
                8,
            ),
        ),
        picture="plot",
    ),
}

#: examples the docs name without quoting a number of theirs
UNQUOTED = ("graph_pictures",)


def load(name: str) -> ModuleType:
    """``examples/<name>.py`` as a module."""
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(name: str, seed: int, picture_dir: Path | None) -> tuple[dict[str, Any], float]:
    """Runs one example at its docs' size; returns its result and the seconds it took."""
    spec = RUNS[name]
    kwargs: dict[str, Any] = {**spec.kwargs, "verbose": False}
    if seed:
        kwargs["seed"] = seed
    if spec.picture is not None:
        kwargs[spec.picture] = None if picture_dir is None else str(picture_dir / f"{name}.png")
    t0 = time.perf_counter()
    main = _wgan_mpi if name == "wgan_gp_mpi" else load(name).main
    result = main(**kwargs)
    return result, time.perf_counter() - t0


def check(names: list[str], seeds: list[int], picture_dir: Path | None = None) -> int:
    """Runs the examples and prints one row per claim; the number of claims out of range."""
    failures = 0
    print(f"{'example':<26} {'seed':>4}  {'quantity':<48} {'value':>10}  range")
    for name in names:
        for seed in seeds:
            result, seconds = run(name, seed, picture_dir)
            for c in RUNS[name].claims:
                value = float(c.measure(result))
                ok = c.low <= value <= c.high
                failures += not ok
                print(
                    f"{name:<26} {seed:>4}  {c.what:<48} {value:>10.4g}  [{c.low:g}, {c.high:g}]"
                    f"  {'ok' if ok else 'OUT OF RANGE'}",
                    flush=True,
                )
            print(f"{'':<26} {'':>4}  ({seconds:.0f} s)", flush=True)
    return failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help=f"examples (default: all of {', '.join(RUNS)})")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--pictures", default=None, help="a directory for the pictures")
    a = p.parse_args(argv)
    unknown = sorted(set(a.names) - set(RUNS))
    if unknown:
        p.error(f"no such example: {unknown}; choose from {list(RUNS)}")
    with tempfile.TemporaryDirectory() as tmp:
        pictures = Path(a.pictures) if a.pictures else Path(tmp)
        failures = check(a.names or list(RUNS), a.seeds, pictures)
    print("every number in its range" if not failures else f"{failures} out of range")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
