"""``check_function``: the checks hodiff runs on its own primitives, for yours.

A custom primitive (a :class:`hodiff.Function` subclass) or a function built
on hodiff functions is checked for every property the engine relies on:

================================  ==========================================================
property                          what is checked
================================  ==========================================================
``finite differences, order k``   the derivatives of orders 1..``order`` against central
                                  differences in float64 (:func:`hodiff.gradcheck`); orders
                                  >= 2 on ``sum(w * y**3)``, so the backward of the backward
                                  is exercised even for a linear function
``grad vs backward``              ``hd.grad`` (recorded graph) equals the plain ``.backward()``
                                  (bare arrays), and a second ``.backward()`` accumulates
``accumulate vs overwrite``       ``backward_impl`` with ``accum[i]`` true adds to the gradient
                                  already there; with it false it overwrites it (a NaN already
                                  there must disappear)
``prop_down=False untouched``     an input with ``prop_down[i]`` false keeps its gradient (the
                                  same array, unchanged), and the other inputs' gradients do
                                  not change
``static vs dynamic``             the output and the gradient graphs (orders 1 and 2) built in
                                  a static graph, before any value exists, then computed by
                                  ``.forward()``, equal the define-by-run ones (a rule that
                                  branches on values is caught)
``float32 preserved``             float32 inputs give float32 outputs and gradients
``freed buffers``                 ``backward_impl`` works when the buffers that
                                  ``need_inputs``/``need_outputs`` say it does not need are
                                  freed, and ``forward(clear_buffer=True)`` then ``backward()``
                                  gives the same gradients
================================  ==========================================================

The engine never asks a rule for an input with ``prop_down`` false and decides
``accum`` itself, so the node-level properties (accumulate, prop_down, freed
buffers) are checked by calling ``backward_impl`` directly with chosen flags
and sentinel gradients, on every node of a custom primitive in ``f``'s graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.engine import api
from hodiff.engine.autograd import grad
from hodiff.engine.context import (
    Context,
    array_module,
    auto_forward,
    context_scope,
    get_default_context,
)
from hodiff.engine.function import REGISTRY, Function
from hodiff.engine.variable import Variable
from hodiff.testing.harness import outputs_of, run_backward_impl
from hodiff.tools.check import (
    NOT_PER_EXAMPLE,
    GradcheckError,
    GradcheckReport,
    gradcheck,
    refuse_batched_output,
)
from hodiff.transforms.vectorize import refuse_batched

__all__ = ["PROPERTIES", "CheckRow", "FunctionCheckReport", "check_function"]

#: the properties, in the order they are checked and reported
PROPERTIES = (
    "finite differences",
    "grad vs backward",
    "accumulate vs overwrite",
    "prop_down=False untouched",
    "static vs dynamic",
    "float32 preserved",
    "freed buffers",
)

_RTOL, _ATOL = 1e-10, 1e-12  # identities that hold to rounding


@dataclass
class CheckRow:
    """One checked property: its name, whether it held, and what was seen."""

    property: str
    ok: bool
    detail: str


@dataclass
class FunctionCheckReport:
    """Result of :func:`check_function`: one row per property (and order); truthy when all held.

    ``gradchecks`` holds the :class:`hodiff.GradcheckReport` of the
    finite-difference checks, keyed by the scalarization's power (1 and 3).
    """

    name: str
    rows: list[CheckRow] = field(default_factory=list)
    gradchecks: dict[int, GradcheckReport] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(r.ok for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    def failures(self) -> list[CheckRow]:
        return [r for r in self.rows if not r.ok]

    def __getitem__(self, prop: str) -> CheckRow:
        """The row of one property (``"grad vs backward"``, ``"finite differences, order 2"``)."""
        for r in self.rows:
            if r.property == prop:
                return r
        raise KeyError(prop)

    def table(self) -> str:
        width = max(len(r.property) for r in self.rows) if self.rows else 10
        head = f"{'property':<{width}}  result  detail"
        lines = [head, "-" * max(len(head), 60)]
        for r in self.rows:
            lines.append(f"{r.property:<{width}}  {'pass' if r.ok else 'FAIL':<6}  {r.detail}")
        return "\n".join(lines)

    def __str__(self) -> str:
        bad = self.failures()
        status = "passed" if not bad else f"{len(bad)} of {len(self.rows)} checks failed"
        text = f"check_function({self.name}): {status}\n{self.table()}"
        for power, rep in self.gradchecks.items():
            if not rep.passed:
                what = "sum(w * y)" if power == 1 else f"sum(w * y**{power})"
                text += f"\n\nfinite differences of {what}: worst elements\n{rep.table(limit=8)}"
        return text


# ---------------------------------------------------------------- helpers
#: the dtypes the checks run in (complex inputs in complex128), and the narrow ones
_WIDE = {"f": np.float64, "c": np.complex128}
_NARROW = {"f": np.float32, "c": np.complex64}


def _draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Random normal values of ``shape``: ``a + ib`` for a complex ``dtype``."""
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else a


