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

Modules: ``walk`` (a graph's nodes in order), ``dot`` (:func:`to_dot`, :func:`render_dot`),
``codec`` (the typed JSON encoding of static arguments), ``files`` (the file format).
"""

from hodiff.tools.graphio.dot import render_dot, to_dot
from hodiff.tools.graphio.files import FORMAT, VERSION, LoadedGraph, load_graph, save_graph

__all__ = ["FORMAT", "VERSION", "LoadedGraph", "load_graph", "render_dot", "save_graph", "to_dot"]
