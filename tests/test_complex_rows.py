"""The spec table's complex rows through the checks the real rows get.

Driven by :func:`hodiff.testing.complex_specs` (inputs ``x + iy``), as tests/test_taylor.py,
tests/test_kinks.py and tests/test_functions.py run the real rows:

* Taylor mode against nested reverse mode: the jet along ``z(t) = z + t v`` (``v`` complex
  for a complex input, real for a real one), projected by a fixed real functional
  ``L(y) = sum(w1 Re y + w2 Im y)``, equals ``d^k/dt^k L(f(z + t v))`` from ``k`` nested
  ``hd.grad`` in the real ``t`` (the backward rules only);
* forward mode is the transpose of reverse mode: ``hd.jvp(g, z, v) = Re sum(hd.vjp(g, z,
  1) v)`` for ``g = L o f`` (the convention's pairing: the gradient is ``dg/dx - i dg/dy``);
* the recorded gradient graph (``hd.grad``) equals the plain ``.backward()``, and a second
  backward accumulates;
* a rule called with ``accum`` adds to what is in the slot, without it overwrites it, and
  with ``prop_down`` False it touches nothing (complex slots and cotangents).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import complex_specs, spec_ids
from hodiff.testing.spec import Spec
from hodiff.transforms import taylor
from tests.harness import outputs_of, run_backward_impl

SPECS = [s for s in complex_specs() if s.order >= 1]
IDS = spec_ids(SPECS)


def _moves(a: Any) -> bool:
    """Whether an input is differentiated: float or complex (not labels, masks)."""
    return np.dtype(a.dtype).kind in "fc"


def _draw(rng: np.random.Generator, like: Any) -> np.ndarray:
    """A random array of ``like``'s shape: complex for a complex ``like``, else real."""
    shape = tuple(like.shape)
    a = rng.standard_normal(shape)
    if np.dtype(like.dtype).kind == "c":
        return a + 1j * rng.standard_normal(shape)
    return a


def _weights(spec: Spec, xs: list[Any], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    y = spec.fn(*[hd.Variable.from_array(x) for x in xs], **spec.kwargs)
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal(o.shape), rng.standard_normal(o.shape))
        for o in outputs_of(y)
        if _moves(o)
    ]


