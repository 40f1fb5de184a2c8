"""Graphs as data: draw a graph (:func:`to_dot`), save it (:func:`save_graph`), load it back
(:func:`load_graph`).

A graph is whatever the engine linked: function nodes (``Variable.parent``) and the
Variables between them, forward graphs and the gradient graphs that ``hd.grad`` records
alike. Every node keeps the arguments its constructor was called with
(``Function.static_arguments``), so any primitive, including those written later or by
users, is drawn with its static arguments and rebuilt from them with no per-function code.

File format (version 1; the full specification is in ``docs/graphs.md``): one ZIP archive
holding ``graph.json`` (the definition, UTF-8 JSON) and ``values.npz`` (the values of the
leaves, numpy's npz, read without pickle), whose ZIP comment is ``hodiff-graph sha256:``
followed by the SHA-256 of every byte of the file before those 64 hex digits.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import math
import os
import pkgutil
import shutil
import subprocess
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from hodiff.context import get_default_context
from hodiff.function import REGISTRY, Function
from hodiff.variable import Variable

__all__ = ["FORMAT", "VERSION", "LoadedGraph", "load_graph", "render_dot", "save_graph", "to_dot"]

#: the ``format`` field of every graph file
FORMAT = "hodiff-graph"
#: the newest format version this hodiff writes and reads
VERSION = 1
_DIGITS = 64  # hex digits of a SHA-256
_MAGIC = b"hodiff-graph sha256:"
_DEFINITION = "graph.json"
_VALUES = "values.npz"

PathLike = str | os.PathLike[str]


# ============================================================== walking a graph
def _as_list(outputs: Variable | Sequence[Variable], what: str, caller: str) -> list[Variable]:
    items = [outputs] if isinstance(outputs, Variable) else list(outputs)
    for i, v in enumerate(items):
        if not isinstance(v, Variable):
            raise TypeError(f"{caller}: {what}[{i}] must be a Variable, got {type(v).__name__}")
    return items


def _nodes(outputs: Sequence[Variable], stop: Iterable[Variable] = ()) -> list[Function]:
    """Every node the outputs depend on, not looking past ``stop``; inputs before consumers."""
    cut = {id(v) for v in stop}
    seen: set[int] = set()
    nodes: list[Function] = []
    stack = [v.parent for v in outputs if v.parent is not None and id(v) not in cut]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        nodes.append(f)
        for x in f.inputs:
            if x.parent is not None and id(x) not in cut and id(x.parent) not in seen:
                stack.append(x.parent)
    nodes.sort(key=lambda f: f.seq)  # a node is created after the nodes its inputs come from
    return nodes


def _output_index(node: Function, v: Variable) -> int:
    for j, ref in enumerate(node._outputs):
        if ref() is v:
            return j
    raise RuntimeError(f"{node.name}: a Variable whose parent does not list it as an output")


def _parameter_names() -> dict[int, str]:
    """id -> name of the parameters of ``hd.get_parameters`` (when hodiff has parameters)."""
    import hodiff

    get = getattr(hodiff, "get_parameters", None)
    if get is None:
        return {}
    try:
        params = get(grad_only=False)
    except TypeError:  # pragma: no cover - an older signature
        params = get()
    return {id(v): name for name, v in params.items()}


def _static(node: Function) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return node.static_arguments or ((), {})


# ============================================================== DOT
def _fmt(value: Any) -> str:
    """A short text for one static argument."""
    if isinstance(value, Function):
        args, kwargs = _static(value)
        inner = ", ".join([*map(_fmt, args), *(f"{k}={_fmt(v)}" for k, v in kwargs.items())])
        return f"{value.name}({inner})"
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        if value.size <= 6:
            return np.array2string(np.asarray(getattr(value, "get", lambda: value)()),
                                   separator=",").replace("\n", "")
        return f"array{tuple(value.shape)} {value.dtype}"
    if isinstance(value, np.generic):
        return repr(value.item())
    if isinstance(value, slice):
        parts = ["" if p is None else str(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts[:2] if value.step is None else parts)
    if value is Ellipsis:
        return "..."
    if isinstance(value, tuple):
        inner = ", ".join(_fmt(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _quote(text: str) -> str:
    """A DOT string literal; line breaks become DOT's centred-line escape."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _var_text(v: Variable) -> str:
    return f"{tuple(v.shape)} {v.dtype}"