def _max_err(a: Any, b: Any) -> float:
    """max |a - b| over the tolerance ``atol + rtol |b|`` (<= 1 passes); inf on mismatch."""
    a, b = _numpy(a), _numpy(b)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        err = np.abs(a - b) / (_ATOL + _RTOL * np.abs(b))
    return float(np.nanmax(np.where(np.isnan(err), np.inf, err)))


def _numpy(a: Any) -> np.ndarray:
    if isinstance(a, Variable):
        a = a.d
    a = a.get() if hasattr(a, "get") else a
    return np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64)


def _abs_diff(a: Any, b: Any) -> float:
    a, b = _numpy(a), _numpy(b)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _run(rows: list[CheckRow], prop: str, check: Callable[[], Any]) -> None:
    """Runs one property check: it returns None (held), a failure message, or raises."""
    try:
        problem = check()
    except Exception as e:  # a rule that crashes fails the property it was called for
        problem = f"raised {type(e).__name__}: {e}"
    if isinstance(problem, tuple):
        rows.append(CheckRow(prop, *problem))
    elif problem is None:
        rows.append(CheckRow(prop, True, "ok"))
    else:
        rows.append(CheckRow(prop, False, problem))


class _Subject:
    """``f`` and its inputs, prepared: float inputs in float64, one scalarization per power."""

    def __init__(self, f: Any, inputs: Any, seed: int) -> None:
        if not callable(f):
            raise TypeError(
                f"check_function: f must be a Function instance or a callable, "
                f"got {type(f).__name__}"
            )
        refuse_batched("check_function", "inputs", inputs, NOT_PER_EXAMPLE)
        self.f = f
        self.primitive = type(f) if isinstance(f, Function) else None
        raw = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
        self.xs: list[Any] = []
        for a in raw:
            a = a.d if isinstance(a, Variable) else a
            xp = array_module(a)
            a = xp.asarray(a)
            self.xs.append(a.astype(_WIDE[a.dtype.kind]) if a.dtype.kind in "fc" else a)
        self.diff = [i for i, a in enumerate(self.xs) if a.dtype.kind in "fc"]
        if not self.diff:
            raise TypeError("check_function: no float input to differentiate")
        with auto_forward(True):
            ys = outputs_of(self.call(self.variables(self.xs)))
        refuse_batched_output("check_function", ys)
        self.float_out = [j for j, y in enumerate(ys) if y.dtype.kind in "fc"]
        if not self.float_out:
            raise TypeError("check_function: f has no float output to differentiate")
        self.out_shapes = [y.shape for y in ys]
        self.rng = np.random.default_rng(seed)
        self._keep: Any = None  # Variables kept alive for the node-level checks
        xp = array_module(ys[0].d)
        self.ws = {j: xp.asarray(_draw(self.rng, ys[j].shape, ys[j].dtype)) for j in self.float_out}

    def variables(self, arrays: Sequence[Any], need_grad: bool = True) -> list[Variable]:
        return [
            Variable.from_array(a, need_grad=need_grad and i in self.diff)
            for i, a in enumerate(arrays)
        ]

    def call(self, vs: Sequence[Variable]) -> Any:
        y = self.f(*vs)
        for j, o in enumerate(outputs_of(y)):
            if not isinstance(o, Variable):
                raise TypeError(
                    f"check_function: f must return Variables, got {type(o).__name__} as output {j}"
                )
        return y

    def scalar(self, power: int = 1) -> Callable[..., Variable]:
        """``x -> sum_j sum(w_j * y_j**power)`` over the float outputs (the real part of a
        complex one, whose ``w_j`` is complex: a random real functional of its parts).
        """

        def s(*vs: Variable) -> Variable:
            ys = outputs_of(self.call(vs))
            total = None
            for j in self.float_out:
                y = ys[j]
                w = self.ws[j].astype(y.dtype)
                term = F.sum((y if power == 1 else y**power) * w)
                if term.dtype.kind == "c":  # Re sum(w y): a real functional of Re y and Im y
                    term = F.real(term)
                total = term if total is None else total + term
            assert total is not None
            return total

        return s

    def alone(self, i: int, power: int = 1) -> Callable[[Variable], Variable]:
        """:meth:`scalar` as a function of input ``i`` only, the others constants (their
        prop_down false).
        """
        scalar = self.scalar(power)

        def s(x: Variable) -> Variable:
            vs = self.variables(self.xs, need_grad=False)
            vs[i] = x
            return scalar(*vs)

        return s


