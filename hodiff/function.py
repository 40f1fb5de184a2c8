"""The ``Function`` protocol of every primitive (``forward_impl``, ``backward_impl``).

The implementation lives in :mod:`hodiff.engine.function`;
this module keeps the public import path.
"""

from hodiff.engine.function import *  # noqa: F403
from hodiff.engine.function import __all__ as __all__
