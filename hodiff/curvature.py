"""Hessian spectra: eigenvalues, trace and spectral density.

The implementation lives in :mod:`hodiff.transforms.curvature`;
this module keeps the public import path.
"""

from hodiff.transforms.curvature import *  # noqa: F403
from hodiff.transforms.curvature import __all__ as __all__
