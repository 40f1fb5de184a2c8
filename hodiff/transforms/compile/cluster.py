"""Clusters of a simplified program that one generated loop can compute.

A step is fusable when its primitive declares a ``scalar_kernel`` (codegen.kernel_of) whose
attributes are numbers, it has no ``effects``, one output of a float dtype ``T`` (float32 or
float64) and of a nonempty shape ``S``, and each input is of dtype ``T`` (or bool) with a
shape that broadcasts to ``S``. Its key is ``(S, T)``: one loop of ``prod(S)`` elements.

Steps are taken in program order. A fusable step joins the open cluster of its key (after
closing any other open cluster whose value it reads); any other step first closes the open
clusters whose values it reads. A cluster runs where it is closed, after all its members'
inputs exist and before any reader outside it: the order stays a valid schedule. Open
clusters never read each other, so those left at the end close in any order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hodiff.transforms.compile.codegen import attributes_of, kernel_of
from hodiff.transforms.compile.record import Program, Step

__all__ = ["Cluster", "clusters", "fusable"]

_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))
_BOOL = np.dtype(np.bool_)


@dataclass
class Cluster:
    """Steps (indices into the program) computed by one loop over ``shape`` in ``dtype``."""

    shape: tuple[int, ...]
    dtype: Any
    steps: list[int] = field(default_factory=list)


def _broadcasts(s: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    if len(s) > len(shape):
        return False
    return all(a == 1 or a == b for a, b in zip(s[::-1], shape[::-1], strict=False))


def fusable(step: Step, prog: Program) -> tuple[tuple[int, ...], Any] | None:
    """The key ``(S, T)`` of a fusable step (see the module docstring), else None."""
    node = step.node
    if type(node).effects or len(step.outs) != 1 or not step.ins:
        return None
    expr = kernel_of(node)
    if expr is None or attributes_of(node, expr) is None:
        return None
    shape, dtype = prog.specs[step.outs[0]]
    dtype = np.dtype(dtype)
    if dtype not in _FLOATS or math.prod(shape) == 0:
        return None
    for s in step.ins:
        ishape, idtype = prog.specs[s]
        if np.dtype(idtype) not in (dtype, _BOOL) or not _broadcasts(tuple(ishape), shape):
            return None
    return tuple(shape), dtype


def clusters(prog: Program) -> list[int | Cluster]:
    """The program's steps in a valid order: an index for a step left alone, a Cluster for
    fused steps (see the module docstring).
    """
    order: list[int | Cluster] = []
    open_: dict[Any, Cluster] = {}
    made_by: dict[int, Cluster] = {}  # slot -> the open cluster computing it

    def close(c: Cluster) -> None:
        del open_[(c.shape, c.dtype)]
        for i in c.steps:
            made_by.pop(prog.steps[i].outs[0], None)
        order.append(c)

    for i, step in enumerate(prog.steps):
        key = fusable(step, prog)
        mine = open_.get(key) if key is not None else None
        for s in step.ins:
            c = made_by.get(s)
            if c is not None and c is not mine and (c.shape, c.dtype) in open_:
                close(c)
        if key is None:
            order.append(i)
            continue
        c = open_.get(key)
        if c is None:
            c = open_[key] = Cluster(key[0], key[1])
        c.steps.append(i)
        made_by[step.outs[0]] = c
    for c in list(open_.values()):
        order.append(c)
    return order
