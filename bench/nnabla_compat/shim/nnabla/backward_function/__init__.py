"""NNabla's gradient functions (``ConvolutionDataGrad``, ...) as hodiff compositions.

NNabla's tests build the gradient of a linear function with respect to one input
(``DataGrad``: the data, ``FilterGrad``: the filter) as a function of its own, of the output
gradient ``dy`` and the other inputs, and check its derivatives. Here it is
``hd.grad(fwd(..., x_t, ...), x_t, grad_outputs=dy)``: the function is linear in ``x_t``,
so its gradient does not depend on ``x_t``'s value (zeros are used). Gradient functions of
nonlinear functions (``BatchNormalizationBackward``) raise ``Internals``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as HF
from bench.nnabla_compat.causes import Internals

from .. import Context
from .._core import call

_LINEAR = {
    "affine": ("AffineDataGrad", "AffineFilterGrad"),
    "average_pooling": ("AveragePoolingDataGrad",),
    "concatenate": ("ConcatenateDataGrad",),
    "convolution": ("ConvolutionDataGrad", "ConvolutionFilterGrad"),
    "deconvolution": ("DeconvolutionDataGrad", "DeconvolutionFilterGrad"),
    "embed": ("EmbedFilterGrad",),
    "global_average_pooling": ("GlobalAveragePoolingDataGrad",),
    "interpolate": ("InterpolateDataGrad",),
    "pad": ("PadDataGrad",),
    "slice": ("SliceDataGrad",),
    "sum_pooling": ("SumPoolingDataGrad",),
    "transpose": ("TransposeDataGrad",),
    "unpooling": ("UnpoolingDataGrad",),
}
_NONLINEAR = {
    "batch_normalization": ("BatchNormalizationBackward",),
    "fused_batch_normalization": ("FusedBatchNormalizationBackward",),
}


class GradFunction:
    """The gradient of ``fwd`` with respect to its inputs ``targets``, given ``dy``."""

    target_kind = "DataGrad"

    fwd_name = ""

    def __init__(self, *a: Any, **kwargs: Any) -> None:
        self.name = type(self).__name__
        self.xshape: Any = None
        if a and isinstance(a[0], Context):  # NNabla's own constructor: (ctx, *arguments)
            if self.fwd_name != "interpolate":
                raise Internals(f"{self.name}(ctx, ...)")
            self.fwd = HF.interpolate
            self.inputs: list | None = None
            self.args: tuple = (None, *a[1:])  # output_size, mode, ...: no scale
            self.kwargs = kwargs
        else:
            fwd, inputs, self.args, self.kwargs = a
            self.fwd = getattr(fwd, "hodiff", fwd)
            self.inputs = list(inputs)

    def _targets(self, inputs: list) -> list[int]:
        if self.target_kind == "FilterGrad":
            return [1]
        if self.fwd_name == "concatenate":
            return [j for j, a in enumerate(inputs) if a is not None]
        return [0]

    def _compute(self, dy: Any, *given: Any) -> Any:
        inputs = self.inputs if self.inputs is not None else [np.zeros(self.xshape, np.float32)]
        targets = self._targets(inputs)
        others = [j for j, a in enumerate(inputs) if a is not None and j not in targets]
        xs: list[Any] = [None if a is None else np.asarray(a) for a in inputs]
        leaves = []
        for j in targets:
            leaf = hd.Variable.from_array(np.zeros_like(xs[j]), need_grad=True)
            xs[j] = leaf
            leaves.append(leaf)
        for j, v in zip(others, given, strict=False):
            xs[j] = v
        y = self.fwd(*xs, *self.args, **self.kwargs)
        gs = hd.grad(y, leaves, grad_outputs=[dy])
        return gs[0] if len(gs) == 1 else tuple(gs)

    def __call__(self, *ginputs: Any) -> Any:
        return call(self.name, self._compute, ginputs, {})


def _make(name: str, fwd_name: str) -> type:
    if fwd_name in _NONLINEAR:

        def init(self: Any, *a: Any, **k: Any) -> None:
            raise Internals(f"NNabla's {name}")

        return type(name, (GradFunction,), {"__init__": init})
    kind = "FilterGrad" if name.endswith("FilterGrad") else "DataGrad"
    return type(name, (GradFunction,), {"target_kind": kind, "fwd_name": fwd_name})


for _fwd, _names in {**_LINEAR, **_NONLINEAR}.items():
    _mod = types.ModuleType(f"{__name__}.{_fwd}")
    for _n in _names:
        setattr(_mod, _n, _make(_n, _fwd))
    sys.modules[_mod.__name__] = _mod
    globals()[_fwd] = _mod