def to_dot(
    outputs: Variable | Sequence[Variable],
    path: PathLike | None = None,
    *,
    names: Mapping[str, Variable] | None = None,
    rankdir: str = "TB",
) -> str:
    r"""The DOT source (Graphviz) of the graph that produced ``outputs``.

    One box per function node (its name and static arguments; the functions of
    ``hodiff.grad_functions``, which appear only in gradients, are shaded differently) and one
    ellipse per Variable (shape and dtype). Leaves are marked: need_grad leaves are filled
    orange and say ``need_grad leaf``, or ``parameter <name>`` (bold border) when
    ``hd.get_parameters`` knows them; other leaves (data, constants) are grey; the outputs
    have a double border. Edges into a multi-output function's
    results are labelled with the output index. Works on the graphs that ``hd.grad``
    records: their nodes are ordinary functions.

    Args:
        outputs: a Variable or a list of them.
        path: when given, also writes the graph there: ``.dot``/``.gv`` as DOT source, any
            other extension (``.svg``, ``.png``, ``.pdf``) rendered by Graphviz's ``dot``
            program (see :func:`render_dot`).
        names: optional labels, ``{"x": x, "loss": loss}``, shown above the shapes.
        rankdir: Graphviz layout direction, ``"TB"`` (top to bottom) or ``"LR"``.

    Returns:
        The DOT source, a ``digraph``.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> x = hd.Variable.from_array(np.ones((2, 3)), need_grad=True)
    >>> source = to_dot(F.sum(x, axis=1))
    >>> source.splitlines()[0], source.count("->")
    ('digraph hodiff {', 2)
    >>> print(source.splitlines()[5].split(", shape")[0].strip())
    f0 [label="sum\naxis=1\nkeepdims=False"
    """
    outs = _as_list(outputs, "outputs", "to_dot")
    labels = {id(v): str(k) for k, v in (names or {}).items()}
    params = _parameter_names()
    nodes = _nodes(outs)
    var_ids: dict[int, str] = {}
    lines = [
        "digraph hodiff {",
        f"  rankdir={rankdir};",
        '  node [fontname="Helvetica", fontsize=10];',
        "  edge [arrowsize=0.7];",
    ]
    out_ids = {id(v) for v in outs}

    def var(v: Variable) -> str:
        key = id(v)
        if key in var_ids:
            return var_ids[key]
        vid = var_ids[key] = f"v{len(var_ids)}"
        rows = [labels[key]] if key in labels else []
        attrs = ["shape=ellipse"]
        if v.parent is None:
            if v.need_grad:
                name = params.get(key)
                if name is not None:
                    rows = [*rows, f"parameter {name}"]
                    attrs.append("penwidth=2")
                else:
                    rows.append("need_grad leaf")
                attrs += ["style=filled", 'fillcolor="#f6c667"']
            else:
                attrs += ["style=filled", 'fillcolor="#e4e4e4"']
        if key in out_ids:
            attrs.append("peripheries=2")
        text = "\n".join([*rows, _var_text(v)])
        lines.append(f"  {vid} [label={_quote(text)}, {', '.join(attrs)}];")
        return vid

    edges: list[str] = []
    for k, f in enumerate(nodes):
        fid = f"f{k}"
        ins = [var(x) for x in f.inputs]
        args, kwargs = _static(f)
        rows = [f.name, *(_fmt(a) for a in args), *(f"{n}={_fmt(a)}" for n, a in kwargs.items())]
        fill = "#f5dcd7" if type(f).__module__.startswith("hodiff.grad_functions") else "#d7e6f5"
        lines.append(
            f'  {fid} [label={_quote(chr(10).join(rows))}, shape=box, style="rounded,filled", '
            f'fillcolor="{fill}"];'
        )
        edges.extend(f"  {x} -> {fid};" for x in ins)
        many = f.n_outputs > 1
        for j, ref in enumerate(f._outputs):
            y = ref()
            if y is None:
                continue
            label = f" [label={j}]" if many else ""
            edges.append(f"  {fid} -> {var(y)}{label};")
    for v in outs:  # outputs that are leaves, and their marks
        var(v)
    lines.extend(edges)
    lines.append("}")
    source = "\n".join(lines) + "\n"
    if path is not None:
        render_dot(source, path)
    return source


