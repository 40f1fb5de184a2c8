"""W7: per-example gradients (issue 10), against one batch gradient.

A 32-64-64-10 tanh MLP with softmax cross-entropy, batch 64. W7a is the gradient
of every example's loss ``logsumexp(z_n) - z_n[t_n]`` w.r.t. all weights and biases
(64 gradients, DP-SGD's input): ``hd.vmap`` of ``hd.grad``, ``torch.func.vmap`` of
``torch.func.grad``, ``jax.vmap`` of ``jax.grad`` (jitted), a loop for autograd. W7b is
the gradient of the summed loss (their sum), one ordinary reverse pass: the cost that
W7a is compared with (issue 10: W7a <= 3x W7b in hodiff). The numpy floor computes W7a
by hand (per-example outer products of the backward pass). W7c is the Hessian of every
example's loss w.r.t. its input (64 Hessians 32x32): ``hd.vmap`` of ``hd.hessian``,
``torch.func.vmap`` of ``torch.func.hessian``, ``jax.vmap`` of ``jax.hessian`` (jitted).
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
)

SIZES = {"full": ((32, 64, 64, 10), 64), "tiny": ((6, 5, 5, 3), 4)}


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    dims, batch = SIZES[size]
    rng = np.random.default_rng(7)
    return {
        "x": rng.standard_normal((batch, dims[0])).astype(dtype),
        "t": rng.integers(0, dims[-1], batch),
        "params": dense_params(rng, dims, dtype),
    }


# ---------------------------------------------------------------- hodiff
def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd
    import hodiff.functions as F

    ps = hodiff_leaves(inp["params"], need_grad=True)
    x, t = inp["x"], inp["t"][:, None]
    xb, tb = hd.Variable.from_array(x), hd.Variable.from_array(t)

    def scores(h: Any) -> Any:
        n_layers = len(ps) // 2
        for k in range(n_layers):
            h = F.affine(h, ps[2 * k], ps[2 * k + 1])
            if k < n_layers - 1:
                h = F.tanh(h)
        return h

    def one(xn: Any, tn: Any) -> list[Any]:  # one example: x of shape (D,), t of shape (1,)
        z = scores(F.reshape(xn, (1, -1)))
        return hd.grad(F.sum(F.softmax_cross_entropy(z, F.reshape(tn, (1, 1)))), ps)

    per_example = hd.vmap(one)

    def loss_x(xn: Any, tn: Any) -> Any:  # one example's loss as a function of its input
        z = scores(F.reshape(xn, (1, -1)))
        return F.sum(F.softmax_cross_entropy(z, F.reshape(tn, (1, 1))))

    hessians = hd.vmap(lambda xn, tn: hd.hessian(lambda v: loss_x(v, tn), xn))

    def w7a() -> list[Any]:
        return [g.d for g in per_example(x, t)]

    def w7c() -> Any:
        return hessians(x, t).d

    def w7b() -> list[Any]:
        for p in ps:
            p.zero_grad()
        F.sum(F.softmax_cross_entropy(scores(xb), tb)).backward()
        return [p.g for p in ps]

    return {"W7a": w7a, "W7b": w7b, "W7c": w7c}


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of hd.vmap(hd.grad), of the batch gradient and of hd.vmap(hd.hessian)."""
    import hodiff as hd
    import hodiff.functions as F

    ps = hodiff_leaves(inp["params"], need_grad=True)
    x, t = inp["x"], inp["t"][:, None]

    def scores(qs: Any, h: Any) -> Any:
        n_layers = len(qs) // 2
        for k in range(n_layers):
            h = F.affine(h, qs[2 * k], qs[2 * k + 1])
            if k < n_layers - 1:
                h = F.tanh(h)
        return h

    def loss_one(qs: Any, xn: Any, tn: Any) -> Any:
        z = scores(qs, F.reshape(xn, (1, -1)))
        return F.sum(F.softmax_cross_entropy(z, F.reshape(tn, (1, 1))))

    per_example = hd.jit(hd.vmap(lambda xn, tn: hd.grad(loss_one(ps, xn, tn), ps)))
    batch = hd.jit(
        lambda xb, tb, *qs: hd.grad(F.sum(F.softmax_cross_entropy(scores(qs, xb), tb)), list(qs))
    )
    hessians = hd.jit(hd.vmap(lambda xn, tn: hd.hessian(lambda v: loss_one(ps, v, tn), xn)))
    params = tuple(inp["params"])
    return {
        "W7a": lambda: per_example(x, t),
        "W7b": lambda: batch(x, t, *params),
        "W7c": lambda: hessians(x, t),
    }


# ---------------------------------------------------------------- PyTorch
def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    tf = torch.nn.functional
    x, t = torch.from_numpy(inp["x"]), torch.from_numpy(inp["t"])
    params = [torch.from_numpy(a) for a in inp["params"]]
    leaves = [p.clone().requires_grad_(True) for p in params]

    def scores(ps: Any, h: Any) -> Any:
        n_layers = len(ps) // 2
        for k in range(n_layers):
            h = h @ ps[2 * k] + ps[2 * k + 1]
            if k < n_layers - 1:
                h = torch.tanh(h)
        return h

    def loss(ps: Any, xn: Any, tn: Any) -> Any:
        return tf.cross_entropy(scores(ps, xn[None]), tn[None], reduction="sum")

    per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    hessians = torch.func.vmap(torch.func.hessian(loss, argnums=1), in_dims=(None, 0, 0))

    def w7b() -> Any:
        return torch.autograd.grad(tf.cross_entropy(scores(leaves, x), t, reduction="sum"), leaves)

    return {
        "W7a": lambda: per_example(params, x, t),
        "W7b": w7b,
        "W7c": lambda: hessians(params, x, t),
    }


