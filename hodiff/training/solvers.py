"""Solvers (NNabla's ``nnabla.solvers``), each rule identical to its ``torch.optim`` class.

``import hodiff.solvers as S``. A solver holds a dict name -> parameter
(:meth:`Solver.set_parameters`, e.g. with ``hd.get_parameters()``) and updates
their arrays in place from their gradients ``.g``, with the array module of
the parameters (numpy or cupy). Per parameter it keeps the rule's state arrays
and one scratch array, made on the first update: a step allocates nothing else.

A parameter whose gradient was never written since :meth:`Solver.zero_grad`
(``.g`` unset, e.g. unused by the loss) is skipped by every method, as
``torch.optim`` skips a ``None`` gradient: its state does not advance.

===============  ===================================================================
solver           update of a parameter ``w`` with gradient ``g`` (step ``t``)
===============  ===================================================================
``Sgd``          ``w -= lr g``
``Momentum``     ``b = momentum b + g``; ``w -= lr b`` (``b = g`` at the first step)
``Nesterov``     ``b = momentum b + g``; ``w -= lr (g + momentum b)``
``Adagrad``      ``s += g^2``; ``w -= lr g / (sqrt(s) + eps)``
``RMSprop``      ``s = decay s + (1 - decay) g^2``; ``w -= lr g / (sqrt(s) + eps)``
``Adam``         ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``;
                 ``w -= lr / (1 - beta1^t) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``
``AdamW``        ``w *= 1 - lr wd``, then the Adam step
===============  ===================================================================

These are torch.optim's ``SGD``, ``SGD(momentum)`` (dampening 0),
``SGD(nesterov=True)``, ``Adagrad``, ``RMSprop(alpha=decay)``, ``Adam`` and
``AdamW(weight_decay=wd)``, operation for operation, so float64 runs agree to
rounding. ``weight_decay(rate)`` adds ``rate w`` to the gradients (torch's
``weight_decay`` argument of the first six).

A complex parameter ``w = a + ib`` is trained as its real coordinates ``(a, b)``,
exactly as ``torch.optim`` trains ``view_as_real(w)``: hodiff's gradient ``.g`` is
``df/da - i df/db`` (JAX's convention), so the rule runs on the coordinates
``(Re g, -Im g) = (df/da, df/db)``, the step along ``conj(g)``; every state (Adam's
``m`` and ``v``, ...) is kept per coordinate, of shape ``w.shape + (2,)`` and real.

File layout of :meth:`Solver.save_states`: one ``.npz`` archive with, per
parameter ``name``, one array per state (``"name::m"``, ``"name::v"``,
``"name::t"`` the step count, ...) and ``"::lr"``, the learning rate.

>>> import numpy as np, hodiff as hd, hodiff.solvers as S
>>> w = hd.Variable.from_array(np.array([1.0, -2.0]), need_grad=True)
>>> solver = S.Sgd(lr=0.5)
>>> solver.set_parameters({"w": w})
>>> (w * w).backward()            # g = 2 w
>>> solver.update()
>>> w.d
array([0., 0.])
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from hodiff.engine import api
from hodiff.engine.context import array_module
from hodiff.engine.variable import Variable
from hodiff.training.archive import read_arrays, write_arrays
from hodiff.transforms.vectorize import refuse_batched, refuse_inside_vmap

__all__ = ["Adagrad", "Adam", "AdamW", "Momentum", "Nesterov", "RMSprop", "Sgd", "Solver"]


def _positive(name: str, arg: str, value: Any, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise TypeError(f"{name}: {arg} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not (v > 0 if strict else v >= 0) or not math.isfinite(v):
        raise ValueError(f"{name}: {arg} must be {'> 0' if strict else '>= 0'}, got {value}")
    return v


def _alias(name: str, lr: float, alpha: float | None, default: float) -> float:
    """``lr``, or NNabla's ``alpha`` for it; both given (and different) raises TypeError."""
    if alpha is None:
        return lr
    if lr != default and lr != alpha:
        raise TypeError(f"{name}: alpha is NNabla's name of lr; give one of them, not both")
    return alpha


