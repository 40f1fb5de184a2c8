"""Liveness and buffer reuse: which local name (register) of the replayed code holds each
value, so that a value is dropped at its last use and its memory goes to the next one.

A value's register is freed after the last step that reads it (the results never are);
the outputs of a step take freed registers first, so the replay holds at most ``peak``
intermediate arrays at once, as a ``forward(clear_buffer=True)`` would. A view (a reshape,
a broadcast) keeps the array it views alive through its own reference, so a register may
be reused whatever the kernels return.
"""

from __future__ import annotations

from dataclasses import dataclass

from hodiff.transforms.compile.record import Program

__all__ = ["Schedule", "schedule"]


@dataclass
class Schedule:
    """``register[s]``: the register of the intermediate slot ``s`` (None: never read);
    ``frees[i]``: the slots whose last reader is step ``i``; ``peak``: the most
    intermediate values alive at once.
    """

    register: dict[int, int | None]
    frees: list[list[int]]
    peak: int


def schedule(prog: Program) -> Schedule:
    """The registers of ``prog``'s intermediate values by liveness (see the module)."""
    end = len(prog.steps)
    last: dict[int, int] = {}
    for i, step in enumerate(prog.steps):
        for s in step.ins:
            last[s] = i
    for s in prog.outputs:
        last[s] = end  # results live to the end
    fixed = set(prog.args) | set(prog.constants) | {s for _, s in prog.externals}
    register: dict[int, int | None] = {}
    frees: list[list[int]] = []
    free: list[int] = []
    n = alive = peak = 0
    for i, step in enumerate(prog.steps):
        dying = [s for s in dict.fromkeys(step.ins) if s not in fixed and last.get(s) == i]
        frees.append(dying)
        for s in dying:
            r = register.get(s)
            if r is not None:
                free.append(r)
                alive -= 1
        for o in step.outs:
            if o not in last:
                register[o] = None  # computed by a step, read by no one
                continue
            if free:
                register[o] = free.pop()
            else:
                register[o] = n
                n += 1
            alive += 1
        peak = max(peak, alive)
    return Schedule(register, frees, peak)
