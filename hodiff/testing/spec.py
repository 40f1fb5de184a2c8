"""The spec table's entry type: one row per function (or per argument variant)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

Arg = Any  # a shape tuple (float input sampled from `domain`) or a callable rng -> array


@dataclass(frozen=True)
class Spec:
    """How to test one function.

    Attributes:
        fn: the public function, called as ``fn(*inputs, **kwargs)``.
        args: per input, a shape (a float array drawn uniformly from ``domain``,
            kept at least ``gap`` away from ``kinks``) or a callable ``rng -> array``
            (labels, indices, SPD matrices, ...).
        ref: numpy reference, ``ref(*arrays, **kwargs) -> array`` (or tuple); None
            when the forward is checked elsewhere.
        kwargs: static arguments.
        domain: sampling interval of float inputs.
        kinks: points where the function is not smooth; samples avoid them, and
            :meth:`sample_at_kinks` puts elements exactly on them.
        kink_args: per input, as ``args``, inputs at the kinks that are not fixed values
            (ties of a max, of a ``maximum2``); None: :meth:`sample_at_kinks` puts
            elements on ``kinks``.
        distinct: float inputs are drawn with every two elements, and every two
            magnitudes, at least this far apart (ties of a max are kinks: pooling,
            ``norm(p=inf)``); 0: no such rule.
        order: highest derivative order checked against finite differences
            (0: not differentiable, forward only).
        linear: the function is linear in its float inputs, so orders >= 2 are
            checked on ``y**3`` (the cube exercises the backward of the backward).
        atol: absolute tolerance of the derivative checks (None: from the
            differences' error estimate, see :func:`hodiff.gradcheck`).
        rtol: relative tolerance of the derivative checks (None: from the estimate).
        ref_atol: absolute tolerance of the forward check.
        ref_rtol: relative tolerance of the forward check.
        float32: also check that float32 inputs give float32 outputs.
        id: test id suffix for variants of one function.
        complex: a complex row: every input drawn by shape is ``x + iy``, both parts from
            ``domain`` (tests/test_complex.py checks these rows; :func:`all_specs` leaves
            them out, :func:`complex_specs` gives them).
    """

    fn: Callable[..., Any]
    args: tuple[Arg, ...]
    ref: Callable[..., Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    domain: tuple[float, float] = (-2.0, 2.0)
    kinks: tuple[float, ...] = ()
    kink_args: tuple[Arg, ...] | None = None
    gap: float = 0.1
    distinct: float = 0.0
    order: int = 3
    linear: bool = False
    atol: float | None = None
    rtol: float | None = None
    ref_atol: float = 1e-12
    ref_rtol: float = 1e-10
    float32: bool = True
    id: str = ""
    complex: bool = False

    @property
    def name(self) -> str:
        base = getattr(self.fn, "__name__", "fn")
        return f"{base}[{self.id}]" if self.id else base

    def sample(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs in float64 (complex128 for a complex row), reproducible per spec."""
        rng = np.random.default_rng(seed)
        out = []
        lo, hi = self.domain
        for a in self.args:
            if callable(a):
                out.append(np.asarray(a(rng)))
                continue
            x = avoid_kinks(rng.uniform(lo, hi, size=a), self.kinks, self.gap)
            if self.distinct:
                x = _without_ties(
                    x,
                    lambda n: avoid_kinks(rng.uniform(lo, hi, n), self.kinks, self.gap),
                    self.distinct,
                )
            x = np.asarray(x, dtype=np.float64)
            if self.complex:
                x = x + 1j * avoid_kinks(rng.uniform(lo, hi, size=a), self.kinks, self.gap)
            out.append(x)
        return out

    def sample_at_kinks(self, seed: int = 0) -> list[np.ndarray] | None:
        """Inputs in float64 at which the function is not smooth (None for a smooth row):
        ``kink_args`` drawn as ``args`` are, or :meth:`sample` with every other element of
        the first input drawn by shape set exactly on a kink, in turn (``kinks`` are those of
        that input: ``atan2``'s cut ``y = 0`` where ``x`` is not 0, ``prelu``'s ``x = 0``).
        """
        if self.kink_args is not None:
            return replace(self, args=self.kink_args, kinks=(), distinct=0.0).sample(seed)
        drawn = [i for i, a in enumerate(self.args) if not callable(a)]
        if not self.kinks or not drawn:
            return None
        xs = self.sample(seed)
        i = drawn[0]
        flat = xs[i].reshape(-1).copy()
        for e in range(0, flat.size, 2):
            flat[e] = self.kinks[(e // 2) % len(self.kinks)]
        xs[i] = flat.reshape(xs[i].shape)
        return xs


def avoid_kinks(x: Any, kinks: tuple[float, ...], gap: float) -> np.ndarray:
    """``x`` with every element closer than ``gap`` to a kink moved to
    ``kink +- (1.5 gap + 0.5 |x - kink|)``: out of the gap, and distinct elements stay
    distinct (moving them all to ``kink + 1.5 gap`` made exact ties: a kink of a max).
    """
    x = np.asarray(x, dtype=np.float64)
    for k in kinks:
        near = np.abs(x - k) < gap
        x = np.where(near, k + np.where(x >= k, 1.0, -1.0) * (1.5 * gap + 0.5 * np.abs(x - k)), x)
    return x


def _without_ties(x: np.ndarray, draw: Callable[[int], np.ndarray], distinct: float) -> np.ndarray:
    """``x`` with the elements closer than ``distinct`` to another one (in value or in
    magnitude) drawn again by ``draw(n)`` until there are none.
    """
    flat = np.array(x, dtype=np.float64).reshape(-1)
    for _ in range(1000):
        bad = np.zeros(flat.size, dtype=bool)
        for values in (flat, np.abs(flat)):
            order = np.argsort(values, kind="stable")
            close = np.diff(values[order]) < distinct
            bad[order[1:][close]] = True
        if not bad.any():
            return flat.reshape(np.shape(x))
        flat[bad] = draw(int(bad.sum()))
    raise ValueError(f"Spec.sample: cannot draw {flat.size} elements {distinct} apart")


def labels(shape: tuple[int, ...], n: int) -> Callable[[np.random.Generator], np.ndarray]:
    """An integer-label argument: values in [0, n)."""
    return lambda rng: rng.integers(0, n, size=shape)


def fixed(array: Any) -> Callable[[np.random.Generator], np.ndarray]:
    """An argument that is always ``array``."""
    return lambda rng: np.asarray(array)


def positive(shape: tuple[int, ...], lo: float = 0.5, hi: float = 2.0) -> Callable[..., Any]:
    """A float argument drawn from [lo, hi] whatever the spec's domain."""
    return lambda rng: rng.uniform(lo, hi, size=shape)


def spec_ids(specs: Sequence[Spec]) -> list[str]:
    """Display names, unique: a repeated spec name gets ``#1``, ``#2``... (test ids, CLI rows)."""
    seen: dict[str, int] = {}
    out = []
    for s in specs:
        n = seen.get(s.name, 0)
        seen[s.name] = n + 1
        out.append(s.name if n == 0 else f"{s.name}#{n}")
    return out
