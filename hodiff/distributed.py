"""Data-parallel training over MPI (``hodiff.distributed.Communicator``).

The implementation lives in :mod:`hodiff.training.distributed`;
this module keeps the public import path.
"""

from hodiff.training.distributed import *  # noqa: F403
from hodiff.training.distributed import __all__ as __all__
