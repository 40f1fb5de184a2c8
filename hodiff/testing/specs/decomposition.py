"""Specs of hodiff/functions/decomposition.py.

Matrices are well conditioned (``3 I`` + noise; SPD ``m m^T + 2 I``; symmetric
with spread eigenvalues). ``eigh`` and ``svd`` are checked through
sign-invariant products of their vectors (each column times its first
entry), since the sign of a singular/eigen vector is arbitrary.
"""

from collections.abc import Callable

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec

Draw = Callable[[np.random.Generator], np.ndarray]


def near(scale: float, shape: tuple[int, ...]) -> Draw:
    return lambda rng: scale * np.eye(shape[-1]) + rng.uniform(-0.5, 0.5, size=shape)


def spd(shape: tuple[int, ...]) -> Draw:
    def draw(rng: np.random.Generator) -> np.ndarray:
        m = rng.uniform(-1, 1, size=shape)
        return m @ np.swapaxes(m, -1, -2) + 2 * np.eye(shape[-1])

    return draw


def symmetric(shape: tuple[int, ...]) -> Draw:
    """Symmetric, eigenvalues near 1, 2.5, 4, ... (well separated)."""
    def draw(rng: np.random.Generator) -> np.ndarray:
        n = shape[-1]
        q, _ = np.linalg.qr(rng.standard_normal(shape))
        w = 1.0 + 1.5 * np.arange(n) + rng.uniform(-0.2, 0.2, size=shape[:-1])
        return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)

    return draw


def spread(shape: tuple[int, ...]) -> Draw:
    """Singular values near 1, 2, 3, ... (well separated)."""
    def draw(rng: np.random.Generator) -> np.ndarray:
        m, n = shape[-2:]
        k = min(m, n)
        u, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (m, k)))
        v, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (n, k)))
        s = 1.0 + np.arange(k) + rng.uniform(-0.2, 0.2, size=shape[:-2] + (k,))
        return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)

    return draw


def _signless(u, vh):  # noqa: ANN001, ANN202
    return u * u[..., :1, :], vh * vh[..., :, :1]


def eigh(a):  # noqa: ANN001, ANN201
    """``F.eigh`` with the eigenvector signs factored out: (w, v * v[0])."""
    w, v = F.eigh(a)
    return w, v * v[..., :1, :]


def _eigh_ref(a: np.ndarray):  # noqa: ANN202
    w, v = np.linalg.eigh(a)
    return w, v * v[..., :1, :]


def svd(a, full_matrices=False):  # noqa: ANN001, ANN201
    """``F.svd`` with the singular vector signs factored out: (s, u * u[0], vh * vh[:, 0])."""
    u, s, vh = F.svd(a, full_matrices=full_matrices)
    return (s, *_signless(u, vh))


def _svd_ref(a: np.ndarray, full_matrices: bool = False):  # noqa: ANN202
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return (s, *_signless(u, vh))


def _solve_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.solve(a, b)


def _tri_ref(a: np.ndarray, b: np.ndarray, lower: bool = True) -> np.ndarray:
    t = np.tril(a) if lower else np.triu(a)
    if b.ndim == 1:
        return np.linalg.solve(t, b)
    return np.linalg.solve(t, b)


SPECS = [
    Spec(F.solve, (near(3, (2, 3, 3)), (2, 3, 2)), _solve_ref),
    Spec(F.solve, (near(3, (3, 3)), (3,)), _solve_ref, id="vector"),
    Spec(F.solve, (near(3, (2, 3, 3)), (3, 1)), lambda a, b: np.linalg.solve(
        a, np.broadcast_to(b, (2, 3, 1))), id="broadcast"),
    Spec(F.solve_triangular, (near(3, (2, 3, 3)), (2, 3, 2)), _tri_ref),
    Spec(F.solve_triangular, (near(3, (3, 3)), (3,)), _tri_ref, kwargs={"lower": False},
         id="upper_vector"),
    Spec(F.cholesky, (spd((2, 3, 3)),), np.linalg.cholesky),
    Spec(eigh, (symmetric((2, 3, 3)),), _eigh_ref, order=2, ref_atol=1e-10),
    Spec(svd, (spread((2, 3, 3)),), _svd_ref, order=2, ref_atol=1e-10),
    Spec(svd, (spread((4, 2)),), _svd_ref, order=2, ref_atol=1e-10, id="tall"),
    Spec(svd, (spread((2, 4)),), _svd_ref, order=2, ref_atol=1e-10, id="wide"),
    Spec(F.svd, (spread((2, 3, 2)),), lambda a, compute_uv: np.linalg.svd(a, compute_uv=False),
         kwargs={"compute_uv": False}, order=2, id="values"),
    Spec(F.pinv, (spread((3, 2)),), np.linalg.pinv, ref_atol=1e-10),
    Spec(F.pinv, (spread((2, 2, 3)),), np.linalg.pinv, ref_atol=1e-10, id="wide"),
    Spec(F.trace, ((2, 3, 3),), lambda x: np.trace(x, axis1=-2, axis2=-1), linear=True),
    Spec(F.outer, ((3,), (4,)), np.outer, linear=True),
    Spec(F.outer, ((2, 3), (2, 4)), lambda a, b: np.einsum("bi,bj->bij", a, b), linear=True,
         id="batched"),
    Spec(F.tensordot, ((2, 3, 4), (3, 4, 2)), np.tensordot, linear=True),
    Spec(F.tensordot, ((2, 3), (3, 2)), lambda a, b, axes: np.tensordot(a, b, axes),
         kwargs={"axes": ([0], [1])}, linear=True, id="pairs"),
]
