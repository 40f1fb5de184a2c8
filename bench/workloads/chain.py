"""W4: per-op overhead. ``y = x``; 200 times ``y = tanh(y) * 1.01 + 0.1`` on a size-16
vector (600 tiny ops); the second derivative of ``sum(y)`` w.r.t. ``x`` (elementwise:
``d/dx sum(d sum(y) / dx)``), which records and replays a graph of thousands of nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.workloads.common import (
    Fns,
    Task,
    Workload,
    jax_blocking,
    load_autograd,
    load_jax,
    load_torch,
)

SIZES = {"full": (200, 16), "tiny": (4, 3)}


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    steps, n = SIZES[size]
    x = np.random.default_rng(4).standard_normal(n).astype(dtype)
    return {"x": x, "steps": steps}


def _chain(x: Any, steps: int, tanh: Any) -> Any:
    y = x
    for _ in range(steps):
        y = tanh(y) * 1.01 + 0.1
    return y


def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd
    import hodiff.functions as F

    x = hd.Variable.from_array(inp["x"], need_grad=True)
    steps = inp["steps"]

    def d2() -> Any:
        x.zero_grad()
        (g,) = hd.grad(F.sum(_chain(x, steps, F.tanh)), x)
        F.sum(g).backward()
        return x.g

    def d2_grad_twice() -> Any:
        (g,) = hd.grad(F.sum(_chain(x, steps, F.tanh)), x)
        (h,) = hd.grad(F.sum(g), x, create_graph=False)  # as torch's second autograd.grad
        return h.d

    # the same second derivative as a static graph, recorded once and re-run per call
    xs = hd.Variable(x.shape, need_grad=True, dtype=x.dtype)
    with hd.auto_forward(False):
        (gs,) = hd.grad(F.sum(_chain(xs, steps, F.tanh)), xs)
        (hs,) = hd.grad(F.sum(gs), xs)
    data = inp["x"]

    def d2_static() -> Any:
        xs.d = data
        hs.forward()
        return hs.d

    return {"W4": d2, "W4b": d2_grad_twice, "W4s": d2_static}


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of the second derivative (hd.grad twice inside)."""
    import hodiff as hd
    import hodiff.functions as F

    steps = inp["steps"]

    def d2(x: Any) -> Any:
        (g,) = hd.grad(F.sum(_chain(x, steps, F.tanh)), x)
        (h,) = hd.grad(F.sum(g), x)
        return h

    g = hd.jit(d2)
    data = inp["x"]
    return {"W4": lambda: g(data)}


def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    x = torch.from_numpy(inp["x"]).requires_grad_(True)
    steps = inp["steps"]

    def d2() -> Any:
        (g,) = torch.autograd.grad(_chain(x, steps, torch.tanh).sum(), x, create_graph=True)
        return torch.autograd.grad(g.sum(), x)

    # one reference for the three ways hodiff runs it (torch has no static graph to re-run)
    return {"W4": d2, "W4b": d2, "W4s": d2}


def jax_fns(inp: dict[str, Any]) -> Fns:
    """Jitted; the loop is a ``lax.fori_loop`` (unrolled, the second derivative of the
    200 steps takes XLA minutes to compile)."""
    jax, jnp = load_jax()
    steps = inp["steps"]

    def chain(x: Any) -> Any:
        return jax.lax.fori_loop(0, steps, lambda _, y: jnp.tanh(y) * 1.01 + 0.1, x)

    def g(x: Any) -> Any:
        return jax.grad(lambda x: jnp.sum(chain(x)))(x)

    d2 = jax.jit(jax.grad(lambda x: jnp.sum(g(x))))
    return {"W4": jax_blocking(jax, d2, inp["x"])}


def autograd_fns(inp: dict[str, Any]) -> Fns:
    autograd, anp = load_autograd()
    steps, x = inp["steps"], inp["x"]

    def g(x: Any) -> Any:
        return autograd.grad(lambda x: anp.sum(_chain(x, steps, anp.tanh)))(x)

    d2 = autograd.grad(lambda x: anp.sum(g(x)))
    return {"W4": lambda: d2(x)}


WORKLOAD = Workload(
    name="chain",
    title="per-op overhead: 200 x (tanh, *1.01, +0.1) on size 16, second derivative",
    tasks=(
        Task("W4", "per-op overhead, 2nd derivative"),
        Task("W4b", "per-op overhead, 2nd derivative, hd.grad then hd.grad(create_graph=False)"),
        Task("W4s", "per-op overhead, 2nd derivative, static graph re-run"),
    ),
    dtypes=("float64",),
    make_inputs=make_inputs,
    builders={
        "hodiff": hodiff_fns,
        "hd.jit": jit_fns,
        "torch": torch_fns,
        "jax": jax_fns,
        "autograd": autograd_fns,
    },
    notes={
        "hodiff": "W4: hd.grad, then .backward() of its sum; W4b: hd.grad, then "
        "hd.grad(..., create_graph=False); W4s: both "
        "hd.grad recorded once in static mode (auto_forward(False)), then x.d = ...; h.forward()",
        "hd.jit": "W4: hd.jit of hd.grad of hd.grad, backend replay",
        "torch": "autograd.grad(create_graph=True), then autograd.grad",
        "jax": "jax.jit(jax.grad(sum o jax.grad)), loop as lax.fori_loop: compiled, no per-op cost",
        "autograd": "autograd.grad of autograd.grad",
    },
)
