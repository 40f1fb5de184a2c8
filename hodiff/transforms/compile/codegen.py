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

__all__ = ["FUNCTIONS", "Member", "attributes_of", "kernel_ir", "kernel_of", "module_ir"]

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
    cls = type(node)
    expr = cls.scalar_kernel
    if expr is None:
        return None
    declared, forward = _owner(cls, "scalar_kernel"), _owner(cls, "forward_impl")
    return expr if issubclass(declared, forward) else None


def attributes_of(node: Function, expr: str) -> dict[str, float] | None:
    """The numeric attributes ``expr`` names, read from ``node`` (None: one is not a number)."""
    out: dict[str, float] = {}
    for n in ast.walk(_parsed(expr)):
        if not isinstance(n, ast.Name) or n.id in FUNCTIONS or n.id == "xs":
            continue
        if n.id[0] == "x" and n.id[1:].isdigit():
            continue
        v = getattr(node, n.id, None)
        if not isinstance(v, float | int):  # bool included
            return None
        out[n.id] = float(v)
    return out


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


class _Body:
    """The instructions of one function, with fresh names and the declarations they use."""

    def __init__(self, t: str, declares: set[str]) -> None:
        self.t = t
        self.lines: list[str] = []
        self.declares = declares
        self.n = 0

    def emit(self, text: str) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def float_of(self, v: tuple[str, str]) -> str:
        """A value as the float type (a mask is 0 or 1)."""
        name, kind = v
        return name if kind == "f" else self.emit(f"uitofp i1 {name} to {self.t}")

    def mask_of(self, v: tuple[str, str]) -> str:
        """A value as a mask (a float is true where nonzero, NaN included, as numpy's)."""
        name, kind = v
        if kind == "b":
            return name
        return self.emit(f"fcmp une {self.t} {name}, {_const(0.0, self.t)}")

    def call(self, fn: str, args: list[str]) -> str:
        t = self.t
        suffix = ".f64" if t == "double" else ".f32"
        sym = fn + suffix if fn.startswith("llvm.") else (fn if t == "double" else fn + "f")
        sig = ", ".join([t] * len(args))
        self.declares.add(f"declare {t} @{sym}({sig})")
        return self.emit(f"call {t} @{sym}({', '.join(f'{t} {a}' for a in args)})")

    def extremum(self, a: str, b: str, pred: str) -> str:
        t = self.t  # numpy's maximum/minimum: NaN if either is NaN
        keep = self.emit(f"fcmp {pred} {t} {a}, {b}")
        m = self.emit(f"select i1 {keep}, {t} {a}, {t} {b}")
        nan = self.emit(f"fcmp uno {t} {a}, {a}")
        return self.emit(f"select i1 {nan}, {t} {a}, {t} {m}")


_BINARY = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}
_COMPARE = {ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge", ast.Eq: "oeq"}
_COMPARE[ast.NotEq] = "une"


def _emit(
    body: _Body, node: ast.expr, xs: list[tuple[str, str]], attrs: dict[str, float]
) -> tuple[str, str]:
    """Instructions for the expression ``node``: (value name, ``"f"`` float or ``"b"`` mask)."""
    t = body.t
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return _const(float(node.value), t), "f"
    if isinstance(node, ast.Name):
        if node.id in attrs:
            return _const(attrs[node.id], t), "f"
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
            acc = body.emit(f"fmul {body.t} {acc}, {v}")
        return acc, "f"
    if fn == "where":
        c = body.mask_of(_emit(body, args[0], xs, attrs))
        a = body.float_of(_emit(body, args[1], xs, attrs))
        b = body.float_of(_emit(body, args[2], xs, attrs))
        return body.emit(f"select i1 {c}, {body.t} {a}, {body.t} {b}"), "f"
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
) -> str:
    """``void name(ptr args)``: ``args`` holds the addresses of the C-contiguous ``inputs``
    (shape, dtype: ``dtype`` or bool; broadcast to ``shape``) then of the ``outputs`` (the
    values of those members, of ``shape`` and ``dtype``); one loop over ``prod(shape)``.
    """
    t = _FLOATS[np.dtype(dtype)]
    n = math.prod(shape)
    body = _Body(t, declares)
    head: list[str] = [f"define void @{name}(ptr noalias nocapture readonly %args) nounwind {{"]
    head.append("entry:")
    ptrs = []
    for k in range(len(inputs) + len(outputs)):
        head.append(f"  %q{k} = getelementptr ptr, ptr %args, i64 {k}")
        head.append(f"  %p{k} = load ptr, ptr %q{k}")
        ptrs.append(f"%p{k}")
    loaded: list[tuple[str, str]] = []
    pre: list[str] = []
    for k, (s, d) in enumerate(inputs):
        is_bool = np.dtype(d) == np.bool_
        et = "i8" if is_bool else t
        strides = _strides(tuple(s), shape)
        if strides is None:
            offset = "%i"
        elif not any(strides):
            offset = "0"
        else:
            offset = _offset(body, strides, shape)
        target = pre if offset == "0" else body.lines
        v = f"%x{k}"
        target.append(f"  %g{k} = getelementptr {et}, ptr {ptrs[k]}, i64 {offset}")
        target.append(f"  {v}{'r' if is_bool else ''} = load {et}, ptr %g{k}")
        if is_bool:
            target.append(f"  {v} = icmp ne i8 {v}r, 0")
        loaded.append((v, "b" if is_bool else "f"))
    values: list[tuple[str, str]] = []
    for m in members:
        xs = [loaded[j] if kind == "in" else values[j] for kind, j in m.args]
        values.append(_emit(body, _parsed(m.expr).body, xs, m.attributes))
    for k, j in enumerate(outputs):
        p = ptrs[len(inputs) + k]
        v = body.float_of(values[j])
        body.lines.append(f"  %o{k} = getelementptr {t}, ptr {p}, i64 %i")
        body.lines.append(f"  store {t} {v}, ptr %o{k}")
    return "\n".join(
        [
            *head,
            *pre,
            "  br label %loop",
            "loop:",
            "  %i = phi i64 [ 0, %entry ], [ %next, %loop ]",
            *body.lines,
            "  %next = add nuw i64 %i, 1",
            f"  %done = icmp eq i64 %next, {n}",
            "  br i1 %done, label %exit, label %loop",
            "exit:",
            "  ret void",
            "}",
        ]
    )


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


def _offset(body: _Body, strides: list[int], shape: tuple[int, ...]) -> str:
    """The flat offset of element ``%i`` of ``shape`` in an input of ``strides``."""
    acc = "0"
    inner = 1
    for axis in range(len(shape) - 1, -1, -1):
        if strides[axis]:
            q = body.emit(f"udiv i64 %i, {inner}") if inner > 1 else "%i"
            r = body.emit(f"urem i64 {q}, {shape[axis]}")
            term = body.emit(f"mul i64 {r}, {strides[axis]}")
            acc = body.emit(f"add i64 {acc}, {term}")
        inner *= shape[axis]
    return acc


def module_ir(kernels: Sequence[str], declares: set[str]) -> str:
    """One module holding every kernel of a program (one LLVM run compiles them all)."""
    return "\n\n".join([*sorted(declares), *kernels]) + "\n"
