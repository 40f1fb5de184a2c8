"""Variables: values, gradients and the graph's edges (``hd.Variable``).

The implementation lives in :mod:`hodiff.engine.variable`;
this module keeps the public import path.
"""

from hodiff.engine.variable import *  # noqa: F403
from hodiff.engine.variable import __all__ as __all__
