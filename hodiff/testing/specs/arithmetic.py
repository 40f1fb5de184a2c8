"""Specs of hodiff/functions/arithmetic.py and hodiff/grad_functions/arithmetic.py."""

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.arithmetic import mul_n, sum_to
from hodiff.testing.spec import Spec, fixed, positive

SPECS = [
    Spec(F.add2, ((2, 3), (2, 3)), np.add, linear=True),
    Spec(F.add2, ((2, 3), (3,)), np.add, linear=True, id="broadcast"),
    Spec(F.add2, ((), (2, 1)), np.add, linear=True, id="0d"),
    Spec(F.sub2, ((2, 3), (1, 3)), np.subtract, linear=True),
    Spec(F.mul2, ((2, 3), (2, 3)), np.multiply),
    Spec(F.mul2, ((4, 1), (3,)), np.multiply, id="broadcast"),
    Spec(F.div2, ((2, 3), positive((2, 3))), np.divide),
    Spec(F.div2, ((3,), positive((2, 1))), np.divide, id="broadcast"),
    Spec(F.pow2, (positive((2, 3)), (2, 3)), np.power),
    Spec(F.pow2, (positive((2, 3)), ()), np.power, id="broadcast"),
    Spec(F.add_scalar, ((2, 3),), lambda x, val: x + val, kwargs={"val": 1.5}, linear=True),
    Spec(F.mul_scalar, ((2, 3),), lambda x, val: x * val, kwargs={"val": -2.5}, linear=True),
    Spec(F.pow_scalar, (positive((2, 3)),), lambda x, val: x**val, kwargs={"val": 2.5}),
    Spec(F.pow_scalar, ((2, 3),), lambda x, val: x**val, kwargs={"val": 2}, id="square"),
    Spec(F.pow_scalar, ((2, 3),), lambda x, val: x**val, kwargs={"val": 3}, id="cube"),
    Spec(F.r_sub_scalar, ((2, 3),), lambda x, val: val - x, kwargs={"val": 1.5}, linear=True),
    Spec(F.r_div_scalar, (positive((2, 3)),), lambda x, val: val / x, kwargs={"val": 1.5}),
    Spec(F.r_pow_scalar, ((2, 3),), lambda x, val: val**x, kwargs={"val": 1.5}),
    Spec(
        F.minimum2,
        ((2, 3), (2, 3)),
        np.minimum,
        linear=True,
        kink_args=(
            fixed([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]]),
            fixed([[0.5, 0.2, 2.0], [-1.0, 0.3, 0.4]]),
        ),
    ),
    Spec(
        F.maximum2,
        ((2, 3), (3,)),
        np.maximum,
        linear=True,
        kink_args=(fixed([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]]), fixed([0.5, 0.3, 2.0])),
    ),
    Spec(
        F.minimum_scalar,
        ((2, 3),),
        lambda x, val: np.minimum(x, val),
        kwargs={"val": 0.3},
        linear=True,
        kinks=(0.3,),
    ),
    Spec(
        F.maximum_scalar,
        ((2, 3),),
        lambda x, val: np.maximum(x, val),
        kwargs={"val": 0.3},
        linear=True,
        kinks=(0.3,),
    ),
    Spec(F.abs, ((2, 3),), np.abs, kinks=(0.0,), linear=True),
    Spec(F.sign, ((2, 3),), np.sign, order=0, kinks=(0.0,)),
    Spec(
        F.sign,
        (fixed(np.array([-2.0, 0.0, 3.0, 0.0])),),
        lambda x, alpha: np.where(x == 0, alpha, np.sign(x)),
        kwargs={"alpha": 0.5},
        order=0,
        id="alpha_at_zero",
    ),
    Spec(F.add_n, ((2, 3), (3,), ()), lambda a, b, c: a + b + c, linear=True),
    Spec(F.add_n, ((2, 3),), lambda a: a, linear=True, id="one"),
    Spec(F.mul_n, ((2, 3), (3,), (2, 1)), lambda a, b, c: a * b * c),
    Spec(F.identity, ((2, 3),), lambda x: x, linear=True),
    Spec(
        mul_n, ((2, 3), (2, 3), (2, 3)), lambda a, b, c, val: val * a * b * c, kwargs={"val": -2.0}
    ),
    Spec(mul_n, ((2, 1), (3,), ()), lambda a, b, c: a * b * c, id="broadcast"),
    Spec(mul_n, ((2, 3), (2, 3)), lambda a, b, val: val * a * b, kwargs={"val": 1.5}, id="two"),
    Spec(mul_n, ((2, 3),), lambda a, val: val * a, kwargs={"val": 0.5}, linear=True, id="one"),
    Spec(
        sum_to,
        ((2, 3, 4),),
        lambda x, shape: x.sum(axis=(0, 2), keepdims=True)[0],
        kwargs={"shape": (3, 1)},
        linear=True,
    ),
]

