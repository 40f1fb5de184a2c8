"""Simplifying a frozen program: constants, identities, common subexpressions, dead code.

One pass in order, then one backwards:

* constants: a step whose inputs are all constants (and that has no effect) runs now and
  its outputs become constants (the broadcast seeds of a gradient, ``1 - 0.5``);
* identities: ``x * 1``, ``x + 0``, ``x - 0``, ``x * ones``, ``x + zeros``, a reshape,
  broadcast or cast to what ``x`` already is, ``F.identity``: the output is ``x`` itself;
  a reshape of a reshape reads the first one's input;
* common subexpressions: a step of the same primitive, static arguments and inputs as an
  earlier one gives that one's outputs;
* dead code: steps whose outputs no result needs are dropped.

A primitive whose forward has an effect beyond its outputs (``effects = True`` in its
class: random draws, running statistics, communication) is never folded, merged or dropped.
Every rewrite keeps the output's shape and dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hodiff.engine.context import array_module
from hodiff.functions.arithmetic import Add2, AddScalar, Identity, Mul2, MulScalar, Sub2
from hodiff.functions.array import Broadcast, Reshape
from hodiff.functions.shaping import Cast
from hodiff.transforms.compile.record import Program, Step
from hodiff.transforms.compile.replay import run_step

__all__ = ["has_effects", "simplify"]


def has_effects(step: Step) -> bool:
    """Whether the step's forward does more than compute its outputs (``effects``)."""
    return type(step.node).effects


class _UnhashableError(Exception):
    """A static argument with no value key (an object): the step is not merged."""


_ATOMS = frozenset((type(None), str, bool, int, float, complex))


def _frozen(a: Any) -> Any:
    """A hashable key equal for equal static arguments (type included: 1, 1.0, True differ)."""
    kind = type(a)
    if kind in _ATOMS:
        return (kind, a)
    if kind is tuple and not a:
        return (tuple,)
    if isinstance(a, np.generic | np.dtype):
        return (type(a).__name__, a if not isinstance(a, np.dtype) else a.str)
    if isinstance(a, tuple | list):
        return (type(a).__name__, *(_frozen(b) for b in a))
    if isinstance(a, dict):
        return ("dict", *sorted((k, _frozen(v)) for k, v in a.items()))
    if isinstance(a, slice):
        return ("slice", _frozen(a.start), _frozen(a.stop), _frozen(a.step))
    if a is Ellipsis:
        return ("...",)
    if type(a) is np.ndarray:
        return ("array", a.shape, a.dtype.str, a.tobytes())
    raise _UnhashableError


_ENGINE_FIELDS = ("inputs", "seq", "static_arguments")


def _key(step: Step, ins: tuple[int, ...]) -> Any:
    """What makes two steps the same computation: primitive, static arguments, inputs."""
    node = step.node
    public = {
        k: v for k, v in vars(node).items() if not k.startswith("_") and k not in _ENGINE_FIELDS
    }
    return (type(node), len(step.outs), _frozen(node.static_arguments), _frozen(public), ins)


def _all_equal(c: Any, value: float) -> bool:
    return bool(array_module(c).all(c == value))


def _identity_of(step: Step, ins: tuple[int, ...], prog: Program) -> int | None:
    """The slot ``step``'s one output equals (an identity), or None."""
    node, consts = step.node, prog.constants
    if len(step.outs) != 1 or not ins:
        return None
    out = prog.specs[step.outs[0]]
    candidate: int | None = None
    kind = type(node)
    if kind is Identity or kind is Reshape or kind is Broadcast or kind is Cast:
        candidate = ins[0]
    elif kind is MulScalar:
        candidate = ins[0] if getattr(node, "val", None) == 1 else None
    elif kind is AddScalar:
        candidate = ins[0] if getattr(node, "val", None) == 0 else None
    elif kind is Mul2 or kind is Add2 or kind is Sub2:
        neutral = 1.0 if kind is Mul2 else 0.0
        a, b = ins
        if b in consts and _all_equal(consts[b], neutral):
            candidate = a
        elif kind is not Sub2 and a in consts and _all_equal(consts[a], neutral):
            candidate = b
    if candidate is None:
        return None
    shape, dtype = prog.specs[candidate]
    return candidate if shape == out[0] and np.dtype(dtype) == np.dtype(out[1]) else None


def _fold(step: Step, ins: tuple[int, ...], prog: Program) -> bool:
    """Runs a step whose inputs are all constants now; its outputs become constants."""
    if has_effects(step) or not all(s in prog.constants for s in ins):
        return False
    try:
        ys = run_step(
            step.node, [prog.constants[s] for s in ins], [prog.specs[o] for o in step.outs]
        )
    except Exception:  # left to run (and raise) at call time, as the uncompiled graph does
        return False
    for o, y in zip(step.outs, ys, strict=True):
        prog.constants[o] = y
    return True


def simplify(prog: Program) -> Program:
    """``prog`` simplified in place (see the module docstring); ``prog.alias`` maps each
    slot that was rewritten away to the slot holding its value.
    """
    alias: dict[int, int] = {}

    def find(s: int) -> int:
        root = s
        while root in alias:
            root = alias[root]
        while s != root:  # path compression: the next find of s is one lookup
            alias[s], s = root, alias[s]
        return root

    producer: dict[int, Step] = {}
    seen: dict[Any, tuple[int, ...]] = {}
    steps: list[Step] = []
    for step in prog.steps:
        ins = tuple(find(s) for s in step.ins)
        if _fold(step, ins, prog):
            continue
        same = _identity_of(step, ins, prog)
        if same is not None:
            alias[step.outs[0]] = same
            continue
        if type(step.node) is Reshape and ins[0] in producer:
            first = producer[ins[0]]
            if type(first.node) is Reshape:
                ins = first.ins  # a reshape of a reshape: one reshape of the first's input
        if not has_effects(step):
            try:
                key = _key(step, ins)
            except _UnhashableError:
                key = None
            if key is not None:
                earlier = seen.get(key)
                if earlier is not None:
                    for o, e in zip(step.outs, earlier, strict=True):
                        alias[o] = e
                    continue
                seen[key] = step.outs
        new = Step(step.node, ins, step.outs)
        for o in step.outs:
            producer[o] = new
        steps.append(new)
    prog.outputs = [find(s) for s in prog.outputs]
    prog.steps = _live(steps, prog.outputs)
    prog.alias = {s: find(s) for s in alias}
    return prog


def _live(steps: list[Step], outputs: list[int]) -> list[Step]:
    """The steps a result needs (or that have effects), in order."""
    needed = set(outputs)
    kept: list[Step] = []
    for step in reversed(steps):
        if has_effects(step) or any(o in needed for o in step.outs):
            kept.append(step)
            needed.update(step.ins)
    kept.reverse()
    return kept
