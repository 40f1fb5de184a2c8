"""hd.vmap of matrix products with one operand shared: one GEMM over the folded batch.

The batch rule of ``batch_matmul`` folds the batch axis into the rows of the batched
operand when the other is shared (``A @ b_i`` with ``b_i`` a column: ``b_i^T A^T``), as
JAX's ``dot_general`` batching does. Values are checked against numpy's products example by
example, first and second derivatives against the unbatched graph run in a loop.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine import api

RNG = np.random.default_rng(7)
B = 5

#: (a's per-example shape or None: shared, b's, transpose_a, transpose_b, folds into one GEMM)
CASES = [
    ((3, 4), None, False, False, True),  # shared b: a's rows
    ((4, 1), None, True, False, True),  # op(a_i) = a_i^T is one row
    ((4, 3), None, True, False, False),  # op(a_i) has 3 rows of strided data: stacked GEMMs
    (None, (4, 1), False, False, True),  # A @ b_i, a column: b's rows
    (None, (1, 3), True, True, True),  # A^T @ b_i^T
    (None, (4, 2), False, False, False),  # b_i of 2 columns: stacked GEMMs
    ((2, 3, 4), None, False, True, True),  # more per-example axes: all in the rows
]
SHARED_A = (3, 4)
SHARED_B = (4, 2)


def _operands(case):
    sa, sb, ta, tb, _ = case
    a_shared = SHARED_A if not ta else SHARED_A[::-1]
    b_shared = SHARED_B if not tb else SHARED_B[::-1]
    a = RNG.standard_normal((B, *sa) if sa else a_shared)
    b = RNG.standard_normal((B, *sb) if sb else b_shared)
    if sa is None:  # A (p, q) with op(b_i) (q, r)
        q = sb[-1] if tb else sb[-2]
        a = RNG.standard_normal((5, q) if not ta else (q, 5))
    return a, b, (0 if sa else None), (0 if sb else None)


def _product(ta, tb):
    def f(a, b):
        return F.batch_matmul(a, b, transpose_a=ta, transpose_b=tb)

    return f


def _np_op(x, t):
    return np.swapaxes(x, -1, -2) if t else x


@pytest.mark.parametrize("case", CASES)
def test_vmap_of_matrix_product_equals_numpy(case) -> None:
    a, b, axa, axb = _operands(case)
    ta, tb = case[2], case[3]
    y = hd.vmap(_product(ta, tb), in_axes=(axa, axb))(a, b)
    for i in range(B):
        ai = a[i] if axa is not None else a
        bi = b[i] if axb is not None else b
        np.testing.assert_allclose(y.d[i], _np_op(ai, ta) @ _np_op(bi, tb), rtol=1e-13)


@pytest.mark.parametrize("case", CASES)
def test_fold_is_one_matrix_product(case) -> None:
    """Where one operand is shared and the other's rows are contiguous, the batched graph
    holds one product of 2-D operands (one GEMM) instead of a stack of products.
    """
    a, b, axa, axb = _operands(case)
    ta, tb, folds = case[2], case[3], case[4]
    with hd.auto_forward(False):
        y = hd.vmap(_product(ta, tb), in_axes=(axa, axb))(a, b)
    prods = [f for f in api.topological_order([y]) if f.name == "batch_matmul"]
    assert len(prods) == 1
    assert all(len(x.shape) == 2 for x in prods[0].inputs) is folds


def _weighted(ta, tb, w):
    def s(a, b):
        return F.sum(F.tanh(F.batch_matmul(a, b, transpose_a=ta, transpose_b=tb)) * w)

    return s


@pytest.mark.parametrize("case", CASES)
def test_derivatives_of_vmap_equal_the_loop(case) -> None:
    """First and second derivatives through the batched product (w.r.t. both operands)
    equal those of the unbatched products summed over a loop of the examples.
    """
    a, b, axa, axb = _operands(case)
    ta, tb = case[2], case[3]
    ex = np.asarray(
        _product(ta, tb)(
            hd.Variable.from_array(a[0] if axa is not None else a),
            hd.Variable.from_array(b[0] if axb is not None else b),
        ).d
    )
    w = RNG.standard_normal(ex.shape)
    va, vb = RNG.standard_normal(a.shape), RNG.standard_normal(b.shape)

    def derivatives(total):
        xa = hd.Variable.from_array(a, need_grad=True)
        xb = hd.Variable.from_array(b, need_grad=True)
        ga, gb = hd.grad(total(xa, xb), [xa, xb], create_graph=True)
        hv = hd.grad(F.sum(ga * va) + F.sum(gb * vb), [xa, xb])
        return [ga.d, gb.d, hv[0].d, hv[1].d]

    def batched(xa, xb):
        return F.sum(hd.vmap(_weighted(ta, tb, w), in_axes=(axa, axb))(xa, xb))

    def looped(xa, xb):
        terms = [
            _weighted(ta, tb, w)(xa[i] if axa is not None else xa, xb[i] if axb is not None else xb)
            for i in range(B)
        ]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total

    for got, want in zip(derivatives(batched), derivatives(looped), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_hessian_of_a_product_inside_jit_is_one_gemm_per_product() -> None:
    """``hd.hessian`` of ``sum(logsumexp(A x))`` compiled: every matrix product of the
    batched graph has 2-D operands, and the Hessian equals the closed form
    ``A^T (diag(p) - p p^T) A`` with ``p = softmax(A x)``.
    """
    A = RNG.standard_normal((7, 4))
    x = RNG.standard_normal(4)
    a = hd.Variable.from_array(A)
    g = hd.jit(lambda z: hd.hessian(lambda u: F.sum(F.logsumexp(a @ u)), z), backend="replay")
    h = g(x)
    e = np.exp(A @ x - np.max(A @ x))
    p = e / e.sum()
    np.testing.assert_allclose(h, A.T @ (np.diag(p) - np.outer(p, p)) @ A, rtol=1e-12, atol=1e-14)
    built = next(iter(g.cache.values()))[0]
    prods = [s for s in built.prog.steps if s.name == "batch_matmul"]
    assert prods
    assert all(len(built.prog.specs[i][0]) == 2 for s in prods for i in s.ins)