def render_dot(source: str, path: PathLike, format: str | None = None) -> None:
    """Writes DOT ``source`` to ``path``, rendered by Graphviz unless it ends in ``.dot``/``.gv``.

    Args:
        source: DOT text, e.g. from :func:`to_dot`.
        path: the file to write (exactly this path).
        format: Graphviz output format (``"svg"``, ``"png"``, ``"pdf"``...); defaults to
            the path's extension.

    Raises:
        RuntimeError: Graphviz's ``dot`` program is not installed (``apt-get install
            graphviz``, ``conda install graphviz``, ``brew install graphviz``), or failed.
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    fmt = format or ext or "svg"
    if fmt in ("dot", "gv"):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(source)
        return
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(
            f"render_dot: rendering {path!r} as {fmt} needs Graphviz's 'dot' program, which is "
            "not installed (apt-get install graphviz); write a .dot file instead"
        )
    done = subprocess.run(
        [exe, f"-T{fmt}", "-o", path], input=source.encode("utf-8"), capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace")
        raise RuntimeError(f"render_dot: dot -T{fmt} failed: {err}")


# ============================================================== typed encoding of static args
_PY_TYPES: dict[str, type] = {"float": float, "int": int, "bool": bool, "complex": complex}


def _class_key(cls: type[Function]) -> str:
    """A primitive's type in the file: its class name for hodiff's own, module.qualname else."""
    if cls in REGISTRY:
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


class _Encoder:
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
        if isinstance(v, np.generic):  # first: np.float64 is also a float
            if v.dtype.hasobject:
                raise TypeError(f"{where}: numpy object scalar cannot be stored")
            return {"$scalar": self.array(np.asarray(v))}
        if v is None or isinstance(v, bool | str):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, complex):
            return {"$complex": [self(v.real, where), self(v.imag, where)]}
        if isinstance(v, np.ndarray) or hasattr(v, "__cuda_array_interface__"):
            try:
                return {"$array": self.array(v)}
            except TypeError:
                raise TypeError(f"{where}: object arrays cannot be stored") from None
        if isinstance(v, np.dtype):
            if v.hasobject or v.names is not None:
                raise TypeError(f"{where}: dtype {v} cannot be stored")
            return {"$dtype": _dtype_text(v)}
        if isinstance(v, type):
            if issubclass(v, np.generic) and v is not np.object_:
                return {"$type": "numpy", "dtype": _dtype_text(np.dtype(v))}
            if v in _PY_TYPES.values():
                return {"$type": v.__name__}
            if issubclass(v, Function):
                return {"$type": "function", "class": _class_key(v)}
            raise TypeError(f"{where}: the type {v.__name__} cannot be stored")
        if isinstance(v, tuple):
            return {"$tuple": [self(x, where) for x in v]}
        if isinstance(v, list):
            return [self(x, where) for x in v]
        if isinstance(v, dict):
            return {"$dict": [[self(k, where), self(x, where)] for k, x in v.items()]}
        if isinstance(v, slice):
            return {"$slice": [self(v.start, where), self(v.stop, where), self(v.step, where)]}
        if v is Ellipsis:
            return {"$ellipsis": None}
        if isinstance(v, Function):
            return {"$function": self.function(v, where)}
        raise TypeError(
            f"{where} is a {type(v).__name__}, which a graph file cannot store (it stores "
            "None, bool, int, float, complex, str, tuples, lists, dicts, slices, Ellipsis, "
            "numpy dtypes, scalars and arrays, and Function instances)"
        )

    def function(self, f: Function, where: str) -> dict[str, Any]:
        args, kwargs = _static(f)
        here = f"{where}: {f.name}"
        return {
            "type": _class_key(type(f)),
            "args": [self(a, f"{here} argument {i}") for i, a in enumerate(args)],
            "kwargs": {k: self(a, f"{here} static argument {k!r}") for k, a in kwargs.items()},
        }


class _CorruptError(Exception):
    """Raised while decoding; load_graph turns it into a ValueError naming the file."""


class _Decoder:
    def __init__(self, arrays: Mapping[str, np.ndarray], classes: dict[str, type[Function]]
                 ) -> None:
        self.arrays = arrays
        self.classes = classes

    def array(self, key: Any) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise _CorruptError(f"static array {key!r} is missing from {_VALUES}")
        return self.arrays[key]

    def __call__(self, v: Any) -> Any:
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list):
            return [self(x) for x in v]
        if not isinstance(v, dict) or len(v) == 0:
            raise _CorruptError(f"unexpected value {v!r}")
        tag = next(iter(v))
        body = v[tag]
        if tag == "$tuple":
            return tuple(self(x) for x in body)
        if tag == "$dict":
            return {self(k): self(x) for k, x in body}
        if tag == "$float":
            return float(body)
        if tag == "$complex":
            return complex(self(body[0]), self(body[1]))
        if tag == "$array":
            return self.array(body)
        if tag == "$scalar":
            return self.array(body)[()]
        if tag == "$dtype":
            return np.dtype(body)
        if tag == "$type":
            if body == "numpy":
                return np.dtype(v["dtype"]).type
            if body in _PY_TYPES:
                return _PY_TYPES[body]
            if body == "function":
                return self.cls(v["class"])
            raise _CorruptError(f"unknown type {body!r}")
        if tag == "$slice":
            return slice(*(self(x) for x in body))
        if tag == "$ellipsis":
            return Ellipsis
        if tag == "$function":
            return self.function(body)
        raise _CorruptError(f"unknown tag {tag!r}")

    def cls(self, key: Any) -> type[Function]:
        if not isinstance(key, str):
            raise _CorruptError(f"function type {key!r} is not a string")
        cls = self.classes.get(key)
        if cls is None:
            raise _CorruptError(
                f"function type {key!r} is unknown to this hodiff (a user primitive must be "
                "imported before load_graph)"
            )
        return cls

    def static(self, body: Mapping[str, Any]
               ) -> tuple[type[Function], tuple[Any, ...], dict[str, Any]]:
        """The class and constructor arguments of one function entry."""
        args, kwargs = body["args"], body["kwargs"]
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise _CorruptError("static arguments must be a list and a mapping")
        return (self.cls(body["type"]), tuple(self(a) for a in args),
                {str(k): self(a) for k, a in kwargs.items()})

    def function(self, body: Mapping[str, Any]) -> Function:
        cls, args, kwargs = self.static(body)
        return cls(*args, **kwargs)


def _classes() -> dict[str, type[Function]]:
    """Every primitive that can be rebuilt: hodiff's own and user subclasses already defined."""
    import hodiff.functions
    import hodiff.grad_functions

    for info in pkgutil.iter_modules(hodiff.grad_functions.__path__):
        importlib.import_module(f"hodiff.grad_functions.{info.name}")
    found: dict[str, type[Function]] = {}
    stack = list(Function.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        found.setdefault(_class_key(cls), cls)
    return found


# ============================================================== saving
def _dtype_text(dtype: np.dtype[Any]) -> str:
    """``float32``, ``int64``...: numpy's name, with the byte order only when not native."""
    return dtype.name if dtype.isnative else dtype.str


def _shape_dtype(v: Variable) -> dict[str, Any]:
    return {"shape": list(v.shape), "dtype": _dtype_text(v.dtype)}


def _dumps(definition: dict[str, Any]) -> str:
    """JSON with one line per top-level field and per list item (diffable, readable)."""
    rows = []
    for key, value in definition.items():
        if isinstance(value, list) and value:
            items = ",\n".join(f"  {json.dumps(v, allow_nan=False)}" for v in value)
            rows.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            rows.append(f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)}")
    return "{\n" + ",\n".join(rows) + "\n}\n"


