"""What every workload shares: the Workload record, inputs and the peers' set-up."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: a library's callables, by task id; each call computes the task's result from scratch
Fns = dict[str, Callable[[], Any]]


@dataclasses.dataclass(frozen=True)
class Task:
    """One timed computation: ``id`` as in the issue (W1, W2, ...).

    ``grad_of_hvp`` names the gradient task this HVP task is compared with.
    """

    id: str
    title: str
    grad_of_hvp: str | None = None


@dataclasses.dataclass(frozen=True)
class Workload:
    """Tasks that share inputs; timed together, interleaved, so their ratios see the same noise.

    ``make_inputs(size, dtype)`` returns a dict of numpy arrays (``size`` is
    ``"full"``, the issue's, or ``"tiny"``, for the smoke test); ``builders[lib](inputs)``
    returns the callables of that library (``lib`` "numpy" is the hand-written floor).
    """

    name: str
    title: str
    tasks: tuple[Task, ...]
    dtypes: tuple[str, ...]
    make_inputs: Callable[[str, str], dict[str, Any]]
    builders: dict[str, Callable[[dict[str, Any]], Fns]]
    notes: dict[str, str] = dataclasses.field(default_factory=dict)


def dense_params(rng: np.random.Generator, dims: Sequence[int], dtype: str) -> list[np.ndarray]:
    """``[W0, b0, W1, b1, ...]`` with ``W_k`` of shape ``(dims[k], dims[k+1])`` ~ N(0, 1/fan_in)."""
    params = []
    for a, b in itertools.pairwise(dims):
        params.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype))
        params.append((0.1 * rng.standard_normal(b)).astype(dtype))
    return params


def normal_like(rng: np.random.Generator, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A random direction (for HVPs) with the shapes and dtypes of ``arrays``."""
    return [rng.standard_normal(a.shape).astype(a.dtype) for a in arrays]


def to_numpy(out: Any) -> list[np.ndarray]:
    """A task's result (nested lists/tuples of any library's arrays) as a flat list of arrays."""
    if isinstance(out, list | tuple):
        flat: list[np.ndarray] = []
        for o in out:
            flat.extend(to_numpy(o))
        return flat
    if hasattr(out, "detach"):  # torch
        out = out.detach().cpu()
    return [np.asarray(out)]


# ---------------------------------------------------------------- peers
def load_torch() -> Any:
    return importlib.import_module("torch")


def load_jax() -> tuple[Any, Any]:
    """jax and jax.numpy, with float64 enabled (float32 inputs stay float32)."""
    jax = importlib.import_module("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, importlib.import_module("jax.numpy")


def load_autograd() -> tuple[Any, Any]:
    """HIPS autograd and its wrapped numpy."""
    return importlib.import_module("autograd"), importlib.import_module("autograd.numpy")


def jax_blocking(jax: Any, f: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``f(*args)`` that waits for jax's asynchronous result (so the timing is the compute)."""
    args = jax.device_put(args)

    def run() -> Any:
        return jax.block_until_ready(f(*args))

    return run


def torch_leaves(torch: Any, arrays: Sequence[np.ndarray], requires_grad: bool) -> list[Any]:
    return [torch.from_numpy(a).requires_grad_(requires_grad) for a in arrays]


def hodiff_leaves(arrays: Sequence[np.ndarray], need_grad: bool) -> list[Any]:
    import hodiff as hd

    return [hd.Variable.from_array(a, need_grad=need_grad) for a in arrays]


def jax_grad_and_hvp(
    jax: Any, loss: Callable[..., Any], inp: dict[str, Any], names: tuple[str, str]
) -> dict[str, Callable[[], Any]]:
    """Jitted gradient and forward-over-reverse HVP of ``loss(params, x, t)``, timed blocking."""
    grad = jax.jit(jax.grad(loss))

    @jax.jit
    def hvp(ps: list[Any], vs: list[Any], x: Any, t: Any) -> Any:
        return jax.jvp(lambda qs: jax.grad(loss)(qs, x, t), (ps,), (vs,))[1]

    ps, vs = list(inp["params"]), list(inp["v"])
    return {
        names[0]: jax_blocking(jax, grad, ps, inp["x"], inp["t"]),
        names[1]: jax_blocking(jax, hvp, ps, vs, inp["x"], inp["t"]),
    }
