"""Modes and contexts: ``hd.auto_forward``, ``hd.no_grad``, ``hd.Context``.

The implementation lives in :mod:`hodiff.engine.context`;
this module keeps the public import path.
"""

from hodiff.engine.context import *  # noqa: F403
from hodiff.engine.context import __all__ as __all__