def _functional(ys: Any, ws: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    """``L(y) = sum_o sum(w1 Re y_o + w2 Im y_o)`` over the float/complex outputs."""
    total: Any = None
    for o, (w1, w2) in zip([o for o in outputs_of(ys) if _moves(o)], ws, strict=True):
        term = F.sum(F.real(o) * w1 + F.imag(o) * w2)
        total = term if total is None else total + term
    return total


def _project(c: Any, w: tuple[np.ndarray, np.ndarray]) -> float:
    c = np.asarray(c.d if isinstance(c, hd.Variable) else c)[0]
    return float(np.sum(c.real * w[0] + (c.imag if np.iscomplexobj(c) else 0.0) * w[1]))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jet_equals_nested_derivatives(spec: Spec) -> None:
    order = min(spec.order, 3)
    xs = spec.sample()
    rng = np.random.default_rng(1)
    vs = [_draw(rng, x) if _moves(x) else None for x in xs]
    ws = _weights(spec, xs, 2)
    # nested reverse mode in the real t
    t = hd.Variable.from_array(np.zeros(()), need_grad=True)
    args = [x if v is None else x + t * v for x, v in zip(xs, vs, strict=True)]
    cur = _functional(spec.fn(*args, **spec.kwargs), ws)
    want = []
    for _ in range(order):
        (cur,) = hd.grad(cur, t, allow_unused=True)
        if cur is None:
            want += [0.0] * (order - len(want))
            break
        want.append(float(cur.d))
    # Taylor mode along the same line
    prim = [hd.Variable.from_array(x, need_grad=_moves(x)) for x in xs]
    series = [None if v is None else [v[None]] + [None] * (order - 1) for v in vs]
    y, outs = taylor.run_jet(lambda *a: spec.fn(*a, **spec.kwargs), prim, series, order)
    got = [0.0] * order
    moving = [s for o, s in zip(outputs_of(y), outs, strict=True) if _moves(o)]
    for s, w in zip(moving, ws, strict=True):
        for k in range(order):
            if s[k] is not None:
                got[k] += _project(s[k], w)
    scale = max(1.0, *[abs(a) for a in want])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9 * scale, err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jvp_is_the_transposed_vjp(spec: Spec) -> None:
    xs = spec.sample()
    rng = np.random.default_rng(11)
    moving = [i for i, x in enumerate(xs) if _moves(x)]
    ws = _weights(spec, xs, 12)

    def g(*args: Any) -> Any:
        full: list[Any] = [np.copy(x) for x in xs]
        for i, a in zip(moving, args, strict=True):
            full[i] = a
        return _functional(spec.fn(*full, **spec.kwargs), ws)

    xm = tuple(xs[i] for i in moving)
    vs = tuple(_draw(rng, x) for x in xm)
    _, jv = hd.jvp(g, xm, vs)
    _, gs = hd.vjp(g, xm, np.ones(()))
    gs = gs if isinstance(gs, tuple) else (gs,)
    for a, x in zip(gs, xm, strict=True):
        assert a.dtype == x.dtype, spec.name  # a real input's gradient is real
    terms = [float(np.sum(a * v).real) for a, v in zip(gs, vs, strict=True)]
    scale = max(1.0, float(np.max(np.abs(terms), initial=0.0)), abs(float(jv)))
    np.testing.assert_allclose(float(jv), sum(terms), rtol=0, atol=1e-9 * scale, err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_grad_graph_equals_plain_backward(spec: Spec) -> None:
    xs = spec.sample()
    vs = [hd.Variable.from_array(x, need_grad=_moves(x)) for x in xs]
    ys = [o for o in outputs_of(spec.fn(*vs, **spec.kwargs))]
    rng = np.random.default_rng(2)
    us = [_draw(rng, o) for o in ys]
    wanted = [v for v in vs if v.need_grad]
    graph = hd.grad(ys, wanted, grad_outputs=us, allow_unused=True)
    ws = [(u.real, -u.imag if np.iscomplexobj(u) else np.zeros(u.shape)) for u in us]
    # L(y) = sum Re(u y): its gradient is the vjp of u (the convention's pairing)
    root = ys[0] if len(ys) == 1 else _functional(spec.fn(*vs, **spec.kwargs), ws)
    root.backward(us[0] if len(ys) == 1 else None)
    for v, gv in zip(wanted, graph, strict=True):
        assert v.g.dtype == v.dtype, spec.name
        np.testing.assert_allclose(gv.d, v.g, rtol=1e-12, atol=1e-12, err_msg=spec.name)
    prev = [v.g.copy() for v in wanted]
    root.backward(us[0] if len(ys) == 1 else None)  # a second backward accumulates
    for v, p in zip(wanted, prev, strict=True):
        np.testing.assert_allclose(v.g, 2 * p, rtol=1e-12, atol=1e-12, err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@pytest.mark.parametrize("recorded", [False, True], ids=["plain", "recorded"])
def test_accum_adds_and_prop_down_false_touches_nothing(spec: Spec, recorded: bool) -> None:
    xs = spec.sample()
    vs = [hd.Variable.from_array(x, need_grad=_moves(x)) for x in xs]
    ys = outputs_of(spec.fn(*vs, **spec.kwargs))
    node = ys[0].parent
    assert node is not None
    rng = np.random.default_rng(3)
    gys = [_draw(rng, o) for o in ys if o.parent is node]
    prop = [v.need_grad for v in node.inputs]

    def run(accum: list[bool], prev: list[Any], down: list[bool] = prop) -> list[Any]:
        out = run_backward_impl(node, gys, down, accum, prev, recorded=recorded)
        return [o.d if isinstance(o, hd.Variable) else o for o in out]

    over = run([False] * len(prop), [None] * len(prop))
    prev = [_draw(rng, v) if p else None for v, p in zip(node.inputs, prop, strict=True)]
    acc = run(prop, prev)
    for p, o, a in zip(prev, over, acc, strict=True):
        if p is not None and o is not None:
            np.testing.assert_allclose(a, p + o, rtol=1e-12, atol=1e-12, err_msg=spec.name)
    nan = [
        np.full(v.shape, np.nan, dtype=v.dtype) if p else None
        for v, p in zip(node.inputs, prop, strict=True)
    ]
    fresh = run([False] * len(prop), nan)
    for f, o in zip(fresh, over, strict=True):
        if o is not None:
            np.testing.assert_allclose(f, o, rtol=1e-12, atol=1e-12, err_msg=spec.name)
    if not recorded:
        sentinel = [np.full(v.shape, 7.0, dtype=v.dtype) for v in node.inputs]
        untouched = run_backward_impl(node, gys, [False] * len(prop), [False] * len(prop), sentinel)
        for s, u in zip(sentinel, untouched, strict=True):
            assert u is s
            assert np.all(s == 7.0)
