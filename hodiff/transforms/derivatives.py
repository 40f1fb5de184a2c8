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
(``hodiff.engine.api.Pullback``) write no ``.g``, so Variables that ``f`` closes over
(weights with ``need_grad=True``) are left as they were.

Inside ``hd.vmap`` (an input or ``v`` is a batched variable, or ``f`` closes over one),
values per example do not exist, so the transforms run the same recipes symbolically:
``hd.grad`` records every pass (the rows of a Hessian or Jacobian are a nested ``hd.vmap``
of ``hd.grad`` over unit seeds), and they return Variables batched along the enclosing
``vmap``, connected to the caller's graph, which the mapped function returns and which can
be differentiated again (see docs/vmap.md, "Transforms inside vmap").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hodiff.functions as F
from hodiff.engine import api
from hodiff.engine.arguments import array_module_of
from hodiff.engine.autograd import grad
from hodiff.engine.context import (
    array_module,
    auto_forward,
    get_auto_forward,
    no_grad,
)
from hodiff.engine.variable import Variable
from hodiff.functions import array, shaping
from hodiff.transforms import holomorphic as _holo
from hodiff.transforms import taylor as _taylor
from hodiff.transforms.vectorize import BatchedVariable, inside_vmap, running, vmap

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vjp"]

HVP_MODES = ("rev-rev", "fwd-rev")


# ---------------------------------------------------------------- helpers
def graph_mode() -> Any:
    """Records graphs even inside ``no_grad`` (a transform needs its graph)."""
    return api.recording()


def _label(i: int, multi: bool, what: str = "inputs") -> str:
    return f"{what}[{i}]" if multi else what


def _inputs(name: str, inputs: Any, keep: bool = False) -> tuple[list[Variable], bool]:
    """Fresh float leaves (need_grad) holding ``inputs``' values; and whether it was a tuple.

    A list of arrays/Variables is several inputs, as a tuple; a list of numbers is one array.
    With ``keep`` (``create_graph=True``) Variables are used as they are, so that the results
    stay connected to the caller's api.
    """
    multi = isinstance(inputs, tuple) or (
        isinstance(inputs, list) and bool(inputs) and all(hasattr(a, "shape") for a in inputs)
    )
    items = list(inputs) if multi else [inputs]
    if not items:
        raise ValueError(f"{name}: inputs is an empty tuple")
    xs: list[Variable] = []
    # inside hd.vmap or hd.jit the results stay connected to the caller
    keep = keep or inside_vmap() or api.is_symbolic()
    for i, a in enumerate(items):
        x = _input_leaf(name, a, i, multi, keep)
        if x.dtype.kind not in "fc":
            raise TypeError(
                f"{name}: {_label(i, multi)} has dtype {x.dtype}; derivatives need float or "
                "complex inputs"
            )
        xs.append(x)
    return xs, multi


def _input_leaf(name: str, a: Any, i: int, multi: bool, keep: bool) -> Variable:
    """The Variable a transform differentiates for the input ``a`` (see :func:`_inputs`)."""
    if type(a) is BatchedVariable:
        _check_alive(name, a, _label(i, multi))
        return a
    if isinstance(a, Variable) and keep:
        return a
    if isinstance(a, Variable):
        x = a.unlinked(need_grad=True)
        if api.value_of(x) is None:
            api.set_value(x, a.d)
        return x
    if isinstance(a, bool | int | float | list) and not isinstance(a, np.generic):
        # Python numbers have no dtype: float64, as numpy makes 2.0 (an int 2 too)
        return Variable.from_array(np.asarray(a, dtype=np.float64), need_grad=True)
    # the graph outlives the call only with keep: only then is a copy needed
    x = Variable.from_array(a, copy=keep)
    x.need_grad = x.dtype.kind in "fc"  # (ints are refused by the caller)
    return x


def _value(y: Variable, xs: Sequence[Variable]) -> Any:
    """``y``'s value, copied if it is, or views, an input's array.

    The inputs share the caller's arrays (no copy on the way in), and a result must not: ``f``
    may return its input, or a reshape of it.
    """
    d = y.d
    for x in xs:
        a = api.value_of(x)
        if d is a:
            return d.copy()
        if d.base is not None:  # a view: of an input? (cupy without the check: copy anyway)
            may_share = getattr(array_module_of(d), "may_share_memory", None)
            if may_share is None or may_share(d, a):
                return d.copy()
    return d