# ---------------------------------------------------------------- properties
def _finite_differences(
    rows: list[CheckRow],
    report: FunctionCheckReport,
    sub: _Subject,
    order: int,
    tol: dict[str, Any],
) -> None:
    def check(power: int, k: int) -> GradcheckReport:
        if power not in report.gradchecks:
            report.gradchecks[power] = gradcheck(
                sub.scalar(power), sub.xs, order=k, raise_exception=False, **tol
            )
        return report.gradchecks[power]

    # with several inputs, each also alone (the others constants): the rules then run with
    # prop_down partly false, at every order, a path the check of all inputs never takes
    alone: dict[tuple[int, int], GradcheckReport] = {}

    def check_alone(i: int, power: int, k: int) -> GradcheckReport:
        if (i, power) not in alone:
            alone[i, power] = gradcheck(
                sub.alone(i, power), [sub.xs[i]], order=k, raise_exception=False, **tol
            )
        return alone[i, power]

    for k in range(1, order + 1):

        def one(k: int = k) -> tuple[bool, str]:
            power, top = (1, 1) if k == 1 else (3, order)
            mine: list[tuple[Any, str]] = [(r, "") for r in check(power, top).rows if r[1] == k]
            if len(sub.diff) > 1:
                for i in sub.diff:
                    rows = check_alone(i, power, top).rows
                    mine += [((i, *r[1:]), " (alone)") for r in rows if r[1] == k]
            bad = [(r, how) for r, how in mine if not r[6]]
            worst = max((r[5] for r, _ in mine), default=0.0)
            if bad:
                w, how = max(bad, key=lambda b: b[0][5])
                return False, (
                    f"{len(bad)} of {len(mine)} elements differ; worst: input {w[0]}"
                    f"{f' ({w[10]} part)' if len(w) > 10 and w[10] else ''}{how} "
                    f"element {w[2]}: analytic {w[3]:.6e}, numeric {w[4]:.6e}"
                )
            return True, f"{len(mine)} elements, max abs err {worst:.1e}"

        _run(rows, f"finite differences, order {k}", one)


def _grad_vs_backward(sub: _Subject) -> str | None:
    vs = sub.variables(sub.xs)
    ys = outputs_of(sub.call(vs))
    wanted = [vs[i] for i in sub.diff]
    outs = [ys[j] for j in sub.float_out]
    seeds = [sub.ws[j] for j in sub.float_out]
    recorded = grad(outs, wanted, grad_outputs=seeds, allow_unused=True)
    root = outs[0] if len(outs) == 1 else sub.scalar(1)(*vs)
    seed = seeds[0] if len(outs) == 1 else None
    root.backward(seed)
    for i, v, g in zip(sub.diff, wanted, recorded, strict=True):
        if _max_err(g.d, v.g) > 1:
            return (
                f"input {i}: hd.grad and .backward() differ by {_abs_diff(g.d, v.g):.2e}: "
                "the rule computes something else on Variables than on arrays"
            )
    first = [v.g.copy() for v in wanted]
    root.backward(seed)
    for i, v, g in zip(sub.diff, wanted, first, strict=True):
        if _max_err(v.g, 2 * g) > 1:
            return f"input {i}: a second .backward() did not accumulate into .g"
    return None


