"""``hd.vmap``: map a function over a batch axis as one batched computation.

How it works (a user of the engine, not an exception to it): inside
``hd.vmap(f)``, ``f`` receives :class:`BatchedVariable` s. Each one is an
ordinary Variable of the *per-example* shape (``.shape``, ``.dtype``,
``.parent``, ``need_grad``) whose value lives in :attr:`BatchedVariable.value`,
a normal Variable with the batch axis in front. When a primitive is called
with a batched input, ``Function.__call__`` hands it to :func:`_dispatch`,
which

1. calls the primitive's ``batch_rule`` (see :mod:`hodiff.engine.batching`) on the
   batched values: hodiff functions, so the batched computation is recorded as
   an ordinary graph (the result of ``vmap`` is differentiable like any other);
2. links the primitive as a node of the *per-example* graph, whose inputs and
   outputs are BatchedVariables.

``hd.grad`` inside ``f`` runs the engine's reverse pass on that per-example
graph: every backward rule calls hodiff functions on BatchedVariables, which
dispatch to batching rules again. So gradients inside ``f`` are per example
(also with respect to unmapped inputs and closed-over weights), with no rule
written for vmap-of-grad.

Nested ``vmap`` s have increasing levels: a primitive is batched at the highest
(innermost) level among its inputs first; the rule's own calls then meet the
outer levels' BatchedVariables and are batched in turn.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.batching import batched, loop
from hodiff.engine.context import array_module
from hodiff.engine.function import REGISTRY
from hodiff.engine.variable import Variable
from hodiff.functions import array

__all__ = ["BatchedVariable", "find_batched", "refuse_batched", "refuse_inside_vmap", "vmap"]

_levels = itertools.count(1)
_active: set[int] = set()
_sizes: dict[int, int] = {}  # batch size of every running vmap, by level
#: set while a primitive without inputs makes its batched draw (see _inputless)
_drawing: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "hodiff_vmap_drawing", default=False
)
#: the levels whose batch rule runs now: the rule's own calls see that level's batch as an
#: axis of their arrays, so a primitive without inputs is not batched at it again (a set
#: as ``_active``, not a context variable: a checkpoint's rule runs ``f`` in the context
#: copied where the checkpoint was made)
_ruling: set[int] = set()


def inside_vmap() -> bool:
    """Whether a mapped function runs now (inside ``hd.vmap``)."""
    return bool(_active)


def running(b: BatchedVariable) -> bool:
    """Whether the ``hd.vmap`` that made ``b`` is still running."""
    return b._level in _active


class BatchedVariable(Variable):
    """A per-example view of a batched Variable inside ``hd.vmap``.

    ``shape``/``dtype`` are those of one example; :attr:`value` holds the
    whole batch (batch axis 0). Its value per example is not available: read
    shapes, call hodiff functions and ``hd.grad`` on it.
    """

    __slots__ = ("_level", "_value")

    _level: int
    _value: Variable

    @property  # type: ignore[override]
    def d(self) -> Any:
        raise TypeError(
            f"hd.vmap: a batched variable (per-example shape {self.shape}) has no per-example "
            "value inside the mapped function; compute with hodiff functions, hd.grad and the "
            "transforms (hd.hessian, hd.jacobian, hd.hvp, hd.vjp, hd.jvp return Variables there)"
        )

    @d.setter
    def d(self, value: Any) -> None:
        raise TypeError("hd.vmap: cannot set the value of a batched variable")

    data = d

    @property  # type: ignore[override]
    def g(self) -> Any:
        raise TypeError("hd.vmap: a batched variable has no .g; use hd.grad inside vmap")

    @g.setter
    def g(self, value: Any) -> None:
        raise TypeError("hd.vmap: a batched variable has no .g; use hd.grad inside vmap")

    grad = g

    def __bool__(self) -> bool:
        raise TypeError(
            f"hd.vmap: the truth value of a batched variable (per-example shape {self.shape}, "
            f"batch {self._value.shape[0]}) is not defined inside the mapped function: Python "
            "control flow (if, while, and, or) cannot depend on the example's values there; "
            "select with F.where, or loop over the examples"
        )

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(
            f"hd.vmap: a batched variable (per-example shape {self.shape}, batch "
            f"{self._value.shape[0]}, dtype {self.dtype}) cannot become an array inside the "
            "mapped function (it has no per-example value): the numpy/scipy-based tools run "
            "outside hd.vmap, on what the vmap returns"
        )

    @property
    def value(self) -> Variable:
        """The batched Variable (batch axis 0)."""
        return self._value

    def forward(self, clear_buffer: bool = False, clear_no_need_grad: bool = False) -> None:
        raise TypeError("hd.vmap: forward() of a batched variable; call it on vmap's result")

    def backward(
        self, grad: Any = None, clear_buffer: bool = False, *, retain_grad: bool = False
    ) -> None:
        raise TypeError("hd.vmap: backward() inside a mapped function; use hd.grad there")

    def unlinked(self, need_grad: bool | None = None) -> Variable:
        return _wrap(self._value.unlinked(need_grad), self._level, need_grad)

    def __repr__(self) -> str:
        return (
            f"BatchedVariable(shape={self.shape}, batch={self._value.shape[0]}, "
            f"dtype={self.dtype}, level={self._level})"
        )


def _wrap(value: Variable, level: int, need_grad: bool | None = None) -> BatchedVariable:
    need = value.need_grad if need_grad is None else bool(need_grad)
    t: BatchedVariable = api.new_variable(value.shape[1:], value.dtype, BatchedVariable, need)
    t._value = value
    t._level = level
    return t


def _dispatch(f: Any, inputs: list[Variable]) -> Any:
    """``Function.__call__`` with a batched input: the batch rule, and the per-example node.

    Returns None when no input is batched (the normal path goes on). The steps: find the
    innermost vmap level among the inputs; check the per-example arguments (``setup_impl``,
    so that errors name the per-example shapes, as without vmap; skipped inside
    ``hd.grad``); run the primitive's ``batch_rule`` on the batched values; wrap its outputs
    as per-example variables; link the per-example node.
    """
    if not inputs:
        return _inputless(f)
    level, mixed = _level_of(inputs)
    if not level:
        return None
    if level not in _active:
        raise RuntimeError(
            f"{f.name}: a batched variable is used outside the hd.vmap that made it "
            "(return it from the mapped function instead of keeping it)"
        )
    trusted = api.is_trusted()
    specs = None if trusted else f.setup_impl(inputs)
    values, axes, first = _batched_values(inputs, level, mixed)
    ref = api.value_of(first)
    if ref is not None and type(ref) is not np.ndarray:
        _same_backend(ref, values, axes)
    nested = level in _ruling
    _ruling.add(level)
    try:
        outs = _run_rule(f, values, axes, trusted)
    finally:
        if not nested:
            _ruling.discard(level)
    outputs = _per_example(f, outs, first.shape[0], level, specs)
    if api.is_recording():
        api.link(f, inputs, outputs)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _inputless(f: Any) -> BatchedVariable | None:
    """A primitive without inputs called inside ``hd.vmap``: batched at every running level.

    A primitive whose class declares ``batch_rule_no_inputs(self, sizes)`` (the random
    functions) draws once per example, as the loop over the examples would: the rule
    returns its output for the batch sizes ``sizes`` of the running vmaps (outermost
    first) in front of the per-example shape, and it is wrapped as a per-example
    variable of each level. Other primitives without inputs are the same for every
    example (None: the normal path goes on).
    """
    rule = getattr(type(f), "batch_rule_no_inputs", None)
    if rule is None or not _active or _drawing.get():
        return None
    levels = sorted(_active - _ruling)
    if not levels:  # inside the batch rule of every running level: an unbatched call
        return None
    sizes = tuple(_sizes[lv] for lv in levels)
    ((shape, _),) = f.setup_impl([])
    token = _drawing.set(True)  # the rule's own call is the batched draw: not batched again
    try:
        value = rule(f, sizes)
    finally:
        _drawing.reset(token)
    if not isinstance(value, Variable) or value.shape != (*sizes, *shape):
        got = getattr(value, "shape", type(value).__name__)
        raise RuntimeError(
            f"{f.name}: batch_rule_no_inputs must return one Variable of shape "
            f"{(*sizes, *shape)} (the batch sizes, then the per-example shape), got {got}"
        )
    v: Variable = value
    for lv in levels:
        v = _wrap(v, lv, need_grad=False)
    if api.is_recording():
        api.link(f, [], [v])  # type: ignore[list-item]
    return v  # type: ignore[return-value]


def _level_of(inputs: list[Variable]) -> tuple[int, bool]:
    """The innermost vmap level of the batched inputs (0: none), and whether levels mix."""
    level = 0
    mixed = False
    for x in inputs:
        if type(x) is BatchedVariable:
            lv = x._level
            if lv != level:
                mixed = mixed or level != 0
                if lv > level:
                    level = lv
    return level, mixed


def _batched_values(
    inputs: list[Variable], level: int, mixed: bool
) -> tuple[list[Any], list[int | None], Variable]:
    """The rule's inputs: the batch of each input batched at ``level`` (axis 0), the others
    as they are (axis None), and the first batch.
    """
    values: list[Any] = []
    axes: list[int | None] = []
    first = None
    for x in inputs:
        if type(x) is BatchedVariable and (not mixed or x._level == level):
            v = x._value
            values.append(v)
            axes.append(0)
            if first is None:
                first = v
        else:
            values.append(x)
            axes.append(None)
    assert first is not None
    return values, axes, first


def _run_rule(f: Any, values: list[Any], axes: list[int | None], trusted: bool) -> tuple[Any, ...]:
    """The primitive's batch rule (the generic loop without one), its outputs as a tuple; the
    rule's own calls are trusted (the arguments were checked).
    """
    rule = getattr(type(f), "batch_rule", None) or loop
    if trusted:
        result = rule(f, values, axes)
    else:
        with api.trusted():
            result = rule(f, values, axes)
    if type(result) is tuple:
        return result
    return tuple(result) if isinstance(result, list) else (result,)


def _per_example(
    f: Any, outs: tuple[Any, ...], size: int, level: int, specs: Any
) -> list[BatchedVariable]:
    """The rule's batched outputs as per-example variables, checked against the protocol."""
    outputs = []
    ok = len(outs) == f.n_outputs
    for k, o in enumerate(outs):
        if not ok or not isinstance(o, Variable) or not o.shape or o.shape[0] != size:
            got = [getattr(o, "shape", type(o).__name__) for o in outs]
            raise RuntimeError(
                f"{f.name}: batch_rule must return {f.n_outputs} Variable(s) with the batch "
                f"axis (size {size}) first, got {got}"
            )
        if specs is not None and o.shape[1:] != tuple(specs[k][0]):
            raise RuntimeError(
                f"{f.name}: batch_rule gave output {k} of shape {o.shape}, expected the "
                f"batch ({size}) then the per-example shape {tuple(specs[k][0])}"
            )
        t: BatchedVariable = api.new_variable(o.shape[1:], o.dtype, BatchedVariable)
        t._value = o
        t._level = level
        outputs.append(t)
    return outputs


