"""The typed JSON encoding of static arguments (tuples, numpy scalars, dtypes, arrays...)."""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

import hodiff.functions  # defines every primitive that known_classes collects
import hodiff.grad_functions
from hodiff.engine.function import REGISTRY, Function
from hodiff.tools.graphio.walk import static_arguments

__all__ = ["CorruptError", "Decoder", "Encoder", "class_key", "dtype_text", "known_classes"]

_VALUES = "values.npz"


_PY_TYPES: dict[str, type] = {"float": float, "int": int, "bool": bool, "complex": complex}


def class_key(cls: type[Function]) -> str:
    """A primitive's type in the file: its class name for hodiff's own, module.qualname else."""
    if cls in REGISTRY:
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


class Encoder:
    """JSON-able form of static arguments; arrays go to the npz under ``a<k>``."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    def array(self, a: Any) -> str:
        a = np.asarray(a.get() if hasattr(a, "__cuda_array_interface__") else a)
        if a.dtype.hasobject:
            raise TypeError("object arrays cannot be stored")
        key = f"a{sum(1 for k in self.arrays if k.startswith('a'))}"
        self.arrays[key] = a
        return key

    def __call__(self, v: Any, where: str) -> Any:
        # numpy first: np.float64 is also a float
        if isinstance(v, np.generic | np.ndarray | np.dtype) or hasattr(
            v, "__cuda_array_interface__"
        ):
            return self.numpy(v, where)
        if v is None or isinstance(v, bool | int | str):
            return v
        if isinstance(v, float | complex):
            return self.number(v, where)
        if isinstance(v, type):
            return self.type_entry(v, where)
        if isinstance(v, tuple | list | dict | slice):
            return self.container(v, where)
        if v is Ellipsis:
            return {"$ellipsis": None}
        if isinstance(v, Function):
            return {"$function": self.function(v, where)}
        raise TypeError(
            f"{where} is a {type(v).__name__}, which a graph file cannot store (it stores "
            "None, bool, int, float, complex, str, tuples, lists, dicts, slices, Ellipsis, "
            "numpy dtypes, scalars and arrays, and Function instances)"
        )

    def numpy(self, v: Any, where: str) -> dict[str, Any]:
        """A numpy scalar or dtype, or an array (numpy or cupy) stored in the npz."""
        if isinstance(v, np.generic):
            if v.dtype.hasobject:
                raise TypeError(f"{where}: numpy object scalar cannot be stored")
            return {"$scalar": self.array(np.asarray(v))}
        if isinstance(v, np.dtype):
            if v.hasobject or v.names is not None:
                raise TypeError(f"{where}: dtype {v} cannot be stored")
            return {"$dtype": dtype_text(v)}
        try:
            return {"$array": self.array(v)}
        except TypeError:
            raise TypeError(f"{where}: object arrays cannot be stored") from None

    def number(self, v: float | complex, where: str) -> Any:
        """A finite float as itself, inf and nan by their repr, a complex by its two parts."""
        if isinstance(v, complex):
            return {"$complex": [self(v.real, where), self(v.imag, where)]}
        return v if math.isfinite(v) else {"$float": repr(v)}

    def type_entry(self, v: type, where: str) -> dict[str, Any]:
        """A numpy scalar type, a Python number type or a primitive's class."""
        if issubclass(v, np.generic) and v is not np.object_:
            return {"$type": "numpy", "dtype": dtype_text(np.dtype(v))}
        if v in _PY_TYPES.values():
            return {"$type": v.__name__}
        if issubclass(v, Function):
            return {"$type": "function", "class": class_key(v)}
        raise TypeError(f"{where}: the type {v.__name__} cannot be stored")

    def container(self, v: tuple[Any, ...] | list[Any] | dict[Any, Any] | slice, where: str) -> Any:
        """A tuple, list, dict or slice, its items encoded one by one."""
        if isinstance(v, tuple):
            return {"$tuple": [self(x, where) for x in v]}
        if isinstance(v, list):
            return [self(x, where) for x in v]
        if isinstance(v, dict):
            return {"$dict": [[self(k, where), self(x, where)] for k, x in v.items()]}
        return {"$slice": [self(v.start, where), self(v.stop, where), self(v.step, where)]}

    def function(self, f: Function, where: str) -> dict[str, Any]:
        args, kwargs = static_arguments(f)
        here = f"{where}: {f.name}"
        return {
            "type": class_key(type(f)),
            "args": [self(a, f"{here} argument {i}") for i, a in enumerate(args)],
            "kwargs": {k: self(a, f"{here} static argument {k!r}") for k, a in kwargs.items()},
        }


