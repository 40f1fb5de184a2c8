"""Gradient-only functions: what the backward rules of ``hodiff.functions`` need.

Imports go one way: ``hodiff.functions`` imports these modules at module level,
and these modules import only the engine and the leaf kernel modules of
``hodiff.functions`` (``_*_kernels.py``, which import no function family). The
forward functions that their own backward rules call (a scatter's backward is
a gather, ...) are reached through :data:`F`, ``hodiff.functions`` resolved on
first use, so there is no module-level import cycle.
"""

from __future__ import annotations

from typing import Any


class _Functions:
    """``hodiff.functions``, imported on first attribute access (each name then cached)."""

    def __getattr__(self, name: str) -> Any:
        import hodiff.functions

        value = getattr(hodiff.functions, name)
        setattr(self, name, value)
        return value


#: ``hodiff.functions`` for the rules of the gradient-only functions (``F.indexing.getitem``)
F: Any = _Functions()
