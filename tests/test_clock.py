"""The engine's clock: integer node numbers, and the order of nodes made again for new shapes."""

from __future__ import annotations

import types

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff import Variable
from hodiff.engine.clock import CLOCK, STRIDE, Clock
from hodiff.engine.order import topological_order


def _assert_ordered(nodes: list) -> None:
    """Every node is numbered by an int, once, after the nodes its inputs come from."""
    seqs = [f.seq for f in nodes]
    assert all(type(s) is int for s in seqs)
    assert len(set(seqs)) == len(seqs)
    for f in nodes:
        for x in f.inputs:
            if x.parent is not None:
                assert x.parent.seq < f.seq, (x.parent.name, f.name)


def test_times_are_integers_a_stride_apart() -> None:
    clock = Clock()
    t = [clock.tick() for _ in range(4)]
    assert t == [STRIDE, 2 * STRIDE, 3 * STRIDE, 4 * STRIDE]
    assert clock.wrote() == 5 * STRIDE == clock.last_write
    frees = clock.frees
    clock.freed()
    assert clock.frees == frees + 1
    assert clock.last_free == 6 * STRIDE


def test_renumber_spreads_nodes_inside_an_interval_or_refuses() -> None:
    clock = Clock()
    nodes = [types.SimpleNamespace(seq=-1) for _ in range(5)]
    assert clock.renumber(nodes, 32, 64)
    seqs = [n.seq for n in nodes]
    assert seqs == sorted(seqs)
    assert seqs[0] > 32
    assert seqs[-1] < 64
    assert all(type(s) is int for s in seqs)
    assert len(set(seqs)) == 5
    many = [types.SimpleNamespace(seq=-1) for _ in range(40)]
    assert not clock.renumber(many, 32, 64)  # 31 numbers between: no room for 40
    assert all(n.seq == -1 for n in many)  # nothing numbered


def test_a_composition_made_again_keeps_the_order_of_the_whole_graph() -> None:
    # hd.grad in a static graph is made again after reset_shape; its new nodes take
    # integer numbers between those around its first call, so the nodes made after it (q)
    # still come after them, and sorting by number still orders the graph
    with hd.auto_forward(False):
        x = Variable((2, 3), need_grad=True, dtype=np.float64)
        y = F.sum(F.tanh(x) ** 2)
        (g,) = hd.grad(y, x)
        q = F.sum(g * g) + F.sum(x)  # made after the composition, reads its output
    first = topological_order([q])
    before = {f.seq for f in first}
    remakes = CLOCK.remakes
    for n in (4, 1, 3):
        x.reset_shape((n, 3), force=True)
        x.d = np.linspace(-1.0, 1.0, 3 * n).reshape(n, 3)
        q.forward()
        nodes = topological_order([q])
        _assert_ordered(nodes)
        t = np.tanh(x.d)
        gx = 2 * t * (1 - t * t)  # d/dx tanh(x)^2, by hand
        assert q.d == pytest.approx(np.sum(gx * gx) + np.sum(x.d), rel=1e-12)
    assert CLOCK.remakes > remakes  # the composition was made again
    last = topological_order([q])
    assert {id(f) for f in last} != {id(f) for f in first}  # new nodes ...
    assert {f.seq for f in last} <= set(range(min(before), max(before) + 1))  # ... in place
    assert max(f.seq for f in last) == max(before)  # q's own nodes kept their numbers
