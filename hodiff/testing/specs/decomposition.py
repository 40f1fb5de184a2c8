"""Specs of hodiff/functions/decomposition.py.

Matrices are well conditioned (``3 I`` + noise; SPD ``m m^T + 2 I``; symmetric
with spread eigenvalues; spread singular values). ``eigh`` and ``svd`` are checked by
finite differences; their references apply the documented sign convention (the
largest-magnitude entry of each eigenvector / left singular vector is positive)
to numpy's results, one vector at a time. All are checked to order 3.
"""

from collections.abc import Callable
from dataclasses import replace

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec

Draw = Callable[[np.random.Generator], np.ndarray]


def _flip(v: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Columns of ``v`` (and rows of ``w``) signed so that each column's largest |entry| > 0."""
    v, w = v.copy(), None if w is None else w.copy()
    for idx in np.ndindex(*v.shape[:-2]):
        for k in range(v.shape[-1]):
            col = v[idx][:, k]
            if col[np.argmax(np.abs(col))] < 0:
                v[idx][:, k] *= -1
                if w is not None and k < w.shape[-2]:
                    w[idx][k, :] *= -1
    return v, w


def _eigh_ref(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, v = np.linalg.eigh(a)
    return w, _flip(v)[0]


def _svd_ref(a: np.ndarray, full_matrices: bool = True) -> tuple[np.ndarray, ...]:
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    u_flipped, vh_k = _flip(u, vh[..., :k, :])
    vh = vh.copy()
    vh[..., :k, :] = vh_k
    rest = np.swapaxes(_flip(np.swapaxes(vh[..., k:, :], -1, -2))[0], -1, -2)
    vh[..., k:, :] = rest
    return u_flipped, s, vh


#: the sign convention (each vector's largest |entry| positive) flips a vector where its two
#: largest |entries| tie: a jump the draws keep this far away (the checker's steps are 2%)
SIGN_GAP = 0.02


def _signs_settled(vectors: np.ndarray) -> bool:
    """Whether every column's two largest |entries| differ by at least ``SIGN_GAP``."""
    top = np.sort(np.abs(vectors), axis=-2)
    return bool((top[..., -1, :] - top[..., -2, :] >= SIGN_GAP).all())


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
        while not _signs_settled(q):
            q, _ = np.linalg.qr(rng.standard_normal(shape))
        w = 1.0 + 1.5 * np.arange(n) + rng.uniform(-0.2, 0.2, size=shape[:-1])
        return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)

    return draw


def spread(shape: tuple[int, ...]) -> Draw:
    """Singular values near 1, 2, 3, ... (well separated)."""

    def draw(rng: np.random.Generator) -> np.ndarray:
        m, n = shape[-2:]
        k = min(m, n)
        u, _ = np.linalg.qr(rng.standard_normal((*shape[:-2], m, k)))
        v, _ = np.linalg.qr(rng.standard_normal((*shape[:-2], n, k)))
        while not (_signs_settled(u) and _signs_settled(v)):
            u, _ = np.linalg.qr(rng.standard_normal((*shape[:-2], m, k)))
            v, _ = np.linalg.qr(rng.standard_normal((*shape[:-2], n, k)))
        s = 1.0 + np.arange(k) + rng.uniform(-0.2, 0.2, size=(*shape[:-2], k))
        return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)

    return draw


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
    Spec(
        F.solve,
        (near(3, (2, 3, 3)), (3, 1)),
        lambda a, b: np.linalg.solve(a, np.broadcast_to(b, (2, 3, 1))),
        id="broadcast",
    ),
    Spec(F.solve_triangular, (near(3, (2, 3, 3)), (2, 3, 2)), _tri_ref),
    Spec(
        F.solve_triangular,
        (near(3, (3, 3)), (3,)),
        _tri_ref,
        kwargs={"lower": False},
        id="upper_vector",
    ),
    Spec(F.cholesky, (spd((2, 3, 3)),), np.linalg.cholesky),
    Spec(F.eigh, (symmetric((2, 3, 3)),), _eigh_ref, ref_atol=1e-10),
    Spec(F.svd, (spread((2, 3, 3)),), _svd_ref, ref_atol=1e-10),
    Spec(
        F.svd,
        (spread((4, 2)),),
        _svd_ref,
        kwargs={"full_matrices": False},
        ref_atol=1e-10,
        id="tall",
    ),
    Spec(
        F.svd,
        (spread((2, 4)),),
        _svd_ref,
        kwargs={"full_matrices": False},
        ref_atol=1e-10,
        id="wide",
    ),
    Spec(
        F.svd,
        (spread((2, 3, 2)),),
        lambda a, compute_uv: np.linalg.svd(a, compute_uv=False),
        kwargs={"compute_uv": False},
        id="values",
    ),
    Spec(F.pinv, (spread((3, 2)),), np.linalg.pinv, ref_atol=1e-10),
    Spec(F.pinv, (spread((2, 2, 3)),), np.linalg.pinv, ref_atol=1e-10, id="wide"),
    Spec(F.trace, ((2, 3, 3),), lambda x: np.trace(x, axis1=-2, axis2=-1), linear=True),
    Spec(F.outer, ((3,), (4,)), np.outer, linear=True),
    Spec(
        F.outer,
        ((2, 3), (2, 4)),
        lambda a, b: np.einsum("bi,bj->bij", a, b),
        linear=True,
        id="batched",
    ),
    Spec(F.tensordot, ((2, 3, 4), (3, 4, 2)), np.tensordot, linear=True),
    Spec(
        F.tensordot,
        ((2, 3), (3, 2)),
        lambda a, b, axes: np.tensordot(a, b, axes),
        kwargs={"axes": ([0], [1])},
        linear=True,
        id="pairs",
    ),
]


def _cnear(scale: float, shape: tuple[int, ...]) -> Draw:
    """``scale * I`` plus complex noise: far from singular."""
    return lambda rng: (
        scale * np.eye(shape[-1])
        + rng.uniform(-0.5, 0.5, size=shape)
        + 1j * rng.uniform(-0.5, 0.5, size=shape)
    )


# complex rows (holomorphic: the real rules read with complex numbers)
SPECS += [
    Spec(F.solve, (_cnear(3, (2, 3, 3)), (2, 3, 2)), _solve_ref, complex=True),
    Spec(F.solve, (_cnear(3, (3, 3)), (3,)), _solve_ref, id="vector", complex=True),
    Spec(F.solve, (near(3, (3, 3)), (3, 2)), _solve_ref, id="real_a", complex=True),
    *[replace(s, complex=True) for s in SPECS if s.fn in (F.trace, F.outer, F.tensordot)],
]
