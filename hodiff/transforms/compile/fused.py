"""The ``"fused"`` backend on CPU: clusters of elementwise steps as generated machine code.

:func:`fuse` turns a simplified program into one whose clusters (:mod:`cluster`) are each
one step, a :class:`FusedKernel`: a loop generated as LLVM IR (:mod:`codegen`), every
kernel of the program in one module compiled once (or read from the disk cache,
:mod:`cache`). Values used only inside a cluster live in registers and are never stored;
a cluster stores the values read after it. Every other step (reductions, GEMM, indexing,
random draws) stays its primitive's array kernel, replayed as the ``"replay"`` backend does
(:mod:`replay`), which also runs the fused steps.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.transforms.compile import cache
from hodiff.transforms.compile.cluster import Cluster, clusters
from hodiff.transforms.compile.codegen import Member, attributes_of, kernel_ir, kernel_of, module_ir
from hodiff.transforms.compile.record import Program, Step

__all__ = ["FusedKernel", "available", "fuse", "kernel_sizes", "lowered"]

available = cache.available


def _address(x: Any, keep: list[Any]) -> int:
    """The address of ``x``'s data, made C-contiguous (a copy kept alive in ``keep``)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(x))
    except (TypeError, ValueError, BufferError):  # read-only, not contiguous, not numpy
        x = np.ascontiguousarray(x)
        keep.append(x)
        return int(x.ctypes.data)


class FusedKernel:
    """A step of a fused program: one generated loop computing a cluster's stored values."""

    effects = False

    def __init__(
        self,
        name: str,
        size: int,
        inputs: Sequence[tuple[tuple[int, ...], Any]],
        outputs: Sequence[tuple[tuple[int, ...], Any]],
    ) -> None:
        self.name = name
        self.size = size  # nodes of the recorded graph it computes
        self.inputs = [(tuple(s), np.dtype(d)) for s, d in inputs]
        self.outputs = [(tuple(s), np.dtype(d)) for s, d in outputs]
        self.args = (ctypes.c_void_p * (len(inputs) + len(outputs)))()
        self.args_address = ctypes.addressof(self.args)
        self.fn: Any = None
        self.code: Any = None  # the loaded module (keeps the machine code alive)

    def link(self, code: Any) -> None:
        self.code = code
        self.fn = cache.call_kernel(code.address(self.name))

    def forward_impl(self, xs: Sequence[Any], ys: list[Any]) -> None:
        keep: list[Any] = []
        args = self.args
        for k, (x, (shape, dtype)) in enumerate(zip(xs, self.inputs, strict=True)):
            if type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape:
                x = np.asarray(x, dtype=dtype).reshape(shape)  # a 0-d value as the scalar
            args[k] = _address(x, keep)
        n = len(xs)
        for k, (shape, dtype) in enumerate(self.outputs):
            y = np.empty(shape, dtype)
            args[n + k] = y.ctypes.data
            ys[k] = y
        self.fn(self.args_address)


def _members(prog: Program, c: Cluster) -> tuple[list[int], list[Member]]:
    """A cluster's input slots (in order of first use) and members."""
    inside = {prog.steps[i].outs[0]: j for j, i in enumerate(c.steps)}
    ins: list[int] = []
    members: list[Member] = []
    for i in c.steps:
        step = prog.steps[i]
        expr = kernel_of(step.node)
        attrs = attributes_of(step.node, expr) if expr is not None else None
        assert expr is not None
        assert attrs is not None
        args: list[tuple[str, int]] = []
        for s in step.ins:
            if s in inside and inside[s] < len(members):
                args.append(("v", inside[s]))
                continue
            if s not in ins:
                ins.append(s)
            args.append(("in", ins.index(s)))
        members.append(Member(expr, attrs, args))
    return ins, members


def _stored(prog: Program, order: list[int | Cluster]) -> dict[int, set[int]]:
    """Per slot, the positions in ``order`` that read it (the results: position -1)."""
    readers: dict[int, set[int]] = {}
    for p, item in enumerate(order):
        steps = [item] if isinstance(item, int) else item.steps
        for i in steps:
            for s in prog.steps[i].ins:
                readers.setdefault(s, set()).add(p)
    for s in prog.outputs:
        readers.setdefault(s, set()).add(-1)
    return readers


def _description(kernels: list[tuple[Any, ...]]) -> str:
    """What determines the module's text: each kernel's name, loop, inputs, members, stores."""
    parts = []
    for name, shape, dtype, specs, members, stored in kernels:
        ins = [(tuple(s), np.dtype(d).str) for s, d in specs]
        ms = [(m.expr, sorted(m.attributes.items()), m.args) for m in members]
        parts.append(repr((name, tuple(shape), np.dtype(dtype).str, ins, ms, stored)))
    return "\n".join(parts)


def kernel_sizes(prog: Program) -> list[int]:
    """The size in nodes of each step of the fused program (a cluster: its members)."""
    return [1 if isinstance(item, int) else len(item.steps) for item in clusters(prog)]


def fuse(prog: Program) -> tuple[Program, float, bool]:
    """``prog`` with its clusters as :class:`FusedKernel` steps: (program, seconds spent
    compiling or loading the code, whether it came from the disk cache).
    """
    order = clusters(prog)
    readers = _stored(prog, order)
    steps: list[Step] = []
    kernels: list[tuple[Any, ...]] = []
    fused: list[FusedKernel] = []
    for p, item in enumerate(order):
        if isinstance(item, int):
            steps.append(prog.steps[item])
            continue
        ins, members = _members(prog, item)
        outs, stored = [], []
        for j, i in enumerate(item.steps):
            o = prog.steps[i].outs[0]
            if readers.get(o, set()) - {p}:
                outs.append(o)
                stored.append(j)
        name = f"k{len(fused)}"
        specs = [prog.specs[s] for s in ins]
        kernels.append((name, item.shape, item.dtype, specs, members, stored))
        k = FusedKernel(name, len(item.steps), specs, [prog.specs[o] for o in outs])
        fused.append(k)
        steps.append(Step(k, tuple(ins), tuple(outs)))  # type: ignore[arg-type]
    seconds, hit = 0.0, True
    if fused:
        vector = cache.Machine.get().vector

        def ir() -> str:
            declares: set[str] = set()
            texts = [
                kernel_ir(name, shape, dtype, specs, members, stored, declares, vector)
                for name, shape, dtype, specs, members, stored in kernels
            ]
            return module_ir(texts, declares)

        code, seconds, hit = cache.load(f"{vector}\n{_description(kernels)}", ir)
        for k in fused:
            k.link(code)
    return dataclasses.replace(prog, steps=steps), seconds, hit


def lowered(prog: Program, stats: Any, values: Sequence[Any]) -> Program:
    """The program a backend runs for the argument and external arrays ``values``:
    ``prog`` fused for ``"fused"`` on numpy arrays (``stats`` records the kernels and the
    seconds), else ``prog`` (cupy arrays: the replay of their kernels).
    """
    if stats.backend != "fused" or any(
        type(v) is not np.ndarray and not isinstance(v, np.generic | float | int | bool)
        for v in values
    ):
        stats.kernels = [1] * len(prog.steps)  # every step replayed
        return prog
    fused, seconds, hit = fuse(prog)
    stats.kernels = [getattr(s.node, "size", 1) for s in fused.steps]
    stats.compile_seconds += seconds
    stats.cached = hit
    return fused
