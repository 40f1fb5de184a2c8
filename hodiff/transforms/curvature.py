"""Curvature of a loss from Hessian-vector products: eigenvalues, trace and spectral density.

Every tool here sees the Hessian ``H = d^2 loss / d params^2`` only through
products ``H v``. The gradient graph ``g = hd.grad(loss, params)`` is recorded
once; each product is then one plain reverse pass over it seeded with ``v``
(``H v = (dg/dparams)^T v``, :class:`hodiff.engine.api.Pullback`), so nothing is
re-recorded and the forward pass is not re-run. Batch normalization (or any
other function of the whole batch) is differentiated exactly like the rest of
the graph: the Hessian is that of the loss as computed, batch statistics
included.

* :func:`eigenvalues`: the ``k`` largest (``"LA"``), smallest (``"SA"``) or
  largest-magnitude (``"LM"``) eigenvalues and their eigenvectors, by Lanczos
  with full reorthogonalization and thick restarts.
* :func:`trace`: Hutchinson's estimate ``tr H ~ mean_s z_s^T H z_s`` with
  Rademacher probes ``z_s``, its standard error, per parameter on request.
* :func:`density`: the spectral density ``phi(t) = 1/n sum_i delta(t - lambda_i)``
  smoothed by a Gaussian of width ``sigma``, by stochastic Lanczos quadrature.
* :func:`plot_density`: a picture of it (matplotlib, extra ``plot``).

``params`` is a Variable, a list of them or a dict name -> Variable; the
parameters are flattened and concatenated in that order (vector length
``n = sum(p.size)``). ``loss`` is a scalar Variable computed from them, or a
callable ``loss(batch)`` together with ``data=`` (an iterable of batches): the
Hessian is then the mean of the batches' Hessians (equal weights), each
batch's gradient graph recorded once and kept for all products (memory: one
graph per batch). Vector arithmetic runs in float64 in the parameters' array
module (numpy or cupy); only the small projected matrices go to numpy.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.autograd import grad
from hodiff.engine.context import array_module
from hodiff.engine.variable import Variable
from hodiff.transforms.derivatives import Pullback, evaluate, graph_mode
from hodiff.transforms.vectorize import refuse_batched

__all__ = ["Estimate", "density", "eigenvalues", "plot_density", "trace"]

WHICH = ("LA", "SA", "LM")

#: why a batched variable (inside ``hd.vmap``) is refused
_NOT_PER_EXAMPLE = (
    "curvature is computed on arrays, by iterations that read values and stop on them, and "
    "returned as arrays, so it has no per-example form inside vmap (per example, use "
    "hd.vmap of hd.hessian or hd.hvp: docs/vmap.md)"
)


# ---------------------------------------------------------------- the Hessian operator
def _param_list(name: str, params: Any) -> tuple[list[Any], list[Variable], str]:
    """``(keys, variables, kind)`` of ``params``: kind is "variable", "list" or "dict"."""
    if isinstance(params, Variable):
        keys: list[Any] = [0]
        ps = [params]
        kind = "variable"
    elif isinstance(params, dict):
        keys, ps, kind = list(params), list(params.values()), "dict"
    elif isinstance(params, list | tuple):
        keys, ps, kind = list(range(len(params))), list(params), "list"
    else:
        raise TypeError(
            f"{name}: params must be a Variable, a list or a dict of Variables, "
            f"got {type(params).__name__}"
        )
    if not ps:
        raise ValueError(f"{name}: params is empty")
    for key, p in zip(keys, ps, strict=True):
        label = "params" if kind == "variable" else f"params[{key!r}]"
        if not isinstance(p, Variable):
            raise TypeError(f"{name}: {label} must be a hodiff.Variable, got {type(p).__name__}")
        if p.dtype.kind != "f":
            raise TypeError(f"{name}: {label} has dtype {p.dtype}; curvature needs float params")
        if not p.need_grad:
            raise ValueError(
                f"{name}: {label} (shape {p.shape}) has need_grad=False; the loss cannot be "
                "differentiated with respect to it"
            )
    return keys, ps, kind


class _Hessian:
    """``v -> H v`` on flat float64 vectors, over one or several recorded gradient graphs."""

    def __init__(self, name: str, loss: Any, params: Any, data: Iterable[Any] | None) -> None:
        self.name = name
        if data is None:
            refuse_batched(name, "loss", loss, _NOT_PER_EXAMPLE)
        refuse_batched(name, "params", params, _NOT_PER_EXAMPLE)
        self.keys, self.params, self.kind = _param_list(name, params)
        self.pullbacks: list[Pullback] = []
        if data is None:
            if not isinstance(loss, Variable):
                hint = (
                    " (pass data= to average a callable loss over batches)"
                    if callable(loss)
                    else ""
                )
                raise TypeError(
                    f"{name}: loss must be a scalar hodiff.Variable, got {type(loss).__name__}"
                    + hint
                )
            self._record(loss, "loss")
        else:
            if isinstance(loss, Variable) or not callable(loss):
                raise TypeError(
                    f"{name}: with data=, loss must be a callable loss(batch) -> Variable, "
                    f"got {type(loss).__name__}"
                )
            for i, batch in enumerate(data):
                with graph_mode():
                    value = loss(batch)
                if not isinstance(value, Variable):
                    raise TypeError(
                        f"{name}: loss(batch) must return a hodiff.Variable, got "
                        f"{type(value).__name__} for batch {i}"
                    )
                refuse_batched(name, f"loss(batch {i})", value, _NOT_PER_EXAMPLE)
                self._record(value, f"loss(batch {i})")
            if not self.pullbacks:
                raise ValueError(f"{name}: data has no batches")
        self.sizes = [p.size for p in self.params]
        self.offsets = [0, *np.cumsum(self.sizes).tolist()]
        self.n = int(self.offsets[-1])
        self.xp = array_module(self.params[0].d)
        self.n_matvec = 0

    def _record(self, loss: Variable, what: str) -> None:
        if loss.size != 1:
            raise ValueError(
                f"{self.name}: {what} must be a scalar (size 1), got shape {loss.shape}"
            )
        if api.value_of(loss) is None:  # built in static mode and not computed yet
            api.forward([loss])
        with graph_mode():
            try:
                gs = grad(loss, self.params)
            except ValueError as e:
                if "do not depend on inputs[" not in str(e):
                    raise
                i = int(str(e).split("inputs[")[1].split("]")[0])
                key = self.keys[i]
                label = "params" if self.kind == "variable" else f"params[{key!r}]"
                raise ValueError(
                    f"{self.name}: {what} does not depend on {label} (shape {self.params[i].shape})"
                ) from None
            pullback = Pullback(gs, self.params)
            evaluate(pullback.roots)
        self.pullbacks.append(pullback)

    def split(self, v: Any) -> list[Any]:
        """A flat vector as one array per parameter (its shape, its gradient dtype)."""
        return [
            v[a:b].reshape(p.shape).astype(api.grad_dtype(p), copy=False)
            for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:], strict=True)
        ]

    def __call__(self, v: Any) -> Any:
        seeds = self.split(v)
        out = None
        for pullback in self.pullbacks:
            hv = self.xp.concatenate([h.reshape(-1) for h in pullback(seeds)]).astype(np.float64)
            out = hv if out is None else out + hv
        self.n_matvec += 1
        assert out is not None
        return out / len(self.pullbacks) if len(self.pullbacks) > 1 else out

    def shaped(self, v: Any) -> Any:
        """A flat vector in the structure of ``params`` (array, list or dict of arrays)."""
        pieces = self.split(v)
        if self.kind == "variable":
            return pieces[0]
        if self.kind == "dict":
            return dict(zip(self.keys, pieces, strict=True))
        return pieces


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def _rademacher(xp: Any, rng: np.random.Generator, n: int) -> Any:
    return xp.asarray(rng.integers(0, 2, size=n) * 2.0 - 1.0)


# ---------------------------------------------------------------- Lanczos
class _Krylov:
    """An orthonormal basis ``V`` (rows) and the projection ``T = V H V^T``, grown by Lanczos.

    Full reorthogonalization (classical Gram-Schmidt, twice) keeps ``V``
    orthonormal to rounding, so ``T`` is exactly the projection of ``H`` and
    ``H V^T = V^T T + r e_last^T``: the residual of every Ritz pair is
    ``|beta| |s_last|`` with ``beta = ||r||``. When the Krylov space becomes
    invariant (``beta`` ~ 0), a fresh random vector orthogonal to ``V`` is
    started (``restart_on_breakdown``) or the growth stops.
    """

    def __init__(self, op: _Hessian, m: int, rng: np.random.Generator) -> None:
        self.op = op
        self.xp = op.xp
        self.rng = rng
        self.V = self.xp.zeros((m, op.n), dtype=np.float64)
        self.T = np.zeros((m, m))
        self.size = 0  # rows of V in use
        self.h_norm = 0.0  # running estimate of ||H||
        self.dropped = 0.0  # largest residual dropped at a breakdown

    def _orthogonalize(self, w: Any, j: int) -> tuple[Any, np.ndarray]:
        basis = self.V[:j]
        h = basis @ w
        w = w - h @ basis
        h2 = basis @ w
        w = w - h2 @ basis
        return w, _host(h + h2)

    def random_unit(self) -> Any:
        v = self.xp.asarray(self.rng.standard_normal(self.op.n))
        if self.size:
            v, _ = self._orthogonalize(v, self.size)
        return v / self.xp.linalg.norm(v)

    def grow(self, v: Any, m: int, restart_on_breakdown: bool) -> tuple[Any, float]:
        """Appends ``v`` and Lanczos vectors until ``m`` rows; returns ``(r, ||r||)``."""
        xp = self.xp
        n = self.op.n
        while self.size < m:
            j = self.size
            self.V[j] = v
            w = self.op(v)
            self.h_norm = max(self.h_norm, float(xp.linalg.norm(w)))
            w, h = self._orthogonalize(w, j + 1)
            self.T[: j + 1, j] = h
            self.T[j, : j + 1] = h
            self.size = j + 1
            beta = float(xp.linalg.norm(w))
            if beta <= 1e-10 * max(self.h_norm, 1e-300):  # invariant subspace
                self.dropped = max(self.dropped, beta)
                if self.size == n or not restart_on_breakdown:
                    return xp.zeros(n, dtype=np.float64), 0.0
                v = self.random_unit()
                continue
            v = w / beta
        return v * beta, beta

    def ritz(self) -> tuple[np.ndarray, np.ndarray]:
        t = self.T[: self.size, : self.size]
        return np.linalg.eigh((t + t.T) / 2)


def _order(theta: np.ndarray, which: str) -> np.ndarray:
    if which == "LA":
        return np.argsort(-theta, kind="stable")
    if which == "SA":
        return np.argsort(theta, kind="stable")
    return np.argsort(-np.abs(theta), kind="stable")


def eigenvalues(
    loss: Variable | Callable[[Any], Variable],
    params: Any,
    k: int = 1,
    which: str = "LA",
    tol: float = 1e-6,
    seed: int = 0,
    *,
    data: Iterable[Any] | None = None,
    ncv: int | None = None,
    max_restarts: int = 1000,
) -> tuple[np.ndarray, list[Any]]:
    """The ``k`` extreme eigenvalues of the Hessian of ``loss`` and their eigenvectors.

    Thick-restart Lanczos with full reorthogonalization on products ``H v``
    (one reverse pass each over a gradient graph recorded once): a Krylov
    basis of ``ncv`` vectors is grown, the Ritz pairs of ``T = V H V^T`` are
    computed, and if the wanted ones have not converged the basis restarts
    from them (plus the last residual direction). A Ritz pair ``(theta, y)``
    is accepted when ``||H y - theta y|| <= tol * max|theta|``; the eigenvalue
    error is then at most that residual (and usually its square over the gap).
    When ``n <= ncv`` the basis spans the whole space and the result is exact
    to rounding, repeated eigenvalues included. For ``n > ncv``, as with any
    single-vector Krylov method (ARPACK's ``eigsh``), an eigenvalue of
    multiplicity ``> 1`` may be returned fewer times than it occurs.

    Args:
        loss: a scalar Variable computed from ``params``; or, with ``data``, a
            callable ``loss(batch) -> Variable``.
        params: a Variable, a list of them or a dict name -> Variable (need_grad).
        k: how many eigenvalues, ``1 <= k <= n``.
        which: ``"LA"`` largest algebraic, ``"SA"`` smallest algebraic,
            ``"LM"`` largest magnitude.
        tol: relative residual tolerance.
        seed: of the random start vector.
        data: an iterable of batches: the Hessian is the mean of ``loss(batch)``'s.
        ncv: basis size (default ``min(n, max(2k + 20, 40))``).
        max_restarts: restarts before giving up with a RuntimeError.

    Returns:
        ``(values, vectors)``: a float64 numpy array of the ``k`` eigenvalues in
        descending order, and a list of ``k`` unit eigenvectors (in the same
        order), each shaped like ``params`` (an array, a list or a dict of arrays).

    Raises:
        ValueError: bad ``k``/``which``/``tol``, a parameter without need_grad or
            that the loss does not depend on, a non-scalar loss.
        RuntimeError: no convergence within ``max_restarts`` restarts.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.curvature import eigenvalues
    >>> w = hd.Variable.from_array(np.array([1.0, 2.0, 3.0]), need_grad=True)
    >>> values, vectors = eigenvalues(F.sum(w ** 4) / 12, w, k=2)   # H = diag(w^2)
    >>> np.round(values, 10)
    array([9., 4.])
    >>> np.round(np.abs(vectors[0]), 10)
    array([0., 0., 1.])

    """
    name = "curvature.eigenvalues"
    if which not in WHICH:
        raise ValueError(f"{name}: which must be one of {WHICH}, got {which!r}")
    if not (isinstance(tol, int | float) and tol > 0):
        raise ValueError(f"{name}: tol must be a positive number, got {tol!r}")
    op = _Hessian(name, loss, params, data)
    n = op.n
    if not isinstance(k, int | np.integer) or not 1 <= k <= n:
        raise ValueError(
            f"{name}: k must be an integer in [1, {n}] (the number of parameters), got {k!r}"
        )
    k = int(k)
    m = min(n, max(2 * k + 20, 40)) if ncv is None else int(ncv)
    if not (k < m <= n or m == n):
        raise ValueError(f"{name}: ncv must satisfy k < ncv <= n ({k} < ncv <= {n}), got {m}")
    rng = np.random.default_rng(seed)
    kry = _Krylov(op, m, rng)
    v = kry.random_unit()
    for _ in range(max_restarts + 1):
        r, beta = kry.grow(v, m, restart_on_breakdown=True)
        theta, s = kry.ritz()
        idx = _order(theta, which)
        wanted = idx[:k]
        scale = max(float(np.max(np.abs(theta))), kry.h_norm * 1e-12, 1e-300)
        resid = beta * np.abs(s[-1, wanted]) + kry.dropped
        if kry.size == n or bool(np.all(resid <= tol * scale)):
            break
        # thick restart: keep the wanted Ritz vectors and as many more, then the residual
        keep = min(kry.size - 1, k + (kry.size - k) // 2)
        kept = idx[:keep]
        xp = kry.xp
        kry.V[:keep] = xp.asarray(s[:, kept].T) @ kry.V[: kry.size]
        kry.T[:] = 0.0
        kry.T[np.arange(keep), np.arange(keep)] = theta[kept]
        kry.size = keep
        v = r / beta
    else:
        raise RuntimeError(
            f"{name}: Lanczos did not converge in {max_restarts} restarts (largest relative "
            f"residual {float(np.max(resid)) / scale:.2e} > tol={tol:g}); raise ncv or tol"
        )
    wanted = wanted[np.argsort(-theta[wanted], kind="stable")]
    ys = kry.xp.asarray(s[:, wanted].T) @ kry.V[: kry.size]
    vectors = [op.shaped(y / kry.xp.linalg.norm(y)) for y in ys]
    return theta[wanted].astype(np.float64), vectors


# ---------------------------------------------------------------- trace
class Estimate(float):
    """A float (the estimate) that also carries its standard error.

    It unpacks (and indexes) as the pair ``(value, stderr)``: ``value, stderr =
    estimate``; ``.stderr`` and ``.n_samples`` are attributes.
    """

    stderr: float
    n_samples: int

    def __new__(cls, value: float, stderr: float, n_samples: int) -> Estimate:
        self = super().__new__(cls, value)
        self.stderr = float(stderr)
        self.n_samples = int(n_samples)
        return self

    def __iter__(self) -> Any:
        return iter((float(self), self.stderr))

    def __getitem__(self, i: int) -> float:
        return (float(self), self.stderr)[i]

    def __len__(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"Estimate({float(self)!r}, stderr={self.stderr!r})"


def _estimate(samples: np.ndarray) -> Estimate:
    n = samples.size
    err = float(np.std(samples, ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    return Estimate(float(np.mean(samples)), err, n)


def trace(
    loss: Variable | Callable[[Any], Variable],
    params: Any,
    n_samples: int = 100,
    seed: int = 0,
    per_param: bool = False,
    *,
    data: Iterable[Any] | None = None,
) -> Any:
    """Hutchinson's estimate of the Hessian trace, with its standard error.

    ``tr H = E[z^T H z]`` for Rademacher ``z`` (entries ``+-1`` with equal
    probability). The estimate is the mean of ``z_s^T H z_s`` over
    ``n_samples`` probes (one ``H z`` each) and the standard error is the
    sample standard deviation over ``sqrt(n_samples)``. The variance of one
    sample is ``2 sum_{i != j} H_ij^2``: a diagonal Hessian is estimated exactly.
    With ``per_param=True`` the trace of each parameter's diagonal block
    ``tr H_pp = E[z_p^T (H z)_p]`` is estimated from the same probes.

    Args:
        loss: a scalar Variable computed from ``params``; or, with ``data``, a
            callable ``loss(batch) -> Variable``.
        params: a Variable, a list of them or a dict name -> Variable (need_grad).
        n_samples: number of probes (the standard error needs 2 or more; with 1
            it is ``inf``).
        seed: of the probes.
        per_param: return one estimate per parameter.
        data: an iterable of batches: the Hessian is the mean of ``loss(batch)``'s.

    Returns:
        An :class:`Estimate` (a float with ``.stderr``; it unpacks as
        ``(value, stderr)``), or with ``per_param=True`` a dict key -> Estimate,
        keyed by the dict's names (a list's indices; ``0`` for one Variable).

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.curvature import trace
    >>> w = hd.Variable.from_array(np.array([1.0, 2.0, 3.0]), need_grad=True)
    >>> value, stderr = trace(F.sum(w ** 4) / 12, w, n_samples=10)   # diag(w^2): exact
    >>> round(value, 10), stderr
    (14.0, 0.0)

    """
    name = "curvature.trace"
    if not isinstance(n_samples, int | np.integer) or n_samples < 1:
        raise ValueError(f"{name}: n_samples must be a positive integer, got {n_samples!r}")
    op = _Hessian(name, loss, params, data)
    rng = np.random.default_rng(seed)
    per = np.empty((int(n_samples), len(op.params)))
    for s in range(int(n_samples)):
        z = _rademacher(op.xp, rng, op.n)
        zhz = z * op(z)
        for i, (a, b) in enumerate(zip(op.offsets[:-1], op.offsets[1:], strict=True)):
            per[s, i] = float(zhz[a:b].sum())
    if per_param:
        return {key: _estimate(per[:, i]) for i, key in enumerate(op.keys)}
    return _estimate(per.sum(axis=1))


# ---------------------------------------------------------------- density
def _trapezoid(values: np.ndarray, grid: np.ndarray) -> float:
    return float(np.sum((values[1:] + values[:-1]) * np.diff(grid)) / 2)


def density(
    loss: Variable | Callable[[Any], Variable],
    params: Any,
    n_probes: int = 10,
    n_steps: int = 80,
    grid: Any = None,
    sigma: float | None = None,
    seed: int = 0,
    *,
    data: Iterable[Any] | None = None,
    n_grid: int = 1000,
) -> tuple[np.ndarray, np.ndarray]:
    """The Hessian's spectral density by stochastic Lanczos quadrature (SLQ).

    The density ``phi(t) = 1/n sum_i delta(t - lambda_i)``, smoothed by a
    Gaussian ``g_sigma``, equals ``E_v[v^T g_sigma(t - H) v]`` for a random unit
    ``v``. For each of ``n_probes`` normalized Rademacher vectors, ``n_steps``
    Lanczos steps (full reorthogonalization) give a tridiagonal ``T`` with
    eigenpairs ``(theta_j, s_j)``; the Gauss quadrature ``sum_j s_j[0]^2
    g_sigma(t - theta_j)`` estimates ``v^T g_sigma(t - H) v``, and the result is
    the mean over probes. The weights ``s_j[0]^2`` of one probe sum to 1. When
    ``n_steps >= n`` (or the Krylov space becomes invariant) the nodes are
    exact eigenvalues.

    Args:
        loss: a scalar Variable computed from ``params``; or, with ``data``, a
            callable ``loss(batch) -> Variable``.
        params: a Variable, a list of them or a dict name -> Variable (need_grad).
        n_probes: number of random start vectors.
        n_steps: Lanczos steps per probe (capped at ``n``).
        grid: points ``t`` (1-d, increasing) to evaluate the density at; default
            ``n_grid`` points from ``min theta - 5 sigma`` to ``max theta + 5 sigma``.
        sigma: width of the Gaussian; default 1% of the spread of the nodes
            (``max |theta|`` if they are all equal).
        seed: of the probes.
        data: an iterable of batches: the Hessian is the mean of ``loss(batch)``'s.
        n_grid: length of the default grid.

    Returns:
        ``(grid, values)``: float64 numpy arrays of equal length, normalized so
        that the trapezoidal integral of ``values`` over ``grid`` is 1 (on a
        user grid that misses part of the spectrum this renormalizes what is
        left, with a warning).

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.curvature import density
    >>> w = hd.Variable.from_array(np.array([1.0, 2.0, 3.0]), need_grad=True)
    >>> t, phi = density(F.sum(w ** 4) / 12, w, sigma=0.05)   # eigenvalues 1, 4, 9
    >>> round(float(np.sum((phi[1:] + phi[:-1]) * np.diff(t)) / 2), 10)
    1.0
    >>> near_4 = (t > 3.8) & (t < 4.2)                          # a third of the mass
    >>> round(float(np.sum(phi[near_4]) * (t[1] - t[0])), 2)
    0.33

    """
    name = "curvature.density"
    grid = _density_args(name, n_probes, n_steps, n_grid, sigma, grid)
    op = _Hessian(name, loss, params, data)
    theta_all, w_all = _quadrature(op, int(n_probes), int(n_steps), seed)
    lo, hi = float(theta_all.min()), float(theta_all.max())
    if sigma is None:
        sigma = 0.01 * (hi - lo) if hi > lo else 0.01 * max(abs(hi), 1e-12)
    if grid is None:
        grid = np.linspace(lo - 5 * sigma, hi + 5 * sigma, int(n_grid))
    values = np.zeros_like(grid)
    norm = 1.0 / (sigma * math.sqrt(2 * math.pi))
    for t, w in zip(theta_all, w_all, strict=True):
        values += w * norm * np.exp(-0.5 * ((grid - t) / sigma) ** 2)
    mass = _trapezoid(values, grid)
    if not mass > 0:
        raise ValueError(
            f"{name}: the grid [{grid[0]:g}, {grid[-1]:g}] misses the spectrum [{lo:g}, {hi:g}]"
        )
    if mass < 0.99:
        warnings.warn(
            f"{name}: the grid holds {mass:.1%} of the density's mass; the values are "
            "renormalized to integrate to 1 over it",
            stacklevel=2,
        )
    return grid, values / mass


def _density_args(
    name: str, n_probes: Any, n_steps: Any, n_grid: Any, sigma: Any, grid: Any
) -> np.ndarray | None:
    """Checks :func:`density`'s arguments (ValueError naming the first wrong one); returns
    ``grid`` as a float64 numpy copy (None: the default grid).
    """
    for arg, value in (("n_probes", n_probes), ("n_steps", n_steps), ("n_grid", n_grid)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name}: {arg} must be a positive integer, got {value!r}")
    if sigma is not None and not sigma > 0:
        raise ValueError(f"{name}: sigma must be positive, got {sigma!r}")
    if grid is None:
        return None
    refuse_batched(name, "grid", grid, _NOT_PER_EXAMPLE)
    grid = np.array(_host(grid), dtype=np.float64)  # a copy: the caller keeps theirs
    if grid.ndim != 1 or grid.size < 2 or np.any(np.diff(grid) <= 0):
        raise ValueError(
            f"{name}: grid must be a 1-d increasing array of 2 or more points, "
            f"got shape {grid.shape}"
        )
    return grid


def _quadrature(
    op: _Hessian, n_probes: int, n_steps: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The Gauss quadrature of ``n_probes`` Lanczos runs of ``n_steps`` (at most ``n``) from
    normalized Rademacher vectors: all the nodes ``theta_j`` and their weights ``s_j[0]^2 /
    n_probes`` (each probe's sum to ``1 / n_probes``).
    """
    rng = np.random.default_rng(seed)
    m = min(n_steps, op.n)
    nodes, weights = [], []
    for _ in range(n_probes):
        kry = _Krylov(op, m, rng)
        v = _rademacher(op.xp, rng, op.n)
        kry.grow(v / math.sqrt(op.n), m, restart_on_breakdown=False)
        theta, s = kry.ritz()
        nodes.append(theta)
        weights.append(s[0] ** 2)
    return np.concatenate(nodes), np.concatenate(weights) / n_probes


