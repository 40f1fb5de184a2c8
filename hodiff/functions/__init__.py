"""All differentiable functions: ``import hodiff.functions as F``.

One module per family; each lists its public functions in ``__all__``. Importing this
package registers what the engine calls from this layer (the engine imports nothing
above it): the functions behind Variable's operators and methods, the sum of a
broadcast gradient back to its input's shape, and the batching helpers' functions.
"""

import inspect as _inspect

from hodiff.engine import batching as _batching
from hodiff.engine import complex_values as _complex_values
from hodiff.engine import function as _function
from hodiff.engine import variable as _variable
from hodiff.functions import (
    activation,
    arithmetic,
    array,
    attention,
    conv,
    decomposition,
    distributed,
    linalg,
    logic,
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
    spectral,
    statistics,
)
from hodiff.functions.activation import *  # noqa: F403
from hodiff.functions.arithmetic import *  # noqa: F403
from hodiff.functions.array import *  # noqa: F403
from hodiff.functions.attention import *  # noqa: F403
from hodiff.functions.conv import *  # noqa: F403
from hodiff.functions.decomposition import *  # noqa: F403
from hodiff.functions.distributed import *  # noqa: F403
from hodiff.functions.linalg import *  # noqa: F403
from hodiff.functions.logic import *  # noqa: F403
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
from hodiff.functions.spectral import *  # noqa: F403
from hodiff.functions.statistics import *  # noqa: F403
from hodiff.grad_functions.arithmetic import sum_to as _sum_to

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
    logic,
    decomposition,
    attention,
    sampling,
    distributed,
    spectral,
)

__all__ = [name for module in FAMILIES for name in module.__all__]

# Variable's operators and methods call the functions themselves, not their traced form:
# in a static graph their nodes follow new shapes by their own rules (``x.reshape(2, -1)``
# keeps its 2), as NNabla's do; so do the batching helpers.
_plain = _inspect.unwrap

_variable.register(
    Add2=arithmetic.Add2,
    AddScalar=arithmetic.AddScalar,
    Sub2=arithmetic.Sub2,
    Mul2=arithmetic.Mul2,
    MulScalar=arithmetic.MulScalar,
    abs=arithmetic.abs,
    add2=arithmetic.add2,
    add_scalar=arithmetic.add_scalar,
    sub2=arithmetic.sub2,
    r_sub_scalar=arithmetic.r_sub_scalar,
    mul2=arithmetic.mul2,
    mul_scalar=arithmetic.mul_scalar,
    div2=arithmetic.div2,
    r_div_scalar=arithmetic.r_div_scalar,
    pow2=arithmetic.pow2,
    pow_scalar=arithmetic.pow_scalar,
    r_pow_scalar=arithmetic.r_pow_scalar,
    matmul=_plain(linalg.matmul),
    getitem=_plain(array.getitem),
    equal=_plain(array.equal),
    not_equal=_plain(logic.not_equal),
    less=_plain(array.less),
    greater=_plain(array.greater),
    less_equal=_plain(array.less_equal),
    greater_equal=_plain(array.greater_equal),
    transpose=_plain(array.transpose),
    reshape=_plain(array.reshape),
    squeeze=_plain(shaping.squeeze),
    sum=_plain(reduction.sum),
    mean=_plain(reduction.mean),
    max=_plain(reduction.max),
    min=_plain(reduction.min),
    prod=_plain(reduction.prod),
    astype=_plain(shaping.astype),
    function_names=frozenset(__all__),  # named by the error for np.tanh(v) and the like
)
_function.register_sum_to(_sum_to)
_complex_values.register_complex_cast(math.complex)
_batching.register(
    reshape=_plain(array.reshape), broadcast=_plain(array.broadcast), stack=_plain(array.stack)
)