def call(name: str, f: Callable[..., Any], xs: Sequence[Variable]) -> Variable:
    if not callable(f):
        raise TypeError(f"{name}: f must be callable, got {type(f).__name__}")
    y = f(*xs)
    if not isinstance(y, Variable):
        raise TypeError(f"{name}: f must return a hodiff.Variable, got {type(y).__name__}")
    return y


def check_scalar(name: str, y: Variable) -> None:
    if y.size != 1:
        raise ValueError(
            f"{name}: f must return a scalar (size 1), got an output of shape {y.shape}"
        )


def _xp(xs: Sequence[Variable]) -> Any:
    return array_module(api.value_of(xs[0]))


def _n_directions(v: Any, like: Sequence[Variable], multi: bool) -> int | None:
    """``k`` when ``v`` is a batch of ``k`` directions (one more leading axis), else None."""
    items = list(v) if multi and isinstance(v, tuple | list) else [v]
    if len(items) != len(like):
        return None
    ks = set()
    for a, x in zip(items, like, strict=True):
        shape = tuple(getattr(a, "shape", ()))
        if len(shape) != x.ndim + 1 or shape[1:] != x.shape:
            return None
        ks.add(shape[0])
    return ks.pop() if len(ks) == 1 else None


def _direction_items(name: str, v: Any, like: Sequence[Variable], multi: bool) -> list[Any]:
    """``v`` as a list with one direction per Variable of ``like``."""
    if not multi:
        return [v]
    if not isinstance(v, tuple | list) or len(v) != len(like):
        got = f"{len(v)} arrays" if isinstance(v, tuple | list) else type(v).__name__
        raise ValueError(
            f"{name}: v must be a tuple of {len(like)} arrays (one per input), got {got}"
        )
    return list(v)


def _directions(
    name: str,
    v: Any,
    like: Sequence[Variable],
    multi: bool,
    what: str = "inputs",
    batch: int | None = None,
) -> list[Any]:
    """``v`` as one array per Variable of ``like`` (same shape, gradient dtype; with ``batch``
    one more leading axis of that size).
    """
    items = _direction_items(name, v, like, multi)
    xp = _xp(like)
    out = []
    for i, (a, x) in enumerate(zip(items, like, strict=True)):
        if isinstance(a, Variable):
            a = a.d
        _taylor.check_tangent(name, _label(i, multi, "v"), a, x, of=_label(i, multi, what))
        try:
            a = xp.asarray(a, dtype=api.grad_dtype(x))
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name}: {_label(i, multi, 'v')} is not an array: {e}") from None
        if a.shape != x.shape and (batch is None or a.shape != (batch, *x.shape)):
            raise ValueError(
                f"{name}: {_label(i, multi, 'v')} of shape {a.shape} does not match "
                f"{_label(i, multi, what)} of shape {x.shape}"
            )
        out.append(a)
    return out


def _seed_leaf(xp: Any, like: Variable) -> Variable:
    """A need_grad leaf for the transpose trick (its value is irrelevant: all is linear in it)."""
    return Variable.from_array(xp.zeros(like.shape, dtype=api.grad_dtype(like)), need_grad=True)


def _zeros_like(y: Variable) -> Any:
    return array_module_of(y).zeros(y.shape, dtype=api.grad_dtype(y))


def evaluate(roots: Sequence[Variable]) -> None:
    """Static mode: computes the graphs just built (dynamic mode computed them already)."""
    if not get_auto_forward():
        api.forward(list(roots))


def _pack(arrays: Sequence[Any], multi: bool) -> Any:
    return tuple(arrays) if multi else arrays[0]


Pullback = api.Pullback


def _unit(xp: Any, n: int, i: int, shape: tuple[int, ...], dtype: Any) -> Any:
    e = xp.zeros(n, dtype=dtype)
    e[i] = 1
    return e.reshape(shape)


# ---------------------------------------------------------------- inside hd.vmap
def _check_alive(name: str, a: BatchedVariable, label: str) -> None:
    if not running(a):
        raise RuntimeError(
            f"{name}: {label} (per-example shape {a.shape}) is a batched variable of an hd.vmap "
            "that has returned; call the transform inside the mapped function, or on the "
            "Variable that the vmap returned"
        )


def _any_batched(*items: Any) -> bool:
    """Whether the transform records its passes and returns Variables: a compiler records
    (``hd.jit``: no value exists), or a batched variable (inside ``hd.vmap``) is among
    ``items`` (or their tuples).
    """
    if api.is_symbolic():
        return True
    for a in items:
        if type(a) is BatchedVariable:
            return True
        if isinstance(a, tuple | list) and any(type(b) is BatchedVariable for b in a):
            return True
    return False