def plot_density(
    grid: Any,
    values: Any,
    path: str | os.PathLike[str],
    *,
    eigenvalues: Any = None,
    sigma: float | None = None,
    log: bool = True,
    title: str | None = None,
) -> str:
    """Saves a picture of a spectral density from :func:`density` to ``path``.

    Needs matplotlib (``pip install -e ".[plot]"`` in the source checkout). The density is
    drawn on a logarithmic axis by default (a Hessian spectrum is a bulk near zero and a
    few outliers); ``eigenvalues`` (e.g. of a dense Hessian) are marked below
    the curve for comparison and, with ``sigma``, also drawn as their exact
    density smoothed by the same Gaussian (dashed). The format follows the
    file's suffix.

    Args:
        grid: the ``t`` values.
        values: the density at ``grid``.
        path: the file to write (exactly this path).
        eigenvalues: optional exact eigenvalues to mark.
        sigma: the Gaussian width :func:`density` used, to draw the exact density.
        log: logarithmic density axis.
        title: the figure's title.

    Returns:
        ``path`` as a string.
    """
    refuse_batched("curvature.plot_density", "grid", grid, "a picture has no per-example form")
    refuse_batched("curvature.plot_density", "values", values, "a picture has no per-example form")
    refuse_batched(
        "curvature.plot_density", "eigenvalues", eigenvalues, "a picture has no per-example form"
    )
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            "curvature.plot_density needs matplotlib, an optional dependency: "
            'pip install matplotlib, or pip install -e ".[plot]" in the hodiff source checkout'
        ) from e
    grid = np.asarray(grid, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if grid.shape != values.shape or grid.ndim != 1:
        raise ValueError(
            f"curvature.plot_density: grid of shape {grid.shape} and values of "
            f"shape {values.shape} must be 1-d and of equal length"
        )
    fig, ax = plt.subplots(figsize=(7, 4))
    floor = max(float(values.max()) * 1e-8, 1e-300)
    ax.plot(
        grid,
        np.maximum(values, floor) if log else values,
        color="C0",
        lw=1.5,
        label="density (stochastic Lanczos quadrature)",
    )
    if log:
        ax.set_yscale("log")
        ax.set_ylim(floor * 10, float(values.max()) * 3)
    if eigenvalues is not None:
        ev = np.asarray(eigenvalues, dtype=np.float64).reshape(-1)
        if sigma is not None:
            exact = np.exp(-0.5 * ((grid[:, None] - ev[None, :]) / sigma) ** 2).sum(axis=1)
            exact /= _trapezoid(exact, grid)
            ax.plot(
                grid,
                np.maximum(exact, floor) if log else exact,
                "--",
                color="C1",
                lw=1.2,
                label="exact eigenvalues, same smoothing",
            )
        ax.plot(
            ev,
            np.full(ev.shape, floor * 30 if log else 0.0),
            "|",
            color="C3",
            markersize=12,
            label=f"exact eigenvalues ({ev.size})",
        )
    ax.set_xlabel("eigenvalue")
    ax.set_ylabel("density")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper right")
    fig.tight_layout()
    path = os.fspath(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
