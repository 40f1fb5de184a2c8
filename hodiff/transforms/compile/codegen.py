"""Scalar kernels to machine code: LLVM IR text for fused elementwise clusters.

A primitive that can be fused declares ``scalar_kernel`` in its class: its forward on one
element as a numpy expression of its inputs ``x0, x1, ...`` (``xs``: all of them), its
numeric attributes (``val``, ``beta``) and the functions of :data:`FUNCTIONS`, e.g.
``"x0 - x0 * x1 * x1"`` (tanh's backward ``gy (1 - y^2)``). The same string is

* evaluated by numpy (:func:`reference`): the structure test compares it with the
  primitive's ``forward_impl`` on random inputs, by walking the registry;
* compiled (:func:`kernel_ir`): a cluster of such steps of one loop shape ``S`` and one
  float dtype ``T`` becomes one loop ``for i < prod(S)`` whose body evaluates every step
  of the cluster on element ``i`` (inputs of another shape broadcast by constant strides),
  storing only the values read outside the cluster.

Arithmetic is IEEE without fast-math (no reassociation, no flush to zero), so a kernel
equals numpy's to the rounding of the libm functions (``tanh``, ``exp``): within a few ulp.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.engine.function import Function

__all__ = [
    "FUNCTIONS",
    "Member",
    "Vector",
    "attributes_of",
    "kernel_ir",
    "kernel_of",
    "module_ir",
]

#: numpy name -> (LLVM intrinsic or libm name, arity); ``llvm.*`` are intrinsics
FUNCTIONS: dict[str, tuple[str, int]] = {
    "exp": ("llvm.exp", 1),
    "log": ("llvm.log", 1),
    "sin": ("llvm.sin", 1),
    "cos": ("llvm.cos", 1),
    "sqrt": ("llvm.sqrt", 1),
    "abs": ("llvm.fabs", 1),
    "log1p": ("log1p", 1),
    "expm1": ("expm1", 1),
    "tan": ("tan", 1),
    "sinh": ("sinh", 1),
    "cosh": ("cosh", 1),
    "tanh": ("tanh", 1),
    "arcsin": ("asin", 1),
    "arccos": ("acos", 1),
    "arctan": ("atan", 1),
    "arcsinh": ("asinh", 1),
    "arccosh": ("acosh", 1),
    "arctanh": ("atanh", 1),
    "arctan2": ("atan2", 2),
    "maximum": ("", 2),
    "minimum": ("", 2),
    "where": ("", 3),
    "prod": ("", 1),
}

_FLOATS = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}


def _prod(xs: Sequence[Any]) -> Any:
    return functools.reduce(operator.mul, xs[1:], xs[0] * 1.0)


def reference(expr: str, xs: Sequence[Any], attributes: dict[str, Any]) -> Any:
    """``expr`` evaluated by numpy on the arrays ``xs`` (the meaning a kernel compiles)."""
    names: dict[str, Any] = {f: getattr(np, f) for f in FUNCTIONS if f != "prod"}
    names.update(prod=_prod, xs=list(xs), **attributes)
    names.update({f"x{k}": x for k, x in enumerate(xs)})
    return eval(compile(_parsed(expr), "<scalar kernel>", "eval"), names)


@functools.cache
def _parsed(expr: str) -> ast.Expression:
    return ast.parse(expr, mode="eval")


def _owner(cls: type, name: str) -> type:
    return next(c for c in cls.__mro__ if name in c.__dict__)


def kernel_of(node: Function) -> str | None:
    """The scalar kernel of ``node``'s class, unless a subclass of the class that declared it
    defines its own ``forward_impl`` (then the declaration is not about this forward).
    """
    kind: type = type(node)
    return _class_kernel(kind)


@functools.cache
def _class_kernel(cls: type) -> str | None:
    expr = cls.scalar_kernel  # type: ignore[attr-defined]
    if expr is None:
        return None
    declared, forward = _owner(cls, "scalar_kernel"), _owner(cls, "forward_impl")
    return expr if issubclass(declared, forward) else None


def attributes_of(node: Function, expr: str) -> dict[str, float] | None:
    """The numeric attributes ``expr`` names, read from ``node`` (None: one is not a number)."""
    out: dict[str, float] = {}
    for name in _attribute_names(expr):
        v = getattr(node, name, None)
        if not isinstance(v, float | int):  # bool included
            return None
        out[name] = float(v)
    return out


@functools.cache
def _attribute_names(expr: str) -> tuple[str, ...]:
    """The names in ``expr`` that are neither inputs nor functions: the node's attributes."""
    names = []
    for n in ast.walk(_parsed(expr)):
        if not isinstance(n, ast.Name) or n.id in FUNCTIONS or n.id == "xs":
            continue
        if n.id[0] == "x" and n.id[1:].isdigit():
            continue
        names.append(n.id)
    return tuple(dict.fromkeys(names))


