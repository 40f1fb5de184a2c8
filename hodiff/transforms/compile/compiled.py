"""``hd.jit(f)`` and ``hd.compile(outputs)``: record once per signature, simplify, replay.

``hd.jit(f)`` records ``f`` as a static graph on argument placeholders (unfilled leaves
with ``need_grad=True``), freezes it (:mod:`record`), simplifies it (:mod:`simplify`),
gives its values registers by liveness (:mod:`schedule`) and generates its replay
(:mod:`replay`). Called with arrays it runs the program; called with Variables it links
one :class:`CompiledCall` node whose forward runs the program and whose backward calls
another ``hd.jit`` function, the vector-Jacobian product of ``f`` (``hd.grad`` of ``f``
seeded with the output gradients), so every derivative of a compiled function is compiled,
to any order.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.autograd import grad
from hodiff.engine.context import array_module
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.transforms.compile import fused
from hodiff.transforms.compile.record import CompileError, Program, freeze, recording_of
from hodiff.transforms.compile.replay import Replay, interpret
from hodiff.transforms.compile.schedule import schedule
from hodiff.transforms.compile.simplify import has_effects, simplify

__all__ = ["CompiledCall", "Jit", "Stats", "StaticProgram", "compile", "jit"]

BACKENDS = ("auto", "replay", "fused")


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a program is built: recording and lowering a
    graph make thousands of objects, which each collection of the young generations would
    scan again (a quarter of a 2,000-node build); cycles made meanwhile are collected by
    the first collection after.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _backend(where: str, backend: str) -> str:
    """The backend to use for ``backend`` (``"auto"``: the best installed)."""
    if backend not in BACKENDS:
        raise ValueError(f"{where}: backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "fused" and not fused.available():
        raise ImportError(
            f"{where}: backend 'fused' needs the optional extra 'jit' "
            '(pip install -e ".[jit]"), which is not installed; backend="replay" needs '
            "nothing more"
        )
    return ("fused" if fused.available() else "replay") if backend == "auto" else backend


@dataclass
class Stats:
    """What compiling did: ``nodes_before``/``nodes_after`` simplification, ``kernels``
    (the size in nodes of each kernel the backend runs: 1 each for ``"replay"``, a fused
    cluster's members for ``"fused"``),
    ``compile_seconds`` (record, simplify, schedule and generate), ``peak_values`` (the
    most intermediate arrays alive at once).
    """

    name: str
    backend: str
    nodes_before: int
    nodes_after: int
    kernels: list[int]
    compile_seconds: float
    peak_values: int = 0
    constants: int = 0
    cached: bool = False  # "fused": the kernels' code was read from the disk cache

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.nodes_before} nodes recorded, {self.nodes_after} after "
            f"simplification, {len(self.kernels)} kernels ({self.backend}), "
            f"{self.constants} constants, at most {self.peak_values} intermediate arrays alive, "
            f"compiled in {self.compile_seconds * 1e3:.1f} ms"
        )


@dataclass
class Built:
    """One program built for one signature, and what checking and differentiating it need."""

    name: str
    prog: Program
    stats: Stats
    nodes: list[Function]  # the recorded graph's nodes (the uncompiled reference)
    reference: list[Variable]  # the recorded outputs ...
    placeholders: list[Variable]  # ... and arguments
    check: bool
    replay: Replay | None = None
    differentiable: list[bool] = field(default_factory=list)

    @property
    def externals(self) -> list[Variable]:
        return [v for v, _ in self.prog.externals]

    @property
    def output_specs(self) -> list[tuple[tuple[int, ...], Any]]:
        return [self.prog.specs[s] for s in self.prog.outputs]

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        """The result arrays for the argument and external arrays ``values``."""
        if self.replay is not None:
            return _owned(self.replay.run(*values), values)
        with _collector_paused():
            return self._first(values)

    def _first(self, values: Sequence[Any]) -> list[Any]:
        """The first run: lowered for the backend, stepped, then the replay generated."""
        prog = fused.lowered(self.prog, self.stats, values)
        given = self._checked(values, prog) if self.check else None
        slots = dict(zip(prog.args + [s for _, s in prog.externals], values, strict=True))
        slots.update(prog.constants)
        fixups: set[int] = set()
        interpret(prog, slots, fixups, given)
        if given is not None:
            self._compare(slots)
        sched = schedule(prog)
        self.stats.peak_values = sched.peak
        self.replay = Replay(prog, sched, fixups, slots)
        return _owned(tuple(slots[s] for s in prog.outputs), values)

    # ------------------------------------------------------------------ check=True
    def _checked(self, values: Sequence[Any], prog: Program) -> dict[int, Sequence[Any]]:
        """Runs the uncompiled graph on ``values`` (its values stay in ``self.values``) and
        returns the outputs of the steps with effects, which the first run takes from it.
        """
        for v, a in zip(self.placeholders, values, strict=False):
            api.set_value(v, a)
        api.run(self.nodes)
        by_node = {id(s.node): i for i, s in enumerate(prog.steps)}
        given: dict[int, Sequence[Any]] = {}
        for f in self.nodes:
            i = by_node.get(id(f))
            if i is not None and has_effects(prog.steps[i]):
                given[i] = [None if o is None else api.value_of(o) for o in api.outputs_of(f)]
        return given

    def _compare(self, slots: dict[int, Any]) -> None:
        """Raises CompileError naming the first node whose compiled value differs."""
        alias = self.prog.alias
        try:
            for k, f in enumerate(self.nodes):
                for j, o in enumerate(api.outputs_of(f)):
                    s = self.prog.origin.get(id(o)) if o is not None else None
                    if o is None or s is None:
                        continue
                    s = alias.get(s, s)
                    if s not in slots:
                        continue  # dropped as dead code
                    _compare_one(self.name, k, f, j, api.value_of(o), slots[s])
        finally:
            if self.placeholders:
                api.drop_values(self.nodes)
                for v in self.placeholders:
                    api.set_value(v, None)
        self.check = False


def _compare_one(name: str, k: int, f: Function, j: int, want: Any, got: Any) -> None:
    xp = array_module(want)
    want, got = xp.asarray(want), xp.asarray(got)
    if want.shape != got.shape or want.dtype != got.dtype:
        raise CompileError(
            f"{name}: node {k} ({f.name}), output {j}: the compiled program gives shape "
            f"{got.shape} dtype {got.dtype}, the uncompiled graph shape {want.shape} "
            f"dtype {want.dtype}"
        )
    if want.dtype.kind not in "fc":
        bad = bool(xp.any(want != got))
        err = 0.0
    else:
        rtol = 1e-12 if want.dtype.itemsize * (2 if want.dtype.kind == "f" else 1) >= 16 else 1e-5
        scale = float(xp.max(xp.abs(want))) if want.size else 0.0
        diff = xp.abs(want - got)
        finite = xp.isfinite(want)
        err = float(xp.max(xp.where(finite, diff, 0.0))) if want.size else 0.0
        same_nonfinite = bool(xp.all((want == got) | finite | (xp.isnan(want) & xp.isnan(got))))
        bad = err > rtol * max(scale, 1e-300) or not same_nonfinite
    if bad:
        raise CompileError(
            f"{name}: node {k} ({f.name}), output {j} (shape {want.shape}, dtype {want.dtype}) "
            f"differs from the uncompiled graph: largest difference {err:.3g}"
        )


def _owned(ys: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    """The results, each an array of its own: a view, an argument, a constant or a result
    met before is copied (the caller may write into what it gets).
    """
    out: list[Any] = []
    seen = {id(a) for a in values}
    for y in ys:
        if y.base is not None or id(y) in seen:
            y = y.copy()
        seen.add(id(y))
        out.append(y)
    return out


def _build(
    name: str,
    outputs: Sequence[Variable],
    placeholders: Sequence[Variable],
    backend: str,
    check: bool,
    t0: float,
) -> Built:
    """Freezes, simplifies and (at the first call) schedules and generates ``outputs``' graph."""
    prog = freeze(outputs, placeholders)
    nodes = [s.node for s in prog.steps]
    simplify(prog)
    stats = Stats(
        name,
        backend,
        prog.nodes_before,
        len(prog.steps),
        [] if backend == "fused" else [1] * len(prog.steps),  # "fused": known once lowered
        0.0,
        constants=len(prog.constants),
    )
    built = Built(name, prog, stats, nodes, list(outputs), list(placeholders), check)
    built.differentiable = [np.dtype(d).kind in "fc" for _, d in built.output_specs]
    stats.compile_seconds = time.perf_counter() - t0
    return built


# ---------------------------------------------------------------------------- the node
class CompiledCall(Function, register=False):
    """A call of a compiled function as one node: inputs the arguments and the leaves the
    function reads, outputs its results; its backward calls the compiled vjp of ``f``.
    """

    need_outputs = False

    def __init__(self, *, jitted: Jit, built: Built) -> None:
        self.jitted = jitted
        self.built = built
        self.n_outputs = len(built.prog.outputs)

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"jit({self.jitted.__name__})"

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        return self.built.output_specs

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[:] = self.built(inputs)

    def backward_impl(
        self, inputs: Sequence[Any], outputs: Sequence[Any], prop_down: Any, accum: Any
    ) -> None:
        # x-bar = J^T y-bar, by the compiled vjp of f (itself a CompiledCall when recorded)
        wanted = tuple(i for i, p in enumerate(prop_down) if p)
        n = len(self.built.placeholders)
        vjp = self.jitted.vjp(self.built, wanted)
        gys = [o.grad for o, d in zip(outputs, self.built.differentiable, strict=True) if d]
        gxs = vjp(*[s.data for s in inputs[:n]], *gys)
        if not isinstance(gxs, tuple | list):
            gxs = (gxs,)
        for i, gx in zip(wanted, gxs, strict=True):
            inputs[i].store(gx, accum[i])


# ---------------------------------------------------------------------------- hd.jit
def _signature(name: str, args: Sequence[Any]) -> tuple[list[Any], tuple[Any, ...]]:
    """The argument arrays (or Variables) and the signature: shape, dtype, need_grad and
    array module of each.
    """
    items: list[Any] = []
    key = []
    for i, a in enumerate(args):
        if isinstance(a, Variable):
            key.append((a.shape, a.dtype, a.need_grad, "V"))
            items.append(a)
            continue
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            if isinstance(a, bool | int | float | complex | list):
                a = np.asarray(a)
            else:
                raise TypeError(
                    f"hd.jit({name}): argument {i} must be an array, a Variable or a number, "
                    f"got {type(a).__name__}"
                )
        key.append((tuple(a.shape), np.dtype(a.dtype), False, array_module(a).__name__))
        items.append(a)
    return items, tuple(key)


def _flat(name: str, out: Any) -> tuple[list[Variable], type | None]:
    """``f``'s result as a list of Variables, and its container (tuple, list; None: one)."""
    many = type(out) if isinstance(out, tuple | list) else None
    outs = list(out) if many is not None else [out]
    for j, y in enumerate(outs):
        if not isinstance(y, Variable):
            where = f"result {j}" if many else "the result"
            raise TypeError(
                f"hd.jit({name}): {where} of the function must be a Variable, got "
                f"{type(y).__name__} (return Variables, or a tuple or list of them)"
            )
    return outs, many


class Jit:
    """The compiled form of ``f`` (``hd.jit``): see the module docstring and docs/compile.md."""

    def __init__(self, f: Callable[..., Any], backend: str = "auto", check: bool = False) -> None:
        if not callable(f):
            raise TypeError(f"hd.jit: f must be callable, got {type(f).__name__}")
        self.f = f
        self.__name__ = getattr(f, "__name__", type(f).__name__)
        self.backend = _backend(f"hd.jit({self.__name__})", backend)
        self.check = bool(check)
        self.cache: dict[tuple[Any, ...], tuple[Built, type | None]] = {}
        self.vjps: dict[tuple[int, tuple[int, ...]], Jit] = {}
        functools.update_wrapper(self, f)  # type: ignore[arg-type]

    def _record(self, key: tuple[Any, ...], args: Sequence[Any]) -> tuple[Built, type | None]:
        t0 = time.perf_counter()
        placeholders = []
        for shape, dtype, _, _ in key:
            ph = Variable(shape, dtype=dtype)
            ph.need_grad = np.dtype(dtype).kind in "fc"
            placeholders.append(ph)
        with _collector_paused():
            with api.define_by_run(), api.symbolic(), recording_of(self.__name__, placeholders):
                out = self.f(*placeholders)
            outs, many = _flat(self.__name__, out)
            built = _build(self.__name__, outs, placeholders, self.backend, self.check, t0)
        self.cache[key] = (built, many)
        return built, many

    def _built(self, args: Sequence[Any]) -> tuple[list[Any], Built, type | None]:
        items, key = _signature(self.__name__, args)
        entry = self.cache.get(key)
        if entry is None:
            entry = self._record(key, items)
        return items, *entry

    def __call__(self, *args: Any) -> Any:
        items, built, many = self._built(args)
        if any(isinstance(a, Variable) for a in items):
            ys = CompiledCall(jitted=self, built=built)(*items, *built.externals)
            ys = list(ys) if isinstance(ys, tuple) else [ys]
        else:
            ys = built([*items, *(_value(v) for v in built.externals)])
        return many(ys) if many is not None else ys[0]

    def lower(self, *args: Any) -> Stats:
        """What compiling ``f`` for these arguments' signature did (records it if needed)."""
        _, built, _ = self._built(args)
        return _planned(built)

    def vjp(self, built: Built, wanted: tuple[int, ...]) -> Jit:
        """The compiled ``(x, ybar) -> J^T ybar`` for the node inputs ``wanted``."""
        key = (id(built), wanted)
        g = self.vjps.get(key)
        if g is None:
            g = self.vjps[key] = Jit(_vjp_of(self.f, built, wanted), self.backend, self.check)
        return g


def _planned(built: Built) -> Stats:
    """``built``'s stats, its registers and kernels planned if it never ran."""
    if built.replay is None:  # schedule (and cluster) without running
        built.stats.peak_values = schedule(built.prog).peak
        if built.stats.backend == "fused":
            built.stats.kernels = fused.kernel_sizes(built.prog)
    return built.stats


def _value(v: Variable) -> Any:
    a = api.value_of(v)
    return v.d if a is None else a


def _vjp_of(f: Callable[..., Any], built: Built, wanted: tuple[int, ...]) -> Callable[..., Any]:
    """``(x..., ybar...) -> J^T ybar`` of ``f`` for the inputs ``wanted`` of its node."""
    n = len(built.placeholders)
    externals = built.externals

    def vjp(*a: Variable) -> tuple[Variable, ...]:
        xs, gys = a[:n], list(a[n:])
        ys, _ = _flat(getattr(f, "__name__", "f"), f(*xs))
        ys = [y for y, d in zip(ys, built.differentiable, strict=True) if d]
        wrt = [xs[i] if i < n else externals[i - n] for i in wanted]
        return tuple(grad(ys, wrt, grad_outputs=gys, allow_unused=True))

    vjp.__name__ = f"vjp_{getattr(f, '__name__', 'f')}"
    return vjp


def jit(f: Callable[..., Any], *, backend: str = "auto", check: bool = False) -> Jit:
    """``f`` compiled: recorded once per signature of its arguments, simplified and replayed.

    ``f`` is called with Variables and returns a Variable or a tuple/list of them; it may call
    ``hd.grad`` inside. Called with arrays the result is arrays; called with Variables,
    Variables whose node's backward is itself compiled (any order). See docs/compile.md.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> g = hd.jit(lambda x: F.sum(F.tanh(x) * 2.0))
    >>> float(g(np.zeros(3)))
    0.0
    """
    return Jit(f, backend, check)


# ---------------------------------------------------------------------------- hd.compile
class StaticProgram:
    """A recorded static graph compiled (``hd.compile``): ``prog()`` recomputes the outputs'
    ``.d`` from the leaves' current values, as ``y.forward()`` would.
    """

    def __init__(self, outputs: Any, backend: str = "auto", check: bool = False) -> None:
        outs = list(outputs) if isinstance(outputs, tuple | list) else [outputs]
        for j, y in enumerate(outs):
            if not isinstance(y, Variable):
                raise TypeError(
                    f"hd.compile: outputs[{j}] must be a Variable, got {type(y).__name__}"
                )
        self.outputs = outs
        self.backend = _backend("hd.compile", backend)
        self.check = bool(check)
        self.built: Built | None = None
        self.shapes: list[tuple[int, ...]] = []

    def _leaves_shapes(self) -> list[tuple[int, ...]]:
        assert self.built is not None
        return [v.shape for v in self.built.externals]

    def __call__(self) -> None:
        """Recomputes every output's value from the leaves' current values."""
        if self.built is not None and self._leaves_shapes() != self.shapes:
            api.forward(self.outputs)  # follows the new shapes (reset_shape), then rebuild
            self.built = None
            self._build()
            return
        if self.built is None:
            self._build()
        assert self.built is not None
        ys = self.built([_value(v) for v in self.built.externals])
        for v, y in zip(self.outputs, ys, strict=True):
            api.set_value(v, y)

    forward = __call__

    def _build(self) -> None:
        with _collector_paused():
            self.built = _build(
                "hd.compile", self.outputs, [], self.backend, self.check, time.perf_counter()
            )
        self.shapes = self._leaves_shapes()

    def stats(self) -> Stats:
        """What compiling did (builds the program if needed)."""
        if self.built is None:
            self._build()
        assert self.built is not None
        return _planned(self.built)


def compile(outputs: Any, *, backend: str = "auto", check: bool = False) -> StaticProgram:
    """The static graph of ``outputs`` (recorded with ``hd.auto_forward(False)``) compiled:
    ``prog()`` recomputes the outputs' values from the leaves' current values.
    """
    return StaticProgram(outputs, backend, check)