def _same_backend(ref: Any, values: list[Any], axes: list[int | None]) -> None:
    """Constant numpy leaves (Python scalars wrapped next to a batched input, which has no
    value to take the backend from) moved to the batch's backend (cupy), in place.
    """
    xp = array_module(ref)
    if xp is np:
        return
    for i, v in enumerate(values):
        if (
            axes[i] is None
            and type(v) is Variable
            and v.parent is None
            and not v.need_grad
            and type(api.value_of(v)) is np.ndarray
        ):
            values[i] = Variable.from_array(xp.asarray(api.value_of(v)))


api.set_batch_hook(_dispatch)


# ---------------------------------------------------------------- vmap
def _axes(name: str, axes: Any, n: int, what: str) -> list[int | None]:
    if axes is None or isinstance(axes, int):
        return [axes] * n
    if isinstance(axes, tuple | list):
        if len(axes) != n:
            raise ValueError(f"vmap: {name} has {len(axes)} entries for {n} {what}")
        for a in axes:
            if a is not None and not isinstance(a, int):
                raise TypeError(f"vmap: {name} entries must be int or None, got {a!r}")
        return list(axes)
    raise TypeError(f"vmap: {name} must be an int, None or a tuple of them, got {axes!r}")


def _move_to_front(x: Variable, axis: int) -> Variable:
    if axis == 0:
        return x
    perm = [axis, *[i for i in range(x.ndim) if i != axis]]
    return array.transpose(x, perm)


