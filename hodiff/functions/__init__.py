"""All differentiable functions: ``import hodiff.functions as F``.

One module per family; each lists its public functions in ``__all__``. Importing this
package registers what the engine calls from this layer (the engine imports nothing
above it): the functions behind Variable's operators and methods, the sum of a
broadcast gradient back to its input's shape, and the batching helpers' functions.
"""

import types as _types

from hodiff.engine import batching as _batching
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
)

__all__ = [name for module in FAMILIES for name in module.__all__]

# The primitives whose arguments hold something set up for their inputs' shapes (a target
# shape, a size, an index, a number of pieces, a drawn shape): a static graph cannot carry
# them to a new shape (Variable.reset_shape raises ShapeResetError naming them). Every other
# primitive of this layer follows new shapes: its setup runs again (tests/test_reset_shape.py
# checks every spec row against a graph built for the new shapes).
SHAPE_BOUND = frozenset(
    {
        "AllReduce", "Arange", "Broadcast", "Constant", "ConvolutionFilterGrad", "CornerIndex",
        "EinsumExpand", "EmbedWeightGrad", "Eye", "GatherAdd", "IndexAdd",
        "InterpolateBackward", "MaxPoolingBackward",
        "PoolingBackward", "Rand", "Randint", "Randn", "ScatterAlongAxis",
        "ScatterByLabel", "ScatterNdAdd", "Split", "SumTo", "WriteBack",
    }
)  # fmt: skip
if SHAPE_BOUND - {_c.__name__ for _c in _function.REGISTRY}:  # a misspelt name would follow
    raise ImportError(  # a shape it cannot (a wrong number): refuse to load instead
        "hodiff.functions: SHAPE_BOUND names no registered primitive "
        f"{sorted(SHAPE_BOUND - {_c.__name__ for _c in _function.REGISTRY})}"
    )
# Elementwise primitives (broadcasting carries a batch axis: their batch rule says so) and
# the dropout mask follow inputs of another rank too.
for _cls in _function.REGISTRY:
    _cls.shape_generic = _cls.__name__ not in SHAPE_BOUND
    _cls.follows_rank = _cls.shape_generic and (
        getattr(_cls, "batch_rule", None) is _batching.elementwise or _cls.__name__ == "DropoutMask"
    )


def _reads_shapes(code: _types.CodeType) -> bool:
    """Whether a function's code (or a function defined in it) reads shapes itself."""
    if _SHAPE_NAMES & set(code.co_names):
        return True
    return any(isinstance(c, _types.CodeType) and _reads_shapes(c) for c in code.co_consts)


_SHAPE_NAMES = frozenset({"shape", "shape_of", "ndim", "size", "normalize_axes", "kept_shape"})
# Families of one-primitive wrappers (their nodes follow new shapes on their own): not traced
_UNTRACED = (arithmetic, math, activation, special, rounding, logic)
# Every other public function, and any that reads shapes, is traced: in a static graph its
# outputs keep the call (function.Trace), so that reset_shape makes it again for the new
# shapes, as NNabla's setup does for its own functions (graph.follow_shapes).
for _module in FAMILIES:
    for _name in _module.__all__:
        _fn = getattr(_module, _name)
        _code = getattr(_fn, "__code__", None)
        if _code is not None and (_module not in _UNTRACED or _reads_shapes(_code)):
            globals()[_name] = _function.traced(_fn)

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
    matmul=linalg.matmul,
    getitem=array.getitem,
    less=array.less,
    greater=array.greater,
    less_equal=array.less_equal,
    greater_equal=array.greater_equal,
    transpose=array.transpose,
    reshape=array.reshape,
    squeeze=shaping.squeeze,
    sum=reduction.sum,
    mean=reduction.mean,
    max=reduction.max,
    min=reduction.min,
    prod=reduction.prod,
    astype=shaping.astype,
    function_names=frozenset(__all__),  # named by the error for np.tanh(v) and the like
)
_function.register_sum_to(_sum_to)
_batching.register(reshape=array.reshape, broadcast=array.broadcast, stack=array.stack)
