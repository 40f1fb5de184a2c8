"""vjp, jvp, hvp, hessian and jacobian: what research code calls directly.

All five are built on :func:`hodiff.grad` and the plain reverse pass, with no
rule of their own per primitive (``J = df/dx``, ``H = d^2 f/dx^2``):

* ``vjp``: one forward pass, one plain reverse pass seeded with ``v``.
* ``jvp``: ``J v`` by transposing a vjp. The map ``u -> J^T u`` is recorded once
  (``hd.grad`` seeded with a Variable ``u``); it is linear in ``u``, so one plain
  reverse pass over it, seeded with ``v``, gives ``J v`` as the gradient of ``u``.
* ``hvp``: ``mode="rev-rev"`` (default) records ``g = hd.grad(f, x)`` and runs a
  plain reverse pass over ``g``'s graph seeded with ``v`` (``H^T v = H v``);
  ``mode="fwd-rev"`` is forward-over-reverse, the jvp of ``x -> g(x)`` by the
  transpose trick above. On an MLP rev-rev is about twice as fast (see ``docs/hvp.md``).
* ``hessian``/``jacobian``: the graph of ``f`` (and of its gradient) is built
  once; each row is one more plain reverse pass over it, seeded with a unit
  vector. ``jacobian`` switches to columns (reverse passes over the transposed
  graph ``u -> J^T u``) when the output has more elements than the inputs.

In static mode (``hd.auto_forward(False)``) the same graphs are built without
values, computed once by a forward pass, and the reverse passes run on them.

Only the transform's own input copies are differentiated: the reverse passes
(``hodiff.graph.Pullback``) write no ``.g``, so Variables that ``f`` closes over
(weights with ``need_grad=True``) are left as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hodiff import graph
from hodiff.autograd import grad
from hodiff.context import _raw, _recording, array_module, get_auto_forward
from hodiff.variable import Variable

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vjp"]

HVP_MODES = ("rev-rev", "fwd-rev")


# ---------------------------------------------------------------- helpers
@contextlib.contextmanager
def _graph_mode() -> Iterator[None]:
    """Records graphs even inside ``no_grad`` (a transform needs its graph)."""
    token = _recording.set(True)
    raw = _raw.set(False)
    try:
        yield
    finally:
        _raw.reset(raw)
        _recording.reset(token)


def _label(i: int, multi: bool, what: str = "inputs") -> str:
    return f"{what}[{i}]" if multi else what


def _inputs(name: str, inputs: Any) -> tuple[list[Variable], bool]:
    """Fresh float leaves (need_grad) holding ``inputs``' values; and whether it was a tuple."""
    # a list of arrays/Variables is several inputs, as a tuple; a list of numbers is one array
    multi = isinstance(inputs, tuple) or (
        isinstance(inputs, list) and bool(inputs) and all(hasattr(a, "shape") for a in inputs)
    )
    items = list(inputs) if multi else [inputs]
    if not items:
        raise ValueError(f"{name}: inputs is an empty tuple")
    xs = []
    for i, a in enumerate(items):
        if isinstance(a, Variable):
            x = a.unlinked(need_grad=True)
            if x._data is None:
                x._data = a.d
        else:
            x = Variable.from_array(a, need_grad=True)
        if x.dtype.kind != "f":
            raise TypeError(
                f"{name}: {_label(i, multi)} has dtype {x.dtype}; derivatives need float inputs"
            )
        xs.append(x)
    return xs, multi


def _call(name: str, f: Callable[..., Any], xs: Sequence[Variable]) -> Variable:
    if not callable(f):
        raise TypeError(f"{name}: f must be callable, got {type(f).__name__}")
    y = f(*xs)
    if not isinstance(y, Variable):
        raise TypeError(f"{name}: f must return a hodiff.Variable, got {type(y).__name__}")
    return y


def _scalar(name: str, y: Variable) -> None:
    if y.size != 1:
        raise ValueError(
            f"{name}: f must return a scalar (size 1), got an output of shape {y.shape}"
        )


def _xp(xs: Sequence[Variable]) -> Any:
    return array_module(xs[0]._data)


def _directions(
    name: str, v: Any, like: Sequence[Variable], multi: bool, what: str = "inputs"
) -> list[Any]:
    """``v`` as one array per Variable of ``like`` (same shape, gradient dtype)."""
    if multi:
        if not isinstance(v, tuple | list) or len(v) != len(like):
            got = f"{len(v)} arrays" if isinstance(v, tuple | list) else type(v).__name__
            raise ValueError(
                f"{name}: v must be a tuple of {len(like)} arrays (one per input), got {got}"
            )
        items = list(v)
    else:
        items = [v]
    xp = _xp(like)
    out = []
    for i, (a, x) in enumerate(zip(items, like, strict=True)):
        if isinstance(a, Variable):
            a = a.d
        try:
            a = xp.asarray(a, dtype=x._grad_dtype())
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name}: {_label(i, multi, 'v')} is not an array: {e}") from None
        if a.shape != x.shape:
            raise ValueError(
                f"{name}: {_label(i, multi, 'v')} of shape {a.shape} does not match "
                f"{_label(i, multi, what)} of shape {x.shape}"
            )
        out.append(a)
    return out


