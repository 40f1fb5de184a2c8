"""One derivative per point: forward and reverse mode agree at every spec row's points and
at its kinks.

For each differentiable spec row, with random weights ``u`` (per float output) and a random
direction ``v`` (per float input), the scalar ``g(x) = <u, f(x)>``:

- ``hd.jvp(g, x, v) = <u, J v>`` (forward mode: each primitive's Taylor rule of order 1)
  equals ``<hd.vjp(g, x, 1), v> = <J^T u, v>`` (reverse mode: its backward rule), at the
  row's sampled points and at its kinks (:meth:`Spec.sample_at_kinks`: elements exactly on
  ``kinks``, or the row's ``kink_args``: ties of a max, ...);
- at the kinks, the Taylor jet of order 2 along ``v``, ``d^2/dt^2 g(x + t v)``, equals the
  same from two nested reverse passes (``hd.grad`` in ``t``).

Both sides take the convention the function's docstring states (``abs'(0) = 0``, a tie of
``maximum2`` to ``x0``, ``clip``'s bounds inside); a rule that took another one fails here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from tests.harness import is_float, outputs_of

SPECS = [s for s in all_specs() if s.order >= 1]
IDS = spec_ids(SPECS)
AT_KINKS = [s for s in SPECS if s.sample_at_kinks() is not None]
AT_KINKS_IDS = spec_ids(AT_KINKS)


def _frozen(spec: Spec) -> bool:
    """Whether the row's inputs 3 and 4 are running statistics (updated in place, not read)."""
    return spec.fn is F.batch_normalization and spec.kwargs.get("batch_stat", True)


def _scalar(spec: Spec, xs: list[Any], rng: np.random.Generator) -> tuple[Any, list[int]]:
    """``g(*float inputs) = sum_o <u_o, f_o>`` (the others held), and the float inputs' indices."""
    moving = [i for i, x in enumerate(xs) if is_float(x) and not (_frozen(spec) and i in (3, 4))]
    y = spec.fn(*[hd.Variable.from_array(np.copy(x)) for x in xs], **spec.kwargs)
    us = [rng.standard_normal(o.shape) for o in outputs_of(y) if o.dtype.kind == "f"]

    def g(*args: Any) -> Any:
        full: list[Any] = [np.copy(x) for x in xs]
        for i, a in zip(moving, args, strict=True):
            full[i] = a
        ys = [o for o in outputs_of(spec.fn(*full, **spec.kwargs)) if o.dtype.kind == "f"]
        total: Any = None
        for o, u in zip(ys, us, strict=True):
            term = F.sum(o * u)
            total = term if total is None else total + term
        return total

    return g, moving


