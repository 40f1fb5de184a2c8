"""Named parameters (NNabla's ``nnabla.parameter``): scopes, creation, saving and loading.

Parameters live in one process-wide registry, a dict from full name to a leaf
:class:`~hodiff.Variable`, in creation order. Full names are the scopes joined
by ``/`` (``"gen/affine/W"``). The current scope is per thread (a
``contextvars`` variable, like the modes of ``hodiff.context``); the registry
is shared by all threads and guarded by a lock, so threads may create and read
parameters concurrently.

File layout of :func:`save_parameters`: one numpy ``.npz`` archive (numpy's
layout, see :mod:`hodiff.training.archive`; readable with ``numpy.load``) holding one array per
parameter, keyed by its name relative to the scope where ``save_parameters``
was called (the full name at the top level), in its dtype, on the host.
Nothing else is stored: ``need_grad`` flags come from the code that uses the
parameters (a loaded parameter that did not exist gets ``need_grad=True`` until
``get_parameter_or_create`` asks for another flag).

>>> import hodiff as hd
>>> hd.clear_parameters()
>>> with hd.parameter_scope("net"), hd.parameter_scope("fc"):
...     w = hd.get_parameter_or_create("W", (2, 3))
>>> list(hd.get_parameters())
['net/fc/W']
>>> hd.clear_parameters()
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.context import array_module, get_default_context
from hodiff.engine.variable import Variable
from hodiff.training.archive import read_arrays, write_arrays

__all__ = [
    "clear_parameters",
    "get_parameter_or_create",
    "get_parameters",
    "load_parameters",
    "parameter_scope",
    "save_parameters",
]

_lock = threading.RLock()
_params: dict[str, Variable] = {}
_scope: contextvars.ContextVar[str] = contextvars.ContextVar("hodiff_parameter_scope", default="")


def _check_name(where: str, name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{where}: name must be a str, got {type(name).__name__}")
    if not name or name.startswith("/") or name.endswith("/") or "//" in name:
        raise ValueError(f"{where}: name must be non-empty names joined by '/', got {name!r}")
    return name


@contextlib.contextmanager
def parameter_scope(name: str) -> Iterator[str]:
    """Context manager: parameters created inside are named ``name/...`` (scopes nest with ``/``).

    Args:
        name: the scope's name (may itself contain ``/``).

    Yields:
        The full scope, e.g. ``"gen/affine"``.
    """
    name = _check_name("parameter_scope", name)
    full = _scope.get() + name + "/"
    token = _scope.set(full)
    try:
        yield full[:-1]
    finally:
        _scope.reset(token)


def current_scope() -> str:
    """The full name of the current scope (``""`` at the top level)."""
    return _scope.get()[:-1]


def _as_array(where: str, name: str, value: Any, shape: tuple[int, ...] | None, dtype: Any) -> Any:
    """``value`` as an array of ``dtype`` on the context's device (checked against ``shape``)."""
    a = np.asarray(value) if array_module(value) is np else value
    if shape is not None and tuple(a.shape) != shape:
        raise ValueError(
            f"{where}: the initializer of {name!r} gave shape {tuple(a.shape)}, expected {shape}"
        )
    if a.dtype.kind == "c" and np.dtype(dtype).kind != "c":  # the complex pair of the dtype
        dtype = np.result_type(dtype, np.complex64)
    return get_default_context().xp.asarray(a, dtype=dtype)


def get_parameter_or_create(
    name: str,
    shape: Sequence[int] | None = None,
    initializer: Callable[[tuple[int, ...]], Any] | Any = None,
    need_grad: bool = True,
) -> Variable:
    """The parameter ``name`` of the current scope, created on first use and shared after.

    A new parameter gets ``initializer(shape)`` (a callable such as
    ``hodiff.initializers.UniformInitializer``, or an array to copy; zeros when
    None), cast to the context's dtype (complex values: its complex pair, complex64 for
    float32) on its device. An existing one is returned
    as it is (the same Variable, so every caller shares it), after checking its
    shape; its ``need_grad`` is set to ``need_grad`` (NNabla's rule).

    Args:
        name: name under the current scope (may contain ``/``).
        shape: the parameter's shape; may be None when ``initializer`` is an array.
        initializer: callable ``shape -> array``, an array, or None (zeros).
        need_grad: whether the parameter is trained.

    Raises:
        ValueError: an existing parameter of that name has another shape.

    >>> import hodiff as hd, hodiff.initializers as I
    >>> hd.clear_parameters()
    >>> a = hd.get_parameter_or_create("w", (2,), I.ConstantInitializer(3.0))
    >>> b = hd.get_parameter_or_create("w", (2,))
    >>> a is b, a.d
    (True, array([3., 3.], dtype=float32))
    >>> hd.clear_parameters()
    """
    where = "get_parameter_or_create"
    name = _check_name(where, name)
    full = _scope.get() + name
    if isinstance(shape, int | np.integer):
        shape = (int(shape),)
    if shape is not None:
        shape = tuple(int(s) for s in shape)
    with _lock:
        p = _params.get(full)
        if p is not None:
            if shape is not None and p.shape != shape:
                raise ValueError(
                    f"{where}: parameter {full!r} exists with shape {p.shape}, asked for {shape}"
                    " (hd.clear_parameters() removes all parameters)"
                )
            p.need_grad = bool(need_grad)
            return p
        if initializer is None:
            if shape is None:
                raise ValueError(f"{where}: {full!r} needs a shape or an array initializer")
            value = np.zeros(shape)
        elif callable(initializer):
            if shape is None:
                raise ValueError(f"{where}: {full!r} needs a shape for a callable initializer")
            value = initializer(shape)
        else:
            value = initializer
        value = _as_array(where, full, value, shape, get_default_context().dtype)
        p = Variable.from_array(value, need_grad=bool(need_grad))
        _params[full] = p
        return p


