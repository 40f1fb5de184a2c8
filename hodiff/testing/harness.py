"""Calling functions and their ``backward_impl`` directly: shared by the test suite,
``python -m hodiff check`` and :func:`hodiff.testing.check_function`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.engine import api
from hodiff.engine.function import Function, Slot
from hodiff.engine.variable import Variable
from hodiff.testing.spec import Spec

__all__ = ["call", "is_float", "outputs_of", "run_backward_impl", "scalarized", "weights"]


def is_float(a: Any) -> bool:
    return np.dtype(a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype).kind == "f"


def outputs_of(y: Any) -> list[Variable]:
    return list(y) if isinstance(y, tuple | list) else [y]


def call(spec: Spec, arrays: Sequence[Any], need_grad: bool = False) -> tuple[list[Variable], Any]:
    """The spec's function applied to Variables wrapping ``arrays``: (inputs, output)."""
    vs = [Variable.from_array(a, need_grad=need_grad and is_float(a)) for a in arrays]
    return vs, spec.fn(*vs, **spec.kwargs)


def weights(spec: Spec, seed: int = 1) -> list[np.ndarray]:
    """Fixed random weights, one per output, to turn any output into a scalar."""
    _, y = call(spec, spec.sample())
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(o.shape) for o in outputs_of(y)]


def scalarized(spec: Spec, ws: Sequence[np.ndarray], power: int = 1) -> Any:
    """``x -> sum_k sum(w_k * y_k**power)``: a scalar function of the spec's inputs."""

    def f(*xs: Variable) -> Variable:
        total = None
        for o, w in zip(outputs_of(spec.fn(*xs, **spec.kwargs)), ws, strict=True):
            term = F.sum(o**power * w) if power != 1 else F.sum(o * w)
            total = term if total is None else total + term
        assert total is not None
        return total

    return f


def run_backward_impl(
    node: Function,
    gys: Sequence[Any],
    prop_down: Sequence[bool],
    accum: Sequence[bool],
    previous: Sequence[Any],
    input_data: Sequence[Any] | None = None,
    output_data: Sequence[Any] | None = None,
    recorded: bool = False,
) -> list[Any]:
    """Calls ``node.backward_impl`` on bare arrays (as a plain backward does), or with
    ``recorded`` on Variables while recording (as ``hd.grad`` does).

    ``previous`` are the gradients already in the input slots (None: none; with
    ``recorded``, arrays are given to the rule as Variables and a Variable as it is);
    ``input_data``/``output_data`` replace the values the slots show (e.g. None
    for a buffer that ``forward(clear_buffer=True)`` would have freed).
    Returns the input slots' gradients after the call (Variables with ``recorded``).
    """
    with api.recording() if recorded else api.raw_mode():
        wrap = _as_variable if recorded else _same
        ydata = api.kept_outputs(node)
        live = api.outputs_of(node)
        outs = []
        for i, gy in enumerate(gys):
            if output_data is not None:
                y = output_data[i]
            else:
                o = live[i]
                y = ydata[i] if ydata is not None else (api.value_of(o) if o is not None else None)
            outs.append(Slot(wrap(y), wrap(gy), tuple(gy.shape)))
        datas = list(input_data) if input_data is not None else map(api.value_of, node.inputs)
        ins = [
            Slot(wrap(d), wrap(p), x.shape)
            for x, d, p in zip(node.inputs, datas, previous, strict=True)
        ]
        node.backward_impl(ins, outs, list(prop_down), list(accum))
        return [s.grad for s in ins]


def _same(a: Any) -> Any:
    return a


def _as_variable(a: Any) -> Any:
    return a if a is None or isinstance(a, Variable) else Variable.from_array(a)
