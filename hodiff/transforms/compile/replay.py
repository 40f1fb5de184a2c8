"""The ``"replay"`` backend: each primitive's array kernel, called in order.

The program becomes one generated Python function of straight-line code: per step, the
primitive's ``forward_impl`` called on a tuple of the input arrays with one reused output
list, its result bound to a local name (the register :mod:`schedule` gave it). No
Variable, no node lookup, no loop and no per-node bookkeeping remain: what is left per
step is the kernel's own call. A step whose kernel returns a numpy scalar or a dtype other
than declared (what a static graph's forward fixes up) calls :func:`run_step` instead;
the first run (:func:`interpret`) finds which.

``Y = [None]; k3((r0, r1), Y); r2 = Y[0]`` is the whole cost model: about one Python call
and a tuple above numpy's own work per primitive (docs/compile.md has the measured picture).
A primitive that declares its numpy ufunc (``_fast_forward``) is called as that ufunc,
``r2 = u3(r1, v3)``, with its scalar bound once: numpy's own call and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.context import array_module
from hodiff.engine.function import Function

__all__ = ["Replay", "interpret", "run_step"]

_FLOAT64 = np.dtype(np.float64)


def run_step(node: Function, xs: Sequence[Any], specs: Sequence[tuple[Any, Any]]) -> list[Any]:
    """The outputs of ``node`` on the arrays ``xs``, as a static graph's forward stores them
    (:func:`fixed_outputs`).
    """
    ys: list[Any] = [None] * len(specs)
    node.forward_impl(xs, ys)
    return fixed_outputs(node, xs, ys, specs)


def fixed_outputs(
    node: Function, xs: Sequence[Any], ys: list[Any], specs: Sequence[tuple[Any, Any]]
) -> list[Any]:
    """The kernel's outputs ``ys`` fixed up as a static graph's forward stores them: numpy
    scalars made 0-d arrays, floats in their declared dtype (numpy computes float16 from
    small integers where float64 is declared: the kernel then runs again on floats).
    """
    ys = [np.asarray(y) if type(y) is not np.ndarray and array_module(y) is np else y for y in ys]
    declared = [np.dtype(d) for _, d in specs]
    if all(y.dtype == d or d.kind != "f" for y, d in zip(ys, declared, strict=True)):
        return ys
    if any(getattr(x, "dtype", _FLOAT64).kind in "biu" for x in xs):
        wanted = next(d for d in declared if d.kind == "f")
        cast = [x.astype(wanted) if getattr(x, "dtype", _FLOAT64).kind in "biu" else x for x in xs]
        ys = [None] * len(specs)
        node.forward_impl(cast, ys)
    return [
        y.astype(d) if d.kind == "f" and y.dtype != d else y
        for y, d in zip(ys, declared, strict=True)
    ]


def _plain(y: Any, spec: tuple[Any, Any]) -> bool:
    """Whether a kernel's output needs no fix-up: an array of the declared dtype."""
    d = np.dtype(spec[1])
    if type(y) is not np.ndarray and array_module(y) is np:
        return False
    return bool(y.dtype == d or d.kind != "f")


def interpret(
    prog: Any,
    values: dict[int, Any],
    fixups: set[int] | None = None,
    given: dict[int, Sequence[Any]] | None = None,
) -> None:
    """Runs ``prog`` step by step into ``values`` (slot -> array), keeping every value.

    ``fixups`` collects the steps whose kernels need :func:`run_step`'s fix-up; ``given``
    holds, per step index, outputs to take instead of running it (``check=True`` takes a
    step with effects from the uncompiled run, so that it runs once per call).
    """
    for i, step in enumerate(prog.steps):
        specs = [prog.specs[o] for o in step.outs]
        if given is not None and i in given:
            ys = list(given[i])
        else:
            xs = [values[s] for s in step.ins]
            raw: list[Any] = [None] * len(step.outs)
            step.node.forward_impl(xs, raw)
            if fixups is not None and not all(
                _plain(y, s) for y, s in zip(raw, specs, strict=True)
            ):
                fixups.add(i)
            fix = fixups is None or i in fixups
            ys = fixed_outputs(step.node, xs, raw, specs) if fix else raw
        for o, y in zip(step.outs, ys, strict=True):
            values[o] = y


