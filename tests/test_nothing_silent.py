"""Nothing silently wrong: Taylor mode, checkpoints, the checker, saved graphs and a new
user's traps.

Each case gives the right number or a clear error naming the function, the argument and
what to do. Expected values come from closed forms, finite differences, a loop of plain
calls or numpy, never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


# ---------------------------------------------------------------- tangents and series
def test_jvp_refuses_a_complex_tangent_for_a_real_input() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"jvp: v is complex .*inputs is real"):
        hd.jvp(F.sin, x, np.array([1j, 1.0]))
    with pytest.raises(ValueError, match=r"jvp: v\[1\] is complex"):
        hd.jvp(lambda a, b: a * b, (x, x), (np.ones(2), np.array([0.0, 2j])))


def test_jet_refuses_a_complex_coefficient_for_a_real_primal() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"jet: series\[0\]\[1\] is complex"):
        hd.jet(F.sin, (x,), ([np.ones(2), np.array([1j, 0.0])],))


def test_jet_takes_variables_in_series() -> None:
    x = np.array([0.5, 1.0])
    v = np.array([1.0, -2.0])
    _y0, (y1, y2) = hd.jet(F.sin, (x,), ([hd.Variable.from_array(v), np.zeros(2)],))
    np.testing.assert_allclose(y1, np.cos(x) * v, rtol=1e-14)
    np.testing.assert_allclose(y2, -np.sin(x) * v * v, rtol=1e-14)


def test_jet_with_one_list_too_few_shows_the_nesting() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"series\[0\] must be a list.*\(\[v\],\)"):
        hd.jet(F.tanh, (x,), [np.ones(2)])


# ---------------------------------------------------------------- checkpoints and solvers
def _layer_checkpoint_loss(x: hd.Variable) -> hd.Variable:
    import hodiff.parametric as PF

    def block(a: hd.Variable) -> hd.Variable:
        with hd.parameter_scope("block"):
            return F.tanh(PF.affine(a, 3))

    return F.sum(hd.checkpoint(block, x) ** 2)


@pytest.mark.parametrize("kind", ["Sgd", "Adam"])
def test_a_solver_update_between_forward_and_backward_of_a_checkpoint_raises(kind) -> None:
    import hodiff.solvers as S

    hd.clear_parameters()
    hd.seed(0)
    x = hd.Variable.from_array(np.random.default_rng(0).standard_normal((4, 2)))
    loss = _layer_checkpoint_loss(x)
    params = hd.get_parameters()
    solver = getattr(S, kind)(lr=0.1)
    solver.set_parameters(params)
    solver.zero_grad()
    for p in params.values():
        p.g = np.ones(p.shape)
    solver.update()
    with pytest.raises(RuntimeError, match=rf"parameter 'block/affine/W' .*{kind}\.update\(\)"):
        loss.backward()
    # a gradient recorded through the checkpoint (a gradient penalty) refuses too
    xv = hd.Variable.from_array(x.d, need_grad=True)
    loss = _layer_checkpoint_loss(xv)
    (gx,) = hd.grad(loss, xv, create_graph=True)
    solver.update()
    with pytest.raises(RuntimeError, match=r"parameter 'block/affine/"):
        F.sum(gx * gx).backward()
    # the forward computed again after the update: the gradient of the new values
    solver.zero_grad()
    loss = _layer_checkpoint_loss(x)
    loss.backward()
    w, b = params["block/affine/W"].d, params["block/affine/b"].d
    h = np.tanh(x.d @ w + b)
    gw = x.d.T @ (2 * h * (1 - h * h))  # d sum(tanh(xW + b)^2) / dW, by hand
    np.testing.assert_allclose(params["block/affine/W"].g, gw, rtol=1e-5)  # float32 weights
    hd.clear_parameters()