def save_graph(
    path: PathLike,
    outputs: Variable | Sequence[Variable],
    inputs: Variable | Sequence[Variable],
    *,
    parameters: Mapping[str, Variable] | None = None,
) -> None:
    """Writes the graph from ``inputs`` to ``outputs`` to ``path`` (exactly that path).

    Everything ``outputs`` depend on is stored, not looking past ``inputs`` (the Variables
    to feed when the graph is loaded; an intermediate Variable may be one): every function
    with its type and static arguments, and every other leaf (parameters, constants such as
    labels or the scalars of ``x * 2``) with its value and ``need_grad``. A gradient graph
    recorded by ``hd.grad`` is saved like any other (pass the gradients as ``outputs``). An
    unfilled leaf (a static graph never run) is stored as zeros, the value the engine reads.
    The format is specified in ``docs/graphs.md``; nothing is pickled.

    Args:
        path: the file to write (no suffix is added).
        outputs: a Variable or a list; :func:`load_graph`'s callable returns the same form.
        inputs: a Variable or a list, in the order the loaded callable takes them.
        parameters: optional names for leaves, ``{"fc/W": w}``; parameters that
            ``hd.get_parameters`` knows keep their names; others are called ``param<k>``
            (need_grad leaves) or ``const<k>``.

    Raises:
        TypeError: a static argument is of a type the format cannot store (the message names
            the function and the argument), or an argument is not a Variable.
        ValueError: the same Variable is given twice as an input.
    """
    outs = _as_list(outputs, "outputs", "save_graph")
    ins = _as_list(inputs, "inputs", "save_graph")
    in_index: dict[int, int] = {}
    for k, x in enumerate(ins):
        if id(x) in in_index:
            raise ValueError(f"save_graph: inputs[{k}] is inputs[{in_index[id(x)]}] again")
        in_index[id(x)] = k
    nodes = _nodes(outs, ins)
    node_index = {id(f): n for n, f in enumerate(nodes)}
    given = {id(v): str(k) for k, v in (parameters or {}).items()}
    known = _parameter_names()
    arrays: dict[str, np.ndarray] = {}
    encode = _Encoder(arrays)
    values: list[dict[str, Any]] = []
    value_index: dict[int, int] = {}
    taken: set[str] = set()

    def ref(v: Variable) -> dict[str, int]:
        key = id(v)
        if key in in_index:
            return {"input": in_index[key]}
        if v.parent is not None:
            return {"function": node_index[id(v.parent)], "output": _output_index(v.parent, v)}
        if key not in value_index:
            name = given.get(key) or known.get(key)
            if name is None or name in taken:
                stem = "param" if v.need_grad else "const"
                k = sum(1 for e in values if e["name"].startswith(stem))
                while f"{stem}{k}" in taken:
                    k += 1
                name = f"{stem}{k}"
            taken.add(name)
            data = v._data
            if data is None:
                data = np.zeros(v.shape, v.dtype)
            elif hasattr(data, "__cuda_array_interface__"):
                data = data.get()
            array_key = f"v{len(values)}"
            arrays[array_key] = np.asarray(data)
            value_index[key] = len(values)
            values.append({"name": name, **_shape_dtype(v), "need_grad": bool(v.need_grad),
                           "array": array_key})
        return {"value": value_index[key]}

    functions = []
    for n, f in enumerate(nodes):
        static = encode.function(f, f"save_graph: function {n}")
        entry = {"type": static["type"], "name": f.name, "args": static["args"],
                 "kwargs": static["kwargs"]}
        entry["inputs"] = [ref(x) for x in f.inputs]
        entry["n_outputs"] = f.n_outputs
        functions.append(entry)
    definition = {
        "format": FORMAT,
        "version": VERSION,
        "inputs": [{**_shape_dtype(x), "need_grad": bool(x.need_grad)} for x in ins],
        "values": values,
        "functions": functions,
        "outputs": [ref(v) for v in outs],
        "returns": ("variable" if isinstance(outputs, Variable)
                    else "tuple" if isinstance(outputs, tuple) else "list"),
    }
    _write(path, definition, arrays)


