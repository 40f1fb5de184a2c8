"""Specs of hodiff/functions/statistics.py and hodiff/grad_functions/selection.py.

The order functions are sampled with well-separated values (a shuffled grid plus
small noise), so the finite differences never reorder them.
"""

from collections.abc import Callable

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.selection import (
    gather_nd,
    scatter_along_axis,
    scatter_nd_add,
    take_along_axis,
)
from hodiff.testing.spec import Spec, fixed


def distinct(
    shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0, magnitudes: bool = False
) -> Callable[[np.random.Generator], np.ndarray]:
    """Values at least half a grid step apart (in magnitude if ``magnitudes``)."""
    n = int(np.prod(shape))

    def draw(rng: np.random.Generator) -> np.ndarray:
        grid = np.linspace(0.3, hi, n) if magnitudes else np.linspace(lo, hi, n)
        gap = (grid[-1] - grid[0]) / (4 * (n - 1))
        grid = grid + rng.uniform(-gap, gap, size=n)
        if magnitudes:
            grid = grid * rng.choice([-1.0, 1.0], size=n)
        return rng.permutation(grid).reshape(shape)

    return draw


def _top_k_ref(
    x: np.ndarray, k: int, abs: bool = False, reduce: bool = True, base_axis: int = 1
) -> np.ndarray:
    flat = x.reshape((*x.shape[:base_axis], -1))
    out = np.zeros_like(flat)
    vals = np.zeros((*flat.shape[:-1], k))
    for i in np.ndindex(*flat.shape[:-1]):
        row = flat[i]
        key = np.abs(row) if abs else row
        order = [j for _, j in sorted((-key[j], j) for j in range(row.size))][:k]
        vals[i] = row[order]
        out[i][order] = row[order]
    return vals if reduce else out.reshape(x.shape)


def _scatter_ref(y: np.ndarray, idx: np.ndarray, axis: int, shape: tuple[int, ...]):
    out = np.zeros(shape)
    for i in np.ndindex(*idx.shape):
        j = list(i)
        j[axis] = idx[i]
        out[tuple(j)] += y[i]
    return out


_IDX = fixed(np.array([[2, 0, 2], [1, 1, 0]]))

# rows sorted, with repeats (so that the side matters)
_SORTED = fixed(np.array([[[0.0, 2.0, 2.0, 5.0], [-1.0, 0.5, 3.0, 3.0]]] * 2))

SPECS = [
    Spec(F.var, ((3, 4),), np.var),
    Spec(
        F.var,
        ((3, 4),),
        lambda x, axis, ddof: np.var(x, axis=axis, ddof=ddof),
        kwargs={"axis": 1, "ddof": 1},
        id="axis_ddof",
    ),
    Spec(
        F.var,
        ((2, 3, 2),),
        lambda x, axis, keepdims: np.var(x, axis, keepdims=keepdims),
        kwargs={"axis": (0, 2), "keepdims": True},
        id="keepdims",
    ),
    Spec(F.std, ((3, 4),), np.std),
    Spec(
        F.std,
        ((3, 4),),
        lambda x, axis, ddof: np.std(x, axis=axis, ddof=ddof),
        kwargs={"axis": 0, "ddof": 1},
        id="axis_ddof",
    ),
    Spec(F.std, ((1,),), np.std, id="one_element"),
    Spec(
        F.std,
        ((3, 1),),
        lambda x, axis: np.std(x, axis=axis),
        kwargs={"axis": 1},
        id="one_element_per_row",
    ),
    Spec(F.diff, ((3, 5),), np.diff, linear=True),
    Spec(
        F.diff,
        ((4, 3),),
        lambda x, n, axis: np.diff(x, n, axis),
        kwargs={"n": 2, "axis": 0},
        linear=True,
        id="n2_axis0",
    ),
    Spec(F.argmax, (distinct((3, 4)),), np.argmax, order=0),
    Spec(
        F.argmax,
        (distinct((3, 4)),),
        lambda x, axis, keepdims: np.argmax(x, axis, keepdims=keepdims),
        kwargs={"axis": 1, "keepdims": True},
        order=0,
        id="axis",
    ),
    Spec(
        F.argmin,
        (distinct((3, 4)),),
        lambda x, axis: np.argmin(x, axis),
        kwargs={"axis": 0},
        order=0,
    ),
    Spec(F.sort, (distinct((3, 4)),), np.sort, linear=True),
    Spec(
        F.sort,
        (distinct((3, 4)),),
        lambda x, axis, reverse: -np.sort(-x, axis),
        kwargs={"axis": 0, "reverse": True},
        linear=True,
        id="reverse_axis0",
    ),
    Spec(
        F.sort,
        (distinct((3, 4)),),
        lambda x, only_index: np.argsort(x, -1),
        kwargs={"only_index": True},
        order=0,
        id="only_index",
    ),
    Spec(
        F.searchsorted,
        (_SORTED, fixed(np.array([[[2.0, -1.0, 9.0], [3.0, 3.0, 0.5]]] * 2))),
        lambda s, v, right=False: np.stack(
            [
                [
                    np.searchsorted(s[i, j], v[i, j], side="right" if right else "left")
                    for j in range(s.shape[1])
                ]
                for i in range(s.shape[0])
            ]
        ),
        kwargs={"right": True},
        order=0,
    ),
    Spec(
        F.searchsorted,
        (_SORTED, fixed(np.array([[[2.0, -1.0, 9.0], [3.0, 3.0, 0.5]]] * 2))),
        lambda s, v: np.stack(
            [[np.searchsorted(s[i, j], v[i, j]) for j in range(s.shape[1])] for i in range(2)]
        ),
        order=0,
        id="left",
    ),
    Spec(F.top_k_data, (distinct((2, 5)),), _top_k_ref, kwargs={"k": 3}, linear=True),
    Spec(
        F.top_k_data,
        (distinct((2, 2, 3), magnitudes=True),),
        _top_k_ref,
        kwargs={"k": 2, "abs": True, "reduce": False},
        linear=True,
        id="abs_noreduce",
    ),
    Spec(
        F.top_k_data,
        (distinct((3, 4)),),
        lambda x, k, largest: np.sort(x, axis=1)[:, :k],
        kwargs={"k": 2, "largest": False},
        linear=True,
        id="smallest",
    ),
    Spec(
        take_along_axis,
        ((3, 3), _IDX),
        lambda x, i, axis: x[:2][np.arange(2)[:, None], i],
        kwargs={"axis": 1},
        linear=True,
    ),
    Spec(
        scatter_along_axis,
        ((2, 3), _IDX),
        _scatter_ref,
        kwargs={"axis": 1, "shape": (3, 4)},
        linear=True,
    ),
    Spec(
        gather_nd,
        ((3, 4), fixed(np.array([[2, 0, 2], [1, 3, 1]]))),
        lambda x, i: x[tuple(i)],
        linear=True,
    ),
    Spec(
        gather_nd,
        ((3, 2, 2), fixed(np.array([[2, 0, 2]]))),
        lambda x, i: x[tuple(i)],
        linear=True,
        id="slices",
    ),
    Spec(
        scatter_nd_add,
        ((3,), fixed(np.array([[2, 0, 2], [1, 3, 1]]))),
        lambda y, i, shape: _scatter_nd_ref(y, i, shape),
        kwargs={"shape": (3, 4)},
        linear=True,
    ),
]


def _scatter_nd_ref(y: np.ndarray, idx: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape)
    for j in range(idx.shape[1]):
        out[tuple(idx[:, j])] += y[j]
    return out
