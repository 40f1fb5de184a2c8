"""Differential operators of a network with respect to its input: Laplacian, biharmonic.

``method="taylor"`` runs collapsed Taylor mode (:mod:`hodiff.transforms.taylor`): one forward pass
carrying the value, the first-order coefficients of the ``D`` unit directions and one
second-order coefficient summed over them. ``"nested"`` is the reference, through
Hessian-vector products (reverse over reverse). ``"stochastic"`` estimates the operator
from random directions (Hutchinson). See docs/taylor.md for the cost model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from hodiff import functions as F
from hodiff.engine import api
from hodiff.engine.arguments import array_module_of
from hodiff.engine.autograd import grad
from hodiff.engine.context import auto_forward
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable
from hodiff.transforms import taylor as _taylor
from hodiff.transforms.derivatives import hvp

__all__ = ["LAPLACIAN_METHODS", "biharmonic", "laplacian"]

LAPLACIAN_METHODS = ("taylor", "nested", "stochastic")
DISTRIBUTIONS = ("rademacher", "normal")


@traced  # in a static graph, reset_shape makes it again for the new shapes
def laplacian(
    f: Callable[[Variable], Variable],
    x: Any,
    *,
    batch_axis: int | None = None,
    method: str = "taylor",
    num_samples: int | None = None,
    seed: int = 0,
    create_graph: bool = False,
    coefficients: Any = None,
    distribution: str = "rademacher",
) -> Any:
    """The Laplacian ``sum_i d^2 f / dx_i^2`` of a scalar ``f``, over every element of ``x``,
    or the weighted Laplacian ``trace(S^T H S) = sum_r S[:, r]^T H S[:, r]``.

    Args:
        f: called as ``f(x)`` with a Variable. With ``batch_axis=None`` it returns a scalar
            (size 1); with ``batch_axis=0`` it maps a batch ``(N, ...)`` to ``(N,)`` or
            ``(N, 1)``, output ``n`` depending on ``x[n]`` only (per-datum operators: the
            directions are those of one datum, ``D = prod(x.shape[1:])``).
        x: the point (an array or a Variable).
        batch_axis: None (one point) or 0 (a batch along axis 0).
        method: ``"taylor"`` (exact, collapsed Taylor mode: one pass with ``D``
            first-order coefficients and one summed second-order one), ``"nested"``
            (exact, Hessian-vector products: the reference) or ``"stochastic"``
            (``sum_s v_s^T H v_s / S`` over ``S = num_samples`` Rademacher directions,
            unbiased, reproducible with ``seed``).
        num_samples: the number of directions of ``"stochastic"`` (required there).
        seed: the seed of ``"stochastic"``'s directions.
        create_graph: return a Variable differentiable again, at any order, with respect
            to every Variable ``f`` uses (PINN training) and to ``x`` when it is a Variable.
        coefficients: None (the Laplacian), or a matrix ``S`` of shape ``(D, R)`` (or
            ``(N, D, R)`` with ``batch_axis=0``, one per datum; ``D`` the size of one datum,
            flattened in C order): the weighted Laplacian ``trace(S^T H S)``, the
            second-order term ``sum_ij (S S^T)_ij d^2 f / dx_i dx_j`` of a Kolmogorov or
            Fokker-Planck equation with diffusion ``S S^T``. An array: the operator is not
            differentiated with respect to it.
        distribution: the directions of ``"stochastic"``: ``"rademacher"`` (entries +-1)
            or ``"normal"`` (Gaussian); with ``coefficients`` the directions are ``S z``.

    Returns:
        A 0-d array for one point, an ``(N,)`` array for a batch (Variables with
        ``create_graph=True``).

    Raises:
        ValueError: an unknown ``method``, ``batch_axis`` or ``distribution``,
            ``num_samples`` missing or not positive for ``"stochastic"``, ``coefficients``
            of a shape that does not fit ``x``, or an output that is not scalar per datum.
        TypeError: ``coefficients`` that are a Variable or not real numbers.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> float(hd.laplacian(lambda x: F.sum(x ** 3), x))     # sum_i 6 x_i
    36.0
    >>> S = np.array([[1.0], [0.0], [2.0]])                   # trace(S^T H S) = 6 + 4 * 18
    >>> float(hd.laplacian(lambda x: F.sum(x ** 3), x, coefficients=S))
    78.0

    """
    _check("laplacian", method, batch_axis, num_samples)
    _check_one_input("laplacian", f)
    if distribution not in DISTRIBUTIONS:
        raise ValueError(
            f"laplacian: distribution must be one of {DISTRIBUTIONS}, got {distribution!r}"
        )
    create_graph = create_graph or api.is_symbolic()  # inside hd.jit: a Variable
    xv = _point("laplacian", x, create_graph)
    weights = None if coefficients is None else _coefficients(coefficients, xv, batch_axis)
    if method == "nested":
        return _nested_laplacian(f, xv, batch_axis, create_graph, weights)
    kind = "rademacher" if distribution == "rademacher" else "gauss"
    dirs, scale = _directions("laplacian", xv, batch_axis, method, num_samples, seed, kind, weights)
    y, (s,) = _taylor.run_jet(
        f,
        [xv],
        [[dirs, None]],
        2,
        collapsed=True,
        record=create_graph,
        name="laplacian",
        check=lambda y: _check_output("laplacian", y, xv, batch_axis),
    )
    return _result(y, s[1], xv, batch_axis, scale, create_graph)


@traced  # in a static graph, reset_shape makes it again for the new shapes
def biharmonic(
    f: Callable[[Variable], Variable],
    x: Any,
    *,
    batch_axis: int | None = None,
    method: str = "taylor",
    num_samples: int | None = None,
    seed: int = 0,
    create_graph: bool = False,
) -> Any:
    """The biharmonic operator ``sum_ij d^4 f / dx_i^2 dx_j^2`` (the Laplacian of the
    Laplacian) of a scalar ``f``; arguments as :func:`laplacian`.

    ``"taylor"`` is the collapsed Laplacian of the collapsed Laplacian (a Taylor pass
    over the graph of a Taylor pass); ``"nested"`` the nested Laplacian of the nested
    one; ``"stochastic"`` averages ``d^4 f[v, v, v, v] / 3`` over Gaussian directions
    ``v`` (unbiased: ``E[v_i v_j v_k v_l]`` pairs the indices in three ways), from one
    jet of order 4.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> r4 = lambda x: F.sum(x ** 2) ** 2                  # |x|^4: 8 D (D + 2)
    >>> float(hd.biharmonic(r4, np.array([1.0, 2.0])))
    64.0

    """
    _check("biharmonic", method, batch_axis, num_samples)
    _check_one_input("biharmonic", f)
    create_graph = create_graph or api.is_symbolic()  # inside hd.jit: a Variable
    if method == "stochastic":
        xv = _point("biharmonic", x, create_graph)
        dirs, scale = _directions("biharmonic", xv, batch_axis, method, num_samples, seed, "gauss")
        y, (s,) = _taylor.run_jet(
            f,
            [xv],
            [[dirs, None, None, None]],
            4,
            record=create_graph,
            name="biharmonic",
            check=lambda y: _check_output("biharmonic", y, xv, batch_axis),
        )
        top = s[3]
        if top is not None:
            top = F.sum(top, axis=0, keepdims=True) if create_graph else top.sum(0, keepdims=True)
        return _result(y, top, xv, batch_axis, scale / 3.0, create_graph)

    def inner(z: Variable) -> Variable:
        return laplacian(f, z, batch_axis=batch_axis, method=method, create_graph=True)  # type: ignore[no-any-return]

    return laplacian(inner, x, batch_axis=batch_axis, method=method, create_graph=create_graph)


# ---------------------------------------------------------------- helpers
def _check_one_input(name: str, f: Any) -> None:
    """Raises TypeError when ``f`` needs more than one argument: the operator takes one
    input ``x`` (several inputs: concatenate them into one, or close over the others).
    """
    if not callable(f):
        raise TypeError(f"{name}: f must be callable, got {type(f).__name__}")
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: let the call say
        return
    needed = [
        p.name
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(needed) > 1:
        raise TypeError(
            f"{name}: f takes {len(needed)} arguments ({', '.join(needed)}), but {name} takes "
            f"one input x and calls f(x): concatenate the inputs into one x, or fix the others "
            f"(e.g. lambda x: f(x, c))"
        )


def _check(name: str, method: str, batch_axis: Any, num_samples: Any) -> None:
    if method not in LAPLACIAN_METHODS:
        raise ValueError(f"{name}: method must be one of {LAPLACIAN_METHODS}, got {method!r}")
    if batch_axis not in (None, 0):
        raise ValueError(f"{name}: batch_axis must be None or 0, got {batch_axis!r}")
    if method == "stochastic":
        if isinstance(num_samples, bool) or not isinstance(num_samples, int | np.integer):
            raise ValueError(
                f"{name}: method='stochastic' needs num_samples (a positive int), "
                f"got {num_samples!r}"
            )
        if num_samples < 1:
            raise ValueError(f"{name}: num_samples must be positive, got {num_samples}")


def _point(name: str, x: Any, keep: bool) -> Variable:
    if np.dtype(getattr(x, "dtype", np.float64)).kind == "c":
        raise TypeError(
            f"{name}: x has dtype {x.dtype}; the operator is taken in real coordinates: pass "
            "the real and imaginary parts as a real x, and make them complex inside f "
            "(F.complex(re, im))"
        )
    if isinstance(x, Variable):
        if x.dtype.kind != "f":
            raise TypeError(f"{name}: x must be a float Variable, got dtype {x.dtype}")
        return x if keep else Variable.from_array(x.d, need_grad=True, copy=False)
    a = x if hasattr(x, "dtype") else np.asarray(x, dtype=np.float64)
    if a.dtype.kind != "f":
        a = a.astype(np.float64)
    return Variable.from_array(a, need_grad=True, copy=False)


def _per_datum(xv: Variable, batch_axis: int | None) -> tuple[int, ...]:
    return tuple(xv.shape[1:]) if batch_axis == 0 else tuple(xv.shape)


def _directions(
    name: str,
    xv: Variable,
    batch_axis: int | None,
    method: str,
    num_samples: int | None,
    seed: int,
    kind: str,
    weights: Any = None,
) -> tuple[Any, float]:
    """The first-order coefficients ``(R, *x.shape)`` and the factor of the summed result.

    ``weights``: None (unit directions, or random ones of ``x``'s shape) or ``S`` as
    :func:`_coefficients` gives it, ``(D, R)`` or ``(N, D, R)``: its columns (``"taylor"``)
    or ``S z`` for random ``z`` of ``R`` entries (``"stochastic"``).
    """
    xp = array_module_of(xv)
    shape = _per_datum(xv, batch_axis)
    if batch_axis == 0 and xv.ndim == 0:
        raise ValueError(f"{name}: batch_axis=0 needs x with a batch axis, got shape ()")
    if method != "taylor":
        assert num_samples is not None
        rng = np.random.default_rng(seed)
        r = None if weights is None else weights.shape[-1]
        full = (num_samples, *xv.shape) if r is None else (num_samples, *xv.shape[:1], r)
        if r is not None and batch_axis is None:
            full = (num_samples, r)
        if kind == "rademacher":
            v = rng.integers(0, 2, size=full).astype(xv.dtype) * 2 - 1
        else:
            v = rng.standard_normal(full).astype(xv.dtype)
        v = xp.asarray(v)
        if weights is not None:  # S z: (s, D) or (s, N, D)
            v = _times(xp, weights, v).reshape((num_samples, *xv.shape))
        return v, 1.0 / num_samples
    if weights is not None:
        return _columns(xp, weights, xv, batch_axis), 1.0
    d = int(np.prod(shape))
    e = xp.eye(d, dtype=xv.dtype).reshape((d, *shape))
    if batch_axis == 0:
        n = xv.shape[0]
        e = xp.broadcast_to(e[:, None], (d, n, *shape))
    return e, 1.0


def _coefficients(s: Any, xv: Variable, batch_axis: int | None) -> Any:
    """``coefficients`` checked against ``x``: an array ``(D, R)`` or ``(N, D, R)``."""
    if isinstance(s, Variable):
        raise TypeError(
            "laplacian: coefficients must be an array, got a hodiff.Variable (pass its .d: "
            "the operator is not differentiated with respect to its coefficients)"
        )
    xp = array_module_of(xv)
    a = xp.asarray(s)
    if a.dtype.kind not in "fiu" or a.dtype.kind == "b":
        raise TypeError(f"laplacian: coefficients must be real numbers, got dtype {a.dtype}")
    d = int(np.prod(_per_datum(xv, batch_axis)))
    shapes = [(d, "R")] if batch_axis is None else [(d, "R"), (xv.shape[0], d, "R")]
    if a.ndim not in (2, 3) or (a.ndim == 3 and batch_axis is None):
        wanted = " or ".join(str(w).replace("'R'", "R") for w in shapes)
        raise ValueError(
            f"laplacian: coefficients must have shape {wanted} for x of shape {xv.shape} "
            f"(batch_axis={batch_axis}), got {a.shape}"
        )
    if a.shape[:-1] != tuple(shapes[a.ndim - 2][:-1]) or a.shape[-1] < 1:
        wanted = " or ".join(str(w).replace("'R'", "R") for w in shapes)
        raise ValueError(
            f"laplacian: coefficients must have shape {wanted} for x of shape {xv.shape} "
            f"(batch_axis={batch_axis}), got {a.shape}"
        )
    return a.astype(xv.dtype, copy=False)


def _times(xp: Any, s: Any, z: Any) -> Any:
    """``S z`` per sample: ``z`` ``(s, R)`` or ``(s, N, R)`` gives ``(s, D)`` or ``(s, N, D)``."""
    if s.ndim == 3:
        return xp.einsum("ndr,snr->snd", s, z)
    return z @ s.T


def _columns(xp: Any, s: Any, xv: Variable, batch_axis: int | None) -> Any:
    """The columns of ``S`` as directions ``(R, *x.shape)``."""
    r = s.shape[-1]
    if batch_axis is None:
        return xp.ascontiguousarray(s.T).reshape((r, *xv.shape))
    n = xv.shape[0]
    cols = xp.moveaxis(s, -1, 0)  # (R, D) or (R, N, D)
    if s.ndim == 2:
        cols = xp.broadcast_to(cols[:, None], (r, n, cols.shape[-1]))
    return xp.ascontiguousarray(cols).reshape((r, *xv.shape))


def _check_output(name: str, y: Any, xv: Variable, batch_axis: int | None) -> None:
    if not isinstance(y, Variable):
        raise TypeError(f"{name}: f must return a hodiff.Variable, got {type(y).__name__}")
    if batch_axis == 0:
        n = xv.shape[0]
        if tuple(y.shape) not in ((n,), (n, 1)):
            raise ValueError(
                f"{name}: with batch_axis=0, f must map x of shape {xv.shape} to ({n},) or "
                f"({n}, 1), got {y.shape}"
            )
    elif y.size != 1:
        hint = ""
        if xv.ndim >= 1 and y.ndim >= 1 and y.shape[0] == xv.shape[0] > 1:
            hint = f"; for one {name} per datum of a batch x of shape {xv.shape}, pass batch_axis=0"
        raise ValueError(f"{name}: f must return a scalar (size 1), got shape {y.shape}{hint}")


def _result(
    y: Variable, top: Any, xv: Variable, batch_axis: int | None, scale: float, record: bool
) -> Any:
    shape = (xv.shape[0],) if batch_axis == 0 else ()
    if top is None:
        z = array_module_of(xv).zeros(shape, dtype=y.dtype)
        return Variable.from_array(z) if record else z
    if not record:
        a = top.reshape(shape)
        return a * scale if scale != 1.0 else a.copy()
    out = F.reshape(top, shape)
    return out * scale if scale != 1.0 else out


def _nested_laplacian(
    f: Callable[[Variable], Variable],
    xv: Variable,
    batch_axis: int | None,
    record: bool,
    weights: Any = None,
) -> Any:
    """The reference: ``sum_i (H e_i)_i`` by Hessian-vector products (reverse over reverse);
    with ``weights`` ``S``, ``sum_r s_r^T H s_r`` over its columns ``s_r``.
    """
    if api.is_symbolic():
        return _nested_symbolic(f, xv, batch_axis, weights)
    if _complex_valued(f, xv):  # real-linear in f: of Re f, plus i of Im f (one call of f)
        y = f(xv)
        _check_output("laplacian", y, xv, batch_axis)
        re, im = (_nested_of(p(y), xv, batch_axis, weights) for p in (F.real, F.imag))
        out = F.complex(re, im)
        return out if record else out.d
    if weights is not None:
        return _nested_weighted(f, xv, batch_axis, record, weights)
    shape = _per_datum(xv, batch_axis)
    d = int(np.prod(shape))
    xp = array_module_of(xv)
    if not record:

        def total(z: Variable) -> Variable:
            y = f(z)
            _check_output("laplacian", y, xv, batch_axis)
            return F.sum(y)

        e = xp.eye(d, dtype=xv.dtype).reshape((d, *shape))
        if batch_axis == 0:
            e = xp.ascontiguousarray(xp.broadcast_to(e[:, None], (d, *xv.shape)))
        _, hv = hvp(total, xv.d, e)  # (D, *x.shape)
        diag = (hv * e).reshape((d, *xv.shape[:1], -1) if batch_axis == 0 else (d, -1))
        return xp.asarray(diag.sum(axis=(0, -1)))
    y = f(xv)
    _check_output("laplacian", y, xv, batch_axis)
    return _nested_of(y, xv, batch_axis)


def _nested_of(y: Variable, xv: Variable, batch_axis: int | None, weights: Any = None) -> Any:
    """The recorded nested Laplacian of the real output ``y`` of ``f`` at ``xv``."""
    if weights is not None:
        return _nested_weighted_of(y, xv, batch_axis, weights)
    shape = _per_datum(xv, batch_axis)
    d = int(np.prod(shape))
    xp = array_module_of(xv)
    (g,) = grad(F.sum(y), xv)
    flat = F.reshape(g, (xv.shape[0], d) if batch_axis == 0 else (d,))
    acc: Any = None
    for i in range(d):
        gi = flat[:, i] if batch_axis == 0 else flat[i]
        (hi,) = grad(F.sum(gi), xv, allow_unused=True)
        if hi is None:
            continue
        hflat = F.reshape(hi, (xv.shape[0], d) if batch_axis == 0 else (d,))
        term = hflat[:, i] if batch_axis == 0 else hflat[i]
        acc = term if acc is None else acc + term
    if acc is None:
        z = xp.zeros((xv.shape[0],) if batch_axis == 0 else (), dtype=xv.dtype)
        return Variable.from_array(z)
    return acc


def _complex_valued(f: Callable[[Variable], Variable], xv: Variable) -> bool:
    """Whether ``f`` returns complex values for ``xv``'s shape and dtype: a static graph,
    built and not computed (no running statistics move); False if ``f`` cannot be built
    so (then a complex output raises in ``hd.grad``, asking for a cotangent).
    """
    try:
        with auto_forward(False):
            y = f(Variable(tuple(xv.shape), dtype=xv.dtype))
    except Exception:
        return False
    return isinstance(y, Variable) and y.dtype.kind == "c"


def _nested_weighted(
    f: Callable[[Variable], Variable], xv: Variable, batch_axis: int | None, record: bool, s: Any
) -> Any:
    """``sum_r s_r^T H s_r`` by one Hessian-vector product per column ``s_r`` of ``S``."""
    xp = array_module_of(xv)
    cols = _columns(xp, s, xv, batch_axis)  # (R, *x.shape)
    axes = tuple(range(1 if batch_axis == 0 else 0, xv.ndim))
    if not record:

        def total(z: Variable) -> Variable:
            y = f(z)
            _check_output("laplacian", y, xv, batch_axis)
            return F.sum(y)

        _, hv = hvp(total, xv.d, cols)  # (R, *x.shape)
        return xp.asarray((hv * cols).sum(axis=tuple(a + 1 for a in axes)).sum(axis=0))
    y = f(xv)
    _check_output("laplacian", y, xv, batch_axis)
    return _nested_weighted_of(y, xv, batch_axis, s)


def _nested_weighted_of(y: Variable, xv: Variable, batch_axis: int | None, s: Any) -> Any:
    """The recorded ``sum_r s_r^T H s_r`` of the real output ``y`` of ``f`` at ``xv``."""
    xp = array_module_of(xv)
    cols = _columns(xp, s, xv, batch_axis)  # (R, *x.shape)
    axes = tuple(range(1 if batch_axis == 0 else 0, xv.ndim))
    (g,) = grad(F.sum(y), xv)
    acc: Any = None
    for c in cols:
        (hc,) = grad(F.sum(g * c), xv, allow_unused=True)
        if hc is None:
            continue
        term = F.sum(hc * c, axis=axes) if axes else hc * c
        acc = term if acc is None else acc + term
    if acc is None:
        z = xp.zeros((xv.shape[0],) if batch_axis == 0 else (), dtype=xv.dtype)
        return Variable.from_array(z)
    return F.reshape(acc, (xv.shape[0],) if batch_axis == 0 else ())


def _nested_symbolic(
    f: Callable[[Variable], Variable], xv: Variable, batch_axis: int | None, s: Any
) -> Variable:
    """Inside ``hd.jit``: ``sum_r e_r^T H e_r`` over the unit directions ``e_r`` (or the
    columns of ``S``), every ``H e_r`` from one batched Hessian-vector product (``hd.hvp``
    with ``R`` directions: ``hd.vmap`` of the recorded pass), so that the compiled graph
    does not grow with ``D``.
    """
    xp = array_module_of(xv)
    if s is not None:
        dirs = _columns(xp, s, xv, batch_axis)  # (R, *x.shape)
    else:
        shape = _per_datum(xv, batch_axis)
        d = int(np.prod(shape))
        dirs = xp.eye(d, dtype=xv.dtype).reshape((d, *shape))
        if batch_axis == 0:
            dirs = xp.ascontiguousarray(xp.broadcast_to(dirs[:, None], (d, *xv.shape)))

    def total(z: Variable) -> Variable:
        y = f(z)
        _check_output("laplacian", y, xv, batch_axis)
        return F.sum(y)

    _, hv = hvp(total, xv, dirs)  # (R, *x.shape)
    first = 1 if batch_axis == 0 else 0
    axes = (0, *range(first + 1, xv.ndim + 1))
    return F.sum(hv * dirs, axis=axes)  # type: ignore[no-any-return]
