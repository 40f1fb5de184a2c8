"""Solvers (optimisers), alias ``S``.

The implementation lives in :mod:`hodiff.training.solvers`;
this module keeps the public import path.
"""

from hodiff.training.solvers import *  # noqa: F403
from hodiff.training.solvers import __all__ as __all__
