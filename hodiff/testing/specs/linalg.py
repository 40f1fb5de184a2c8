"""Specs of hodiff/functions/linalg.py and hodiff/grad_functions/linalg.py.

The products (affine, matmul, batch_matmul, einsum) are multilinear: they are
marked ``linear`` so that orders >= 2 are checked on ``y**3``, which exercises
the backward of the backward. The inverse/determinant rows use well-conditioned
matrices (3 I + small noise; ``-3 I`` + noise for a negative determinant).
"""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.linalg import einsum_expand
from hodiff.testing.spec import Spec


def _near(scale: float, shape: tuple[int, ...]) -> Callable[[np.random.Generator], np.ndarray]:
    """Batches of ``scale * I + uniform(-0.5, 0.5)`` matrices: far from singular."""
    return lambda rng: scale * np.eye(shape[-1]) + rng.uniform(-0.5, 0.5, size=shape)


def _affine_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, base_axis: int = 1
) -> np.ndarray:
    feat = x.shape[base_axis:]
    w_full = w.reshape(feat + w.shape[1:])
    y = np.tensordot(x, w_full, axes=len(feat))
    return y if b is None else y + b


def _bmm_ref(
    a: np.ndarray, b: np.ndarray, transpose_a: bool = False, transpose_b: bool = False
) -> np.ndarray:
    sa = "...ji" if transpose_a else "...ij"
    sb = "...kj" if transpose_b else "...jk"
    return np.einsum(f"{sa},{sb}->...ik", a, b)


def _inv_ref(x: np.ndarray) -> np.ndarray:
    return np.linalg.solve(x, np.broadcast_to(np.eye(x.shape[-1]), x.shape))


def _det_ref(x: np.ndarray) -> np.ndarray:
    return np.array([np.prod(np.linalg.eigvals(m)).real for m in x])


def _logdet_ref(x: np.ndarray) -> np.ndarray:
    return np.array([np.sum(np.log(np.abs(np.linalg.eigvals(m)))) for m in x])


def _einsum(subscripts: str, *shapes: tuple[int, ...], id: str) -> Spec:
    def einsum(*xs: Any) -> Any:
        return F.einsum(subscripts, *xs)

    return Spec(einsum, shapes, lambda *xs: np.einsum(subscripts, *xs), linear=True, id=id)


def _expand_ref(x: np.ndarray, **_: Any) -> np.ndarray:
    """``y[i, i2, k, j] = x[i, k] * (i == i2)`` by loops."""
    y = np.zeros((2, 2, 3, 2))
    for i in range(2):
        for k in range(3):
            y[i, i, k, :] = x[i, k]
    return y


