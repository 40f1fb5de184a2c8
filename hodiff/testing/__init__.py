"""The spec table of every function, shared by the test suite and ``python -m hodiff check``."""

from hodiff.testing.spec import Spec, fixed, labels, positive, spec_ids
from hodiff.testing.specs import all_specs

__all__ = ["Spec", "all_specs", "fixed", "labels", "positive", "spec_ids"]
