"""Complex values: the spec table's complex rows, the convention, the refusal check.

The convention (API.md, "Complex numbers"): for a real-valued ``f`` of ``z = x + iy``,
``hd.grad`` gives ``df/dx - i df/dy``. Every expected value here comes from finite
differences along the real and imaginary directions, or from a closed form.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.function import REGISTRY
from hodiff.testing import complex_specs, spec_ids
from hodiff.testing.harness import call, outputs_of
from hodiff.testing.spec import Spec

SPECS = complex_specs()
IDS = spec_ids(SPECS)


def _outputs(y: object) -> list[hd.Variable]:
    return list(y) if isinstance(y, tuple | list) else [y]  # type: ignore[list-item]


def _loss_of(spec: Spec, xs: list[np.ndarray]) -> tuple[list[np.ndarray], object]:
    """Random real weights of Re and Im of every output: ``L = sum w1 Re y + w2 Im y``."""
    y = _outputs(spec.fn(*xs, **spec.kwargs))
    rng = np.random.default_rng(7)
    w = [(rng.standard_normal(o.shape), rng.standard_normal(o.shape)) for o in y]

    def loss(*vs: object) -> hd.Variable:
        total = None
        for o, (w1, w2) in zip(_outputs(spec.fn(*vs, **spec.kwargs)), w, strict=True):
            t = F.sum(F.real(o) * w1 + F.imag(o) * w2)
            total = t if total is None else total + t
        return total  # type: ignore[return-value]

    return [a for pair in w for a in pair], loss


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_forward_matches_reference(spec: Spec) -> None:
    xs = spec.sample()
    ys = _outputs(spec.fn(*xs, **spec.kwargs))
    assert any(a.dtype.kind == "c" for a in [*xs, *(y.d for y in ys)])
    np.testing.assert_allclose(ys[0].d, spec.ref(*xs, **spec.kwargs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_gradient_is_dfdx_minus_i_dfdy(spec: Spec) -> None:
    """hd.grad and .backward() against central differences along x and along iy."""
    xs = spec.sample()
    _, loss = _loss_of(spec, xs)
    vs = [hd.Variable.from_array(x, need_grad=True) for x in xs]
    grads = hd.grad(loss(*vs), vs)
    loss(*vs).backward()
    h = 1e-6
    for k, x in enumerate(xs):
        want = np.zeros(x.shape, dtype=x.dtype)
        for idx in np.ndindex(x.shape):
            for step, sign in ((h, 1.0), (1j * h, -1j)):
                if step == 1j * h and x.dtype.kind != "c":
                    continue
                up, down = [a.copy() for a in xs], [a.copy() for a in xs]
                up[k][idx] += step
                down[k][idx] -= step
                d = (float(loss(*up).d) - float(loss(*down).d)) / (2 * h)
                want[idx] += sign * d
        assert grads[k].dtype == x.dtype
        np.testing.assert_allclose(grads[k].d, want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(vs[k].g, grads[k].d, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_order_through_the_real_and_imaginary_parts(spec: Spec) -> None:
    """``f(complex(a, b))`` as a real function of the parts, by hd.gradcheck at orders 1-3."""
    xs = spec.sample()
    _, loss = _loss_of(spec, xs)
    parts = []
    for x in xs:
        parts += [x.real.copy(), x.imag.copy()] if x.dtype.kind == "c" else [x]

    def real_loss(*ps: hd.Variable) -> hd.Variable:
        vs, i = [], 0
        for x in xs:
            if x.dtype.kind == "c":
                vs.append(F.complex(ps[i], ps[i + 1]))
                i += 2
            else:
                vs.append(ps[i])
                i += 1
        y = loss(*vs)
        return y * y * y if spec.linear else y  # the cube: orders >= 2 of a linear map

    assert hd.gradcheck(real_loss, parts, order=min(spec.order, 3))


def test_abs_squared_at_3_4j_is_6_minus_8j() -> None:
    z = hd.Variable.from_array(np.array(3 + 4j), need_grad=True)
    (g,) = hd.grad(F.abs(z) ** 2, [z])
    assert complex(g.d) == 6 - 8j
    z2 = hd.Variable.from_array(np.array(3 + 4j), need_grad=True)
    (F.real(z2) ** 2 + F.imag(z2) ** 2).backward()
    assert complex(z2.g) == 6 - 8j


def test_abs_gradient_is_zero_at_zero() -> None:
    z = hd.Variable.from_array(np.array([0j, 3 + 4j]), need_grad=True)
    F.sum(F.abs(z)).backward()
    np.testing.assert_allclose(z.g, [0, (3 - 4j) / 5])


def test_holomorphic_gradient_is_the_derivative() -> None:
    z0 = np.array([0.3 + 0.7j, -1.1 + 0.2j])
    for f, df in ((F.sin, np.cos), (F.exp, np.exp), (F.log, lambda z: 1 / z)):
        z = hd.Variable.from_array(z0, need_grad=True)
        (g,) = hd.grad(f(z), [z], grad_outputs=np.ones(2, complex))
        np.testing.assert_allclose(g.d, df(z0), rtol=1e-12)


def test_real_input_gets_a_real_gradient() -> None:
    x = hd.Variable.from_array(np.array([2.0, -1.0]), need_grad=True)
    y = F.sum(F.abs(x * (1 + 2j)) ** 2)  # 5 x^2
    y.backward()
    assert x.g.dtype == np.float64
    np.testing.assert_allclose(x.g, 10 * np.array([2.0, -1.0]))
    (g,) = hd.grad(y, [x])
    assert g.dtype == np.float64
    np.testing.assert_allclose(g.d, x.g)


def test_complex64_pairs_with_float32() -> None:
    x = hd.Variable.from_array(np.ones(2, np.float32))
    assert (x * 1j).dtype == np.complex64
    assert F.complex(x, x).dtype == np.complex64
    assert F.real(F.complex(x, x)).dtype == np.float32
    assert F.abs(F.complex(x, x)).dtype == np.float32


def test_backward_of_a_complex_output_needs_a_cotangent() -> None:
    z = hd.Variable.from_array(np.array([1 + 1j]), need_grad=True)
    with pytest.raises(TypeError, match="implicitly created only for real"):
        F.sin(z).backward()
    F.sin(z).backward(np.array([1.0 + 0j]))
    np.testing.assert_allclose(z.g, np.cos(1 + 1j))


def _complex_input_refused(f: object, x: np.ndarray) -> str | None:
    try:
        f(x)  # type: ignore[operator]
    except TypeError as e:
        return str(e)
    return None


def test_a_real_only_function_refuses_complex_values_naming_itself() -> None:
    z = np.array([1 + 1j, 2 - 1j])
    for f, name in ((F.relu, "F.relu"), (F.maximum_scalar, "F.maximum_scalar")):
        msg = _complex_input_refused(f, z)
        assert msg is not None
        assert name in msg
        assert "complex128" in msg
    with pytest.raises(TypeError, match="complex128"):
        F.atan2(z, np.ones(2))


def test_every_primitive_declares_complex_values_or_refuses_them() -> None:
    kinds = {"", "holomorphic", "own"}
    for cls, name in REGISTRY.items():
        assert cls.complex_values in kinds, (name, cls.complex_values)
    declared = {REGISTRY[c] for c in REGISTRY if c.complex_values}
    assert {"add2", "mul2", "exp", "sum", "real", "complex", "angle", "complex_abs"} <= declared
    refused = 0
    for cls in REGISTRY:
        if cls.complex_values:
            continue
        try:
            f = cls()
        except TypeError:
            continue  # needs static arguments: refused through the same check (below)
        msg = _complex_input_refused(f, np.array([1 + 1j, 2 - 1j]))
        if msg is not None and f"F.{f.name}:" in msg:
            refused += 1
    assert refused > 20


def test_static_and_vmap_calls_are_checked_too() -> None:
    z = np.array([1 + 1j, 2 - 1j])
    with hd.auto_forward(False):
        v = hd.Variable((2,), dtype=np.complex128)
        with pytest.raises(TypeError, match=r"F\.relu\b"):
            F.relu(v)
    with pytest.raises(TypeError, match=r"F\.relu\b"):
        hd.vmap(F.relu)(np.stack([z, z]))
    np.testing.assert_allclose(hd.vmap(F.sin)(np.stack([z, z])).d, np.sin(np.stack([z, z])))


def test_a_numpy_complex_scalar_operand_keeps_its_imaginary_part() -> None:
    # np.complex128 is a subclass of Python's complex: it must not be cast to the real dtype
    x = hd.Variable.from_array(np.array([1.0, 2.0]))
    z = hd.Variable.from_array(np.array([1.0 + 1.0j, 2.0]))
    c = np.complex128(1 + 2j)
    np.testing.assert_array_equal((x * c).d, np.array([1.0, 2.0]) * (1 + 2j))
    np.testing.assert_array_equal((z * c).d, np.array([1.0 + 1.0j, 2.0]) * (1 + 2j))
    np.testing.assert_array_equal((c + x).d, (1 + 2j) + np.array([1.0, 2.0]))


def test_a_primitive_is_named_as_its_public_function() -> None:
    """A refusal names the public F function: a primitive's ``name`` is that function's
    name wherever the two are the same words (``relu``, not the class's ``re_lu``).
    """
    from hodiff.testing import all_specs

    wrong = set()
    for s in all_specs() + complex_specs():
        _, y = call(s, s.sample())
        for o in outputs_of(y):
            p = o.parent
            if p is None:
                continue
            public = s.fn.__name__
            if p.name != public and p.name.replace("_", "") == public.replace("_", ""):
                wrong.add((type(p).__name__, p.name, public))
    assert not wrong
    for f, name in ((F.mod, "F.mod:"), (F.fmod, "F.fmod:")):
        msg = _complex_input_refused(lambda z, f=f: f(z, z), np.array([1 + 1j]))
        assert msg is not None
        assert msg.startswith(name)


@pytest.mark.parametrize("fn", [F.abs, F.angle])
def test_forward_and_reverse_mode_agree_at_zero(fn: Any) -> None:
    # |z| and angle(z) are not differentiable at 0; both modes take the derivative 0 there
    # (JAX's choice for the reverse mode), and away from 0 the closed forms
    # d|z| = (a da + b db) / |z| and d angle = (a db - b da) / |z|^2 at z = a + ib.
    z = np.array([0j, 3 + 4j])
    v = np.array([1 + 1j, 1 + 0j])
    expected = {F.abs: np.array([0.0, 0.6]), F.angle: np.array([0.0, -4.0 / 25.0])}[fn]
    _, jv = hd.jvp(fn, (z,), (v,))
    np.testing.assert_allclose(jv, expected, atol=1e-15)
    zv = hd.Variable.from_array(z, need_grad=True)
    (g,) = hd.grad(F.sum(fn(zv)), [zv])
    np.testing.assert_allclose(np.real(g.d * v), expected, atol=1e-15)  # <grad, v>, real part
