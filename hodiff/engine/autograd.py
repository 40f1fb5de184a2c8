"""Differentiation transforms built on the engine: grad and iter_grads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from hodiff.engine import checks, follow, recorded, reverse
from hodiff.engine import plan as planning
from hodiff.engine.arguments import array_module_of
from hodiff.engine.context import get_auto_forward, is_recording
from hodiff.engine.function import GradientShapeError
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable, is_scalar

__all__ = ["grad", "iter_grads"]


def _variables(name: str, value: Any) -> list[Variable]:
    if isinstance(value, Variable):
        items = [value]
    elif isinstance(value, dict):
        raise TypeError(f"grad: {name} is a dict: pass its values (list({name}.values()))")
    else:
        try:  # a list, a tuple, a dict's values, a generator: any iterable of Variables
            items = list(value)
        except TypeError:
            items = [value]
    if not items:
        raise ValueError(f"grad: {name} is empty")
    for i, v in enumerate(items):
        if not isinstance(v, Variable):
            raise TypeError(f"grad: {name}[{i}] must be a hodiff.Variable, got {type(v).__name__}")
    return items


def _seed(i: int, y: Variable, g: Any) -> Variable:
    """The seed of output ``i``: ones of its shape by default (any shape, as ``.backward()``);
    a scalar broadcasts to the output's shape; an array or Variable must have its shape.
    """
    xp = array_module_of(y)  # inside hd.vmap: the module of y's batched value
    dtype = y._grad_dtype()
    if g is None:
        if dtype.kind == "c":  # as torch
            raise TypeError(
                f"grad: grad can be implicitly created only for real outputs (outputs[{i}] is "
                f"{y.dtype}): pass grad_outputs, or differentiate F.real or F.abs of it"
            )
        return Variable.from_array(xp.ones(y.shape, dtype=dtype))
    if is_scalar(g):
        return Variable.from_array(xp.full(y.shape, g, dtype=dtype))
    if not isinstance(g, Variable):
        try:
            a = xp.asarray(g, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"grad: grad_outputs[{i}] must be an array, a Variable or a scalar, "
                f"got {type(g).__name__}"
            ) from e
        if a.ndim == 0 and y.ndim:  # a 0-d array broadcasts like a scalar (as in .backward())
            a = xp.full(y.shape, a, dtype=dtype)
        g = Variable.from_array(a, copy=a is g)
    if g.shape != y.shape:
        raise ValueError(
            f"grad: grad_outputs[{i}] has shape {g.shape} but outputs[{i}] has shape {y.shape}"
        )
    return g


def _why_unused(outs: list[Variable], ins: list[Variable]) -> str:
    """A hint when recording was off (``hd.no_grad()``) where the outputs were made."""
    if not is_recording():
        return " (recording is off: hd.grad was called inside hd.no_grad())"
    for k, y in enumerate(outs):
        if y.parent is None and not y.need_grad and y not in ins:
            return (
                f" (outputs[{k}] has no graph: was it computed under hd.no_grad(), or from "
                "leaves with need_grad=False?)"
            )
    return ""


def grad(
    outputs: Variable | Sequence[Variable],
    inputs: Variable | Sequence[Variable],
    grad_outputs: Any = None,
    allow_unused: bool = False,
    create_graph: bool = True,
) -> list[Variable]:
    """Gradients of ``outputs`` with respect to ``inputs``: ``sum_k gy_k . d y_k / d x_i``.

    Computes, for each input ``x_i``, ``sum_k grad_outputs[k] . d outputs[k] / d x_i``
    (shape ``x_i.shape``) by running every node's backward rule. Nothing is
    written into ``.g``.

    With ``create_graph=True`` (the default) the rules run while recording, so each
    result is itself a graph: call ``grad`` on it again for any order. With
    ``create_graph=False`` (PyTorch's switch) the rules run on bare arrays, as in
    ``.backward()``, and each result is a value only: a Variable without a parent
    and with ``need_grad=False``, cheaper to make (about half the cost of the
    recording pass on a chain of elementwise ops). Use it for the last derivative
    you take, e.g. the Hessian-vector product itself. The values are the same both
    ways, and what a call returns never depends on earlier calls.

    In a static graph (``auto_forward(False)``) the results of ``create_graph=True``
    are computed by calling ``.forward()`` on them; ``create_graph=False`` computes
    the values at the call, from the values the graph holds (run ``.forward()``
    on the outputs first). Inside ``hd.vmap`` the results are batched either way.

    Args:
        outputs: a Variable or a list of them.
        inputs: a Variable or a list of them (leaves or intermediate variables).
        grad_outputs: one array, Variable or scalar per output (a list; a single
            one for a single output). ``None`` (or a ``None`` entry) means ones
            of that output's shape, for any shape, as ``.backward()`` and
            NNabla's ``nn.grad``; a scalar broadcasts to the output's shape.
        allow_unused: give zeros for an input the outputs do not depend on,
            instead of raising ValueError.
        create_graph: record the gradient graph (the results can be
            differentiated again) or compute values only.

    Returns:
        A list with one Variable per input, of that input's shape.

    >>> import numpy as np, hodiff as hd
    >>> x = hd.Variable.from_array(np.array(3.0), need_grad=True)
    >>> (g,) = hd.grad(x ** 3, x)                       # 3 x^2, a graph
    >>> (h,) = hd.grad(g, x, create_graph=False)        # 6 x, a value
    >>> float(g.d), float(h.d), h.parent is None
    (27.0, 18.0, True)
    """
    if not create_graph:
        return Gradients(_grad(outputs, inputs, grad_outputs, allow_unused, False))
    # a static graph's gradient graph keeps the call: reset_shape makes it again
    return Gradients(_traced_grad(outputs, inputs, grad_outputs, allow_unused, True))


class Gradients(list[Variable]):
    """:func:`grad`'s result: a list of Variables, one per input. Reading a Variable's
    attribute on it (``g = hd.grad(y, x); g.d``, the PyTorch habit) says so.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"'{name}' of hd.grad's result: hd.grad returns a list of Variables, one per "
            f"input; write (g,) = hd.grad(y, x) or g = hd.grad(y, x)[0], then g.{name}"
        )


