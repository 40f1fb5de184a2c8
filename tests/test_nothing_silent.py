"""Nothing silently wrong: Taylor mode, checkpoints, the checker, saved graphs and a new
user's traps.

Each case gives the right number or a clear error naming the function, the argument and
what to do. Expected values come from closed forms, finite differences, a loop of plain
calls or numpy, never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F


# ---------------------------------------------------------------- tangents and series
def test_jvp_refuses_a_complex_tangent_for_a_real_input() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"jvp: v is complex .*inputs is real"):
        hd.jvp(F.sin, x, np.array([1j, 1.0]))
    with pytest.raises(ValueError, match=r"jvp: v\[1\] is complex"):
        hd.jvp(lambda a, b: a * b, (x, x), (np.ones(2), np.array([0.0, 2j])))


def test_jet_refuses_a_complex_coefficient_for_a_real_primal() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"jet: series\[0\]\[1\] is complex"):
        hd.jet(F.sin, (x,), ([np.ones(2), np.array([1j, 0.0])],))


def test_jet_takes_variables_in_series() -> None:
    x = np.array([0.5, 1.0])
    v = np.array([1.0, -2.0])
    _y0, (y1, y2) = hd.jet(F.sin, (x,), ([hd.Variable.from_array(v), np.zeros(2)],))
    np.testing.assert_allclose(y1, np.cos(x) * v, rtol=1e-14)
    np.testing.assert_allclose(y2, -np.sin(x) * v * v, rtol=1e-14)


def test_jet_with_one_list_too_few_shows_the_nesting() -> None:
    x = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match=r"series\[0\] must be a list.*\(\[v\],\)"):
        hd.jet(F.tanh, (x,), [np.ones(2)])
