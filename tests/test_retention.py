"""What a function cannot check by itself, checked over every row of the spec table.

* Retention (``need_inputs`` / ``need_outputs``): the graph is run forward with
  ``clear_buffer=True``, which frees every value no backward rule declared it
  needs, then differentiated at every order (plain ``.backward()`` and
  ``hd.grad``); the results must equal those of a graph that freed nothing. A
  rule that reads a value it did not declare fails here: with a RuntimeError
  naming the value, or a wrong number.
* The plain reverse pass against the recorded one at order 2: the plain
  ``.backward()`` of a recorded gradient graph (made of grad functions) must
  equal ``hd.grad`` of it.

Each function is wrapped so that its inputs and outputs are intermediate
values (an ``identity`` before each float input, after each output): leaves
and roots are never freed, so without the wrapping nothing would be tested.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from tests.harness import is_float, outputs_of, weights

SPECS = all_specs()
IDS = spec_ids(SPECS)
DIFF = [(s, i) for s, i in zip(SPECS, IDS, strict=True) if s.order >= 1]
ORDER2 = [(s, i) for s, i in DIFF if s.order >= 2]


def wrapped(spec: Spec, ws: Sequence[np.ndarray], power: int) -> Callable[..., hd.Variable]:
    """``x -> sum_k sum(w_k * identity(y_k)**power)`` with ``y = fn(identity(x))``."""

    def f(*xs: hd.Variable) -> hd.Variable:
        ins = [F.identity(x) if x.dtype.kind == "f" else x for x in xs]
        try:
            ys = spec.fn(*ins, **spec.kwargs)
        except ValueError as e:  # running statistics, updated in place, must be leaves
            if "must be a leaf" not in str(e):
                raise
            ys = spec.fn(*xs, **spec.kwargs)
        total = None
        for o, w in zip(outputs_of(ys), ws, strict=True):
            o = F.identity(o)
            term = F.sum((o**power if power != 1 else o) * w)
            total = term if total is None else total + term
        assert total is not None
        return total

    return f


def leaves(spec: Spec, xs: Sequence[np.ndarray]) -> list[hd.Variable]:
    return [hd.Variable.from_array(a, need_grad=is_float(a)) for a in xs]


def derivatives(
    y: hd.Variable, wanted: list[hd.Variable], order: int, dirs: list[list[np.ndarray]]
) -> list[list[np.ndarray]]:
    """Values of ``grad S_k`` for k = 1..order, ``S_(k+1) = sum <dirs[k], grad S_k>``."""
    out = []
    s = y
    for k in range(order):
        gs = hd.grad(s, wanted, allow_unused=True)
        out.append([g.d.copy() for g in gs])
        if k + 1 < order:
            s = F.sum(gs[0] * dirs[k][0])
            for g, d in zip(gs[1:], dirs[k][1:], strict=True):
                s = s + F.sum(g * d)
    return out


@pytest.mark.parametrize("spec", [s for s, _ in DIFF], ids=[i for _, i in DIFF])
def test_freed_buffers_every_order(spec: Spec) -> None:
    xs = spec.sample()
    power = 3 if spec.linear and spec.order >= 2 else 1
    f = wrapped(spec, weights(spec), power)
    rng = np.random.default_rng(4)
    floats = [a for a in xs if is_float(a)]
    dirs = [[rng.standard_normal(a.shape) for a in floats] for _ in range(spec.order)]

    # one forward after the build on both sides: a seeded random function (dropout) draws
    # the same mask in both graphs
    vs = leaves(spec, xs)
    wanted = [v for v in vs if v.need_grad]
    y = f(*vs)
    y.forward()
    expected = derivatives(y, wanted, spec.order, dirs)  # nothing freed

    vs = leaves(spec, xs)
    wanted = [v for v in vs if v.need_grad]
    y = f(*vs)
    y.forward(clear_buffer=True)  # frees what no backward rule declared it needs
    y.backward()
    for v, e in zip(wanted, expected[0], strict=True):
        np.testing.assert_allclose(v.g, e, rtol=1e-12, atol=1e-12, err_msg=f"{spec.name} plain")
    got = derivatives(y, wanted, spec.order, dirs)
    for k, (gk, ek) in enumerate(zip(got, expected, strict=True)):
        for g, e in zip(gk, ek, strict=True):
            np.testing.assert_allclose(
                g, e, rtol=1e-12, atol=1e-12, err_msg=f"{spec.name} order {k + 1}"
            )


@pytest.mark.parametrize("spec", [s for s, _ in ORDER2], ids=[i for _, i in ORDER2])
def test_plain_backward_equals_recorded_at_order_2(spec: Spec) -> None:
    xs = spec.sample()
    f = wrapped(spec, weights(spec), 3 if spec.linear else 1)
    vs = leaves(spec, xs)
    wanted = [v for v in vs if v.need_grad]
    gs = hd.grad(f(*vs), wanted, allow_unused=True)
    rng = np.random.default_rng(5)
    s = F.sum(gs[0] * rng.standard_normal(gs[0].shape))
    for g in gs[1:]:
        s = s + F.sum(g * rng.standard_normal(g.shape))
    recorded = hd.grad(s, wanted, allow_unused=True)
    if s.parent is None:
        pytest.skip("the gradient is constant")  # pragma: no cover - every row is curved
    error = None
    try:
        s.backward()  # the plain reverse pass over the gradient graph (grad functions)
    except RuntimeError as e:
        error = str(e)
    if error is not None:
        # a first derivative that leads to no leaf (x ** 0: the constant 0): .backward()
        # refuses a pass that reaches no need_grad leaf, and the recorded result is zero
        assert "depends on no leaf with need_grad=True" in error
        assert all(r is None or not np.any(r.d) for r in recorded)
        return
    for v, r in zip(wanted, recorded, strict=True):
        np.testing.assert_allclose(v.g, r.d, rtol=1e-12, atol=1e-12)
