"""A checkpoint refuses to recompute from a value a hodiff API changed after it computed.

The recomputation would run ``f`` on the new value while the outputs and the incoming
gradients hold the old one's: the gradient of neither. Every solver's ``update()``, a
setter write (``p.d = new``) and ``hd.load_parameters`` stamp the value's version
(``api.mark_written``), and a reverse pass raises, for a checkpoint, a checkpoint in a
checkpoint, one in ``hd.vmap`` and both, by ``.backward()``, ``hd.grad`` and a gradient
penalty. A raw write into the array (``p.d[...] = v``, ``np.copyto``) has no hook, in any
graph: ``.forward()`` again gives the gradient at the new values. State that a segment
writes itself (batch normalization's running statistics) is not a change: a segment called
twice before one reverse pass gives the gradient of the two calls, checked against the
same loss without checkpoints.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S

SOLVERS = ["Sgd", "Momentum", "Nesterov", "Adagrad", "RMSprop", "Adam", "AdamW"]


def _solver_step(kind: str) -> Callable[[hd.Variable], None]:
    def step(w: hd.Variable) -> None:
        solver = getattr(S, kind)(lr=0.1)
        solver.set_parameters({"W": w})
        w.g = np.ones(w.shape)
        solver.update()

    return step


def _set(w: hd.Variable) -> None:
    w.d = w.d + 0.1


def _write_all(w: hd.Variable) -> None:
    w.d[...] = w.d + 0.1


def _write_one(w: hd.Variable) -> None:
    w.d[0, 0] += 0.1


def _copyto(w: hd.Variable) -> None:
    np.copyto(w.d, w.d[::-1].copy())  # a permutation of the rows


#: raw writes into the array: numpy has no hook, no graph sees them
RAW: dict[str, Callable[[hd.Variable], None]] = {
    "p.d[...] = v": _write_all,
    "p.d[0, 0] += 0.1": _write_one,
    "np.copyto": _copyto,
}


def _load(w: hd.Variable) -> None:
    """``hd.load_parameters`` of other values into the parameter ``W`` (``w``, registered)."""
    assert hd.get_parameters()["W"] is w
    new = w.d + 0.1
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.npz")
        with hd.parameter_scope("other"), hd.context_scope(hd.Context(dtype="float64")):
            hd.get_parameter_or_create("W", initializer=new)
            hd.save_parameters(path)  # holds "W"
        hd.load_parameters(path)
    np.testing.assert_array_equal(w.d, new)


WRITES: dict[str, tuple[Callable[[hd.Variable], None], str]] = {
    **{
        k: (_solver_step(k), rf"parameter 'W' updated in place by {k}\.update\(\)") for k in SOLVERS
    },
    "p.d = new": (_set, r"was changed after .* computed with it \(\.d set\)"),
    "load_parameters": (_load, r"parameter 'W' written in place by load_parameters"),
}


def _layer(w: hd.Variable) -> Callable[[hd.Variable], hd.Variable]:
    return lambda a: F.tanh(F.affine(a, w))


def _rows(w: hd.Variable) -> Callable[[hd.Variable], hd.Variable]:
    return lambda b: F.tanh(F.sum(b * w, axis=1))  # one example (3,) -> (3,)


SEGMENTS: dict[str, Callable[[hd.Variable, hd.Variable], hd.Variable]] = {
    "no checkpoint": lambda w, x: _layer(w)(x),
    "checkpoint": lambda w, x: hd.checkpoint(_layer(w), x),
    "nested": lambda w, x: hd.checkpoint(lambda a: hd.checkpoint(_layer(w), a) * 2.0, x),
    "in vmap": lambda w, x: hd.vmap(lambda a: hd.checkpoint(_rows(w), a))(x),
    "nested in vmap": lambda w, x: hd.vmap(
        lambda a: hd.checkpoint(lambda c: hd.checkpoint(_rows(w), c), a)
    )(x),
}


def _data() -> tuple[hd.Variable, hd.Variable]:
    rng = np.random.default_rng(0)
    hd.clear_parameters()
    with hd.context_scope(hd.Context(dtype="float64")):
        w = hd.get_parameter_or_create("W", initializer=rng.standard_normal((3, 3)))
    x = hd.Variable.from_array(rng.standard_normal((4, 3)), need_grad=True)
    return w, x


@pytest.mark.parametrize("how", ["backward", "grad", "penalty"])
@pytest.mark.parametrize("segment", list(SEGMENTS))
@pytest.mark.parametrize("write", list(WRITES))
def test_a_change_after_the_forward_pass_raises(write: str, segment: str, how: str) -> None:
    change, why = WRITES[write]
    w, x = _data()
    loss = F.sum(SEGMENTS[segment](w, x) ** 2)
    if how == "penalty":
        (gx,) = hd.grad(loss, x)
        loss = F.sum(gx * gx)
    change(w)
    before = w.g.copy()
    run = (lambda: hd.grad(loss, [w, x], create_graph=False)) if how == "grad" else loss.backward
    with pytest.raises(RuntimeError, match=why):
        run()
    np.testing.assert_array_equal(w.g, before)  # nothing stored
    hd.clear_parameters()


@pytest.mark.parametrize("segment", list(SEGMENTS))
@pytest.mark.parametrize("write", list(RAW))
def test_after_a_raw_write_the_forward_pass_again_gives_the_gradient_at_the_new_values(
    write: str, segment: str
) -> None:
    # the documented remedy for a write no graph sees (checkpointed or not)
    w, x = _data()
    y = SEGMENTS[segment](w, x)
    loss = F.sum(y**2)
    old = w.d.copy()
    RAW[write](w)
    assert not np.array_equal(w.d, old)
    loss.forward()  # the graph computed again from the current values
    loss.backward()
    # d/dW sum(tanh(x W)^2) by hand for "checkpoint"; the others scale or sum by rows
    a = x.d @ w.d if "vmap" not in segment else x.d @ w.d.T
    t = np.tanh(a)
    k = 2.0 if segment == "nested" else 1.0
    gy = 2 * k * k * t * (1 - t * t)
    want = x.d.T @ gy if "vmap" not in segment else gy.T @ x.d
    np.testing.assert_allclose(w.g, want, rtol=1e-12)
    hd.clear_parameters()


def test_a_static_graph_fed_in_place_and_stepped_by_a_solver() -> None:
    # the training loop of a static graph: batch written into x.d, forward, backward,
    # update; a backward after update() without the forward raises (the solver's stamp)
    rng = np.random.default_rng(1)
    w = hd.Variable.from_array(rng.standard_normal((3, 2)), need_grad=True)
    solver = S.Sgd(lr=0.1)
    solver.set_parameters({"W": w})
    with hd.auto_forward(False):
        x = hd.Variable((4, 3))
        loss = F.sum(hd.checkpoint(_layer(w), x) ** 2)
    for _ in range(3):
        x.d[...] = rng.standard_normal((4, 3))
        loss.forward()
        w.g = 0.0
        loss.backward()
        t = np.tanh(x.d @ w.d)
        g = x.d.T @ (2 * t * (1 - t * t))
        np.testing.assert_allclose(w.g, g, rtol=1e-12)
        before = w.d.copy()
        solver.update()
        np.testing.assert_allclose(w.d, before - 0.1 * g, rtol=1e-12)
    with pytest.raises(
        RuntimeError, match=r"'W' updated in place by Sgd\.update\(\).*\.forward\(\)"
    ):
        loss.backward()


def test_running_statistics_a_segment_writes_are_not_a_change() -> None:
    import hodiff.parametric as PF

    rng = np.random.default_rng(2)
    real, fake = rng.standard_normal((6, 3)), rng.standard_normal((6, 3)) + 1.0

    def critic(h: hd.Variable) -> hd.Variable:
        with hd.parameter_scope("critic"):
            return F.tanh(PF.batch_normalization(PF.affine(h, 3), batch_stat=True))

    grads = []
    for ckpt in (False, True):
        hd.clear_parameters()
        hd.seed(0)
        block = (lambda h: hd.checkpoint(critic, h)) if ckpt else critic
        # two calls of the block (real, fake) update the running statistics twice before
        # the one reverse pass, as a GAN's critic step does
        loss = F.sum(block(hd.Variable.from_array(real)) ** 2) - F.sum(
            block(hd.Variable.from_array(fake))
        )
        loss.backward()
        params = hd.get_parameters()
        grads.append({k: p.g.copy() for k, p in params.items()})
    assert grads[0].keys() == grads[1].keys()
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-6, err_msg=k)
    hd.clear_parameters()
