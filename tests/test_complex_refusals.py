"""Complex values refused by every function that FUNCTIONS.md ("Complex values") leaves out.

The sets below are written from FUNCTIONS.md's words, not read from the code: the listed
functions take complex values; every other function of the spec table, a composition of
primitives included, raises TypeError naming itself (``F.<name>``) and the dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import all_specs, complex_specs, spec_ids
from hodiff.testing.spec import Spec

#: FUNCTIONS.md, "Complex values": arithmetic, math, reductions, linear algebra, new ones
LISTED = set(
    [
        "add2",
        "sub2",
        "mul2",
        "div2",
        "pow2",
        "add_scalar",
        "mul_scalar",
        "pow_scalar",
        "r_sub_scalar",
        "r_div_scalar",
        "r_pow_scalar",
        "identity",
        "abs",
        "exp",
        "log",
        "log1p",
        "expm1",
        "sqrt",
        "sin",
        "cos",
        "tan",
        "sinh",
        "cosh",
        "tanh",
        "sum",
        "mean",
        "prod",
        "cumsum",
        "cumprod",
        "norm",
        "reshape",
        "transpose",
        "broadcast",
        "concatenate",
        "split",
        "stack",
        "slice",
        "pad",
        "flip",
        "tile",
        "where",
        "gather",
        "constant",
        "affine",
        "batch_matmul",
        "matmul",
        "einsum",
        "batch_inv",
        "batch_det",
        "batch_logdet",
        "solve",
        "trace",
        "outer",
        "tensordot",
        "real",
        "imag",
        "conj",
        "angle",
        "complex",
        "fft",
        "ifft",
        "rfft",
        "irfft",
    ]
)
#: "every function of the arrays line that moves or selects values": the other arrays
#: functions that only move, select or repeat values (and the n-ary add2/mul2)
MOVES = set(
    [
        "broadcast_to",
        "squeeze",
        "expand_dims",
        "moveaxis",
        "swapaxes",
        "repeat",
        "roll",
        "trilu",
        "matrix_diag",
        "matrix_diag_part",
        "add_n",
        "mul_n",
    ]
)
#: the refusals that must be there whatever else changes (API.md: ordering functions included)
MUST_REFUSE = {"maximum2", "minimum2", "max", "min", "sort", "relu", "clip_by_value", "var"}

_WITH_COMPLEX_ROWS = {s.fn for s in complex_specs()}


def _public(s: Spec) -> bool:
    name = getattr(s.fn, "__name__", "")
    return getattr(F, name, None) is s.fn and s.fn not in _WITH_COMPLEX_ROWS


def _complex_inputs(s: Spec) -> list[np.ndarray]:
    """The row's inputs with every float one ``a`` made complex as ``a (1 + i/2)``
    (invertible and SPD matrices stay invertible)."""
    return [a * (1 + 0.5j) if a.dtype.kind == "f" else a for a in s.sample()]


def _rows() -> list[Spec]:
    seen: set[Any] = set()
    rows = []
    for s in all_specs():
        if not _public(s) or s.fn in seen:
            continue
        if not any(a.dtype.kind == "c" for a in _complex_inputs(s)):
            continue  # no float input (constants, random draws, labels only)
        seen.add(s.fn)
        rows.append(s)
    return rows


ROWS = _rows()
REFUSING = [s for s in ROWS if s.fn.__name__ not in LISTED | MOVES]
TAKING = [s for s in ROWS if s.fn.__name__ in LISTED | MOVES]


def test_the_table_covers_both_kinds() -> None:
    names = {s.fn.__name__ for s in REFUSING}
    assert MUST_REFUSE - {"maximum2", "minimum2", "max", "relu"} <= names
    assert len(REFUSING) > 80
    assert {"where", "gather", "squeeze", "matrix_diag"} <= {s.fn.__name__ for s in TAKING}


@pytest.mark.parametrize("s", REFUSING, ids=spec_ids(REFUSING))
def test_a_function_left_out_refuses_complex_values_naming_itself(s: Spec) -> None:
    name = s.fn.__name__
    zs = [hd.Variable.from_array(z) for z in _complex_inputs(s)]
    with pytest.raises(TypeError) as e:
        s.fn(*zs, **s.kwargs)
    msg = str(e.value)
    assert f"F.{name}:" in msg, msg
    assert "complex128" in msg, msg


@pytest.mark.parametrize("s", TAKING, ids=spec_ids(TAKING))
def test_a_listed_function_takes_complex_values(s: Spec) -> None:
    zs = _complex_inputs(s)
    y = s.fn(*[hd.Variable.from_array(z) for z in zs], **s.kwargs)
    outs = list(y) if isinstance(y, tuple | list) else [y]
    assert any(o.dtype.kind == "c" for o in outs)
    if s.ref is not None:  # the numpy reference on the same complex arrays
        want = s.ref(*zs, **s.kwargs)
        for o, w in zip(outs, want if isinstance(want, tuple | list) else [want], strict=True):
            np.testing.assert_allclose(o.d, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MUST_REFUSE))
def test_ordering_functions_refuse_naming_themselves(name: str) -> None:
    z = np.array([1 + 1j, 2 - 1j])
    f = getattr(F, name)
    with pytest.raises(TypeError, match=rf"^F\.{name}: .*complex128"):
        f(z, z) if name.endswith("2") else f(z, 0.0, 1.0) if name == "clip_by_value" else f(z)


def test_a_complex_argument_in_a_list_or_a_keyword_is_named() -> None:
    x = np.ones((2, 3))
    z = x * (1 + 1j)
    with pytest.raises(TypeError, match=r"^F\.leaky_relu: x has dtype complex128"):
        F.leaky_relu(x=z)
    with pytest.raises(TypeError, match=r"^F\.squared_error: x1 has dtype complex128"):
        F.squared_error(x, z)
    with pytest.raises(TypeError, match=r"^F\.prelu: .* has dtype complex64"):
        F.prelu(x, np.ones(3, np.complex64))


def test_a_real_call_is_unchanged() -> None:
    x = np.array([-1.0, 2.0])
    np.testing.assert_array_equal(F.leaky_relu(x, alpha=0.5).d, [-0.5, 2.0])
    np.testing.assert_allclose(F.var(x).d, np.var(x))
