"""Linear algebra II, batched over leading axes: solves, factorizations, trace, products.

``solve``, ``solve_triangular``, ``cholesky``, ``eigh``, ``svd`` and ``pinv``
are primitives whose rules are written with themselves and ``batch_matmul``,
so every order of derivative is exact (the factorization rules assume
distinct eigenvalues / singular values and constant rank). ``trace``,
``outer`` and ``tensordot`` are compositions.

``cholesky`` and ``eigh`` read only the lower triangle of ``a`` (as numpy and
LAPACK do), and their gradients are the derivatives of exactly that: the
upper triangle gets zero and the strictly lower part gets the symmetric
gradient twice. For a symmetrised input ``(a + a^T) / 2`` this gives the
usual symmetric gradient.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import array_module
from hodiff.engine.function import Flags, Function, Slots, float_dtype
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import reduction as _red
from hodiff.functions.indexing import as_ints, shape_of
from hodiff.functions.linalg import batch_matmul, einsum
from hodiff.functions.shaping import astype, matrix_diag, matrix_diag_part, trilu

__all__ = [
    "cholesky",
    "eigh",
    "outer",
    "pinv",
    "solve",
    "solve_triangular",
    "svd",
    "tensordot",
    "trace",
]

Spec = list[tuple[tuple[int, ...], Any]]


def _square(name: str, a: Variable) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"{name}: a of shape {a.shape} must be a batch of square matrices (..., N, N)"
        )
    return a.shape[-1]


def _mt(x: Any) -> Any:
    """Swaps the last two axes."""
    nd = len(x.shape)
    return _array.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def _lower_read(s: Any) -> Any:
    """The gradient w.r.t. a matrix of which only the lower triangle is read, from the
    (unsymmetrised) gradient ``s`` w.r.t. a symmetric matrix: ``tril(s + s^T) - diag(s)``.
    """
    return trilu(s + _mt(s), 0, upper=False) - matrix_diag(matrix_diag_part(s))


def _float(y: Any) -> Any:
    return y if y.dtype.kind in "fc" else y.astype(np.float64)


class _Solve(Function, register=False, follows_shape=True, follows_rank=True):
    """``y = op(a)^-1 b`` for ``a`` (..., N, N) and ``b`` (..., N, K), batch axes broadcast."""

    need_outputs = True
    # stacks of matrices: leading axes are batch axes and broadcast like elementwise operands
    batch_rule = _batching.elementwise

    def __init__(self, *, transpose_a: bool = False) -> None:
        self.transpose_a = bool(transpose_a)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        a, b = inputs
        n = _square(self.name, a)
        if b.ndim < 2 or b.shape[-2] != n:
            raise ValueError(
                f"{self.name}: b of shape {b.shape} must be (..., {n}, K) for a of shape {a.shape}"
            )
        try:
            batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        except ValueError:
            raise ValueError(
                f"{self.name}: the batch axes of a {a.shape} and b {b.shape} cannot be broadcast"
            ) from None
        dtype = np.result_type(a.dtype, b.dtype)
        return [((*batch, n, b.shape[-1]), dtype if dtype.kind == "c" else float_dtype(dtype))]

    def matrix(self, xp: Any, a: Any) -> Any:
        return a

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        a, b = inputs
        xp = array_module(a)
        a = self.matrix(xp, a)
        if self.transpose_a:
            a = a.swapaxes(-1, -2)
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, batch + a.shape[-2:])
        b = xp.broadcast_to(b, batch + b.shape[-2:])
        outputs[0] = _float(xp.linalg.solve(a, b))

    def again(self, transpose_a: bool) -> _Solve:
        return type(self)(transpose_a=transpose_a)

    def read(self, ga: Any) -> Any:
        return ga

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # y = A^-1 b: gb = A^-T gy, gA = -gb y^T (A = op(a); transposed back when op transposes)
        y, gy = outputs[0].data, outputs[0].grad
        gb = self.again(not self.transpose_a)(inputs[0].data, gy)
        if prop_down[0]:
            if self.transpose_a:
                ga = batch_matmul(y, gb, transpose_b=True)
            else:
                ga = batch_matmul(gb, y, transpose_b=True)
            inputs[0].store(-self.read(ga), accum[0])
        if prop_down[1]:
            inputs[1].store(gb, accum[1])


class Solve(_Solve):
    complex_values = "holomorphic"
    pass


class SolveTriangular(_Solve):
    """``_Solve`` on the lower (``lower``) or upper triangle of ``a``; the rest is not read."""

    def __init__(self, *, lower: bool = True, transpose_a: bool = False) -> None:
        super().__init__(transpose_a=transpose_a)
        self.lower = bool(lower)

    def matrix(self, xp: Any, a: Any) -> Any:
        return xp.tril(a) if self.lower else xp.triu(a)

    def again(self, transpose_a: bool) -> _Solve:
        return SolveTriangular(lower=self.lower, transpose_a=transpose_a)

    def read(self, ga: Any) -> Any:
        return trilu(ga, 0, upper=not self.lower)


class Cholesky(Function, follows_shape=True, follows_rank=True):
    need_inputs = False
    need_outputs = True
    batch_rule = _batching.elementwise  # stacks of matrices (see _Solve)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        _square(self.name, inputs[0])
        return [(inputs[0].shape, float_dtype(inputs[0].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = _float(array_module(inputs[0]).linalg.cholesky(inputs[0]))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # A = L L^T: S = L^-T Phi(L^T gL) L^-1 (Phi: lower triangle, halved diagonal);
        # a is read through its lower triangle: ga = tril(S + S^T) - diag(S)
        if prop_down[0]:
            lo, gl = outputs[0].data, outputs[0].grad
            m = batch_matmul(lo, gl, transpose_a=True)
            phi = trilu(m, -1, upper=False) + matrix_diag(matrix_diag_part(m)) * 0.5
            x = SolveTriangular(lower=True, transpose_a=True)(lo, phi)  # L^-T Phi
            s = _mt(SolveTriangular(lower=True, transpose_a=True)(lo, _mt(x)))  # x L^-1
            inputs[0].store(_lower_read(s), accum[0])


def _column_signs(xp: Any, v: Any) -> Any:
    """``(..., 1, K)`` signs that make the largest-magnitude entry of each column of ``v``
    positive: one convention for numpy and cupy (LAPACK and cuSOLVER pick different signs).
    The sign is constant where it is differentiable, so the rules hold as they are.
    """
    i = xp.argmax(xp.abs(v), axis=-2)[..., None, :]
    return xp.where(xp.take_along_axis(v, i, axis=-2) < 0, -1.0, 1.0).astype(v.dtype)


class Eigh(Function, follows_shape=True, follows_rank=True):
    n_outputs = 2
    need_inputs = False
    need_outputs = True
    batch_rule = _batching.elementwise  # stacks of matrices (see _Solve)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        a = inputs[0]
        _square(self.name, a)
        dtype = float_dtype(a.dtype)
        return [(a.shape[:-1], dtype), (a.shape, dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        w, v = xp.linalg.eigh(inputs[0])
        outputs[0], outputs[1] = _float(w), _float(v * _column_signs(xp, v))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # G = V (diag(gw) + F o (V^T gV)) V^T, F_ij = 1 / (w_j - w_i) off the diagonal;
        # a is read through its lower triangle: ga = tril(G + G^T) - diag(G)
        if prop_down[0]:
            w, v = outputs[0].data, outputs[1].data
            gw, gv = outputs[0].grad, outputs[1].grad
            f = _gap_inverse(w, w)
            inner = matrix_diag(gw) + f * batch_matmul(v, gv, transpose_a=True)
            g = batch_matmul(batch_matmul(v, inner), v, transpose_b=True)
            inputs[0].store(_lower_read(g), accum[0])


def _gap_inverse(p: Any, q: Any) -> Any:
    """``F_ij = 1 / (q_j - p_i)``, and 0 where ``q_j == p_i`` exactly (the diagonal, ties).

    At an exact tie (a repeated eigenvalue or singular value) the vector part of the rule
    is dropped: exact for a loss of the values only; through the vectors of a repeated
    value the derivative does not exist.
    """
    shape = tuple(p.shape)
    k = shape[-1]
    d = _array.reshape(q, (*shape[:-1], 1, k)) - _array.reshape(p, (*shape[:-1], k, 1))
    tie = _array.equal(d, 0.0)
    return _array.where(tie, 0.0, 1.0 / _array.where(tie, 1.0, d))


class Svd(Function, follows_shape=True, follows_rank=True):
    need_inputs = True  # with compute_uv=False the rule recomputes U and V from a
    need_outputs = True
    batch_rule = _batching.elementwise  # stacks of matrices (see _Solve)

    def __init__(self, *, full_matrices: bool = True, compute_uv: bool = True) -> None:
        self.full_matrices = bool(full_matrices)
        self.compute_uv = bool(compute_uv)
        self.n_outputs = 3 if self.compute_uv else 1

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        a = inputs[0]
        if a.ndim < 2:
            raise ValueError(f"svd: a of shape {a.shape} must be (..., M, N)")
        m, n = a.shape[-2:]
        k = min(m, n)
        dt = float_dtype(a.dtype)
        s = ((*a.shape[:-2], k), dt)
        if not self.compute_uv:
            return [s]
        mu, nv = (m, n) if self.full_matrices else (k, k)
        return [((*a.shape[:-2], m, mu), dt), s, ((*a.shape[:-2], nv, n), dt)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        if not self.compute_uv:
            outputs[0] = _float(xp.linalg.svd(inputs[0], compute_uv=False))
            return
        u, s, vh = xp.linalg.svd(inputs[0], full_matrices=self.full_matrices)
        # the sign convention of eigh on u's columns; each vh row flips with its u column
        su = _column_signs(xp, u)
        sv = xp.swapaxes(_column_signs(xp, xp.swapaxes(vh, -1, -2)), -1, -2)
        k = s.shape[-1]
        sv[..., :k, :] = xp.swapaxes(su[..., :, :k], -1, -2)
        outputs[0], outputs[1], outputs[2] = _float(u * su), _float(s), _float(vh * sv)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        if not prop_down[0]:
            return
        m, n = inputs[0].shape[-2:]
        if not self.compute_uv:
            # ds = diag(U^T dA V)  =>  gA = U diag(gs) V^T, with U, V from the reduced svd
            a = inputs[0].data
            u, _, vh = Svd(full_matrices=False)(a)
            gs = outputs[0].grad
            gx = batch_matmul(u * _array.reshape(gs, (*gs.shape[:-1], 1, gs.shape[-1])), vh)
            inputs[0].store(gx, accum[0])
            return
        if self.full_matrices and m != n:
            raise NotImplementedError(
                f"svd: no gradient for full_matrices=True with a non-square a of shape "
                f"{inputs[0].shape} (the extra singular vectors are not unique); use "
                "full_matrices=False"
            )
        inputs[0].store(_svd_grad(outputs, m, n), accum[0])


def _svd_grad(outputs: Slots, m: int, n: int) -> Any:
    """The reduced-SVD rule (Townsend 2016): with F_ij = 1 / (s_j^2 - s_i^2),
    gA = U [(F o (U^T gU - gU^T U)) S + diag(gs) + S (F o (V^T gV - gV^T V))] V^T
         + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T).
    """
    u, s, vh = (o.data for o in outputs)
    gu, gs, gvh = (o.grad for o in outputs)
    k = s.shape[-1]
    lead = tuple(s.shape[:-1])
    row = _array.reshape(s, (*lead, 1, k))  # s_j along columns
    col = _array.reshape(s, (*lead, k, 1))  # s_i along rows
    f = _gap_inverse(s * s, s * s)
    utgu = batch_matmul(u, gu, transpose_a=True)
    vtgv = batch_matmul(vh, gvh, transpose_b=True)  # V^T gV with V = vh^T, gV = gvh^T
    t = (f * (utgu - _mt(utgu))) * row + matrix_diag(gs) + col * (f * (vtgv - _mt(vtgv)))
    ga = batch_matmul(batch_matmul(u, t), vh)
    if m > n:  # (I - U U^T) gU S^-1 V^T
        r = gu - batch_matmul(u, batch_matmul(u, gu, transpose_a=True))
        ga = ga + batch_matmul(r / row, vh)
    elif m < n:  # U S^-1 gV^T (I - V V^T), gV^T = gvh
        r = gvh - batch_matmul(batch_matmul(gvh, vh, transpose_b=True), vh)
        ga = ga + batch_matmul(u / row, r)
    return ga


class Pinv(Function, follows_shape=True, follows_rank=True):
    need_outputs = True
    batch_rule = _batching.elementwise  # stacks of matrices (see _Solve)

    def __init__(self, *, rcond: float = 1e-15) -> None:
        self.rcond = float(rcond)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        a = inputs[0]
        if a.ndim < 2:
            raise ValueError(f"pinv: a of shape {a.shape} must be (..., M, N)")
        return [((*a.shape[:-2], a.shape[-1], a.shape[-2]), float_dtype(a.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = _float(array_module(inputs[0]).linalg.pinv(inputs[0], self.rcond))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # constant rank (Golub & Pereyra): gA = -P^T gP P^T + (I - A P)^T gP^T P P^T
        #                                       + P^T P gP^T (I - P A)^T
        if prop_down[0]:
            # The projectors are applied transposed, (I - A P)^T X = X - P^T (A^T X) and
            # Y (I - P A)^T = Y - (Y A^T) P^T (equal: A P and P A are symmetric), which keeps
            # the second derivative's rounding at eps cond(A) where the untransposed
            # X - A (P X) gave eps cond(A)^2 (measured against 60-digit arithmetic:
            # tests/test_pinv_accuracy.py)
            a, p, gp = inputs[0].data, outputs[0].data, outputs[0].grad
            t1 = batch_matmul(batch_matmul(p, gp, transpose_a=True), p, transpose_b=True)
            t2 = batch_matmul(gp, batch_matmul(p, p, transpose_b=True), transpose_a=True)
            t2 = t2 - batch_matmul(p, batch_matmul(a, t2, transpose_a=True), transpose_a=True)
            t3 = batch_matmul(batch_matmul(p, p, transpose_a=True), gp, transpose_b=True)
            t3 = t3 - batch_matmul(batch_matmul(t3, a, transpose_b=True), p, transpose_b=True)
            # At full rank (rank M: A P = I; rank N: P A = I) a projector term is zero, but
            # computed it is rounding ~ eps cond(A), amplified by each further derivative:
            # the term is multiplied by 0 where the rank (as pinv cuts it) is full, so every
            # order is the derivative of -P^T gP P^T there (batch_inv's rule when M = N).
            m, n = a.shape[-2], a.shape[-1]
            below = _rank_below(a, self.rcond, min(m, n))
            if m <= n:
                t2 = t2 * below
            if n <= m:
                t3 = t3 * below
            inputs[0].store(t2 + t3 - t1, accum[0])


def _rank_below(a: Any, rcond: float, k: int) -> Any:
    """``1`` where the rank of the matrix ``a[...]`` is below ``k``, else ``0``: (..., 1, 1).

    The rank is numpy ``pinv``'s: the number of singular values above ``rcond * max(s)``.
    Not differentiable (comparisons cut the graph): the rank is locally constant where the
    rule holds.
    """
    s = svd(a, full_matrices=False, compute_uv=False)
    cutoff = _red.max(s, axis=-1, keepdims=True) * rcond
    kept = _red.sum(astype(s > cutoff, s.dtype), axis=-1, keepdims=True)
    below = astype(kept < k - 0.5, s.dtype)
    return _array.reshape(below, (*below.shape, 1))


# ---------------------------------------------------------------- wrappers
@traced
def solve(a: Any, b: Any) -> Variable:
    """``y = a^-1 b``, the solution of ``a y = b`` (numpy's ``linalg.solve``).

    Args:
        a: (..., N, N) nonsingular matrices.
        b: (..., N, K) right-hand sides (batch axes broadcast with ``a``'s), or (N,).

    Returns:
        (..., N, K), or (..., N) for a 1-D ``b``. The gradients are ``gb = a^-T gy`` and
        ``ga = -gb y^T``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0])).d
    array([1. , 0.5])
    """
    if len(shape_of(b)) == 1:
        n = shape_of(b)[0]
        y = Solve()(a, _array.reshape(b, (n, 1)))
        return _array.reshape(y, y.shape[:-1])
    return Solve()(a, b)


@traced
def solve_triangular(a: Any, b: Any, lower: bool = True) -> Variable:
    """``y = T^-1 b`` for ``T`` the lower (or upper) triangle of ``a`` (``solve_triangular``).

    The other triangle is not read and gets no gradient (scipy's ``solve_triangular``).

    Shapes as :func:`solve`: ``a`` (..., N, N), ``b`` (..., N, K) or (N,).

    >>> import numpy as np, hodiff.functions as F
    >>> F.solve_triangular(np.array([[2.0, 9.0], [1.0, 1.0]]), np.array([2.0, 2.0])).d
    array([1., 1.])
    """
    fn = SolveTriangular(lower=lower)
    if len(shape_of(b)) == 1:
        y = fn(a, _array.reshape(b, (shape_of(b)[0], 1)))
        return _array.reshape(y, y.shape[:-1])
    return fn(a, b)


@traced
def cholesky(a: Any) -> Variable:
    """Lower Cholesky factor ``L`` of symmetric positive-definite ``a = L L^T``, (..., N, N).

    Only the lower triangle of ``a`` is read (as numpy); the gradient is the derivative of
    exactly that (zero on the strict upper triangle): for a symmetric gradient, call it on
    ``(a + a^T) / 2``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]])).d
    array([[2., 0.],
           [1., 2.]])
    """
    return Cholesky()(a)


@traced
def eigh(a: Any) -> tuple[Variable, Variable]:
    """Eigen-decomposition ``a = v diag(w) v^T`` of symmetric ``a`` -> ``(w, v)``, batched.

    ``w`` (..., N) ascending, ``v`` (..., N, N) with the eigenvectors as columns (numpy's
    ``linalg.eigh``; the lower triangle of ``a`` is read).

    Each eigenvector's sign is fixed by a convention (its largest-magnitude entry is
    positive), the same on numpy and cupy. Derivatives assume distinct eigenvalues (and no
    tie for the largest-magnitude entry of a vector). At exactly repeated eigenvalues the
    gradient of a loss of ``w`` alone is still exact (the eigenvector terms of the tie are
    dropped).

    >>> import numpy as np, hodiff.functions as F
    >>> F.eigh(np.array([[2.0, 1.0], [1.0, 2.0]]))[0].d
    array([1., 3.])
    """
    return Eigh()(a)


@traced
def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """Singular value decomposition ``a = u diag(s) vh`` (numpy's ``linalg.svd``), batched.

    Args:
        a: (..., M, N).
        full_matrices: ``u`` (..., M, M) and ``vh`` (..., N, N) if True, else (..., M, K),
            (..., K, N) with ``K = min(M, N)``. Gradients need ``full_matrices=False`` unless
            ``a`` is square (the extra singular vectors are not unique).
        compute_uv: return ``(u, s, vh)``; else ``s`` only.

    Signs follow ``eigh``'s convention on the columns of ``u`` (each row of ``vh`` flips with
    its column), the same on numpy and cupy. Derivatives assume distinct nonzero singular
    values (at exactly repeated values the gradient of a loss of ``s`` alone is still exact).

    >>> import numpy as np, hodiff.functions as F
    >>> F.svd(np.array([[3.0, 0.0], [0.0, -2.0]]), compute_uv=False).d
    array([3., 2.])
    """
    return Svd(full_matrices=full_matrices, compute_uv=compute_uv)(a)


@traced
def pinv(a: Any, rcond: float = 1e-15) -> Variable:
    """Moore-Penrose pseudo-inverse ``P = a^+``, (..., M, N) -> (..., N, M), batched.

    Numpy's ``linalg.pinv``: singular values below ``rcond * max(s)`` are dropped.

    Derivatives hold where the rank is locally constant (e.g. full rank):
    ``gA = -P^T gP P^T + (I - A P) gP^T P P^T + P^T P gP^T (I - P A)``. At full rank
    the projector ``I - A P`` (rank M) or ``I - P A`` (rank N) is zero and its term is
    dropped (the rank as ``pinv`` cuts it: one more SVD in the backward pass), so
    derivatives of every order keep their digits (for square ``a``, those of
    :func:`batch_inv`).

    >>> import numpy as np, hodiff.functions as F
    >>> F.pinv(np.array([[2.0, 0.0]])).d
    array([[0.5],
           [0. ]])
    """
    return Pinv(rcond=rcond)(a)


@traced
def trace(x: Any) -> Variable:
    """Trace of the last two axes: ``y[...] = sum_i x[..., i, i]``, (..., N, N) -> (...).

    >>> import numpy as np, hodiff.functions as F
    >>> F.trace(np.arange(4.0).reshape(2, 2)).d
    array(3.)
    """
    return _red.sum(matrix_diag_part(x), axis=-1)


@traced
def outer(a: Any, b: Any) -> Variable:
    """Batched outer product ``y[..., i, j] = a[..., i] * b[..., j]``.

    For 1-D inputs numpy's ``outer``; leading axes broadcast.

    >>> import numpy as np, hodiff.functions as F
    >>> F.outer(np.array([1.0, 2.0]), np.array([3.0, 4.0])).d
    array([[3., 4.],
           [6., 8.]])
    """
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        raise ValueError(f"outer: a of shape {sa} and b of shape {sb} need at least 1 dim")
    return _array.reshape(a, (*sa, 1)) * _array.reshape(b, (*sb[:-1], 1, sb[-1]))


@traced
def tensordot(a: Any, b: Any, axes: Any = 2) -> Variable:
    """Sum of products ``y = sum a[..., k] b[k, ...]`` over paired axes (numpy's ``tensordot``).

    ``axes=n`` contracts the last ``n`` axes of ``a`` with the first ``n`` of ``b``;
    ``axes=(axes_a, axes_b)`` pairs them.

    ``y.shape`` is ``a``'s free axes followed by ``b``'s (composed with ``einsum``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.tensordot(np.ones((2, 3)), np.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    sa, sb = shape_of(a), shape_of(b)
    ia, ib = _paired_axes(axes, sa, sb)
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in sa]
    lb = [next(letters) for _ in sb]
    for i, j in zip(ia, ib, strict=True):
        lb[j] = la[i]
    out = [la[i] for i in range(len(sa)) if i not in ia] + [
        lb[j] for j in range(len(sb)) if j not in ib
    ]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)


def _paired_axes(
    axes: Any, sa: tuple[int, ...], sb: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """tensordot's ``axes`` as the contracted axes of ``a`` and of ``b`` (non-negative),
    pairwise of equal sizes.
    """
    if isinstance(axes, int | np.integer):
        if not 0 <= axes <= min(len(sa), len(sb)):
            raise ValueError(f"tensordot: axes={axes} out of range for {sa} and {sb}")
        ia, ib = tuple(range(len(sa) - axes, len(sa))), tuple(range(int(axes)))
    else:
        pa, pb = axes
        ia = as_ints("tensordot", "axes", (pa,) if isinstance(pa, int | np.integer) else pa)
        ib = as_ints("tensordot", "axes", (pb,) if isinstance(pb, int | np.integer) else pb)
        ia = tuple(i % len(sa) for i in ia)
        ib = tuple(i % len(sb) for i in ib)
    if len(ia) != len(ib) or any(sa[i] != sb[j] for i, j in zip(ia, ib, strict=True)):
        raise ValueError(f"tensordot: axes {axes} do not pair equal sizes of {sa} and {sb}")
    return ia, ib
