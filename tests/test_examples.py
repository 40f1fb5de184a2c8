"""Every script in examples/ runs at a small size and gets the right answer."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_newton_cg_logistic(capsys):
    pytest.importorskip("scipy")
    results = load("newton_cg_logistic").main(n=200, d=5, verbose=True)
    ncg, bfgs = results["Newton-CG"], results["BFGS"]
    assert ncg["grad_norm"] < 1e-6
    assert bfgs["grad_norm"] < 1e-6
    np.testing.assert_allclose(ncg["x"], bfgs["x"], atol=1e-5)
    assert ncg["hessp"] > 0
    assert ncg["nit"] < bfgs["nit"]
    assert ncg["forward"] <= ncg["nit"] + 5  # value and gradient share a forward pass
    assert "Newton-CG" in capsys.readouterr().out


def test_hessian_spectrum(capsys):
    pytest.importorskip("scipy")
    results = load("hessian_spectrum").main(batch=16, sizes=(3, 5, 2), k=3, verbose=True)
    assert results["n_params"] == 3 * 5 + 5 + 5 * 2 + 2
    assert results["max_error"] < 1e-8
    assert np.all(np.diff(results["eigsh"]) >= 0)
    assert "eigsh" in capsys.readouterr().out


def test_third_derivative(capsys):
    errors = load("third_derivative").main(verbose=True)
    assert errors["tanh"] < 1e-12
    assert errors["mlp"] < 1e-5
    assert errors["tensor"] < 1e-12
    assert "T(x) u" in capsys.readouterr().out


def test_hessian_spectrum_density(tmp_path, capsys):
    try:
        import matplotlib  # noqa: F401

        out = tmp_path / "density.png"
    except ImportError:
        out = None
    r = load("hessian_spectrum_density").main(
        n_per_class=20, steps=60, k=2, n_probes=3, n_steps=30, out=out
    )
    assert r["loss"][-1] < r["loss"][0]
    assert r["n_params"] == 2 * 16 + 16 + 2 * 16 + 16 * 16 + 16 + 16 * 3 + 3
    assert r["top_error"] < 1e-8
    assert r["bottom_error"] < 1e-8
    assert abs(r["trace"] - r["exact_trace"]) < 4 * r["trace"].stderr
    assert abs(r["mass"] - 1) < 1e-10
    assert r["mass_near_exact"] > 0.99
    if out is not None:
        assert out.read_bytes()[:4] == b"\x89PNG"
    assert "trace" in capsys.readouterr().out


def test_wgan_gp_2d(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "wgan.png"
    result = load("wgan_gp_2d").main(iterations=60, batch=64, width=32, out=png, verbose=True)
    history = result["history"]
    assert all(len(v) == 60 for v in history.values())
    assert all(np.all(np.isfinite(v)) for v in history.values())
    assert history["grad_norm"][0] < 0.5  # the initial critic is flat; the penalty lifts it
    assert 0.5 < result["grad_norm"] < 2.0
    assert result["fake"].shape == (1000, 2)
    assert png.stat().st_size > 10_000
    assert "interpolates" in capsys.readouterr().out


def test_double_backprop_digits(tmp_path, capsys):
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    png = tmp_path / "digits.png"
    result = load("double_backprop_digits").main(epochs=10, out=png, verbose=True)
    plain, penalty = result["plain"], result["penalty"]
    assert plain["accuracy"] > 0.85
    assert penalty["accuracy"] > 0.8
    # the penalty shrinks the input gradients it penalises, and the attack hurts it less
    assert penalty["mean_grad_norm"] < plain["mean_grad_norm"]
    assert plain["fgsm"][0] == plain["accuracy"]
    assert penalty["fgsm"][2] > plain["fgsm"][2]
    assert png.stat().st_size > 10_000
    assert "penalty" in capsys.readouterr().out


def test_pinn_poisson(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "pinn.png"
    result = load("pinn_poisson").main(iterations=600, batch=128, lr=1e-2, out=png, verbose=True)
    history = result["history"]
    assert len(history) == 600
    assert np.all(np.isfinite(history))
    assert np.mean(history[-50:]) < 1e-2 * history[0]  # the residual fell by 100x
    assert result["rel_l2"] < 1e-2  # against the exact sin(pi x) sin(pi y)
    assert png.stat().st_size > 10_000
    assert "relative L2 error" in capsys.readouterr().out


def test_pinn_kolmogorov(tmp_path, capsys):
    """The weighted Laplacian inside a loss: the docs' error (2.4e-4 at 2000 steps) in short."""
    pytest.importorskip("matplotlib")
    png = tmp_path / "pinn.png"
    example = load("pinn_kolmogorov")
    xy = np.random.default_rng(1).uniform(0, 1, (5, 2))
    s = example.sigma(xy)
    a = s @ s.transpose(0, 2, 1)  # the diffusion: symmetric, positive definite, with a cross term
    assert np.all(np.linalg.eigvalsh(a) > 0)
    assert np.all(a[:, 0, 1] > 0)
    result = example.main(iterations=800, batch=128, lr=5e-3, out=png, verbose=True)
    history = result["history"]
    assert len(history) == 800
    assert np.mean(history[-50:]) < 1e-3 * history[0]  # the residual fell by 1000x
    assert result["rel_l2"] < 3e-3  # against the exact sin(pi x) sin(pi y)
    assert png.stat().st_size > 10_000
    assert "relative L2 error" in capsys.readouterr().out


def test_complex_filter(tmp_path, capsys):
    module = load("complex_filter")
    results = module.main(n=32, k=4, steps=300, verbose=True)
    assert results["error"] < 1e-6  # the least-squares taps, found without gradients
    assert results["losses"][-1] < 0.01 * results["losses"][0]
    assert "least squares" in capsys.readouterr().out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    module.plot(results, str(tmp_path / "filter.png"))
    assert (tmp_path / "filter.png").stat().st_size > 10_000
