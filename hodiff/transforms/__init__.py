"""Transforms: derivatives, vmap, Taylor mode, checkpointing, curvature, the scipy bridge.

Each is a user of the engine's public API. This package's face is the derivative
helpers (``vjp``, ``jvp``, ``hvp``, ``hessian``, ``jacobian``).
"""

from hodiff.transforms.derivatives import hessian, hvp, jacobian, jvp, vjp

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vjp"]
