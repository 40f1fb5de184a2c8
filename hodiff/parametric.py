"""Parametric functions (layers), alias ``PF``.

The implementation lives in :mod:`hodiff.training.parametric`;
this module keeps the public import path.
"""

from hodiff.training.parametric import *  # noqa: F403
from hodiff.training.parametric import __all__ as __all__