def get_parameters(grad_only: bool = True) -> dict[str, Variable]:
    """The parameters under the current scope, in creation order: name -> Variable.

    Names are relative to the current scope (full names at the top level).

    Args:
        grad_only: only those with ``need_grad`` True.
    """
    prefix = _scope.get()
    n = len(prefix)
    with _lock:
        return {
            k[n:]: v
            for k, v in _params.items()
            if k.startswith(prefix) and (v.need_grad or not grad_only)
        }


def clear_parameters() -> None:
    """Removes every parameter under the current scope (all of them at the top level)."""
    prefix = _scope.get()
    with _lock:
        for k in [k for k in _params if k.startswith(prefix)]:
            del _params[k]


def _host(a: Any) -> np.ndarray:
    return a if array_module(a) is np else a.get()


def save_parameters(path: str | os.PathLike[str]) -> None:
    """Writes every parameter under the current scope to ``path``, one ``.npz`` archive.

    The archive holds one array per parameter keyed by its name (relative to the
    current scope); see the module docstring for the layout. Any name round-trips
    (``/``, spaces, unicode, numpy's keywords such as ``file``; see
    :mod:`hodiff.training.archive`). ``path`` is used as given (no suffix is added); it is
    replaced only once the new file is complete.
    """
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix in (".h5", ".hdf5", ".protobuf", ".nnp"):
        warnings.warn(
            f"save_parameters: {os.fspath(path)!r} is written as hodiff's parameter file, a "
            f"numpy .npz archive (a zip), not the {suffix} format its name suggests (NNabla "
            "writes HDF5 there); name it .npz",
            stacklevel=2,
        )
    arrays: dict[str, Any] = {k: _host(v.d) for k, v in get_parameters(grad_only=False).items()}
    write_arrays(path, arrays)


def load_parameters(path: str | os.PathLike[str]) -> None:
    """Reads an archive of :func:`save_parameters` into the current scope, all or nothing.

    An existing parameter keeps its Variable and gets the stored values written
    into its array (in place, so solvers holding it see them); a missing one is
    created (``need_grad=True``). Shapes must agree. The whole file is read and
    checked first: when it raises, no parameter has changed and none was created.

    Raises:
        ValueError: the file is truncated or corrupted, holds a name that is not a
            parameter name or an array that is not numbers (real or complex), a complex
            array for a real parameter, or a stored array's
            shape differs from the existing parameter's (the message names the
            parameter, both shapes and the file).
    """
    where = "load_parameters"
    shown = os.fspath(path)
    arrays = read_arrays(where, path, "a parameter file of save_parameters")
    prefix = _scope.get()
    with _lock:
        writes: list[tuple[str, Variable, Any]] = []
        creates: list[tuple[str, Any]] = []
        for k, a in arrays.items():
            try:
                _check_name(where, k)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{e} (stored in {shown!r})") from None
            full = prefix + k
            if a.dtype.kind not in "biufc":
                raise ValueError(
                    f"{where}: {shown!r} holds {full!r} of dtype {a.dtype}; parameters are "
                    "real or complex numbers"
                )
            p = _params.get(full)
            if p is not None and a.dtype.kind == "c" and p.dtype.kind != "c":
                raise ValueError(
                    f"{where}: {shown!r} holds {full!r} of dtype {a.dtype}, the parameter is "
                    f"real ({p.dtype}): its imaginary part would be lost; nothing was loaded"
                )
            if p is None:
                creates.append((full, _as_array(where, full, a, None, a.dtype)))
            elif p.shape != a.shape:
                raise ValueError(
                    f"{where}: {full!r} has shape {p.shape} but {shown!r} holds shape "
                    f"{a.shape}; nothing was loaded"
                )
            else:
                xp = array_module(p.d)
                writes.append((full, p, a if xp is np else xp.asarray(a)))
        # everything is checked (and on the device): now write
        for full, p, a in writes:
            p.d[...] = a  # in place: a solver and the caller keep this array
            api.mark_written(p, f"the parameter {full!r} written in place by load_parameters")
        for full, a in creates:
            _params[full] = Variable.from_array(a, need_grad=True)
