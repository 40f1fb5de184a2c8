"""The scipy bridge: hodiff derivatives for ``scipy.optimize`` and ``scipy.sparse.linalg``.

* :class:`Objective` turns a hodiff scalar function of a flat parameter vector
  into ``fun``, ``jac``, ``hessp`` (and a dense ``hess``) for
  ``scipy.optimize.minimize``. The value and the gradient at a point share one
  forward pass, and every ``hessp`` at that point reuses one recorded gradient
  graph (one reverse pass per product), which is what Newton-CG and trust-ncg
  do: many Hessian-vector products at each iterate.
* :func:`minimize` is ``scipy.optimize.minimize`` with those filled in.
* :class:`HessianOperator` is the Hessian of a loss with respect to a list of
  parameters as a ``scipy.sparse.linalg.LinearOperator`` (for ``eigsh``, ``cg``,
  ``minres``), one reverse pass per product.

scipy is optional: ``pip install -e ".[scipy]"`` in the hodiff source checkout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

try:
    import scipy.optimize
    import scipy.sparse.linalg
except ImportError as e:  # pragma: no cover - exercised by a test that hides scipy
    raise ImportError(
        "hodiff.scipy needs scipy, an optional dependency: pip install scipy, or "
        'pip install -e ".[scipy]" in the hodiff source checkout'
    ) from e

from hodiff.engine import api
from hodiff.engine.autograd import grad
from hodiff.engine.context import array_module
from hodiff.engine.variable import Variable
from hodiff.transforms.derivatives import Pullback, call, check_scalar, evaluate, graph_mode
from hodiff.transforms.vectorize import refuse_batched

__all__ = ["HessianOperator", "Objective", "minimize"]

#: methods of scipy.optimize.minimize that take ``hessp`` / a dense ``hess``
HESSP_METHODS = ("newton-cg", "trust-ncg", "trust-krylov", "trust-constr")
HESS_METHODS = ("dogleg", "trust-exact")


#: why a batched variable (inside ``hd.vmap``) is refused
_NOT_PER_EXAMPLE = (
    "scipy works on numpy arrays and its iterations read values and stop on them, so there "
    "is no per-example form inside vmap"
)


def _numpy(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


class _Point:
    """The graph of ``f`` at one point: value now, gradient and Hessian products on demand."""

    def __init__(
        self,
        f: Callable[..., Variable],
        x: np.ndarray,
        shape: tuple[int, ...],
        dtype: Any,
        name: str = "Objective",
    ) -> None:
        self.x = x.copy()
        with graph_mode():
            self.leaf = Variable.from_array(self.x.reshape(shape).astype(dtype), need_grad=True)
            self.y = call("Objective", f, [self.leaf])
            refuse_batched(
                name,
                "f(x)",
                self.y,
                "f closes over a batched variable of the enclosing hd.vmap; " + _NOT_PER_EXAMPLE,
            )
            check_scalar("Objective", self.y)
            evaluate([self.y])
        self.value = float(_numpy(self.y.d).reshape(()))
        self.grad: np.ndarray | None = None
        self.hvp: Pullback | None = None

    def gradient(self) -> np.ndarray:
        if self.grad is None:  # a plain reverse pass over the graph the value came from
            (g,) = Pullback([self.y], [self.leaf])([None])
            self.grad = _numpy(g).reshape(-1).astype(np.float64)
        return self.grad

    def hessp(self, p: np.ndarray) -> np.ndarray:
        if self.hvp is None:  # the gradient graph, recorded once per point
            with graph_mode():
                (g,) = grad(self.y, self.leaf, allow_unused=True)
                self.hvp = Pullback([g], [self.leaf])
                evaluate(self.hvp.roots)
        xp = array_module(api.value_of(self.leaf))
        v = xp.asarray(np.asarray(p).reshape(self.leaf.shape), dtype=self.leaf.dtype)
        (hv,) = self.hvp([v])
        return _numpy(hv).reshape(-1).astype(np.float64)


class Objective:
    """``fun``, ``jac``, ``hessp`` and ``hess`` of a hodiff scalar function, for scipy.

    ``f`` is called with one Variable holding the parameters (a flat vector, or
    ``shape`` if given) and returns a scalar Variable. The last point is
    cached: ``fun(x)`` then ``jac(x)`` costs one forward and one reverse pass,
    and each ``hessp(x, p)`` one reverse pass over a gradient graph recorded
    once per point. Counters ``n_forward`` (calls of ``f``), ``n_grad`` and
    ``n_hessp`` say what was computed.

    Args:
        f: the objective, ``f(x: Variable) -> Variable`` of size 1.
        shape: shape of the Variable given to ``f`` (default: the flat vector).
        dtype: float dtype of that Variable (default float64, scipy's).

    >>> import numpy as np, scipy.optimize, hodiff.functions as F
    >>> from hodiff.scipy import Objective
    >>> obj = Objective(lambda x: F.sum((x - 3.0) ** 2))
    >>> res = scipy.optimize.minimize(obj.fun, np.zeros(2), jac=obj.jac, hessp=obj.hessp,
    ...                               method="Newton-CG")
    >>> np.round(res.x, 6)
    array([3., 3.])

    """

    def __init__(
        self,
        f: Callable[..., Variable],
        shape: Sequence[int] | None = None,
        dtype: Any = np.float64,
    ) -> None:
        if not callable(f):
            raise TypeError(f"Objective: f must be callable, got {type(f).__name__}")
        self.f = f
        self.shape = None if shape is None else tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        if self.dtype.kind != "f":
            raise TypeError(f"Objective: dtype must be a float dtype, got {self.dtype}")
        self.n_forward = 0
        self.n_grad = 0
        self.n_hessp = 0
        self._point: _Point | None = None
        self._name = "Objective"  # in the messages of what only the first call can detect

    def _at(self, x: Any) -> _Point:
        refuse_batched(self._name, "x", x, _NOT_PER_EXAMPLE)
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"Objective: x must be a flat vector, got shape {x.shape}")
        shape = self.shape if self.shape is not None else x.shape
        if int(np.prod(shape)) != x.size:
            raise ValueError(f"Objective: x of shape {x.shape} does not fit shape {shape}")
        point = self._point
        if point is None or point.x.shape != x.shape or not np.array_equal(point.x, x):
            point = self._point = _Point(self.f, x, shape, self.dtype, self._name)
            self.n_forward += 1
        return point

    def fun(self, x: Any) -> float:
        """``f(x)`` as a float."""
        return self._at(x).value

    def jac(self, x: Any) -> np.ndarray:
        """The gradient of ``f`` at ``x``, flat (shares the forward pass of ``fun(x)``)."""
        point = self._at(x)
        if point.grad is None:
            self.n_grad += 1
        return point.gradient().copy()

    def fun_and_jac(self, x: Any) -> tuple[float, np.ndarray]:
        """``(f(x), gradient)``: for ``minimize(obj.fun_and_jac, x0, jac=True)``."""
        return self.fun(x), self.jac(x)

    def hessp(self, x: Any, p: Any) -> np.ndarray:
        """The Hessian of ``f`` at ``x`` times ``p``, flat."""
        refuse_batched("Objective.hessp", "p", p, _NOT_PER_EXAMPLE)
        p = np.asarray(p, dtype=np.float64)
        point = self._at(x)
        if p.shape != point.x.shape:
            raise ValueError(
                f"Objective.hessp: p of shape {p.shape} does not match x of shape {point.x.shape}"
            )
        self.n_hessp += 1
        return point.hessp(p)

    def hess(self, x: Any) -> np.ndarray:
        """The dense Hessian at ``x`` (one reverse pass per row), for small problems."""
        point = self._at(x)
        n = point.x.size
        return np.stack([point.hessp(e) for e in np.eye(n)])

    def kwargs(self, method: str) -> dict[str, Any]:
        """``fun``/``jac`` and whichever of ``hessp``/``hess`` ``method`` uses."""
        out: dict[str, Any] = {"fun": self.fun, "jac": self.jac}
        if method.lower() in HESSP_METHODS:
            out["hessp"] = self.hessp
        elif method.lower() in HESS_METHODS:
            out["hess"] = self.hess
        return out


def minimize(f: Callable[..., Variable], x0: Any, method: str = "trust-ncg", **kwargs: Any) -> Any:
    """``scipy.optimize.minimize`` of a hodiff scalar function, with hodiff's derivatives.

    ``x0`` may have any shape: ``f`` receives a Variable of that shape, and
    the result's ``x`` has it too. ``jac`` and ``hessp`` (or ``hess`` for
    dogleg/trust-exact) come from an :class:`Objective`; other keyword
    arguments go to scipy.

    Args:
        f: the objective, ``f(x: Variable) -> Variable`` of size 1.
        x0: the starting point.
        method: any method of ``scipy.optimize.minimize`` (default trust-ncg).
        **kwargs: passed to ``scipy.optimize.minimize`` (``tol``, ``options``...).

    Returns:
        scipy's ``OptimizeResult``, with ``x`` reshaped to ``x0``'s shape.

    >>> import numpy as np, hodiff.functions as F
    >>> from hodiff.scipy import minimize
    >>> res = minimize(lambda x: F.sum(F.exp(x) - 2.0 * x), np.zeros(3), tol=1e-10)
    >>> np.allclose(res.x, np.log(2.0))                              # the minimum is at log 2
    True

    """
    name = "hodiff.scipy.minimize"
    refuse_batched(name, "x0", x0, _NOT_PER_EXAMPLE)
    x0 = np.asarray(x0, dtype=np.float64)
    obj = Objective(f, shape=x0.shape)
    obj._name = name
    fns = obj.kwargs(method)
    res = scipy.optimize.minimize(fns.pop("fun"), x0.reshape(-1), method=method, **fns, **kwargs)
    res.x = res.x.reshape(x0.shape)
    return res


class HessianOperator(scipy.sparse.linalg.LinearOperator):
    """The Hessian of ``loss`` with respect to ``params`` as a scipy ``LinearOperator``.

    The parameters are flattened and concatenated in order, so the operator
    is ``n x n`` with ``n = sum(p.size)``. The gradient graph is recorded once,
    at construction; each product ``H @ v`` is one plain reverse pass over it.
    It is symmetric (``H.T is H`` in effect), for ``eigsh``, ``cg``, ``minres``.
    The parameters' ``.g`` and need_grad flags are left as they were. The
    values are those of the graph when the operator was made (in a static
    graph: after a forward pass it runs itself).

    Args:
        loss: a scalar Variable computed from ``params``.
        params: a Variable or a list of them (leaves or intermediate variables).
        allow_unused: a parameter the loss does not depend on gets zero rows
            instead of a ValueError.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> from hodiff.scipy import HessianOperator
    >>> w = hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
    >>> H = HessianOperator(F.sum(w ** 3), [w])          # diag(6 w)
    >>> H @ np.array([1.0, 1.0])
    array([ 6., 12.])

    """

    def __init__(
        self, loss: Variable, params: Variable | Sequence[Variable], allow_unused: bool = False
    ) -> None:
        if not isinstance(loss, Variable):
            raise TypeError(
                f"HessianOperator: loss must be a hodiff.Variable, got {type(loss).__name__}"
            )
        refuse_batched("HessianOperator", "loss", loss, _NOT_PER_EXAMPLE)
        refuse_batched("HessianOperator", "params", params, _NOT_PER_EXAMPLE)
        ps = [params] if isinstance(params, Variable) else list(params)
        for i, p in enumerate(ps):
            if not isinstance(p, Variable):
                raise TypeError(
                    f"HessianOperator: params[{i}] must be a hodiff.Variable, "
                    f"got {type(p).__name__}"
                )
        check_scalar("HessianOperator", loss)
        with graph_mode():
            gs = grad(loss, ps, allow_unused=allow_unused)
            self._pullback = Pullback(gs, ps)
            evaluate(self._pullback.roots)
        self.params = ps
        self._sizes = [p.size for p in ps]
        self._offsets = np.cumsum([0, *self._sizes])
        self.n_matvec = 0
        n = int(self._offsets[-1])
        dtype = np.result_type(*(api.grad_dtype(p) for p in ps))
        super().__init__(dtype=dtype, shape=(n, n))

    # scipy turns its argument into an array before _matvec: a batched one is refused first
    def dot(self, x: Any) -> Any:
        refuse_batched("HessianOperator", "v", x, _NOT_PER_EXAMPLE)
        return super().dot(x)

    def matvec(self, x: Any) -> Any:
        refuse_batched("HessianOperator", "v", x, _NOT_PER_EXAMPLE)
        return super().matvec(x)

    def rmatvec(self, x: Any) -> Any:
        refuse_batched("HessianOperator", "v", x, _NOT_PER_EXAMPLE)
        return super().rmatvec(x)

    def _matvec(self, v: Any) -> np.ndarray:
        v = np.asarray(v).reshape(-1)
        pieces = []
        for p, a, b in zip(self.params, self._offsets[:-1], self._offsets[1:], strict=True):
            xp = array_module(api.value_of(p))
            pieces.append(xp.asarray(v[a:b].reshape(p.shape), dtype=api.grad_dtype(p)))
        hv = self._pullback(pieces)
        self.n_matvec += 1
        return np.concatenate([_numpy(h).reshape(-1) for h in hv]).astype(self.dtype, copy=False)

    def _rmatvec(self, v: Any) -> np.ndarray:
        return self._matvec(v)  # a Hessian is symmetric

    def _adjoint(self) -> HessianOperator:
        return self
