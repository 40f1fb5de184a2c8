"""``hd.to_dot``: the DOT source (Graphviz) of a graph, and its rendering."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.tools.graphio.walk import as_list, graph_nodes, parameter_names, static_arguments

__all__ = ["render_dot", "to_dot"]

PathLike = str | os.PathLike[str]


def _fmt(value: Any) -> str:
    """A short text for one static argument."""
    if isinstance(value, Function):
        args, kwargs = static_arguments(value)
        inner = ", ".join([*map(_fmt, args), *(f"{k}={_fmt(v)}" for k, v in kwargs.items())])
        return f"{value.name}({inner})"
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, np.dtype | np.ndarray | np.generic) or hasattr(
        value, "__cuda_array_interface__"
    ):
        return _fmt_numpy(value)
    if isinstance(value, slice | tuple | list | dict) or value is Ellipsis:
        return _fmt_container(value)
    return repr(value)


def _fmt_numpy(value: Any) -> str:
    """A dtype by name, a scalar by its value, a small array by its values, a large one by
    its shape and dtype.
    """
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, np.generic):
        return repr(value.item())
    if value.size <= 6:
        return np.array2string(
            np.asarray(getattr(value, "get", lambda: value)()), separator=","
        ).replace("\n", "")
    return f"array{tuple(value.shape)} {value.dtype}"


def _fmt_container(value: Any) -> str:
    """A slice as ``start:stop[:step]``, Ellipsis as ``...``, tuples, lists and dicts in
    Python's brackets with their items formatted.
    """
    if isinstance(value, slice):
        parts = ["" if p is None else str(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts[:2] if value.step is None else parts)
    if isinstance(value, tuple):
        inner = ", ".join(_fmt(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    return "..."


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
    outs = as_list(outputs, "outputs", "to_dot")
    labels = {id(v): str(k) for k, v in (names or {}).items()}
    params = parameter_names()
    nodes = graph_nodes(outs)
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
        args, kwargs = static_arguments(f)
        rows = [f.name, *(_fmt(a) for a in args), *(f"{n}={_fmt(a)}" for n, a in kwargs.items())]
        fill = "#f5dcd7" if type(f).__module__.startswith("hodiff.grad_functions") else "#d7e6f5"
        lines.append(
            f'  {fid} [label={_quote(chr(10).join(rows))}, shape=box, style="rounded,filled", '
            f'fillcolor="{fill}"];'
        )
        edges.extend(f"  {x} -> {fid};" for x in ins)
        many = f.n_outputs > 1
        for j, y in enumerate(api.outputs_of(f)):
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
        [exe, f"-T{fmt}", "-o", path],
        input=source.encode("utf-8"),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace")
        raise RuntimeError(f"render_dot: dot -T{fmt} failed: {err}")
