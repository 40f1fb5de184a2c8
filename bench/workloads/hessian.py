"""W5: a full Hessian and a third derivative.

W5a: the Hessian of ``f(x) = sum(logsumexp(A @ x))`` with ``A`` 200x100 (100x100 result;
autograd does one reverse pass per row; hodiff, torch.func and jax vectorize).
W5b: the third derivative of ``sum(tanh(x)**2)`` for ``x`` of size 1000, elementwise:
``d/dx sum(d/dx sum(d/dx sum(tanh(x)**2)))``.
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

SIZES = {"full": ((200, 100), 1000), "tiny": ((5, 4), 6)}


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    (m, n), n3 = SIZES[size]
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((m, n)) / np.sqrt(n)).astype(dtype)
    return {
        "A": a,
        "x": rng.standard_normal(n).astype(dtype),
        "x3": rng.standard_normal(n3).astype(dtype),
    }


def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd
    import hodiff.functions as F

    a = hd.Variable.from_array(inp["A"])
    x0 = inp["x"]
    x3 = hd.Variable.from_array(inp["x3"], need_grad=True)

    def hessian() -> Any:
        return hd.hessian(lambda x: F.sum(F.logsumexp(a @ x)), x0)

    def d3() -> Any:
        x3.zero_grad()
        (g1,) = hd.grad(F.sum(F.tanh(x3) ** 2), x3)
        (g2,) = hd.grad(F.sum(g1), x3)
        F.sum(g2).backward()
        return x3.g

    return {"W5a": hessian, "W5b": d3}


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of hd.hessian (one batched graph) and of the third derivative."""
    import hodiff as hd
    import hodiff.functions as F

    a = hd.Variable.from_array(inp["A"])
    hessian = hd.jit(lambda x: hd.hessian(lambda z: F.sum(F.logsumexp(a @ z)), x))

    def d3(x: Any) -> Any:
        (g1,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
        (g2,) = hd.grad(F.sum(g1), x)
        (g3,) = hd.grad(F.sum(g2), x)
        return g3

    third = hd.jit(d3)
    x0, x3 = inp["x"], inp["x3"]
    return {"W5a": lambda: hessian(x0), "W5b": lambda: third(x3)}


def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    a, x0 = torch.from_numpy(inp["A"]), torch.from_numpy(inp["x"])
    x3 = torch.from_numpy(inp["x3"]).requires_grad_(True)
    hessian = torch.func.hessian(lambda x: torch.logsumexp(a @ x, dim=0).sum())

    def d3() -> Any:
        (g1,) = torch.autograd.grad((torch.tanh(x3) ** 2).sum(), x3, create_graph=True)
        (g2,) = torch.autograd.grad(g1.sum(), x3, create_graph=True)
        return torch.autograd.grad(g2.sum(), x3)

    return {"W5a": lambda: hessian(x0), "W5b": d3}


def jax_fns(inp: dict[str, Any]) -> Fns:
    jax, jnp = load_jax()
    a = jnp.asarray(inp["A"])
    hessian = jax.jit(jax.hessian(lambda x: jnp.sum(jax.nn.logsumexp(a @ x))))

    def d(f: Any) -> Any:
        return jax.grad(lambda x: jnp.sum(f(x)))

    d3 = jax.jit(d(d(d(lambda x: jnp.tanh(x) ** 2))))
    return {"W5a": jax_blocking(jax, hessian, inp["x"]), "W5b": jax_blocking(jax, d3, inp["x3"])}


def autograd_fns(inp: dict[str, Any]) -> Fns:
    autograd, anp = load_autograd()
    from autograd.scipy.special import logsumexp

    a, x0, x3 = inp["A"], inp["x"], inp["x3"]
    hessian = autograd.hessian(lambda x: anp.sum(logsumexp(anp.dot(a, x))))

    def d(f: Any) -> Any:
        return autograd.grad(lambda x: anp.sum(f(x)))

    d3 = d(d(d(lambda x: anp.tanh(x) ** 2)))
    return {"W5a": lambda: hessian(x0), "W5b": lambda: d3(x3)}


WORKLOAD = Workload(
    name="hessian",
    title="full Hessian of sum(logsumexp(A @ x)), A 200x100; 3rd derivative of "
    "sum(tanh(x)**2), size 1000",
    tasks=(Task("W5a", "Hessian 100x100 of logsumexp"), Task("W5b", "3rd derivative, size 1000")),
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
        "hodiff": "hd.hessian (all rows in one batched reverse pass, hd.vmap); "
        "W5b: hd.grad twice, then .backward()",
        "hd.jit": "hd.jit of hd.hessian (vmap of the HVP: one batched graph) and of "
        "hd.grad three times, backend replay",
        "torch": "torch.func.hessian (jacfwd of jacrev, vectorized); W5b: autograd.grad x3",
        "jax": "jax.jit(jax.hessian); W5b: jax.jit(jax.grad x3)",
        "autograd": "autograd.hessian; W5b: autograd.grad x3",
    },
)