class _NodeCase:
    """One node of a custom primitive, with random output gradients and its prop_down flags."""

    def __init__(self, node: Function, rng: np.random.Generator) -> None:
        self.node = node
        xp = array_module(next(a for x in node.inputs if (a := api.value_of(x)) is not None))
        self.output_data: list[Any] = []
        self.gys = []
        specs, kept = api.output_specs(node), api.kept_outputs(node)
        for i, o in enumerate(api.outputs_of(node)):
            shape, dtype = specs[i]  # an output nobody kept (a multi-output node) too
            y = api.value_of(o) if o is not None else kept[i] if kept is not None else None
            dtype = np.dtype(dtype) if np.dtype(dtype).kind in "fc" else np.dtype(np.float64)
            self.output_data.append(y)
            self.gys.append(xp.asarray(_draw(rng, shape, dtype)).astype(dtype))
        self.prop = [x.need_grad and x.dtype.kind in "fc" for x in node.inputs]
        self.label = f"node {type(node).__name__}"
        self.rng = rng
        self._over: dict[bool, list[Any]] | None = None

    def run(
        self, prop: Sequence[bool], accum: Sequence[bool], previous: Sequence[Any], **kwargs: Any
    ) -> list[Any]:
        return run_backward_impl(self.node, self.gys, prop, accum, previous, **kwargs)

    def over(self, recorded: bool = False) -> list[Any]:
        """The gradients with every wanted input asked for, overwriting (array path, or
        with ``recorded`` the recorded one).
        """
        if self._over is None:
            self._over = {}
        if recorded not in self._over:
            n = len(self.prop)
            got = self.run(self.prop, [False] * n, [None] * n, recorded=recorded)
            for i, (p, g) in enumerate(zip(self.prop, got, strict=True)):
                if p and g is None:
                    raise AssertionError(
                        f"{self.label}: prop_down[{i}] is true but backward_impl stored no "
                        f"gradient for input {i}{_PATHS[recorded]}"
                    )
            self._over[recorded] = got
        return self._over[recorded]

    def like(self, i: int, fill: float | None = None) -> Any:
        x = self.node.inputs[i]
        xp = array_module(x.d)
        if fill is None:
            dtype = api.grad_dtype(x)
            return xp.asarray(_draw(self.rng, x.shape, dtype)).astype(dtype)
        return xp.full(x.shape, fill, dtype=api.grad_dtype(x))


#: how a node-level failure names the path it was found on
_PATHS = {False: "", True: " (on the recorded path, as hd.grad calls it)"}


def _accumulate(case: _NodeCase) -> str | None:
    """Accumulate against overwrite, on the array path and on the recorded path."""
    for recorded in (False, True):
        problem = _accumulate_on(case, recorded)
        if problem is not None:
            return problem
    return None


def _accumulate_on(case: _NodeCase, recorded: bool) -> str | None:
    over = case.over(recorded)
    n = len(case.prop)
    prev = [case.like(i) if p else None for i, p in enumerate(case.prop)]
    acc = case.run(
        case.prop,
        case.prop,
        [None if p is None else p.copy() for p in prev],
        recorded=recorded,
    )
    for i, p in enumerate(case.prop):
        if p and _max_err(acc[i], prev[i] + _numpy(over[i])) > 1:
            hint = " (it overwrote)" if _max_err(acc[i], over[i]) <= 1 else ""
            return (
                f"{case.label}, input {i}: with accum[{i}]=True the rule must add its "
                f"gradient to the one already there{hint}{_PATHS[recorded]}; off by "
                f"{_abs_diff(acc[i], prev[i] + _numpy(over[i])):.2e}"
            )
    nan = [case.like(i, np.nan) if p else None for i, p in enumerate(case.prop)]
    fresh = case.run(case.prop, [False] * n, nan, recorded=recorded)
    for i, p in enumerate(case.prop):
        if p and _max_err(fresh[i], over[i]) > 1:
            return (
                f"{case.label}, input {i}: with accum[{i}]=False the rule must overwrite "
                f"the gradient already there (a NaN there survived or changed the "
                f"result){_PATHS[recorded]}"
            )
    return None