def _seed_leaf(xp: Any, like: Variable) -> Variable:
    """A need_grad leaf for the transpose trick (its value is irrelevant: all is linear in it)."""
    return Variable.from_array(xp.zeros(like.shape, dtype=like._grad_dtype()), need_grad=True)


def _evaluate(roots: Sequence[Variable]) -> None:
    """Static mode: computes the graphs just built (dynamic mode computed them already)."""
    if not get_auto_forward():
        graph.forward(list(roots))


def _pack(arrays: Sequence[Any], multi: bool) -> Any:
    return tuple(arrays) if multi else arrays[0]


_Pullback = graph.Pullback


def _unit(xp: Any, n: int, i: int, shape: tuple[int, ...], dtype: Any) -> Any:
    e = xp.zeros(n, dtype=dtype)
    e[i] = 1
    return e.reshape(shape)


# ---------------------------------------------------------------- transforms
def vjp(f: Callable[..., Variable], inputs: Any, v: Any) -> tuple[Any, Any]:
    """Vector-Jacobian product ``v^T J`` of ``f`` at ``inputs``, and ``f(inputs)``.

    ``(v^T J)_i = sum_o v_o d f_o / d x_i``: one forward and one reverse pass.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.
        v: an array of the shape of ``f``'s output.

    Returns:
        ``(y, vjp)``: the value of ``f`` and an array of each input's shape (a
        tuple for a tuple of inputs).

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> y, g = hd.vjp(lambda x: x * x, np.array([1.0, 2.0]), np.array([1.0, 10.0]))
    >>> y, g
    (array([1., 4.]), array([ 2., 40.]))

    """
    with _graph_mode():
        xs, multi = _inputs("vjp", inputs)
        y = _call("vjp", f, xs)
        (gy,) = _directions("vjp", v, [y], False, what="the output of f")
        pullback = _Pullback([y], xs)
        _evaluate([y])
        gxs = pullback([gy])
    return y.d, _pack(gxs, multi)


def jvp(f: Callable[..., Variable], inputs: Any, v: Any) -> tuple[Any, Any]:
    """Jacobian-vector product ``J v`` (the directional derivative) of ``f`` at ``inputs``.

    ``(J v)_o = sum_i d f_o / d x_i v_i``, computed by transposing a vjp: the map
    ``u -> J^T u`` is recorded once and is linear in ``u``; its reverse pass
    seeded with ``v`` gives ``J v``. No forward-mode rule is needed.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.
        v: the direction: an array of the input's shape, or a tuple matching ``inputs``.

    Returns:
        ``(y, jvp)``: the value of ``f`` and an array of its shape.

    >>> import numpy as np, hodiff as hd
    >>> hd.jvp(lambda x: x ** 3, np.array([1.0, 2.0]), np.array([1.0, 0.5]))
    (array([1., 8.]), array([3., 6.]))

    """
    with _graph_mode():
        xs, multi = _inputs("jvp", inputs)
        vs = _directions("jvp", v, xs, multi)
        y = _call("jvp", f, xs)
        u = _seed_leaf(_xp(xs), y)
        ws = grad(y, xs, grad_outputs=[u], allow_unused=True)  # J_i^T u, linear in u
        pullback = _Pullback(ws, [u])
        _evaluate([y, *pullback.roots])
        (jv,) = pullback(vs)
    return y.d, jv


def hvp(f: Callable[..., Variable], inputs: Any, v: Any, mode: str = "rev-rev") -> tuple[Any, Any]:
    """Hessian-vector product ``H v`` of a scalar ``f`` at ``inputs``, and ``f(inputs)``.

    ``(H v)_i = sum_j d^2 f / (d x_i d x_j) v_j``. The Hessian is never formed.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a scalar Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.
        v: an array of the input's shape, or a tuple matching ``inputs``.
        mode: ``"rev-rev"`` (default: reverse-over-reverse, a plain reverse pass
            over the recorded gradient graph) or ``"fwd-rev"`` (forward-over-reverse:
            the jvp of the gradient, by the transpose trick); rev-rev is faster.

    Returns:
        ``(y, Hv)``: the value of ``f`` and an array of each input's shape (a
        tuple for a tuple of inputs).

    Raises:
        ValueError: ``f`` is not scalar, ``v`` does not match, or ``mode`` is unknown.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> y, hv = hd.hvp(lambda x: F.sum(x ** 3), np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    >>> hv                                  # H = diag(6 x)
    array([ 6., 12.])

    """
    if mode not in HVP_MODES:
        raise ValueError(f"hvp: mode must be one of {HVP_MODES}, got {mode!r}")
    with _graph_mode():
        xs, multi = _inputs("hvp", inputs)
        vs = _directions("hvp", v, xs, multi)
        y = _call("hvp", f, xs)
        _scalar("hvp", y)
        gs = grad(y, xs, allow_unused=True)
        if mode == "rev-rev":
            pullback = _Pullback(gs, xs)  # sum_j (d g_j / dx)^T v_j = H v
        else:
            xp = _xp(xs)
            us = [_seed_leaf(xp, x) for x in xs]
            ws = grad(gs, xs, grad_outputs=us, allow_unused=True)  # H^T u, linear in u
            pullback = _Pullback(ws, us)  # d(H^T u)/du applied to v = H v
        _evaluate([y, *pullback.roots])
        hv = pullback(vs)
    return y.d, _pack(hv, multi)