def _grad(
    outputs: Variable | Sequence[Variable],
    inputs: Variable | Sequence[Variable],
    grad_outputs: Any,
    allow_unused: bool,
    create_graph: bool,
) -> list[Variable]:
    """:func:`grad` itself."""
    outs = _variables("outputs", outputs)
    ins = _variables("inputs", inputs)
    if grad_outputs is None:
        gos: list[Any] = [None] * len(outs)
    else:
        gos = list(grad_outputs) if isinstance(grad_outputs, list | tuple) else [grad_outputs]
        if len(gos) != len(outs):
            raise ValueError(f"grad: {len(gos)} grad_outputs for {len(outs)} outputs")
    order = follow.shapes_current(outs)  # after a reset_shape: the graph's shapes first
    seeds = [_seed(i, y, g) for i, (y, g) in enumerate(zip(outs, gos, strict=True))]
    plan = recorded.plan(outs, ins, order)
    unused = recorded.unused_inputs(outs, ins, plan)
    if unused and not allow_unused:
        i = unused[0]
        raise ValueError(
            f"grad: the outputs do not depend on inputs[{i}] (shape {ins[i].shape})"
            f"{_why_unused(outs, ins)}; pass allow_unused=True to get zeros (a value made "
            "under hd.no_grad() or by hd.grad(..., create_graph=False) carries no graph)"
        )
    if create_graph:
        if get_auto_forward():  # a static graph's .forward() recomputes freed values
            checks.check_values(plan, "grad")
        results = recorded.grad_graph(outs, ins, seeds, plan)
    else:
        results = _grad_values(outs, ins, seeds, plan)
    out = []
    for i, (x, g) in enumerate(zip(ins, results, strict=True)):
        g = _in_dtype(g, x)
        if g is not None and g._shape != x._shape:
            raise GradientShapeError(
                f"grad: the gradient of inputs[{i}] (shape {x.shape}) came out with shape "
                f"{g.shape}: a backward rule stored a gradient of another shape than its input"
            )
        if g is None:
            xp = array_module_of(x)
            g = Variable.from_array(xp.zeros(x.shape, dtype=x._grad_dtype()))
        out.append(g)
    return out


def _in_dtype(g: Variable | None, x: Variable) -> Variable | None:
    """The gradient ``g`` of input ``x`` in ``x``'s gradient dtype, as ``.backward()`` writes
    it (a float32 leaf through a float64 constant: float32); a differentiable cast.
    """
    if g is None or g._dtype == x._grad_dtype():
        return g
    return g.astype(x._grad_dtype())


_traced_grad = traced(_grad)  # a static graph's hd.grad keeps its Trace (reset_shape)


def _grad_values(
    outs: list[Variable], ins: list[Variable], seeds: list[Variable], plan: planning.Plan
) -> list[Variable | None]:
    """``create_graph=False``: the gradients as values (Variables without a parent).

    The plain array pass computes them; inside ``hd.vmap`` (batched variables have no
    per-example arrays) the recording pass does, and its results are unlinked.
    """
    for group in (outs, ins, seeds):
        for v in group:
            if type(v) is not Variable:  # a batched variable (hd.vmap)
                return [
                    None if g is None else _in_dtype(g, x).unlinked(need_grad=False)  # type: ignore[union-attr]
                    for x, g in zip(ins, recorded.grad_graph(outs, ins, seeds, plan), strict=True)
                ]
    for k, y in enumerate(outs):
        if y._data is None and y.parent is not None:
            raise RuntimeError(
                f"grad(create_graph=False): outputs[{k}] (shape {y.shape}) has no value yet: "
                "in a static graph, call .forward() on it first"
            )
    checks.check_values(plan, "grad(create_graph=False)")
    values = recorded.grad_values(outs, ins, [s.d for s in seeds], plan)
    return [None if g is None else Variable.from_array(g, copy=False) for g in values]


def iter_grads(
    loss: Variable, params: Sequence[Variable] | None = None
) -> Iterator[tuple[Variable, Any]]:
    """Runs ``loss.backward()`` and yields ``(param, param.g)`` as each gradient becomes final.

    The order is the order in which the reverse pass finishes the parameters
    (the last layer first), so that e.g. an all-reduce of one gradient can
    overlap the rest of the pass. Like ``backward``, it accumulates into ``.g``.

    Args:
        loss: the output to differentiate (seeded with ones).
        params: the leaves to yield (default: every leaf with need_grad).
    """
    if not isinstance(loss, Variable):
        raise TypeError(f"iter_grads: loss must be a hodiff.Variable, got {type(loss).__name__}")
    wanted = None if params is None else set(params)
    for leaf in reverse.backward_steps(loss):
        if wanted is None or leaf in wanted:
            yield leaf, leaf.g
