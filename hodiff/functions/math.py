"""Elementwise math: exp, log and the trigonometric and hyperbolic families."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.context import array_module
from hodiff.function import Function, Slot
from hodiff.variable import Variable

__all__ = ["exp", "log"]

Slots = Sequence[Slot]
Flags = Sequence[bool]


class Exp(Function):
    need_inputs = False
    need_outputs = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).exp(inputs[0])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d exp(x) = exp(x) dx
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * outputs[0].data, accum[0])


class Log(Function):
    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).log(inputs[0])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d log(x) = dx / x
        if prop_down[0]:
            inputs[0].store(outputs[0].grad / inputs[0].data, accum[0])


def exp(x: Any) -> Variable:
    """``y = e^x`` elementwise."""
    return Exp()(x)


def log(x: Any) -> Variable:
    """``y = ln(x)`` elementwise (natural logarithm, ``x > 0``)."""
    return Log()(x)
