"""Gradients recorded when first differentiated (``hd.grad`` of a graph that holds a gradient).

``hd.grad`` records every backward rule it runs, so that its results can be
differentiated again. Most gradients of a gradient never are: a Hessian-vector
product, a Hessian row, the outer gradient of a meta-learning step is read and
used. So when the graph ``hd.grad`` differentiates already holds a gradient
that ``hd.grad`` recorded (a second or higher derivative), it runs the plain
(array) reverse pass at once, which gives the values, and returns each result
as the output of a *deferred* node. The first time anything walks the graph
through that node (``hd.grad`` or ``.backward()`` of something computed from
the result, ``forward``, ``to_dot``, ``save_graph``), the gradient is recorded
from the same plan and the node becomes an :class:`~hodiff.functions.arithmetic.Identity`
of the recorded gradient. The graph is then exactly what recording at once would
have made, with one identity node per result; no walker sees a deferred node.

What this costs and saves: a result that is never differentiated again costs
the plain pass instead of the recording one (about 2.2x cheaper on the W4
chain); one that is differentiated again costs both passes. So the choice is
made per call site of ``hd.grad`` (:func:`should_defer`): a site whose deferred
results get differentiated records at once for its next :data:`CREDIT` calls,
then defers once more (and records at once for twice as many calls if that result is
differentiated too). The values are those of the plain pass; the recorded
ones agree with them up to rounding.

The recording reads the graph's values when it happens. A value freed in
between (``clear_buffer=True``) raises the engine's usual error there; a value
changed in place in between is not detected, as for any recorded graph.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, overload

from hodiff import function as _function
from hodiff import graph
from hodiff.context import TRUSTED, _mode
from hodiff.function import Function
from hodiff.variable import Variable

__all__ = [
    "CREDIT",
    "MAX_CREDIT",
    "DeferredGrad",
    "is_enabled",
    "record_at_once",
    "should_defer",
]

#: sequence numbers reserved per deferred gradient for the nodes of its recording, which
#: come after the graph it differentiates and before the deferred nodes (their consumers)
GAP = 2**32


_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("hodiff_defer", default=True)


@contextlib.contextmanager
def record_at_once() -> Iterator[None]:
    """Inside it, ``hd.grad`` records every gradient at once, as at first order.

    For code that will differentiate a derivative of order two or more again (it
    then pays one recording instead of a plain pass and a recording), and for
    tests of a backward rule's recorded path: :func:`hodiff.testing.check_function`
    runs inside it.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.deferred import record_at_once
    >>> x = hd.Variable.from_array(np.array(2.0), need_grad=True)
    >>> (g,) = hd.grad(x ** 4, x)
    >>> with record_at_once():
    ...     (h,) = hd.grad(g, x)
    >>> type(h.parent).__name__, float(h.d)
    ('MulScalar', 48.0)
    """
    token = _enabled.set(False)
    try:
        yield
    finally:
        _enabled.reset(token)


def is_enabled() -> bool:
    """Whether ``hd.grad`` defers recording here (it does, outside :func:`record_at_once`)."""
    return _enabled.get()


class _Recipe:
    """What recording the gradient needs, shared by the deferred nodes of one ``hd.grad``."""

    __slots__ = ("base", "ins", "nodes", "outs", "plan", "results", "seeds", "site")

    def __init__(
        self,
        outs: list[Variable],
        ins: list[Variable],
        seeds: list[Variable],
        plan: graph._Plan,
        base: int,
        site: Any,
    ) -> None:
        self.outs, self.ins, self.seeds, self.plan, self.base = outs, ins, seeds, plan, base
        self.site = site
        self.nodes: list[weakref.ref[Function]] = []
        self.results: list[Variable | None] | None = None

    def record(self) -> list[Variable | None]:
        """Records the gradient once and turns every live deferred node into an identity."""
        if self.results is not None:
            return self.results
        plan = self.plan
        graph.check_values(plan, "grad (recording a gradient deferred by hd.grad)")
        _walked(self.site)
        start = next(_function._seq)
        token = _mode.set(TRUSTED)  # recorded and computed, whatever the caller's mode
        try:
            results = graph.grad_graph(self.outs, self.ins, self.seeds, plan)
        finally:
            _mode.reset(token)
        _renumber(results, start, self.base)
        from hodiff.functions.arithmetic import Identity

        for ref in self.nodes:
            node = ref()
            if node is not None:
                r = results[node._index]  # type: ignore[attr-defined]
                assert r is not None  # a deferred node is made only for a gradient that exists
                node.__class__ = Identity
                node.inputs = (r,)
                node._of_grad = True
                del node._index  # type: ignore[attr-defined]
        self.results = results
        self.outs = self.ins = self.seeds = []  # the recorded graph holds what it needs
        self.plan = None  # type: ignore[assignment]
        self.nodes = []
        return results


def _renumber(results: Sequence[Variable | None], start: int, base: int) -> None:
    """Gives the recorded nodes numbers after the differentiated graph and before the deferred
    nodes (``base < seq < base + GAP``), in the order they were made: every node keeps a
    number larger than the nodes its inputs come from, which topological orders rely on.
    """
    stack = [r.parent for r in results if r is not None and r.parent is not None]
    stack = [f for f in stack if f.seq >= start]
    seen = set(stack)
    while stack:
        f = stack.pop()
        for x in f.inputs:
            p = x.parent
            if p is not None and p.seq >= start and p not in seen:
                seen.add(p)
                stack.append(p)
    made = sorted(seen, key=lambda f: f.seq)
    if len(made) >= GAP:  # pragma: no cover - 4e9 nodes do not fit in memory
        raise RuntimeError(f"grad: a deferred gradient recorded {len(made)} nodes (>= {GAP})")
    for k, f in enumerate(made):
        f.seq = base + 1 + k


class _Pending(Sequence[Variable]):
    """The inputs of a deferred node: reading them records the gradient first."""

    __slots__ = ("position", "recipe")

    def __init__(self, recipe: _Recipe, index: int) -> None:
        self.recipe, self.position = recipe, index

    def _inputs(self) -> tuple[Variable]:
        r = self.recipe.record()[self.position]
        assert r is not None
        return (r,)

    def __iter__(self) -> Iterator[Variable]:
        return iter(self._inputs())

    def __len__(self) -> int:
        return 1

    @overload
    def __getitem__(self, i: int) -> Variable: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Variable]: ...
    def __getitem__(self, i: int | slice) -> Variable | Sequence[Variable]:
        return self._inputs()[i]


class DeferredGrad(Function, register=False):
    """A gradient result whose graph is recorded on first use (see the module docstring).

    It never runs: reading its ``inputs`` records the gradient and turns it into
    an ``Identity`` of the recorded result.
    """

    need_inputs = False
    _of_grad = True

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:  # pragma: no cover
        raise RuntimeError("deferred_grad: runs only after its gradient is recorded")


# Per call site of hd.grad (code object and instruction): [calls left that record at once,
# deferred results of the site walked in a row, whether its last deferral is still unwalked]
_sites: dict[Any, list[Any]] = {}
#: calls of a site that record at once after one of its deferred results was walked; doubled
#: for each further walked deferral in a row, up to :data:`MAX_CREDIT`
CREDIT = 16
MAX_CREDIT = 256
_MAX_SITES = 4096


def should_defer(site: Any) -> bool:
    """Whether ``hd.grad`` called from ``site`` defers.

    A site whose deferred results are differentiated again records at once for its next
    :data:`CREDIT` calls, then defers once more to see whether its results still are (a
    speculation that stops paying is undone); each further walked deferral in a row doubles
    the calls recorded at once (at most :data:`MAX_CREDIT`), and one that is not walked by the
    site's next call starts the count again. A loop that differentiates every result pays the
    plain pass once in 257 calls, one that never does never records.
    """
    state = _sites.get(site)
    if state is None:
        return True
    if state[0]:
        state[0] -= 1
        return False
    if state[2]:  # the last deferral was not walked (yet): the speculation starts again
        state[1] = 0
    state[2] = True
    return True


def _deferred_at(site: Any) -> None:
    """Notes a deferral at ``site`` (its first: the site's state is made)."""
    if site is not None and site not in _sites:
        if len(_sites) >= _MAX_SITES:
            _sites.clear()
        _sites[site] = [0, 0, True]


def _walked(site: Any) -> None:
    state = _sites.get(site)
    if state is not None:
        state[1] += 1
        state[0] = min(CREDIT << (state[1] - 1), MAX_CREDIT)
        state[2] = False


def defer(
    outs: list[Variable],
    ins: list[Variable],
    seeds: list[Variable],
    plan: graph._Plan,
    values: list[Any],
    site: Any = None,
) -> list[Variable | None]:
    """The results of ``hd.grad``: ``values[i]`` (an array, or None for an unused input) as the
    output of a deferred node that records the gradient when first walked (and makes
    ``site`` record at once for a while, see :func:`should_defer`).
    """
    n = len(ins)
    base = _function.reserve_seq(GAP + n)
    _deferred_at(site)
    recipe = _Recipe(outs, ins, seeds, plan, base, site)
    out: list[Variable | None] = []
    for i, a in enumerate(values):
        if a is None:
            out.append(None)
            continue
        node = DeferredGrad()
        node.inputs = _Pending(recipe, i)
        node.seq = base + GAP + i
        node._index = i  # type: ignore[attr-defined]
        v = Variable.__new__(Variable)
        v._data, v._shape, v._dtype, v._grad = a, a.shape, a.dtype, None
        v.need_grad = True
        v.parent = node
        node._outputs = [weakref.ref(v)]
        node._ydata = None
        recipe.nodes.append(weakref.ref(node))
        out.append(v)
    return out
