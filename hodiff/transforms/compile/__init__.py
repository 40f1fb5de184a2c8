"""Compiled graphs: ``hd.jit`` and ``hd.compile`` (docs/compile.md).

Stages, one module each: :mod:`record` (freeze a recorded static graph into a flat
program; :class:`TracingError`), :mod:`simplify` (constants, identities, common
subexpressions, dead code), :mod:`schedule` (liveness, registers), :mod:`replay` (the
``"replay"`` backend), :mod:`compiled` (``hd.jit``, ``hd.compile``, the compiled node).
"""

from hodiff.transforms.compile.compiled import compile, jit
from hodiff.transforms.compile.record import CompileError, TracingError

__all__ = ["CompileError", "TracingError", "compile", "jit"]