def _vdirections(
    name: str,
    v: Any,
    like: Sequence[Variable],
    multi: bool,
    what: str = "inputs",
    batch: int | None = None,
) -> list[Variable]:
    """:func:`_directions` inside ``hd.vmap``: Variables (batched or not), never values.

    Arrays become constant Variables; Variables are used as they are (so that the result
    stays differentiable in ``v``), cast to the gradient dtype of ``like`` when needed.
    """
    items = _direction_items(name, v, like, multi)
    xp = array_module_of(*like)
    out = []
    for i, (a, x) in enumerate(zip(items, like, strict=True)):
        dtype = api.grad_dtype(x)
        if isinstance(a, Variable):
            if type(a) is BatchedVariable:
                _check_alive(name, a, _label(i, multi, "v"))
            if a.dtype.kind not in "fc":
                raise TypeError(
                    f"{name}: {_label(i, multi, 'v')} has dtype {a.dtype}; directions must be "
                    "float or complex"
                )
            _taylor.check_tangent(name, _label(i, multi, "v"), a, x, of=_label(i, multi, what))
            if a.dtype != dtype:
                a = shaping.astype(a, dtype)
        else:
            try:
                a = Variable.from_array(xp.asarray(a, dtype=dtype))
            except (TypeError, ValueError) as e:
                raise TypeError(f"{name}: {_label(i, multi, 'v')} is not an array: {e}") from None
        if a.shape != x.shape and (batch is None or a.shape != (batch, *x.shape)):
            raise ValueError(
                f"{name}: {_label(i, multi, 'v')} of shape {a.shape} does not match "
                f"{_label(i, multi, what)} of shape {x.shape} (shapes of one example inside "
                "hd.vmap)"
            )
        out.append(a)
    return out


def _batch_elements(vs: Sequence[Variable]) -> int:
    """How many examples the enclosing ``hd.vmap`` s hold per per-example element."""
    most = 1
    for v in vs:
        m = 1
        while type(v) is BatchedVariable:
            v = v._value
            m *= int(v.shape[0])
        most = max(most, m)
    return most