def _move_from_front(x: Variable, axis: int) -> Variable:
    if axis == 0:
        return x
    perm = list(range(1, x.ndim))
    perm.insert(axis, 0)
    return array.transpose(x, perm)


def vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """``f`` mapped over an axis of its arguments, as one batched computation.

    ``vmap(f)(X)`` equals ``stack([f(X[i]) for i in range(B)])`` (along
    ``out_axes``) but runs every primitive once on the whole batch, through its
    batching rule. ``f`` may call ``hd.grad`` (per-example gradients) and
    ``vmap`` (nesting); the result is differentiable like any Variable.

    Args:
        f: takes Variables (the per-example slices) and returns a Variable or a
            tuple/list of Variables (nested tuples/lists too, e.g. the blocks of
            ``hd.hessian`` of a tuple of inputs: an ``out_axes`` entry applies to
            every Variable of its output).
        in_axes: the mapped axis of every argument (an int), or a tuple with an
            int or None (not mapped: every example sees the whole argument) per
            argument.
        out_axes: where the batch axis goes in each output (an int, or a tuple per
            output).

    Returns:
        A function taking arrays or Variables; it returns Variables (a tuple or
        list when ``f`` does) whose axis ``out_axes`` has the batch size.

    Raises:
        ValueError: the mapped axes have different sizes (the message names the
            arguments), an axis is out of range, or no argument is mapped.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> hd.vmap(lambda x: F.sum(x ** 2))(X).d
    array([ 5., 25., 61.])
    >>> per_example = hd.vmap(lambda x: hd.grad(F.sum(x ** 3), x)[0])
    >>> per_example(X).d
    array([[  3.,  12.],
           [ 27.,  48.],
           [ 75., 108.]])
    """
    if not callable(f):
        raise TypeError(f"vmap: f must be callable, got {type(f).__name__}")
    if not isinstance(in_axes, tuple | list):
        _axes("in_axes", in_axes, 1, "arguments")  # type errors at vmap time

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        axes = _axes("in_axes", in_axes, len(args), "arguments")
        level = next(_levels)
        size = None
        first = None
        targs: list[Any] = []
        for i, (a, ax) in enumerate(zip(args, axes, strict=True)):
            if ax is None:
                targs.append(a)
                continue
            v = a if isinstance(a, Variable) else Variable.from_array(_array(a, i))
            if not -v.ndim <= ax < v.ndim:
                raise ValueError(
                    f"vmap: in_axes[{i}] = {ax} is out of range for argument {i} of shape {v.shape}"
                )
            ax %= v.ndim
            n = v.shape[ax]
            if size is None:
                size, first = n, (i, ax, v.shape)
            elif n != size:
                j, axj, shj = first  # type: ignore[misc]
                raise ValueError(
                    f"vmap: mapped axes have different sizes: argument {j} (shape {shj}) has "
                    f"{size} along in_axes {axj}, argument {i} (shape {v.shape}) has {n} along "
                    f"in_axes {ax}"
                )
            targs.append(_wrap(_move_to_front(v, ax), level))
        if size is None:
            raise ValueError("vmap: in_axes maps no argument (all None)")
        _active.add(level)
        _sizes[level] = size
        try:
            out = f(*targs)
        finally:
            _active.discard(level)
            _sizes.pop(level, None)
        multi = isinstance(out, tuple | list)
        outs = list(out) if multi else [out]
        oaxes = _axes("out_axes", out_axes, len(outs), "outputs")
        results = []
        for k, (o, ax) in enumerate(zip(outs, oaxes, strict=True)):
            results.append(_unwrap_tree(o, ax, level, size, str(k)))
        if not multi:
            return results[0]
        return type(out)(results) if isinstance(out, list) else tuple(results)

    return mapped