def hessian(f: Callable[..., Variable], inputs: Any) -> Any:
    """The full Hessian of a scalar ``f`` at ``inputs``.

    The gradient graph is built once; each row is one reverse pass over it.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a scalar Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.

    Returns:
        For one input, an array of shape ``x.shape + x.shape``; for a tuple, a
        tuple of tuples of blocks ``H[i][j]`` of shape ``x_i.shape + x_j.shape``.

    Raises:
        ValueError: ``f`` does not return a scalar.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> hd.hessian(lambda x: F.sum(x ** 3) + F.sum(x) ** 2, np.array([1.0, 2.0]))
    array([[ 8.,  2.],
           [ 2., 14.]])

    """
    with _graph_mode():
        xs, multi = _inputs("hessian", inputs)
        y = _call("hessian", f, xs)
        _scalar("hessian", y)
        gs = grad(y, xs, allow_unused=True)
        pullbacks = [_Pullback([g], xs) for g in gs]
        _evaluate([y, *gs])
        xp = _xp(xs)
        blocks = [
            [xp.empty((xi.size, xj.size), dtype=xi._grad_dtype()) for xj in xs] for xi in xs
        ]
        for i, (xi, pullback) in enumerate(zip(xs, pullbacks, strict=True)):
            dtype = xi._grad_dtype()
            for r in range(xi.size):  # row r of block row i: d g_i[r] / d x_j
                rows = pullback([_unit(xp, xi.size, r, xi.shape, dtype)])
                for j, row in enumerate(rows):
                    blocks[i][j][r] = row.reshape(-1)
    out = [
        tuple(b.reshape(xi.shape + xj.shape) for b, xj in zip(row, xs, strict=True))
        for row, xi in zip(blocks, xs, strict=True)
    ]
    return tuple(out) if multi else out[0][0]


def jacobian(f: Callable[..., Variable], inputs: Any) -> Any:
    """The full Jacobian of ``f`` at ``inputs``: ``J[o..., i...] = d f[o...] / d x[i...]``.

    The graph of ``f`` is built once. With fewer outputs than inputs, each row
    is one reverse pass over it; otherwise each column is one reverse pass over
    the transposed graph ``u -> J^T u`` (built once too).

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.

    Returns:
        An array of shape ``y.shape + x.shape``; a tuple of them (one per input)
        for a tuple of inputs.

    >>> import numpy as np, hodiff as hd
    >>> hd.jacobian(lambda x: x * x, np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])

    """
    with _graph_mode():
        xs, multi = _inputs("jacobian", inputs)
        y = _call("jacobian", f, xs)
        xp = _xp(xs)
        dtype = y._grad_dtype()
        mats = [xp.empty((y.size, x.size), dtype=dtype) for x in xs]
        if y.size <= sum(x.size for x in xs):
            pullback = _Pullback([y], xs)
            _evaluate([y])
            for r in range(y.size):  # row r: d y[r] / d x
                rows = pullback([_unit(xp, y.size, r, y.shape, dtype)])
                for m, row in zip(mats, rows, strict=True):
                    m[r] = row.reshape(-1)
        else:
            u = _seed_leaf(xp, y)
            ws = grad(y, xs, grad_outputs=[u], allow_unused=True)  # J_i^T u, linear in u
            pullbacks = [_Pullback([w], [u]) for w in ws]
            _evaluate([y, *ws])
            for m, x, pullback in zip(mats, xs, pullbacks, strict=True):
                for c in range(x.size):  # column c: J e_c
                    (col,) = pullback([_unit(xp, x.size, c, x.shape, x._grad_dtype())])
                    m[:, c] = col.reshape(-1)
    out = [m.reshape(y.shape + x.shape) for m, x in zip(mats, xs, strict=True)]
    return tuple(out) if multi else out[0]
