"""Helpers shared by the function tests (they live in ``hodiff.testing.harness``)."""

from hodiff.testing.harness import (
    call,
    is_float,
    outputs_of,
    run_backward_impl,
    scalarized,
    weights,
)

__all__ = ["call", "is_float", "outputs_of", "run_backward_impl", "scalarized", "weights"]
