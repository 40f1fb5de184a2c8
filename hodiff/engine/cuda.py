"""Fused elementwise kernels for cupy arrays: one kernel launch where numpy-style code makes
several (``gy - gy * y * y`` is three launches and two temporaries on a GPU).

Small GPU workloads are bound by kernel launches, so the hottest gradient-only nodes
(``tanh_backward``, ``sigmoid_backward``, ``mul_n``) run one fused kernel on cupy arrays of
one float dtype (float32/float64); anything else takes the numpy-style path. Kernels are
compiled on first use and cached by cupy.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["fusable", "kernel"]

_FLOATS = ("float32", "float64")


def fusable(*arrays: Any) -> bool:
    """Whether ``arrays`` are cupy arrays of one dtype, float32 or float64."""
    dtype = getattr(arrays[0], "dtype", None)
    if dtype is None or dtype.name not in _FLOATS:
        return False
    return all(type(a).__module__.startswith("cupy") and a.dtype == dtype for a in arrays)


@functools.cache
def kernel(name: str, params_in: str, params_out: str, operation: str) -> Any:
    """The ``cupy.ElementwiseKernel`` (broadcasting its array arguments), made once per name."""
    import cupy

    return cupy.ElementwiseKernel(params_in, params_out, operation, f"hodiff_{name}")
