"""Initializers of parameters, alias ``I``.

The implementation lives in :mod:`hodiff.training.initializers`;
this module keeps the public import path.
"""

from hodiff.training.initializers import *  # noqa: F403
from hodiff.training.initializers import __all__ as __all__
