"""``nnabla.ext_utils``: the cpu context only."""

from __future__ import annotations

from typing import Any

from bench.nnabla_compat.causes import HalfPrecision, Internals

from . import Context


def get_extension_context(ext_name: str, **kw: Any) -> Context:
    if "half" in str(kw.get("type_config", "")):
        raise HalfPrecision(f"type_config={kw['type_config']}")
    if ext_name != "cpu":
        raise Internals(f"extension {ext_name}")
    return Context()


def list_extensions() -> list[str]:
    return ["cpu"]