def _prop_down(case: _NodeCase) -> str | None:
    """prop_down=False inputs untouched, the others unchanged, on both paths."""
    for recorded in (False, True):
        problem = _prop_down_on(case, recorded)
        if problem is not None:
            return problem
    return None


def _prop_down_on(case: _NodeCase, recorded: bool) -> str | None:
    over = case.over(recorded)
    n = len(case.prop)
    flags = [[False] * n]  # nothing asked; then each input left out in turn
    if sum(case.prop) > 1:
        flags += [[p and j != i for j, p in enumerate(case.prop)] for i in range(n) if case.prop[i]]
    for prop in flags:
        sentinels = [None if p else case.like(i, 7.0) for i, p in enumerate(prop)]
        if recorded:
            sentinels = [None if a is None else Variable.from_array(a) for a in sentinels]
        got = case.run(prop, [False] * n, sentinels, recorded=recorded)
        for i, p in enumerate(prop):
            if p:
                if _max_err(got[i], over[i]) > 1:
                    return (
                        f"{case.label}, input {i}: its gradient changed when another "
                        f"input's prop_down was false (prop_down={prop}){_PATHS[recorded]}"
                    )
            elif got[i] is not sentinels[i] or not bool((_numpy(got[i]) == 7.0).all()):
                return (
                    f"{case.label}, input {i}: prop_down[{i}] is false but backward_impl "
                    f"touched its gradient (prop_down={prop}){_PATHS[recorded]}"
                )
    return None


def _freed(case: _NodeCase) -> str | None:
    over = case.over()
    node = case.node
    n = len(case.prop)
    data = [api.value_of(x) if node.needs_input(i) else None for i, x in enumerate(node.inputs)]
    ydata = [y if node.need_outputs else None for y in case.output_data]
    declared = f"need_inputs={node.need_inputs!r}, need_outputs={node.need_outputs!r}"
    try:
        got = case.run(case.prop, [False] * n, [None] * n, input_data=data, output_data=ydata)
    except Exception as e:
        return (
            f"{case.label}: backward_impl failed with the buffers it declared unneeded "
            f"freed ({declared}): {type(e).__name__}: {e}"
        )
    for i, p in enumerate(case.prop):
        if p and _max_err(got[i], over[i]) > 1:
            return (
                f"{case.label}, input {i}: the gradient changed with the unneeded buffers "
                f"freed ({declared})"
            )
    return None


def _freed_end_to_end(sub: _Subject) -> str | None:
    vs = sub.variables(sub.xs)
    s = sub.scalar(1)(*vs)
    s.backward()
    with auto_forward(False):
        svs = [
            Variable(x.shape, need_grad=i in sub.diff, dtype=x.dtype) for i, x in enumerate(sub.xs)
        ]
        ss = sub.scalar(1)(*svs)
    for v, x in zip(svs, sub.xs, strict=True):
        v.d = x
    ss.forward(clear_buffer=True)
    ss.backward(clear_buffer=True)
    for i in sub.diff:
        if _max_err(svs[i].g, vs[i].g) > 1:
            return (
                f"input {i}: after forward(clear_buffer=True), backward() gives another "
                "gradient: a rule reads a buffer that need_inputs/need_outputs let the "
                "engine free"
            )
    return None


