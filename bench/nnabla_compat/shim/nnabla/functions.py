"""``nnabla.functions``: hodiff's function of the same name, one Node per call."""

from __future__ import annotations

from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as HF
from bench.nnabla_compat.causes import MissingFunction
from hodiff.engine import graph as hd_graph

from ._core import Variable, call, unwrap


class _Sink(Variable):
    """NNabla's ``F.sink``: forward and backward of several outputs at one place."""

    def __init__(self, outs: tuple, one_input_grad: bool) -> None:
        super().__init__((), _v=hd.Variable(()))
        self._outs = [o for o in outs if o is not None]
        self._one = one_input_grad

    def forward(self, clear_buffer: bool = False, clear_no_need_grad: bool = False) -> None:
        # one pass over all roots, as NNabla's sink: a pass per root with buffers freed
        # would free what another root's backward needs
        roots = [o._v for o in self._outs if o._v.parent is not None]
        if roots:
            hd_graph.forward(roots, clear_buffer=bool(clear_buffer or clear_no_need_grad))

    def backward(self, grad: Any = 1, clear_buffer: bool = False) -> None:
        outs = [o for o in self._outs if o._v.dtype.kind == "f" and o._v.parent is not None]
        if not outs:
            return
        seeds = [np.ones(o.shape, o.dtype) if self._one else np.array(o.g) for o in outs]
        with hd.auto_forward(True):
            total = HF.add_n(*[HF.sum(o._v * s) for o, s in zip(outs, seeds, strict=True)])
        total.backward(clear_buffer=clear_buffer)


def sink(*outs: Any, one_input_grad: bool = True) -> Any:
    return _Sink(outs, one_input_grad)


def _wrapper(name: str, fn: Any) -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        return call(name, fn, args, kwargs)

    f.__name__ = name
    f.hodiff = fn  # type: ignore[attr-defined]
    return f


def _missing(name: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise MissingFunction(name)

    f.__name__ = name
    return f


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    fn = getattr(HF, name, None)
    if fn is None or not callable(fn) or isinstance(fn, type):
        return _missing(name)
    return _wrapper(name, fn)


__all__ = ["sink", "unwrap"]
