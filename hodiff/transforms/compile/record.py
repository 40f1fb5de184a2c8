"""Freezing a recorded static graph into a flat program.

A program is a list of steps ``(node, input slots, output slots)`` over numbered slots,
one slot per value: the arguments first, then the leaves the graph reads (parameters,
read again at every call), then the constants (leaves that only the graph holds), then
the outputs of the steps. A step keeps its primitive (the node: its ``forward_impl`` is
the array kernel and its static arguments are its attributes), never a Variable.

While ``hd.jit`` records ``f``, a read of a value that depends on the arguments (``.d``,
``bool(v)``, ``float(v)``, ``.item()``, ``.numpy()``) raises :class:`TracingError`: in a
static graph nothing has a value yet, and a value read would freeze one branch of ``f``.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine import variable as _variable
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable

__all__ = ["CompileError", "Program", "Step", "TracingError", "freeze", "recording_of"]


class TracingError(RuntimeError):
    """A value was read while ``hd.jit`` recorded a function (it has none yet)."""


class CompileError(RuntimeError):
    """A compiled program's first run differs from the uncompiled graph (``check=True``)."""


# ---------------------------------------------------------------------------- tracing
#: while ``hd.jit`` records: (the function's name, ids of its argument placeholders)
_RECORDING: contextvars.ContextVar[tuple[str, frozenset[int]] | None] = contextvars.ContextVar(
    "hodiff_jit_recording", default=None
)

#: the Variable methods that read a value, as the user wrote the call
_CALLS = {
    "__bool__": "bool(v)",
    "__float__": "float(v)",
    "item": "v.item()",
    "numpy": "v.numpy()",
    "tolist": "v.tolist()",
}


class recording_of:  # noqa: N801 (a context manager used as a function)
    """Marks the ``with`` block as ``hd.jit`` recording ``name`` on ``placeholders``."""

    def __init__(self, name: str, placeholders: Sequence[Variable]) -> None:
        self.state = (name, frozenset(id(v) for v in placeholders))

    def __enter__(self) -> None:
        self.token = _RECORDING.set(self.state)

    def __exit__(self, *exc: object) -> None:
        _RECORDING.reset(self.token)


def _call_name() -> str:
    """The outermost value-reading method of Variable on the stack, as the user wrote it."""
    name = "v.d"
    frame: Any = sys._getframe(2)
    for _ in range(6):
        if frame is None or frame.f_code.co_filename != _variable.__file__:
            break
        name = _CALLS.get(frame.f_code.co_name, name)
        frame = frame.f_back
    return name


def _unfilled_read(v: Variable) -> None:
    """Called by ``Variable.d`` for a Variable without a value: while ``hd.jit`` records,
    a Variable made from the arguments (or an argument) raises :class:`TracingError`.
    """
    state = _RECORDING.get()
    if state is None:
        return
    fname, placeholders = state
    if v.parent is None and id(v) not in placeholders:
        return  # an unfilled leaf of f's own: zeros, as always
    made = "an argument" if v.parent is None else f"the output of {v.parent.name}"
    call = _call_name()
    raise TracingError(
        f"hd.jit({fname}): {call} reads the value of {made} (shape {v.shape}, dtype {v.dtype}) "
        "while the function is recorded, when no value exists yet: a compiled function runs "
        "the same primitives for every value. Choose by value with F.where(condition, a, b) "
        "(or F.maximum, F.clip_by_value), or call the function uncompiled"
    )


_variable.register(unfilled_read=_unfilled_read)


# ---------------------------------------------------------------------------- programs
@dataclass
class Step:
    """One primitive of a program: its node (the kernel and static arguments) and slots."""

    node: Function
    ins: tuple[int, ...]
    outs: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class Program:
    """A flat program over slots (see the module docstring).

    ``specs[s]`` is slot ``s``'s (shape, dtype); ``args`` the argument slots in order;
    ``externals`` the leaves read at every call with their slots; ``constants`` the values
    of constant slots; ``outputs`` the slots of the results. ``origin`` maps each recorded
    Variable (by id) to its slot (``hd.compile``'s check reads the graph through it).
    """

    specs: list[tuple[tuple[int, ...], Any]]
    args: list[int]
    externals: list[tuple[Variable, int]]
    constants: dict[int, Any]
    steps: list[Step]
    outputs: list[int]
    nodes_before: int = 0
    origin: dict[int, int] = field(default_factory=dict)
    held: list[Variable] = field(default_factory=list)
    alias: dict[int, int] = field(default_factory=dict)

    def new_slot(self, shape: tuple[int, ...], dtype: Any) -> int:
        self.specs.append((tuple(shape), dtype))
        return len(self.specs) - 1


def freeze(
    outputs: Sequence[Variable], args: Sequence[Variable], *, constants: bool = True
) -> Program:
    """The program of the static graph of ``outputs`` with ``args`` as its arguments.

    Every other leaf is read at every call, unless ``constants`` and only the graph holds it
    (then its value now is a constant of the program).
    """
    nodes = api.topological_order(outputs)
    prog = Program([], [], [], {}, [], [], nodes_before=len(nodes))
    slot: dict[int, int] = {}
    keep: list[Variable] = []  # the Variables whose ids are keys of ``slot``
    for a in args:
        slot[id(a)] = prog.new_slot(a.shape, a.dtype)
        prog.args.append(slot[id(a)])
        keep.append(a)
    uses: dict[Variable, int] = {}
    for f in nodes:
        for x in f.inputs:
            if x.parent is None and id(x) not in slot:
                uses[x] = uses.get(x, 0) + 1
    for v in outputs:
        if v.parent is None and id(v) not in slot:
            uses[v] = uses.get(v, 0) + 1
    # a leaf that only the graph holds is a constant (a wrapped scalar, a gradient's seed):
    # no one else can change it. Its references beyond the graph's input lists are those of
    # this frame, counted on a probe leaf held the same way.
    probe = Variable.from_array(np.zeros(()))
    uses[probe] = 0
    leaves = list(uses)  # the probe last
    for v in leaves[:-1]:
        s = slot[id(v)] = prog.new_slot(v.shape, v.dtype)
        keep.append(v)
        value = api.value_of(v)
        holders = sys.getrefcount(v) - uses[v] - sys.getrefcount(probe)
        if constants and value is not None and not v.need_grad and holders <= 2:
            prog.constants[s] = value  # 2: ``keep`` and the loop's list, not the probe's
        else:
            prog.externals.append((v, s))
    del leaves, uses, probe, v
    for f in nodes:
        outs = []
        for o, (shape, dtype) in zip(api.outputs_of(f), api.output_specs(f), strict=True):
            s = prog.new_slot(shape, dtype)
            if o is not None:
                slot[id(o)] = s
                keep.append(o)
            outs.append(s)
        prog.steps.append(Step(f, tuple(slot[id(x)] for x in f.inputs), tuple(outs)))
    prog.outputs = [slot[id(v)] for v in outputs]
    prog.origin = slot
    prog.held = keep
    return prog
