"""The engine's graph modules under one name (their public names, kept importable here).

The engine is split by concern: :mod:`~hodiff.engine.clock` (node numbers and epochs),
:mod:`~hodiff.engine.order` (walking a graph), :mod:`~hodiff.engine.follow`
(``reset_shape``), :mod:`~hodiff.engine.run` (the forward interpreter),
:mod:`~hodiff.engine.checks` (what a reverse pass checks first),
:mod:`~hodiff.engine.plan` (reverse plans) and :mod:`~hodiff.engine.reverse` (both
reverse passes). This module imports nothing else.
"""

from __future__ import annotations

from hodiff.engine.checks import check_values
from hodiff.engine.follow import follow_shapes, shapes_current
from hodiff.engine.function import Function
from hodiff.engine.order import nodes_since, topological_order
from hodiff.engine.plan import _PLANS, plan, unused_inputs
from hodiff.engine.plan import Plan as _Plan
from hodiff.engine.reverse import (
    PassScope,
    Pullback,
    _commit,
    _hand,
    _is_handed,
    backward,
    backward_steps,
    current_pass,
    grad_graph,
    grad_values,
)
from hodiff.engine.run import _set_outputs, forward, run

__all__ = [
    "PassScope",
    "Pullback",
    "backward",
    "backward_steps",
    "check_values",
    "current_pass",
    "follow_shapes",
    "forward",
    "grad_graph",
    "grad_values",
    "nodes_since",
    "plan",
    "run",
    "shapes_current",
    "topological_order",
    "unused_inputs",
]

# the private names that callers outside the engine still read here
_PRIVATE = (Function, _PLANS, _Plan, _commit, _hand, _is_handed, _set_outputs)
