"""``hd.save_graph`` / ``hd.load_graph``: the graph file format, version 1 (docs/graphs.md)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.context import get_default_context
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.tools.graphio.codec import CorruptError, Decoder, Encoder, dtype_text, known_classes
from hodiff.tools.graphio.walk import as_list, graph_nodes, output_index, parameter_names

__all__ = [
    "FORMAT",
    "VERSION",
    "LoadedGraph",
    "load_graph",
    "read_file",
    "save_graph",
    "write_file",
]

#: the ``format`` field of every graph file
FORMAT = "hodiff-graph"
#: the newest format version this hodiff writes and reads
VERSION = 1
_DIGITS = 64  # hex digits of a SHA-256
_MAGIC = b"hodiff-graph sha256:"
_DEFINITION = "graph.json"
_VALUES = "values.npz"

PathLike = str | os.PathLike[str]


def _shape_dtype(v: Variable) -> dict[str, Any]:
    return {"shape": list(v.shape), "dtype": dtype_text(v.dtype)}


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
    outs = as_list(outputs, "outputs", "save_graph")
    ins = as_list(inputs, "inputs", "save_graph")
    in_index: dict[int, int] = {}
    for k, x in enumerate(ins):
        if id(x) in in_index:
            raise ValueError(f"save_graph: inputs[{k}] is inputs[{in_index[id(x)]}] again")
        in_index[id(x)] = k
    nodes = graph_nodes(outs, ins)
    node_index = {id(f): n for n, f in enumerate(nodes)}
    given = {id(v): str(k) for k, v in (parameters or {}).items()}
    known = parameter_names()
    arrays: dict[str, np.ndarray] = {}
    encode = Encoder(arrays)
    values: list[dict[str, Any]] = []
    value_index: dict[int, int] = {}
    taken: set[str] = set()

    def ref(v: Variable) -> dict[str, int]:
        key = id(v)
        if key in in_index:
            return {"input": in_index[key]}
        if v.parent is not None:
            return {"function": node_index[id(v.parent)], "output": output_index(v.parent, v)}
        if key not in value_index:
            name = given.get(key) or known.get(key)
            if name is None or name in taken:
                stem = "param" if v.need_grad else "const"
                k = sum(1 for e in values if e["name"].startswith(stem))
                while f"{stem}{k}" in taken:
                    k += 1
                name = f"{stem}{k}"
            taken.add(name)
            data = api.value_of(v)
            if data is None:
                data = np.zeros(v.shape, v.dtype)
            elif hasattr(data, "__cuda_array_interface__"):
                data = data.get()
            array_key = f"v{len(values)}"
            arrays[array_key] = np.asarray(data)
            value_index[key] = len(values)
            values.append(
                {
                    "name": name,
                    **_shape_dtype(v),
                    "need_grad": bool(v.need_grad),
                    "array": array_key,
                }
            )
        return {"value": value_index[key]}

    functions = []
    for n, f in enumerate(nodes):
        static = encode.function(f, f"save_graph: function {n}")
        entry = {
            "type": static["type"],
            "name": f.name,
            "args": static["args"],
            "kwargs": static["kwargs"],
        }
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
        "returns": (
            "variable"
            if isinstance(outputs, Variable)
            else "tuple"
            if isinstance(outputs, tuple)
            else "list"
        ),
    }
    write_file(path, definition, arrays)
    try:
        _check_round_trip(path, outs, ins, nodes)
    except ValueError:
        os.remove(path)
        raise


def _check_round_trip(
    path: PathLike, outs: list[Variable], ins: list[Variable], nodes: list[Function]
) -> None:
    """Loads the file just written and runs it on the saved inputs: it must give the saved
    outputs (their shapes and dtypes; their values to rounding unless a node draws random
    numbers), or :func:`save_graph` refuses, naming the function that differs. A graph
    whose inputs or outputs hold no value (a static graph never run) is not run.
    """
    values = [api.value_of(x) for x in ins]
    wanted = [api.value_of(v) for v in outs]
    if any(a is None for a in values) or any(a is None for a in wanted):
        return
    loaded = load_graph(path)
    try:
        got = as_list(loaded(*values), "outputs", "save_graph")
    except (ValueError, TypeError, RuntimeError) as e:
        raise ValueError(
            f"save_graph: the graph cannot be rebuilt from what the file can hold, so it is "
            f'not saved: {e}. (A Laplacian or biharmonic recorded by the "taylor" or '
            f'"stochastic" method is such a graph: record it with method="nested" to save '
            "it.)"
        ) from None
    draws = any(hasattr(f, "rng") for f in nodes)
    for k, (g, w) in enumerate(zip(got, wanted, strict=True)):
        a, b = np.asarray(_host(api.value_of(g))), np.asarray(_host(w))
        same = a.shape == b.shape and a.dtype == b.dtype
        if same and not draws:
            scale = float(np.max(np.abs(b))) if b.size else 0.0
            same = bool(np.allclose(a, b, rtol=1e-9, atol=1e-12 * (1.0 + scale)))
        if not same:
            raise ValueError(
                f"save_graph: rebuilt from the file on the same inputs, the graph gives "
                f"outputs[{k}] of shape {a.shape} {a.dtype} where it gave {b.shape} {b.dtype}"
                f"{'' if a.shape != b.shape else ' with other values'}: one of its functions "
                "does not record all it computes with, so it is not saved"
            )


def _host(a: Any) -> Any:
    return a.get() if hasattr(a, "__cuda_array_interface__") else a


def write_file(path: PathLike, definition: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
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

    def __init__(
        self,
        path: str,
        definition: dict[str, Any],
        build: list[
            tuple[type[Function], tuple[Any, ...], dict[str, Any], list[tuple[Any, ...]], int]
        ],
        leaves: list[Variable],
        names: list[str],
    ) -> None:
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
            raise CorruptError(f"returns is {self._returns!r}")
        self._dtypes = [np.dtype(e["dtype"]) for e in self._inputs]
        self._saved_shapes = tuple(tuple(e["shape"]) for e in self._inputs)
        #: the input shapes other than the saved ones already found followable
        self._follows: set[tuple[tuple[int, ...], ...]] = set()

    def _check_follows(self, shapes: tuple[tuple[int, ...], ...]) -> None:
        """Raises ValueError when the graph holds the saved inputs' sizes that change in
        ``shapes``: a constant of that size (the seed ``hd.grad`` made of the output's shape,
        labels) or a static shape argument (a broadcast or reshape a gradient rule wrote for
        that batch). Computed on such inputs, it would broadcast the old batch against the
        new one (a penalty 4 times too large for one row instead of four) or fail inside.
        """
        if shapes in self._follows:
            return
        moved: dict[int, str] = {}  # a saved size that changes -> which input axis
        for i, (old, new) in enumerate(zip(self._saved_shapes, shapes, strict=True)):
            if len(old) != len(new):
                continue  # another rank: the functions say whether they follow
            for ax, (a, b) in enumerate(zip(old, new, strict=True)):
                if a != b and a > 1:
                    moved.setdefault(a, f"axis {ax} of inputs[{i}]")
        where = None
        for e in self.definition["values"]:
            if not e["need_grad"] and any(d in moved for d in e["shape"]):
                d = next(d for d in e["shape"] if d in moved)
                where = (f"the constant {e['name']!r} of shape {tuple(e['shape'])}", d)
                break
        if where is None:
            for n, (cls, _args, kwargs, _refs, _) in enumerate(self._build):
                for key, value in kwargs.items():
                    if "shape" in key and isinstance(value, tuple):
                        hit = [d for d in value if isinstance(d, int) and d in moved]
                        if hit:
                            name = cls.__name__
                            where = (f"function {n} ({name}) has {key}={value}", hit[0])
                            break
                if where is not None:
                    break
        if where is not None:
            what, d = where
            raise ValueError(
                f"graph {self.path!r} was saved for inputs of shapes "
                f"{list(self._saved_shapes)}; {what}, made for the size {d} of "
                f"{moved[d]}, so it cannot follow inputs of shapes {list(shapes)} (it would "
                "combine the saved size with the new one): record the graph (hd.grad, "
                "hd.laplacian) on inputs of the new shape and save it again"
            )
        self._follows.add(shapes)

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
        shapes = tuple(x.shape for x in xs)
        if shapes != self._saved_shapes:
            self._check_follows(shapes)
        results: list[list[Variable]] = []

        def get(r: tuple[Any, ...]) -> Variable:
            if r[0] == "input":
                return xs[r[1]]
            if r[0] == "value":
                return self._leaves[r[1]]
            return results[r[1]][r[2]]

        for n, (cls, args, kwargs, refs, n_out) in enumerate(self._build):
            f = cls(*args, **kwargs)
            if f.n_outputs != n_out:
                raise ValueError(
                    f"graph {self.path!r}: {f.name} rebuilt with {f.n_outputs} outputs, the file "
                    f"says {n_out}"
                )
            try:
                y = f(*[get(r) for r in refs])
            except (ValueError, TypeError) as e:
                raise type(e)(
                    f"graph {self.path!r}: function {n} ({f.name}), rebuilt on inputs of shapes "
                    f"{list(shapes)} (saved with {list(self._saved_shapes)}), failed: {e}"
                ) from None
            results.append(list(y) if isinstance(y, tuple) else [y])
        outs = [get(r) for r in self._outputs]
        if self._returns == "variable":
            return outs[0]
        return tuple(outs) if self._returns == "tuple" else outs

    def __repr__(self) -> str:
        return (
            f"<LoadedGraph {self.path!r}: {len(self._inputs)} input(s), "
            f"{len(self._build)} functions, {len(self.parameters)} parameter(s)>"
        )


def _ref_tuple(r: Any) -> tuple[Any, ...]:
    if isinstance(r, dict):
        if set(r) == {"input"}:
            return ("input", int(r["input"]))
        if set(r) == {"value"}:
            return ("value", int(r["value"]))
        if set(r) == {"function", "output"}:
            return ("function", int(r["function"]), int(r["output"]))
    raise CorruptError(f"bad reference {r!r}")


def _check_ref(r: tuple[Any, ...], n_inputs: int, n_values: int, n_outs: list[int]) -> None:
    if r[0] == "input":
        ok = 0 <= r[1] < n_inputs
    elif r[0] == "value":
        ok = 0 <= r[1] < n_values
    else:
        ok = 0 <= r[1] < len(n_outs) and 0 <= r[2] < n_outs[r[1]]
    if not ok:
        raise CorruptError(f"reference {r} points outside the graph")


def read_file(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            definition = json.loads(zf.read(_DEFINITION).decode("utf-8"))
            if not isinstance(definition, dict) or definition.get("format") != FORMAT:
                raise CorruptError(f"it is not a {FORMAT} file")
            version = definition.get("version")
            if not isinstance(version, int):
                raise CorruptError(f"its version {version!r} is not an integer")
            if version > VERSION:
                raise ValueError(
                    f"load_graph: {path!r} has format version {version}, newer than this "
                    f"hodiff reads (up to {VERSION}); upgrade hodiff to load it"
                )
            tail = data[-(len(_MAGIC) + _DIGITS) :]
            if not tail.startswith(_MAGIC) or zf.comment != tail:
                raise CorruptError("it has no hodiff checksum")
            digest = hashlib.sha256(data[:-_DIGITS]).hexdigest().encode("ascii")
            if digest != tail[len(_MAGIC) :]:
                raise CorruptError("its SHA-256 checksum does not match its content")
            with np.load(io.BytesIO(zf.read(_VALUES)), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except ValueError as e:
        if str(e).startswith("load_graph:"):
            raise
        raise ValueError(f"load_graph: {path!r} is not a valid hodiff graph file: {e}") from e
    except (
        CorruptError,
        zipfile.BadZipFile,
        KeyError,
        OSError,
        EOFError,
        UnicodeDecodeError,
        RuntimeError,
    ) as e:
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
    definition, arrays = read_file(path)
    xp = get_default_context().xp
    try:
        decode = Decoder(arrays, known_classes())
        n_inputs = len(definition["inputs"])
        leaves: list[Variable] = []
        names: list[str] = []
        for e in definition["values"]:
            a = arrays.get(e["array"])
            if a is None or list(a.shape) != e["shape"] or np.dtype(e["dtype"]) != a.dtype:
                raise CorruptError(f"value {e['name']!r} does not match {_VALUES}")
            leaves.append(Variable.from_array(xp.asarray(a), need_grad=bool(e["need_grad"])))
            names.append(str(e["name"]))
        build: list[
            tuple[type[Function], tuple[Any, ...], dict[str, Any], list[tuple[Any, ...]], int]
        ] = []
        n_outs: list[int] = []
        for e in definition["functions"]:
            refs = [_ref_tuple(r) for r in e["inputs"]]
            for r in refs:
                _check_ref(r, n_inputs, len(leaves), n_outs)
            cls, args, kwargs = decode.static(e)
            try:  # fail now, naming the file, rather than at the first call
                probe = cls(*args, **kwargs)
            except Exception as err:
                raise CorruptError(
                    f"function {len(build)} ({e.get('type')}) cannot be rebuilt from its static "
                    f"arguments: {type(err).__name__}: {err}"
                ) from err
            if probe.n_outputs != int(e["n_outputs"]):
                raise CorruptError(
                    f"function {len(build)} ({e.get('type')}) has "
                    f"{probe.n_outputs} outputs, the file says {e['n_outputs']}"
                )
            build.append((cls, args, kwargs, refs, int(e["n_outputs"])))
            n_outs.append(int(e["n_outputs"]))
        for r in definition["outputs"]:
            _check_ref(_ref_tuple(r), n_inputs, len(leaves), n_outs)
        return LoadedGraph(path, definition, build, leaves, names)
    except (CorruptError, KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
        raise ValueError(f"load_graph: {path!r} is not a valid hodiff graph file: {e}") from e
