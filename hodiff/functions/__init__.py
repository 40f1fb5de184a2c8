"""All differentiable functions: ``import hodiff.functions as F``."""

from hodiff.functions.arithmetic import *  # noqa: F403
from hodiff.functions.array import *  # noqa: F403
from hodiff.functions.math import *  # noqa: F403
from hodiff.functions.reduction import *  # noqa: F403