def _in_place(name: str) -> None:
    """Refuses a step or a gradient change inside ``hd.vmap`` (it would run once per batch)."""
    refuse_inside_vmap(
        name,
        "it changes the parameters' values or gradients in place, outside the mapped function, "
        "which runs once for the whole batch: it would run once where a loop over the examples "
        "runs it once per example (per-example gradients: hd.grad inside vmap, docs/vmap.md)",
    )


def _unit(name: str, arg: str, value: Any) -> float:
    v = _positive(name, arg, value)
    if not v < 1:
        raise ValueError(f"{name}: {arg} must be in [0, 1), got {value}")
    return v


def _is_params(value: Any) -> bool:
    """Whether a solver's first positional argument is parameters (torch.optim's habit)."""
    if isinstance(value, Mapping | Variable):
        return True
    if isinstance(value, str | bytes) or hasattr(value, "shape"):  # lr as a 0-d array
        return False
    return hasattr(value, "__iter__")


def _params_first(init: Any) -> Any:
    """``__init__`` that also takes the parameters first, as ``torch.optim`` does:
    ``S.Adam(params, lr=1e-3)`` is ``S.Adam(lr=1e-3)`` then ``set_parameters(params)``.
    """

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        if args and _is_params(args[0]):
            params, args = args[0], args[1:]
            init(self, *args, **kwargs)
            if isinstance(params, Variable):
                params = [params]
            elif not isinstance(params, Mapping | Sequence):
                params = list(params)  # dict values, a generator
            self.set_parameters(params)
        else:
            init(self, *args, **kwargs)

    return wrapper


