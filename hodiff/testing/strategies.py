"""Hypothesis strategies: valid inputs of a function, drawn from its declared domain.

A function's domain is declared once, as a row of the spec table
(:class:`hodiff.testing.Spec`): per input a shape (a float array drawn from
``domain``, kept ``gap`` away from the ``kinks``) or a callable ``rng -> array``
(labels, indices, positive or SPD inputs). These strategies turn that
declaration into inputs for property-based tests of your own functions::

    from hypothesis import given
    from hodiff.testing import Spec, labels, check_function
    from hodiff.testing.strategies import spec_inputs

    spec = Spec(my_loss, ((4, 3), labels((4, 1), 3)), domain=(-3.0, 3.0), kinks=(0.0,))

    @given(spec_inputs(spec))
    def test_my_loss(xs):
        check_function(lambda *v: my_loss(*v, **spec.kwargs), tuple(xs), order=2)

hypothesis is optional: this module imports without it, and the strategies
raise ImportError with the install command when called.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hodiff.testing.spec import Spec, avoid_kinks

__all__ = ["arrays", "spec_inputs"]


def _hypothesis() -> tuple[Any, Any]:
    try:
        import hypothesis.extra.numpy as hnp
        import hypothesis.strategies as st
    except ImportError as e:
        raise ImportError(
            "hodiff.testing.strategies needs hypothesis: pip install hypothesis "
            '(or pip install -e ".[test]" in the hodiff source checkout)'
        ) from e
    return st, hnp


def arrays(
    shape: tuple[int, ...],
    domain: tuple[float, float] = (-2.0, 2.0),
    kinks: tuple[float, ...] = (),
    gap: float = 0.1,
    dtype: Any = np.float64,
) -> Any:
    """A strategy of float arrays of ``shape`` with elements in ``domain``, away from ``kinks``.

    Elements closer than ``gap`` to a kink are moved to ``kink +- 1.5 gap``
    (as :meth:`Spec.sample` does), so a function is never evaluated where it
    is not differentiable.

    Args:
        shape: the array shape.
        domain: ``(low, high)``, both finite.
        kinks: points to stay away from.
        gap: the distance kept from each kink.
        dtype: a float dtype of the result.
    """
    st, hnp = _hypothesis()
    lo, hi = (float(t) for t in domain)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"strategies.arrays: domain must be finite with low < high, got {domain}")
    elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    kinks = tuple(float(k) for k in kinks)
    return hnp.arrays(np.float64, tuple(shape), elements=elements).map(
        lambda x: avoid_kinks(x, kinks, gap).astype(dtype)
    )


def spec_inputs(spec: Spec, dtype: Any = np.float64) -> Any:
    """A strategy of input lists for ``spec.fn(*inputs, **spec.kwargs)``.

    Shape arguments become :func:`arrays` over ``spec.domain`` away from
    ``spec.kinks``; callable arguments (``labels``, ``positive``, ``fixed`` or
    your own ``rng -> array``) are called with a generator seeded by a drawn
    integer, so hypothesis can shrink and replay them.

    Args:
        spec: the function's declared domain.
        dtype: the float dtype of the shape arguments.
    """
    st, _ = _hypothesis()
    parts = []
    for a in spec.args:
        if callable(a):
            parts.append(
                st.integers(0, 2**32 - 1).map(
                    lambda s, a=a: np.asarray(a(np.random.default_rng(s)))
                )
            )
        else:
            parts.append(arrays(tuple(a), spec.domain, spec.kinks, spec.gap, dtype))
    return st.tuples(*parts).map(list)
