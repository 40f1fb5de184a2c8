"""W1 (gradient) and W2 (Hessian-vector product) of a tanh MLP with softmax cross-entropy.

Loss ``mean_n(logsumexp(z_n) - z_n[t_n])`` of the scores ``z`` of a 784-512-512-10
tanh MLP (``h_{k+1} = tanh(h_k W_k + b_k)``, no tanh on the last layer), batch
128; W1 is its gradient w.r.t. all weights and biases, W2 its Hessian times a
random direction ``v``. The numpy floor does the same matrix products by hand:
the textbook backward pass for W1, and Pearlmutter's R-operator (the
directional derivative of the forward and backward passes) for W2.
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
    jax_grad_and_hvp,
    load_autograd,
    load_jax,
    load_torch,
    normal_like,
    torch_leaves,
)

SIZES = {"full": ((784, 512, 512, 10), 128), "tiny": ((12, 8, 8, 5), 4)}


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    dims, batch = SIZES[size]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, dims[0])).astype(dtype)
    t = rng.integers(0, dims[-1], batch)
    params = dense_params(rng, dims, dtype)
    return {"x": x, "t": t, "params": params, "v": normal_like(rng, params)}


# ---------------------------------------------------------------- hodiff
def hodiff_loss(ps: Any, x: Any, t: Any) -> Any:
    import hodiff.functions as F

    n_layers = len(ps) // 2
    h = x
    for k in range(n_layers):
        h = F.affine(h, ps[2 * k], ps[2 * k + 1])
        if k < n_layers - 1:
            h = F.tanh(h)
    return F.mean(F.softmax_cross_entropy(h, t))


def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd

    x, t = hd.Variable.from_array(inp["x"]), hd.Variable.from_array(inp["t"][:, None])
    ps = hodiff_leaves(inp["params"], need_grad=True)
    params, v = tuple(inp["params"]), tuple(inp["v"])

    def grad() -> list[Any]:
        for p in ps:
            p.zero_grad()
        hodiff_loss(ps, x, t).backward()
        return [p.g for p in ps]

    def hvp() -> Any:
        return hd.hvp(lambda *qs: hodiff_loss(qs, x, t), params, v)[1]

    return {"W1": grad, "W2": hvp}


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of the gradient and of the HVP (functions of the weights, called with arrays)."""
    import hodiff as hd

    x, t = hd.Variable.from_array(inp["x"]), hd.Variable.from_array(inp["t"][:, None])
    params, v = tuple(inp["params"]), tuple(inp["v"])
    grad = hd.jit(lambda *qs: hd.grad(hodiff_loss(qs, x, t), list(qs)))
    hvp = hd.jit(lambda *qs: hd.hvp(lambda *rs: hodiff_loss(rs, x, t), qs, v)[1])
    return {"W1": lambda: grad(*params), "W2": lambda: hvp(*params)}


# ---------------------------------------------------------------- PyTorch
def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    tf = torch.nn.functional
    x, t = torch.from_numpy(inp["x"]), torch.from_numpy(inp["t"])
    ps = torch_leaves(torch, inp["params"], requires_grad=True)
    vs = torch_leaves(torch, inp["v"], requires_grad=False)

    def loss() -> Any:
        n_layers = len(ps) // 2
        h = x
        for k in range(n_layers):
            h = torch.addmm(ps[2 * k + 1], h, ps[2 * k])
            if k < n_layers - 1:
                h = torch.tanh(h)
        return tf.cross_entropy(h, t)

    def grad() -> Any:
        return torch.autograd.grad(loss(), ps)

    def hvp() -> Any:  # double backward (reverse over reverse)
        gs = torch.autograd.grad(loss(), ps, create_graph=True)
        return torch.autograd.grad(gs, ps, grad_outputs=vs)

    return {"W1": grad, "W2": hvp}


# ---------------------------------------------------------------- JAX
def jax_fns(inp: dict[str, Any]) -> Fns:
    jax, jnp = load_jax()

    def loss(ps: list[Any], x: Any, t: Any) -> Any:
        n_layers = len(ps) // 2
        h = x
        for k in range(n_layers):
            h = h @ ps[2 * k] + ps[2 * k + 1]
            if k < n_layers - 1:
                h = jnp.tanh(h)
        logp = jax.nn.log_softmax(h, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, t[:, None], axis=1))

    return jax_grad_and_hvp(jax, loss, inp, ("W1", "W2"))


# ---------------------------------------------------------------- HIPS autograd
def autograd_fns(inp: dict[str, Any]) -> Fns:
    autograd, anp = load_autograd()
    from autograd.differential_operators import make_hvp
    from autograd.scipy.special import logsumexp

    x, t = inp["x"], inp["t"]
    rows = np.arange(len(t))
    ps, vs = list(inp["params"]), list(inp["v"])

    def loss(ps: list[Any]) -> Any:
        n_layers = len(ps) // 2
        h = x
        for k in range(n_layers):
            h = anp.dot(h, ps[2 * k]) + ps[2 * k + 1]
            if k < n_layers - 1:
                h = anp.tanh(h)
        return anp.mean(logsumexp(h, axis=1) - h[rows, t])

    grad = autograd.grad(loss)

    def hvp() -> Any:  # reverse over reverse
        return make_hvp(loss)(ps)[0](vs)

    return {"W1": lambda: grad(ps), "W2": hvp}


