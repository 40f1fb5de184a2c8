"""``hd.gradcheck(..., fast=True)``: one random projection per order, as PyTorch's fast mode.

The full check differentiates ``S_k`` (see :mod:`hodiff.check`) and compares
every element of its gradient with a central difference: two calls of ``S_k``
per input element. The fast check compares one number per order, the
directional derivative along a random direction ``d`` (all inputs at once):

    analytic = sum_i <dS_k/dx_i, d_i>,  numeric = (S_k(x + eps d) - S_k(x - eps d)) / (2 eps)

two calls of ``S_k`` per order whatever the input size. A wrong derivative is
caught with probability one (a random projection of a nonzero error is
nonzero); when it is, :func:`hodiff.gradcheck` falls back to the full check,
whose table names the elements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hodiff.autograd import grad
from hodiff.check import GradcheckReport, directional, refuse_batched_output
from hodiff.context import array_module, auto_forward
from hodiff.variable import Variable

__all__ = ["fast_gradcheck"]


def fast_gradcheck(
    f: Callable[..., Variable],
    inputs: Any,
    order: int,
    eps: float,
    atol: float,
    rtol: float,
    seed: int = 0,
) -> GradcheckReport:
    """One row per order ``k``: input ``-1`` (all inputs, projected), element ``()``."""
    raw = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
    xs: list[Any] = []
    for a in raw:
        a = a.d if isinstance(a, Variable) else a
        a = array_module(a).asarray(a)
        xs.append(a.astype(np.float64) if a.dtype.kind == "f" else a)
    diff = [i for i, a in enumerate(xs) if a.dtype.kind == "f"]
    if not diff:
        raise TypeError("gradcheck: no float input to differentiate")
    rng = np.random.default_rng(seed)
    report = GradcheckReport(atol=atol, rtol=rtol)
    with auto_forward(True):
        y0 = f(*[Variable.from_array(a) for a in xs])
        if not isinstance(y0, Variable):
            raise TypeError(f"gradcheck: f must return a Variable, got {type(y0).__name__}")
        refuse_batched_output("gradcheck", y0)
        xp = array_module(y0.d)
        u = xp.asarray(rng.standard_normal(y0.shape))
        directions = [
            [xp.asarray(rng.standard_normal(xs[i].shape)) for i in diff] for _ in range(order - 1)
        ]

        def scalar(k: int, arrays: Sequence[Any]) -> tuple[Variable, list[Variable]]:
            return directional(f, k, arrays, diff, u, directions)

        for k in range(1, order + 1):
            d = [xp.asarray(rng.standard_normal(xs[i].shape)) for i in diff]
            s, vs = scalar(k, xs)
            analytic = grad(s, [vs[i] for i in diff], allow_unused=True)
            ana = float(sum(float((g.d * di).sum()) for g, di in zip(analytic, d, strict=True)))
            plus = list(xs)
            minus = list(xs)
            for slot, i in enumerate(diff):
                plus[i] = xs[i] + eps * d[slot]
                minus[i] = xs[i] - eps * d[slot]
            num = (float(scalar(k, plus)[0].d) - float(scalar(k, minus)[0].d)) / (2 * eps)
            err = abs(ana - num)
            report.rows.append((-1, k, (), ana, num, err, bool(err <= atol + rtol * abs(num))))
    return report
