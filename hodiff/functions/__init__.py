"""All differentiable functions: ``import hodiff.functions as F``.

One module per family; each lists its public functions in ``__all__``.
"""

from hodiff.functions import (
    activation,
    arithmetic,
    array,
    attention,
    conv,
    decomposition,
    linalg,
    loss,
    math,
    nn,
    normalization,
    pooling,
    random,
    recurrent,
    reduction,
    rounding,
    sampling,
    shaping,
    special,
    statistics,
)
from hodiff.functions.activation import *  # noqa: F403
from hodiff.functions.arithmetic import *  # noqa: F403
from hodiff.functions.array import *  # noqa: F403
from hodiff.functions.attention import *  # noqa: F403
from hodiff.functions.conv import *  # noqa: F403
from hodiff.functions.decomposition import *  # noqa: F403
from hodiff.functions.linalg import *  # noqa: F403
from hodiff.functions.loss import *  # noqa: F403
from hodiff.functions.math import *  # noqa: F403
from hodiff.functions.nn import *  # noqa: F403
from hodiff.functions.normalization import *  # noqa: F403
from hodiff.functions.pooling import *  # noqa: F403
from hodiff.functions.random import *  # noqa: F403
from hodiff.functions.recurrent import *  # noqa: F403
from hodiff.functions.reduction import *  # noqa: F403
from hodiff.functions.rounding import *  # noqa: F403
from hodiff.functions.sampling import *  # noqa: F403
from hodiff.functions.shaping import *  # noqa: F403
from hodiff.functions.special import *  # noqa: F403
from hodiff.functions.statistics import *  # noqa: F403

FAMILIES = (
    arithmetic,
    math,
    activation,
    reduction,
    array,
    linalg,
    conv,
    pooling,
    loss,
    normalization,
    nn,
    recurrent,
    random,
    rounding,
    special,
    statistics,
    shaping,
    decomposition,
    attention,
    sampling,
)

__all__ = [name for module in FAMILIES for name in module.__all__]

# collectives (hodiff.distributed); appended so that families added above merge cleanly
from hodiff.functions import distributed  # noqa: E402
from hodiff.functions.distributed import *  # noqa: E402, F403

FAMILIES = (*FAMILIES, distributed)  # type: ignore[assignment]
__all__ += distributed.__all__