class Replay:
    """``prog`` as one generated function of its argument and external arrays, returning
    its result arrays (see the module docstring).
    """

    def __init__(
        self, prog: Any, sched: Any, fixups: set[int], values: dict[int, Any] | None = None
    ) -> None:
        self.source, env = self._generate(prog, sched, fixups, values or {})
        namespace: dict[str, Any] = {}
        exec(compile(self.source, "<hodiff.jit program>", "exec"), namespace)
        self.run: Callable[..., tuple[Any, ...]] = namespace["make"](**env)

    @staticmethod
    def _generate(
        prog: Any, sched: Any, fixups: set[int], values: dict[int, Any]
    ) -> tuple[str, dict[str, Any]]:
        """The source of ``make(**env)``, which returns the program's function, and env.

        ``values`` (slot -> array of the first run) shows which steps read numpy arrays:
        those whose primitive declares its ufunc become ``r2 = u3(r1, v3)`` (:func:`_ufunc`).
        """
        env: dict[str, Any] = {}
        name: dict[int, str] = {}
        for k, s in enumerate(prog.args):
            name[s] = f"a{k}"
        for k, (_, s) in enumerate(prog.externals):
            name[s] = f"e{k}"
        for s, c in prog.constants.items():
            name[s] = f"c{s}"
            env[f"c{s}"] = c
        params = [name[s] for s in prog.args] + [f"e{k}" for k in range(len(prog.externals))]
        body: list[str] = []
        arities: set[int] = set()
        for i, step in enumerate(prog.steps):
            outs = []
            for o in step.outs:
                r = sched.register.get(o)
                name[o] = "_" if r is None else f"r{r}"
                outs.append(name[o])
            ins = [name[s] for s in step.ins]
            body.extend(_step_lines(i, step, ins, outs, env, prog.specs, fixups, values))
            if i not in fixups and f"k{i}" in env:
                arities.add(len(outs))
        results = "".join(name[s] + ", " for s in prog.outputs)
        lines = [
            f"def make({', '.join(env)}):",
            f"    def program({', '.join(params)}):",
            *(f"        Y{n} = [None] * {n}" for n in sorted(arities)),
            *(f"        {line}" for line in body),
            f"        return ({results})",
            "    return program",
        ]
        return "\n".join(lines) + "\n", env


def _step_lines(
    i: int,
    step: Any,
    ins: list[str],
    outs: list[str],
    env: dict[str, Any],
    specs: dict[int, Any],
    fixups: set[int],
    values: dict[int, Any],
) -> list[str]:
    """Step ``i``'s lines of code (its callables and constants go to ``env``): the declared
    ufunc (``r2 = u3(r1, v3)``), the fixed-up kernel, or ``forward_impl`` into ``Y{n}``.
    """
    call = None if i in fixups else _ufunc(step, specs, values)
    if call is not None:
        env[f"u{i}"] = call[0]
        if len(call) == 2:
            env[f"v{i}"] = call[1]
            return [f"{outs[0]} = u{i}({ins[0]}, v{i})"]
        return [f"{outs[0]} = u{i}({ins[0]})"]
    args = "".join(a + ", " for a in ins)
    if i in fixups:
        env[f"k{i}"] = _fixed(step.node, [specs[o] for o in step.outs])
        return [f"{', '.join(outs)}, = k{i}(({args}))"]
    env[f"k{i}"] = step.node.forward_impl
    n = len(outs)
    return [f"k{i}(({args}), Y{n})", f"{', '.join(outs)}, = Y{n}"]


def _fixed(node: Function, specs: list[tuple[Any, Any]]) -> Callable[[Sequence[Any]], list[Any]]:
    def kernel(xs: Sequence[Any]) -> list[Any]:
        return run_step(node, xs, specs)

    return kernel


def _ufunc(step: Any, specs: dict[int, Any], values: dict[int, Any]) -> tuple[Any, ...] | None:
    """``(ufunc,)`` or ``(ufunc, val)`` where ``step`` may call its primitive's declared
    ufunc inline (:func:`api.inline_ufunc`: ``y = ufunc(x)`` or ``ufunc(x, val)``), else None.

    Only on a numpy array (the engine's fast paths' condition). A Python float ``val`` on
    a float array is bound as a 0-d array of the array's dtype: the same value numpy casts
    the float to (a Python scalar is weak), without converting it again at every call.
    """
    declared = api.inline_ufunc(step.node)
    if declared is None or len(step.ins) != 1 or len(step.outs) != 1:
        return None
    if type(values.get(step.ins[0])) is not np.ndarray:
        return None
    uf, with_val = declared
    if not with_val:
        return (uf,)
    val = step.node.val
    dtype = np.dtype(specs[step.ins[0]][1])
    if type(val) is float and dtype.kind == "f":
        return (uf, np.asarray(val, dtype=dtype))
    return (uf, val)