# Edge rows: powers at zero (found by running another library's tests). x ** 0 is 1 everywhere,
# 0 ** y is 0 for y > 0: every derivative is 0 there, not 0 * inf = NaN or a math domain error.
# The exponent rows hold integer constants so that finite differences stay real at x0 = 0.
SPECS += [
    Spec(
        F.pow_scalar,
        (fixed([0.0, 1.5, -2.0]),),
        lambda x, val: x**val,
        kwargs={"val": 0.0},
        id="zero_exponent",
    ),
    Spec(
        F.r_pow_scalar,
        (positive((2, 3)),),
        lambda x, val: val**x,
        kwargs={"val": 0.0},
        id="zero_base",
    ),
    Spec(
        F.pow2,
        (fixed([0.0, 0.0, 0.0, 1.3, -0.7]), fixed(np.array([0, 1, 2, 0, 3]))),
        np.power,
        float32=False,
        id="x0_at_zero",
    ),
    Spec(
        F.pow2,
        (fixed(np.array([0, 0, 2])), positive((3,))),
        np.power,
        float32=False,
        id="zero_base",
    ),
    Spec(F.pow2, (positive((3,)), fixed([0.0, 0.0, 2.0])), np.power, id="zero_exponent"),
]

# complex rows: inputs x + iy (a drawn callable stays real: a real operand of a complex one)
SPECS += [
    Spec(F.add2, ((2, 3), (3,)), np.add, linear=True, complex=True),
    Spec(F.sub2, ((2, 3), (1, 3)), np.subtract, linear=True, complex=True),
    Spec(F.mul2, ((2, 3), (2, 3)), np.multiply, complex=True),
    Spec(F.mul2, ((2, 3), positive((3,))), np.multiply, id="real", complex=True),
    Spec(F.div2, ((2, 3), (3,)), np.divide, domain=(0.3, 2.0), complex=True),
    Spec(F.pow2, ((2, 3), (2, 3)), np.power, domain=(0.3, 1.5), complex=True),
    Spec(
        F.add_scalar,
        ((2, 3),),
        lambda x, val: x + val,
        kwargs={"val": 1.5},
        linear=True,
        complex=True,
    ),
    Spec(
        F.mul_scalar,
        ((2, 3),),
        lambda x, val: x * val,
        kwargs={"val": -2.5},
        linear=True,
        complex=True,
    ),
    Spec(F.pow_scalar, ((2, 3),), lambda x, val: x**val, kwargs={"val": 3}, complex=True),
    Spec(
        F.pow_scalar,
        ((2, 3),),
        lambda x, val: x**val,
        kwargs={"val": 2.5},
        domain=(0.3, 2.0),
        id="real_power",
        complex=True,
    ),
    Spec(
        F.r_sub_scalar,
        ((2, 3),),
        lambda x, val: val - x,
        kwargs={"val": 1.5},
        linear=True,
        complex=True,
    ),
    Spec(
        F.r_div_scalar,
        ((2, 3),),
        lambda x, val: val / x,
        kwargs={"val": 1.5},
        domain=(0.3, 2.0),
        complex=True,
    ),
    Spec(F.r_pow_scalar, ((2, 3),), lambda x, val: val**x, kwargs={"val": 1.5}, complex=True),
    Spec(F.identity, ((2, 3),), lambda x: x, linear=True, complex=True),
    Spec(F.abs, ((2, 3),), np.abs, complex=True),
]