# ---------------------------------------------------------------- JAX
def jax_fns(inp: dict[str, Any]) -> Fns:
    jax, jnp = load_jax()

    def scores(ps: list[Any], h: Any) -> Any:
        n_layers = len(ps) // 2
        for k in range(n_layers):
            h = h @ ps[2 * k] + ps[2 * k + 1]
            if k < n_layers - 1:
                h = jnp.tanh(h)
        return h

    def loss(ps: list[Any], x: Any, t: Any) -> Any:  # x (N, D), t (N,)
        logp = jax.nn.log_softmax(scores(ps, x), axis=-1)
        return -jnp.sum(jnp.take_along_axis(logp, t[:, None], axis=-1))

    def one(ps: list[Any], xn: Any, tn: Any) -> Any:
        return loss(ps, xn[None], tn[None])

    per_example = jax.jit(jax.vmap(jax.grad(one), in_axes=(None, 0, 0)))
    batch = jax.jit(jax.grad(loss))
    hessians = jax.jit(jax.vmap(jax.hessian(one, argnums=1), in_axes=(None, 0, 0)))
    ps = list(inp["params"])
    return {
        "W7a": jax_blocking(jax, per_example, ps, inp["x"], inp["t"]),
        "W7b": jax_blocking(jax, batch, ps, inp["x"], inp["t"]),
        "W7c": jax_blocking(jax, hessians, ps, inp["x"], inp["t"]),
    }


# ---------------------------------------------------------------- HIPS autograd
def autograd_fns(inp: dict[str, Any]) -> Fns:
    autograd, anp = load_autograd()
    from autograd.scipy.special import logsumexp

    x, t, ps = inp["x"], inp["t"], list(inp["params"])

    def loss(ps: list[Any], x: Any, t: Any) -> Any:
        n_layers = len(ps) // 2
        h = x
        for k in range(n_layers):
            h = anp.dot(h, ps[2 * k]) + ps[2 * k + 1]
            if k < n_layers - 1:
                h = anp.tanh(h)
        return anp.sum(logsumexp(h, axis=1) - h[np.arange(len(t)), t])

    grad = autograd.grad(loss)

    def w7a() -> Any:  # no vmap in autograd: a loop over the examples
        return [
            np.stack(g)
            for g in zip(
                *[grad(ps, x[n : n + 1], t[n : n + 1]) for n in range(len(t))], strict=True
            )
        ]

    return {"W7a": w7a, "W7b": lambda: grad(ps, x, t)}


# ---------------------------------------------------------------- numpy floor
def numpy_fns(inp: dict[str, Any]) -> Fns:
    x, t, ps = inp["x"], inp["t"], list(inp["params"])

    def backward(per_example: bool) -> list[np.ndarray]:
        hs = [x]
        n_layers = len(ps) // 2
        for k in range(n_layers - 1):
            hs.append(np.tanh(hs[-1] @ ps[2 * k] + ps[2 * k + 1]))
        z = hs[-1] @ ps[-2] + ps[-1]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        da = e / e.sum(axis=1, keepdims=True)
        da[np.arange(len(t)), t] -= 1.0
        grads: list[np.ndarray] = [None] * len(ps)  # type: ignore[list-item]
        for k in reversed(range(len(hs))):
            if per_example:
                grads[2 * k] = hs[k][:, :, None] * da[:, None, :]
                grads[2 * k + 1] = da
            else:
                grads[2 * k] = hs[k].T @ da
                grads[2 * k + 1] = da.sum(axis=0)
            if k:
                da = (da @ ps[2 * k].T) * (1.0 - hs[k] * hs[k])
        return grads

    return {"W7a": lambda: backward(True), "W7b": lambda: backward(False)}


WORKLOAD = Workload(
    name="per_example",
    title="per-example gradients of a 32-64-64-10 tanh MLP, softmax cross-entropy, batch 64",
    tasks=(
        Task("W7a", "per-example gradients (64)"),
        Task("W7b", "one batch gradient"),
        Task("W7c", "per-example input Hessians (64 x 32x32)"),
    ),
    dtypes=("float64",),
    make_inputs=make_inputs,
    builders={
        "hodiff": hodiff_fns,
        "hd.jit": jit_fns,
        "torch": torch_fns,
        "jax": jax_fns,
        "autograd": autograd_fns,
        "numpy": numpy_fns,
    },
    notes={
        "hodiff": "W7a: hd.vmap(hd.grad) (one batched reverse pass); W7b: .backward(); "
        "W7c: hd.vmap(hd.hessian)",
        "hd.jit": "hd.jit of hd.vmap(hd.grad) (W7a), hd.grad (W7b), hd.vmap(hd.hessian) "
        "(W7c), backend replay",
        "torch": "W7a: torch.func.vmap(torch.func.grad); W7b: torch.autograd.grad; "
        "W7c: torch.func.vmap(torch.func.hessian)",
        "jax": "W7a: jax.jit(jax.vmap(jax.grad)); W7b: jax.jit(jax.grad); "
        "W7c: jax.jit(jax.vmap(jax.hessian))",
        "autograd": "W7a: a loop of autograd.grad over the examples; W7b: autograd.grad",
        "numpy": "by hand: per-example outer products of the backward pass",
    },
)
