"""Helpers shared by the function tests (they live in ``hodiff.testing.harness``), and
:func:`gpu`, the one way a test asks for cupy on a GPU.
"""

from types import ModuleType

import pytest

from hodiff.testing.harness import (
    call,
    is_float,
    outputs_of,
    run_backward_impl,
    scalarized,
    weights,
)

__all__ = ["call", "gpu", "is_float", "outputs_of", "run_backward_impl", "scalarized", "weights"]


def gpu() -> ModuleType:
    """cupy, when it is installed and sees a GPU; otherwise the calling test is skipped
    (never faked: CI has no GPU; the device runs are in docs/performance.md).
    """
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except Exception:  # cupy installed without a driver
        pytest.skip("no usable GPU")
    return cp