def _static(sub: _Subject, order: int) -> str | None:
    xs = sub.xs
    dyn = sub.variables(xs)
    ys = outputs_of(sub.call(dyn))
    wanted = [dyn[i] for i in sub.diff]
    rng = np.random.default_rng(7)
    xp = array_module(xs[sub.diff[0]])
    vdirs = [xp.asarray(_draw(rng, xs[i].shape, xs[i].dtype)) for i in sub.diff]

    def grads(vs: Sequence[Variable]) -> list[Variable]:
        w = [vs[i] for i in sub.diff]
        g1 = grad(sub.scalar(1)(*vs), w, allow_unused=True)
        if order < 2:
            return g1
        dot = None
        for g, v in zip(g1, vdirs, strict=True):
            t = F.sum(g * v)
            t = F.real(t) if t.dtype.kind == "c" else t
            dot = t if dot is None else dot + t
        assert dot is not None
        return [*g1, *grad(dot, w, allow_unused=True)]

    dyn_grads = grads(dyn)
    # a static graph makes its seeds and constants in the context: the inputs' backend
    ctx = Context(backend="cupy" if xp is not np else "numpy", dtype=get_default_context().dtype)
    with auto_forward(False), context_scope(ctx):
        svs = [Variable(x.shape, need_grad=i in sub.diff, dtype=x.dtype) for i, x in enumerate(xs)]
        sys_ = outputs_of(sub.call(svs))
        for j, (a, b) in enumerate(zip(sys_, ys, strict=True)):
            if a.shape != b.shape or a.dtype != b.dtype:
                return (
                    f"output {j}: the static graph declares {a.shape} {a.dtype}, the "
                    f"computed output is {b.shape} {b.dtype} (setup_impl disagrees with "
                    "forward_impl)"
                )
        static_grads = grads(svs)
    for v, x in zip(svs, xs, strict=True):
        v.d = x
    for j, (a, b) in enumerate(zip(sys_, ys, strict=True)):
        a.forward()
        if _max_err(a.d, b.d) > 1:
            return f"output {j}: static forward differs from dynamic by {_abs_diff(a.d, b.d):.2e}"
    n1 = len(wanted)
    for k, (a, b) in enumerate(zip(static_grads, dyn_grads, strict=True)):
        a.forward()
        if _max_err(a.d, b.d) > 1:
            what = "gradient" if k < n1 else "second-order gradient (Hessian-vector product)"
            return (
                f"input {sub.diff[k % n1]}: the {what} built in a static graph (before any "
                f"value exists) differs from the dynamic one by {_abs_diff(a.d, b.d):.2e}: "
                "does a backward rule branch on values?"
            )
    return None


def _float32(sub: _Subject) -> str | None:
    xs = [x.astype(_NARROW[x.dtype.kind]) if x.dtype.kind in "fc" else x for x in sub.xs]
    vs = sub.variables(xs)
    ys = outputs_of(sub.call(vs))
    for j in sub.float_out:
        if ys[j].dtype not in (np.float32, np.complex64):
            return f"output {j} has dtype {ys[j].dtype} for float32 (complex64) inputs"
    y = sub.scalar(1)(*vs)
    ins = [vs[i] for i in sub.diff]
    # the recording pass itself: hd.grad casts each result to its input's dtype, so it
    # would hide a rule that promotes the gradients flowing through the graph
    xp = array_module(y.d)
    seed = Variable.from_array(xp.ones(y.shape, dtype=y.dtype))
    gs = api.grad_graph([y], ins, [seed])
    for i, g in zip(sub.diff, gs, strict=True):
        if g is not None and g.dtype != xs[i].dtype:
            return f"the gradient of input {i} has dtype {g.dtype} for {xs[i].dtype} inputs"
    return None


def _custom_nodes(sub: _Subject) -> list[Function]:
    vs = sub.variables(sub.xs)
    ys = outputs_of(sub.call(vs))
    sub._keep = (vs, ys)  # the nodes' outputs stay alive for the node-level checks
    nodes = api.topological_order([ys[j] for j in sub.float_out])
    if sub.primitive is not None:
        return [f for f in nodes if type(f) is sub.primitive]
    return [f for f in nodes if type(f) not in REGISTRY]


def _node_property(
    rows: list[CheckRow],
    prop: str,
    cases: list[_NodeCase],
    check: Callable[[_NodeCase], str | None],
    then: Callable[[], str | None] | None = None,
) -> None:
    def run_all() -> str | tuple[bool, str] | None:
        problem = then() if then is not None else None
        if problem is not None:
            return problem
        if not cases:
            return True, "no custom primitive in f's graph (hodiff's own are checked by hodiff)"
        for case in cases:
            try:
                problem = check(case)
            except Exception as e:
                problem = f"{case.label}: backward_impl raised {type(e).__name__}: {e}"
            if problem is not None:
                return problem
        names = sorted({type(c.node).__name__ for c in cases})
        return True, f"{len(cases)} node(s) of {', '.join(names)}"

    _run(rows, prop, run_all)