# ---------------------------------------------------------------------------- LLVM IR
@dataclass
class Member:
    """One fused step: its kernel, attributes and arguments (``("in", k)``: the cluster's
    input ``k``; ``("v", j)``: member ``j``'s value).
    """

    expr: str
    attributes: dict[str, float]
    args: list[tuple[str, int]]


def _const(value: float, t: str) -> str:
    """An LLVM float constant (hex: exact; a float's value written as a double)."""
    if t == "float":
        value = float(np.float32(value))
    return "0x{:016X}".format(struct.unpack("<Q", struct.pack("<d", value))[0])


@dataclass(frozen=True)
class Vector:
    """The main loop's vectors: ``bits`` (256: AVX2, 512: AVX-512) and glibc's vector math
    (libmvec, ISA letter ``isa``: ``d`` AVX2, ``e`` AVX-512) with the symbols it has.
    """

    bits: int
    isa: str
    symbols: frozenset[str]

    def __str__(self) -> str:  # the same in every process (a cache key's part)
        return f"vectors of {self.bits} bits ({self.isa}): {' '.join(sorted(self.symbols))}"

    def lanes(self, t: str) -> int:
        return self.bits // (64 if t == "double" else 32)

    def symbol(self, name: str, t: str, arity: int) -> str:
        """libmvec's name of ``name`` on ``lanes(t)`` lanes (the x86 vector function ABI)."""
        suffix = "" if t == "double" else "f"
        return f"_ZGV{self.isa}N{self.lanes(t)}{'v' * arity}_{name}{suffix}"


def _scalar_symbol(fn: str, t: str) -> str:
    if fn.startswith("llvm."):
        return fn + (".f64" if t == "double" else ".f32")
    return fn if t == "double" else fn + "f"


class _Body:
    """The instructions of one loop body on ``lanes`` elements at a time (1: scalars),
    with fresh names (``prefix``) and the declarations they use.
    """

    def __init__(
        self, t: str, declares: set[str], lanes: int = 1, vector: Vector | None = None
    ) -> None:
        self.t = t
        self.lanes = lanes
        self.vector = vector
        self.ty = t if lanes == 1 else f"<{lanes} x {t}>"
        self.mask = "i1" if lanes == 1 else f"<{lanes} x i1>"
        self.prefix = "%v" if lanes == 1 else "%w"
        self.lines: list[str] = []
        self.declares = declares
        self.n = 0

    def emit(self, text: str) -> str:
        self.n += 1
        name = f"{self.prefix}{self.n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def const(self, value: float) -> str:
        c = _const(value, self.t)
        if self.lanes == 1:
            return c
        return "<" + ", ".join([f"{self.t} {c}"] * self.lanes) + ">"

    def splat(self, scalar: str, et: str) -> str:
        """A vector of ``lanes`` copies of the scalar ``scalar`` of type ``et``."""
        vt = f"<{self.lanes} x {et}>"
        one = self.emit(f"insertelement {vt} poison, {et} {scalar}, i64 0")
        zeros = f"<{self.lanes} x i32> zeroinitializer"
        return self.emit(f"shufflevector {vt} {one}, {vt} poison, {zeros}")

    def float_of(self, v: tuple[str, str]) -> str:
        """A value as the float type (a mask is 0 or 1)."""
        name, kind = v
        return name if kind == "f" else self.emit(f"uitofp {self.mask} {name} to {self.ty}")

    def mask_of(self, v: tuple[str, str]) -> str:
        """A value as a mask (a float is true where nonzero, NaN included, as numpy's)."""
        name, kind = v
        if kind == "b":
            return name
        return self.emit(f"fcmp une {self.ty} {name}, {self.const(0.0)}")

    def call(self, fn: str, args: list[str]) -> str:
        t, ty = self.t, self.ty
        if self.lanes == 1:
            sym = _scalar_symbol(fn, t)
        elif fn in ("llvm.sqrt", "llvm.fabs"):  # instructions on vectors
            sym = f"{fn}.v{self.lanes}{'f64' if t == 'double' else 'f32'}"
        else:
            assert self.vector is not None
            sym = self.vector.symbol(fn.removeprefix("llvm."), t, len(args))
            if sym not in self.vector.symbols:
                return self._lanewise(fn, args)
        sig = ", ".join([ty] * len(args))
        self.declares.add(f"declare {ty} @{sym}({sig})")
        return self.emit(f"call {ty} @{sym}({', '.join(f'{ty} {a}' for a in args)})")

    def _lanewise(self, fn: str, args: list[str]) -> str:
        """``fn`` called on each lane (no vector version of it)."""
        t, sym = self.t, _scalar_symbol(fn, self.t)
        self.declares.add(f"declare {t} @{sym}({', '.join([t] * len(args))})")
        acc = "poison"
        for j in range(self.lanes):
            xs = [self.emit(f"extractelement {self.ty} {a}, i64 {j}") for a in args]
            y = self.emit(f"call {t} @{sym}({', '.join(f'{t} {x}' for x in xs)})")
            acc = self.emit(f"insertelement {self.ty} {acc}, {t} {y}, i64 {j}")
        return acc

    def extremum(self, a: str, b: str, pred: str) -> str:
        ty, mask = self.ty, self.mask  # numpy's maximum/minimum: NaN if either is NaN
        keep = self.emit(f"fcmp {pred} {ty} {a}, {b}")
        m = self.emit(f"select {mask} {keep}, {ty} {a}, {ty} {b}")
        nan = self.emit(f"fcmp uno {ty} {a}, {a}")
        return self.emit(f"select {mask} {nan}, {ty} {a}, {ty} {m}")