def _array(a: Any, i: int) -> Any:
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        return a
    try:
        import numpy as np

        return np.asarray(a, dtype=np.float64 if isinstance(a, float) else None)
    except (TypeError, ValueError):
        raise TypeError(
            f"vmap: argument {i} must be an array or a Variable, got {type(a).__name__}"
        ) from None


def _unwrap_tree(o: Any, ax: int | None, level: int, size: int, k: str) -> Any:
    """An output, or a nested tuple/list of them (the blocks of ``hd.hessian`` of a tuple),
    each unwrapped with the same ``out_axes`` entry.
    """
    if isinstance(o, tuple | list):
        items = [_unwrap_tree(a, ax, level, size, f"{k}[{j}]") for j, a in enumerate(o)]
        return type(o)(items) if isinstance(o, list) else tuple(items)
    return _unwrap(o, ax, level, size, k)


def _unwrap(o: Any, ax: int | None, level: int, size: int, k: str) -> Variable:
    if not isinstance(o, Variable):
        raise TypeError(
            f"vmap: f must return a Variable or a (nested) tuple/list of them; output {k} is "
            f"{type(o).__name__}"
        )
    if type(o) is BatchedVariable and o._level == level:
        if ax is None:
            raise ValueError(f"vmap: out_axes[{k}] is None but output {k} depends on the batch")
        v = o._value
    else:  # the same for every example: broadcast along the batch
        if ax is None:
            return o
        v = batched(o, None, size)  # its nodes refuse a new shape of o (no traced call)
    if not -v.ndim <= ax < v.ndim:
        raise ValueError(f"vmap: out_axes[{k}] = {ax} is out of range for {v.ndim} dimensions")
    return _move_from_front(v, ax % v.ndim)


