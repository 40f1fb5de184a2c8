"""Each primitive declares its Taylor rule in its class body; the transform reads it.

The list of primitives left on the generic rule (nested transposed vjps: exact, slow) is
pinned: a new primitive that declares nothing shows up here rather than being silently
slow, and one that moves to a rule of its kind is taken off the list.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.function import REGISTRY, Function
from hodiff.grad_functions.arithmetic import mul_n
from hodiff.transforms import taylor

#: differentiable primitives without a rule of their kind: decompositions, normalisation,
#: fused losses, products and remainders (each exact through the generic rule)
GENERIC = {
    "Atan2",
    "BatchDet",
    "BatchInv",
    "BatchLogdet",
    "BatchNormalization",
    "Cholesky",
    "CumProd",
    "Eigh",
    "Fmod2",
    "LinearScan",
    "Mod2",
    "Pinv",
    "Pow2",
    "Prod",
    "SigmoidCrossEntropy",
    "SoftmaxCrossEntropy",
    "SoftmaxCrossEntropyGrad",
    "Solve",
    "SolveTriangular",
    "Svd",
}


def _hodiff_kinds() -> dict[str, str]:
    names = {cls.__name__ for cls in REGISTRY}
    return {n: k for n, k in taylor.rule_kinds().items() if n in names}


def test_the_primitives_on_the_generic_rule_are_exactly_these() -> None:
    kinds = _hodiff_kinds()
    assert {n for n, k in kinds.items() if k == "generic"} == GENERIC
    for name in ("Pad", "Cast", "Einsum", "MulN", "WriteBack", "GatherAdd", "IndexAdd"):
        assert kinds[name] != "generic", name
    for name in ("ScatterAlongAxis", "ScatterNdAdd", "ScatterByLabel", "EmbedWeightGrad"):
        assert kinds[name] == "linear", name  # the scatter-adds


def test_declared_kinds() -> None:
    kinds = _hodiff_kinds()
    expected = {
        "Pad": "linear",
        "Cast": "linear",
        "Where": "linear",
        "Einsum": "multilinear",
        "MulN": "multilinear",
        "Affine": "multilinear",
        "ConvolutionFilterGrad": "multilinear",
        "Abs": "elementwise",
        "MaximumScalar": "elementwise",
        "Tanh": "elementwise",
        "Sigmoid": "elementwise",
        "Maximum2": "composite",
        "Softmax": "composite",
        "Max": "own",
        "Div2": "own",
        "WriteBack": "own",
        "Floor": "constant",
        "Greater": "constant",
    }
    assert {n: kinds[n] for n in expected} == expected
    allowed = {*taylor.KINDS, "own", "generic"}
    assert set(kinds.values()) <= allowed


def test_every_fact_is_declared_in_a_class_body() -> None:
    # no `Cls.taylor = ...` (or linear_in, dydx, ...) assigned from outside a class
    facts = {"taylor", "linear_in", "linear_part", "piecewise_linear", "dydx", "composition"}
    facts |= {"jet_rule", "partials"}
    root = pathlib.Path(hd.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in facts:
                    raise AssertionError(f"{path}:{node.lineno}: {t.attr} set outside a class")


def test_taylor_looks_no_class_up_by_name() -> None:
    # no string constant of taylor.py names a primitive class (the old tables did)
    names = {cls.__name__ for cls in REGISTRY}
    tree = ast.parse(inspect.getsource(taylor))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert not (strings & names), strings & names
    assert not hasattr(taylor, "LINEAR")
    assert not hasattr(taylor, "_cls")


def test_a_primitive_that_declares_nothing_is_reported_generic() -> None:
    class Cube(Function):
        def forward_impl(self, inputs: Any, outputs: list[Any]) -> None:
            outputs[0] = inputs[0] ** 3

        def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
            if prop_down[0]:
                x = inputs[0].data
                inputs[0].store(outputs[0].grad * x * x * 3.0, accum[0])

    assert taylor.rule_kinds()["Cube"] == "generic"
    # and still exact: (x^3)'' along v = 6 x v^2
    x, v = np.array([0.5, -2.0]), np.array([1.0, 3.0])
    _, (y1, y2) = hd.jet(lambda a: Cube()(a), (x,), ([v, np.zeros(2)],))
    np.testing.assert_allclose(y1, 3 * x**2 * v, rtol=1e-13)
    np.testing.assert_allclose(y2, 6 * x * v**2, rtol=1e-13)


def _no_generic(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(jp: Any, f: Any, ins: Any, outs: Any) -> Any:
        raise AssertionError(f"{type(f).__name__} took the generic rule")

    monkeypatch.setattr(taylor, "_generic", refuse)


@pytest.mark.parametrize("constant_value", [0.0, 2.5])
def test_a_laplacian_through_pad_takes_the_linear_rule(
    monkeypatch: pytest.MonkeyPatch, constant_value: float
) -> None:
    rng = np.random.default_rng(0)
    d = 6
    w = rng.standard_normal((d + 2, 3))
    x = rng.standard_normal(d)

    def through_pad(v: Any) -> Any:
        y = F.pad(v, (1, 1), constant_value=constant_value)
        return F.sum(F.tanh(F.affine(F.reshape(y, (1, d + 2)), w)))

    def through_concatenate(v: Any) -> Any:
        c = np.full(1, constant_value)
        y = F.concatenate(c, v, c, axis=0)
        return F.sum(F.tanh(F.affine(F.reshape(y, (1, d + 2)), w)))

    want = float(hd.laplacian(through_pad, x, method="nested"))  # reverse mode
    assert float(hd.laplacian(through_concatenate, x)) == pytest.approx(want, rel=1e-12)
    _no_generic(monkeypatch)
    assert float(hd.laplacian(through_pad, x)) == pytest.approx(want, rel=1e-12)


def test_pad_coefficients_are_padded_with_zeros() -> None:
    # y = pad(x, c): y(t) = pad(x + t v, c), so y1 = pad(v, 0) and y2 = 0, whatever c
    x, v = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    y0, (y1, y2) = hd.jet(lambda a: F.pad(a, (2, 1), constant_value=7.0), (x,), ([v, np.zeros(2)],))
    np.testing.assert_array_equal(y0, [7.0, 7.0, 1.0, 2.0, 7.0])
    np.testing.assert_array_equal(y1, [0.0, 0.0, 3.0, -1.0, 0.0])
    np.testing.assert_array_equal(y2, np.zeros(5))


def test_jets_of_products_of_three_follow_leibniz(monkeypatch: pytest.MonkeyPatch) -> None:
    # y = a b c along (a + t va, b + t vb, c + t vc): y2 = 2 (va vb c + va b vc + a vb vc),
    # y3 = 6 va vb vc; mul_n and a three-operand einsum without the generic rule
    _no_generic(monkeypatch)
    rng = np.random.default_rng(1)
    a, b, c, va, vb, vc = (rng.standard_normal(4) for _ in range(6))
    zero = np.zeros(4)
    series = ([va, zero, zero], [vb, zero, zero], [vc, zero, zero])
    want = [
        va * b * c + a * vb * c + a * b * vc,
        2 * (va * vb * c + va * b * vc + a * vb * vc),
        6 * va * vb * vc,
    ]
    _, ys = hd.jet(lambda p, q, r: mul_n(p, q, r), (a, b, c), series)
    np.testing.assert_allclose(ys, want, rtol=1e-12)
    _, ys = hd.jet(lambda p, q, r: F.einsum("i,i,i->i", p, q, r), (a, b, c), series)
    np.testing.assert_allclose(ys, want, rtol=1e-12)


def test_a_jet_through_write_back_leaves_its_target_alone() -> None:
    from hodiff.functions.attention import write_back

    target = hd.Variable.from_array(np.zeros(3))
    x, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])
    _, (y1,) = hd.jet(lambda u: write_back(u * 2.0, target), (x,), ([v],))
    np.testing.assert_array_equal(y1, 2 * v)
    np.testing.assert_array_equal(target.d, 2 * x)  # the value, not a coefficient


def test_the_pad_benchmark_runs_and_its_laplacians_agree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import taylor_rules

    results = taylor_rules.main(["--dims", "4", "--repeats", "1", "--min-time", "0.001"])
    assert set(results) == {4}
    assert results[4]["pad"] > 0
    assert results[4]["concatenate"] > 0
    assert "pad/concatenate" in capsys.readouterr().out
