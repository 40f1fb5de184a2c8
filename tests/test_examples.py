"""Every script in examples/ runs at a small size and gets the right answer."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

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


# ---------------------------------------------------------------------------- what the docs say
DOCS = EXAMPLES.parent / "docs"


def _claims():
    from bench import examples as bench_examples

    return bench_examples


def test_every_example_the_docs_name_has_a_check_of_its_numbers():
    """Each example a page names is run at the docs' size by ``python -m bench.examples``."""
    bench = _claims()
    named = set()
    for page in DOCS.glob("*.md"):
        named |= set(re.findall(r"examples/(\w+)\.py", page.read_text(encoding="utf-8")))
    assert named, "no page names an example"
    missing = sorted(named - set(bench.RUNS) - set(bench.UNQUOTED))
    assert not missing, f"examples the docs quote without a check of their numbers: {missing}"
    for name in [*bench.RUNS, *bench.UNQUOTED]:
        assert (EXAMPLES / f"{name}.py").exists(), name


def test_the_docs_state_the_ranges_that_the_full_runs_check():
    bench = _claims()
    for name, run in bench.RUNS.items():
        assert run.claims, name
        for claim in run.claims:
            text = " ".join((DOCS / claim.page).read_text(encoding="utf-8").split())
            assert claim.words in text, f"docs/{claim.page} no longer says {claim.words!r}"
            assert f"examples/{name}.py" in text, f"docs/{claim.page} does not name {name}"
            assert claim.low <= claim.high, claim


def test_the_full_run_check_reports_a_number_out_of_its_range(capsys, monkeypatch):
    pytest.importorskip("scipy")
    bench = _claims()
    small = {"n": 200, "d": 5}  # the check itself, on a small run of the Newton-CG example
    nit = bench.Claim(
        "scipy.md", "", "Newton-CG iterations", lambda r: r["Newton-CG"]["nit"], 1, 50
    )
    monkeypatch.setitem(bench.RUNS, "newton_cg_logistic", bench.Run(small, (nit,), None))
    assert bench.check(["newton_cg_logistic"], [0]) == 0
    assert "OUT OF RANGE" not in capsys.readouterr().out
    never = bench.Claim("scipy.md", "", "iterations", lambda r: r["Newton-CG"]["nit"], -2, -1)
    monkeypatch.setitem(bench.RUNS, "newton_cg_logistic", bench.Run(small, (nit, never), None))
    assert bench.check(["newton_cg_logistic"], [0]) == 1
    assert "OUT OF RANGE" in capsys.readouterr().out


def test_wgan_gp_mpi_measures_the_ring_as_the_docs_state(monkeypatch):
    """The example's own measures, on the ring itself: every point near a mode, all 8 modes."""
    module = load("wgan_gp_mpi")
    rng = np.random.default_rng(3)
    ring = module.sample_real(np.random.default_rng(4), 4000)
    monkeypatch.setattr(module, "generator", lambda z, width: SimpleNamespace(d=ring))
    m = module.evaluate(rng, width=8)
    assert m["near"] > 0.999  # 0.25 is 5 standard deviations
    assert m["on_ring"] > 0.999
    assert m["modes"] == 8
    assert m["mean_error"] < 0.1  # 2 / sqrt(4000) is about 0.03
    np.testing.assert_allclose(np.cov(ring.T), (2 + 0.05**2) * np.eye(2), atol=0.15)
    assert m["cov_error"] < 0.15
    # a Gaussian blob with the ring's mean and covariance: right moments, off the ring
    blob = np.sqrt(2.0) * np.random.default_rng(5).standard_normal((4000, 2))
    monkeypatch.setattr(module, "generator", lambda z, width: SimpleNamespace(d=blob))
    m = module.evaluate(rng, width=8)
    assert m["cov_error"] < 0.2
    assert m["on_ring"] < 0.25  # P(1.75 < r < 2.25) = e^(-1.75^2/4) - e^(-2.25^2/4) = 0.18
    assert m["near"] < 0.05
    one_mode = np.repeat(module.CENTERS[:1], 4000, axis=0).astype(np.float32)
    monkeypatch.setattr(module, "generator", lambda z, width: SimpleNamespace(d=one_mode))
    collapsed = module.evaluate(rng, width=8)
    assert collapsed["modes"] == 1
    assert collapsed["near"] == 1.0
    assert collapsed["cov_error"] > 1.9  # all variance lost: (2 + 0.0025) I against 0


def test_wgan_gp_mpi_short_run_reports_its_measures(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from hodiff.distributed import Communicator

    png = tmp_path / "wgan_mpi.png"
    module = load("wgan_gp_mpi")
    r = module.main(
        steps=20, batch=32, n_critic=2, width=16, plot=str(png), comm=Communicator.single_process()
    )
    assert len(r["history"]) == 20
    assert np.all(np.isfinite(r["history"]))
    assert r["w_tail"] == pytest.approx(np.mean(r["history"][-2:]))
    assert 0 <= r["near"] <= 1
    assert 0 <= r["modes"] <= 8
    assert png.stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "modes covered" in out
    assert "a short run" in out
