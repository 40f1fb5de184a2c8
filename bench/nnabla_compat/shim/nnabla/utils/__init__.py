"""``nnabla.utils``: nothing of NNabla's own utilities (``Internals`` on use)."""

from __future__ import annotations

from typing import Any

from bench.nnabla_compat.causes import Internals


def __getattr__(name: str) -> Any:
    raise Internals(f"nnabla.utils.{name}")
