"""Transforms: derivatives, vmap, Taylor mode, checkpointing, curvature, the scipy bridge.

Each is a user of the engine's public API. This package's face is the derivative
helpers (``vjp``, ``jvp``, ``hvp``, ``hessian``, ``jacobian``).
"""

from hodiff.transforms.derivatives import *  # noqa: F403
from hodiff.transforms.derivatives import __all__ as __all__
