"""What a reverse pass checks before it runs: the values its rules read, its seeds, its leaves.

A node's values are as of ``max(seq, _computed)`` on the clock (its link, or the last
forward pass that computed it). A value freed since (``clear_buffer``), set by the user
since (``.d = ...``, ``Variable._version``) or an input reshaped since
(``reset_shape``) makes the pass raise before it touches any gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine.clock import CLOCK
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.follow import last_change
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable, no_value

__all__ = ["check_seed", "check_values", "values_epoch"]


def values_epoch() -> tuple[int, int]:
    """What a check of values depends on: ``(passes that freed, last user write)``. A check
    made at this epoch holds until it changes (a cached plan is checked again only then).
    """
    return CLOCK.frees, CLOCK.last_write


def check_values(plan: Any, where: str) -> None:
    """Raises RuntimeError if a value some step's backward rule reads was freed (or never
    computed), or was set by the user (``.d = ...``) after the node computed with it.

    ``plan``: anything with the ``nodes`` of a pass, in order. Run before a reverse pass,
    so that a failing one touches no gradient. A node whose values are newer than the
    last free and the last user write is not looked at, nor is a plan whose nodes were all
    created after them.
    """
    last = max(CLOCK.last_free, CLOCK.last_write)
    nodes: Sequence[Function] = plan.nodes
    if not nodes or nodes[0].seq > last:
        return
    for f in nodes:
        t = max(f.seq, f._computed)
        if t <= last:
            _check_node(f, t, where)


def _check_node(f: Function, t: int, where: str) -> None:
    """Raises RuntimeError if a value ``f``'s rule reads changed after time ``t``."""
    _check_not_reset(f, t, where)
    need = f.need_inputs
    if need is not False:
        for i, x in enumerate(f.inputs):
            if need is True or i in need:
                if x._data is None and x.parent is not None:
                    raise RuntimeError(f"{where}: {f.name} needs its input {i}, {no_value(x)}")
                if getattr(x, "_version", 0) > t:
                    raise RuntimeError(_changed(where, f, f"input {i}", x))
    if f.need_outputs:
        for i, r in enumerate(f._outputs):
            o = r()
            if f._ydata is None and (o is None or o._data is None):
                raise RuntimeError(
                    f"{where}: {f.name} needs its output {i} (shape {f.output_shape(i)}), "
                    "which has no value: its static graph was not run yet, or "
                    "clear_buffer=True freed it; call .forward() on the result first"
                )
            if o is not None and getattr(o, "_version", 0) > t:
                raise RuntimeError(_changed(where, f, f"output {i}", o))


def _check_not_reset(f: Function, t: int, where: str) -> None:
    """Raises RuntimeError if an input of ``f`` was given a new shape after time ``t``."""
    for i, x in enumerate(f.inputs):
        last = last_change(x)
        if last is not None and last[0] > t:
            shape = "an earlier shape" if last[1] is None else f"shape {last[1]}"
            raise RuntimeError(
                f"{where}: {f.name} computed with its input {i} of {shape}, "
                f"which was reset to {x._shape} since (reset_shape); call .forward() on "
                "the output first"
            )


def _changed(where: str, f: Function, which: str, x: Variable) -> str:
    """Why ``f``'s backward cannot read ``x`` (its ``which``): the user set its value since."""
    kind = "a leaf" if x.parent is None else f"the output of {x.parent.name}"
    return (
        f"{where}: {f.name} reads its {which} ({kind}, shape {x._shape}, dtype {x._dtype}), "
        f"but its value was changed after {f.name} computed with it ({CLOCK.writer(x)}); "
        "call .forward() on the output to recompute, or build the graph again"
    )


def check_seed(root: Variable, grad: Any, where: str) -> Any:
    """The seed of a plain pass from ``root``: ``grad`` as an array of ``root``'s shape and
    gradient dtype (ones for None; a scalar fills it).
    """
    if isinstance(grad, Variable):
        grad = grad.d
    xp = array_module(root._data) if root._data is not None else get_default_context().xp
    if grad is None:
        if root._dtype.kind == "c":  # as torch: which real function of it is meant?
            raise TypeError(f"{where}: grad can be implicitly created only for real outputs")
        return xp.ones(root.shape, dtype=root._grad_dtype())
    grad = xp.asarray(grad, dtype=root._grad_dtype())
    if grad.shape != root.shape:
        if grad.ndim == 0:
            return xp.full(root.shape, grad, dtype=root._grad_dtype())
        raise ValueError(
            f"{where}: grad of shape {grad.shape} does not match the output shape {root.shape}"
        )
    return grad


def check_leaves(root: Variable, leaves: Sequence[Variable], reached: Any) -> None:
    """Before a plain pass from ``root``: every leaf with need_grad it reaches (``reached``)
    is float (an integer leaf is refused, as PyTorch does: a gradient with respect to an
    integer has no meaning), and there is one (else every ``.g`` would stay zero).
    """
    for x in reached:
        if x._dtype.kind not in "fc":
            raise TypeError(
                f"backward: a leaf of shape {x.shape} and dtype {x.dtype} has need_grad=True; "
                "only float Variables have gradients: make it a float array (e.g. "
                "hd.Variable.from_array(a.astype(np.float64), need_grad=True)) or set "
                "need_grad=False"
            )
    if root.parent is not None and not reached:
        n = len(leaves)
        raise RuntimeError(
            f"backward: the output of {root.parent.name} (shape {root.shape}) depends on no "
            f"leaf with need_grad=True ({n} leaf input{'' if n == 1 else 's'}, all "
            "need_grad=False or reached only through non-differentiable functions), so every "
            ".g would stay zero: make the leaves to differentiate with "
            "hd.Variable.from_array(a, need_grad=True) (or set x.need_grad = True), or take "
            "hd.grad(y, x) for a gradient with respect to x"
        )
