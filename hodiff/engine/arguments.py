"""A function's arguments as Variables: constants wrapped where the inputs live.

A primitive called with Python numbers, lists or arrays wraps them as constant leaves
(:func:`wrap`): a Python number takes the float dtype of the array arguments (numpy's
weak-scalar rule), and a constant goes to the device of the arrays (:func:`array_module_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine.complex_values import complex_dtype, real_dtype
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.variable import Variable, as_variable

__all__ = ["array_module_of", "as_variables", "check_devices", "refuse_input_mask", "wrap"]


def refuse_input_mask(node: Any, mask: Any) -> None:
    """NNabla's ``node.set_active_input_mask(mask)``: refused, saying how hodiff does it.

    A node's arguments are fixed once it is built (a compiled program, a checkpoint's kept
    graph, a saved graph hold them), and ``F.add_n`` is a chain of ``add2`` nodes.
    """
    raise NotImplementedError(
        f"{node.name}.set_active_input_mask: NNabla's input masks are not part of hodiff (a "
        "node's arguments are fixed once it is built; F.add_n is a chain of add2 nodes). "
        "Build the sum or product of the active inputs, F.add_n(*[x for x, on in zip(xs, "
        "mask) if on]); to switch inputs at every step of one static graph, weight them by "
        "0/1 Variables m set through m.d before forward(): F.add_n(*[x * m for x, m in "
        "zip(xs, ms)]), F.mul_n(*[x * m + (1.0 - m) for x, m in zip(xs, ms)]) (an input "
        "switched off adds 0, multiplies by 1 and gets a zero gradient)"
    )


def check_devices(name: str, inputs: Sequence[Variable], error: Exception) -> None:
    """After a failed forward: a clear TypeError when numpy and cupy inputs were mixed."""
    kinds = ["cupy" if type(x._data).__module__.startswith("cupy") else "numpy" for x in inputs]
    if len(set(kinds)) > 1:
        where = ", ".join(
            f"input {i} {k} {x.shape} {x.dtype}"
            for i, (k, x) in enumerate(zip(kinds, inputs, strict=True))
        )
        raise TypeError(
            f"{name}: inputs live on different devices ({where}); move Variables with "
            "Variable.from_array(cupy.asarray(v.d)) or build them in one context"
        ) from error


def wrap(value: Any, args: Sequence[Any]) -> Variable:
    """A constant leaf for a non-Variable argument; a Python scalar, or a list of Python
    floats, takes the float dtype of the array arguments (numpy's weak-scalar rule, extended
    to lists: Python numbers have no dtype of their own), so ``where(c, gy, 0.0)`` keeps gy's
    dtype and ``x32 - [1.0, 2.0]`` stays float32. Alone, Python numbers and lists are what
    numpy makes of them (float64 for floats), in every spelling.

    A constant goes where the array arguments are: next to a cupy array, a scalar or a numpy
    array (a mask, an index array made by a composed function) becomes a cupy array.
    """
    if isinstance(value, bool | int | float | complex):
        return _wrap_number(value, args)
    if isinstance(value, list):
        a = np.asarray(value)
        if a.dtype.kind in "fc":  # a list of ints stays ints (labels, indices)
            dtype = _float_dtype_of([b for b in args if b is not value])
            if dtype is not None:
                a = a.astype(_paired(dtype, a.dtype.kind == "c"), copy=False)
        return Variable.from_array(array_module_of(*args).asarray(a), copy=False)
    if isinstance(value, np.ndarray | np.generic):
        xp = array_module_of(*args)
        if xp is not np:
            return Variable.from_array(xp.asarray(value), copy=False)
    return as_variable(value)


def _float_dtype_of(args: Sequence[Any]) -> Any:
    """The dtype of the first float or complex array (or Variable) among ``args``, or None."""
    for a in args:
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.kind in "fc":
            return dtype
    return None


def _paired(dtype: Any, is_complex: bool) -> Any:
    """The dtype a Python number takes next to an array of float or complex ``dtype``: its
    precision, complex if the number is (``2.0`` next to complex64: float32; ``1j`` next to
    float32: complex64).
    """
    return complex_dtype(dtype) if is_complex else real_dtype(dtype)


def _wrap_number(value: bool | int | float | complex, args: Sequence[Any]) -> Variable:
    """:func:`wrap` of a Python number: in the precision of the first float (or complex)
    argument, on its device; alone, what numpy makes of it.
    """
    for a in args:
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.kind in "fc":
            d = a._data if isinstance(a, Variable) else a
            xp = np if type(d) is np.ndarray else array_module_of(*args)  # numpy: no search
            is_complex = isinstance(value, complex)  # np.complex128 is one too
            if dtype.kind == "c" or is_complex:
                dtype = _paired(dtype, is_complex)
            return Variable.from_array(xp.asarray(value, dtype=dtype))
    xp = array_module_of(*args)
    if xp is not np:
        return Variable.from_array(xp.asarray(np.asarray(value)), copy=False)
    return as_variable(value)


def as_variables(*values: Any) -> list[Variable]:
    """``values`` as Variables by the rule of a function's arguments (:func:`wrap`): for a
    composed function that needs its operands as Variables before calling primitives (a
    Python number or list of floats next to a float32 Variable is float32).
    """
    return [v if isinstance(v, Variable) else wrap(v, values) for v in values]


def array_module_of(*values: Any) -> Any:
    """numpy or cupy: cupy if any of ``values`` has a cupy array (a bare array, a Variable's
    value, or the batched value of a Variable inside ``hd.vmap``), else numpy; the context's
    module when none has an array yet (a static graph before its forward).

    Composed functions make their constants (masks, index arrays) with it, so that they live
    where the inputs do.
    """
    found = None
    for a in values:
        while isinstance(a, Variable):
            a = a._data if a._data is not None else getattr(a, "_value", None)
        if a is not None and hasattr(a, "shape"):
            found = array_module(a)
            if found is not np:  # a GPU array anywhere wins over host arrays
                return found
    return found if found is not None else get_default_context().xp