# ---------------------------------------------------------------- numpy floor
def _forward(ps: list[np.ndarray], x: np.ndarray, t: np.ndarray) -> tuple[list, np.ndarray]:
    """Hidden activations ``[x, h1, ...]`` and ``d loss / d z`` (softmax minus one-hot, / n)."""
    hs = [x]
    n_layers = len(ps) // 2
    for k in range(n_layers - 1):
        hs.append(np.tanh(hs[-1] @ ps[2 * k] + ps[2 * k + 1]))
    z = hs[-1] @ ps[-2] + ps[-1]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True)
    dz[np.arange(len(t)), t] -= 1.0
    dz /= len(t)
    return hs, dz


def floor_grad(ps: list[np.ndarray], x: np.ndarray, t: np.ndarray) -> list[np.ndarray]:
    hs, da = _forward(ps, x, t)
    grads: list[np.ndarray] = [None] * len(ps)  # type: ignore[list-item]
    for k in reversed(range(len(hs))):
        grads[2 * k] = hs[k].T @ da
        grads[2 * k + 1] = da.sum(axis=0)
        if k:
            da = (da @ ps[2 * k].T) * (1.0 - hs[k] * hs[k])
    return grads


def floor_hvp(
    ps: list[np.ndarray], vs: list[np.ndarray], x: np.ndarray, t: np.ndarray
) -> list[np.ndarray]:
    """H v by the R-operator ``R{f} = d/dr f(params + r v)`` at r = 0 (Pearlmutter 1994)."""
    hs, da = _forward(ps, x, t)
    n = len(t)
    # R forward: R h_0 = 0; R a_k = R h_k W_k + h_k V_k + c_k; R h_{k+1} = (1 - h^2) R a_k
    rhs: list[np.ndarray | None] = [None]
    for k in range(len(hs)):
        ra = hs[k] @ vs[2 * k] + vs[2 * k + 1]
        if rhs[k] is not None:
            ra += rhs[k] @ ps[2 * k]
        if k + 1 < len(hs):
            rhs.append((1.0 - hs[k + 1] * hs[k + 1]) * ra)
    # R of dz = (softmax(z) - onehot) / n: R p = p * (R z - sum(p R z))
    p = da.copy()
    p[np.arange(n), t] += 1.0 / n  # = softmax / n
    rda = p * (ra - (p * ra).sum(axis=1, keepdims=True) * n)
    hv: list[np.ndarray] = [None] * len(ps)  # type: ignore[list-item]
    for k in reversed(range(len(hs))):
        rh = rhs[k]
        hv[2 * k] = hs[k].T @ rda if rh is None else hs[k].T @ rda + rh.T @ da
        hv[2 * k + 1] = rda.sum(axis=0)
        if k:
            s = 1.0 - hs[k] * hs[k]
            dh = da @ ps[2 * k].T
            rdh = rda @ ps[2 * k].T + da @ vs[2 * k].T
            assert rh is not None
            da, rda = dh * s, rdh * s - 2.0 * hs[k] * rh * dh
    return hv


def floor_fns(inp: dict[str, Any]) -> Fns:
    ps, vs, x, t = list(inp["params"]), list(inp["v"]), inp["x"], inp["t"]
    return {"W1": lambda: floor_grad(ps, x, t), "W2": lambda: floor_hvp(ps, vs, x, t)}


WORKLOAD = Workload(
    name="mlp",
    title="tanh MLP 784-512-512-10, softmax cross-entropy, batch 128",
    tasks=(
        Task("W1", "MLP gradient"),
        Task("W2", "MLP Hessian-vector product", grad_of_hvp="W1"),
    ),
    dtypes=("float32", "float64"),
    make_inputs=make_inputs,
    builders={
        "hodiff": hodiff_fns,
        "hd.jit": jit_fns,
        "torch": torch_fns,
        "jax": jax_fns,
        "autograd": autograd_fns,
        "numpy": floor_fns,
    },
    notes={
        "hodiff": "W1: zero_grad + loss.backward(); W2: hd.hvp (reverse over reverse)",
        "hd.jit": "hd.jit of hd.grad (W1) and of hd.hvp (W2), backend replay",
        "torch": "W1: torch.autograd.grad; W2: double backward (create_graph=True)",
        "jax": "jax.jit(jax.grad); W2: jax.jvp of jax.grad (forward over reverse), jitted",
        "autograd": "autograd.grad; W2: make_hvp (reverse over reverse)",
        "numpy": "hand-written backward; W2: Pearlmutter's R-operator",
    },
)
