"""W8-W13: checkpointing (issue 23), each task with and without it (``c`` = every layer
checkpointed).

The network is a residual tanh MLP, ``h <- h + tanh(h W_k + b_k)`` for ``k = 1..L``, then
``D(x) = h w + c`` of shape ``(N, 1)``; inputs are ``(N, width)``.

* W8 / W8c: a WGAN-GP critic step (as W3): ``L = 24``, width 128, batch 1024 (activations
  dominate memory); the gradient of
  ``mean D(x_f) - mean D(x_r) + 10 mean_n (||d sum D(x_hat) / d x_hat_n|| - 1)^2`` w.r.t.
  every weight and bias.
* W9 / W9c: the gradient of ``mean (D(x) - t)^2`` by a plain reverse pass, ``L = 32``.
* W10 / W10c: the Hessian-vector product of that loss w.r.t. the weights, ``L = 32``.
  W10b / W10bc (hodiff only): the same product as NNabla writes it, the second pass a
  ``.backward(clear_buffer=True)`` of ``sum_k <g_k, v_k>`` (it frees the first-order
  graph's values as it goes; PyTorch's ``autograd.grad`` of W10 frees its graph too).
  W10h / W10hc (hodiff only): the same product by ``hd.hvp(loss, weights, v)``, whose
  second pass frees the graphs it made as it goes.
* W11 / W11c: W8 with width 512, batch 256 (weights dominate memory).
* W13 / W13c (hodiff only): 16 residual tanh layers of 6 units, batch 5, closing over a
  weight that a chain of 4,000 nodes made outside them, in a gradient penalty's two
  passes: the layers are small, so the ratio is what the graph around a checkpointed
  segment costs each of its visits (it walked that graph before ``graph.nodes_since``).
* W12e / W12ec: the PINN step of the Taylor workload (``bench/workloads/taylor.py``, there in
  float64): ``mean((Laplace u + f)^2)`` by ``hd.laplacian(create_graph=True)`` and its
  gradient w.r.t. every weight by ``.backward()``, on a 2 -> 64 -> 64 -> 64 -> 1 tanh MLP,
  batch 512; ``c``: every layer (affine and tanh) one checkpoint. W12g / W12gc: the same on
  a deeper MLP, 2 -> 64 x 8 -> 1. PyTorch has no counterpart (``torch.func`` does not take
  ``torch.utils.checkpoint``): hodiff only.

hodiff checkpoints each layer with ``hd.checkpoint(layer, h)`` (the layer closes over its
weights); PyTorch with ``torch.utils.checkpoint.checkpoint(layer, h, use_reentrant=False)``.
``python -m bench.checkpoint`` reports the ratios (memory and time, with against without,
hodiff against PyTorch) and measures peak memory against the number of segments.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from bench.workloads.common import Fns, Task, Workload, hodiff_leaves, load_torch, torch_leaves

#: (width, batch, layers of the critic, layers of the MLP of W9/W10) per configuration
SIZES = {
    "full": {"a": (128, 1024, 24, 32), "b": (512, 256, 24, 0)},
    "tiny": {"a": (6, 5, 3, 4), "b": (8, 3, 3, 0)},
}
#: the PINN steps (W12e, W12g): (layer widths, batch) per configuration
PINN_SIZES = {
    "full": {"e": ((2, 64, 64, 64, 1), 512), "g": ((2, *(64,) * 8, 1), 512)},
    "tiny": {"e": ((2, 6, 6, 1), 8), "g": ((2, 6, 6, 6, 6, 1), 8)},
}
#: W13: (nodes of the graph that makes the weight, checkpointed layers) per configuration
ENCLOSED_SIZES = {"full": (4000, 16), "tiny": (50, 3)}
LAMBDA = 10.0


def _params(rng: np.random.Generator, width: int, layers: int, dtype: str) -> list[np.ndarray]:
    """``[W_1, b_1, ..., W_L, b_L, w, c]``: residual weights N(0, 0.25 / width)."""
    ps = []
    for _ in range(layers):
        ps.append((0.5 * rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype))
        ps.append((0.1 * rng.standard_normal(width)).astype(dtype))
    ps.append((rng.standard_normal((width, 1)) / np.sqrt(width)).astype(dtype))
    ps.append(np.zeros(1, dtype=dtype))
    return ps


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    rng = np.random.default_rng(23)
    out: dict[str, Any] = {}
    for key, (width, batch, layers, mlp_layers) in SIZES[size].items():
        x_real = (rng.standard_normal((batch, width)) + 0.5).astype(dtype)
        x_fake = rng.standard_normal((batch, width)).astype(dtype)
        eps = rng.uniform(size=(batch, 1))
        cfg = {
            "x_real": x_real,
            "x_fake": x_fake,
            "x_hat": (eps * x_real + (1 - eps) * x_fake).astype(dtype),
            "params": _params(rng, width, layers, dtype),
        }
        if mlp_layers:
            cfg["mlp"] = _params(rng, width, mlp_layers, dtype)
            cfg["x"] = rng.standard_normal((batch, width)).astype(dtype)
            cfg["t"] = rng.standard_normal((batch, 1)).astype(dtype)
            cfg["v"] = [rng.standard_normal(p.shape).astype(dtype) for p in cfg["mlp"]]
        out[key] = cfg
    for key, (dims, batch) in PINN_SIZES[size].items():
        ws = []
        for a, b in itertools.pairwise(dims):
            ws.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype))
            ws.append((0.1 * rng.standard_normal(b)).astype(dtype))
        xy = rng.uniform(0, 1, (batch, 2))
        src = 2 * np.pi**2 * np.sin(np.pi * xy[:, 0]) * np.sin(np.pi * xy[:, 1])
        out[f"pinn_{key}"] = {"params": ws, "x": xy.astype(dtype), "f": src.astype(dtype)}
    depth, layers = ENCLOSED_SIZES[size]
    out["enclosed"] = {
        "depth": depth,
        "layers": layers,
        "w": (0.3 * rng.standard_normal((6, 6))).astype(dtype),
        "x": rng.standard_normal((5, 6)).astype(dtype),
    }
    return out


def net(ps: list[Any], h: Any, layer: Any, head: Any, every: int | None, ckpt: Any) -> Any:
    """The residual MLP; with ``every``, each run of ``every`` layers is one ``ckpt`` segment."""
    n = (len(ps) - 2) // 2
    if every is None:
        for k in range(n):
            h = layer(h, ps[2 * k], ps[2 * k + 1])
    else:
        for s in range(0, n, every):
            ks = range(s, min(n, s + every))

            def segment(h: Any, ks: range = ks) -> Any:
                for k in ks:
                    h = layer(h, ps[2 * k], ps[2 * k + 1])
                return h

            h = ckpt(segment, h)
    return head(h, ps[-2], ps[-1])


# ---------------------------------------------------------------- hodiff
def hodiff_steps(cfg: dict[str, Any], every: int | None) -> dict[str, Any]:
    """The WGAN-GP step, and (when ``cfg`` has an MLP) its gradient and HVP steps."""
    import hodiff as hd
    import hodiff.functions as F

    def layer(h: Any, w: Any, b: Any) -> Any:
        return h + F.tanh(F.affine(h, w, b))

    def head(h: Any, w: Any, c: Any) -> Any:
        return F.affine(h, w, c)

    ps = hodiff_leaves(cfg["params"], need_grad=True)
    x_real, x_fake = hodiff_leaves([cfg["x_real"], cfg["x_fake"]], need_grad=False)
    x_hat = hd.Variable.from_array(cfg["x_hat"], need_grad=True)

    def critic(h: Any) -> Any:
        return net(ps, h, layer, head, every, hd.checkpoint)

    def wgan() -> list[Any]:
        for p in ps:
            p.zero_grad()
        (g,) = hd.grad(F.sum(critic(x_hat)), x_hat)
        penalty = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
        loss = F.mean(critic(x_fake)) - F.mean(critic(x_real)) + LAMBDA * penalty
        loss.backward(clear_buffer=True)
        return [p.g for p in ps]

    out: dict[str, Any] = {"wgan": wgan}
    if "mlp" in cfg:
        qs = hodiff_leaves(cfg["mlp"], need_grad=True)
        x, t = hodiff_leaves([cfg["x"], cfg["t"]], need_grad=False)
        vs = [hd.Variable.from_array(v) for v in cfg["v"]]

        def loss_of() -> Any:
            return F.mean((net(qs, x, layer, head, every, hd.checkpoint) - t) ** 2)

        def grad() -> list[Any]:
            for q in qs:
                q.zero_grad()
            loss_of().backward(clear_buffer=True)
            return [q.g for q in qs]

        def hvp() -> list[Any]:
            gs = hd.grad(loss_of(), qs)
            dot = F.sum(F.stack(*[F.sum(g * v) for g, v in zip(gs, vs, strict=True)]))
            return [h.d for h in hd.grad(dot, qs, create_graph=False)]

        def hvp_backward() -> list[Any]:  # NNabla's idiom: the second pass frees as it goes
            for q in qs:
                q.zero_grad()
            gs = hd.grad(loss_of(), qs)
            dot = F.sum(F.stack(*[F.sum(g * v) for g, v in zip(gs, vs, strict=True)]))
            dot.backward(clear_buffer=True)
            return [q.g for q in qs]

        def hvp_transform() -> list[Any]:  # hd.hvp, which owns (and frees) its graphs
            def loss(*ws: Any) -> Any:
                return F.mean((net(list(ws), x, layer, head, every, hd.checkpoint) - t) ** 2)

            return list(hd.hvp(loss, tuple(cfg["mlp"]), tuple(cfg["v"]))[1])

        out.update(grad=grad, hvp=hvp, hvp_backward=hvp_backward, hvp_transform=hvp_transform)
    return out


def hodiff_pinn_step(cfg: dict[str, Any], ckpt: bool) -> Any:
    """The PINN step: ``mean((Laplace u + f)^2)`` and its gradient w.r.t. every weight, ``u``
    the tanh MLP of ``cfg["params"]``, each layer a checkpoint with ``ckpt``.
    """
    import hodiff as hd
    import hodiff.functions as F

    ps = hodiff_leaves(cfg["params"], need_grad=True)
    src = hd.Variable.from_array(cfg["f"])
    n = len(ps) // 2

    def layer(h: Any, k: int) -> Any:
        z = F.affine(h, ps[2 * k], ps[2 * k + 1])
        return F.tanh(z) if k < n - 1 else z

    def u(h: Any) -> Any:
        for k in range(n):
            h = hd.checkpoint(layer, h, k) if ckpt else layer(h, k)
        return h

    def step() -> list[Any]:
        for p in ps:
            p.zero_grad()
        lp = hd.laplacian(u, cfg["x"], batch_axis=0, create_graph=True)
        F.mean((lp + src) ** 2).backward(clear_buffer=True)
        return [p.g for p in ps]

    return step


def hodiff_enclosed_step(cfg: dict[str, Any], ckpt: bool) -> Any:
    """W13: ``cfg["layers"]`` residual tanh layers (each checkpointed with ``ckpt``) that
    close over a weight made by a chain of ``cfg["depth"]`` nodes outside them (as an
    encoder's output that every decoder layer reads), in a gradient penalty's two passes.
    """
    import hodiff as hd
    import hodiff.functions as F

    v = hd.Variable.from_array(cfg["w"], need_grad=True)
    x = hd.Variable.from_array(cfg["x"], need_grad=True)

    def step() -> Any:
        v.zero_grad()
        w = v
        for _ in range(cfg["depth"]):
            w = w * 1.0
        h = x
        body = lambda a: a + F.tanh(F.affine(a, w))  # noqa: E731
        for _ in range(cfg["layers"]):
            h = hd.checkpoint(body, h) if ckpt else body(h)
        (g,) = hd.grad(F.sum(h), x)
        F.sum(g * g).backward(clear_buffer=True)
        return v.g

    return step


def hodiff_fns(inp: dict[str, Any]) -> Fns:
    out: Fns = {}
    out["W13"] = hodiff_enclosed_step(inp["enclosed"], False)
    out["W13c"] = hodiff_enclosed_step(inp["enclosed"], True)
    for key in ("e", "g"):
        out[f"W12{key}"] = hodiff_pinn_step(inp[f"pinn_{key}"], False)
        out[f"W12{key}c"] = hodiff_pinn_step(inp[f"pinn_{key}"], True)
    for every, suffix in ((None, ""), (1, "c")):
        a = hodiff_steps(inp["a"], every)
        b = hodiff_steps(inp["b"], every)
        out.update(
            {
                f"W8{suffix}": a["wgan"],
                f"W9{suffix}": a["grad"],
                f"W10{suffix}": a["hvp"],
                f"W10b{suffix}": a["hvp_backward"],
                f"W10h{suffix}": a["hvp_transform"],
                f"W11{suffix}": b["wgan"],
            }
        )
    return out


# ---------------------------------------------------------------- PyTorch
def torch_steps(cfg: dict[str, Any], every: int | None) -> dict[str, Any]:
    torch = load_torch()
    import torch.utils.checkpoint as tc

    def layer(h: Any, w: Any, b: Any) -> Any:
        return h + torch.tanh(torch.addmm(b, h, w))

    def head(h: Any, w: Any, c: Any) -> Any:
        return torch.addmm(c, h, w)

    def ckpt(f: Any, h: Any) -> Any:
        return tc.checkpoint(f, h, use_reentrant=False)

    ps = torch_leaves(torch, cfg["params"], requires_grad=True)
    x_real, x_fake = (torch.from_numpy(cfg[k]) for k in ("x_real", "x_fake"))
    x_hat = torch.from_numpy(cfg["x_hat"]).requires_grad_(True)

    def critic(h: Any) -> Any:
        return net(ps, h, layer, head, every, ckpt)

    def wgan() -> Any:
        (g,) = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)
        penalty = (((g * g).sum(dim=1).sqrt() - 1.0) ** 2).mean()
        loss = critic(x_fake).mean() - critic(x_real).mean() + LAMBDA * penalty
        return torch.autograd.grad(loss, ps)

    out: dict[str, Any] = {"wgan": wgan}
    if "mlp" in cfg:
        qs = torch_leaves(torch, cfg["mlp"], requires_grad=True)
        x, t = torch.from_numpy(cfg["x"]), torch.from_numpy(cfg["t"])
        vs = [torch.from_numpy(v) for v in cfg["v"]]

        def loss_of() -> Any:
            return ((net(qs, x, layer, head, every, ckpt) - t) ** 2).mean()

        def grad() -> Any:
            return torch.autograd.grad(loss_of(), qs)

        def hvp() -> Any:
            gs = torch.autograd.grad(loss_of(), qs, create_graph=True)
            dot = sum((g * v).sum() for g, v in zip(gs, vs, strict=True))
            return torch.autograd.grad(dot, qs)

        out.update(grad=grad, hvp=hvp)
    return out


def torch_fns(inp: dict[str, Any]) -> Fns:
    out: Fns = {}
    for every, suffix in ((None, ""), (1, "c")):
        a = torch_steps(inp["a"], every)
        b = torch_steps(inp["b"], every)
        out.update(
            {
                f"W8{suffix}": a["wgan"],
                f"W9{suffix}": a["grad"],
                f"W10{suffix}": a["hvp"],
                f"W11{suffix}": b["wgan"],
            }
        )
    return out


TASKS = (
    Task("W8", "WGAN-GP step, residual tanh MLP 24 x 128, batch 1024"),
    Task("W8c", "W8, every layer checkpointed"),
    Task("W9", "gradient (.backward()), residual tanh MLP 32 x 128, batch 1024"),
    Task("W9c", "W9, every layer checkpointed"),
    Task("W10", "HVP, residual tanh MLP 32 x 128, batch 1024"),
    Task("W10c", "W10, every layer checkpointed"),
    Task("W11", "WGAN-GP step, residual tanh MLP 24 x 512, batch 256"),
    Task("W11c", "W11, every layer checkpointed"),
    Task("W10b", "W10, the second pass a .backward(clear_buffer=True) (hodiff only)"),
    Task("W10bc", "W10b, every layer checkpointed (hodiff only)"),
    Task("W10h", "W10 by hd.hvp(loss, weights, v), which frees its graphs (hodiff only)"),
    Task("W10hc", "W10h, every layer checkpointed (hodiff only)"),
    Task(
        "W12e", "PINN step (the Taylor group's W12e, here in float32): Laplacian, loss, gradients"
    ),
    Task("W12ec", "W12e, every layer checkpointed (hodiff only)"),
    Task("W12g", "PINN step, tanh MLP 2 -> 64 x 8 -> 1, batch 512"),
    Task("W12gc", "W12g, every layer checkpointed (hodiff only)"),
    Task("W13", "16 small residual tanh layers reading a weight a 4,000-node graph made"),
    Task("W13c", "W13, every layer checkpointed: what the graph around a segment costs it"),
)

WORKLOAD = Workload(
    name="checkpoint",
    title="checkpointing: residual tanh MLPs with and without every layer checkpointed",
    tasks=TASKS,
    dtypes=("float32",),
    make_inputs=make_inputs,
    builders={"hodiff": hodiff_fns, "torch": torch_fns},
    notes={
        "hodiff": "hd.checkpoint(layer, h) per layer (c tasks); backward(clear_buffer=True)",
        "torch": "torch.utils.checkpoint.checkpoint(layer, h, use_reentrant=False) per layer",
    },
)
