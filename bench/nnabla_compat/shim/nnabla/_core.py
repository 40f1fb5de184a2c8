"""The shim's Variable and function nodes: NNabla's Python surface over hodiff.

A shim ``Variable`` wraps a hodiff Variable (``_v``); every value, gradient and
``need_grad`` lives in hodiff's. A shim function call unwraps its arguments, calls
hodiff's function of the same name and wraps the outputs; their ``parent`` is a
``Node``: the whole hodiff composition as one NNabla function, so that
``o[0].parent.forward(inputs, outputs)`` and ``.backward(inputs, outputs, accum)``
re-run that composition (dynamic mode) on the given inputs' values and write the
outputs' values, or the inputs' gradients (added, or overwriting where ``accum`` is
False).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hodiff as hd
from bench.nnabla_compat.causes import Inplace, Internals, MissingArgument, ResetShape

# NNabla's functions with an ``inplace`` argument, and its position; NNabla documents it
# "obsolete and ignored" for all but reshape, where it only shares memory: dropping it keeps
# NNabla's values. Facts from NNabla's functions.yaml.
INPLACE_POSITION = {
    "relu": 1,
    "leaky_relu": 2,
    "add2": 2,
    "sub2": 2,
    "mul2": 2,
    "div2": 2,
    "pow2": 2,
    "add_scalar": 2,
    "mul_scalar": 2,
    "pow_scalar": 2,
    "reshape": 2,
}


def _is_var(x: Any) -> bool:
    return isinstance(x, Variable)


def unwrap(x: Any) -> Any:
    if isinstance(x, Variable):
        return x._v
    if isinstance(x, NdArray):
        return hd.Variable.from_array(x.data)
    if isinstance(x, list):
        return [unwrap(a) for a in x]
    if isinstance(x, tuple):
        return tuple(unwrap(a) for a in x)
    return x


def _flat_vars(args: Sequence[Any], kwargs: dict[str, Any]) -> list[Variable]:
    out: list[Variable] = []

    def walk(a: Any) -> None:
        if isinstance(a, Variable):
            out.append(a)
        elif isinstance(a, list | tuple):
            for b in a:
                walk(b)

    for a in args:
        walk(a)
    for a in kwargs.values():
        walk(a)
    return out


def _substitute(args: Any, it: Any) -> Any:
    if isinstance(args, Variable):
        return next(it)
    if isinstance(args, list):
        return [_substitute(a, it) for a in args]
    if isinstance(args, tuple):
        return tuple(_substitute(a, it) for a in args)
    return args


class Name(str):
    """A function's name that equals NNabla's CamelCase name of it (``ReLU``, ``Add2``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            return False
        return other.replace("_", "").lower() == self.replace("_", "").lower()

    __hash__ = str.__hash__


class Node:
    """One NNabla function: hodiff's ``fn`` (maybe several primitives) on its inputs."""

    def __init__(self, name: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> None:
        self.name = Name(name)
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.inputs = _flat_vars(args, kwargs)

    def _run(self, inputs: Sequence[Variable]) -> tuple[list[Any], list[Any]]:
        leaves = []
        for v in inputs:
            a = v._v.d
            ng = bool(v.need_grad) and np.asarray(a).dtype.kind == "f"
            leaves.append(hd.Variable.from_array(a, need_grad=ng))
        it = iter(leaves)
        args = _substitute(tuple(self.args), it)
        kwargs = {k: _substitute(a, it) for k, a in self.kwargs.items()}
        with hd.auto_forward(True):
            out = self.fn(*unwrap(args), **unwrap(kwargs))
        outs = list(out) if isinstance(out, list | tuple) else [out]
        return leaves, outs

    def _own(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> bool:
        mine = len(inputs) == len(self.inputs) and all(
            a is b for a, b in zip(inputs, self.inputs, strict=True)
        )
        return mine and all(o._parent is self for o in outputs)

    def setup(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        raise Internals(f"the function node's {name}")

    def forward(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        _, outs = self._run(inputs)
        for o, h in zip(outputs, outs, strict=True):
            o._rebind(h)

    def backward(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        accum: Sequence[bool] | None = None,
    ) -> None:
        if self._own(inputs, outputs):
            # the node's own graph (a random function keeps the mask of its last forward)
            leaves, outs = [v._v for v in inputs], [o._v for o in outputs]
        else:
            leaves, outs = self._run(inputs)
        seeds, diff = [], []
        for o, h in zip(outputs, outs, strict=True):
            if h.dtype.kind == "f" and h.parent is not None:
                diff.append(h)
                seeds.append(np.asarray(o.g, dtype=h.dtype))
        wrt = [
            (i, lf)
            for i, lf in enumerate(leaves)
            if inputs[i].need_grad and lf.dtype.kind == "f" and (lf.need_grad or lf.parent)
        ]
        if not wrt or not diff:
            return
        grads = hd.grad(
            diff, [lf for _, lf in wrt], grad_outputs=seeds, allow_unused=True, create_graph=False
        )
        for (i, _), g in zip(wrt, grads, strict=True):
            v = inputs[i]
            if accum is None or accum[i]:
                v.g = v.g + g.d
            else:
                v.g = g.d


class NdArray:
    """NNabla's NdArray of a Variable's data or grad: writes go through hodiff's setters."""

    def __init__(self, var: Any = None, which: str = "d", array: Any = None) -> None:
        if not isinstance(var, Variable | type(None)):  # NNabla's NdArray(shape)
            array, var = np.zeros(tuple(var), np.float32), None
        self._var = var
        self._which = which
        self._array = array

    @classmethod
    def from_numpy_array(cls, array: Any) -> NdArray:
        return cls(None, "d", np.array(array))

    @property
    def data(self) -> Any:
        if self._var is None:
            return self._array
        return self._var._v.d if self._which == "d" else self._var._v.g

    @data.setter
    def data(self, value: Any) -> None:
        if self._var is None:
            self._array = np.asarray(value)
        elif self._which == "d":
            self._var._v.d = value
        else:
            self._var._v.g = value

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.data))

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def size(self) -> int:
        return int(np.size(self.data))

    def zero(self) -> None:
        self.data = np.zeros_like(self.data)

    def fill(self, value: Any) -> None:
        self.data = np.full_like(self.data, value)

    def get_data(self, mode: str = "rw", dtype: Any = None) -> Any:
        a = self.data
        return a if dtype is None else a.astype(dtype)

    def cast(self, dtype: Any, ctx: Any = None) -> NdArray:
        if self._var is not None and self._which == "d":
            self._var._cast(np.dtype(dtype))
        return self

    def __getitem__(self, key: Any) -> Any:
        return self.data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        a = np.array(self.data, copy=True)
        a[key] = value
        self.data = a

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.asarray(self.data, dtype=dtype)


class Variable:
    """NNabla's ``nn.Variable`` over a hodiff Variable."""

    def __init__(self, shape: Any = (), need_grad: bool = False, *, _v: Any = None) -> None:
        if _v is None:
            _v = hd.Variable(tuple(int(s) for s in shape), need_grad=need_grad)
        self._v = _v
        self._need_grad = bool(need_grad) if _v.parent is None else True
        self._parent: Node | None = None

    @classmethod
    def from_numpy_array(cls, data: Any, grad: Any = None, need_grad: bool | None = None) -> Any:
        a = np.asarray(data)
        if a.dtype.kind not in "fiub":
            a = a.astype(np.float32)
        ng = bool(need_grad)
        v = cls(_v=hd.Variable.from_array(a, need_grad=ng and a.dtype.kind == "f"))
        v._need_grad = ng
        if grad is not None:
            v.g = grad
        return v

    # -- wrapping
    def _rebind(self, h: Any) -> None:
        old = self._v
        self._v = h
        try:
            if old.shape == h.shape:
                h.g = old.g
        except RuntimeError:
            pass

    def _cast(self, dtype: np.dtype) -> None:
        if self._v.dtype == dtype:
            return
        if self._v.parent is not None:
            raise TypeError(f"cast of a function output to {dtype}")
        ng = self._need_grad and dtype.kind == "f"
        self._v = hd.Variable(self._v.shape, need_grad=ng, dtype=dtype)

    # -- attributes
    @property
    def d(self) -> Any:
        return self._v.d

    @d.setter
    def d(self, value: Any) -> None:
        self._v.d = unwrap(value)

    @property
    def g(self) -> Any:
        return self._v.g

    @g.setter
    def g(self, value: Any) -> None:
        self._v.g = unwrap(value)

    @property
    def data(self) -> NdArray:
        return NdArray(self, "d")

    @data.setter
    def data(self, value: Any) -> None:
        self.d = value

    @property
    def grad(self) -> NdArray:
        return NdArray(self, "g")

    @grad.setter
    def grad(self, value: Any) -> None:
        self.g = value

    @property
    def need_grad(self) -> bool:
        return self._need_grad

    @need_grad.setter
    def need_grad(self, value: bool) -> None:
        self._need_grad = bool(value)
        if self._v.parent is None:
            self._v.need_grad = bool(value) and self._v.dtype.kind == "f"

    @property
    def parent(self) -> Node | None:
        return self._parent

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._v.shape)

    @property
    def ndim(self) -> int:
        return len(self._v.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._v.shape, dtype=np.int64))

    @property
    def dtype(self) -> Any:
        return self._v.dtype

    def size_from_axis(self, axis: int = -1) -> int:
        return int(np.prod(self.shape[axis:], dtype=np.int64))

    def apply(self, **kw: Any) -> Variable:
        for k, a in kw.items():
            setattr(self, k, a)
        return self

    def reset_shape(self, shape: Any, force: bool = False) -> None:
        if not hasattr(self._v, "reset_shape"):
            raise ResetShape("hodiff's Variable has no reset_shape")
        self._v.reset_shape(tuple(shape), force)

    def unlinked(self) -> Variable:
        return Variable(_v=self._v.unlinked())

    get_unlinked_variable = unlinked

    # -- execution
    def forward(self, clear_buffer: bool = False, clear_no_need_grad: bool = False) -> None:
        self._v.forward(clear_buffer=bool(clear_buffer or clear_no_need_grad))

    def backward(self, grad: Any = 1, clear_buffer: bool = False) -> None:
        seed = self._v.g if grad is None else unwrap(grad)
        if np.ndim(seed) == 0:
            seed = np.full(self.shape, seed, dtype=self._v.dtype)
        self._v.backward(np.asarray(seed, dtype=self._v.dtype), clear_buffer=clear_buffer)

    # -- operators (hodiff's, as one node each)
    def _op(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        return call(name, fn, args, {})

    def __add__(self, o: Any) -> Any:
        return self._op("add", lambda a, b: a + b, self, o)

    def __radd__(self, o: Any) -> Any:
        return self._op("add", lambda a, b: b + a, self, o)

    def __sub__(self, o: Any) -> Any:
        return self._op("sub", lambda a, b: a - b, self, o)

    def __rsub__(self, o: Any) -> Any:
        return self._op("sub", lambda a, b: b - a, self, o)

    def __mul__(self, o: Any) -> Any:
        return self._op("mul", lambda a, b: a * b, self, o)

    def __rmul__(self, o: Any) -> Any:
        return self._op("mul", lambda a, b: b * a, self, o)

    def __truediv__(self, o: Any) -> Any:
        return self._op("div", lambda a, b: a / b, self, o)

    def __rtruediv__(self, o: Any) -> Any:
        return self._op("div", lambda a, b: b / a, self, o)

    def __pow__(self, o: Any) -> Any:
        return self._op("pow", lambda a, b: a**b, self, o)

    def __rpow__(self, o: Any) -> Any:
        return self._op("pow", lambda a, b: b**a, self, o)

    def __matmul__(self, o: Any) -> Any:
        return self._op("matmul", lambda a, b: a @ b, self, o)

    def __neg__(self) -> Any:
        return self._op("neg", lambda a: -a, self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return self._op("abs", abs, self)

    def __getitem__(self, key: Any) -> Any:
        return self._op("getitem", lambda a: a[unwrap(key)], self)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"<shim Variable{self.shape}>"


def _bind_check(name: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise MissingArgument(name, str(e)) from None


def drop_inplace(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple:
    """NNabla's obsolete ``inplace`` argument, where hodiff's function has none."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return args, kwargs
    if "inplace" in params:
        return args, kwargs
    kwargs = dict(kwargs)
    kwargs.pop("inplace", None)
    pos = INPLACE_POSITION.get(name)
    if pos is not None and len(args) > pos:
        args = args[:pos] + args[pos + 1 :]
    return args, kwargs


def call(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Calls hodiff's ``fn`` on unwrapped arguments; wraps the outputs under one Node."""
    args, kwargs = drop_inplace(name, fn, tuple(args), kwargs)
    _bind_check(name, fn, unwrap(args), unwrap(kwargs))
    out = fn(*unwrap(args), **unwrap(kwargs))
    node = Node(name, fn, args, kwargs)
    return wrap_outputs(out, node)


def wrap_outputs(out: Any, node: Node | None) -> Any:
    if isinstance(out, hd.Variable):
        v = Variable(_v=out)
        v._parent = node if out.parent is not None or node is not None else None
        v._need_grad = out.need_grad or out.parent is not None
        return v
    if isinstance(out, tuple):
        return tuple(wrap_outputs(o, node) for o in out)
    if isinstance(out, list):
        return [wrap_outputs(o, node) for o in out]
    return out


__all__ = ["Inplace", "NdArray", "Node", "Variable", "call", "unwrap", "wrap_outputs"]