# ---------------------------------------------------------------- entry point
def check_function(
    f: Function | Callable[..., Any],
    inputs: Any,
    order: int = 3,
    *,
    eps: float | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
    float32: bool = True,
    raise_exception: bool = True,
) -> FunctionCheckReport:
    """Checks a custom primitive (or a function built on hodiff functions) the way hodiff
    checks its own.

    The properties, in order (see the module docstring for each):
    ``finite differences, order k`` for ``k = 1..order``, ``grad vs backward``,
    ``accumulate vs overwrite``, ``prop_down=False untouched``,
    ``static vs dynamic``, ``float32 preserved``, ``freed buffers``. Outputs are
    turned into a scalar with fixed random weights, ``sum_j sum(w_j * y_j)``
    (``y_j**3`` for orders >= 2). The node-level properties are checked on
    every node of ``type(f)`` when ``f`` is a Function instance, otherwise on
    every node of a primitive defined outside hodiff in ``f``'s graph.

    Args:
        f: a :class:`hodiff.Function` instance (called once per check, each
            call linking a new node) or a callable ``f(*Variables)`` returning a
            Variable or a tuple of them.
        inputs: arrays, scalars or Variables (one, or a tuple). Float inputs are
            checked in float64, complex ones in complex128 (the finite differences along
            their real and imaginary parts); integer inputs (labels, indices) are passed
            through.
        order: highest derivative order checked against finite differences.
        eps: finite-difference step (see :func:`hodiff.gradcheck`).
        atol: absolute tolerance of the finite-difference checks.
        rtol: relative tolerance of the finite-difference checks.
        seed: of the output weights and gradients.
        float32: also check that float32 inputs give float32 outputs and gradients.
        raise_exception: raise :class:`hodiff.GradcheckError` (its message the
            table of properties, the failed ones marked FAIL) when a property
            fails; otherwise return the report.

    Returns:
        A :class:`FunctionCheckReport`, truthy when every property held;
        ``report["grad vs backward"]`` is one row.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.testing import check_function
    >>> report = check_function(lambda x, w: F.tanh(x * w), (np.array([0.3, -0.7]),
    ...                                                       np.array([1.5, 0.5])))
    >>> bool(report), [r.property for r in report.rows][:4]   # doctest: +NORMALIZE_WHITESPACE
    (True, ['finite differences, order 1', 'finite differences, order 2',
            'finite differences, order 3', 'grad vs backward'])

    """
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"check_function: order must be an integer >= 1, got {order!r}")
    sub = _Subject(f, inputs, seed)
    name = type(f).__name__ if isinstance(f, Function) else getattr(f, "__name__", repr(f))
    report = FunctionCheckReport(name=name)
    tol = {"eps": eps, "atol": atol, "rtol": rtol}
    _check_all(sub, report, order, tol, float32)
    if raise_exception and not report.passed:
        raise GradcheckError(str(report))
    return report


def _check_all(
    sub: _Subject,
    report: FunctionCheckReport,
    order: int,
    tol: dict[str, Any],
    float32: bool,
) -> None:
    rows = report.rows
    _finite_differences(rows, report, sub, order, tol)
    _run(rows, "grad vs backward", lambda: _grad_vs_backward(sub))
    try:
        cases = [_NodeCase(node, sub.rng) for node in _custom_nodes(sub)]
    except Exception as e:
        cases = []
        rows.append(CheckRow("node-level checks", False, f"raised {type(e).__name__}: {e}"))
    _node_property(rows, "accumulate vs overwrite", cases, _accumulate)
    _node_property(rows, "prop_down=False untouched", cases, _prop_down)
    _run(rows, "static vs dynamic", lambda: _static(sub, order))
    if float32:
        _run(rows, "float32 preserved", lambda: _float32(sub))
    _node_property(rows, "freed buffers", cases, _freed, then=lambda: _freed_end_to_end(sub))
