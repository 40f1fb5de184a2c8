"""hodiff.testing.check_function catches each broken property; fast gradcheck; strategies."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import Spec, check_function, labels
from hodiff.testing.specs import all_specs
from tests.harness import gpu

X = np.array([0.5, -1.5, 0.7])


class Square(hd.Function):
    """y = x^2, correct."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] ** 2

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * 2.0 * inputs[0].data, accum[0])


class WrongGrad(Square):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * 3.0 * inputs[0].data, accum[0])


class Detach(hd.Function):
    differentiable = False

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0].copy()


class DetachedGrad(Square):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * 2.0 * Detach()(inputs[0].data), accum[0])


class TwoPaths(Square):
    """The array path (plain backward) differs from the recorded path (hd.grad)."""

    def backward_impl(self, inputs, outputs, prop_down, accum):
        x = inputs[0].data
        if prop_down[0]:
            if isinstance(x, hd.Variable):
                inputs[0].store(outputs[0].grad * 2.0 * x, accum[0])
            else:
                inputs[0].store(outputs[0].grad * 2.0 * np.abs(x), accum[0])


class NoAccum(Square):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].grad = outputs[0].grad * 2.0 * inputs[0].data


class AlwaysAdd(Square):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            gx = outputs[0].grad * 2.0 * inputs[0].data
            g = inputs[0].grad
            inputs[0].grad = gx if g is None else g + gx


class Mul(hd.Function):
    def setup_impl(self, inputs):
        return [(inputs[0].shape, inputs[0].dtype)]

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] * inputs[1]

    def backward_impl(self, inputs, outputs, prop_down, accum):
        a, b = inputs
        if prop_down[0]:
            a.store(outputs[0].grad * b.data, accum[0])
        if prop_down[1]:
            b.store(outputs[0].grad * a.data, accum[1])


class MulIgnoresPropDown(Mul):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        a, b = inputs
        a.store(outputs[0].grad * b.data, accum[0])
        if prop_down[1]:
            b.store(outputs[0].grad * a.data, accum[1])


class Branchy(Square):
    def backward_impl(self, inputs, outputs, prop_down, accum):
        x = inputs[0].data
        sign = 2.0 if float(np.sum(x.d if isinstance(x, hd.Variable) else x)) < 0 else -2.0
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * sign * x, accum[0])


class Upcast(Square):
    """The engine casts a forward result to the declared dtype; a rule's gradient it cannot."""

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:  # BUG: a float64 constant promotes a float32 gradient
            gx = outputs[0].grad * (2.0 * inputs[0].data) * np.ones(1, np.float64)
            inputs[0].store(gx, accum[0])


class FreedInput(Square):
    need_inputs = False  # but backward reads x