_BINARY = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}
_COMPARE = {ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge", ast.Eq: "oeq"}
_COMPARE[ast.NotEq] = "une"


def _emit(
    body: _Body, node: ast.expr, xs: list[tuple[str, str]], attrs: dict[str, float]
) -> tuple[str, str]:
    """Instructions for the expression ``node``: (value name, ``"f"`` float or ``"b"`` mask)."""
    t = body.ty
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return body.const(float(node.value)), "f"
    if isinstance(node, ast.Name):
        if node.id in attrs:
            return body.const(attrs[node.id]), "f"
        return xs[int(node.id[1:])]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        a = body.float_of(_emit(body, node.operand, xs, attrs))
        return body.emit(f"fneg {t} {a}"), "f"
    if isinstance(node, ast.BinOp):
        a = body.float_of(_emit(body, node.left, xs, attrs))
        b = body.float_of(_emit(body, node.right, xs, attrs))
        if isinstance(node.op, ast.Pow):
            return body.call("llvm.pow", [a, b]), "f"
        return body.emit(f"{_BINARY[type(node.op)]} {t} {a}, {b}"), "f"
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a = body.float_of(_emit(body, node.left, xs, attrs))
        b = body.float_of(_emit(body, node.comparators[0], xs, attrs))
        return body.emit(f"fcmp {_COMPARE[type(node.ops[0])]} {t} {a}, {b}"), "b"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _emit_call(body, node.func.id, node.args, xs, attrs)
    raise ValueError(f"scalar kernel: cannot compile {ast.unparse(node)!r}")


def _emit_call(
    body: _Body, fn: str, args: list[ast.expr], xs: list[tuple[str, str]], attrs: dict[str, float]
) -> tuple[str, str]:
    if fn == "prod":  # prod(xs): x0 * x1 * ... left to right, as numpy's loop
        vals = [body.float_of(x) for x in xs]
        acc = vals[0]
        for v in vals[1:]:
            acc = body.emit(f"fmul {body.ty} {acc}, {v}")
        return acc, "f"
    if fn == "where":
        c = body.mask_of(_emit(body, args[0], xs, attrs))
        a = body.float_of(_emit(body, args[1], xs, attrs))
        b = body.float_of(_emit(body, args[2], xs, attrs))
        return body.emit(f"select {body.mask} {c}, {body.ty} {a}, {body.ty} {b}"), "f"
    vals = [body.float_of(_emit(body, a, xs, attrs)) for a in args]
    if fn in ("maximum", "minimum"):
        return body.extremum(vals[0], vals[1], "oge" if fn == "maximum" else "ole"), "f"
    if fn not in FUNCTIONS or len(vals) != FUNCTIONS[fn][1]:
        raise ValueError(f"scalar kernel: unknown function {fn} of {len(vals)} arguments")
    return body.call(FUNCTIONS[fn][0], vals), "f"


def kernel_ir(
    name: str,
    shape: tuple[int, ...],
    dtype: Any,
    inputs: Sequence[tuple[tuple[int, ...], Any]],
    members: Sequence[Member],
    outputs: Sequence[int],
    declares: set[str],
    vector: Vector | None = None,
) -> str:
    """``void name(ptr args)``: ``args`` holds the addresses of the C-contiguous ``inputs``
    (shape, dtype: ``dtype`` or bool; broadcast to ``shape``) then of the ``outputs`` (the
    values of those members, of ``shape`` and ``dtype``); a loop over ``prod(shape)``, on
    ``vector``'s lanes (libmvec's functions) for the whole vectors, then on the remainder.
    """
    t = _FLOATS[np.dtype(dtype)]
    n = math.prod(shape)
    lanes = vector.lanes(t) if vector is not None else 1
    nv = n // lanes * lanes if lanes > 1 else 0
    head: list[str] = [f"define void @{name}(ptr noalias nocapture readonly %args) nounwind {{"]
    head.append("entry:")
    ptrs = []
    for k in range(len(inputs) + len(outputs)):
        head.append(f"  %q{k} = getelementptr ptr, ptr %args, i64 {k}")
        head.append(f"  %p{k} = load ptr, ptr %q{k}")
        ptrs.append(f"%p{k}")
    pre = _Body(t, declares)
    pre.prefix = "%e"
    blocks: list[str] = []
    first = "exit"
    if nv < n:  # the scalar loop (all of it when there are no whole vectors)
        scalar = _Body(t, declares)
        _body(scalar, pre, "%j", shape, inputs, members, outputs, ptrs)
        came = "vloop" if nv else "entry"
        blocks += _loop("sloop", "%j", nv, 1, n, came, "exit", scalar.lines)
        first = "sloop"
    if nv:
        wide = _Body(t, declares, lanes, vector)
        _body(wide, pre, "%i", shape, inputs, members, outputs, ptrs)
        blocks = _loop("vloop", "%i", 0, lanes, nv, "entry", first, wide.lines) + blocks
        first = "vloop"
    return "\n".join(
        [*head, *pre.lines, f"  br label %{first}", *blocks, "exit:", "  ret void", "}"]
    )


def _loop(
    label: str, i: str, start: int, step: int, stop: int, came: str, then: str, lines: list[str]
) -> list[str]:
    """A block ``label`` running ``lines`` for ``i`` in ``range(start, stop, step)``."""
    return [
        f"{label}:",
        f"  {i} = phi i64 [ {start}, %{came} ], [ {i}.next, %{label} ]",
        *lines,
        f"  {i}.next = add nuw i64 {i}, {step}",
        f"  {i}.done = icmp eq i64 {i}.next, {stop}",
        f"  br i1 {i}.done, label %{then}, label %{label}",
    ]


def _body(
    body: _Body,
    pre: _Body,
    i: str,
    shape: tuple[int, ...],
    inputs: Sequence[tuple[tuple[int, ...], Any]],
    members: Sequence[Member],
    outputs: Sequence[int],
    ptrs: list[str],
) -> None:
    """The loop body on elements ``i, ..., i + lanes - 1``: loads, members, stores."""
    t = body.t
    loaded = [_load(body, pre, i, s, d, shape, ptrs[k]) for k, (s, d) in enumerate(inputs)]
    values: list[tuple[str, str]] = []
    for m in members:
        xs = [loaded[j] if kind == "in" else values[j] for kind, j in m.args]
        values.append(_emit(body, _parsed(m.expr).body, xs, m.attributes))
    size = 8 if t == "double" else 4
    for k, j in enumerate(outputs):
        v = body.float_of(values[j])
        o = body.emit(f"getelementptr {t}, ptr {ptrs[len(inputs) + k]}, i64 {i}")
        body.lines.append(f"  store {body.ty} {v}, ptr {o}, align {size}")


def _load(
    body: _Body,
    pre: _Body,
    i: str,
    s: tuple[int, ...],
    d: Any,
    shape: tuple[int, ...],
    p: str,
) -> tuple[str, str]:
    """Elements ``i, ..., i + lanes - 1`` of an input of shape ``s`` broadcast to ``shape``:
    one load when they are contiguous (or one element, splat), else lane by lane.
    """
    is_bool = np.dtype(d) == np.bool_
    et = "i8" if is_bool else body.t
    size = 1 if is_bool else (8 if body.t == "double" else 4)
    lanes = body.lanes
    strides = _strides(tuple(s), shape)
    whole = lanes == 1 or shape[-1] % lanes == 0
    if strides is not None and not any(strides):  # one element for the whole loop
        x = pre.emit(f"load {et}, ptr {p}")
        return _as_value(pre, x, is_bool) if lanes == 1 else _splat(body, pre, x, is_bool)
    if strides is None or (whole and strides[-1] == 1):  # contiguous lanes
        offset = i if strides is None else _offset(body, strides, shape, i)
        g = body.emit(f"getelementptr {et}, ptr {p}, i64 {offset}")
        vt = et if lanes == 1 else f"<{lanes} x {et}>"
        return _as_value(body, body.emit(f"load {vt}, ptr {g}, align {size}"), is_bool)
    if whole and strides[-1] == 0:  # the lanes read one element
        g = body.emit(f"getelementptr {et}, ptr {p}, i64 {_offset(body, strides, shape, i)}")
        x = body.emit(f"load {et}, ptr {g}")
        return _as_value(body, x, is_bool) if lanes == 1 else _splat(body, body, x, is_bool)
    acc = "poison"  # lane by lane
    vt = f"<{lanes} x {et}>"
    for j in range(lanes):
        ij = body.emit(f"add i64 {i}, {j}")
        g = body.emit(f"getelementptr {et}, ptr {p}, i64 {_offset(body, strides, shape, ij)}")
        x = body.emit(f"load {et}, ptr {g}")
        acc = body.emit(f"insertelement {vt} {acc}, {et} {x}, i64 {j}")
    return _as_value(body, acc, is_bool)


def _as_value(body: _Body, x: str, is_bool: bool) -> tuple[str, str]:
    """A loaded value: a float, or a mask from bytes."""
    if not is_bool:
        return x, "f"
    vt = "i8" if body.lanes == 1 else f"<{body.lanes} x i8>"
    return body.emit(f"icmp ne {vt} {x}, {'0' if vt == 'i8' else 'zeroinitializer'}"), "b"


def _splat(body: _Body, at: _Body, x: str, is_bool: bool) -> tuple[str, str]:
    """The scalar ``x`` (loaded in ``at``) on every lane of ``body``."""
    if is_bool:
        m = at.emit(f"icmp ne i8 {x}, 0")
        return body.splat(m, "i1"), "b"
    return body.splat(x, body.t), "f"


def _strides(s: tuple[int, ...], shape: tuple[int, ...]) -> list[int] | None:
    """Element strides of a C-contiguous array of shape ``s`` broadcast to ``shape``
    (0 along broadcast axes); None when it is ``shape`` itself (stride pattern of ``i``).
    """
    padded = (1,) * (len(shape) - len(s)) + s
    if padded == shape:
        return None
    strides, step = [], 1
    for d in reversed(padded):
        strides.append(0 if d == 1 else step)
        step *= d
    return strides[::-1]


def _offset(body: _Body, strides: list[int], shape: tuple[int, ...], i: str) -> str:
    """The flat offset of element ``i`` of ``shape`` in an input of ``strides``."""
    acc = "0"
    inner = 1
    for axis in range(len(shape) - 1, -1, -1):
        if strides[axis]:
            q = body.emit(f"udiv i64 {i}, {inner}") if inner > 1 else i
            r = body.emit(f"urem i64 {q}, {shape[axis]}")
            term = body.emit(f"mul i64 {r}, {strides[axis]}")
            acc = body.emit(f"add i64 {acc}, {term}")
        inner *= shape[axis]
    return acc


def module_ir(kernels: Sequence[str], declares: set[str]) -> str:
    """One module holding every kernel of a program (one LLVM run compiles them all)."""
    return "\n\n".join([*sorted(declares), *kernels]) + "\n"