class Solver:
    """Base class: parameters, states, gradient utilities, saving; subclasses define ``_step``."""

    #: names of the per-parameter state arrays, in the order the rule uses them
    states: ClassVar[tuple[str, ...]] = ()
    #: the states that are sums of squares (never negative)
    nonnegative_states: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _params_first(cls.__dict__["__init__"])  # type: ignore[method-assign]

    def __init__(self, lr: float) -> None:
        self._lr = _positive(type(self).__name__, "lr", lr)
        self._params: dict[str, Variable] = {}
        #: the parameters without repeats: each Variable once, under its first name
        self._unique: list[tuple[str, Variable]] = []
        self._state: dict[str, dict[str, Any]] = {}
        self._scratch: dict[str, Any] = {}

    # ------------------------------------------------------------ parameters
    def set_parameters(
        self, params: Mapping[str, Variable] | Sequence[Variable], reset: bool = True
    ) -> None:
        """Sets the parameters to update: a dict name -> Variable (e.g. ``hd.get_parameters()``).

        A list is named by position (``"0"``, ``"1"``, ...). With ``reset`` (the
        default) the previous parameters and all states are dropped; otherwise the
        given ones are added (a name already present gets a fresh state).

        A Variable given under several names (a layer shared under two names, or
        ``[w, w]``) is one parameter: every method updates, decays, clips, counts and
        saves it once, under its first name; the later names are aliases, listed by
        :meth:`get_parameters` but keeping no state of their own.
        """
        where = f"{type(self).__name__}.set_parameters"
        if isinstance(params, Mapping):
            items = list(params.items())
        elif isinstance(params, Sequence):
            items = [(str(i), p) for i, p in enumerate(params)]
        else:
            raise TypeError(
                f"{where}: params must be a dict name -> Variable, got {type(params).__name__}"
            )
        for k, p in items:
            if not isinstance(p, Variable):
                raise TypeError(f"{where}: {k!r} must be a hodiff.Variable, got {type(p).__name__}")
            refuse_batched(
                where,
                f"params[{k!r}]",
                p,
                "a solver updates a parameter's array in place from its .g, and a batched "
                "variable has neither",
            )
            if p.dtype.kind not in "fc":
                raise TypeError(
                    f"{where}: {k!r} must be a float or complex parameter, got dtype {p.dtype}"
                )
        if reset:
            self._params, self._state, self._scratch = {}, {}, {}
        for k, p in items:
            self._params[str(k)] = p
            self._state.pop(str(k), None)
            self._scratch.pop(str(k), None)
        first: dict[Variable, str] = {}
        for k, p in self._params.items():
            first.setdefault(p, k)
        self._unique = [(k, p) for p, k in first.items()]
        for k in [k for k in self._state if first.get(self._params.get(k)) != k]:  # type: ignore[arg-type]
            del self._state[k]  # an alias (or a name no longer set) keeps no state

    def get_parameters(self) -> dict[str, Variable]:
        """The parameters this solver updates, name -> Variable."""
        return dict(self._params)

    def zero_grad(self) -> None:
        """Resets every parameter's gradient (lazily, as ``Variable.zero_grad``)."""
        for p in self._params.values():
            p.zero_grad()

    def _grads(self) -> list[tuple[str, Variable, Any]]:
        grads = [(k, p, api.grad_of(p)) for k, p in self._unique]
        return [(k, p, g) for k, p, g in grads if g is not None]

    def _tmp(self, name: str, w: Any) -> Any:
        t = self._scratch.get(name)
        if t is None or t.shape != w.shape or t.dtype != w.dtype:
            t = self._scratch[name] = array_module(w).empty_like(w)
        return t

    def _state_of(self, name: str, w: Any) -> dict[str, Any]:
        st = self._state.get(name)
        if st is None:
            xp = array_module(w)
            st = {s: xp.zeros_like(w) for s in self.states}
            st["t"] = 0
            self._state[name] = st
        elif self.states and st[self.states[0]].shape != w.shape:
            raise ValueError(
                f"{type(self).__name__}: parameter {name!r} changed shape from "
                f"{st[self.states[0]].shape} to {w.shape}; call set_parameters again"
            )
        return st

    # ------------------------------------------------------------ update
    def update(self) -> None:
        """One step of the rule on every parameter with a gradient, in place.

        Raises:
            RuntimeError: called inside ``hd.vmap`` (one step for the whole batch).
        """
        _in_place(f"{type(self).__name__}.update")
        for k, p, g in self._grads():
            if p.dtype.kind == "c":  # the coordinates (Re, Im), the step along conj(g)
                w, g_im = coordinates(p.d), coordinates(g)[..., 1]
                g_im *= -1.0  # exact; undone below, so p.g is left as it was
                try:
                    st = self._state_of(k, w)
                    st["t"] += 1
                    self._step(w, coordinates(g), st, self._tmp(k, w))
                finally:
                    g_im *= -1.0
            else:
                w = p.d
                st = self._state_of(k, w)
                st["t"] += 1
                self._step(w, g, st, self._tmp(k, w))
            # the nodes that computed with the old value refuse a reverse pass (checks.py)
            api.mark_written(
                p, f"the parameter {k!r} updated in place by {type(self).__name__}.update()"
            )

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ gradients
    def weight_decay(self, rate: float) -> None:
        """Adds ``rate * w`` to each gradient (L2 regularisation, torch's ``weight_decay``).

        Raises:
            RuntimeError: called inside ``hd.vmap``.
        """
        rate = _positive(f"{type(self).__name__}.weight_decay", "rate", rate)
        _in_place(f"{type(self).__name__}.weight_decay")
        if rate == 0:
            return
        for k, p, g in self._grads():
            if p.dtype.kind == "c":  # torch's grad conj(g) += rate w, so g += rate conj(w)
                g += rate * array_module(p.d).conj(p.d)
                continue
            w = p.d
            tmp = self._tmp(k, w)
            array_module(w).multiply(w, rate, out=tmp)
            g += tmp

    def clip_grad_by_norm(self, max_norm: float) -> float:
        """Scales all gradients so that their global L2 norm is at most ``max_norm``.

        As ``torch.nn.utils.clip_grad_norm_``: ``n = sqrt(sum_i ||g_i||^2)``; every
        gradient is multiplied by ``min(1, max_norm / (n + 1e-6))``.

        Returns:
            The global norm ``n`` before clipping (a float).

        Raises:
            RuntimeError: called inside ``hd.vmap`` (clip per-example gradients from
                ``hd.grad`` with hodiff functions there, docs/vmap.md).
        """
        max_norm = _positive(f"{type(self).__name__}.clip_grad_by_norm", "max_norm", max_norm)
        _in_place(f"{type(self).__name__}.clip_grad_by_norm")
        grads = self._grads()
        if not grads:
            return 0.0
        sq = 0.0
        for _, _, g in grads:
            n = float(array_module(g).linalg.norm(g.ravel()))
            sq += n * n
        total = math.sqrt(sq)
        coef = max_norm / (total + 1e-6)
        if coef < 1.0:
            for _, _, g in grads:
                g *= coef
        return total

    def check_inf_or_nan_grad(self) -> bool:
        """True if any gradient holds an inf or a NaN."""
        return any(not bool(array_module(g).isfinite(g).all()) for _, _, g in self._grads())

    # ------------------------------------------------------------ learning rate
    def learning_rate(self) -> float:
        """The current learning rate."""
        return self._lr

    def set_learning_rate(self, lr: float) -> None:
        """Sets the learning rate used by the next updates (the states are kept).

        Raises:
            TypeError: ``lr`` is not a real number.
            ValueError: ``lr`` is negative, inf or NaN.
        """
        self._lr = _positive(f"{type(self).__name__}.set_learning_rate", "lr", lr)

    # ------------------------------------------------------------ states
    def save_states(self, path: str | os.PathLike[str]) -> None:
        """Writes the learning rate and every parameter's state to one ``.npz`` archive.

        Keys: ``"name::state"`` for each state array and ``"name::t"`` (steps
        taken), ``"::lr"``; see the module docstring. Any parameter name works
        (:mod:`hodiff.training.archive`). ``path`` is used as given; it is replaced only once
        the new file is complete.
        """
        arrays: dict[str, Any] = {"::lr": np.asarray(self._lr)}
        for k, st in self._state.items():
            for s, a in st.items():
                arrays[f"{k}::{s}"] = np.asarray(a) if array_module(a) is np else a.get()
        write_arrays(path, arrays)

    def load_states(self, path: str | os.PathLike[str]) -> None:
        """Reads an archive of :meth:`save_states`: the solver then continues exactly as the one
        that saved it (same parameters by name, same values: load them with
        ``hd.load_parameters``).

        All or nothing: the whole file is read and checked first, each value as its
        setter checks it (the learning rate as :meth:`set_learning_rate`), and the
        solver changes only when all of it is valid.

        Raises:
            ValueError: the file is truncated or corrupted; a state names a parameter
                this solver does not have (or an alias of one, see
                :meth:`set_parameters`), a state it does not keep, or has another shape
                than its parameter, or is not finite; a step count is not one
                non-negative integer; the learning rate is not one finite number
                ``>= 0``. The message names the file.
            TypeError: a stored value is not a real number.
        """
        where = f"{type(self).__name__}.load_states"
        shown = os.fspath(path)
        arrays = read_arrays(where, path, "a solver state file of save_states")
        lr = arrays.pop("::lr", None)
        if lr is not None:
            lr = _positive(f"{where} ({shown!r})", "lr", _stored_scalar(where, shown, "::lr", lr))
        states = self._checked_states(where, shown, arrays)
        for name, st in states.items():  # all checked: now on the device, then set
            p = self._params[name]
            shape, dtype = state_layout(p)
            for s in self.states:
                st[s] = array_module(p.d).asarray(st[s], dtype=dtype).reshape(shape).copy()
        self._state = states
        if lr is not None:
            self._lr = lr

    def _checked_states(
        self, where: str, shown: str, arrays: dict[str, Any]
    ) -> dict[str, dict[str, Any]]:
        """The states of an archive (``"::lr"`` taken out) by parameter name, each checked:
        a parameter of this solver under its first name, every state it keeps, a step count.
        """
        first = {k for k, _ in self._unique}
        states: dict[str, dict[str, Any]] = {}
        for key, a in arrays.items():
            name, _, s = key.rpartition("::")
            p = self._params.get(name)
            if p is None or name not in first:
                alias = "" if p is None else " (an alias of another name of the same Variable)"
                raise ValueError(
                    f"{where}: {shown!r} has a state for {name!r}, which is not a "
                    f"parameter of this solver{alias} ({sorted(first)})"
                )
            st = states.setdefault(name, {})
            if s == "t":
                st["t"] = _stored_step(where, shown, key, a)
                continue
            self._check_stored_state(where, shown, key, s, a, p)
            st[s] = a
        for name, st in states.items():
            missing = [s for s in (*self.states, "t") if s not in st]
            if missing:
                raise ValueError(f"{where}: the state of {name!r} in {shown!r} lacks {missing}")
        return states

    def _check_stored_state(
        self, where: str, shown: str, key: str, s: str, a: Any, p: Variable
    ) -> None:
        """Raises unless ``a`` can be the state ``s`` of parameter ``p`` (from file ``shown``)."""
        name = key.rpartition("::")[0]
        if s not in self.states:
            raise ValueError(
                f"{where}: {shown!r} has an unknown state {s!r} for {name!r} (this solver "
                f"keeps {self.states})"
            )
        shape, _ = state_layout(p)
        if a.shape != shape:
            raise ValueError(
                f"{where}: state {key!r} in {shown!r} has shape {a.shape}, parameter "
                f"{name!r} of shape {p.shape} and dtype {p.dtype} keeps states of shape {shape}"
            )
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{where}: state {key!r} in {shown!r} has dtype {a.dtype}")
        if not np.isfinite(a).all():
            raise ValueError(f"{where}: state {key!r} in {shown!r} holds inf or NaN")
        if s in self.nonnegative_states and (a < 0).any():
            raise ValueError(
                f"{where}: state {key!r} in {shown!r} (a running sum of squares) holds "
                "negative values"
            )


