"""The scipy bridge: ``minimize``, ``HessianOperator``, ``Objective``.

The implementation lives in :mod:`hodiff.transforms.scipy`;
this module keeps the public import path.
"""

from hodiff.transforms.scipy import *  # noqa: F403
from hodiff.transforms.scipy import __all__ as __all__
