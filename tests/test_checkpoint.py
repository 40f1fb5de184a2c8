"""hd.checkpoint and PF.checkpoint_sequential (issue 23).

Every derivative of a checkpointed computation is compared with the same computation
without checkpointing (float64, relative 1e-12), and where there is one with a closed form
or finite differences. Memory bounds are derived from the sizes of the arrays.
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF
from hodiff.engine import api, reverse
from hodiff.functions.linalg import Affine
from hodiff.functions.math import Tanh
from hodiff.transforms import taylor
from hodiff.transforms.checkpointing.node import Checkpoint

RTOL = 1e-12


@pytest.fixture(autouse=True)
def _float64_and_clean() -> Any:
    hd.clear_parameters()
    with hd.context_scope(hd.Context(dtype="float64")):
        yield
    hd.clear_parameters()


def leaf(a: Any, need_grad: bool = True) -> hd.Variable:
    return hd.Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=need_grad)


def same(a: Any, b: Any, what: str = "") -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, what
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * scale, err_msg=what)


RNG = np.random.default_rng(23)
X0 = RNG.standard_normal((5, 4))
WS = [0.6 * RNG.standard_normal((4, 4)) for _ in range(3)]
BS = [0.1 * RNG.standard_normal(4) for _ in range(3)]


def layer(h: hd.Variable, w: hd.Variable, b: hd.Variable) -> hd.Variable:
    return h + F.tanh(F.affine(h, w, b)) * F.sin(h)


def net(x: hd.Variable, ws: list[hd.Variable], bs: list[hd.Variable], ckpt: bool) -> hd.Variable:
    """Three layers, each checkpointed (closing over its weights) or not."""
    h = x
    for w, b in zip(ws, bs, strict=True):
        h = hd.checkpoint(lambda a, w=w, b=b: layer(a, w, b), h) if ckpt else layer(h, w, b)
    return h


def model() -> tuple[hd.Variable, list[hd.Variable], list[hd.Variable]]:
    return leaf(X0), [leaf(w) for w in WS], [leaf(b) for b in BS]


def derivatives(ckpt: bool) -> dict[str, np.ndarray]:
    """Values and derivatives of orders 1-3 of ``L = sum(net(x)^2)``, in every way."""
    x, ws, bs = model()
    wrt = [x, *ws, *bs]
    out: dict[str, np.ndarray] = {}
    y = net(x, ws, bs, ckpt)
    loss = F.sum(y * y)
    out["value"] = y.d
    loss.backward()
    for i, v in enumerate(wrt):
        out[f"backward {i}"] = v.g.copy()
        v.zero_grad()
    g = hd.grad(loss, wrt)
    for i, gi in enumerate(g):
        out[f"grad {i}"] = gi.d
    gv = hd.grad(loss, wrt, create_graph=False)
    for i, gi in enumerate(gv):
        out[f"grad values {i}"] = gi.d
    u = [np.cos(np.arange(v.size)).reshape(v.shape) for v in wrt]
    s1 = F.sum(F.stack(*[F.sum(gi * ui) for gi, ui in zip(g, u, strict=True)]))
    h = hd.grad(s1, wrt)  # Hessian-vector products (order 2)
    for i, hi in enumerate(h):
        out[f"hvp {i}"] = hi.d
    s1.backward()  # order 2 by a plain pass over the recorded gradient
    for i, v in enumerate(wrt):
        out[f"hvp backward {i}"] = v.g.copy()
        v.zero_grad()
    s2 = F.sum(F.stack(*[F.sum(hi * hi) for hi in h]))
    t = hd.grad(s2, wrt)  # order 3
    for i, ti in enumerate(t):
        out[f"order 3 {i}"] = ti.d
    return out


def test_every_derivative_equals_the_one_without_checkpointing() -> None:
    a, b = derivatives(True), derivatives(False)
    assert a.keys() == b.keys()
    for k in b:
        same(a[k], b[k], k)


def test_the_result_is_a_checkpoint_node() -> None:
    x, ws, bs = model()
    y = net(x, ws, bs, True)
    assert type(y.parent).__name__ == "Checkpoint"
    # the node's inputs: the argument, then the weights it closed over
    assert y.parent.inputs[1] is ws[-1]
    assert y.parent.inputs[2] is bs[-1]
    (g,) = hd.grad(F.sum(y), x)
    assert type(g.parent).__name__ == "Checkpoint"  # the gradient is itself checkpointed


def test_closed_form_of_orders_one_to_three() -> None:
    # f(x) = sum(sin(x) x): f' = cos x x + sin x, f'' = -sin x x + 2 cos x,
    # f''' = -cos x x - 3 sin x
    b = np.linspace(-2.0, 2.0, 7)
    x = leaf(b)
    y = F.sum(hd.checkpoint(lambda a: F.sin(a) * a, x))
    (g,) = hd.grad(y, x)
    (h,) = hd.grad(F.sum(g), x)
    (t,) = hd.grad(F.sum(h), x)
    np.testing.assert_allclose(g.d, np.cos(b) * b + np.sin(b), rtol=1e-14)
    np.testing.assert_allclose(h.d, -np.sin(b) * b + 2 * np.cos(b), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(t.d, -np.cos(b) * b - 3 * np.sin(b), rtol=1e-14, atol=1e-15)


def test_finite_differences_of_orders_one_and_two() -> None:
    w = leaf(WS[0])

    def f(x: hd.Variable) -> hd.Variable:
        return F.sum(hd.checkpoint(lambda a: F.tanh(a @ w) * a, x) ** 2)

    assert hd.gradcheck(f, (X0.copy(),), order=2)


def test_hvp_and_hessian_transforms() -> None:
    w = leaf(WS[0])

    def f(ckpt: bool) -> Callable[[hd.Variable], hd.Variable]:
        def g(x: hd.Variable) -> hd.Variable:
            body = (lambda a: F.tanh(a @ w) * a) if ckpt else None
            y = hd.checkpoint(body, x) if body else F.tanh(x @ w) * x
            return F.sum(y**2)

        return g

    v = np.sin(np.arange(20.0)).reshape(5, 4)
    same(hd.hvp(f(True), X0, v)[1], hd.hvp(f(False), X0, v)[1])
    same(hd.hessian(f(True), X0[:2]), hd.hessian(f(False), X0[:2]))


def penalty_step(ckpt: bool) -> list[np.ndarray]:
    """A WGAN-GP-like step: the gradient of a loss containing a gradient, through the segment."""
    x, ws, bs = model()
    x_hat = leaf(X0[::-1].copy())
    (g,) = hd.grad(F.sum(net(x_hat, ws, bs, ckpt)), x_hat)
    pen = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
    loss = F.mean(net(x, ws, bs, ckpt)) + 10.0 * pen
    gd = g.d
    loss.backward(clear_buffer=True)
    return [v.g for v in (*ws, *bs)] + [x.g, x_hat.g, gd]


def test_gradient_penalty_through_the_segment() -> None:
    for a, b in zip(penalty_step(True), penalty_step(False), strict=True):
        same(a, b)


def count_forwards(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[int]:
    """A counter (``[n]``) of the calls of ``cls.forward_impl`` from now on."""
    calls = [0]
    forward = cls.forward_impl  # type: ignore[attr-defined]

    def counted(self: Any, inputs: Any, outputs: Any) -> None:
        calls[0] += 1
        forward(self, inputs, outputs)

    monkeypatch.setattr(cls, "forward_impl", counted)
    return calls


def test_a_gradient_penalty_recomputes_each_segment_once_when_the_pass_freed_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # loss = mean(D(x)) + 10 mean(|dD(x_hat)/dx_hat|^2), every layer of D checkpointed. The
    # reverse pass (clear_buffer=True) first goes through D(x), freeing its values; then the
    # gradient's segments hand the values they recomputed (tanh's outputs) to the forward
    # checkpoints of x_hat's chain, within that freed memory: in the reverse pass tanh runs
    # L times for x's chain and L times for the gradient's segments, 2 L. Without
    # clear_buffer nothing is freed, so x_hat's chain recomputes too, but for its last
    # layer: only its gradient's segment reads it (D(x_hat) is not in the loss), which then
    # runs the whole rule itself: 3 L - 1. The derivatives are the same each way.
    calls = count_forwards(monkeypatch, Tanh)
    n_layers = 4
    rng = np.random.default_rng(5)
    ws = [0.5 * rng.standard_normal((4, 4)) for _ in range(n_layers)]
    bs = [0.1 * rng.standard_normal(4) for _ in range(n_layers)]

    def step(ckpt: bool, clear: bool) -> list[np.ndarray]:
        wv, bv = [leaf(w) for w in ws], [leaf(b) for b in bs]
        x, x_hat = leaf(X0, need_grad=False), leaf(X0[::-1] * 0.5)

        def d(h: hd.Variable) -> hd.Variable:
            for w, b in zip(wv, bv, strict=True):

                def block(a: hd.Variable, w: hd.Variable = w, b: hd.Variable = b) -> Any:
                    return a + F.tanh(F.affine(a, w, b))

                h = hd.checkpoint(block, h) if ckpt else block(h)
            return h

        (g,) = hd.grad(F.sum(d(x_hat)), x_hat)
        loss = F.mean(d(x)) + 10.0 * F.mean(g * g)
        calls[0] = 0
        loss.backward(clear_buffer=clear)
        return [v.g for v in (*wv, *bv, x_hat)] + [np.array(calls[0])]

    plain = step(False, True)
    assert int(plain[-1]) == 0  # nothing is recomputed without checkpoints
    for clear, reruns in ((True, 2 * n_layers), (False, 3 * n_layers - 1)):
        got = step(True, clear)
        assert int(got[-1]) == reruns, (clear, int(got[-1]))  # in the reverse pass alone
        for a, b in zip(got[:-1], plain[:-1], strict=True):
            same(a, b)


def test_a_layer_whose_rules_read_only_its_output_is_not_recomputed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # y = tanh(x W + b) per layer, each checkpointed: tanh's rule reads its output (which the
    # checkpoint keeps) and the affine's reads its inputs (the checkpoint's input and the
    # weights), so a plain pass recomputes nothing: no affine runs in .backward(). A layer
    # output set through .d after it computed (one no rule reads: the loss is its sum) is
    # not taken: that layer is recomputed (one affine), and the gradient is still the one
    # of f at the inputs.
    calls = count_forwards(monkeypatch, Affine)
    rng = np.random.default_rng(9)
    ws = [0.5 * rng.standard_normal((4, 4)) for _ in range(3)]

    def grads(ckpt: bool, poke: bool) -> tuple[list[np.ndarray], int]:
        wv = [leaf(w) for w in ws]
        h = leaf(X0)
        outs = []
        for w in wv:

            def block(a: hd.Variable, w: hd.Variable = w) -> hd.Variable:
                return F.tanh(F.affine(a, w))

            h = hd.checkpoint(block, h) if ckpt else block(h)
            outs.append(h)
        loss = F.sum(h)  # its rule reads no value
        if poke:  # the last layer's output, set to its own value (a new version)
            outs[-1].d = outs[-1].d.copy()
        calls[0] = 0
        loss.backward(clear_buffer=True)
        return [w.g for w in wv], calls[0]

    ref, n = grads(False, False)
    assert n == 0
    got, n = grads(True, False)
    assert n == 0
    for a, b in zip(got, ref, strict=True):
        same(a, b)
    got, n = grads(True, True)
    assert n == 1
    for a, b in zip(got, ref, strict=True):
        same(a, b)


# ------------------------------------------------------------------ structure of f
def test_nested_checkpoints() -> None:
    def inner(a: hd.Variable) -> hd.Variable:
        return F.tanh(a) * a

    def outer(a: hd.Variable, ckpt: bool) -> hd.Variable:
        h = hd.checkpoint(inner, a) if ckpt else inner(a)
        return F.sin(h) + (hd.checkpoint(inner, h * 2.0) if ckpt else inner(h * 2.0))

    results = []
    for ckpt in (True, False):
        x = leaf(X0)
        y = F.sum(hd.checkpoint(outer, x, ckpt) if ckpt else outer(x, ckpt))
        (g,) = hd.grad(y, x)
        (h,) = hd.grad(F.sum(g * g), x)
        (t,) = hd.grad(F.sum(h * g), x)
        y.backward()
        results.append([y.d, g.d, h.d, t.d, x.g.copy()])
    for a, b in zip(*results, strict=True):
        same(a, b)


def test_several_outputs_tuple_and_list() -> None:
    def f(a: hd.Variable, b: hd.Variable) -> tuple[hd.Variable, hd.Variable, hd.Variable]:
        return F.sin(a) * b, F.sum(a * b), F.exp(b)

    for kind in (tuple, list):
        res = []
        for ckpt in (True, False):
            a, b = leaf(X0), leaf(np.cos(X0 * 3.0))
            body = (lambda a, b, kind=kind: kind(f(a, b))) if ckpt else None
            out = hd.checkpoint(body, a, b) if body else f(a, b)
            if ckpt:
                assert type(out) is kind
                assert len(out) == 3
            y1, y2, _ = out  # the third output is not used: its gradient is zeros
            loss = F.sum(y1 * y1) + y2 * 3.0
            ga, gb = hd.grad(loss, [a, b])
            (hb,) = hd.grad(F.sum(ga * gb), b)
            loss.backward()
            res.append([y1.d, y2.d, ga.d, gb.d, hb.d, a.g.copy(), b.g.copy()])
        for u, v in zip(*res, strict=True):
            same(u, v)


def test_outputs_that_are_the_argument_or_a_weight() -> None:
    w = leaf(WS[0])
    res = []
    for ckpt in (True, False):
        x = leaf(X0)
        y, same_x, same_w = hd.checkpoint(lambda a: (a @ w, a, w), x) if ckpt else (x @ w, x, w)
        loss = F.sum(y * same_x[:, :4]) + F.sum(same_w**3)
        gx, gw = hd.grad(loss, [x, w])
        res.append([gx.d, gw.d])
    for u, v in zip(*res, strict=True):
        same(u, v)


def test_parameters_created_inside_f_and_closures() -> None:
    scale = leaf(np.array(1.5))

    def block(h: hd.Variable) -> hd.Variable:
        with hd.parameter_scope("block"):
            return F.tanh(PF.affine(h, 4)) * scale + h

    res = []
    for ckpt in (True, False):
        hd.clear_parameters()
        hd.seed(3)  # the same initial weights
        scale.zero_grad()
        x = leaf(X0)
        with hd.parameter_scope("net"):  # the recomputation sees this scope too
            y = hd.checkpoint(block, x) if ckpt else block(x)
            y = hd.checkpoint(block, y) if ckpt else block(y)  # shared weights, reused
        params = hd.get_parameters()
        assert list(params) == ["net/block/affine/W", "net/block/affine/b"]
        loss = F.sum(y**2)
        loss.backward()
        gs = hd.grad(loss, list(params.values()))
        (hh,) = hd.grad(F.sum(gs[0] ** 2), [scale])
        res.append([p.g.copy() for p in params.values()] + [scale.g.copy(), hh.d])
        assert list(hd.get_parameters()) == list(params)  # nothing new was created
    for u, v in zip(*res, strict=True):
        same(u, v)


def test_static_arguments_pass_through() -> None:
    def f(a: hd.Variable, n: int, c: np.ndarray) -> hd.Variable:
        for _ in range(n):  # a dynamic graph: Python control flow
            a = F.tanh(a * c)
        return a

    c = np.linspace(0.5, 1.5, 4)
    res = []
    for ckpt in (True, False):
        x = leaf(X0)
        y = hd.checkpoint(f, x, 3, c) if ckpt else f(x, 3, c)
        (g,) = hd.grad(F.sum(y), x)
        (h,) = hd.grad(F.sum(g**2), x)
        res.append([y.d, g.d, h.d])
    for u, v in zip(*res, strict=True):
        same(u, v)


def test_under_no_grad_it_is_f_itself() -> None:
    x = leaf(X0)
    with hd.no_grad():
        y = hd.checkpoint(F.tanh, x)
    assert y.parent is None
    same(y.d, np.tanh(X0))


# ------------------------------------------------------------------ random functions
def noisy(a: hd.Variable) -> hd.Variable:
    return F.dropout(F.tanh(a), p=0.4) * F.rand(shape=a.shape) + F.randn(shape=a.shape) * a


def test_random_functions_redraw_the_same_numbers() -> None:
    res = []
    for ckpt in (True, False):
        hd.seed(5)
        x = leaf(X0)
        y = hd.checkpoint(noisy, x) if ckpt else noisy(x)
        (g,) = hd.grad(F.sum(y**2), x)
        (h,) = hd.grad(F.sum(g**2), x)
        F.sum(y**2).backward()
        after = F.rand(shape=(3,)).d  # the recomputations did not advance the generator
        res.append([y.d, g.d, h.d, x.g.copy(), after])
    for u, v in zip(*res, strict=True):
        same(u, v)


def test_random_functions_in_nested_checkpoints() -> None:
    def outer(a: hd.Variable) -> hd.Variable:
        return hd.checkpoint(noisy, a) * F.rand(shape=a.shape)

    hd.seed(8)
    x = leaf(X0)
    y = hd.checkpoint(outer, x)
    (g,) = hd.grad(F.sum(y**2), x)
    (h,) = hd.grad(F.sum(g**2), x)
    hd.seed(8)
    x0 = leaf(X0)
    y0 = noisy(x0) * F.rand(shape=x0.shape)
    (g0,) = hd.grad(F.sum(y0**2), x0)
    (h0,) = hd.grad(F.sum(g0**2), x0)
    same(y.d, y0.d)
    same(g.d, g0.d)
    same(h.d, h0.d)


def test_a_recomputation_with_other_random_calls_raises() -> None:
    calls = []

    def f(a: hd.Variable) -> hd.Variable:
        calls.append(1)
        y = F.tanh(a)
        return y * F.rand(shape=a.shape) if len(calls) == 1 else y

    x = leaf(X0)
    y = F.sum(hd.checkpoint(f, x))
    with pytest.raises(RuntimeError, match="random node"):
        y.backward()


# ------------------------------------------------------------------ static graphs
def test_static_graph_re_run_with_new_values() -> None:
    with hd.auto_forward(False):
        graphs = []
        for ckpt in (True, False):
            x = hd.Variable((5, 4), need_grad=True)
            w = leaf(WS[0])
            body = lambda a, w=w: F.tanh(a @ w) * a  # noqa: E731
            y = hd.checkpoint(body, x) if ckpt else body(x)
            loss = F.sum(y**2)
            (g,) = hd.grad(loss, x)
            (h,) = hd.grad(F.sum(g**2), w)
            graphs.append((x, w, y, g, h, loss))
    for step in range(3):
        xs = np.cos(np.arange(20.0) + step).reshape(5, 4)
        got = []
        for x, w, y, g, h, loss in graphs:
            x.d = xs
            h.forward()
            g.forward()
            w.zero_grad()
            loss.forward()
            loss.backward()
            got.append([y.d, g.d, h.d, w.g.copy()])
        for u, v in zip(*got, strict=True):
            same(u, v, f"step {step}")


def test_static_graph_draws_anew_every_forward_and_its_derivatives_see_that_draw() -> None:
    with hd.auto_forward(False):
        x = hd.Variable((5, 4), need_grad=True)
        y = hd.checkpoint(lambda a: a * F.rand(shape=(5, 4)), x)
        (g,) = hd.grad(F.sum(y * y), x)  # 2 x u^2
    x.d = X0
    draws = []
    for _ in range(2):
        g.forward()  # recomputes y too: a new u
        u = y.d / X0
        same(g.d, 2 * X0 * u**2)
        x.zero_grad()
        F.sum(y).backward()  # u, the same draw
        same(x.g, u)
        draws.append(u)
    assert not np.allclose(draws[0], draws[1])


# ------------------------------------------------------------------ vmap
def test_vmap_of_a_checkpointed_function() -> None:
    w = leaf(WS[0])

    def per_example(ckpt: bool) -> Callable[[hd.Variable], hd.Variable]:
        def f(a: hd.Variable) -> hd.Variable:
            body = lambda b: F.tanh(b @ w) * b  # noqa: E731
            y = hd.checkpoint(body, a) if ckpt else body(a)
            (g,) = hd.grad(F.sum(y**3), a)  # a per-example gradient through the segment
            return g

        return f

    res = []
    for ckpt in (True, False):
        w.zero_grad()
        r = hd.vmap(per_example(ckpt))(X0)
        F.sum(r**2).backward()
        (gw,) = hd.grad(F.sum(r**2), w)
        res.append([r.d, w.g.copy(), gw.d])
    for u, v in zip(*res, strict=True):
        same(u, v)
    # and the checkpointed function mapped directly
    body = lambda b: F.tanh(b @ w) * b  # noqa: E731
    r = hd.vmap(lambda a: hd.checkpoint(body, a))(X0)
    same(r.d, np.tanh(X0 @ WS[0]) * X0)


def test_vmap_refuses_a_closed_over_mapped_variable() -> None:
    def f(a: hd.Variable) -> hd.Variable:
        c = a * 2.0
        return hd.checkpoint(lambda b: b * c, a)

    with pytest.raises(NotImplementedError, match=r"pass it to hd\.checkpoint as an argument"):
        hd.vmap(f)(X0)


# ------------------------------------------------------------------ Taylor mode
D_IN = 3


def _ws(seed: int) -> list[hd.Variable]:
    rng = np.random.default_rng(seed)
    return [
        leaf(0.8 * rng.standard_normal((D_IN, 6))),
        leaf(0.1 * rng.standard_normal(6)),
        leaf(0.5 * rng.standard_normal((6, 6))),
        leaf(0.5 * rng.standard_normal((6, 1))),
    ]


def _ck(f: Callable[..., Any], *args: Any, on: bool) -> Any:
    return hd.checkpoint(f, *args) if on else f(*args)


# Functions ``(N, D_IN) -> (N, 1)`` of the weights ``ws``, with (``on``) or without their
# checkpoints: one, nested, several outputs, parameters made inside f, random draws inside f.
def _single(ws: list[hd.Variable], on: bool) -> Callable[[Any], Any]:
    w1, b1, _, w3 = ws
    return lambda x: F.affine(
        _ck(lambda a: F.tanh(F.affine(a, w1, b1)) * F.sin(a @ w1), x, on=on), w3
    )


def _nested(ws: list[hd.Variable], on: bool) -> Callable[[Any], Any]:
    w1, b1, w2, w3 = ws

    def inner(h: Any) -> Any:
        return F.tanh(F.affine(h, w2)) + h

    def outer(a: Any) -> Any:
        h = F.tanh(F.affine(a, w1, b1))
        return _ck(inner, _ck(inner, h, on=on), on=on) * F.exp(-(h**2))

    return lambda x: F.affine(_ck(outer, x, on=on), w3)


def _several(ws: list[hd.Variable], on: bool) -> Callable[[Any], Any]:
    w1, b1, _, w3 = ws

    def pair(a: Any) -> tuple[Any, Any]:
        z = F.affine(a, w1, b1)
        return F.tanh(z), z * z

    def u(x: Any) -> Any:
        p, q = _ck(pair, x, on=on)
        return F.affine(p * q, w3) + F.sum(F.sigmoid(q), axis=1, keepdims=True)

    return u


def _parameters(ws: list[hd.Variable], on: bool) -> Callable[[Any], Any]:
    w3 = ws[3]

    def block(a: Any, name: str) -> Any:
        with hd.parameter_scope(name):
            return F.tanh(PF.affine(a, 6))

    def u(x: Any) -> Any:
        with hd.parameter_scope("jets"):
            h = _ck(block, x, "b0", on=on)
            h = _ck(block, h, "b1", on=on)
            return _ck(lambda a: F.affine(a, w3), h, on=on)

    return u


def _random(ws: list[hd.Variable], on: bool) -> Callable[[Any], Any]:
    w1, b1, _, w3 = ws

    def noisy(a: Any) -> Any:
        z = F.affine(a, w1, b1)
        return F.tanh(z) * F.rand(shape=z.shape) + z * z * F.randn(shape=(1, 6))

    def u(x: Any) -> Any:
        hd.seed(11)  # both ways draw the same numbers
        return F.affine(_ck(noisy, x, on=on), w3)

    return u


def _argument_out(ws: list[hd.Variable], on: bool) -> Callable[[Any], Any]:
    w1, b1, _, w3 = ws

    def u(x: Any) -> Any:
        p, q = _ck(lambda a: (F.tanh(F.affine(a, w1, b1)), a), x, on=on)
        return F.affine(p, w3) + F.sum(q * q * q, axis=1, keepdims=True)

    return u


_JET_CASES = {
    "single": _single,
    "argument out": _argument_out,
    "nested": _nested,
    "several outputs": _several,
    "parameters": _parameters,
    "random": _random,
}


def _jet_cases(ws: list[hd.Variable]) -> dict[str, Callable[[bool], Callable[[Any], Any]]]:
    return {k: functools.partial(f, ws) for k, f in _JET_CASES.items()}


JET_CASES = list(_JET_CASES)
XJ = np.random.default_rng(4).standard_normal((4, D_IN))


def _jets(u: Callable[[Any], Any]) -> dict[str, np.ndarray]:
    """jvp, jets of orders 1-3 and Laplacians (collapsed: create_graph False and True) of
    ``u``, and the gradients of the recorded ones with respect to ``x``.
    """
    rng = np.random.default_rng(5)
    v1, v2, v3 = (rng.standard_normal(XJ.shape) for _ in range(3))
    out: dict[str, np.ndarray] = {"jvp": hd.jvp(u, XJ, v1)[1]}
    for order in (1, 2, 3):
        series = ([v1, v2, v3][:order],)
        y0, ys = hd.jet(u, (XJ,), series)
        out[f"jet {order} y0"] = y0
        for k, y in enumerate(ys, 1):
            out[f"jet {order} y{k}"] = y
        x = leaf(XJ)
        y0, ys = hd.jet(u, (x,), series, create_graph=True)
        for k, y in enumerate(ys, 1):
            out[f"jet {order} y{k} recorded"] = y.d
        (g,) = hd.grad(F.sum(ys[-1] ** 2), x)
        out[f"jet {order} recorded, d/dx"] = g.d
    out["laplacian"] = hd.laplacian(u, XJ, batch_axis=0)
    out["laplacian of the sum"] = hd.laplacian(lambda z: F.sum(u(z)), XJ)
    x = leaf(XJ)
    lap = hd.laplacian(u, x, batch_axis=0, create_graph=True)
    out["laplacian recorded"] = lap.d
    (g,) = hd.grad(F.sum(lap**2), x)
    out["laplacian recorded, d/dx"] = g.d
    return out


@pytest.mark.parametrize("case", JET_CASES)
def test_jets_and_laplacians_through_checkpoints_equal_those_without(case: str) -> None:
    ws = _ws(1)
    u = _jet_cases(ws)[case]
    without = _jets(u(False))
    got = _jets(u(True))
    assert got.keys() == without.keys()
    for k in without:
        same(got[k], without[k], f"{case}: {k}")


def _pinn_loss(u: Callable[[Any], Any], x: Any) -> hd.Variable:
    lap = hd.laplacian(u, x, batch_axis=0, create_graph=True)
    src = np.sin(np.arange(x.shape[0]))
    return F.mean((lap + src) ** 2)


@pytest.mark.parametrize("case", JET_CASES)
def test_the_gradient_of_a_laplacian_loss_at_orders_one_and_two(case: str) -> None:
    # the PINN step (.backward(), hd.grad) and a Hessian-vector product of its loss
    ws = _ws(2)
    res = []
    for on in (True, False):  # the second way reuses the parameters the first made
        u = _jet_cases(ws)[case](on)
        loss = _pinn_loss(u, XJ)
        params = ws + list(hd.get_parameters().values())
        for p in params:
            p.zero_grad()
        loss.backward()
        got = [p.g.copy() for p in params]
        loss = _pinn_loss(u, XJ)
        gs = hd.grad(loss, params, allow_unused=True)
        got += [g.d for g in gs]
        vs = [np.cos(np.arange(p.size)).reshape(p.shape) for p in params]
        dot = F.sum(F.stack(*[F.sum(g * v) for g, v in zip(gs, vs, strict=True)]))
        got += [h.d for h in hd.grad(dot, params, allow_unused=True)]
        res.append(got)
    assert len(res[0]) == len(res[1])
    for i, (a, b) in enumerate(zip(*res, strict=True)):
        same(a, b, f"{case}: {i}")


def test_the_biharmonic_through_checkpoints() -> None:
    # a Taylor pass over the recorded graph of a Taylor pass: the jets of the jets'
    # checkpoints (collapsed, and the stochastic one of order 4, not collapsed)
    ws = _ws(4)
    for case in ("nested", "argument out"):
        res = []
        for on in (True, False):
            u = _jet_cases(ws)[case](on)
            got = [hd.biharmonic(u, XJ, batch_axis=0)]
            got.append(hd.biharmonic(u, XJ, batch_axis=0, method="stochastic", num_samples=2))
            x = leaf(XJ)
            bi = hd.biharmonic(u, x, batch_axis=0, create_graph=True)
            got += [bi.d] + [g.d for g in hd.grad(F.sum(bi**2), [x, ws[0]])]
            res.append(got)
        for i, (a, b) in enumerate(zip(*res, strict=True)):
            same(a, b, f"{case}: {i}")


def test_a_static_graph_of_a_laplacian_through_a_checkpoint() -> None:
    w1, b1, _, w3 = _ws(3)

    def u(ckpt: bool) -> Callable[[Any], Any]:
        body = lambda a: F.tanh(F.affine(a, w1, b1)) * F.sin(a @ w1)  # noqa: E731
        return lambda x: F.affine(hd.checkpoint(body, x) if ckpt else body(x), w3)

    with hd.auto_forward(False):
        graphs = []
        for ckpt in (True, False):
            x = hd.Variable(XJ.shape, need_grad=True)
            x.d = XJ
            lap = hd.laplacian(u(ckpt), x, batch_axis=0, create_graph=True)
            loss = F.sum(lap**2)
            graphs.append((x, lap, loss))
    for step in range(3):
        xs = np.cos(np.arange(XJ.size) + step).reshape(XJ.shape)
        got = []
        for x, lap, loss in graphs:
            x.d = xs
            loss.forward()
            w1.zero_grad()
            loss.backward()
            got.append([lap.d.copy(), w1.g.copy()])
        for a, b in zip(*got, strict=True):
            same(a, b, f"step {step}")


def test_a_checkpoint_takes_its_own_jet_rule(monkeypatch: Any) -> None:
    # its rule pushes the jet through the recomputed segment: the generic rule (nested
    # vjps of the node) never runs, at any order, recorded or not

    assert taylor.rule_kinds()["Checkpoint"] == "own"

    def refuse(*args: Any) -> Any:
        raise AssertionError("the generic rule ran")

    monkeypatch.setattr(taylor, "_generic", refuse)
    ws = _ws(1)
    for case in JET_CASES:
        _jets(_jet_cases(ws)[case](True))
    # forward over reverse: a jet through the checkpointed gradient (its node's own rule)
    u = _jet_cases(ws)["nested"]
    v = np.cos(np.arange(XJ.size)).reshape(XJ.shape)
    got = []
    for on in (True, False):
        got.append(hd.hvp(lambda z, on=on: F.sum(u(on)(z) ** 2), XJ, v, mode="fwd-rev")[1])
    same(got[0], got[1])


def _pinn(x: Any, ws: list[hd.Variable], bs: list[hd.Variable], ckpt: bool) -> Any:
    h = x
    for k, (w, b) in enumerate(zip(ws, bs, strict=True)):
        last = k == len(ws) - 1

        def layer(a: Any, w: Any = w, b: Any = b, last: bool = last) -> Any:
            z = F.affine(a, w, b)
            return z if last else F.tanh(z)

        h = hd.checkpoint(layer, h) if ckpt else layer(h)
    return h


PN, PW, PL = 256, 16, 6  # batch, width, hidden layers of the PINN below; D_IN inputs


def _pinn_params() -> tuple[list[hd.Variable], list[hd.Variable]]:
    rng = np.random.default_rng(6)
    dims = [D_IN, *[PW] * PL, 1]
    ws = [leaf(rng.standard_normal((a, b)) / np.sqrt(a)) for a, b in itertools.pairwise(dims)]
    bs = [leaf(0.1 * rng.standard_normal(b)) for b in dims[1:]]
    return ws, bs


def test_the_recorded_taylor_graph_of_a_checkpointed_network_keeps_only_coefficients() -> None:
    # Every layer checkpointed: the recorded Laplacian's graph is one checkpoint per layer
    # (its jet: (h, h_1, h_2) -> the layer's output and coefficients; the values' own
    # checkpoints are not in it) and the Laplacian's reshape; it holds per layer the
    # output h (N W values), its D first-order coefficients and its summed second-order
    # one: (D + 2) N W values.

    ws, bs = _pinn_params()
    x = np.random.default_rng(7).uniform(0, 1, (PN, D_IN))
    layers = len(ws)

    def held(ckpt: bool) -> tuple[int, dict[str, int]]:
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            lap = hd.laplacian(lambda z: _pinn(z, ws, bs, ckpt), x, batch_axis=0, create_graph=True)
            gc.collect()
            size = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        kinds: dict[str, int] = {}
        for f in api.topological_order([lap]):
            kinds[type(f).__name__] = kinds.get(type(f).__name__, 0) + 1
        return size, kinds

    size, kinds = held(True)
    assert kinds.get("Checkpoint") == layers
    assert not {"Affine", "Tanh", "Mul2"} & kinds.keys(), kinds  # no layer's own graph
    assert sum(kinds.values()) - kinds["Checkpoint"] <= 2  # the Laplacian's reshape
    a = PN * PW * 8  # one value per datum and unit (float64)
    coefficients = (layers - 1) * (D_IN + 2) * a  # the hidden layers' (the last: (D + 2) N)
    # plus the last layer's, the input and its directions (under a), and per checkpoint
    # its Python objects (the node, its closure, its kept graph without values: < 24 KiB)
    assert size <= coefficients + 2 * a + kinds["Checkpoint"] * 24 * 2**10
    size0, kinds0 = held(False)
    assert kinds0.get("Tanh", 0) == layers - 1
    # without checkpointing each hidden layer holds at least the values and coefficients
    # of both its affine's and its tanh's outputs (the test can fail)
    assert size0 >= 2 * coefficients


def test_rules_after_the_checkpoints_read_the_jets_values_not_the_first_graph(
    monkeypatch: Any,
) -> None:
    # u(x) = x_0 (1 - x_0) tanh(h w + b), h the checkpointed layers' output, a PINN's hard
    # boundary condition: the head is not checkpointed, and its tanh's jet rule reads the
    # value of its input and output, made from h. That value is read as made by the
    # jets' checkpoints (which computed h again), so the recorded
    # Laplacian's graph reaches no values' checkpoint and its reverse pass does not run
    # them (each would recompute its layer's values and back-propagate them again); the
    # derivatives are those without checkpointing.
    ws, bs = _pinn_params()
    x = np.random.default_rng(8).uniform(0, 1, (PN, D_IN))
    bound = x[:, :1] * (1 - x[:, :1])

    def layer(h: Any, w: Any, b: Any) -> Any:
        return F.tanh(F.affine(h, w, b))

    def u(z: Any, ckpt: bool) -> Any:
        h = z
        for w, b in zip(ws[:-1], bs[:-1], strict=True):
            h = hd.checkpoint(layer, h, w, b) if ckpt else layer(h, w, b)
        return bound * F.tanh(F.affine(h, ws[-1], bs[-1]))  # the head: not checkpointed

    def loss(ckpt: bool) -> hd.Variable:
        lap = hd.laplacian(lambda z: u(z, ckpt), x, batch_axis=0, create_graph=True)
        return F.mean((lap + 1.0) ** 2)

    lap_loss = loss(True)
    names = [f.name for f in api.topological_order([lap_loss]) if type(f) is Checkpoint]
    assert len(names) == len(ws) - 1
    assert all(n.startswith("checkpoint(jet_of_") for n in names), names
    ran: list[str] = []
    backward = Checkpoint.backward_impl

    def spy(self: Checkpoint, *args: Any) -> None:
        ran.append(self.name)
        backward(self, *args)

    monkeypatch.setattr(Checkpoint, "backward_impl", spy)
    gs = hd.grad(lap_loss, ws + bs, allow_unused=True)
    assert sorted(ran) == sorted(names)  # each layer's jet once, no values' checkpoint
    gs0 = hd.grad(loss(False), ws + bs, allow_unused=True)
    for g, g0 in zip(gs, gs0, strict=True):
        same(g.d, g0.d)


def test_a_constant_made_inside_f_is_not_kept() -> None:
    # a constant of f (here 1.6 KiB, too large for the kept graph) dies with f's first
    # graph: it is made again by each recomputation, and the node does not hold it (nor
    # does a jet's checkpoint hold the constants its rules make)
    x = leaf(np.ones((50, 4)))
    y = hd.checkpoint(lambda a: a * np.full((50, 4), 2.0), x)
    assert len(y.parent.inputs) == 1
    (g,) = hd.grad(F.sum(y**2), x)
    same(g.d, np.full((50, 4), 8.0))


def test_the_version_check_of_a_laplacian_through_a_checkpoint() -> None:
    ws, bs = _pinn_params()
    x = np.random.default_rng(7).uniform(0, 1, (PN, D_IN))
    loss = _pinn_loss(lambda z: _pinn(z, ws, bs, True), x)
    ws[2].d = ws[2].d * 2.0  # the next step's weights, before the reverse pass
    with pytest.raises(
        RuntimeError,
        match=r"checkpoint\(.*\) reads its input \d+ \(a leaf, shape \(16, 16\), dtype float64\)",
    ):
        loss.backward()
    assert not any(w.g.any() for w in ws)  # nothing was touched
    xv = leaf(x)
    loss = _pinn_loss(lambda z: _pinn(z, ws, bs, True), xv)
    xv.d = x + 1.0  # an argument changed through .d
    with pytest.raises(RuntimeError, match=r"reads its input 0 .*shape \(256, 3\)"):
        hd.grad(loss, ws)


# ------------------------------------------------------------------ errors
def test_bad_arguments_raise_naming_checkpoint() -> None:
    x = leaf(X0)
    with pytest.raises(TypeError, match="checkpoint: f must be callable, got int"):
        hd.checkpoint(3, x)
    with pytest.raises(TypeError, match=r"f must return a Variable .*got ndarray"):
        hd.checkpoint(lambda a: a.d, x)
    with pytest.raises(ValueError, match="f returned an empty tuple"):
        hd.checkpoint(lambda a: (), x)
    with pytest.raises(TypeError, match=r"output 1 of f is a float"):
        hd.checkpoint(lambda a: (a, 1.0), x)
    with pytest.raises(TypeError, match=r"output 0 of f has dtype bool"):
        hd.checkpoint(lambda a: a > 0, x)


def test_an_argument_changed_before_the_recomputation_raises() -> None:
    w = leaf(WS[0])
    x = leaf(X0)
    y = F.sum(hd.checkpoint(lambda a: F.tanh(a @ w), x))
    x.d = X0 * 2  # the next batch, before the reverse pass
    with pytest.raises(RuntimeError, match=r"checkpoint\(<lambda>\) reads its input 0") as e:
        y.backward()
    assert "(5, 4)" in str(e.value)
    assert "float64" in str(e.value)
    assert not w.g.any()  # nothing was touched
    w2 = leaf(WS[0])
    y2 = F.sum(hd.checkpoint(lambda a: F.tanh(a @ w2), leaf(X0)))
    w2.d = WS[1]  # a weight it closed over, changed through .d
    with pytest.raises(RuntimeError, match=r"reads its input 1 \(a leaf, shape \(4, 4\)"):
        hd.grad(y2, w2)


def test_a_recomputation_using_another_variable_raises() -> None:
    ws = [leaf(WS[0]), leaf(WS[1])]
    calls = []

    def f(a: hd.Variable) -> hd.Variable:
        calls.append(1)
        return F.tanh(a @ ws[min(len(calls), 2) - 1])

    x = leaf(X0)
    y = F.sum(hd.checkpoint(f, x))
    # hd.grad records the gradient: it runs f again (a plain .backward() reuses the first
    # run's graph, see test_a_plain_backward_computes_the_first_graph_again)
    with pytest.raises(RuntimeError, match="used a variable its first run did not"):
        hd.grad(y, x)


def test_a_recomputation_with_other_shapes_raises() -> None:
    calls = []

    def f(a: hd.Variable) -> hd.Variable:
        calls.append(1)
        return F.tanh(a) if len(calls) == 1 else F.tanh(a[:2])

    x = leaf(X0)
    y = F.sum(hd.checkpoint(f, x))
    with pytest.raises(RuntimeError, match=r"returned \(2, 4\) float64 where its first run"):
        hd.grad(y, x)


# ------------------------------------------------------------------ PF convenience
def res_block(h: hd.Variable, name: str) -> hd.Variable:
    with hd.parameter_scope(name):
        return h + F.tanh(PF.affine(h, 4))


@pytest.mark.parametrize("segments", [None, 1, 2, 4, 7])
def test_checkpoint_sequential_equals_the_plain_blocks(segments: int | None) -> None:
    blocks = [functools.partial(res_block, name=f"b{i}") for i in range(7)]
    res = []
    for ckpt in (True, False):
        hd.clear_parameters()
        hd.seed(1)
        x = leaf(X0)
        with hd.parameter_scope("critic"):
            if ckpt:
                y = PF.checkpoint_sequential(blocks, x, segments=segments)
            else:
                y = x
                for b in blocks:
                    y = b(y)
        params = list(hd.get_parameters().values())
        assert len(params) == 14
        (g,) = hd.grad(F.sum(y**2), x)
        loss = F.sum(g**2)
        loss.backward()
        res.append([y.d, g.d] + [p.g.copy() for p in params])
    for u, v in zip(*res, strict=True):
        same(u, v)


def test_checkpoint_sequential_segments() -> None:
    x = leaf(X0)
    counts: list[int] = []

    def block(h: hd.Variable) -> hd.Variable:
        counts.append(1)
        return F.tanh(h)

    y = PF.checkpoint_sequential([block] * 7, x, segments=3)  # runs of 3, 2, 2 blocks
    nodes = []
    v = y
    while v.parent is not None:
        nodes.append(v.parent)
        v = v.parent.inputs[0]
    assert len(nodes) == 3
    assert all(type(n).__name__ == "Checkpoint" for n in nodes)
    assert [len(n.statics[0]) for n in reversed(nodes)] == [3, 2, 2]
    same(y.d, np.tanh(np.tanh(np.tanh(np.tanh(np.tanh(np.tanh(np.tanh(X0))))))))
    with pytest.raises(ValueError, match=r"segments must be between 1 and len\(blocks\) = 7"):
        PF.checkpoint_sequential([block] * 7, x, segments=8)
    with pytest.raises(ValueError, match="blocks is empty"):
        PF.checkpoint_sequential([], x)
    with pytest.raises(TypeError, match=r"blocks\[1\] is a int"):
        PF.checkpoint_sequential([block, 3], x)
    with pytest.raises(TypeError, match="segments must be an int"):
        PF.checkpoint_sequential([block], x, segments=1.0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ memory
N, WIDTH, LAYERS = 4096, 8, 32
A = N * WIDTH * 8  # bytes of one activation (float64)


def chain_inputs() -> tuple[hd.Variable, list[hd.Variable], list[hd.Variable]]:
    rng = np.random.default_rng(0)
    x = leaf(rng.standard_normal((N, WIDTH)), need_grad=False)
    ws = [leaf(0.3 * rng.standard_normal((WIDTH, WIDTH))) for _ in range(LAYERS)]
    bs = [leaf(np.zeros(WIDTH)) for _ in range(LAYERS)]
    return x, ws, bs


def res_layer(h: hd.Variable, w: hd.Variable, b: hd.Variable) -> hd.Variable:
    return h + F.tanh(F.affine(h, w, b))


def chain(x: hd.Variable, ws: list[Any], bs: list[Any], ckpt: bool) -> hd.Variable:
    h = x
    for w, b in zip(ws, bs, strict=True):
        h = hd.checkpoint(res_layer, h, w, b) if ckpt else res_layer(h, w, b)
    return h


def plain_step(ckpt: bool) -> Callable[[], Any]:
    x, ws, bs = chain_inputs()

    def step() -> Any:
        F.mean(chain(x, ws, bs, ckpt) ** 2).backward(clear_buffer=True)
        return ws[0].g

    return step


def penalty(ckpt: bool) -> Callable[[], Any]:
    x, ws, bs = chain_inputs()
    x.need_grad = True

    def step() -> Any:
        (g,) = hd.grad(F.sum(chain(x, ws, bs, ckpt)), x)
        F.mean(g * g).backward(clear_buffer=True)
        return ws[0].g

    return step


def traced_peak(fn: Callable[[], Any]) -> int:
    fn()  # warm: the weights' gradient buffers exist
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_peak_memory_of_a_plain_backward_tracemalloc() -> None:
    # Without checkpointing the graph keeps, per layer, the affine's output, tanh's output and
    # the layer's output (3 A), so the peak is at least 3 LAYERS A. With every layer
    # checkpointed it keeps the LAYERS + 1 layer outputs; the reverse pass adds one layer's
    # recomputed values (3 A) and gradients (at most 4 A), the incoming gradient and the
    # seed (2 A), and the loss's own values (2 A): at most (LAYERS + 12) A. (Weights and
    # their gradients are 2 LAYERS (WIDTH^2 + WIDTH) 8 bytes, under A here.)
    without = traced_peak(plain_step(False))
    with_ = traced_peak(plain_step(True))
    assert without >= 3 * LAYERS * A
    assert with_ <= (LAYERS + 12) * A


def test_peak_memory_of_a_gradient_penalty_tracemalloc() -> None:
    # hd.grad then .backward(): without checkpointing the forward graph (3 A per layer) and
    # the gradient graph (at least the incoming gradient and tanh's backward, 2 A per layer)
    # are alive together: at least 5 LAYERS A. Checkpointed, each layer keeps its input,
    # its output and the gradient it receives (2 A per layer, outputs and inputs shared):
    # 2 LAYERS A, plus one layer's recomputed values and gradient graph, and their
    # gradients in the reverse pass (at most 16 A).
    without = traced_peak(penalty(False))
    with_ = traced_peak(penalty(True))
    assert without >= 5 * LAYERS * A
    assert with_ <= (2 * LAYERS + 16) * A


RSS_CHILD = textwrap.dedent(
    """
    import gc, json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    import tests.test_checkpoint as T
    import hodiff as hd

    def status():
        out = {{}}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":")
                    out[k] = int(v.split()[0]) * 1024
        return out

    res = {{}}
    with hd.context_scope(hd.Context(dtype="float64")):
        for ckpt in (False, True):
            fn = T.plain_step(ckpt)
            fn()
            gc.collect()
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            base = status()["VmRSS"]
            fn()
            res[str(ckpt)] = status()["VmHWM"] - base
    print(json.dumps(res))
    """
)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux only")
def test_peak_resident_set_of_a_plain_backward() -> None:
    # The same bounds as the tracemalloc test, on the resident set of a child process in
    # which glibc maps every array of 64 KiB or more on its own and unmaps it when freed
    # (so the high-water mark follows the arrays alive), plus 2 MiB for what Python itself
    # touches.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", RSS_CHILD.format(root=root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=300,
        check=True,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    without, with_ = res["False"], res["True"]
    # the kernel may page out a few cold pages meanwhile (a reclaim daemon such as DAMON's,
    # which these machines run): the high-water mark can fall short of the arrays by as
    # much, never exceed them; 1 MiB is 4% of the uncheckpointed peak
    assert without >= 3 * LAYERS * A - 2**20
    assert with_ <= (LAYERS + 12) * A + 2 * 2**20


def test_hd_grad_inside_the_segment() -> None:
    w = leaf(WS[0])

    def f(a: hd.Variable) -> hd.Variable:
        (g,) = hd.grad(F.sum(F.tanh(a @ w) ** 2), a)  # a gradient inside the segment
        return g * a

    res = []
    for ckpt in (True, False):
        x = leaf(X0)
        w.zero_grad()
        y = hd.checkpoint(f, x) if ckpt else f(x)
        gx, gw = hd.grad(F.sum(y**2), [x, w])
        (h,) = hd.grad(F.sum(gx**2), w)
        F.sum(y**2).backward()
        res.append([y.d, gx.d, gw.d, h.d, w.g.copy()])
    for u, v in zip(*res, strict=True):
        same(u, v)


def test_bench_checkpoint_runs_at_a_tiny_size(tmp_path: Any) -> None:
    from bench import checkpoint as bench_checkpoint

    out, png = tmp_path / "c.json", tmp_path / "c.png"
    args = ["--size", "tiny", "--repeats", "1", "--no-rss", "--no-torch", "--paired", "2"]
    assert bench_checkpoint.main([*args, "--out", str(out), "--plot", str(png)]) == 0
    result = json.loads(out.read_text())
    assert max(result["errors"].values()) <= 1e-5  # float32: checkpointed == plain
    every = {
        f"hodiff {t}{c}"
        for t in ("W8", "W9", "W10", "W10b", "W10h", "W11", "W12e", "W12g", "W13")
        for c in "c "
    }
    assert {k.strip() for k in every} <= set(result["errors"]), set(result["errors"])
    paired = result["paired"]["hodiff W8c / hodiff W8"]
    assert len(paired["ratios"]) == 2
    assert 0 < paired["quartiles"][1] < 100
    assert {r["segments"] for r in result["sweep"]} == {None, 1, 2, 3}
    # the floors: W9 recomputes each layer once (one product and one tanh more per layer)
    assert result["products"]["hodiff W9c"] - result["products"]["hodiff W9"] == 4
    assert result["tanhs"]["hodiff W9c"] - result["tanhs"]["hodiff W9"] == 4
    assert set(result["floors"]) == {
        f"hodiff {t}c / hodiff {t}" for t in ("W8", "W9", "W10", "W10b", "W10h", "W11")
    }
    assert all(1 < v < 10 for v in result["floors"].values()), result["floors"]
    assert png.stat().st_size > 0


def test_closed_over_values_of_the_enclosing_graph_one_made_from_the_other() -> None:
    # f closes over e1 = sin(x) and e2 = 3 e1: the segment's gradient with respect to e1 is
    # its partial derivative (the enclosing pass carries e2's gradient back to e1 itself)
    b = np.array([0.5, 1.5, -0.7])
    res = []
    for ckpt in (True, False):
        x = leaf(b)
        e1 = F.sin(x)
        e2 = e1 * 3.0
        body = lambda a, e1=e1, e2=e2: a * e1 * e2  # noqa: E731
        y = F.sum(hd.checkpoint(body, x) if ckpt else body(x))
        y.backward()
        (g,) = hd.grad(y, x)
        (h,) = hd.grad(F.sum(g**2), x)
        (t,) = hd.grad(F.sum(h**2), x)
        res.append([x.g.copy(), g.d, h.d, t.d])
    for u, v in zip(*res, strict=True):
        same(u, v)
    # y = 3 x sin(x)^2: y' = 3 sin^2 + 6 x sin cos
    np.testing.assert_allclose(res[0][1], 3 * np.sin(b) ** 2 + 6 * b * np.sin(b) * np.cos(b))


def test_a_checkpoint_does_not_walk_the_enclosing_graph(monkeypatch: Any) -> None:
    # the layers' weight is computed by a deep graph (depth nodes) outside the segments: what
    # a checkpoint walks, when it is made and in every reverse pass (a plain one and the
    # recorded gradient's, a gradient penalty), is its own segment's nodes (a few), never
    # that graph (which made each visit cost O(depth): 16 layers were 5x slower than none)
    depth, layers = 300, 4
    walked: list[int] = []
    spy = type(api)("spy")
    spy.__dict__.update(api.__dict__)

    def recorded(fn: Any, size: Callable[[Any], int]) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            walked.append(size(out))
            return out

        return wrapped

    spy.topological_order = recorded(api.topological_order, len)  # type: ignore[attr-defined]
    spy.nodes_since = recorded(api.nodes_since, len)  # type: ignore[attr-defined]

    def plan(outputs: Any, inputs: Any, order: Any = None) -> Any:  # walks order, or all
        walked.append(len(api.topological_order(outputs) if order is None else order))
        return api.plan(outputs, inputs, order)

    spy.plan = plan  # type: ignore[attr-defined]
    for name in ("node", "segment", "handover", "kept", "jet", "tracing", "replay"):
        monkeypatch.setattr(sys.modules[f"hodiff.transforms.checkpointing.{name}"], "api", spy)
    monkeypatch.setattr(taylor, "api", spy)

    res = []
    for ckpt in (True, False):
        v, b = leaf(WS[0]), leaf(BS[0])
        w = v
        for _ in range(depth):
            w = w * 1.0
        x = leaf(X0)

        def u(h: hd.Variable, ckpt: bool = ckpt, w: Any = w, b: Any = b) -> hd.Variable:
            body = lambda a: tanh_layer(a, w, b)  # noqa: E731  (w: an external of f)
            for _ in range(layers):
                h = hd.checkpoint(body, h) if ckpt else body(h)
            return h

        (g,) = hd.grad(F.sum(u(x)), x)  # a gradient penalty's first pass, recorded
        F.sum(g * g).backward()  # its plain pass
        lap = hd.laplacian(lambda a: F.sum(u(a), axis=1), X0, batch_axis=0, create_graph=True)
        (t,) = hd.grad(F.sum(lap**2), v)  # a PINN's loss: the jets through the segments
        res.append([v.g.copy(), b.g.copy(), g.d, t.d])
    for p, q in zip(*res, strict=True):
        same(p, q)
    assert walked, "the spy saw no walk"
    # a segment's graphs (its Taylor graph is the largest) are far smaller than the graph
    # around it: a walk of that graph counts depth nodes at least
    assert max(walked) < depth, max(walked)


# ------------------------------------------------------------------ shared passes
# A recorded gradient's plain pass leaves the part through f's rules to the forward checkpoint
# of the same segment, which runs f's rules once on the sum (as without checkpointing); a
# plain pass over a checkpoint whose f is a static function of its inputs computes the values
# again by the nodes of f's first graph, without running f.
def tanh_layer(h: hd.Variable, w: hd.Variable, b: hd.Variable) -> hd.Variable:
    return h + F.tanh(F.affine(h, w, b))


def critic(h: hd.Variable, ws: list[Any], bs: list[Any], ckpt: bool, layer: Any = None) -> Any:
    layer = layer or tanh_layer
    for w, b in zip(ws, bs, strict=True):
        h = hd.checkpoint(layer, h, w, b) if ckpt else layer(h, w, b)
    return h


def critic_inputs() -> tuple[hd.Variable, hd.Variable, list[hd.Variable], list[hd.Variable]]:
    return leaf(X0), leaf(X0[::-1].copy()), [leaf(w) for w in WS], [leaf(b) for b in BS]


class Counting:
    """Counts the calls of ``Affine.backward_impl`` on arrays (the layers' matrix products;
    not the calls that link a gradient graph)."""

    def __init__(self, monkeypatch: Any) -> None:

        self.calls = 0
        rule = Affine.backward_impl

        def counted(f: Any, inputs: Any, outputs: Any, *args: Any) -> None:
            self.calls += isinstance(outputs[0].grad, np.ndarray)
            rule(f, inputs, outputs, *args)

        monkeypatch.setattr(Affine, "backward_impl", counted)


def gp_step(ckpt: bool, count: Counting, layer: Any = None, head: bool = True) -> list[Any]:
    """A WGAN-GP-like step through residual tanh layers: the affine backward calls of the
    final ``.backward()`` are counted."""
    x, x_hat, ws, bs = critic_inputs()
    wh = leaf(np.linspace(-1, 1, 4)[:, None])

    def d(h: hd.Variable) -> hd.Variable:
        out = critic(h, ws, bs, ckpt, layer)
        return F.affine(out, wh) if head else out

    (g,) = hd.grad(F.sum(d(x_hat)), x_hat)
    pen = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
    loss = F.mean(d(x)) + 10.0 * pen
    before = count.calls
    loss.backward(clear_buffer=True)
    count.calls -= before
    return [v.g for v in (*ws, *bs, wh, x, x_hat)]


def test_a_gradient_penalty_runs_each_affine_backward_once(monkeypatch: Any) -> None:
    count = Counting(monkeypatch)
    ref = gp_step(False, count)
    plain = count.calls
    got = gp_step(True, count)
    for a, b in zip(got, ref, strict=True):
        same(a, b)
    # without checkpointing each affine node runs its rule once; checkpointed, the gradient
    # of a segment leaves f's part to the segment's forward checkpoint (2 per layer without)
    assert count.calls == plain


def test_a_hand_over_that_would_keep_more_is_not_made(monkeypatch: Any) -> None:
    # An HVP: the recorded gradient's own part gives x a gradient already (the weights'
    # gradient graph reads x), so the frontier's gradient would be kept beside it: f's part
    # runs in the gradient's pass and again in the forward checkpoint's (2 rules per layer)
    count = Counting(monkeypatch)
    res = []
    for ckpt in (False, True):
        x, _, ws, bs = critic_inputs()
        gs = hd.grad(F.sum(critic(x, ws, bs, ckpt) ** 2), [x, *ws, *bs])
        dot = F.sum(F.stack(*[F.sum(g * g) for g in gs]))
        before = count.calls
        res.append([h.d for h in hd.grad(dot, [x, *ws, *bs], create_graph=False)])
        res.append(count.calls - before)
    for a, b in zip(res[2], res[0], strict=True):
        same(a, b)
    assert res[1] == len(WS)
    assert res[3] == 2 * len(WS)


def test_a_forward_checkpoint_reached_by_no_gradient_still_runs_what_was_left_to_it() -> None:
    # the critic's output is used only through a comparison (no gradient): its last
    # checkpoint is in the pass but no gradient reaches it; the gradient's part left to it
    # must run all the same
    res = []
    for ckpt in (False, True):
        _, x_hat, ws, bs = critic_inputs()
        z = leaf(np.cos(np.arange(20.0)).reshape(5, 4))
        out = critic(x_hat, ws, bs, ckpt)
        (g,) = hd.grad(F.sum(out), x_hat)
        mask = F.greater_scalar(out, 0.0)
        loss = F.sum(g * g) + F.sum(mask * z)
        loss.backward()
        res.append([v.g.copy() for v in (*ws, *bs, x_hat, z)])
    for a, b in zip(res[1], res[0], strict=True):
        same(a, b)


class SetOnBackward(hd.Function):
    """The identity, whose backward rule in a plain pass sets ``target.d`` (a value
    changed during the pass)."""

    def __init__(self, target: hd.Variable, value: np.ndarray) -> None:
        self.target, self.value = target, value

    def forward_impl(self, inputs: Any, outputs: list[Any]) -> None:
        outputs[0] = inputs[0].copy()

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if isinstance(outputs[0].grad, np.ndarray):  # a plain pass (hd.grad records)
            self.target.d = self.value
        if prop_down[0]:
            inputs[0].store(outputs[0].grad, accum[0])


def test_a_hand_over_raises_on_an_input_changed_during_the_pass() -> None:
    # layer 1 closes over c; the gradient of layer 1 leaves f's part to layer 1's forward
    # checkpoint; between the two a node's rule sets c.d: the forward checkpoint raises
    # (the frontier's gradient is of the old c) before it stores anything
    x_hat, ws, bs = leaf(X0), [leaf(w) for w in WS[:2]], [leaf(b) for b in BS[:2]]
    c = leaf(np.full(4, 0.5), need_grad=False)
    h1 = hd.checkpoint(lambda h: h + F.tanh(F.affine(h, ws[0], bs[0]) * c), x_hat)
    h1b = SetOnBackward(c, np.full(4, 2.0))(h1)
    h2 = hd.checkpoint(tanh_layer, h1b, ws[1], bs[1])
    (g,) = hd.grad(F.sum(h2), x_hat)
    why = r"its input \d \(a leaf, shape \(4,\), dtype float64\) was set through \.d during"
    with pytest.raises(RuntimeError, match=why):
        F.sum(g * g).backward()
    assert ws[0].g is None or not ws[0].g.any()  # layer 1's forward checkpoint stored nothing


def test_random_functions_replay_in_a_shared_pass(monkeypatch: Any) -> None:
    def noisy_layer(h: hd.Variable, w: hd.Variable, b: hd.Variable) -> hd.Variable:
        # the noise scales the tanh: the gradient reads it (a small frontier value)
        return h + F.tanh(F.affine(h, w, b)) * (1.0 + 0.1 * F.randn(shape=(1, 4)))

    count = Counting(monkeypatch)
    hd.seed(5)
    ref = gp_step(False, count, noisy_layer)
    plain = count.calls
    hd.seed(5)
    got = gp_step(True, count, noisy_layer)
    for a, b in zip(got, ref, strict=True):
        same(a, b)
    assert count.calls == plain  # the hand-over is made (f is run again, not kept)


def test_a_plain_backward_computes_the_first_graph_again() -> None:
    calls = []

    def f(h: hd.Variable, w: hd.Variable, b: hd.Variable) -> hd.Variable:
        calls.append(1)
        return tanh_layer(h, w, b)

    res = []
    for ckpt in (True, False):
        x, _, ws, bs = critic_inputs()
        y = F.sum(hd.checkpoint(f, x, ws[0], bs[0]) if ckpt else f(x, ws[0], bs[0]))
        y.backward()
        y.backward()  # twice: the plan is made once, the values computed each time
        res.append([x.g.copy(), ws[0].g.copy(), bs[0].g.copy()])
    assert len(calls) == 2  # once checkpointed (its first run), once without
    for a, b in zip(*res, strict=True):
        same(a, b)
    # by hand: y = sum(x + tanh(x w + b)), dy/db = sum_n (1 - tanh^2) (two passes added)
    t = np.tanh(X0 @ WS[0] + BS[0])
    np.testing.assert_allclose(res[0][2], 2 * (1 - t**2).sum(axis=0), rtol=1e-12)


def test_current_pass_and_the_handoff() -> None:

    seen: list[Any] = []

    class Probe(hd.Function):
        """The identity; its rule records the pass it runs in and leaves work for
        ``later`` (a node made before it)."""

        later: Any = None

        def forward_impl(self, inputs: Any, outputs: list[Any]) -> None:
            outputs[0] = inputs[0].copy()

        def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
            scope = api.current_pass()
            seen.append(scope)
            if scope is not None and self.later is not None:
                assert scope.visits(self.later)
                scope.handoff[self.later] = "work"
            if prop_down[0]:
                inputs[0].store(outputs[0].grad, accum[0])

    assert api.current_pass() is None
    x = leaf(X0)
    a = Probe()(x)  # reached by no gradient below, but work is left for it
    b = Probe()(x)
    b.parent.later = a.parent
    loss = F.sum(b) + F.sum(F.greater_scalar(a, 0.0) * 1.0)
    loss.backward()
    assert len(seen) == 2
    assert seen[0] is seen[1]
    assert isinstance(seen[0], api.PassScope)
    assert seen[0].handoff == {}  # dropped with the pass
    np.testing.assert_array_equal(x.g, np.ones_like(X0))  # a's rule ran with zeros
    seen.clear()
    hd.grad(F.sum(Probe()(x)), x)  # hd.grad records: no plain pass's scope
    assert seen == [None]
    # a pass that yields (iter_grads) and is stopped early leaves no scope behind, also
    # when it stops at a leaf made final by a node no gradient reached (p2, run last)
    w = leaf(np.ones(4))
    p2 = Probe()(x)
    mask = F.greater_scalar(p2, 0.0)
    steps = reverse.backward_steps(F.sum(Probe()(x) * w) + F.sum(mask * w))
    assert next(steps) is w
    assert api.current_pass() is None  # between the yields: not in the pass
    assert next(steps) is x  # yielded where p2 is skipped
    steps.close()
    assert api.current_pass() is None


def test_a_forward_checkpoint_that_makes_another_graph_than_its_gradient_raises() -> None:
    # f draws noise (so it runs again, not its first graph), and from its fourth call on
    # (the forward checkpoint's recomputation, after the gradient's) makes one more node
    calls = []

    def f(h: hd.Variable, w: hd.Variable, b: hd.Variable) -> hd.Variable:
        calls.append(1)
        if len(calls) >= 4:
            h = F.identity(h)
        return h + F.tanh(F.affine(h, w, b)) * (1.0 + 0.1 * F.randn(shape=(1, 4)))

    x_hat, w, b = leaf(X0), leaf(WS[0]), leaf(BS[0])
    y = hd.checkpoint(f, x_hat, w, b)
    (g,) = hd.grad(F.sum(F.affine(y, leaf(np.ones((4, 1))))), x_hat)
    loss = F.sum(g * g) + F.sum(y)  # the forward checkpoint is in the pass
    with pytest.raises(RuntimeError, match=r"f made another graph \(\d+ nodes\) than when"):
        loss.backward()
    assert len(calls) == 4
