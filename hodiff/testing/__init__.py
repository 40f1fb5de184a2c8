"""The spec table of every function, shared by the test suite and ``python -m hodiff check``."""

from hodiff.testing.dot_product import DotProductReport, dot_product_test
from hodiff.testing.function_check import FunctionCheckReport, check_function
from hodiff.testing.spec import Spec, fixed, labels, positive, spec_ids
from hodiff.testing.specs import all_specs, complex_specs

__all__ = ["Spec", "all_specs", "complex_specs", "fixed", "labels", "positive", "spec_ids"]
__all__ += ["DotProductReport", "FunctionCheckReport", "check_function", "dot_product_test"]
