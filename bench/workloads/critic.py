"""W3: one WGAN-GP critic step (a gradient of a loss that contains a gradient).

Critic ``D``: 2-256-256-1 with softplus, batch 256 of real ``x_r`` and fake
``x_f`` points. With ``x_hat = eps x_r + (1 - eps) x_f`` (one array made once,
the same for every library) the loss is
``mean D(x_f) - mean D(x_r) + 10 mean_n (||d sum D(x_hat) / d x_hat_n|| - 1)^2``
and W3 is its gradient w.r.t. the critic's weights and biases.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.workloads.common import (
    Fns,
    Task,
    Workload,
    dense_params,
    hodiff_leaves,
    jax_blocking,
    load_autograd,
    load_jax,
    load_torch,
    torch_leaves,
)

SIZES = {"full": ((2, 256, 256, 1), 256), "tiny": ((2, 6, 6, 1), 5)}
LAMBDA = 10.0


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    dims, batch = SIZES[size]
    rng = np.random.default_rng(3)
    x_real = (rng.standard_normal((batch, 2)) + np.array([2.0, -1.0])).astype(dtype)
    x_fake = rng.standard_normal((batch, 2)).astype(dtype)
    eps = rng.uniform(size=(batch, 1))
    x_hat = (eps * x_real + (1 - eps) * x_fake).astype(dtype)
    params = dense_params(rng, dims, dtype)
    return {"x_real": x_real, "x_fake": x_fake, "x_hat": x_hat, "params": params}


def _critic(ps: Any, h: Any, affine: Any, act: Any) -> Any:
    n_layers = len(ps) // 2
    for k in range(n_layers):
        h = affine(h, ps[2 * k], ps[2 * k + 1])
        if k < n_layers - 1:
            h = act(h)
    return h


# ---------------------------------------------------------------- hodiff
def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd
    import hodiff.functions as F

    ps = hodiff_leaves(inp["params"], need_grad=True)
    x_real, x_fake = hodiff_leaves([inp["x_real"], inp["x_fake"]], need_grad=False)
    x_hat = hd.Variable.from_array(inp["x_hat"], need_grad=True)

    def critic(h: Any) -> Any:
        return _critic(ps, h, F.affine, F.softplus)

    def step() -> list[Any]:
        for p in ps:
            p.zero_grad()
        (g,) = hd.grad(F.sum(critic(x_hat)), x_hat)  # a differentiable graph
        penalty = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
        loss = F.mean(critic(x_fake)) - F.mean(critic(x_real)) + LAMBDA * penalty
        # plain reverse pass, through g's graph too; clear_buffer frees each value once the
        # pass no longer needs it, as torch.autograd.grad does by default (retain_graph=False)
        loss.backward(clear_buffer=True)
        return [p.g for p in ps]

    return {"W3": step}


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of the whole step: the penalty's hd.grad, the loss and hd.grad of the weights."""
    import hodiff as hd
    import hodiff.functions as F

    x_real, x_fake = hodiff_leaves([inp["x_real"], inp["x_fake"]], need_grad=False)
    x_hat = hd.Variable.from_array(inp["x_hat"], need_grad=True)

    def step(*qs: Any) -> Any:
        def critic(h: Any) -> Any:
            return _critic(qs, h, F.affine, F.softplus)

        (g,) = hd.grad(F.sum(critic(x_hat)), x_hat)
        penalty = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
        loss = F.mean(critic(x_fake)) - F.mean(critic(x_real)) + LAMBDA * penalty
        return hd.grad(loss, list(qs))

    g = hd.jit(step)
    params = tuple(inp["params"])
    return {"W3": lambda: g(*params)}


# ---------------------------------------------------------------- PyTorch
def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    ps = torch_leaves(torch, inp["params"], requires_grad=True)
    x_real, x_fake = (torch.from_numpy(inp[k]) for k in ("x_real", "x_fake"))
    x_hat = torch.from_numpy(inp["x_hat"]).requires_grad_(True)

    def critic(h: Any) -> Any:
        return _critic(ps, h, lambda h, w, b: torch.addmm(b, h, w), torch.nn.functional.softplus)

    def step() -> Any:
        (g,) = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)
        penalty = (((g * g).sum(dim=1).sqrt() - 1.0) ** 2).mean()
        loss = critic(x_fake).mean() - critic(x_real).mean() + LAMBDA * penalty
        return torch.autograd.grad(loss, ps)

    return {"W3": step}


# ---------------------------------------------------------------- JAX
def jax_fns(inp: dict[str, Any]) -> Fns:
    jax, jnp = load_jax()

    def critic(ps: Any, h: Any) -> Any:
        return _critic(ps, h, lambda h, w, b: h @ w + b, jax.nn.softplus)

    def loss(ps: Any, x_real: Any, x_fake: Any, x_hat: Any) -> Any:
        g = jax.grad(lambda xh: jnp.sum(critic(ps, xh)))(x_hat)
        penalty = jnp.mean((jnp.sqrt(jnp.sum(g * g, axis=1)) - 1.0) ** 2)
        return jnp.mean(critic(ps, x_fake)) - jnp.mean(critic(ps, x_real)) + LAMBDA * penalty

    step = jax.jit(jax.grad(loss))
    args = (list(inp["params"]), inp["x_real"], inp["x_fake"], inp["x_hat"])
    return {"W3": jax_blocking(jax, step, *args)}


# ---------------------------------------------------------------- HIPS autograd
def autograd_fns(inp: dict[str, Any]) -> Fns:
    autograd, anp = load_autograd()
    x_real, x_fake, x_hat = inp["x_real"], inp["x_fake"], inp["x_hat"]
    ps = list(inp["params"])

    def critic(ps: Any, h: Any) -> Any:
        return _critic(ps, h, lambda h, w, b: anp.dot(h, w) + b, lambda a: anp.logaddexp(a, 0.0))

    def loss(ps: Any) -> Any:
        g = autograd.grad(lambda xh: anp.sum(critic(ps, xh)))(x_hat)
        penalty = anp.mean((anp.sqrt(anp.sum(g * g, axis=1)) - 1.0) ** 2)
        return anp.mean(critic(ps, x_fake)) - anp.mean(critic(ps, x_real)) + LAMBDA * penalty

    step = autograd.grad(loss)
    return {"W3": lambda: step(ps)}


WORKLOAD = Workload(
    name="critic",
    title="WGAN-GP critic step: critic 2-256-256-1 softplus, batch 256",
    tasks=(Task("W3", "WGAN-GP critic step"),),
    dtypes=("float32", "float64"),
    make_inputs=make_inputs,
    builders={
        "hodiff": hodiff_fns,
        "hd.jit": jit_fns,
        "torch": torch_fns,
        "jax": jax_fns,
        "autograd": autograd_fns,
    },
    notes={
        "hodiff": "hd.grad for the penalty's gradient, then loss.backward(clear_buffer=True)",
        "hd.jit": "hd.jit of the step (the penalty's hd.grad inside), backend replay",
        "torch": "autograd.grad(create_graph=True), then autograd.grad w.r.t. the weights",
        "jax": "jax.jit(jax.grad(loss)) with jax.grad inside the loss",
        "autograd": "autograd.grad with autograd.grad inside the loss",
    },
)
