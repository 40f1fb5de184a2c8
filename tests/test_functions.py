"""One generic test over the spec table (hodiff/testing/specs): every function, every check.

For each spec: forward against its numpy reference; float32 stays float32;
static graph == dynamic; derivatives of orders 1..spec.order against central
finite differences in float64 (gradcheck); hd.grad == plain .backward();
backward_impl with accum == previous + overwrite; prop_down=False leaves a
gradient untouched. Meta-tests make a function without a spec fail.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.function import REGISTRY
from hodiff.testing import all_specs, complex_specs, spec_ids
from hodiff.testing.spec import Spec
from tests.harness import call, is_float, outputs_of, run_backward_impl, scalarized, weights

SPECS = all_specs()


IDS = spec_ids(SPECS)
DIFF = [s for s in SPECS if s.order >= 1]
DIFF_IDS = [i for s, i in zip(SPECS, IDS, strict=True) if s.order >= 1]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_forward_matches_reference(spec: Spec) -> None:
    xs = spec.sample()
    _, y = call(spec, xs)
    if spec.ref is None:
        pytest.skip("forward checked in a dedicated test")
    refs = spec.ref(*xs, **spec.kwargs)
    refs = list(refs) if isinstance(refs, tuple | list) else [refs]
    ys = outputs_of(y)
    assert len(ys) == len(refs)
    for o, r in zip(ys, refs, strict=True):
        assert o.shape == np.shape(r)
        np.testing.assert_allclose(o.d, r, atol=spec.ref_atol, rtol=spec.ref_rtol)


@pytest.mark.parametrize(
    "spec",
    [s for s in SPECS if s.float32],
    ids=[i for s, i in zip(SPECS, IDS, strict=True) if s.float32],
)
def test_float32_in_float32_out(spec: Spec) -> None:
    xs = [x.astype(np.float32) if is_float(x) else x for x in spec.sample()]
    vs, y = call(spec, xs, need_grad=spec.order > 0)
    outs = outputs_of(y)
    for o in outs:
        if o.dtype.kind == "f":
            assert o.dtype == np.float32, f"{spec.name} gave {o.dtype} for float32 inputs"
    wanted = [v for v in vs if v.need_grad]
    floats = [o for o in outs if o.dtype.kind == "f"]
    if not wanted or not floats:
        return
    total = F.sum(floats[0])
    for o in floats[1:]:
        total = total + F.sum(o)
    # the gradients too, recorded (hd.grad) and plain (backward): float32 in, float32 out
    for v, g in zip(wanted, hd.grad(total, wanted, allow_unused=True), strict=True):
        if v.dtype == np.float32:
            assert g.dtype == np.float32, f"{spec.name}: hd.grad gave {g.dtype} for float32"
    total.backward()
    for v in wanted:
        if v.dtype == np.float32:
            assert v.g.dtype == np.float32, f"{spec.name}: backward gave {v.g.dtype} for float32"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_static_graph_equals_dynamic(spec: Spec) -> None:
    xs = spec.sample()
    _, y_dyn = call(spec, xs)
    with hd.auto_forward(False):
        vs = [hd.Variable(x.shape, dtype=x.dtype) for x in xs]
        y = spec.fn(*vs, **spec.kwargs)
        for o, od in zip(outputs_of(y), outputs_of(y_dyn), strict=True):
            assert o.shape == od.shape
            assert o.dtype == od.dtype
        for v, x in zip(vs, xs, strict=True):
            v.d = x
        for o in outputs_of(y):
            o.forward()
    for o, od in zip(outputs_of(y), outputs_of(y_dyn), strict=True):
        np.testing.assert_allclose(o.d, od.d, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("spec", DIFF, ids=DIFF_IDS)
def test_derivatives_against_finite_differences(spec: Spec) -> None:
    xs = spec.sample()
    ws = weights(spec)
    hd.gradcheck(scalarized(spec, ws), xs, order=1, atol=spec.atol, rtol=spec.rtol)
    if spec.order >= 2:
        f = scalarized(spec, ws, power=3 if spec.linear else 1)
        hd.gradcheck(f, xs, order=spec.order, atol=spec.atol, rtol=spec.rtol)


@pytest.mark.parametrize("spec", DIFF, ids=DIFF_IDS)
def test_grad_graph_equals_plain_backward(spec: Spec) -> None:
    xs = spec.sample()
    vs, y = call(spec, xs, need_grad=True)
    ys = outputs_of(y)
    rng = np.random.default_rng(2)
    us = [rng.standard_normal(o.shape) for o in ys]
    wanted = [v for v in vs if v.need_grad]
    graph = hd.grad(ys, wanted, grad_outputs=us, allow_unused=True)
    root = ys[0] if len(ys) == 1 else scalarized(spec, us)(*vs)
    root.backward(us[0] if len(ys) == 1 else None)
    for v, g in zip(wanted, graph, strict=True):
        np.testing.assert_allclose(g.d, v.g, rtol=1e-12, atol=1e-12)
    # a second backward accumulates
    prev = [v.g.copy() for v in wanted]
    root.backward(us[0] if len(ys) == 1 else None)
    for v, p in zip(wanted, prev, strict=True):
        np.testing.assert_allclose(v.g, 2 * p, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", DIFF, ids=DIFF_IDS)
def test_accum_adds_and_prop_down_false_touches_nothing(spec: Spec) -> None:
    xs = spec.sample()
    _, y = call(spec, xs, need_grad=True)
    node = outputs_of(y)[0].parent
    assert node is not None
    rng = np.random.default_rng(3)
    # one gradient per output of this node (a function may return outputs of several nodes)
    shapes = [o.shape for o in outputs_of(y) if o.parent is node]
    gys = [rng.standard_normal(s) for s in shapes]
    prop = [v.need_grad for v in node.inputs]
    none = [None] * len(prop)
    over = run_backward_impl(node, gys, prop, [False] * len(prop), none)
    prev = [
        rng.standard_normal(v.shape) if p else None for v, p in zip(node.inputs, prop, strict=True)
    ]
    acc = run_backward_impl(node, gys, prop, prop, prev)
    for p, o, a in zip(prev, over, acc, strict=True):
        if p is not None and o is not None:
            np.testing.assert_allclose(a, p + o, rtol=1e-12, atol=1e-12)
    # overwrite wipes whatever was there (no zero-fill-then-add)
    nan = [np.full(v.shape, np.nan) if p else None for v, p in zip(node.inputs, prop, strict=True)]
    fresh = run_backward_impl(node, gys, prop, [False] * len(prop), nan)
    for f, o in zip(fresh, over, strict=True):
        if o is not None:
            np.testing.assert_allclose(f, o, rtol=1e-12, atol=1e-12)
    sentinel = [np.full(v.shape, 7.0) for v in node.inputs]
    untouched = run_backward_impl(node, gys, [False] * len(prop), [False] * len(prop), sentinel)
    for s, u in zip(sentinel, untouched, strict=True):
        assert u is s
        assert np.all(s == 7.0)


@pytest.mark.parametrize(
    "spec",
    [s for s in SPECS if s.order == 0],
    ids=[i for s, i in zip(SPECS, IDS, strict=True) if s.order == 0],
)
def test_non_differentiable_cuts_the_graph(spec: Spec) -> None:
    _, y = call(spec, spec.sample(), need_grad=True)
    for o in outputs_of(y):
        assert not o.need_grad
        assert o.parent is not None
        assert not o.parent.differentiable


# ---------------------------------------------------------------- meta-tests
def test_every_public_function_has_a_spec() -> None:
    covered = {s.fn.__name__ for s in SPECS + complex_specs()}
    missing = sorted(set(F.__all__) - covered)
    assert not missing, f"functions without a spec: {missing}"


def test_every_registered_primitive_has_a_spec() -> None:
    top = set()
    for s in SPECS + complex_specs():  # a primitive of complex values only: a complex row
        _, y = call(s, s.sample())
        top |= {type(o.parent) for o in outputs_of(y) if o.parent is not None}
    missing = sorted(c.__name__ for c in REGISTRY if c not in top)
    assert not missing, f"primitives no spec calls directly: {missing}"


def test_every_differentiable_primitive_has_a_backward() -> None:
    missing = [
        c.__name__
        for c in REGISTRY
        if c.differentiable and c.backward_impl is hd.Function.backward_impl
    ]
    assert not missing, f"differentiable primitives without backward_impl: {missing}"


def test_backward_rules_use_no_array_module_directly() -> None:
    """A rule made of array calls would stop at first order: rules use hodiff functions."""
    import inspect
    import re

    offenders = []
    for c in REGISTRY:
        if c.backward_impl is hd.Function.backward_impl:
            continue
        if getattr(sys.modules.get(c.__module__), c.__name__, None) is not c:
            continue  # a class a docstring's example made (its module's name, not its source)
        code = "\n".join(
            line.split("#")[0] for line in inspect.getsource(c.backward_impl).splitlines()
        )
        if re.search(r"\bxp\.|\barray_module\(|\bcupy\b|\bnp\.(?!argsort|arange|prod|dtype)", code):
            offenders.append(c.__name__)
    assert not offenders, f"backward_impl calling numpy/cupy directly: {offenders}"


@pytest.mark.parametrize("spec", DIFF, ids=DIFF_IDS)
def test_gradient_graph_built_in_static_mode_matches_dynamic(spec: Spec) -> None:
    """Rules use shapes, never values: a gradient graph can be built before any value exists."""
    xs = spec.sample()
    ws = weights(spec)
    f = scalarized(spec, ws)
    vs = [hd.Variable.from_array(x, need_grad=is_float(x)) for x in xs]
    wanted = [v for v in vs if v.need_grad]
    dynamic = hd.grad(f(*vs), wanted, allow_unused=True)
    with hd.auto_forward(False):
        svs = [hd.Variable(x.shape, need_grad=is_float(x), dtype=x.dtype) for x in xs]
        grads = hd.grad(f(*svs), [v for v in svs if v.need_grad], allow_unused=True)
    for v, x in zip(svs, xs, strict=True):
        v.d = x
    for g, d in zip(grads, dynamic, strict=True):
        g.forward()
        np.testing.assert_allclose(g.d, d.d, rtol=1e-12, atol=1e-12)
