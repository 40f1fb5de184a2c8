"""gradcheck itself: it passes right rules and catches wrong ones at the order they are wrong."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.function import Slot


class WrongSin(hd.Function):
    """sin whose first-order rule has the wrong sign."""

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.sin(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:
            inputs[0].store(-outputs[0].grad * Cos()(inputs[0].data), accum[0])


class Cos(hd.Function):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.cos(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:
            inputs[0].store(-outputs[0].grad * Sin()(inputs[0].data), accum[0])


class Sin(hd.Function):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.sin(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * Cos()(inputs[0].data), accum[0])


class SinWrongSecond(hd.Function):
    """sin whose first-order rule is right but whose cos has a wrong rule (so order 2 is wrong)."""

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.sin(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * WrongCos()(inputs[0].data), accum[0])


class WrongCos(hd.Function):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.cos(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:  # should be -sin
            inputs[0].store(outputs[0].grad * Sin()(inputs[0].data), accum[0])


class ConstantInside(hd.Function):
    """y = x * exp(x), whose rule forgets the product rule (treats exp(x) as constant)."""

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = inputs[0] * np.exp(inputs[0])

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * F.exp(inputs[0].data), accum[0])


X = np.array([0.3, -1.1, 2.0])


def test_right_rules_pass_to_high_order() -> None:
    report = hd.gradcheck(lambda x: Sin()(x), X, order=4)
    assert report
    assert report.passed
    assert {r[1] for r in report.rows} == {1, 2, 3, 4}
    assert len(report.rows) == 4 * X.size


def test_wrong_first_order_rule_is_caught() -> None:
    with pytest.raises(hd.GradcheckError) as info:
        hd.gradcheck(lambda x: WrongSin()(x), X)
    text = str(info.value)
    for word in ("input", "order", "element", "analytic", "numeric", "error"):
        assert word in text


def test_wrong_second_order_rule_is_caught_only_at_order_two() -> None:
    assert hd.gradcheck(lambda x: SinWrongSecond()(x), X, order=1)
    report = hd.gradcheck(lambda x: SinWrongSecond()(x), X, order=2, raise_exception=False)
    assert not report
    assert {r[1] for r in report.failures()} == {2}
    with pytest.raises(hd.GradcheckError):
        hd.gradgradcheck(lambda x: SinWrongSecond()(x), X)


def test_a_rule_that_treats_part_of_f_as_constant_is_caught() -> None:
    report = hd.gradcheck(lambda x: ConstantInside()(x), X, raise_exception=False)
    assert not report


def test_several_inputs_integer_inputs_and_float32() -> None:
    def f(x: hd.Variable, idx: hd.Variable, w: hd.Variable) -> hd.Variable:
        assert idx.dtype.kind == "i"
        return F.exp(x * w) * w

    x = np.array([0.1, 0.2], dtype=np.float32)
    report = hd.gradcheck(f, (x, np.array([0, 1]), np.array([1.5, -0.5])), order=2)
    assert {r[0] for r in report.rows} == {0, 2}  # the integer input is passed through


def test_report_table_and_arguments() -> None:
    report = hd.gradcheck(lambda x: WrongSin()(x), X, raise_exception=False)
    assert "failed" in str(report)
    assert report.max_errors(1)[0] > 0.1
    with pytest.raises(ValueError, match="order"):
        hd.gradcheck(lambda x: x, X, order=0)
    with pytest.raises(TypeError, match="no float input"):
        hd.gradcheck(lambda i: i, np.array([1, 2]))