class ExpUsesOutput(hd.Function):
    """y = exp(x); backward reads y but does not declare need_outputs."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = np.exp(inputs[0])

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * outputs[0].data, accum[0])


CASES = [
    (WrongGrad(), X, "finite differences, order 1"),
    (DetachedGrad(), X, "finite differences, order 2"),
    (TwoPaths(), X, "grad vs backward"),
    (NoAccum(), X, "accumulate vs overwrite"),
    (AlwaysAdd(), X, "accumulate vs overwrite"),
    (MulIgnoresPropDown(), (X, X[::-1].copy()), "prop_down=False untouched"),
    (Branchy(), X, "static vs dynamic"),
    (Upcast(), X, "float32 preserved"),
    (FreedInput(), X, "freed buffers"),
]


def test_a_correct_primitive_passes_every_property():
    report = check_function(Square(), X)
    assert report
    props = [r.property for r in report.rows]
    assert props == [
        "finite differences, order 1",
        "finite differences, order 2",
        "finite differences, order 3",
        "grad vs backward",
        "accumulate vs overwrite",
        "prop_down=False untouched",
        "static vs dynamic",
        "float32 preserved",
        "freed buffers",
    ]
    assert "1 node(s) of Square" in report["accumulate vs overwrite"].detail
    assert check_function(Mul(), (X, X + 1.0))


@pytest.mark.parametrize(("f", "inputs", "prop"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_each_broken_property_is_caught_and_named(f, inputs, prop):
    with pytest.raises(hd.GradcheckError) as info:
        check_function(f, inputs)
    message = str(info.value)
    assert f"check_function({type(f).__name__})" in message
    row = next(line for line in message.splitlines() if line.startswith(prop))
    assert "FAIL" in row
    report = check_function(f, inputs, raise_exception=False)
    assert not report
    assert not report[prop].ok
    assert report["finite differences, order 1"].ok or prop.startswith("finite")


def test_a_rule_reading_its_output_without_declaring_it():
    report = check_function(ExpUsesOutput(), X, raise_exception=False)
    assert [r.property for r in report.failures()] == ["freed buffers"]
    assert "need_outputs=False" in report["freed buffers"].detail


def test_a_callable_with_a_broken_primitive_inside():
    report = check_function(
        lambda x, w: F.tanh(NoAccum()(x) * w), (X, X + 2.0), raise_exception=False
    )
    assert not report["accumulate vs overwrite"].ok
    assert "node NoAccum" in report["accumulate vs overwrite"].detail
    # hodiff's own functions only: nothing custom to call backward_impl on
    report = check_function(lambda x, w: F.tanh(x * w), (X, X + 2.0))
    assert "no custom primitive" in report["prop_down=False untouched"].detail


def test_labels_multiple_outputs_and_order():
    t = np.array([[0], [2]])
    x = np.array([[0.1, -0.3, 0.5], [1.0, 0.2, -0.4]])
    report = check_function(lambda x, t: F.softmax_cross_entropy(x, t), (x, t), order=2)
    assert [r.property for r in report.rows][:2] == [
        "finite differences, order 1",
        "finite differences, order 2",
    ]
    assert check_function(lambda x: (F.sin(x), Square()(x) * 2.0), X, order=2)


@pytest.mark.parametrize("name", ["tanh", "affine", "sum", "batch_normalization"])
def test_hodiffs_own_functions_pass(name):
    spec = next(s for s in all_specs() if s.fn.__name__ == name)
    check_function(
        lambda *xs: spec.fn(*xs, **spec.kwargs),
        tuple(spec.sample()),
        order=min(2, spec.order),
        atol=spec.atol,
        rtol=spec.rtol,
    )


def test_argument_errors():
    with pytest.raises(TypeError, match="no float input"):
        check_function(lambda t: t * 2, np.array([1, 2]))
    with pytest.raises(ValueError, match="order must be"):
        check_function(Square(), X, order=0)
    with pytest.raises(TypeError, match="must be a Function instance or a callable"):
        check_function(3, X)


# ---------------------------------------------------------------- fast gradcheck
class Counting:
    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, *xs):
        self.calls += 1
        return self.f(*xs)


def test_fast_gradcheck_projects_and_falls_back():
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    slow, fast = Counting(lambda x: F.tanh(x) * x), Counting(lambda x: F.tanh(x) * x)
    full = hd.gradcheck(slow, x, order=2)
    quick = hd.gradcheck(fast, x, order=2, fast=True)
    assert quick
    assert [(r[0], r[1]) for r in quick.rows] == [(-1, 1), (-1, 2)]
    assert len(full.rows) == 24
    assert fast.calls <= slow.calls  # both batch their points (hd.vmap); fast has 6 in all
    wrong = Counting(lambda x: WrongGrad()(x))
    with pytest.raises(hd.GradcheckError, match=r"3 of 3 elements failed"):
        hd.gradcheck(wrong, X, fast=True)  # the full table after the projection failed
    report = hd.gradcheck(lambda x: DetachedGrad()(x), X, order=2, fast=True, raise_exception=False)
    assert not report
    assert {r[1] for r in report.failures()} == {2}
    assert all(r[0] == 0 for r in report.rows)  # the full report, element by element


# ---------------------------------------------------------------- strategies
def test_strategies_draw_from_the_declared_domain():
    pytest.importorskip("hypothesis")
    from hypothesis import given, settings

    from hodiff.testing.strategies import arrays, spec_inputs

    spec = Spec(
        F.softmax_cross_entropy,
        ((3, 4), labels((3, 1), 4)),
        domain=(-3.0, 3.0),
        kinks=(0.0,),
        gap=0.25,
    )
    seen = []

    @settings(max_examples=8, deadline=None, database=None)
    @given(spec_inputs(spec))
    def run(xs):
        x, t = xs
        assert x.shape == (3, 4)
        assert x.dtype == np.float64
        assert np.all(np.abs(x) >= 0.25)
        assert np.all(np.abs(x) <= 3.0 + 0.375)
        assert t.shape == (3, 1)
        assert t.dtype.kind == "i"
        assert t.min() >= 0
        assert t.max() < 4
        seen.append(x)
        assert hd.gradcheck(lambda x: spec.fn(x, t), x, order=1, fast=True)

    run()
    assert len(seen) >= 3

    @settings(max_examples=5, deadline=None, database=None)
    @given(arrays((2,), domain=(0.5, 2.0), dtype=np.float32))
    def run32(x):
        assert x.dtype == np.float32
        assert np.all((x >= 0.5) & (x <= 2.0))

    run32()


def test_strategies_import_without_hypothesis(monkeypatch):
    for mod in ("hypothesis", "hypothesis.strategies", "hypothesis.extra.numpy"):
        monkeypatch.setitem(sys.modules, mod, None)
    from hodiff.testing import strategies

    with pytest.raises(ImportError, match="pip install hypothesis"):
        strategies.arrays((2,))


def test_check_function_on_cupy_inputs():
    cp = gpu()
    assert check_function(Square(), cp.asarray(X))
    report = check_function(NoAccum(), cp.asarray(X), raise_exception=False)
    assert not report["accumulate vs overwrite"].ok
    assert hd.gradcheck(lambda x: F.tanh(x) * x, cp.asarray(X), order=2, fast=True)


class SinCos(hd.Function):
    n_outputs = 2

    def setup_impl(self, inputs):
        return [(inputs[0].shape, inputs[0].dtype)] * 2

    def forward_impl(self, inputs, outputs):
        outputs[0], outputs[1] = np.sin(inputs[0]), np.cos(inputs[0])

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            x = inputs[0].data
            gx = outputs[0].grad * F.cos(x) - outputs[1].grad * F.sin(x)
            inputs[0].store(gx, accum[0])


def test_multi_output_primitive_and_a_dropped_output():
    report = check_function(SinCos(), X)
    assert "1 node(s) of SinCos" in report["accumulate vs overwrite"].detail
    report = check_function(lambda x: SinCos()(x)[0] * 2.0, X)  # cos(x) is dropped
    assert "1 node(s) of SinCos" in report["freed buffers"].detail
