"""W6: gradient (W6a) and Hessian-vector product (W6b) of a small CNN.

``z = affine(tanh(conv3x3(x, W_c) + b_c), W_l, b_l)``: a 3x3 convolution from 1 to
16 channels on 28x28 images (no padding, stride 1: 16x26x26 features), tanh,
a linear layer to 10 classes; batch 32; loss: mean softmax cross-entropy. The
HVP direction ``v`` is random. Layouts are NCHW and OIHW, as NNabla's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.workloads.common import (
    Fns,
    Task,
    Workload,
    hodiff_leaves,
    jax_grad_and_hvp,
    load_autograd,
    load_jax,
    load_torch,
    normal_like,
    torch_leaves,
)

SIZES = {"full": (32, 28, 16, 10), "tiny": (2, 6, 3, 4)}  # batch, image side, channels, classes
K = 3


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    batch, side, channels, classes = SIZES[size]
    rng = np.random.default_rng(6)
    features = channels * (side - K + 1) ** 2
    x = rng.standard_normal((batch, 1, side, side)).astype(dtype)
    params = [
        (rng.standard_normal((channels, 1, K, K)) / K).astype(dtype),
        (0.1 * rng.standard_normal(channels)).astype(dtype),
        (rng.standard_normal((features, classes)) / np.sqrt(features)).astype(dtype),
        (0.1 * rng.standard_normal(classes)).astype(dtype),
    ]
    t = rng.integers(0, classes, batch)
    return {"x": x, "t": t, "params": params, "v": normal_like(rng, params)}


def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd
    import hodiff.functions as F

    x, t = hd.Variable.from_array(inp["x"]), hd.Variable.from_array(inp["t"][:, None])
    ps = hodiff_leaves(inp["params"], need_grad=True)

    def loss(wc: Any, bc: Any, wl: Any, bl: Any) -> Any:
        h = F.tanh(F.convolution(x, wc, bc))
        return F.mean(F.softmax_cross_entropy(F.affine(h, wl, bl), t))

    def grad() -> list[Any]:
        for p in ps:
            p.zero_grad()
        loss(*ps).backward()
        return [p.g for p in ps]

    params, v = tuple(inp["params"]), tuple(inp["v"])
    return {"W6a": grad, "W6b": lambda: hd.hvp(loss, params, v)[1]}


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of the gradient and of the HVP."""
    import hodiff as hd
    import hodiff.functions as F

    x, t = hd.Variable.from_array(inp["x"]), hd.Variable.from_array(inp["t"][:, None])

    def loss(wc: Any, bc: Any, wl: Any, bl: Any) -> Any:
        h = F.tanh(F.convolution(x, wc, bc))
        return F.mean(F.softmax_cross_entropy(F.affine(h, wl, bl), t))

    params, v = tuple(inp["params"]), tuple(inp["v"])
    grad = hd.jit(lambda *qs: hd.grad(loss(*qs), list(qs)))
    hvp = hd.jit(lambda *qs: hd.hvp(loss, qs, v)[1])
    return {"W6a": lambda: grad(*params), "W6b": lambda: hvp(*params)}


def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    tf = torch.nn.functional
    x, t = torch.from_numpy(inp["x"]), torch.from_numpy(inp["t"])
    ps = torch_leaves(torch, inp["params"], requires_grad=True)
    vs = torch_leaves(torch, inp["v"], requires_grad=False)

    def loss() -> Any:
        wc, bc, wl, bl = ps
        h = torch.tanh(tf.conv2d(x, wc, bc))
        return tf.cross_entropy(torch.addmm(bl, h.reshape(len(h), -1), wl), t)

    def grad() -> Any:
        return torch.autograd.grad(loss(), ps)

    def hvp() -> Any:
        gs = torch.autograd.grad(loss(), ps, create_graph=True)
        return torch.autograd.grad(gs, ps, grad_outputs=vs)

    return {"W6a": grad, "W6b": hvp}


def jax_fns(inp: dict[str, Any]) -> Fns:
    jax, jnp = load_jax()

    def loss(ps: list[Any], x: Any, t: Any) -> Any:
        wc, bc, wl, bl = ps
        c = jax.lax.conv_general_dilated(
            x,
            wc,
            (1, 1),
            "VALID",
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            precision=jax.lax.Precision.HIGHEST,
        )
        h = jnp.tanh(c + bc[None, :, None, None])
        logp = jax.nn.log_softmax(h.reshape(h.shape[0], -1) @ wl + bl, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, t[:, None], axis=1))

    return jax_grad_and_hvp(jax, loss, inp, ("W6a", "W6b"))


def autograd_fns(inp: dict[str, Any]) -> Fns:
    """autograd has no convolution of its own: the 3x3 one is a sum over the 9 shifted images."""
    autograd, anp = load_autograd()
    from autograd.differential_operators import make_hvp
    from autograd.scipy.special import logsumexp

    x, t = inp["x"], inp["t"]
    rows = np.arange(len(t))
    ps, vs = list(inp["params"]), list(inp["v"])
    side = x.shape[-1] - K + 1
    shifted = np.stack(
        [x[:, 0, i : i + side, j : j + side] for i in range(K) for j in range(K)], axis=1
    )  # (N, 9, 26, 26): x is a constant, so this is data preparation, not differentiated

    def loss(ps: list[Any]) -> Any:
        wc, bc, wl, bl = ps
        c = anp.einsum("npij,cp->ncij", shifted, anp.reshape(wc, (wc.shape[0], K * K)))
        h = anp.tanh(c + bc[None, :, None, None])
        z = anp.dot(anp.reshape(h, (h.shape[0], -1)), wl) + bl
        return anp.mean(logsumexp(z, axis=1) - z[rows, t])

    grad = autograd.grad(loss)
    return {"W6a": lambda: grad(ps), "W6b": lambda: make_hvp(loss)(ps)[0](vs)}


WORKLOAD = Workload(
    name="cnn",
    title="CNN: conv 3x3 1->16 on 28x28, tanh, linear to 10; batch 32",
    tasks=(Task("W6a", "CNN gradient"), Task("W6b", "CNN Hessian-vector product", "W6a")),
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
        "hodiff": "F.convolution; zero_grad + backward; hd.hvp",
        "hd.jit": "hd.jit of hd.grad and hd.hvp, backend replay",
        "torch": "conv2d; autograd.grad; double backward",
        "jax": "lax.conv_general_dilated; jit(grad); jit(jvp of grad)",
        "autograd": "no conv primitive: einsum over the 9 shifted images; grad; make_hvp",
    },
)
