"""Training with the toolkit: a WGAN-GP critic built with PF, trained with S.Adam in a static
graph whose interpolation weights (F.rand) are redrawn on every forward, reaches the unit
input-gradient norm at the interpolates that its penalty asks for."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF
import hodiff.solvers as S


@pytest.fixture(autouse=True)
def _clean():
    hd.clear_parameters()
    yield
    hd.clear_parameters()


def critic(x):
    with hd.parameter_scope("critic"):
        h = F.tanh(PF.affine(x, 32, name="fc1"))
        h = F.tanh(PF.affine(h, 32, name="fc2"))
        return PF.affine(h, 1, name="out")


def test_wgan_gp_critic_reaches_unit_gradient_norm_at_interpolates() -> None:
    hd.seed(0)
    rng = np.random.default_rng(0)
    batch, lam = 128, 50.0
    with hd.auto_forward(False):
        real = hd.Variable((batch, 2))
        fake = hd.Variable((batch, 2))
        eps = F.rand(shape=(batch, 1))
        x_hat = eps * real + (1 - eps) * fake
        d_hat = critic(x_hat)
        (g,) = hd.grad(F.sum(d_hat), x_hat)
        norm = F.norm(g, axis=1)
        loss = F.mean(critic(fake)) - F.mean(critic(real)) + lam * F.mean((norm - 1) ** 2)
    solver = S.Adam(2e-3, beta1=0.5, beta2=0.9)
    solver.set_parameters(hd.get_parameters())
    assert sorted(solver.get_parameters()) == sorted(
        f"critic/{layer}/{p}" for layer in ("fc1", "fc2", "out") for p in ("W", "b")
    )
    draws, norms = [], []
    for step in range(400):
        real.d = rng.normal([2.0, 0.0], 0.3, (batch, 2))
        fake.d = rng.normal([-1.0, 1.0], 0.5, (batch, 2))
        loss.forward()
        draws.append(eps.d[:3, 0].copy())
        if step == 150:  # the penalty's gradient uses this step's draw: recompute it by hand
            x = (eps.d * real.d + (1 - eps.d) * fake.d).astype(np.float32)
            xv = hd.Variable.from_array(x, need_grad=True)
            (gx,) = hd.grad(F.sum(critic(xv)), xv)
            np.testing.assert_allclose(norm.d, np.linalg.norm(gx.d, axis=1), rtol=1e-5)
        solver.zero_grad()
        loss.backward()
        solver.update()
        norms.append(float(norm.d.mean()))
    assert not np.array_equal(draws[-1], draws[-2])  # a new eps on every step
    assert norms[0] < 0.5  # the initial critic is flat
    final = np.mean(norms[-30:])
    assert abs(final - 1) < 0.06, final
    # the equilibrium slope of -E D(real) + E D(fake) + lam E (||grad D|| - 1)^2 between two
    # blobs at distance d is 1 + d / (2 lam) (maximise s d - lam (s - 1)^2)
    d = np.hypot(2.0 - -1.0, 0.0 - 1.0)
    assert abs(final - (1 + d / (2 * lam))) < 0.02, final
