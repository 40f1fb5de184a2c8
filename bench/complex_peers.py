"""hodiff's complex derivatives beside two peers that share its convention.

1. HIPS autograd (``pip install autograd``), as a user runs it: its ``check_grads`` (reverse
   mode, orders 1-2, finite differences along the real and imaginary parts) on the same
   functions as hodiff's complex spec rows, and hodiff's gradient of a real loss
   ``sum Re(w f(z))`` against autograd's ``grad`` at the same point.
2. JAX (``jax_enable_x64``) at the edge points of ``log``, ``sqrt``, ``angle`` and ``abs``:
   0, the branch cut ``-1+0j`` / ``-1-0j``, and ``1j``: values and gradients.

Neither peer is imported by hodiff or its tests. Run: python -m bench.complex_peers
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import hodiff as hd
import hodiff.functions as F

RNG = np.random.default_rng(0)
B = RNG.normal(size=(3, 2)) + 1j * RNG.normal(size=(3, 2))
A0 = 3 * np.eye(3) + 0.4 * (RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3)))


def cases(anp: Any) -> list[tuple[str, Callable[[Any], Any], Callable[[Any], Any], tuple]]:
    """(name, hodiff function, the peer's numpy function, input shape); inputs are complex."""
    return [
        ("exp", F.exp, anp.exp, (2, 3)),
        ("log", F.log, anp.log, (2, 3)),
        ("sqrt", F.sqrt, anp.sqrt, (2, 3)),
        ("sin", F.sin, anp.sin, (2, 3)),
        ("tanh", F.tanh, anp.tanh, (2, 3)),
        ("mul2 (z*z)", lambda z: z * z, lambda z: z * z, (2, 3)),
        ("div2 (1/z)", lambda z: 1.0 / z, lambda z: 1.0 / z, (2, 3)),
        ("pow_scalar (z**3)", lambda z: z**3, lambda z: z**3, (2, 3)),
        ("abs", F.abs, anp.abs, (2, 3)),
        ("sum", F.sum, anp.sum, (2, 3)),
        ("prod", lambda z: F.prod(z, axis=1), lambda z: anp.prod(z, axis=1), (2, 3)),
        ("matmul", lambda z: F.matmul(z, B), lambda z: anp.dot(z, B), (2, 3)),
        (
            "einsum",
            lambda z: F.einsum("ij,jk->ik", z, B),
            lambda z: anp.einsum("ij,jk->ik", z, B),
            (2, 3),
        ),
        ("transpose", lambda z: F.transpose(z, (1, 0)), lambda z: anp.transpose(z), (2, 3)),
        (
            "concatenate",
            lambda z: F.concatenate(z, z * 2, axis=1),
            lambda z: anp.concatenate([z, z * 2], axis=1),
            (2, 3),
        ),
        ("fft", F.fft, anp.fft.fft, (2, 5)),
        ("ifft", F.ifft, anp.fft.ifft, (2, 5)),
        ("batch_inv", lambda z: F.batch_inv(z + A0), lambda z: anp.linalg.inv(z + A0), (3, 3)),
        ("batch_det", lambda z: F.batch_det(z + A0), lambda z: anp.linalg.det(z + A0), (3, 3)),
        ("solve", lambda z: F.solve(z + A0, B), lambda z: anp.linalg.solve(z + A0, B), (3, 3)),
    ]


def _hodiff_grad(f: Callable[[Any], Any], z0: np.ndarray, w: np.ndarray) -> np.ndarray:
    z = hd.Variable.from_array(z0, need_grad=True)
    y = f(z)
    loss = F.sum(F.real(y * w)) if y.dtype.kind == "c" else F.sum(y * w.real)
    (g,) = hd.grad(loss, [z])
    return g.d


def autograd_table() -> list[tuple[str, str, str, float]]:
    import autograd
    import autograd.numpy as anp
    from autograd.test_util import check_grads

    rows = []
    for name, f, g, shape in cases(anp):
        z0 = 0.3 + RNG.uniform(0.2, 1.0, shape) + 1j * RNG.uniform(-1.0, 1.0, shape)
        if name in ("batch_inv", "batch_det", "solve"):
            z0 = 0.3 * z0
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                check_grads(g, modes=["rev"], order=2)(z0)
            peer = "pass"
        except Exception as e:  # any failure of the peer's check is reported
            peer = f"FAIL ({type(e).__name__})"
        shape_y = np.shape(g(z0))  # an array even for 0-d outputs (not a numpy scalar)
        w = np.asarray(RNG.normal(size=shape_y) + 1j * RNG.normal(size=shape_y))
        ours = _hodiff_grad(f, z0, w)
        theirs = autograd.grad(lambda z, g=g, w=w: anp.sum(anp.real(g(z) * w)))(z0)
        diff = float(np.abs(ours - theirs).max() / max(1.0, np.abs(theirs).max()))
        verdict = "agree" if diff < 1e-10 else "DIFFER"
        rows.append((name, peer, verdict, diff))
    return rows


EDGES = [0j, complex(-1.0, 0.0), complex(-1.0, -0.0), 1j, complex(3.0, 4.0)]


def _fmt(v: Any) -> str:
    v = complex(v)
    if v.imag == 0 and math.copysign(1.0, v.imag) > 0:
        return f"{v.real:.4g}"
    return f"{v.real:.4g}{'+' if math.copysign(1.0, v.imag) > 0 else '-'}{abs(v.imag):.4g}j"


def jax_table() -> list[tuple[str, str, str, str, str, str]]:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    fns = [
        ("log", F.log, jnp.log, True),
        ("sqrt", F.sqrt, jnp.sqrt, True),
        ("angle", F.angle, jnp.angle, False),
        ("abs", F.abs, jnp.abs, False),
    ]
    rows = []
    for name, f, g, holo in fns:
        for z0 in EDGES:
            zv = hd.Variable.from_array(np.array(z0), need_grad=True)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = f(zv)
                grads = [np.ones((), complex)] if holo else None
                (gr,) = hd.grad(y, [zv], grad_outputs=grads)
                jy = g(jnp.asarray(z0))
                jg = (
                    jax.grad(g, holomorphic=True)(jnp.asarray(z0))
                    if holo
                    else jax.grad(g)(jnp.asarray(z0))
                )
            same = _close(y.d, jy) and _close(gr.d, jg)
            rows.append(
                (
                    name,
                    _fmt(z0),
                    _fmt(y.d),
                    _fmt(jy),
                    f"{_fmt(gr.d)} | {_fmt(jg)}",
                    "same" if same else "DIFFER",
                )
            )
    return rows


def _close(a: Any, b: Any) -> bool:
    a, b = complex(a), complex(b)
    for u, v in ((a.real, b.real), (a.imag, b.imag)):
        if math.isnan(u) or math.isnan(v):
            if not (math.isnan(u) and math.isnan(v)):
                return False
        elif math.isinf(u) or math.isinf(v):
            if u != v:
                return False
        elif abs(u - v) > 1e-12 * max(1.0, abs(v)):
            return False
    return True


def main() -> None:
    print("1. HIPS autograd check_grads (rev, order 2) and grad vs hodiff's hd.grad")
    print(f"{'function':<20} {'check_grads':<14} {'hodiff vs autograd':<20} rel. diff")
    rows = autograd_table()
    for name, peer, verdict, diff in rows:
        print(f"{name:<20} {peer:<14} {verdict:<20} {diff:.1e}")
    agree = sum(r[2] == "agree" for r in rows)
    passed = sum(r[1] == "pass" for r in rows)
    print(f"   {passed}/{len(rows)} check_grads pass; {agree}/{len(rows)} gradients agree\n")
    print("2. Edge points against JAX (x64): value (hodiff, JAX) and gradient (hodiff | JAX)")
    print(f"{'f':<6} {'z':<8} {'hodiff f(z)':<16} {'jax f(z)':<16} {'grad hodiff | jax':<34}")
    jrows = jax_table()
    for name, z, y, jy, g, same in jrows:
        print(f"{name:<6} {z:<8} {y:<16} {jy:<16} {g:<34} {same}")
    print(f"   {sum(r[5] == 'same' for r in jrows)}/{len(jrows)} edge points identical")


if __name__ == "__main__":
    main()
