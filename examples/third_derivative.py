"""Third derivatives, three ways, each checked against an independent computation.

1. ``d^3/dx^3 tanh(x)`` by calling ``hd.grad`` three times, against the closed form
   ``-2 (1 - t^2)(1 - 3 t^2)`` with ``t = tanh(x)``.
2. The third directional derivative ``D^3 L(w)[u, u, u]`` of an MLP loss with
   respect to its first weight matrix, against central differences of the
   second directional derivative ``u^T H(w) u`` (computed by ``hd.hvp``).
3. The third-derivative tensor contracted once, ``T(x) u = d(H(x) u)/dx``: the
   Jacobian (``hd.jacobian``) of a function that itself calls ``hd.grad``
   twice, against the closed form for ``f(x) = exp(a . x)``:
   ``T u = exp(a . x) (a . u) a a^T``.

No function has a third-order rule: every gradient is a graph of functions
that have backward rules of their own, so ``hd.grad`` applies again.

Run: python examples/third_derivative.py
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F


def tanh_derivatives(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """(f', f'', f''') of tanh at ``x`` by nested ``hd.grad``."""
    v = hd.Variable.from_array(x, need_grad=True)
    y = F.tanh(v)
    (d1,) = hd.grad(F.sum(y), v)
    (d2,) = hd.grad(F.sum(d1), v)  # elementwise: the sum only seeds each element
    (d3,) = hd.grad(F.sum(d2), v)
    return d1.d, d2.d, d3.d


def mlp_loss(x: np.ndarray, t: np.ndarray, w2: np.ndarray):
    def loss(w1: hd.Variable) -> hd.Variable:
        h = F.tanh(F.affine(x, w1))
        return F.mean(F.softmax_cross_entropy(F.affine(h, w2), t))

    return loss


def third_directional(loss, w: np.ndarray, u: np.ndarray) -> float:
    """``D^3 L(w)[u, u, u]``: differentiate ``<grad L, u>`` twice more along ``u``."""
    v = hd.Variable.from_array(w, need_grad=True)
    s = loss(v)
    for _ in range(3):
        (g,) = hd.grad(s, v)
        s = F.sum(g * u)
    return float(s.d)


def main(seed: int = 0, verbose: bool = True) -> dict[str, Any]:
    rng = np.random.default_rng(seed)

    # 1. tanh''' against its closed form
    x = np.linspace(-2.0, 2.0, 5)
    d1, d2, d3 = tanh_derivatives(x)
    t = np.tanh(x)
    closed = (1 - t**2, -2 * t * (1 - t**2), -2 * (1 - t**2) * (1 - 3 * t**2))
    err_tanh = max(float(np.max(np.abs(a - b))) for a, b in zip((d1, d2, d3), closed, strict=True))

    # 2. D^3 L[u, u, u] of an MLP loss against differences of u^T H u (from hd.hvp)
    xs = rng.standard_normal((16, 4))
    labels = rng.integers(0, 3, size=(16, 1))
    w1, w2 = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    u = rng.standard_normal(w1.shape)
    loss = mlp_loss(xs, labels, w2)
    third = third_directional(loss, w1, u)
    eps = 1e-4

    def uhu(w: np.ndarray) -> float:
        return float(np.sum(u * hd.hvp(loss, w, u)[1]))

    numeric = (uhu(w1 + eps * u) - uhu(w1 - eps * u)) / (2 * eps)
    err_mlp = abs(third - numeric) / max(1.0, abs(numeric))

    # 3. T(x) u = jacobian of x -> H(x) u, where H(x) u itself comes from hd.grad
    a = rng.standard_normal(3)
    x0 = 0.3 * rng.standard_normal(3)
    direction = rng.standard_normal(3)

    def hessian_times_u(x: hd.Variable) -> hd.Variable:
        (g,) = hd.grad(F.exp(F.sum(a * x)), x)
        (hu,) = hd.grad(F.sum(g * direction), x)
        return hu

    tu = hd.jacobian(hessian_times_u, x0)
    tu_closed = np.exp(a @ x0) * (a @ direction) * np.outer(a, a)
    err_tensor = float(np.max(np.abs(tu - tu_closed)))

    if verbose:
        print("1. tanh at", x)
        print("   f'''(x) =", d3)
        print(f"   max error of f', f'', f''' vs closed form: {err_tanh:.1e}")
        print(
            f"2. D^3 L(w)[u,u,u] of an MLP loss: {third:.8f}; differences of u^T H u: "
            f"{numeric:.8f} (relative gap {err_mlp:.1e})"
        )
        print("3. T(x) u = d(H(x) u)/dx for exp(a.x):")
        print(np.array2string(tu, precision=6))
        print(f"   max error vs exp(a.x) (a.u) a a^T: {err_tensor:.1e}")
    return {"tanh": err_tanh, "mlp": err_mlp, "tensor": err_tensor}


if __name__ == "__main__":
    main()