def coordinates(a: Any) -> Any:
    """The real coordinates of a complex array ``a``, a view of shape ``a.shape + (2,)``
    (``[..., 0]`` the real parts, ``[..., 1]`` the imaginary ones): torch's ``view_as_real``.
    """
    return a[..., None].view(real_dtype(a.dtype))


def real_dtype(dtype: Any) -> np.dtype[Any]:
    """float32 for complex64, float64 for complex128 (a real dtype: itself)."""
    return np.dtype(dtype).type(0).real.dtype


def state_layout(p: Variable) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype of a solver state of parameter ``p``: its own, or for a complex
    parameter those of its coordinates (``p.shape + (2,)``, the real dtype).
    """
    if p.dtype.kind == "c":
        return (*p.shape, 2), real_dtype(p.dtype)
    return tuple(p.shape), p.dtype


def _stored_step(where: str, shown: str, key: str, a: Any) -> int:
    """The step count a state file holds: one non-negative integer."""
    t = _stored_scalar(where, shown, key, a)
    if not isinstance(t, np.integer) or t < 0:
        raise ValueError(
            f"{where}: {shown!r} holds the step count {key!r} = {t!r}; it must be "
            "a non-negative integer"
        )
    return int(t)


def _stored_scalar(where: str, shown: str, key: str, a: Any) -> Any:
    """The one number a 0-d (or one-element) array of a state file holds."""
    if a.size != 1 or a.ndim > 1:
        raise ValueError(
            f"{where}: {shown!r} holds {key!r} of shape {a.shape}; it must be a single number"
        )
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{where}: {shown!r} holds {key!r} of dtype {a.dtype}, not a number")
    return a.reshape(())[()]


class Sgd(Solver):
    """Stochastic gradient descent ``w -= lr g`` (``torch.optim.SGD``)."""

    def __init__(self, lr: float = 1e-3) -> None:
        super().__init__(lr)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        array_module(w).multiply(g, self._lr, out=tmp)
        w -= tmp


class Momentum(Solver):
    """SGD with momentum: ``b = momentum b + g``, ``w -= lr b`` (``torch.optim.SGD(momentum)``)."""

    states = ("b",)

    def __init__(self, lr: float = 1e-3, momentum: float = 0.9) -> None:
        super().__init__(lr)
        self.momentum = _positive("Momentum", "momentum", momentum)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        b = st["b"]
        b *= self.momentum
        b += g
        array_module(w).multiply(b, self._lr, out=tmp)
        w -= tmp


class Nesterov(Solver):
    """Nesterov momentum: ``b = momentum b + g``, ``w -= lr (g + momentum b)``
    (``torch.optim.SGD(momentum, nesterov=True)``).
    """

    states = ("b",)

    def __init__(self, lr: float = 1e-3, momentum: float = 0.9) -> None:
        super().__init__(lr)
        self.momentum = _positive("Nesterov", "momentum", momentum)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        xp = array_module(w)
        b = st["b"]
        b *= self.momentum
        b += g
        xp.multiply(b, self.momentum, out=tmp)
        tmp += g
        tmp *= self._lr
        w -= tmp


class Adagrad(Solver):
    """Adagrad: ``s += g^2``, ``w -= lr g / (sqrt(s) + eps)`` (``torch.optim.Adagrad``)."""

    states = ("s",)
    nonnegative_states = ("s",)

    def __init__(self, lr: float = 0.01, eps: float = 1e-10) -> None:
        super().__init__(lr)
        self.eps = _positive("Adagrad", "eps", eps)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        xp = array_module(w)
        s = st["s"]
        xp.multiply(g, g, out=tmp)
        s += tmp
        xp.sqrt(s, out=tmp)
        tmp += self.eps
        xp.divide(g, tmp, out=tmp)
        tmp *= self._lr
        w -= tmp


class RMSprop(Solver):
    """RMSprop: ``s = decay s + (1 - decay) g^2``, ``w -= lr g / (sqrt(s) + eps)``
    (``torch.optim.RMSprop(alpha=decay)``).
    """

    states = ("s",)
    nonnegative_states = ("s",)

    def __init__(self, lr: float = 0.01, decay: float = 0.99, eps: float = 1e-8) -> None:
        super().__init__(lr)
        self.decay = _unit("RMSprop", "decay", decay)
        self.eps = _positive("RMSprop", "eps", eps)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        xp = array_module(w)
        s = st["s"]
        s *= self.decay
        xp.multiply(g, 1.0 - self.decay, out=tmp)
        tmp *= g
        s += tmp
        xp.sqrt(s, out=tmp)
        tmp += self.eps
        xp.divide(g, tmp, out=tmp)
        tmp *= self._lr
        w -= tmp


class Adam(Solver):
    """Adam (``torch.optim.Adam``), with bias corrections at step ``t``:

    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``w -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.
    """

    states = ("m", "v")
    nonnegative_states = ("v",)

    def __init__(
        self,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        *,
        alpha: float | None = None,
    ) -> None:
        # alpha: NNabla's name of the step size (S.Adam(alpha=...)), the same as lr
        super().__init__(_alias(type(self).__name__, lr, alpha, 1e-3))
        name = type(self).__name__
        self.beta1 = _unit(name, "beta1", beta1)
        self.beta2 = _unit(name, "beta2", beta2)
        self.eps = _positive(name, "eps", eps)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        xp = array_module(w)
        m, v, t = st["m"], st["v"], st["t"]
        # m = lerp(m, g, 1 - beta1), as torch computes it
        weight = 1.0 - self.beta1
        xp.subtract(g, m, out=tmp)
        if weight < 0.5:
            tmp *= weight
            m += tmp
        else:
            tmp *= weight - 1.0
            xp.add(g, tmp, out=m)
        v *= self.beta2
        xp.multiply(g, 1.0 - self.beta2, out=tmp)
        tmp *= g
        v += tmp
        step_size = self._lr / (1.0 - self.beta1**t)
        bc2_sqrt = (1.0 - self.beta2**t) ** 0.5
        xp.sqrt(v, out=tmp)
        tmp /= bc2_sqrt
        tmp += self.eps
        xp.divide(m, tmp, out=tmp)
        tmp *= step_size
        w -= tmp


class AdamW(Adam):
    """AdamW (``torch.optim.AdamW(weight_decay=wd)``): ``w *= 1 - lr wd``, then the Adam step."""

    def __init__(
        self,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        wd: float = 1e-2,
    ) -> None:
        super().__init__(lr, beta1, beta2, eps)
        self.wd = _positive("AdamW", "wd", wd)

    def _step(self, w: Any, g: Any, st: dict[str, Any], tmp: Any) -> None:
        w *= 1.0 - self._lr * self.wd
        super()._step(w, g, st, tmp)
