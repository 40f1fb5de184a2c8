"""hodiff: higher-order automatic differentiation on numpy and cupy.

>>> import numpy as np, hodiff as hd, hodiff.functions as F
>>> x = hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
>>> y = F.sum(x ** 3)
>>> (g,) = hd.grad(y, x)
>>> g.d
array([ 3., 12.])
"""

from hodiff import curvature, distributed, functions, transforms
from hodiff.engine import malloc as _malloc
from hodiff.engine.autograd import grad, iter_grads
from hodiff.engine.context import (
    Context,
    auto_forward,
    context_scope,
    get_auto_forward,
    get_default_context,
    no_grad,
    set_auto_forward,
    set_default_context,
)
from hodiff.engine.function import Function
from hodiff.engine.variable import ShapeResetError, Variable
from hodiff.tools.check import GradcheckError, GradcheckReport, gradcheck, gradgradcheck
from hodiff.tools.graphio import load_graph, save_graph, to_dot
from hodiff.transforms.checkpointing import checkpoint
from hodiff.transforms.compile import CompileError, TracingError, compile, jit
from hodiff.transforms.derivatives import *  # noqa: F403
from hodiff.transforms.operators import biharmonic, laplacian
from hodiff.transforms.taylor import jet
from hodiff.transforms.vectorize import vmap

__version__ = "0.1.0"

__all__ = [
    "Context",
    "Function",
    "GradcheckError",
    "GradcheckReport",
    "ShapeResetError",
    "Variable",
    "auto_forward",
    "checkpoint",
    "compile",
    "CompileError",
    "jit",
    "TracingError",
    "context_scope",
    "curvature",
    "functions",
    "get_auto_forward",
    "get_default_context",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "iter_grads",
    "jet",
    "laplacian",
    "biharmonic",
    "no_grad",
    "set_auto_forward",
    "set_default_context",
    "vmap",
    *transforms.__all__,
    "load_graph",
    "save_graph",
    "to_dot",
]

from hodiff import initializers, parametric, solvers
from hodiff.engine.random import seed
from hodiff.training.parameter import (
    clear_parameters,
    get_parameter_or_create,
    get_parameters,
    load_parameters,
    parameter_scope,
    save_parameters,
)

__all__ += [
    "clear_parameters",
    "initializers",
    "parametric",
    "solvers",
    "get_parameter_or_create",
    "get_parameters",
    "load_parameters",
    "parameter_scope",
    "save_parameters",
    "seed",
]

__all__ += ["distributed"]  # imports without mpi4py (loaded on first use)

_malloc.raise_thresholds()  # a step's arrays stay with the process (see hodiff/_malloc.py)
