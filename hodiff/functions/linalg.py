"""Linear algebra: affine, matrix products, einsum, batched inverse and determinants.

The products are paired with their transposes: the gradient of a matrix
product is a matrix product (``batch_matmul`` with transpose flags, so no
transpose is ever materialized) and the gradient of an einsum is an einsum, so
every order of derivative runs on BLAS. The batched inverse/determinant rules
are written with ``batch_matmul``, ``batch_inv`` and ``einsum``.
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine.context import RAW, STATE, array_module
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.functions import array as _array
from hodiff.functions import math as _math
from hodiff.functions import reduction as _reduction
from hodiff.grad_functions import linalg as _grad

__all__ = [
    "affine",
    "batch_det",
    "batch_inv",
    "batch_logdet",
    "batch_matmul",
    "einsum",
    "matmul",
]

Spec = list[tuple[tuple[int, ...], Any]]


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _as_float(y: Any) -> Any:
    """``y`` itself when it is a float or complex array, else ``y`` as float64 (int/bool
    operands).
    """
    return y if y.dtype.kind in "fc" else y.astype(np.float64)


def value_dtype(dtype: Any) -> np.dtype[Any]:
    """The dtype of a product of operands of ``dtype`` (numpy's result type): a float or
    complex dtype stays, ints and bools give float64.
    """
    dtype = np.dtype(dtype)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def pair_real(dtype: Any) -> np.dtype[Any]:
    """The real dtype paired with ``dtype``: float32 for complex64 (and float32), float64 for
    complex128 and the rest (a real result of complex operands: ``log|det|``).
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype
    return np.dtype(np.float32) if dtype == np.complex64 else np.dtype(np.float64)


def _outer(a: Any, b: Any) -> Any:
    """``a @ b`` for ``a`` of shape ``(..., p, 1)`` and ``b`` of shape ``(..., 1, r)`` (batch
    axes broadcast): numpy's einsum writes each row in one pass, about 30% faster than the
    broadcast multiply (whose inner loop restarts every ``r`` elements); the products are the
    same, bitwise. Other array modules multiply.
    """
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return np.einsum("...i,...j->...ij", a[..., 0], b[..., 0, :])
    return a * b


def _blas_ready(a: Any) -> Any:
    """``a``, or a contiguous copy when BLAS cannot read its matrices as they are.

    numpy hands a matrix to BLAS only when one of its two strides is the item size (a
    transposed view qualifies); any other layout, such as the zero strides of a broadcast
    gradient ``(N, 1)`` from a ``mean``, falls back to a loop 10x slower than the copy.
    """
    if a.ndim < 2:
        return a
    s0, s1 = a.strides[-2:]
    n0, n1 = a.shape[-2:]
    item = a.itemsize
    if (s1 == item and s0 >= n1 * item) or (s0 == item and s1 >= n0 * item):
        return a
    return array_module(a).ascontiguousarray(a)


def _product(a: Any, b: Any) -> Any:
    """``a @ b`` of two arrays (transposes already applied as views), as a float array."""
    if a.shape[-1] == 1:  # an outer product: 4x faster than GEMM
        return _as_float(_outer(a, b))
    return _as_float(_blas_ready(a) @ _blas_ready(b))


#: a bias gradient ``sum_n gy[n]`` of an (N, M) ``gy`` is a GEMV ``ones(N) @ gy`` from this
#: many rows (and M >= 2): numpy's sum over a leading axis is 2x (256 x 256) to 15x (4096 x 2)
#: slower there, and faster on fewer rows (one call's overhead) or one column (contiguous)
_GEMV_SUM_ROWS = 64


def _sum_rows(gy: Any) -> Any:
    """``gy.sum(axis=0)`` of a 2-D array; a GEMV for a tall C-contiguous float numpy array."""
    if (
        type(gy) is np.ndarray
        and gy.shape[0] >= _GEMV_SUM_ROWS
        and gy.shape[1] >= 2
        and gy.flags.c_contiguous
        and gy.dtype.kind == "f"
    ):
        return np.ones(gy.shape[0], dtype=gy.dtype) @ gy
    return gy.sum(axis=0, dtype=value_dtype(gy.dtype))


def _to_shape(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` reshaped to ``shape``; no node at all when it already has it."""
    return x if tuple(x.shape) == shape else _array.reshape(x, shape)


# ---------------------------------------------------------------- affine
def _affine_sizes(x: Any, w: Any, base_axis: int) -> tuple[int, int, int]:
    """(N, K, M): x is used as an (N, K) matrix and w as a (K, M) one."""
    n = math.prod(x.shape[:base_axis])
    k = math.prod(x.shape[base_axis:])
    m = math.prod(w.shape[1:])
    return n, k, m


class Affine(Function, follows_shape=True):
    """``y = x w + b`` with x flattened to ``(prod(x.shape[:base_axis]), -1)``."""

    complex_values = "holomorphic"
    need_inputs = (0, 1)
    taylor = "multilinear"
    linear_in = (0, 1)  # and a bias

    def __init__(self, *, base_axis: int = 1) -> None:
        if isinstance(base_axis, bool) or not isinstance(base_axis, int | np.integer):
            raise TypeError(f"affine: base_axis must be an int, got {type(base_axis).__name__}")
        self.base_axis = int(base_axis)

    def _axis(self, ndim: int) -> int:
        return self.base_axis + ndim if self.base_axis < 0 else self.base_axis

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        x, w = inputs[0], inputs[1]
        ba = self._axis(x.ndim)
        if not 0 <= ba < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(
                f"affine: base_axis {self.base_axis} is out of range for x of shape {x.shape}"
            )
        if w.ndim < 1:
            raise ValueError(f"affine: w of shape {w.shape} must have at least 1 dimension")
        if math.prod(x.shape[ba:]) != w.shape[0]:
            raise ValueError(
                f"affine: x of shape {x.shape} and w of shape {w.shape}: "
                f"prod(x.shape[{ba}:]) = {math.prod(x.shape[ba:])} must equal "
                f"w.shape[0] = {w.shape[0]}"
            )
        if len(inputs) == 3 and inputs[2].shape != w.shape[1:]:
            raise ValueError(
                f"affine: b of shape {inputs[2].shape} must have shape w.shape[1:] = "
                f"{w.shape[1:]} (w of shape {w.shape})"
            )
        dtype = x.dtype
        if dtype.kind != "f" or w.dtype != dtype or (len(inputs) == 3 and inputs[2].dtype != dtype):
            dtype = value_dtype(np.result_type(*(v.dtype for v in inputs)))
        return [(x.shape[:ba] + w.shape[1:], dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, w = inputs[0], inputs[1]
        if x.ndim == 2 and w.ndim == 2 and self.base_axis in (1, -1):  # the common case
            y = _as_float(_blas_ready(x) @ _blas_ready(w))  # one GEMM
            if len(inputs) == 3:
                b = inputs[2]
                if b.dtype == y.dtype:
                    y += b  # y is ours: add the bias in place
                else:
                    y = y + b  # numpy's promotion decides the dtype
            outputs[0] = y
            return
        ba = self._axis(x.ndim)
        n, k, m = _affine_sizes(x, w, ba)
        y = _as_float(_blas_ready(x.reshape(n, k)) @ _blas_ready(w.reshape(k, m)))
        if len(inputs) == 3:
            b = inputs[2].reshape(m)
            if b.dtype == y.dtype:
                y += b  # y is ours: add the bias in place
            else:
                y = y + b  # numpy's promotion decides the dtype
        outputs[0] = y.reshape(x.shape[:ba] + w.shape[1:])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gx = gy w^T, gw = x^T gy, gb = sum_n gy (on the (N, K) / (K, M) matrix views)
        x, w = inputs[0], inputs[1]
        gy = outputs[0].grad
        if len(x.shape) == 2 and len(w.shape) == 2 and self.base_axis in (1, -1):
            # the common case, without reshapes: gy is (N, M) already
            if STATE.get().modes & RAW:  # a plain pass: the kernels on the arrays, no nodes
                if prop_down[0]:
                    x.store(_product(gy, w.data.T), accum[0])
                if prop_down[1]:
                    w.store(_product(x.data.T, gy), accum[1])
                if len(inputs) == 3 and prop_down[2]:
                    inputs[2].store(_sum_rows(gy), accum[2])
                return
            self._matrix_grads(inputs, gy, prop_down, accum)
            return
        self._reshaped_grads(inputs, outputs, prop_down, accum)

    @staticmethod
    def _matrix_grads(inputs: Slots, gy: Any, prop_down: Flags, accum: Flags) -> None:
        """The recorded rule when x is ``(N, K)``, w ``(K, M)`` and gy ``(N, M)`` already."""
        x, w = inputs[0], inputs[1]
        if prop_down[0]:
            x.store(batch_matmul(gy, w.data, transpose_b=True), accum[0])
        if prop_down[1]:
            w.store(batch_matmul(x.data, gy, transpose_a=True), accum[1])
        if len(inputs) == 3 and prop_down[2]:
            inputs[2].store(_reduction.sum(gy, axis=0), accum[2])

    def _reshaped_grads(
        self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags
    ) -> None:
        """The rule, plain or recorded, on the (N, K), (K, M), (N, M) views of x, w, gy."""
        x, w = inputs[0], inputs[1]
        ba = self._axis(len(x.shape))
        n, k, m = _affine_sizes(x, w, ba)
        gy = _to_shape(outputs[0].grad, (n, m))
        if prop_down[0]:
            gx = batch_matmul(gy, _to_shape(w.data, (k, m)), transpose_b=True)
            x.store(_to_shape(gx, x.shape), accum[0])
        if prop_down[1]:
            gw = batch_matmul(_to_shape(x.data, (n, k)), gy, transpose_a=True)
            w.store(_to_shape(gw, w.shape), accum[1])
        if len(inputs) == 3 and prop_down[2]:
            gb = outputs[0].grad
            inputs[2].store(_reduction.sum(gb, axis=tuple(range(ba))) if ba else gb, accum[2])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        x = inputs[0]
        n = x.ndim - (axes[0] is not None)
        ba = self._axis(n)
        if all(a is None for a in axes[1:]):  # shared weights: the batch folds into x's rows
            x = _batching.batched(x, axes[0], _batching.batch_size(inputs, axes))
            return _batching.renew(self, base_axis=ba + 1)(*[x, *inputs[1:]])
        # per-example weights: one batched GEMM (B, N, K) @ (B, K, M)
        size = _batching.batch_size(inputs, axes)
        x = _batching.batched(x, axes[0], size)
        w = _batching.batched(inputs[1], axes[1], size)
        lead, k = tuple(x.shape[1 : ba + 1]), int(np.prod(x.shape[ba + 1 :], dtype=np.int64))
        out = tuple(w.shape[2:])
        m = int(np.prod(out, dtype=np.int64))
        y = batch_matmul(_array.reshape(x, (size, -1, k)), _array.reshape(w, (size, k, m)))
        if len(inputs) == 3:
            b = inputs[2]
            shape = (size, 1, m) if axes[2] is not None else (m,)
            y = y + _array.reshape(b, shape)
        return _array.reshape(y, (size, *lead, *out))


# ---------------------------------------------------------------- matrix products
def _check_flag(name: str, arg: str, value: Any) -> bool:
    if value is not True and value is not False and not isinstance(value, np.bool_):
        raise TypeError(f"{name}: {arg} must be a bool, got {type(value).__name__}")
    return bool(value)


class BatchMatmul(Function, follows_shape=True):
    """``y = op(a) @ op(b)`` over broadcast batch axes; ``op`` transposes the last two axes."""

    complex_values = "holomorphic"
    taylor = "multilinear"

    def __init__(self, *, transpose_a: bool = False, transpose_b: bool = False) -> None:
        self.transpose_a = _check_flag("batch_matmul", "transpose_a", transpose_a)
        self.transpose_b = _check_flag("batch_matmul", "transpose_b", transpose_b)

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        a, b = inputs
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(
                f"batch_matmul: a of shape {a.shape} and b of shape {b.shape} must both have "
                "at least 2 dimensions"
            )
        p, q = a.shape[-1:-3:-1] if self.transpose_a else a.shape[-2:]
        q2, r = b.shape[-1:-3:-1] if self.transpose_b else b.shape[-2:]
        if q != q2:
            raise ValueError(
                f"batch_matmul: a of shape {a.shape} (transpose_a={self.transpose_a}) and b of "
                f"shape {b.shape} (transpose_b={self.transpose_b}): inner sizes {q} and {q2} differ"
            )
        try:
            batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        except ValueError:
            raise ValueError(
                f"batch_matmul: the batch axes of a of shape {a.shape} and b of shape {b.shape} "
                "cannot be broadcast together"
            ) from None
        return [((*batch, p, r), value_dtype(np.result_type(a.dtype, b.dtype)))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        a, b = inputs
        if self.transpose_a:
            a = a.swapaxes(-1, -2)  # a view: BLAS reads it transposed, nothing is copied
        if self.transpose_b:
            b = b.swapaxes(-1, -2)
        outputs[0] = _product(a, b)

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # with A = op(a), B = op(b): gA = gy B^T, gB = A^T gy (transposed back when op transposes)
        gy = outputs[0].grad
        a, b = inputs[0].data, inputs[1].data
        ta, tb = self.transpose_a, self.transpose_b
        if prop_down[0]:
            if ta:
                ga = batch_matmul(b, gy, transpose_a=tb, transpose_b=True)
            else:
                ga = batch_matmul(gy, b, transpose_b=not tb)
            inputs[0].store(ga, accum[0])
        if prop_down[1]:
            if tb:
                gb = batch_matmul(gy, a, transpose_a=True, transpose_b=ta)
            else:
                gb = batch_matmul(a, gy, transpose_a=not ta)
            inputs[1].store(gb, accum[1])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # one GEMM when one operand is shared: the batch folds into the other's rows (op(a)'s
        # rows; or, for y_i = A b_i with b_i a column, y_i^T = b_i^T A^T: the rows of b)
        a, b = inputs
        ta, tb = self.transpose_a, self.transpose_b
        if axes[1] is None and b.ndim == 2 and (not ta or a.shape[-1] == 1):
            q = a.shape[-2] if ta else a.shape[-1]  # op(a_i) (p, q): p = 1 when transposed
            y = _batching.renew(self, transpose_a=False)(_array.reshape(a, (-1, q)), b)
            rows = a.shape[:-2] + ((1,) if ta else a.shape[-2:-1])
            return _array.reshape(y, (*rows, y.shape[-1]))
        if axes[0] is None and a.ndim == 2 and b.shape[-2 if tb else -1] == 1:
            q = b.shape[-1 if tb else -2]  # op(b_i) is (q, 1): b's rows are the b_i^T
            z = BatchMatmul(transpose_b=not ta)(_array.reshape(b, (-1, q)), a)  # (B, p)
            return _array.reshape(z, (*b.shape[:-2], z.shape[-1], 1))
        return _batching.elementwise(self, inputs, axes)  # batch axes broadcast like elementwise


# ---------------------------------------------------------------- einsum
@dataclass(frozen=True)
class EinsumPlan:
    """An einsum with one letter per axis: no ellipsis, no broadcast, explicit output.

    Broadcast size-1 axes get a private letter of their own (summed over a size
    of 1), which is what broadcasting means; so the gradient of every operand
    is again such an einsum.
    """

    terms: tuple[str, ...]
    out: str
    out_shape: tuple[int, ...]

    @property
    def expr(self) -> str:
        return ",".join(self.terms) + "->" + self.out


def _split_ellipsis(subscripts: str, term: str, where: str) -> tuple[str, str, bool]:
    bad = [c for c in term.replace("...", "") if not (c.isascii() and c.isalpha())]
    if bad or term.count("...") > 1:
        what = f"character {bad[0]!r}" if bad else "more than one '...'"
        raise ValueError(f"einsum: subscripts {subscripts!r}: {what} in {where}")
    if "..." in term:
        pre, post = term.split("...")
        return pre, post, True
    return term, "", False


@functools.lru_cache(maxsize=4096)
def einsum_plan(subscripts: str, shapes: tuple[tuple[int, ...], ...]) -> EinsumPlan:
    """Parses numpy einsum ``subscripts`` for operands of ``shapes`` (ValueError if invalid)."""
    s = subscripts.replace(" ", "")
    lhs, arrow, rhs = _einsum_sides(subscripts, s, len(shapes))
    used = set(s) & set(string.ascii_letters)
    pool = iter(c for c in string.ascii_letters if c not in used)

    def fresh() -> str:
        c = next(pool, None)
        if c is None:
            raise ValueError(f"einsum: subscripts {subscripts!r} use too many distinct indices")
        return c

    parsed, n_ell = _einsum_operands(subscripts, lhs.split(","), shapes)
    ell_letters = "".join(fresh() for _ in range(n_ell))
    labels = [pre + ell_letters[n_ell - k :] + post for pre, post, k in parsed]
    sizes = _einsum_sizes(subscripts, labels, shapes, ell_letters)
    out = _einsum_output(subscripts, lhs, arrow, rhs, ell_letters)

    # a size-1 axis broadcast against a longer one gets a private letter
    final = []
    for lab, shape in zip(labels, shapes, strict=True):
        rename: dict[str, str] = {}
        for c, d in zip(lab, shape, strict=True):
            if d == 1 and sizes[c] > 1 and c not in rename:
                rename[c] = fresh()
        final.append("".join(rename.get(c, c) for c in lab))
    return EinsumPlan(tuple(final), out, tuple(sizes[c] for c in out))


def _einsum_sides(subscripts: str, s: str, n_operands: int) -> tuple[str, str, str]:
    """``s`` (``subscripts`` without spaces) split at its one ``'->'``: ``(lhs, arrow, rhs)``,
    the left side naming ``n_operands`` operands.
    """
    if s.count("->") > 1 or ("->" not in s and ">" in s.replace("->", "")):
        raise ValueError(f"einsum: subscripts {subscripts!r}: misplaced '->'")
    lhs, arrow, rhs = s.partition("->")
    n_terms = len(lhs.split(","))
    if n_terms != n_operands:
        raise ValueError(
            f"einsum: subscripts {subscripts!r} name {n_terms} operand(s) but "
            f"{n_operands} were given"
        )
    return lhs, arrow, rhs


def _einsum_operands(
    subscripts: str, terms: list[str], shapes: tuple[tuple[int, ...], ...]
) -> tuple[list[tuple[str, str, int]], int]:
    """Each operand's letters before and after its ``'...'`` and the number of axes the
    ``'...'`` stands for there; and the most axes any ``'...'`` stands for.
    """
    parsed = []
    n_ell = 0
    for i, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        pre, post, ell = _split_ellipsis(subscripts, term, f"operand {i}")
        named = len(pre) + len(post)
        if named > len(shape) or (not ell and named != len(shape)):
            raise ValueError(
                f"einsum: subscripts {subscripts!r}: operand {i} of shape {shape} has "
                f"{len(shape)} dimension(s) but {term!r} names {named}"
            )
        parsed.append((pre, post, len(shape) - named))
        n_ell = max(n_ell, len(shape) - named)
    return parsed, n_ell


def _einsum_sizes(
    subscripts: str, labels: list[str], shapes: tuple[tuple[int, ...], ...], ell_letters: str
) -> dict[str, int]:
    """The size of each letter: the same wherever it appears, or 1 (broadcast)."""
    sizes: dict[str, int] = {}
    for i, (lab, shape) in enumerate(zip(labels, shapes, strict=True)):
        own: dict[str, int] = {}
        for c, d in zip(lab, shape, strict=True):
            name = "'...' axis" if c in ell_letters else f"index {c!r}"
            if own.setdefault(c, d) != d:
                raise ValueError(
                    f"einsum: subscripts {subscripts!r}: {name} repeated in operand {i} of shape "
                    f"{shape} has sizes {own[c]} and {d}"
                )
            if sizes.get(c, 1) != d and d != 1 and sizes.get(c, 1) != 1:
                raise ValueError(
                    f"einsum: subscripts {subscripts!r}: {name} has size {sizes[c]} in an "
                    f"earlier operand and {d} in operand {i} of shape {shape}"
                )
            sizes[c] = max(sizes.get(c, 1), d)
    return sizes


def _einsum_output(subscripts: str, lhs: str, arrow: str, rhs: str, ell_letters: str) -> str:
    """The output's letters: the explicit ``rhs`` (each once, each in some operand, the
    ``'...'`` axes kept), or numpy's implicit output: the ``'...'`` axes, then the indices
    seen once, sorted.
    """
    user = [c for c in lhs if c.isalpha()]
    if not arrow:
        return ell_letters + "".join(sorted(c for c in set(user) if user.count(c) == 1))
    pre, post, ell = _split_ellipsis(subscripts, rhs, "the output")
    if ell_letters and not ell:
        raise ValueError(f"einsum: subscripts {subscripts!r}: the output must keep the '...' axes")
    for c in pre + post:
        if (pre + post).count(c) > 1:
            raise ValueError(f"einsum: subscripts {subscripts!r}: output index {c!r} repeated")
        if c not in user:
            raise ValueError(
                f"einsum: subscripts {subscripts!r}: output index {c!r} is in no operand"
            )
    return pre + (ell_letters if ell else "") + post


class Einsum(Function, follows_shape=True):
    """numpy's einsum; the gradient of each operand is an einsum of gy with the others."""

    complex_values = "holomorphic"
    taylor = "multilinear"

    def __init__(self, *, subscripts: str) -> None:
        if not isinstance(subscripts, str):
            raise TypeError(f"einsum: subscripts must be a str, got {type(subscripts).__name__}")
        self.subscripts = subscripts

    def _plan(self, xs: Sequence[Any]) -> EinsumPlan:
        return einsum_plan(self.subscripts, tuple(_shape_of(x) for x in xs))

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        if not inputs:
            raise ValueError("einsum: at least one operand is required")
        plan = self._plan(inputs)
        return [(plan.out_shape, value_dtype(np.result_type(*(x.dtype for x in inputs))))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        y = xp.einsum(self._plan(inputs).expr, *inputs, optimize=len(inputs) > 1)
        outputs[0] = _as_float(xp.asarray(y))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # g x_k = einsum(gy, x_j (j != k) -> labels of x_k), expanded over diagonals and the
        # indices only x_k has (they were summed: every element of x_k gets the same gradient)
        plan = self._plan(inputs)
        gy = outputs[0].grad
        for k, x in enumerate(inputs):
            if not prop_down[k]:
                continue
            terms = [plan.out] + [t for j, t in enumerate(plan.terms) if j != k]
            ops = [gy] + [v.data for j, v in enumerate(inputs) if j != k]
            seen = set("".join(terms))
            own = "".join(dict.fromkeys(c for c in plan.terms[k] if c in seen))
            gx = einsum(",".join(terms) + "->" + own, *ops)
            if own != plan.terms[k]:
                gx = _grad.einsum_expand(gx, own, plan.terms[k], x.shape)
            x.store(gx, accum[k])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # one more letter for the batch axis, in front of every batched operand and of the output
        shapes = tuple(
            tuple(x.shape[1:]) if a is not None else tuple(x.shape)
            for x, a in zip(inputs, axes, strict=True)
        )
        plan = einsum_plan(self.subscripts, shapes)
        used = set("".join(plan.terms) + plan.out)
        z = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in used)
        terms = [z + t if a is not None else t for t, a in zip(plan.terms, axes, strict=True)]
        return _batching.renew(self, subscripts=",".join(terms) + "->" + z + plan.out)(*inputs)


# ---------------------------------------------------------------- batched inverse, determinants
def _check_square(name: str, x: Variable) -> None:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"{name}: x of shape {x.shape} must be a batch of square matrices (B, N, N)"
        )


def _batch_leading(self: Any, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
    return self(inputs[0])  # stacks of matrices: any leading axes are batch axes


class BatchInv(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_inputs = False
    need_outputs = True
    batch_rule = _batch_leading

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        _check_square(self.name, inputs[0])
        return [(inputs[0].shape, value_dtype(inputs[0].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = array_module(inputs[0]).linalg.inv(inputs[0])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d inv(A) = -inv(A) dA inv(A)  =>  gA = -Y^T gy Y^T with Y = inv(A)
        if prop_down[0]:
            y, gy = outputs[0].data, outputs[0].grad
            gx = batch_matmul(batch_matmul(y, gy, transpose_a=True), y, transpose_b=True)
            inputs[0].store(-gx, accum[0])


class BatchDet(Function, follows_shape=True):
    complex_values = "holomorphic"
    need_outputs = True
    batch_rule = _batch_leading

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        _check_square(self.name, inputs[0])
        return [(inputs[0].shape[:-2], value_dtype(inputs[0].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        outputs[0] = xp.asarray(xp.linalg.det(inputs[0]))

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d det(A) = det(A) tr(inv(A) dA)  =>  gA = gy det(A) inv(A)^T
        if prop_down[0]:
            gd = outputs[0].grad * outputs[0].data
            inputs[0].store(einsum("...,...ji->...ij", gd, batch_inv(inputs[0].data)), accum[0])


class BatchLogdet(Function, follows_shape=True):
    """``log|det(A)|`` from the LU factorization (slogdet): no overflow of det itself."""

    complex_values = "own"
    batch_rule = _batch_leading

    def setup_impl(self, inputs: Sequence[Variable]) -> Spec:
        _check_square(self.name, inputs[0])
        return [(inputs[0].shape[:-2], pair_real(inputs[0].dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        xp = array_module(inputs[0])
        outputs[0] = xp.asarray(xp.linalg.slogdet(inputs[0])[1])

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # d log|det(A)| = Re tr(inv(A) dA): with M = inv(A)^T, d/dRe A = Re M and
        # d/dIm A = -Im M, so gA = d/dRe A - i d/dIm A = M, as for real A  =>  gA = gy inv(A)^T
        if prop_down[0]:
            gy, a = outputs[0].grad, inputs[0].data
            if a.dtype.kind == "c":  # a real gy of a complex A: complex too (a rule's calls
                gy = _math.complex(gy)  # are not cast), so that gy's own gradient is real
            inputs[0].store(einsum("...,...ji->...ij", gy, batch_inv(a)), accum[0])


# ---------------------------------------------------------------- wrappers
@traced
def affine(x: Any, w: Any, b: Any = None, base_axis: int = 1) -> Variable:
    """Affine layer as NNabla: ``y = x w + b``, x flattened from ``base_axis`` on.

    ``x`` is read as a matrix of shape ``(prod(x.shape[:base_axis]),
    prod(x.shape[base_axis:]))`` and ``w`` as ``(inmaps, prod(outmaps))``;
    ``y[n, m] = sum_k x[n, k] w[k, m] + b[m]``.

    Args:
        x: input of shape ``(*batch, *in)`` with ``batch = x.shape[:base_axis]``.
        w: weight of shape ``(prod(in), *outmaps)``.
        b: optional bias of shape ``outmaps``.
        base_axis: first axis of ``x`` that is flattened into the input features.

    Returns:
        ``y`` of shape ``x.shape[:base_axis] + w.shape[1:]``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.affine(np.ones((2, 3)), np.ones((3, 4)), np.arange(4.0)).d
    array([[3., 4., 5., 6.],
           [3., 4., 5., 6.]])

    """
    f = Affine(base_axis=base_axis)
    return f(x, w) if b is None else f(x, w, b)


@traced
def batch_matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Variable:
    """Batched matrix product as NNabla: ``y[..., i, k] = sum_j op(a)[..., i, j] op(b)[..., j, k]``.

    ``op`` transposes the last two axes when the corresponding flag is set. The
    batch axes (all but the last two) broadcast as in numpy. 2-D operands are
    accepted (a batch of no axes), so this is also the plain matrix product.

    Args:
        a: ``(..., P, Q)``, or ``(..., Q, P)`` with ``transpose_a``.
        b: ``(..., Q, R)``, or ``(..., R, Q)`` with ``transpose_b``.
        transpose_a: use the transpose of each matrix of ``a``.
        transpose_b: use the transpose of each matrix of ``b``.

    Returns:
        ``y`` of shape ``broadcast(a.shape[:-2], b.shape[:-2]) + (P, R)``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.batch_matmul(np.ones((2, 3, 4)), np.ones((2, 5, 4)), transpose_b=True).shape
    (2, 3, 5)

    """
    if STATE.get().modes & RAW and transpose_a.__class__ is bool and transpose_b.__class__ is bool:
        # a plain pass (a rule's call on arrays): the kernel, without a node
        return _product(
            a.swapaxes(-1, -2) if transpose_a else a, b.swapaxes(-1, -2) if transpose_b else b
        )
    return BatchMatmul(transpose_a=transpose_a, transpose_b=transpose_b)(a, b)


@traced
def matmul(a: Any, b: Any) -> Variable:
    """Matrix product with numpy's semantics (``a @ b``).

    1-D operands are promoted to a row (``a``) or a column (``b``) matrix and the
    promoted axis is removed from the result; the batch axes broadcast. Built on
    :func:`batch_matmul` (plus reshapes for 1-D operands).

    Args:
        a: ``(..., P, Q)`` or ``(Q,)``.
        b: ``(..., Q, R)`` or ``(Q,)``.

    Returns:
        ``y`` of numpy's ``matmul`` shape.

    >>> import numpy as np, hodiff.functions as F
    >>> F.matmul(np.array([1.0, 2.0]), np.array([[1.0], [1.0]])).d
    array([3.])

    """
    sa, sb = _shape_of(a), _shape_of(b)
    if not sa or not sb:
        raise ValueError(
            f"matmul: a of shape {sa} and b of shape {sb}: operands must have at least 1 dimension"
        )
    q_a = sa[-1]
    q_b = sb[0] if len(sb) == 1 else sb[-2]
    if q_a != q_b:
        raise ValueError(
            f"matmul: a of shape {sa} and b of shape {sb}: inner sizes {q_a} and {q_b} differ"
        )
    if len(sa) > 1 and len(sb) > 1:
        try:
            np.broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise ValueError(
                f"matmul: the batch axes of a of shape {sa} and b of shape {sb} cannot be "
                "broadcast together"
            ) from None
        return batch_matmul(a, b)
    # the Reshape nodes themselves (not the traced reshape): ``a @ b`` of Variables follows
    # new shapes by its nodes' own rules
    a2 = _array.Reshape(shape=(1, q_a))(a) if len(sa) == 1 else a
    b2 = _array.Reshape(shape=(q_b, 1))(b) if len(sb) == 1 else b
    y = batch_matmul(a2, b2)
    shape = tuple(y.shape)
    if len(sb) == 1:
        shape = shape[:-1]
    if len(sa) == 1:
        shape = shape[:-2] + shape[-1:] if len(sb) > 1 else shape[:-1]
    return _array.Reshape(shape=shape)(y)


@traced
def einsum(*xs: Any, equation: str | None = None) -> Variable:
    """Einstein summation: ``y = numpy.einsum(equation, *xs)``.

    NNabla's call ``F.einsum(*xs, equation=...)`` and numpy's ``F.einsum(subscripts, *xs)``
    (the subscripts first) are both accepted.

    Supports explicit (``'ij,jk->ik'``) and implicit (``'ij,jk'``) outputs,
    ellipsis (``'...ij,...jk->...ik'``), size-1 broadcasting, and repeated
    indices within an operand (diagonals and traces: ``'ii->i'``, ``'ii'``).
    The gradient of each operand is another einsum of ``gy`` with the other
    operands, so every order keeps einsum's (BLAS) speed.

    Args:
        *xs: the operands; without ``equation``, the subscripts and then the operands.
        equation: the subscripts, numpy's (letters, ``,``, ``...``, ``->``).

    Returns:
        ``y`` of the shape numpy's einsum gives.

    Raises:
        TypeError: no subscripts, or subscripts both first and as ``equation``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.einsum("ii->i", np.arange(4.0).reshape(2, 2)).d
    array([0., 3.])
    >>> F.einsum(np.ones((2, 3)), np.ones((3, 4)), equation="ij,jk->ik").shape  # NNabla's
    (2, 4)
    """
    first_is_str = bool(xs) and isinstance(xs[0], str)
    if equation is None:
        if not first_is_str:
            got = type(xs[0]).__name__ if xs else "nothing"
            raise TypeError(
                "einsum: subscripts must be a str, first (numpy's order) or as equation= "
                f"(NNabla's); got {got} first and no equation"
            )
        equation, xs = xs[0], xs[1:]
    elif first_is_str:
        raise TypeError(f"einsum: subscripts {xs[0]!r} first and equation={equation!r} too")
    return Einsum(subscripts=equation)(*xs)


@traced
def batch_inv(x: Any) -> Variable:
    """Inverse of each matrix of a batch: ``y[b] = inv(x[b])``.

    Args:
        x: ``(B, N, N)`` (any number of leading batch axes, including none).

    Returns:
        ``y`` of the shape of ``x``.

    >>> import numpy as np, hodiff.functions as F
    >>> F.batch_inv(2.0 * np.eye(2)[None]).d
    array([[[0.5, 0. ],
            [0. , 0.5]]])

    """
    return BatchInv()(x)


@traced
def batch_det(x: Any) -> Variable:
    """Determinant of each matrix of a batch: ``y[b] = det(x[b])``.

    The gradient ``det(x) inv(x)^T`` needs invertible matrices.

    Args:
        x: ``(B, N, N)`` (any number of leading batch axes, including none).

    Returns:
        ``y`` of shape ``(B,)`` (``x.shape[:-2]``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.batch_det(2.0 * np.eye(2)[None]).d
    array([4.])

    """
    return BatchDet()(x)


@traced
def batch_logdet(x: Any) -> Variable:
    """Log of the absolute determinant of each matrix, as NNabla: ``y[b] = log|det(x[b])|``.

    Computed from an LU factorization (``slogdet``), so it neither overflows nor
    underflows where ``det`` would; the gradient is ``inv(x)^T``. A complex ``x``
    gives a real ``y`` (``d y = Re tr(inv(x) dx)``) whose gradient is again
    ``inv(x)^T`` (``d y / d Re x - i d y / d Im x``, not conjugated).

    Args:
        x: ``(B, N, N)``, real or complex (any number of leading batch axes, including none).

    Returns:
        real ``y`` of shape ``(B,)`` (``x.shape[:-2]``).

    >>> import numpy as np, hodiff.functions as F
    >>> F.batch_logdet(-np.e * np.eye(2)[None]).d
    array([2.])

    """
    return BatchLogdet()(x)