# ---------------------------------------------------------------- tools that do not run per example
def find_batched(x: Any, label: str) -> tuple[str, BatchedVariable] | None:
    """The first batched variable in ``x`` (a Variable, or a tuple/list/dict of them, nested)
    and its label (``label``, ``label[1]``, ``label['w']``), or None.
    """
    if type(x) is BatchedVariable:
        return label, x
    if isinstance(x, dict):
        items: Any = ((f"{label}[{k!r}]", v) for k, v in x.items())
    elif isinstance(x, tuple | list):
        items = ((f"{label}[{i}]", v) for i, v in enumerate(x))
    else:
        return None
    for sub, v in items:
        found = find_batched(v, sub)
        if found is not None:
            return found
    return None


def refuse_batched(name: str, label: str, x: Any, why: str) -> None:
    """Raises a TypeError when ``x`` holds a batched variable (see :func:`find_batched`).

    For the tools that read values and return arrays (``hodiff.curvature``,
    ``hodiff.solvers``, ``hodiff.scipy``, ``hd.gradcheck``): they have no per-example
    form inside ``hd.vmap``. The message names the function ``name``, the argument
    (``label`` with its index or key), its per-example shape, the batch size and dtype,
    and ``why``; nothing has been linked or touched when it is raised at entry.
    """
    found = find_batched(x, label)
    if found is None:
        return
    arg, b = found
    where = "inside hd.vmap" if b._level in _active else "of an hd.vmap that has returned"
    raise TypeError(
        f"{name}: {arg} is a batched Variable {where} (per-example shape {b.shape}, batch "
        f"{b._value.shape[0]}, dtype {b.dtype}); {why}. Call {name} outside hd.vmap, on what "
        "the vmap returns, or loop over the examples"
    )


def refuse_inside_vmap(name: str, why: str) -> None:
    """Raises a RuntimeError when called while an ``hd.vmap`` runs its mapped function.

    For operations that change state outside the mapped function in place (a solver
    step): the mapped function runs once for the whole batch, so the operation would
    run once where a loop over the examples runs it once per example.
    """
    if not _active:
        return
    batch = " x ".join(str(_sizes[lv]) for lv in sorted(_active, reverse=True) if lv in _sizes)
    raise RuntimeError(
        f"{name}: called inside hd.vmap (batch {batch}); {why}. Call it outside hd.vmap"
    )


def fallback_primitives() -> list[str]:
    """Names of the registered primitives whose ``batch_rule`` is the generic :func:`loop`."""
    return sorted(c.__name__ for c in REGISTRY if getattr(c, "batch_rule", None) is loop)
