"""A shim ``nnabla`` over hodiff, for running NNabla's own tests (bench only, never CI).

Only what NNabla's per-function tests use: ``Variable``, contexts and modes, ``grad``
and parameters. Anything else raises ``Internals`` (counted as "cannot run").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

import hodiff as hd
from bench.nnabla_compat.causes import HalfPrecision, Internals

from ._core import NdArray, Variable, unwrap, wrap_outputs


class Context:
    def __init__(self, backend: Any = None, array_class: str = "", device_id: str = "0") -> None:
        self.backend = backend or ["cpu:float"]
        self.array_class = array_class
        self.device_id = device_id

    def __repr__(self) -> str:
        return f"Context(backend={self.backend})"


_ctx = [Context()]


def _check_ctx(ctx: Any) -> None:
    for b in getattr(ctx, "backend", []) or []:
        if "half" in str(b):
            raise HalfPrecision(f"a half context {ctx}")


@contextlib.contextmanager
def context_scope(ctx: Any) -> Iterator[None]:
    _check_ctx(ctx)
    _ctx.append(ctx)
    try:
        yield
    finally:
        _ctx.pop()


def get_current_context() -> Any:
    return _ctx[-1]


def set_default_context(ctx: Any) -> None:
    _check_ctx(ctx)
    _ctx[0] = ctx


def auto_forward(auto: bool = True) -> Any:
    return hd.auto_forward(auto)


def set_auto_forward(auto: bool) -> None:
    hd.set_auto_forward(auto)


def get_auto_forward() -> bool:
    return hd.get_auto_forward()


def prefer_cached_array(flag: bool) -> None:
    pass


def set_global_recompute(flag: bool) -> None:
    if flag:
        raise Internals("recompute")


def clear_parameters() -> None:
    hd.clear_parameters()


def get_parameters(params: Any = None, path: str = "", grad_only: bool = True) -> dict:
    return {k: wrap_outputs(v, None) for k, v in hd.get_parameters(grad_only=grad_only).items()}


def parameter_scope(name: str, scope: Any = None) -> Any:
    return hd.parameter_scope(name)


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    persistent_outputs: Any = None,
    bind_grad_output: bool = False,
) -> list:
    outs = outputs if isinstance(outputs, list | tuple) else [outputs]
    ins = inputs if isinstance(inputs, list | tuple) else [inputs]
    seeds = None
    if grad_outputs is not None:
        seeds = [
            unwrap(s)
            if isinstance(s, Variable)
            else np.full(o.shape, s, dtype=o.dtype)
            if np.ndim(s) == 0
            else np.asarray(s, dtype=o.dtype)
            for o, s in zip(outs, grad_outputs, strict=True)
        ]
    gs = hd.grad(unwrap(list(outs)), unwrap(list(ins)), grad_outputs=seeds)
    return [wrap_outputs(g, None) for g in gs]


def __getattr__(name: str) -> Any:
    raise Internals(f"nnabla.{name}")


__all__ = [
    "Context",
    "NdArray",
    "Variable",
    "auto_forward",
    "clear_parameters",
    "context_scope",
    "get_auto_forward",
    "get_current_context",
    "get_parameters",
    "grad",
    "parameter_scope",
    "prefer_cached_array",
    "set_auto_forward",
    "set_default_context",
    "set_global_recompute",
]
