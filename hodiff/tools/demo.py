"""``python -m hodiff demo``: a gradient, an HVP and a third derivative of a small model."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import numpy as np

import hodiff.functions as F
from hodiff.engine.autograd import grad
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.testing import check_function
from hodiff.tools.check import gradcheck
from hodiff.tools.graphio import load_graph, save_graph
from hodiff.transforms import curvature
from hodiff.transforms.derivatives import hessian


def mlp(x: Variable, w1: Variable, b1: Variable, w2: Variable, b2: Variable) -> Variable:
    """A 3-8-1 tanh network: ``tanh(tanh(x W1 + b1) W2 + b2)``."""
    return F.tanh(F.affine(F.tanh(F.affine(x, w1, b1)), w2, b2))


def run_demo() -> int:
    rng = np.random.default_rng(0)
    x = Variable.from_array(rng.standard_normal((16, 3)))
    t = Variable.from_array(rng.standard_normal((16, 1)) * 0.5)
    shapes = {"w1": (3, 8), "b1": (8,), "w2": (8, 1), "b2": (1,)}
    params = {
        k: Variable.from_array(rng.standard_normal(s) * 0.5, need_grad=True)
        for k, s in shapes.items()
    }
    ps = list(params.values())

    def loss_of(*ws: Variable) -> Variable:
        return F.mean((mlp(x, *ws) - t) ** 2)

    loss = loss_of(*ps)
    print(f"model: 3-8-1 tanh MLP, batch 16, loss = {float(loss.d):.6f}\n")
    grads = _gradient_lines(loss, params)
    _hvp_lines(loss_of, grads, ps, rng)
    _third_derivative_lines(ps)
    ok = _gradcheck_lines(loss_of, ps)
    ok = _curvature_line(loss_of, loss, params) and ok
    ok = _check_function_line(x) and ok
    _graph_line(x, loss, ps)
    return 0 if ok else 1


def _gradient_lines(loss: Variable, params: dict[str, Variable]) -> list[Variable]:
    """1. The gradient: the fast path (.backward) and the graph path (hd.grad) agree."""
    grads = grad(loss, list(params.values()))
    loss.backward()
    print("1. gradient (hd.grad vs plain .backward())")
    for (name, p), g in zip(params.items(), grads, strict=True):
        print(
            f"   d loss / d {name:<3} |g| = {np.linalg.norm(g.d):.6f}"
            f"   max |graph - plain| = {np.abs(g.d - p.g).max():.1e}"
        )
    return grads


def _hvp_lines(
    loss_of: Callable[..., Variable],
    grads: list[Variable],
    ps: list[Variable],
    rng: np.random.Generator,
) -> None:
    """2. A Hessian-vector product (differentiate ``<grad, v>`` once more) against the
    central difference of the gradient along ``v``.
    """
    vs = [rng.standard_normal(p.shape) for p in ps]
    dot = F.sum(grads[0] * vs[0])
    for g, v in zip(grads[1:], vs[1:], strict=True):
        dot = dot + F.sum(g * v)
    hvs = grad(dot, ps)
    eps = 1e-6

    def flat_grad(shift: float) -> np.ndarray:
        moved = [
            Variable.from_array(p.d + shift * v, need_grad=True)
            for p, v in zip(ps, vs, strict=True)
        ]
        return np.concatenate([g.d.ravel() for g in grad(loss_of(*moved), moved)])

    fd = (flat_grad(eps) - flat_grad(-eps)) / (2 * eps)
    hv = np.concatenate([h.d.ravel() for h in hvs])
    print("\n2. Hessian-vector product H v (reverse over reverse)")
    print(
        f"   |Hv| = {np.linalg.norm(hv):.6f}   max |Hv - finite difference of grad| = "
        f"{np.abs(hv - fd).max():.1e}"
    )


def _third_derivative_lines(ps: list[Variable]) -> None:
    """3. The third derivative of the network output along its input."""
    s = Variable.from_array(np.array([[0.3, -0.2, 0.1]]), need_grad=True)
    y = F.sum(mlp(s, *ps))
    d1 = grad(y, s)[0]
    d2 = grad(F.sum(d1), s)[0]
    d3 = grad(F.sum(d2), s)[0]
    print("\n3. third derivative of the output y(x) at one input x in R^3")
    print(f"   sum_ij d3y/dx_i dx_j dx_k = {d3.d.ravel()}  (k = 1..3)")


def _gradcheck_lines(loss_of: Callable[..., Variable], ps: list[Variable]) -> bool:
    """4. gradcheck of the whole model, orders 1..3, against finite differences."""
    report = gradcheck(lambda *w: loss_of(*w), [p.d for p in ps], order=3, raise_exception=False)
    print("\n4. gradcheck of the loss w.r.t. all parameters (float64 central differences)")
    print(f"   {'order':>5} {'elements':>9} {'max abs err':>12} {'max rel err':>12}  result")
    for k in (1, 2, 3):
        n = sum(1 for r in report.rows if r[1] == k)
        a, r = report.max_errors(k)
        ok = all(row[6] for row in report.rows if row[1] == k)
        print(f"   {k:>5} {n:>9} {a:>12.2e} {r:>12.2e}  {'pass' if ok else 'FAIL'}")
    print(f"\n{'all derivatives agree' if report else 'MISMATCH'}")
    return bool(report)


def _curvature_line(
    loss_of: Callable[..., Variable], loss: Variable, params: dict[str, Variable]
) -> bool:
    """5. Curvature: Lanczos and Hutchinson on one recorded gradient graph vs the dense
    Hessian; whether the top eigenvalues agree.
    """
    ps = list(params.values())
    blocks = hessian(loss_of, tuple(p.d for p in ps))
    dense = np.block(
        [
            [b.reshape(p.size, q.size) for b, q in zip(row, ps, strict=True)]
            for row, p in zip(blocks, ps, strict=True)
        ]
    )
    top, _ = curvature.eigenvalues(loss, params, k=1)
    tr = curvature.trace(loss, params, n_samples=200)
    print(
        f"\n5. curvature: top Hessian eigenvalue {top[0]:.6f} (dense eigvalsh "
        f"{np.linalg.eigvalsh(dense)[-1]:.6f}), trace {float(tr):.4f} +- {tr.stderr:.4f} "
        f"(exact {np.trace(dense):.4f})"
    )
    return bool(abs(top[0] - np.linalg.eigvalsh(dense)[-1]) < 1e-8)


def _check_function_line(x: Variable) -> bool:
    """6. check_function on a custom primitive (it passes) and on a variant whose rule
    ignores ``accum`` (it fails).
    """
    good = check_function(_Softplus(), x.d[:2, 0], order=2, raise_exception=False)
    bad = check_function(_SoftplusNoAccum(), x.d[:2, 0], order=2, raise_exception=False)
    print(
        f"\n6. check_function: custom Softplus passes {len(good.rows)}/{len(good.rows)} "
        f"checks; a variant ignoring accum fails: "
        f"{', '.join(r.property for r in bad.failures())}"
    )
    return bool(good) and not bad


def _graph_line(x: Variable, loss: Variable, ps: list[Variable]) -> None:
    """Graphs as data: the loss graph saved, loaded and differentiated again (docs/graphs.md)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.hdg")
        save_graph(path, loss, x)
        f = load_graph(path)
        size = os.path.getsize(path)
    loaded = f(x)
    grads = grad(loss, ps)
    err = max(
        np.abs(a.d - b.d).max()
        for a, b in zip(grad(loaded, list(f.parameters.values())), grads, strict=True)
    )
    n = len(f.definition["functions"])
    print(
        f"\n7. graphs as data: loss graph saved and loaded ({n} functions, {size} bytes): "
        f"|loss - loaded| = {abs(float(loaded.d) - float(loss.d)):.1e}, "
        f"|grad - loaded grad| = {err:.1e}"
    )


class _Softplus(Function, register=False):  # a user primitive: not registered
    """``y = log(1 + exp(x))``, ``dy/dx = sigmoid(x)``: a user-style primitive."""

    def forward_impl(self, inputs, outputs):  # type: ignore[no-untyped-def]
        outputs[0] = np.logaddexp(0.0, inputs[0])

    def backward_impl(self, inputs, outputs, prop_down, accum):  # type: ignore[no-untyped-def]
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * F.sigmoid(inputs[0].data), accum[0])


class _SoftplusNoAccum(_Softplus, register=False):
    def backward_impl(self, inputs, outputs, prop_down, accum):  # type: ignore[no-untyped-def]
        if prop_down[0]:
            inputs[0].grad = outputs[0].grad * F.sigmoid(inputs[0].data)
