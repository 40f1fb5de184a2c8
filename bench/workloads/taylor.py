"""W12: forward and Taylor mode (issue 22).

The paper's network (Dangel et al. 2025): a tanh MLP ``D -> 768 -> 768 -> 512 -> 512 -> 1``
in float64.

- W12a / W12b: the per-datum Laplacian at D = 50, batch 8 / 64. hodiff: collapsed Taylor
  mode (``hd.laplacian``, ``method="taylor"``); W12an / W12bn the same with
  ``method="nested"`` (Hessian-vector products). Peers: ``vmap(trace(hessian))``
  (torch.func; JAX under ``jit``), the same for both rows.
- W12c / W12cn: the per-datum biharmonic at D = 5, batch 8 (hodiff taylor / nested; peers:
  the trace of the Hessian of the Laplacian, vmapped).
- W12d: ``hd.jvp`` of W1's MLP scores (784-512-512-10 tanh, batch 128) with respect to the
  input; W12f its forward alone (the jvp costs at least one forward).
- W12e: a PINN step on a 2 -> 64 -> 64 -> 64 -> 1 tanh MLP, batch 512: the loss
  ``mean((Laplace u + f)^2)`` and its gradient with respect to every weight (hodiff:
  ``hd.laplacian(create_graph=True)`` then ``.backward()``; torch.func: ``grad`` of the
  loss of ``vmap(trace(hessian))``; JAX: ``jit(grad)`` of the same).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.workloads.common import (
    Fns,
    Task,
    Workload,
    dense_params,
    jax_blocking,
    load_jax,
    load_torch,
)

SIZES = {
    "full": {"D": 50, "hidden": (768, 768, 512, 512), "batch": (8, 64), "bi_D": 5, "bi_N": 8},
    "tiny": {"D": 3, "hidden": (6, 5), "batch": (2, 3), "bi_D": 2, "bi_N": 2},
}
JVP_SIZES = {"full": ((784, 512, 512, 10), 128), "tiny": ((12, 8, 8, 5), 4)}
PINN_SIZES = {"full": ((2, 64, 64, 64, 1), 512), "tiny": ((2, 6, 6, 1), 8)}


def make_inputs(size: str, dtype: str) -> dict[str, Any]:
    s = SIZES[size]
    rng = np.random.default_rng(8)
    d, hidden = s["D"], s["hidden"]
    jdims, jbatch = JVP_SIZES[size]
    pdims, pbatch = PINN_SIZES[size]
    return {
        "lap": dense_params(rng, (d, *hidden, 1), dtype),
        "x8": rng.standard_normal((s["batch"][0], d)).astype(dtype),
        "x64": rng.standard_normal((s["batch"][1], d)).astype(dtype),
        "bi": dense_params(rng, (s["bi_D"], *hidden, 1), dtype),
        "xb": rng.standard_normal((s["bi_N"], s["bi_D"])).astype(dtype),
        "jvp": dense_params(rng, jdims, dtype),
        "xj": rng.standard_normal((jbatch, jdims[0])).astype(dtype),
        "vj": rng.standard_normal((jbatch, jdims[0])).astype(dtype),
        "pinn": dense_params(rng, pdims, dtype),
        "xp": rng.uniform(0, 1, (pbatch, 2)).astype(dtype),
    }


def _source(x: np.ndarray) -> np.ndarray:
    """``f = 2 pi^2 sin(pi x) sin(pi y)``: -Laplace u = f for u = sin(pi x) sin(pi y)."""
    return 2 * np.pi**2 * np.sin(np.pi * x[:, 0]) * np.sin(np.pi * x[:, 1])


# ---------------------------------------------------------------- hodiff
def hodiff_fns(inp: dict[str, Any]) -> Fns:
    import hodiff as hd
    import hodiff.functions as F

    def mlp(ps: list[Any]) -> Any:
        def f(h: Any) -> Any:
            n = len(ps) // 2
            for k in range(n):
                h = F.affine(h, ps[2 * k], ps[2 * k + 1])
                if k < n - 1:
                    h = F.tanh(h)
            return h

        return f

    def leaves(arrays: list[np.ndarray], need_grad: bool = False) -> list[Any]:
        return [hd.Variable.from_array(a, need_grad=need_grad) for a in arrays]

    lap, bi, jv = mlp(leaves(inp["lap"])), mlp(leaves(inp["bi"])), mlp(leaves(inp["jvp"]))
    pinn_ps = leaves(inp["pinn"], need_grad=True)
    pinn = mlp(pinn_ps)
    xp = inp["xp"]
    src = hd.Variable.from_array(_source(xp))

    def laplacian(x: np.ndarray, method: str) -> Any:
        return lambda: hd.laplacian(lap, x, batch_axis=0, method=method)

    def biharmonic(method: str) -> Any:
        return lambda: hd.biharmonic(bi, inp["xb"], batch_axis=0, method=method)

    def pinn_step() -> Any:
        for p in pinn_ps:
            p.zero_grad()
        lp = hd.laplacian(pinn, xp, batch_axis=0, create_graph=True)
        loss = F.mean((lp + src) ** 2)
        loss.backward()
        return [p.g for p in pinn_ps]

    return {
        "W12a": laplacian(inp["x8"], "taylor"),
        "W12an": laplacian(inp["x8"], "nested"),
        "W12b": laplacian(inp["x64"], "taylor"),
        "W12bn": laplacian(inp["x64"], "nested"),
        "W12c": biharmonic("taylor"),
        "W12cn": biharmonic("nested"),
        "W12d": lambda: hd.jvp(jv, inp["xj"], inp["vj"])[1],
        "W12f": lambda: jv(hd.Variable.from_array(inp["xj"])).d,
        "W12e": pinn_step,
    }


def jit_fns(inp: dict[str, Any]) -> Fns:
    """hd.jit of each hodiff row (the same transforms, recorded once and replayed)."""
    import hodiff as hd
    import hodiff.functions as F

    def mlp(ps: Any) -> Any:
        def f(h: Any) -> Any:
            n = len(ps) // 2
            for k in range(n):
                h = F.affine(h, ps[2 * k], ps[2 * k + 1])
                if k < n - 1:
                    h = F.tanh(h)
            return h

        return f

    def leaves(arrays: list[np.ndarray]) -> list[Any]:
        return [hd.Variable.from_array(a) for a in arrays]

    lap, bi, jv = mlp(leaves(inp["lap"])), mlp(leaves(inp["bi"])), mlp(leaves(inp["jvp"]))
    xp = inp["xp"]
    src = hd.Variable.from_array(_source(xp))

    def laplacian(method: str) -> Any:
        return hd.jit(lambda x: hd.laplacian(lap, x, batch_axis=0, method=method))

    def biharmonic(method: str) -> Any:
        return hd.jit(lambda x: hd.biharmonic(bi, x, batch_axis=0, method=method))

    def pinn_step(*qs: Any) -> Any:
        lp = hd.laplacian(mlp(qs), xp, batch_axis=0, create_graph=True)
        gs = hd.grad(F.mean((lp + src) ** 2), list(qs), allow_unused=True)
        return [q * 0.0 if g is None else g for g, q in zip(gs, qs, strict=True)]  # last bias

    lt, ln = laplacian("taylor"), laplacian("nested")
    bt, bn = biharmonic("taylor"), biharmonic("nested")
    jvp, fwd, pinn = hd.jit(lambda x, v: hd.jvp(jv, x, v)[1]), hd.jit(jv), hd.jit(pinn_step)
    x8, x64, xb, xj, vj = (inp[k] for k in ("x8", "x64", "xb", "xj", "vj"))
    pinn_params = tuple(inp["pinn"])
    return {
        "W12a": lambda: lt(x8),
        "W12an": lambda: ln(x8),
        "W12b": lambda: lt(x64),
        "W12bn": lambda: ln(x64),
        "W12c": lambda: bt(xb),
        "W12cn": lambda: bn(xb),
        "W12d": lambda: jvp(xj, vj),
        "W12f": lambda: fwd(xj),
        "W12e": lambda: pinn(*pinn_params),
    }


# ---------------------------------------------------------------- torch.func
def torch_fns(inp: dict[str, Any]) -> Fns:
    torch = load_torch()
    tf = torch.func

    def mlp(arrays: list[np.ndarray]) -> Any:
        ps = [torch.from_numpy(a) for a in arrays]
        return ps, _torch_mlp(torch, ps)

    _, lap = mlp(inp["lap"])
    _, bi = mlp(inp["bi"])
    _, jv = mlp(inp["jvp"])
    pinn_arrays = [torch.from_numpy(a) for a in inp["pinn"]]

    def lap1(f: Any) -> Any:
        return lambda x: torch.trace(tf.hessian(lambda z: f(z[None])[0, 0])(x))

    laplacian = tf.vmap(lap1(lap))

    def bi_lap(x: Any) -> Any:
        inner = lap1(bi)
        return torch.trace(tf.hessian(inner)(x))

    biharmonic = tf.vmap(bi_lap)
    xj, vj = torch.from_numpy(inp["xj"]), torch.from_numpy(inp["vj"])
    xp = torch.from_numpy(inp["xp"])
    src = torch.from_numpy(_source(inp["xp"]))

    def pinn_loss(ps: list[Any]) -> Any:
        f = _torch_mlp(torch, ps)
        lp = tf.vmap(lap1(f))(xp)
        return torch.mean((lp + src) ** 2)

    pinn_grad = tf.grad(pinn_loss)
    x8, x64, xb = (torch.from_numpy(inp[k]) for k in ("x8", "x64", "xb"))
    return {
        "W12a": lambda: laplacian(x8),
        "W12an": lambda: laplacian(x8),
        "W12b": lambda: laplacian(x64),
        "W12bn": lambda: laplacian(x64),
        "W12c": lambda: biharmonic(xb),
        "W12cn": lambda: biharmonic(xb),
        "W12d": lambda: tf.jvp(jv, (xj,), (vj,))[1],
        "W12f": lambda: jv(xj),
        "W12e": lambda: pinn_grad(pinn_arrays),
    }


def _torch_mlp(torch: Any, ps: list[Any]) -> Any:
    def f(h: Any) -> Any:
        n = len(ps) // 2
        for k in range(n):
            h = h @ ps[2 * k] + ps[2 * k + 1]
            if k < n - 1:
                h = torch.tanh(h)
        return h

    return f


# ---------------------------------------------------------------- JAX
def jax_fns(inp: dict[str, Any]) -> Fns:
    jax, jnp = load_jax()

    def mlp(ps: list[Any]) -> Any:
        def f(h: Any) -> Any:
            n = len(ps) // 2
            for k in range(n):
                h = h @ ps[2 * k] + ps[2 * k + 1]
                if k < n - 1:
                    h = jnp.tanh(h)
            return h

        return f

    def lap1(f: Any) -> Any:
        return lambda x: jnp.trace(jax.hessian(lambda z: f(z[None])[0, 0])(x))

    laplacian = jax.jit(jax.vmap(lap1(mlp(list(inp["lap"])))))
    biharmonic = jax.jit(jax.vmap(lambda x: jnp.trace(jax.hessian(lap1(mlp(list(inp["bi"]))))(x))))
    jv_f = mlp(list(inp["jvp"]))
    jvp = jax.jit(lambda x, v: jax.jvp(jv_f, (x,), (v,))[1])
    fwd = jax.jit(jv_f)
    src = jnp.asarray(_source(inp["xp"]))

    def pinn_loss(ps: list[Any], x: Any) -> Any:
        lp = jax.vmap(lap1(mlp(ps)))(x)
        return jnp.mean((lp + src) ** 2)

    pinn_grad = jax.jit(jax.grad(pinn_loss))
    return {
        "W12a": jax_blocking(jax, laplacian, inp["x8"]),
        "W12an": jax_blocking(jax, laplacian, inp["x8"]),
        "W12b": jax_blocking(jax, laplacian, inp["x64"]),
        "W12bn": jax_blocking(jax, laplacian, inp["x64"]),
        "W12c": jax_blocking(jax, biharmonic, inp["xb"]),
        "W12cn": jax_blocking(jax, biharmonic, inp["xb"]),
        "W12d": jax_blocking(jax, jvp, inp["xj"], inp["vj"]),
        "W12f": jax_blocking(jax, fwd, inp["xj"]),
        "W12e": jax_blocking(jax, pinn_grad, list(inp["pinn"]), inp["xp"]),
    }


WORKLOAD = Workload(
    name="taylor",
    title="forward and Taylor mode: per-datum Laplacian and biharmonic of the paper's tanh MLP, "
    "jvp of W1's MLP, a PINN step",
    tasks=(
        Task("W12a", "Laplacian, D=50, batch 8 (hodiff: collapsed Taylor)"),
        Task("W12an", "Laplacian, D=50, batch 8 (hodiff: nested HVPs)"),
        Task("W12b", "Laplacian, D=50, batch 64 (hodiff: collapsed Taylor)"),
        Task("W12bn", "Laplacian, D=50, batch 64 (hodiff: nested HVPs)"),
        Task("W12c", "biharmonic, D=5, batch 8 (hodiff: Taylor of Taylor)"),
        Task("W12cn", "biharmonic, D=5, batch 8 (hodiff: nested)"),
        Task("W12d", "jvp of W1's MLP w.r.t. its input, batch 128"),
        Task("W12f", "the forward of W1's MLP alone, batch 128"),
        Task("W12e", "PINN step: Laplacian (create_graph), loss, weight gradients"),
    ),
    dtypes=("float64",),
    make_inputs=make_inputs,
    builders={"hodiff": hodiff_fns, "hd.jit": jit_fns, "torch": torch_fns, "jax": jax_fns},
    notes={
        "hodiff": "hd.laplacian / hd.biharmonic (batch_axis=0; taylor and nested), hd.jvp "
        "(forward mode), hd.laplacian(create_graph=True) + backward",
        "hd.jit": "hd.jit of each hodiff row (transforms recorded once, backend replay)",
        "torch": "torch.func: vmap(trace(hessian)), jvp, grad of the vmapped Laplacian loss",
        "jax": "jax.jit of vmap(trace(hessian)), jvp, grad",
    },
)