SPECS = [
    Spec(F.affine, ((2, 3), (3, 4), (4,)), _affine_ref, linear=True),
    Spec(F.affine, ((2, 3), (3, 4)), _affine_ref, linear=True, id="nobias"),
    Spec(F.affine, ((2, 3, 2), (6, 2, 2), (2, 2)), _affine_ref, linear=True, id="flatten"),
    Spec(
        F.affine,
        ((2, 2, 3), (3, 4), (4,)),
        _affine_ref,
        kwargs={"base_axis": 2},
        linear=True,
        id="base_axis2",
    ),
    Spec(
        F.affine,
        ((2, 2, 3), (6, 2)),
        _affine_ref,
        kwargs={"base_axis": -2},
        linear=True,
        id="base_axis_neg",
    ),
    Spec(F.batch_matmul, ((2, 2, 3), (2, 3, 4)), _bmm_ref, linear=True),
    Spec(
        F.batch_matmul,
        ((2, 3, 2), (2, 3, 4)),
        _bmm_ref,
        kwargs={"transpose_a": True},
        linear=True,
        id="ta",
    ),
    Spec(
        F.batch_matmul,
        ((2, 2, 3), (2, 4, 3)),
        _bmm_ref,
        kwargs={"transpose_b": True},
        linear=True,
        id="tb",
    ),
    Spec(
        F.batch_matmul,
        ((2, 3, 2), (1, 4, 3)),
        _bmm_ref,
        kwargs={"transpose_a": True, "transpose_b": True},
        linear=True,
        id="ta_tb_broadcast",
    ),
    Spec(F.batch_matmul, ((2, 1, 2, 3), (3, 3, 2)), _bmm_ref, linear=True, id="broadcast"),
    Spec(F.batch_matmul, ((2, 3), (3, 2)), _bmm_ref, linear=True, id="2d"),
    # inner size 1: an outer product, computed as a broadcast multiply
    Spec(F.batch_matmul, ((3, 1), (1, 4)), _bmm_ref, linear=True, id="outer"),
    Spec(
        F.batch_matmul,
        ((2, 1, 3), (1, 4, 1)),
        _bmm_ref,
        kwargs={"transpose_a": True, "transpose_b": True},
        linear=True,
        id="outer_ta_tb_broadcast",
    ),
    Spec(F.matmul, ((2, 3), (3, 4)), np.matmul, linear=True),
    Spec(F.matmul, ((3,), (2, 3, 4)), np.matmul, linear=True, id="vec_mat"),
    Spec(F.matmul, ((2, 2, 3), (3,)), np.matmul, linear=True, id="mat_vec"),
    Spec(F.matmul, ((3,), (3,)), np.matmul, linear=True, id="dot"),
    Spec(F.matmul, ((2, 1, 2, 3), (3, 3, 2)), np.matmul, linear=True, id="broadcast"),
    Spec(  # NNabla's call: the operands, then the subscripts as equation=
        F.einsum,
        ((2, 3), (3, 4)),
        lambda a, b, equation: np.einsum(equation, a, b),
        kwargs={"equation": "ij,jk->ik"},
        linear=True,
        id="equation",
    ),
    *(
        _einsum(s, *shapes, id=i)
        for s, shapes, i in [
            ("ij,jk->ik", ((2, 3), (3, 4)), "matmul"),
            ("ij,jk", ((2, 3), (3, 2)), "implicit"),
            ("ij->ji", ((2, 3),), "transpose"),
            ("ij->i", ((2, 3),), "sum"),
            ("i,j->ij", ((2,), (3,)), "outer"),
            ("i,i", ((3,), (3,)), "dot"),
            ("ii->i", ((3, 3),), "diagonal"),
            ("ii", ((3, 3),), "trace"),
            ("iij,j->ij", ((2, 2, 3), (3,)), "diag_mixed"),
            ("...ij,...jk->...ik", ((2, 2, 3), (3, 2)), "ellipsis"),
            ("ij,ij->ij", ((2, 1), (2, 3)), "broadcast"),
            ("bij,bjk,bkl->bil", ((2, 2, 3), (2, 3, 2), (2, 2, 2)), "three"),
            ("i,->i", ((3,), ()), "scalar"),
        ]
    ),
    Spec(F.batch_inv, (_near(3.0, (2, 3, 3)),), _inv_ref, ref_atol=1e-12),
    Spec(F.batch_inv, (_near(3.0, (3, 3)),), _inv_ref, id="single"),
    Spec(F.batch_det, (_near(3.0, (2, 3, 3)),), _det_ref, ref_rtol=1e-9),
    Spec(F.batch_det, (_near(-3.0, (2, 3, 3)),), _det_ref, ref_rtol=1e-9, id="negative"),
    Spec(F.batch_logdet, (_near(3.0, (2, 3, 3)),), _logdet_ref),
    Spec(F.batch_logdet, (_near(-3.0, (2, 3, 3)),), _logdet_ref, id="negative"),
    Spec(
        einsum_expand,
        ((3,),),
        lambda x, **k: np.diag(x),
        kwargs={"src": "i", "dst": "ii", "shape": (3, 3)},
        linear=True,
    ),
    Spec(
        einsum_expand,
        ((3,),),
        lambda x, **k: np.broadcast_to(x, (2, 3)),
        kwargs={"src": "j", "dst": "ij", "shape": (2, 3)},
        linear=True,
        id="broadcast",
    ),
    Spec(
        einsum_expand,
        ((2, 3),),
        _expand_ref,
        kwargs={"src": "ik", "dst": "iikj", "shape": (2, 2, 3, 2)},
        linear=True,
        id="diag_broadcast",
    ),
]


def _cnear(scale: float, shape: tuple[int, ...]) -> Callable[[np.random.Generator], np.ndarray]:
    """Batches of ``scale * I`` plus complex noise: far from singular."""
    return lambda rng: (
        scale * np.eye(shape[-1])
        + rng.uniform(-0.5, 0.5, size=shape)
        + 1j * rng.uniform(-0.5, 0.5, size=shape)
    )


def _real(shape: tuple[int, ...]) -> Callable[[np.random.Generator], np.ndarray]:
    """A real operand in a complex row (drawn by a callable, so it stays real)."""
    return lambda rng: rng.uniform(-2.0, 2.0, size=shape)


def _clogdet_ref(x: np.ndarray) -> np.ndarray:
    return np.log(np.abs(np.linalg.det(x)))


# complex rows: the products are holomorphic (their real rules read with complex numbers,
# ``gA = gy B^T``, no conjugate); log|det| is real with the gradient inv(A)^T
_PRODUCTS = (F.affine, F.batch_matmul, F.matmul, F.einsum)
SPECS += [
    *[replace(s, complex=True) for s in SPECS if getattr(s.fn, "__name__", "") == "einsum"][:3],
    *[replace(s, complex=True) for s in SPECS if s.fn in _PRODUCTS][:12],
    Spec(
        F.affine, ((2, 3), _real((3, 4)), (4,)), _affine_ref, linear=True, id="real_w", complex=True
    ),
    Spec(F.batch_inv, (_cnear(3.0, (2, 3, 3)),), np.linalg.inv, complex=True),
    Spec(F.batch_det, (_cnear(3.0, (2, 3, 3)),), np.linalg.det, ref_rtol=1e-9, complex=True),
    Spec(F.batch_logdet, (_cnear(3.0, (2, 3, 3)),), _clogdet_ref, complex=True),
    Spec(F.batch_logdet, (_cnear(-3.0, (2, 3, 3)),), _clogdet_ref, id="negative", complex=True),
]