def _write(path: PathLike, definition: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    npz = io.BytesIO()
    savez: Any = np.savez  # its stubs type **arrays as its flags
    savez(npz, **arrays)
    blob = io.BytesIO()
    with zipfile.ZipFile(blob, "w") as zf:
        text = _dumps(definition)
        zf.writestr(_DEFINITION, text.encode("utf-8"), compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr(_VALUES, npz.getvalue(), compress_type=zipfile.ZIP_STORED)
        zf.comment = _MAGIC + b"0" * _DIGITS
    data = bytearray(blob.getvalue())
    digest = hashlib.sha256(data[:-_DIGITS]).hexdigest().encode("ascii")
    data[-_DIGITS:] = digest
    with open(path, "wb") as fh:
        fh.write(data)


# ============================================================== loading
class LoadedGraph:
    """A graph read by :func:`load_graph`: call it as ``f(*inputs)``.

    Attributes:
        parameters: dict name -> Variable of the need_grad leaves (shared by every call, so
            training them changes what later calls compute).
        constants: dict name -> Variable of the other leaves.
        path: the file it was read from.
        definition: the parsed ``graph.json``.
    """

    def __init__(self, path: str, definition: dict[str, Any],
                 build: list[tuple[type[Function], tuple[Any, ...], dict[str, Any],
                                   list[tuple[Any, ...]], int]],
                 leaves: list[Variable], names: list[str]) -> None:
        self.path = path
        self.definition = definition
        self._build = build
        self._leaves = leaves
        self.parameters = {n: v for n, v in zip(names, leaves, strict=True) if v.need_grad}
        self.constants = {n: v for n, v in zip(names, leaves, strict=True) if not v.need_grad}
        self._inputs = definition["inputs"]
        self._outputs = [_ref_tuple(r) for r in definition["outputs"]]
        self._returns = definition["returns"]
        if self._returns not in ("variable", "tuple", "list"):
            raise _CorruptError(f"returns is {self._returns!r}")
        self._dtypes = [np.dtype(e["dtype"]) for e in self._inputs]

    def __call__(self, *inputs: Any) -> Any:
        """Re-creates the saved functions on ``inputs`` (arrays or Variables).

        Returns the output Variable (or a list or tuple, as saved), differentiable to any order with
        respect to the inputs that are need_grad Variables and to :attr:`parameters`.
        """
        if len(inputs) != len(self._inputs):
            raise TypeError(
                f"graph {self.path!r} takes {len(self._inputs)} input(s), got {len(inputs)}"
            )
        xs = []
        for x, dtype in zip(inputs, self._dtypes, strict=True):
            if isinstance(x, bool | int | float):  # a Python scalar takes the saved dtype
                x = get_default_context().xp.asarray(x, dtype=dtype)
            xs.append(x if isinstance(x, Variable) else Variable.from_array(x))
        results: list[list[Variable]] = []

        def get(r: tuple[Any, ...]) -> Variable:
            if r[0] == "input":
                return xs[r[1]]
            if r[0] == "value":
                return self._leaves[r[1]]
            return results[r[1]][r[2]]

        for cls, args, kwargs, refs, n_out in self._build:
            f = cls(*args, **kwargs)
            if f.n_outputs != n_out:
                raise ValueError(
                    f"graph {self.path!r}: {f.name} rebuilt with {f.n_outputs} outputs, the file "
                    f"says {n_out}"
                )
            y = f(*[get(r) for r in refs])
            results.append(list(y) if isinstance(y, tuple) else [y])
        outs = [get(r) for r in self._outputs]
        if self._returns == "variable":
            return outs[0]
        return tuple(outs) if self._returns == "tuple" else outs

    def __repr__(self) -> str:
        return (f"<LoadedGraph {self.path!r}: {len(self._inputs)} input(s), "
                f"{len(self._build)} functions, {len(self.parameters)} parameter(s)>")


def _ref_tuple(r: Any) -> tuple[Any, ...]:
    if isinstance(r, dict):
        if set(r) == {"input"}:
            return ("input", int(r["input"]))
        if set(r) == {"value"}:
            return ("value", int(r["value"]))
        if set(r) == {"function", "output"}:
            return ("function", int(r["function"]), int(r["output"]))
    raise _CorruptError(f"bad reference {r!r}")


def _check_ref(r: tuple[Any, ...], n_inputs: int, n_values: int, n_outs: list[int]) -> None:
    if r[0] == "input":
        ok = 0 <= r[1] < n_inputs
    elif r[0] == "value":
        ok = 0 <= r[1] < n_values
    else:
        ok = 0 <= r[1] < len(n_outs) and 0 <= r[2] < n_outs[r[1]]
    if not ok:
        raise _CorruptError(f"reference {r} points outside the graph")


def _read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            definition = json.loads(zf.read(_DEFINITION).decode("utf-8"))
            if not isinstance(definition, dict) or definition.get("format") != FORMAT:
                raise _CorruptError(f"it is not a {FORMAT} file")
            version = definition.get("version")
            if not isinstance(version, int):
                raise _CorruptError(f"its version {version!r} is not an integer")
            if version > VERSION:
                raise ValueError(
                    f"load_graph: {path!r} has format version {version}, newer than this "
                    f"hodiff reads (up to {VERSION}); upgrade hodiff to load it"
                )
            tail = data[-(len(_MAGIC) + _DIGITS):]
            if not tail.startswith(_MAGIC) or zf.comment != tail:
                raise _CorruptError("it has no hodiff checksum")
            digest = hashlib.sha256(data[:-_DIGITS]).hexdigest().encode("ascii")
            if digest != tail[len(_MAGIC):]:
                raise _CorruptError("its SHA-256 checksum does not match its content")
            with np.load(io.BytesIO(zf.read(_VALUES)), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except ValueError as e:
        if str(e).startswith("load_graph:"):
            raise
        raise ValueError(f"load_graph: {path!r} is not a valid hodiff graph file: {e}") from e
    except (_CorruptError, zipfile.BadZipFile, KeyError, OSError, EOFError, UnicodeDecodeError,
            RuntimeError) as e:
        raise ValueError(f"load_graph: {path!r} is not a valid hodiff graph file: {e}") from e
    except Exception as e:  # zlib.error and friends: any damage is reported the same way
        raise ValueError(f"load_graph: {path!r} is corrupt: {type(e).__name__}: {e}") from e
    return definition, arrays


def load_graph(path: PathLike) -> LoadedGraph:
    """Reads a graph written by :func:`save_graph` and returns it as a callable.

    ``f = load_graph(path)``; ``f(*inputs)`` re-creates every saved function, from its type
    and static arguments, on these inputs (NNabla's network-definition loader) and returns
    the output Variable(s), differentiable to any order. ``f.parameters`` is the dict of its
    need_grad leaves, ``f.constants`` of the others; their values are placed on the default
    context's backend (numpy or cupy).

    Raises:
        ValueError: the file is not a hodiff graph file, is damaged (any changed byte is
            caught by its SHA-256 checksum; ZIP CRCs too), names a function this hodiff does
            not know, or was written by a newer format version. The message names the file.
    """
    path = os.fspath(path)
    definition, arrays = _read(path)
    xp = get_default_context().xp
    try:
        decode = _Decoder(arrays, _classes())
        n_inputs = len(definition["inputs"])
        leaves: list[Variable] = []
        names: list[str] = []
        for e in definition["values"]:
            a = arrays.get(e["array"])
            if a is None or list(a.shape) != e["shape"] or np.dtype(e["dtype"]) != a.dtype:
                raise _CorruptError(f"value {e['name']!r} does not match {_VALUES}")
            leaves.append(Variable.from_array(xp.asarray(a), need_grad=bool(e["need_grad"])))
            names.append(str(e["name"]))
        build: list[tuple[type[Function], tuple[Any, ...], dict[str, Any], list[tuple[Any, ...]],
                          int]] = []
        n_outs: list[int] = []
        for e in definition["functions"]:
            refs = [_ref_tuple(r) for r in e["inputs"]]
            for r in refs:
                _check_ref(r, n_inputs, len(leaves), n_outs)
            cls, args, kwargs = decode.static(e)
            try:  # fail now, naming the file, rather than at the first call
                probe = cls(*args, **kwargs)
            except Exception as err:
                raise _CorruptError(
                    f"function {len(build)} ({e.get('type')}) cannot be rebuilt from its static "
                    f"arguments: {type(err).__name__}: {err}"
                ) from err
            if probe.n_outputs != int(e["n_outputs"]):
                raise _CorruptError(f"function {len(build)} ({e.get('type')}) has "
                                    f"{probe.n_outputs} outputs, the file says {e['n_outputs']}")
            build.append((cls, args, kwargs, refs, int(e["n_outputs"])))
            n_outs.append(int(e["n_outputs"]))
        for r in definition["outputs"]:
            _check_ref(_ref_tuple(r), n_inputs, len(leaves), n_outs)
        return LoadedGraph(path, definition, build, leaves, names)
    except (_CorruptError, KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
        raise ValueError(f"load_graph: {path!r} is not a valid hodiff graph file: {e}") from e

