"""Mutation testing of the checker: break each primitive's rule a little, and see it caught.

For every registered primitive ``P`` (a class of :data:`hodiff.function.REGISTRY`
with a backward rule) and the spec row whose graph contains a ``P`` node and checks
it hardest (the highest order, tolerances from the estimate; the first such row),
three mutants of ``P.backward_impl`` are checked as ``python -m hodiff check``
checks the row (:func:`hodiff.tools.cli_check.spec_report`):

* order 1: every gradient ``P`` stores is scaled by ``1 + 1e-6``;
* order 2: when the rule records (``hd.grad``), each gradient ``g`` becomes
  ``g + 1e-4 (g - stop(g))``: the same value, so order 1 is right, but every
  derivative of ``P``'s gradient graph is scaled by ``1 + 1e-4``;
* order 3: the nodes of the gradient graph ``P``'s rule records get that order-2
  mutation themselves: orders 1 and 2 are right, the derivatives of their
  gradient graphs (order 3) are scaled by ``1 + 1e-4``.

A mutant is *caught* when the check of that order fails. :func:`mutation_report`
gives one :class:`Mutant` per primitive and order (a survivor says why: no spec
row uses the primitive, the row stops below that order, or the check passed).
The mutation is a class attribute patched for the duration of one check and
restored (a context manager), never left behind.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.function import REGISTRY, Function, Slot
from hodiff.engine.variable import Variable
from hodiff.testing.spec import Spec

__all__ = ["Mutant", "family", "mutated", "mutation_report", "primitives_of"]

DELTA = {1: 1e-6, 2: 1e-4, 3: 1e-4}


def family(cls: type) -> str:
    """``math``, ``conv``, ``grad_functions.conv``...: where the primitive is defined."""
    parts = cls.__module__.split(".")
    return ".".join(parts[1:]) if parts[1:2] == ["grad_functions"] else parts[-1]


def _value_preserving(g: Any, delta: float) -> Any:
    """``g + delta (g - stop(g))``: the value of ``g``, its derivatives scaled by ``1 + delta``."""
    if not isinstance(g, Variable):
        return g  # a plain backward (bare arrays): values only, nothing to differentiate
    return g + (g - g.unlinked(need_grad=False)) * delta


def _recorded_nodes(gs: Sequence[Any], boundary: set[int]) -> list[Function]:
    """The nodes recorded between the boundary Variables (the rule's inputs) and ``gs``."""
    stack = [g.parent for g in gs if isinstance(g, Variable) and g.parent is not None]
    seen: set[int] = set()
    nodes = []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        for x in node.inputs:
            if id(x) not in boundary and x.parent is not None:
                stack.append(x.parent)
    return nodes


def _mutant_rule(rule: Callable[..., None], order: int) -> Callable[..., None]:
    delta = DELTA[order]

    def backward_impl(
        self: Function,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        fresh = [Slot(s.data, None, s.shape) for s in inputs]
        rule(self, fresh, outputs, prop_down, [False] * len(inputs))
        gs = [fr.grad for fr in fresh]
        if order == 3:
            boundary = {id(v) for s in [*inputs, *outputs] for v in (s.data, s.grad)}
            for node in _recorded_nodes([g for g in gs if g is not None], boundary):
                inner = _mutant_rule(type(node).backward_impl, 2)
                node.backward_impl = types.MethodType(inner, node)  # type: ignore[method-assign]
        for s, g, p, a in zip(inputs, gs, prop_down, accum, strict=True):
            if p and g is not None:
                if order == 1:
                    g = g * (1.0 + delta)
                elif order == 2:
                    g = _value_preserving(g, delta)
                s.store(g, a)

    return backward_impl


@contextlib.contextmanager
def mutated(cls: type[Function], order: int) -> Iterator[None]:
    """Within the block, ``cls.backward_impl`` is the mutant of that order (see the module)."""
    if order not in DELTA:
        raise ValueError(f"mutated: order must be 1, 2 or 3, got {order!r}")
    own = cls.__dict__.get("backward_impl")
    cls.backward_impl = _mutant_rule(cls.backward_impl, order)  # type: ignore[method-assign]
    try:
        yield
    finally:
        if own is None:
            del cls.backward_impl
        else:
            cls.backward_impl = own  # type: ignore[method-assign]


def primitives_of(spec: Spec) -> set[type[Function]]:
    """The primitive classes in the graph of one spec row (its sample inputs)."""
    ys = spec.fn(*[Variable.from_array(a) for a in spec.sample()], **spec.kwargs)
    outs = list(ys) if isinstance(ys, tuple | list) else [ys]
    return {type(node) for node in api.topological_order(outs)}


@dataclass(frozen=True)
class Mutant:
    """One primitive's mutant of one order: caught, or why it survived."""

    primitive: str
    family: str
    order: int
    spec: str
    caught: bool
    why: str = ""
    equivalent: bool = False


def _strength(spec: Spec) -> tuple[bool, int]:
    return (spec.atol is None and spec.rtol is None, spec.order)


def mutation_report(
    specs: Sequence[Spec],
    check: Callable[[Spec, int], tuple[bool, np.ndarray]],
    orders: Sequence[int] = (1, 2, 3),
) -> list[Mutant]:
    """Every differentiable primitive of the registry at every order of ``orders``.

    ``check(spec, k)`` runs the row's derivative checks of orders 1..``k`` and returns
    whether they passed (the mutant survived) and the analytic values of order ``k``.
    A mutant whose analytic values equal the unmutated ones (to ``1e-9`` relative) is
    *equivalent*: the mutated term does not reach that order (the derivative of a
    mask is zero), so no check could catch it; it is listed, not counted.
    """
    plain: dict[tuple[int, int], np.ndarray] = {}
    users = _hardest_users(specs)
    out = []
    for cls in sorted(REGISTRY, key=lambda c: (family(c), c.__name__)):
        if not getattr(cls, "differentiable", True):
            continue
        row = users.get(cls)
        for k in orders:
            out.append(_mutant(cls, k, row, check, plain))
    return out


def _hardest_users(specs: Sequence[Spec]) -> dict[type, Spec]:
    """For each primitive, the differentiable row that checks it hardest (highest order,
    own tolerances last); rows that cannot be built are left to the check to report.
    """
    users: dict[type, Spec] = {}
    for spec in specs:
        if spec.order < 1:
            continue
        try:
            found = primitives_of(spec)
        except Exception:  # a row that cannot be built is reported by the check itself
            continue
        for cls in found:  # the row that checks it hardest: highest order, own tolerances last
            old = users.get(cls)
            if old is None or _strength(spec) > _strength(old):
                users[cls] = spec
    return users


def _mutant(
    cls: type[Function],
    k: int,
    row: Spec | None,
    check: Callable[[Spec, int], tuple[bool, np.ndarray]],
    plain: dict[tuple[int, int], np.ndarray],
) -> Mutant:
    """The order-``k`` mutant of ``cls`` checked on ``row`` (``plain`` caches the unmutated
    analytic values per row and order): caught, survived, equivalent, or unchecked and why.
    """
    name, fam = cls.__name__, family(cls)
    if row is None:
        return Mutant(name, fam, k, "-", False, "no spec row uses it")
    if row.order < k:
        why = f"{row.name} is checked up to order {row.order}"
        return Mutant(name, fam, k, row.name, False, why)
    key = (id(row), k)
    if key not in plain:
        plain[key] = check(row, k)[1]
    with mutated(cls, k):
        passed, values = check(row, k)
    ref = plain[key]
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    same = ref.shape == values.shape and bool(
        np.all(np.abs(values - ref) <= 1e-9 * max(scale, 1e-300))
    )
    if passed and same:
        why = f"equivalent: the mutated term does not change the order-{k} derivative"
        return Mutant(name, fam, k, row.name, False, why, equivalent=True)
    why = "" if not passed else f"the order-{k} check of {row.name} passed"
    return Mutant(name, fam, k, row.name, not passed, why)