def _transpose_identity(spec: Spec, xs: list[Any], seed: int) -> None:
    rng = np.random.default_rng(seed)
    g, moving = _scalar(spec, xs, rng)
    xm = tuple(xs[i] for i in moving)
    vs = tuple(rng.standard_normal(x.shape) for x in xm)
    _, jv = hd.jvp(g, xm, vs)  # <u, J v>, forward mode
    _, jtu = hd.vjp(g, xm, np.ones(()))  # J^T u, reverse mode
    jtu = jtu if isinstance(jtu, tuple) else (jtu,)
    terms = [float(np.sum(a * v)) for a, v in zip(jtu, vs, strict=True)]
    scale = max(1.0, float(np.max(np.abs(terms), initial=0.0)), abs(float(jv)))
    np.testing.assert_allclose(float(jv), sum(terms), rtol=0, atol=1e-9 * scale, err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jvp_is_the_transposed_vjp_at_the_points(spec: Spec) -> None:
    _transpose_identity(spec, spec.sample(), seed=11)


@pytest.mark.parametrize("spec", AT_KINKS, ids=AT_KINKS_IDS)
def test_jvp_is_the_transposed_vjp_at_the_kinks(spec: Spec) -> None:
    xs = spec.sample_at_kinks()
    assert xs is not None
    _transpose_identity(spec, xs, seed=12)


@pytest.mark.parametrize("spec", AT_KINKS, ids=AT_KINKS_IDS)
def test_second_order_jet_is_nested_reverse_mode_at_the_kinks(spec: Spec) -> None:
    xs = spec.sample_at_kinks()
    assert xs is not None
    rng = np.random.default_rng(13)
    g, moving = _scalar(spec, xs, rng)
    xm = tuple(xs[i] for i in moving)
    vs = tuple(rng.standard_normal(x.shape) for x in xm)
    _, (y1, y2) = hd.jet(g, xm, tuple([v, np.zeros_like(v)] for v in vs))
    t = hd.Variable.from_array(np.zeros(()), need_grad=True)
    s = g(*[x + t * v for x, v in zip(xm, vs, strict=True)])
    (d1,) = hd.grad(s, t)
    want1 = float(d1.d)
    (d2,) = hd.grad(d1, t, allow_unused=True)
    want2 = 0.0 if d2 is None else float(d2.d)
    scale = max(1.0, abs(want1), abs(want2))
    np.testing.assert_allclose(
        [float(y1), float(y2)], [want1, want2], rtol=0, atol=1e-9 * scale, err_msg=spec.name
    )


def test_every_row_with_kinks_has_a_kink_sample_on_them() -> None:
    # the sampler's points are on the kinks: elements equal to a listed kink, or the row's own
    for spec in AT_KINKS:
        xs = spec.sample_at_kinks()
        assert xs is not None
        if spec.kink_args is None:
            drawn = [x for a, x in zip(spec.args, xs, strict=True) if not callable(a)]
            assert any(np.isin(x, spec.kinks).any() for x in drawn), spec.name
    names = {s.name for s in AT_KINKS}
    for name in ("abs", "relu", "leaky_relu", "elu", "clip_by_value", "hard_tanh", "minimum2"):
        assert name in names, name
    assert {"maximum2", "max", "min", "max_pooling"} <= names


# ---------------------------------------------------------------- the conventions, by hand
def _jacobians(f: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``J`` column by column from ``hd.jvp`` and row by row from ``hd.vjp``."""
    eye = np.eye(x.size)
    fwd = np.stack([np.ravel(hd.jvp(f, x, e.reshape(x.shape))[1]) for e in eye], axis=1)
    y = f(hd.Variable.from_array(x)).d
    rows = np.eye(y.size)
    rev = np.stack([np.ravel(hd.vjp(f, x, r.reshape(y.shape))[1]) for r in rows], axis=0)
    return fwd, rev


@pytest.mark.parametrize(
    ("name", "f", "x", "diagonal"),
    [
        ("abs", F.abs, [0.0, -2.0, 3.0], [0.0, -1.0, 1.0]),  # sign(x), 0 at 0
        ("relu", F.relu, [0.0, 1.0], [0.0, 1.0]),  # [x > 0]
        ("leaky_relu", lambda x: F.leaky_relu(x, 0.1), [0.0, 1.0], [0.1, 1.0]),  # 0: x <= 0
        ("elu", F.elu, [0.0], [1.0]),  # differentiable at 0 for alpha = 1: exp(0) = 1
        ("clip", lambda x: F.clip_by_value(x, 0.0, 1.0), [0.0, 1.0, 0.5, 2.0], [1, 1, 1, 0]),
        ("hard_tanh", F.hard_tanh, [-1.0, 1.0, 3.0], [1.0, 1.0, 0.0]),  # the bounds inside
        ("maximum_scalar", lambda x: F.maximum_scalar(x, 1.0), [1.0, 0.0], [1.0, 0.0]),
        ("minimum_scalar", lambda x: F.minimum_scalar(x, 1.0), [1.0, 2.0], [1.0, 0.0]),
    ],
)
def test_the_derivative_at_a_kink_is_the_stated_one_in_both_modes(
    name: str, f: Any, x: list[float], diagonal: list[float]
) -> None:
    fwd, rev = _jacobians(f, np.array(x))
    np.testing.assert_array_equal(fwd, np.diag(diagonal), err_msg=f"{name}: forward mode")
    np.testing.assert_array_equal(rev, np.diag(diagonal), err_msg=f"{name}: reverse mode")


def test_ties_of_maximum2_and_of_max_in_both_modes() -> None:
    # maximum2 at a tie: all to x0; max over a tie: split evenly
    fwd, rev = _jacobians(lambda x: F.maximum2(x[0:1], x[1:2]), np.array([1.0, 1.0]))
    np.testing.assert_array_equal(fwd, [[1.0, 0.0]])
    np.testing.assert_array_equal(rev, [[1.0, 0.0]])
    fwd, rev = _jacobians(F.max, np.array([2.0, 2.0, -1.0]))
    np.testing.assert_array_equal(fwd, [[0.5, 0.5, 0.0]])
    np.testing.assert_array_equal(rev, [[0.5, 0.5, 0.0]])


def test_laplacian_through_clip_at_its_bounds_is_one_number_by_every_method() -> None:
    # sum(c(x)^3), c = clip(x, 0, 1) with c' = 1 at the bounds and c'' = 0:
    # d^2/dx^2 c^3 = 6 c c'^2, so at (0, 1, 0.5): 0 + 6 + 3 = 9
    def f(x: Any) -> Any:
        return F.sum(F.clip_by_value(x, 0.0, 1.0) ** 3)

    x = np.array([0.0, 1.0, 0.5])
    for method in ("taylor", "nested"):
        assert float(hd.laplacian(f, x, method=method)) == pytest.approx(9.0, rel=1e-12), method