def _vrows(
    roots: Sequence[Variable],
    wrt: Sequence[Variable],
    n: int,
    seeds: Callable[[int, int], list[Any]],
    chunk_size: int | None,
) -> list[Variable]:
    """:func:`_batched_pass` inside ``hd.vmap``: the rows as recorded Variables.

    The same ``hd.vmap`` of ``hd.grad`` over the seed rows, nested in the enclosing
    ``vmap`` s, in the current mode (a static graph stays static: the caller's
    ``.forward()`` computes it). Returns, per ``wrt[j]``, a Variable ``(n, *wrt[j].shape)``
    per example.
    """

    def rows(*es: Variable) -> list[Variable]:
        return grad(list(roots), list(wrt), grad_outputs=list(es), allow_unused=True)

    if n == 0:
        xp = array_module_of(*wrt)
        return [Variable.from_array(xp.zeros((0, *x.shape), dtype=api.grad_dtype(x))) for x in wrt]
    mapped = vmap(rows)
    if chunk_size is None:
        chunk_size = max(1, _auto_chunk(roots) // _batch_elements([*roots, *wrt]))
    step = max(1, min(n, chunk_size))
    parts = [list(mapped(*seeds(a, min(n, a + step)))) for a in range(0, n, step)]
    return [
        p[0] if len(parts) == 1 else F.concatenate(*p, axis=0) for p in zip(*parts, strict=True)
    ]


def _vtranspose(m: Variable) -> Variable:
    return array.transpose(m, (1, 0))


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

    Inside ``hd.vmap`` (an input or ``v`` is a batched variable, or ``f`` closes over one)
    the results are Variables of the per-example shapes, ``(y, vjp)``, recorded
    (differentiable again) and connected to the caller's graph: return them from the mapped
    function. See docs/vmap.md, "Transforms inside vmap".

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> y, g = hd.vjp(lambda x: x * x, np.array([1.0, 2.0]), np.array([1.0, 10.0]))
    >>> y, g
    (array([1., 4.]), array([ 2., 40.]))

    """
    with graph_mode():
        xs, multi = _inputs("vjp", inputs)
        y = call("vjp", f, xs)
        if _any_batched(*xs, v, y):  # inside hd.vmap or hd.jit: recorded, Variables
            (gy,) = _vdirections("vjp", v, [y], False, what="the output of f")
            gxs = grad(y, xs, grad_outputs=[gy], allow_unused=True)
            return y, _pack(gxs, multi)
        (gy,) = _directions("vjp", v, [y], False, what="the output of f")
        pullback = Pullback([y], xs)
        evaluate([y])
        gxs = pullback([gy])
    return _value(y, xs), _pack(gxs, multi)


def jvp(f: Callable[..., Variable], inputs: Any, v: Any) -> tuple[Any, Any]:
    """Jacobian-vector product ``J v`` (the directional derivative) of ``f`` at ``inputs``.

    ``(J v)_o = sum_i d f_o / d x_i v_i``, in forward mode: ``f`` is called once and its
    graph is walked once more, each node's forward rule carrying the tangent next to the
    value (a jet of order 1, see :func:`hodiff.jet`); no reverse pass. Inside ``hd.vmap``
    it transposes a vjp instead (the map ``u -> J^T u`` is linear in ``u``; its reverse
    pass seeded with ``v`` gives ``J v``).

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.
        v: the direction: an array of the input's shape, or a tuple matching ``inputs``.

    Returns:
        ``(y, jvp)``: the value of ``f`` and an array of its shape.

    Inside ``hd.vmap`` (an input or ``v`` is a batched variable, or ``f`` closes over one)
    the results are Variables of the per-example shapes, ``(y, jvp)``, recorded
    (differentiable again) and connected to the caller's graph: return them from the mapped
    function. See docs/vmap.md, "Transforms inside vmap".

    >>> import numpy as np, hodiff as hd
    >>> hd.jvp(lambda x: x ** 3, np.array([1.0, 2.0]), np.array([1.0, 0.5]))
    (array([1., 8.]), array([3., 6.]))

    """
    with graph_mode():
        xs, multi = _inputs("jvp", inputs)
        batched = _any_batched(*xs, v)
        if not batched:
            vs: list[Any] = _directions("jvp", v, xs, multi)
        start = _taylor.clock()
        y = call("jvp", f, xs)
        if batched or type(y) is BatchedVariable:  # inside hd.vmap: recorded, Variables
            vs = _vdirections("jvp", v, xs, multi)
            u = _seed_leaf(array_module_of(y, *xs), y)
            ws = grad(y, xs, grad_outputs=[u], allow_unused=True)
            (jv,) = grad(ws, [u], grad_outputs=vs, allow_unused=True)
            return y, jv
        evaluate([y])
        series = [[v.reshape((1, *v.shape))] for v in vs]
        ((jv,),) = _taylor.push(y, start, xs, series, 1)  # forward mode: one pass
        jv = _zeros_like(y) if jv is None else jv.reshape(y.shape)
    return _value(y, xs), jv


def hvp(f: Callable[..., Variable], inputs: Any, v: Any, mode: str = "rev-rev") -> tuple[Any, Any]:
    """Hessian-vector product ``H v`` of a scalar ``f`` at ``inputs``, and ``f(inputs)``.

    ``(H v)_i = sum_j d^2 f / (d x_i d x_j) v_j``. The Hessian is never formed.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a scalar Variable.
        inputs: an array (or Variable, scalar), or a tuple of them.
        v: an array of the input's shape, or a tuple matching ``inputs``; or a batch of
            ``k`` directions (one more leading axis, ``(k, *x.shape)``), computed in one
            batched reverse pass (``hd.vmap``).
        mode: ``"rev-rev"`` (default: reverse-over-reverse, a plain reverse pass
            over the recorded gradient graph, which frees the values of the graphs this
            call made as it goes, as ``backward(clear_buffer=True)``: an intermediate
            ``f`` stores elsewhere has no value afterwards) or ``"fwd-rev"``
            (forward-over-reverse:
            the jvp of the gradient in forward mode, a jet pass over the recorded gradient
            graph; inside ``hd.vmap`` by the transpose trick).

    Returns:
        ``(y, Hv)``: the value of ``f`` and an array of each input's shape (a
        tuple for a tuple of inputs), with the leading ``k`` for a batch of directions.

    Raises:
        ValueError: ``f`` is not scalar, ``v`` does not match, or ``mode`` is unknown.

    Inside ``hd.vmap`` (an input or ``v`` is a batched variable, or ``f`` closes over one)
    the results are Variables of the per-example shapes, ``(y, Hv)``, recorded
    (differentiable again) and connected to the caller's graph: return them from the mapped
    function. See docs/vmap.md, "Transforms inside vmap".

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> y, hv = hd.hvp(lambda x: F.sum(x ** 3), np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    >>> hv                                  # H = diag(6 x)
    array([ 6., 12.])

    """
    if mode not in HVP_MODES:
        raise ValueError(f"hvp: mode must be one of {HVP_MODES}, got {mode!r}")
    with graph_mode():
        xs, multi = _inputs("hvp", inputs)
        k = _n_directions(v, xs, multi)
        batched = _any_batched(*xs, v)
        if not batched:
            vs: list[Any] = _directions("hvp", v, xs, multi, batch=k)
        start = _taylor.clock()
        y = call("hvp", f, xs)
        check_scalar("hvp", y)
        batched = batched or type(y) is BatchedVariable
        if batched:  # inside hd.vmap: recorded, Variables
            vs = _vdirections("hvp", v, xs, multi, batch=k)
        gs = grad(y, xs, allow_unused=True)
        if mode == "fwd-rev" and not batched:  # forward mode over the recorded gradient graph
            return _fwd_rev(y, gs, xs, vs, k, start, multi)
        roots, wrt = _hvp_roots(mode, y, gs, xs)
        if batched:
            return y, _pack(_hvp_recorded(roots, wrt, vs, k), multi)
        if k is None:
            pullback = Pullback(roots, wrt)
            evaluate([y, *pullback.roots])
            value = _value(y, xs)
            # the graphs are this call's own when every node the pass visits was made in it
            # (from the inputs' fresh leaves): then they are freed as the pass goes, as by
            # NNabla's backward(clear_buffer=True), so the first-order graph's values do not
            # all stay alive to its end
            nodes = pullback.plan.nodes
            hv = pullback(vs, clear_buffer=bool(nodes) and nodes[0].seq > start)
            return value, _pack(hv, multi)
        # a batch of directions: one batched reverse pass
        evaluate([y, *roots])
        hv = _batched_pass(roots, wrt, k, lambda a, b: [d[a:b] for d in vs], None, False)
    return _value(y, xs), _pack(hv, multi)


def _hvp_roots(
    mode: str, y: Variable, gs: list[Any], xs: list[Variable]
) -> tuple[list[Any], list[Variable]]:
    """The roots and the variables of the pass whose vjp of ``v`` is ``H v``: the gradient
    ``g`` and ``x`` (``"rev-rev"``); otherwise ``H^T u`` and the seeds ``u``, linear in ``u``.
    """
    if mode == "rev-rev":
        return gs, xs  # sum_j (d g_j / dx)^T v_j = H v
    xp = array_module_of(y, *xs)
    us = [_seed_leaf(xp, x) for x in xs]
    roots = grad(gs, xs, grad_outputs=us, allow_unused=True)  # H^T u, linear in u
    return roots, us  # d(H^T u)/du applied to v = H v


def _hvp_recorded(roots: list[Any], wrt: list[Variable], vs: list[Any], k: int | None) -> Any:
    """``H v`` inside ``hd.vmap``: the recorded vjp of ``vs`` (Variables), or for a batch of
    ``k`` directions a vmap over them, nested in the enclosing ones.
    """
    if k is None:
        return grad(roots, wrt, grad_outputs=vs, allow_unused=True)
    return _vrows(roots, wrt, k, lambda a, b: [d if b - a == k else d[a:b] for d in vs], None)


def _fwd_rev(
    y: Variable,
    gs: list[Any],
    xs: list[Variable],
    vs: list[Any],
    k: int | None,
    start: int,
    multi: bool,
) -> tuple[Any, Any]:
    """``H v`` as the jvp of the gradient: a jet of order 1 (forward mode) pushed through the
    recorded gradient graph and the forward graph under it; ``k`` directions in one pass.
    """
    evaluate([y, *[g for g in gs if g is not None]])
    series = [[v if k is not None else v.reshape((1, *v.shape))] for v in vs]
    roots = [g for g in gs if g is not None]
    outs = iter(_taylor.push(tuple(roots), start, xs, series, 1))
    hv = []
    for g, x in zip(gs, xs, strict=True):
        c = next(outs)[0] if g is not None else None
        shape = (k, *x.shape) if k is not None else tuple(x.shape)
        if c is None:
            hv.append(array_module_of(x).zeros(shape, dtype=api.grad_dtype(x)))
        else:
            hv.append(c.reshape(shape))
    return _value(y, xs), _pack(hv, multi)


def _unit_rows(xp: Any, n: int, shape: tuple[int, ...], dtype: Any, a: int, b: int) -> Any:
    """Rows ``a..b`` of the identity of size ``n``, each shaped ``shape``."""
    e = xp.zeros((b - a, n), dtype=dtype)
    e[xp.arange(b - a), xp.arange(a, b)] = 1
    return e.reshape((b - a, *shape))


def _chunk(name: str, chunk_size: int | None, n: int) -> int:
    if chunk_size is None:
        return max(n, 1)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"{name}: chunk_size must be a positive int or None, got {chunk_size!r}")
    return chunk_size


def _batched_pass(
    roots: Sequence[Variable],
    wrt: Sequence[Variable],
    n: int,
    seeds: Callable[[int, int], list[Any]],
    chunk_size: int | None,
    create_graph: bool,
) -> list[Any]:
    """``[sum_k (d roots[k] / d wrt[j])^T s_k for each seed row s]`` for ``n`` rows of seeds.

    One reverse pass over the recorded graph of ``roots`` per chunk of rows, batched by
    :func:`hodiff.vmap` (``hd.grad`` with a batch of seeds). ``seeds(a, b)`` gives rows
    ``a..b``: one array ``(b - a, *root.shape)`` per root. Returns, per ``wrt[j]``, an
    array ``(n, *wrt[j].shape)``, or a differentiable Variable with ``create_graph``.
    """

    def rows(*es: Variable) -> list[Variable]:
        return grad(list(roots), list(wrt), grad_outputs=list(es), allow_unused=True)

    mapped = vmap(rows)
    step = max(1, min(n, chunk_size or _auto_chunk(roots)))
    parts: list[list[Any]] = []
    with auto_forward(True):
        for a in range(0, n, step):
            b = min(n, a + step)
            if create_graph:
                parts.append(list(mapped(*seeds(a, b))))
            else:
                with no_grad():
                    parts.append([r.d for r in mapped(*seeds(a, b))])
        if not parts:  # no rows (an empty output or input)
            xp = _xp(list(wrt))
            empty = [xp.zeros((0, *x.shape), dtype=api.grad_dtype(x)) for x in wrt]
            return [Variable.from_array(e) for e in empty] if create_graph else empty
        if create_graph:
            return [
                p[0] if len(parts) == 1 else F.concatenate(*p, axis=0)
                for p in zip(*parts, strict=True)
            ]
        if len(parts) == 1:
            return parts[0]
        xp = _xp(list(wrt))
        return [xp.concatenate(p, axis=0) for p in zip(*parts, strict=True)]


#: default memory bound of one batched pass: rows x the graph's intermediate values
CHUNK_BYTES = 256 * 2**20


def _auto_chunk(roots: Sequence[Variable]) -> int:
    """Rows per batched pass when ``chunk_size`` is None: as many as fit in CHUNK_BYTES,
    counting every intermediate value of the graph once per row.
    """
    per_row = sum(r.size for r in roots)
    for f in api.topological_order(list(roots)):
        for x in f.inputs:
            if x.parent is not None:
                per_row += x.size
    return max(1, CHUNK_BYTES // (8 * max(per_row, 1)))


def _reshape(a: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(a, Variable):
        return array.reshape(a, shape)
    return a.reshape(shape)


def hessian(
    f: Callable[..., Variable],
    inputs: Any,
    chunk_size: int | None = None,
    create_graph: bool = False,
    holomorphic: bool = False,
) -> Any:
    """The full Hessian of a scalar ``f`` at ``inputs``.

    The gradient graph is recorded once; its rows are reverse passes over it with unit
    seeds, all batched into one pass (``hd.vmap`` of ``hd.grad``), ``chunk_size`` rows at
    a time when given (bounding the memory to ``chunk_size`` copies of the graph's values).

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a scalar Variable.
        inputs: an array (or Variable, scalar), or a tuple (or list) of them.
        chunk_size: rows per batched pass (default: as many as keep the pass's intermediate
            values within about 256 MiB, usually all of them).
        create_graph: return differentiable Variables (a graph from the inputs, which are
            used as they are when they are Variables): the Hessian can be differentiated
            again, e.g. inside another ``hd.jacobian``.
        holomorphic: the promise that ``f`` is holomorphic in its complex inputs (needed
            for them): the result is the complex Hessian ``d^2 f / dz_i dz_j``. A
            complex-valued ``f`` of real inputs needs no promise: ``H = H(Re f) + i H(Im f)``.

    Returns:
        For one input, an array of shape ``x.shape + x.shape``; for a tuple, a
        tuple of tuples of blocks ``H[i][j]`` of shape ``x_i.shape + x_j.shape``
        (Variables with ``create_graph``).

    Raises:
        ValueError: ``f`` does not return a scalar, or ``chunk_size`` is not positive.
        TypeError: a complex input without ``holomorphic=True`` (use ``hd.hvp``/``hd.vjp``).

    Inside ``hd.vmap`` (an input is a batched variable, or ``f`` closes over one) the
    results are Variables of the per-example shapes (as with ``create_graph=True``),
    recorded (differentiable again) and connected to the caller's graph: return them from
    the mapped function. See docs/vmap.md, "Transforms inside vmap".

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> hd.hessian(lambda x: F.sum(x ** 3) + F.sum(x) ** 2, np.array([1.0, 2.0]))
    array([[ 8.,  2.],
           [ 2., 14.]])
    >>> X = np.array([[1.0, 2.0], [0.0, -1.0]])      # per-example Hessians: diag(6 x) + 2
    >>> hd.vmap(lambda x: hd.hessian(lambda v: F.sum(v ** 3) + F.sum(v) ** 2, x))(X).d
    array([[[ 8.,  2.],
            [ 2., 14.]],
    <BLANKLINE>
           [[ 2.,  2.],
            [ 2., -4.]]])

    """
    with graph_mode():
        xs, multi = _inputs("hessian", inputs, keep=create_graph)
        _holo.check_promise("hessian", xs, multi, holomorphic)
        xs = _holo.promoted(xs, holomorphic)
        _chunk("hessian", chunk_size, 1)
        y = call("hessian", f, xs)
        check_scalar("hessian", y)
        if _holo.split(y, xs)[1]:  # complex f of real x: H(Re f) + i H(Im f)
            re, im = (
                hessian(lambda *a, p=p: p(f(*a)), inputs, chunk_size, create_graph)
                for p in (F.real, F.imag)
            )
            if not multi:
                return _holo.join([re, im], True)
            return tuple(
                tuple(_holo.join([a, b], True) for a, b in zip(ra, rb, strict=True))
                for ra, rb in zip(re, im, strict=True)
            )
        gs = grad(y, xs, grad_outputs=_holo.unit_cotangent(y), allow_unused=True)
        if _any_batched(*xs, y):  # inside hd.vmap: recorded, Variables
            vxp = array_module_of(y, *xs)
            vout = []
            for xi, g in zip(xs, gs, strict=True):
                dtype = api.grad_dtype(xi)

                def vseeds(a: int, b: int, xi: Variable = xi, dtype: Any = dtype) -> list[Any]:
                    return [_unit_rows(vxp, xi.size, xi.shape, dtype, a, b)]

                rows = _vrows([g], xs, xi.size, vseeds, chunk_size)
                vout.append(
                    tuple(_reshape(r, xi.shape + xj.shape) for r, xj in zip(rows, xs, strict=True))
                )
            return tuple(vout) if multi else vout[0][0]
        evaluate([y, *gs])
        xp = _xp(xs)
        out = []
        for xi, g in zip(xs, gs, strict=True):
            dtype = api.grad_dtype(xi)

            def seeds(a: int, b: int, xi: Variable = xi, dtype: Any = dtype) -> list[Any]:
                return [_unit_rows(xp, xi.size, xi.shape, dtype, a, b)]

            rows = _batched_pass([g], xs, xi.size, seeds, chunk_size, create_graph)
            out.append(
                tuple(_reshape(r, xi.shape + xj.shape) for r, xj in zip(rows, xs, strict=True))
            )
        if create_graph and not get_auto_forward():
            api.forward([b for row in out for b in row])
    return tuple(out) if multi else out[0][0]


def jacobian(
    f: Callable[..., Variable],
    inputs: Any,
    chunk_size: int | None = None,
    create_graph: bool = False,
    holomorphic: bool = False,
) -> Any:
    """The full Jacobian of ``f`` at ``inputs``: ``J[o..., i...] = d f[o...] / d x[i...]``.

    The graph of ``f`` is recorded once. With fewer outputs than inputs, the rows are
    reverse passes over it with unit seeds; otherwise the columns are reverse passes over
    the transposed graph ``u -> J^T u`` (recorded once too). Either way all of them run as
    one batched pass (``hd.vmap`` of ``hd.grad``), ``chunk_size`` at a time when given.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: an array (or Variable, scalar), or a tuple (or list) of them.
        chunk_size: rows (or columns) per batched pass (default: as many as keep the pass's
            intermediate values within about 256 MiB, usually all of them).
        create_graph: return differentiable Variables (see :func:`hessian`), so that a
            Jacobian of a Jacobian composes.
        holomorphic: the promise that ``f`` is holomorphic in its complex inputs (needed
            for them): the result is the complex Jacobian ``df/dz`` (real inputs beside
            complex ones are made complex). A complex-valued ``f`` of real inputs needs no
            promise: ``J = d Re f/dx + i d Im f/dx``.

    Returns:
        An array of shape ``y.shape + x.shape``; a tuple of them (one per input)
        for a tuple of inputs (Variables with ``create_graph``).

    Raises:
        TypeError: a complex input without ``holomorphic=True`` (use ``hd.jvp``/``hd.vjp``).

    Inside ``hd.vmap`` (an input is a batched variable, or ``f`` closes over one) the
    results are Variables of the per-example shapes (as with ``create_graph=True``),
    recorded (differentiable again) and connected to the caller's graph: return them from
    the mapped function. See docs/vmap.md, "Transforms inside vmap".

    >>> import numpy as np, hodiff as hd
    >>> hd.jacobian(lambda x: x * x, np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])

    """
    with graph_mode():
        xs, multi = _inputs("jacobian", inputs, keep=create_graph)
        _holo.check_promise("jacobian", xs, multi, holomorphic)
        xs = _holo.promoted(xs, holomorphic)
        _chunk("jacobian", chunk_size, 1)
        y, parts = _holo.split(call("jacobian", f, xs), xs)  # (Re, Im) of a complex f of real x
        if _any_batched(*xs, y):  # inside hd.vmap: recorded, Variables
            out = _jacobian_batched(xs, multi, y, chunk_size)
            return tuple(_holo.join(j, parts) for j in out) if multi else _holo.join(out, parts)
        xp = _xp(xs)
        dtype = api.grad_dtype(y)
        if y.size <= sum(x.size for x in xs):
            evaluate([y])

            def seeds(a: int, b: int) -> list[Any]:
                return [_unit_rows(xp, y.size, y.shape, dtype, a, b)]

            rows = _batched_pass([y], xs, y.size, seeds, chunk_size, create_graph)
            out = [_reshape(r, y.shape + x.shape) for r, x in zip(rows, xs, strict=True)]
        else:
            u = _seed_leaf(xp, y)
            ws = grad(y, xs, grad_outputs=[u], allow_unused=True)  # J_i^T u, linear in u
            evaluate([y, *ws])
            out = []
            for x, w in zip(xs, ws, strict=True):
                xdtype = api.grad_dtype(x)

                def cseeds(a: int, b: int, x: Variable = x, xdtype: Any = xdtype) -> list[Any]:
                    return [_unit_rows(xp, x.size, x.shape, xdtype, a, b)]

                (cols,) = _batched_pass([w], [u], x.size, cseeds, chunk_size, create_graph)
                cols = _reshape(cols, (x.size, y.size))  # column c: J e_c
                m = array.transpose(cols, (1, 0)) if create_graph else cols.T
                out.append(_reshape(m, y.shape + x.shape))
        if create_graph and not get_auto_forward():
            api.forward(out)
        out = [_holo.join(j, parts) for j in out]
    return tuple(out) if multi else out[0]


def _jacobian_batched(
    xs: Sequence[Variable], multi: bool, y: Variable, chunk_size: int | None
) -> Any:
    """:func:`jacobian` inside ``hd.vmap``: rows or columns as recorded Variables."""
    xp = array_module_of(y, *xs)
    dtype = api.grad_dtype(y)
    if y.size <= sum(x.size for x in xs):

        def seeds(a: int, b: int) -> list[Any]:
            return [_unit_rows(xp, y.size, y.shape, dtype, a, b)]

        rows = _vrows([y], xs, y.size, seeds, chunk_size)
        out = [_reshape(r, y.shape + x.shape) for r, x in zip(rows, xs, strict=True)]
    else:
        u = _seed_leaf(xp, y)
        ws = grad(y, xs, grad_outputs=[u], allow_unused=True)  # J_i^T u, linear in u
        out = []
        for x, w in zip(xs, ws, strict=True):
            xdtype = api.grad_dtype(x)

            def cseeds(a: int, b: int, x: Variable = x, xdtype: Any = xdtype) -> list[Any]:
                return [_unit_rows(xp, x.size, x.shape, xdtype, a, b)]

            (cols,) = _vrows([w], [u], x.size, cseeds, chunk_size)  # column c: J e_c
            out.append(_reshape(_vtranspose(_reshape(cols, (x.size, y.size))), y.shape + x.shape))
    return tuple(out) if multi else out[0]