class CorruptError(Exception):
    """Raised while decoding; load_graph turns it into a ValueError naming the file."""


class Decoder:
    def __init__(
        self, arrays: Mapping[str, np.ndarray], classes: dict[str, type[Function]]
    ) -> None:
        self.arrays = arrays
        self.classes = classes

    def array(self, key: Any) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise CorruptError(f"static array {key!r} is missing from {_VALUES}")
        return self.arrays[key]

    def __call__(self, v: Any) -> Any:
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list):
            return [self(x) for x in v]
        if not isinstance(v, dict) or len(v) == 0:
            raise CorruptError(f"unexpected value {v!r}")
        tag = next(iter(v))
        decode = self.TAGS.get(tag)
        if decode is None:
            raise CorruptError(f"unknown tag {tag!r}")
        return decode(self, v[tag], v)

    def type_entry(self, body: Any, v: Mapping[str, Any]) -> type:
        """The type of a ``$type`` entry: a numpy scalar type, a Python one or a class."""
        if body == "numpy":
            return np.dtype(v["dtype"]).type
        if body in _PY_TYPES:
            return _PY_TYPES[body]
        if body == "function":
            return self.cls(v["class"])
        raise CorruptError(f"unknown type {body!r}")

    # tag -> its value from (decoder, body, entry)
    TAGS: ClassVar[Mapping[str, Callable[[Decoder, Any, Mapping[str, Any]], Any]]] = {
        "$tuple": lambda d, body, v: tuple(d(x) for x in body),
        "$dict": lambda d, body, v: {d(k): d(x) for k, x in body},
        "$float": lambda d, body, v: float(body),
        "$complex": lambda d, body, v: complex(d(body[0]), d(body[1])),
        "$array": lambda d, body, v: d.array(body),
        "$scalar": lambda d, body, v: d.array(body)[()],
        "$dtype": lambda d, body, v: np.dtype(body),
        "$type": lambda d, body, v: d.type_entry(body, v),
        "$slice": lambda d, body, v: slice(*(d(x) for x in body)),
        "$ellipsis": lambda d, body, v: Ellipsis,
        "$function": lambda d, body, v: d.function(body),
    }

    def cls(self, key: Any) -> type[Function]:
        if not isinstance(key, str):
            raise CorruptError(f"function type {key!r} is not a string")
        cls = self.classes.get(key)
        if cls is None:
            raise CorruptError(
                f"function type {key!r} is unknown to this hodiff (a user primitive must be "
                "imported before load_graph)"
            )
        return cls

    def static(
        self, body: Mapping[str, Any]
    ) -> tuple[type[Function], tuple[Any, ...], dict[str, Any]]:
        """The class and constructor arguments of one function entry."""
        args, kwargs = body["args"], body["kwargs"]
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise CorruptError("static arguments must be a list and a mapping")
        return (
            self.cls(body["type"]),
            tuple(self(a) for a in args),
            {str(k): self(a) for k, a in kwargs.items()},
        )

    def function(self, body: Mapping[str, Any]) -> Function:
        cls, args, kwargs = self.static(body)
        return cls(*args, **kwargs)


def known_classes() -> dict[str, type[Function]]:
    """Every primitive that can be rebuilt: hodiff's own and user subclasses already defined."""
    for info in pkgutil.iter_modules(hodiff.grad_functions.__path__):
        importlib.import_module(f"hodiff.grad_functions.{info.name}")
    found: dict[str, type[Function]] = {}
    stack = list(Function.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        found.setdefault(class_key(cls), cls)
    return found


def dtype_text(dtype: np.dtype[Any]) -> str:
    """``float32``, ``int64``...: numpy's name, with the byte order only when not native."""
    return dtype.name if dtype.isnative else dtype.str
