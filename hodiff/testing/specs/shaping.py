"""Specs of hodiff/functions/shaping.py (all linear but the constants and casts)."""

import numpy as np

import hodiff.functions as F
from hodiff.testing.spec import Spec, fixed


def _scatter_add_ref(x0: np.ndarray, idx: np.ndarray, x1: np.ndarray, axis: int = 0) -> np.ndarray:
    out = x0.copy()
    for i in np.ndindex(*idx.shape):
        j = list(i)
        j[axis] = idx[i]
        out[tuple(j)] += x1[i]
    return out


SPECS = [
    # broadcast_to(x, y, axis): x gives only the shape (no gradient reaches it)
    Spec(
        F.broadcast_to,
        (fixed(np.zeros((2, 3, 4))), (3,)),
        lambda x, y, axis: np.broadcast_to(y[None, :, None], x.shape),
        kwargs={"axis": 1},
        linear=True,
    ),
    Spec(
        F.broadcast_to,
        (fixed(np.zeros((2, 3, 4))), (3, 4)),
        lambda x, y: np.broadcast_to(y, x.shape),
        linear=True,
        id="trailing",
    ),
    Spec(F.squeeze, ((1, 3, 1),), np.squeeze, linear=True),
    Spec(
        F.squeeze,
        ((1, 3, 1),),
        lambda x, axis: np.squeeze(x, axis),
        kwargs={"axis": -1},
        linear=True,
        id="axis",
    ),
    Spec(
        F.expand_dims,
        ((2, 3),),
        lambda x, axis: np.expand_dims(x, axis),
        kwargs={"axis": (0, 2)},
        linear=True,
    ),
    Spec(
        F.moveaxis,
        ((2, 3, 4),),
        lambda x, source, destination: np.moveaxis(x, source, destination),
        kwargs={"source": 0, "destination": -1},
        linear=True,
    ),
    Spec(
        F.swapaxes,
        ((2, 3, 4),),
        lambda x, axis1, axis2: np.swapaxes(x, axis1, axis2),
        kwargs={"axis1": 0, "axis2": 2},
        linear=True,
    ),
    Spec(
        F.repeat,
        ((2, 3),),
        lambda x, repeats, axis: np.repeat(x, repeats, axis),
        kwargs={"repeats": 2, "axis": 1},
        linear=True,
    ),
    Spec(
        F.repeat,
        ((2, 3),),
        lambda x, repeats, axis: np.repeat(x, repeats, axis),
        kwargs={"repeats": [1, 0, 3], "axis": 1},
        linear=True,
        id="list",
    ),
    Spec(
        F.repeat,
        ((2, 2),),
        lambda x, repeats: np.repeat(x, repeats),
        kwargs={"repeats": 2},
        linear=True,
        id="flat",
    ),
    Spec(
        F.roll,
        ((2, 3),),
        lambda x, shifts, axes: np.roll(x, shifts, axes),
        kwargs={"shifts": (1, -1), "axes": (0, 1)},
        linear=True,
    ),
    Spec(
        F.roll,
        ((2, 3),),
        lambda x, shifts: np.roll(x, shifts),
        kwargs={"shifts": 4},
        linear=True,
        id="flat",
    ),
    Spec(F.trilu, ((2, 3, 4),), np.triu, linear=True),
    Spec(
        F.trilu,
        ((3, 3),),
        lambda x, k, upper: np.tril(x, k),
        kwargs={"k": -1, "upper": False},
        linear=True,
        id="lower",
    ),
    Spec(F.matrix_diag, ((2, 3),), lambda x: np.stack([np.diag(r) for r in x]), linear=True),
    Spec(F.matrix_diag_part, ((2, 3, 3),), lambda x: np.diagonal(x, 0, -2, -1), linear=True),
    Spec(
        F.gather_nd, ((2, 5), fixed(np.array([[1, 1, 0]]))), lambda x, i: x[tuple(i)], linear=True
    ),
    Spec(
        F.scatter_add,
        ((3, 4), fixed(np.array([[2, 0, 2], [1, 1, 0]])), (2, 3)),
        _scatter_add_ref,
        linear=True,
    ),
    Spec(
        F.scatter_add,
        ((3, 4), fixed(np.array([[3, 0], [1, 3]])), (2, 3)),
        _scatter_add_ref,
        kwargs={"axis": 1},
        linear=True,
        id="axis1_smaller",
    ),
    Spec(
        F.eye,
        (),
        lambda n, dtype: np.eye(n),
        kwargs={"n": 3, "dtype": np.float64},
        order=0,
        float32=False,
    ),
    Spec(
        F.eye,
        (),
        lambda n, m, k: np.eye(n, m, k),
        kwargs={"n": 2, "m": 4, "k": 1},
        order=0,
        id="rect",
    ),
    Spec(
        F.arange,
        (),
        lambda start, stop, step: np.arange(start, stop, step),
        kwargs={"start": 1.0, "stop": -1.0, "step": -0.5},
        order=0,
        id="negative_step",
    ),
    Spec(
        F.arange,
        (),
        lambda start, stop, step: np.arange(start, stop, step),
        kwargs={"start": 1.0, "stop": 2.0, "step": 0.25},
        order=0,
    ),
    Spec(
        F.astype,
        ((2, 3),),
        lambda x, dtype: x.astype(dtype),
        kwargs={"dtype": np.float64},
        linear=True,
        float32=False,
    ),
    Spec(
        F.astype,
        ((2, 3),),
        lambda x, dtype: x.astype(dtype),
        kwargs={"dtype": np.int64},
        order=0,
        id="int",
    ),
]
