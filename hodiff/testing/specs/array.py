"""Specs of hodiff/functions/array.py and hodiff/grad_functions/array.py."""

import itertools
from dataclasses import replace

import numpy as np

import hodiff.functions as F
from hodiff.grad_functions.array import gather_add, index_add
from hodiff.testing.spec import Spec, fixed, labels

COND = fixed([[True, False, True], [False, False, True]])
REPEATS = fixed([2, 0, 2, 2])  # indices into an axis of length 3, with repeats


def _gather(x, indices, axis=0, batch_dims=0):
    """Loops over every output element (TensorFlow's definition)."""
    shape = x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis + 1 :]
    y = np.zeros(shape, dtype=x.dtype)
    n_idx = indices.ndim - batch_dims
    for out in itertools.product(*(range(s) for s in shape)):
        d_lead, i_part = out[:axis], out[axis : axis + n_idx]
        d_rest = out[axis + n_idx :]
        y[out] = x[(*d_lead, indices[(*d_lead[:batch_dims], *i_part)], *d_rest)]
    return y


def _gather_add(y, indices, shape, axis=0, batch_dims=0):
    """The loop of _gather with reads turned into additions."""
    x = np.zeros(shape, dtype=y.dtype)
    n_idx = indices.ndim - batch_dims
    for out in itertools.product(*(range(s) for s in y.shape)):
        d_lead, i_part = out[:axis], out[axis : axis + n_idx]
        d_rest = out[axis + n_idx :]
        x[(*d_lead, indices[(*d_lead[:batch_dims], *i_part)], *d_rest)] += y[out]
    return x


def _index_add(y, key, shape):
    """Adds every element of y where a probe of positions says it came from."""
    x = np.zeros(shape, dtype=y.dtype)
    positions = np.arange(int(np.prod(shape))).reshape(shape)[key]
    for p, v in zip(positions.ravel(), y.ravel(), strict=True):
        x[np.unravel_index(p, shape)] += v
    return x


def _one_hot(x, shape):
    # NNabla's definition: negative ids count from the end, ids out of range give zeros
    y = np.zeros(x.shape[:-1] + tuple(shape))
    for idx in itertools.product(*(range(s) for s in x.shape[:-1])):
        ids = [int(i) for i in x[idx]]
        if all(-c <= i < c for i, c in zip(ids, shape, strict=True)):
            y[(*idx, *(i % c for i, c in zip(ids, shape, strict=True)))] = 1.0
    return y


def _pad(x, pad_width, mode="constant", constant_value=0.0):
    pairs = [(pad_width[i], pad_width[i + 1]) for i in range(0, len(pad_width), 2)]
    pairs = [(0, 0)] * (x.ndim - len(pairs)) + pairs
    if mode == "constant":
        return np.pad(x, pairs, mode="constant", constant_values=constant_value)
    return np.pad(x, pairs, mode={"reflect": "reflect", "repeat": "edge"}[mode])


def _slice(x, start, stop, step):
    return x[tuple(slice(a, b, c) for a, b, c in zip(start, stop, step, strict=True))]


SPECS = [
    Spec(F.reshape, ((2, 3),), np.reshape, kwargs={"shape": (3, 1, 2)}, linear=True),
    Spec(F.broadcast, ((3,),), np.broadcast_to, kwargs={"shape": (2, 3)}, linear=True),
    Spec(
        F.broadcast,
        ((2, 1),),
        np.broadcast_to,
        kwargs={"shape": (2, 2, 3)},
        linear=True,
        id="inner",
    ),
    Spec(F.where, (COND, (2, 3), (2, 3)), np.where, linear=True),
    Spec(F.where, (COND, (3,), ()), np.where, linear=True, id="broadcast"),
    Spec(F.less, ((2, 3), (3,)), np.less, order=0),
    Spec(F.less_equal, ((2, 3), (2, 3)), np.less_equal, order=0),
    Spec(F.greater, ((2, 3), (2, 1)), np.greater, order=0),
    Spec(F.greater_equal, ((2, 3), (2, 3)), np.greater_equal, order=0),
    Spec(F.equal, (fixed([1.0, 2.0, 3.0]), fixed([1.0, 0.0, 3.0])), np.equal, order=0),
    Spec(F.transpose, ((2, 3, 4),), np.transpose, kwargs={"axes": (2, 0, 1)}, linear=True),
    Spec(F.transpose, ((2, 3),), lambda x: x.T, linear=True, id="default"),
    Spec(
        F.concatenate,
        ((2, 3), (2, 1), (2, 2)),
        lambda *xs: np.concatenate(xs, axis=-1),
        linear=True,
    ),
    Spec(
        F.concatenate,
        ((2, 3), (1, 3)),
        lambda *xs, axis: np.concatenate(xs, axis=axis),
        kwargs={"axis": 0},
        linear=True,
        id="axis0",
    ),
    Spec(
        F.split,
        ((2, 3),),
        lambda x, axis: tuple(np.moveaxis(x, axis, 0)),
        kwargs={"axis": 1},
        linear=True,
    ),
    Spec(F.split, ((2, 3),), lambda x: tuple(x), linear=True, id="axis0"),
    Spec(
        F.stack,
        ((2, 3), (2, 3)),
        lambda *xs, axis: np.stack(xs, axis=axis),
        kwargs={"axis": 1},
        linear=True,
    ),
    Spec(F.stack, ((3,), (3,), (3,)), lambda *xs: np.stack(xs), linear=True, id="axis0"),
    Spec(
        F.slice,
        ((3, 4),),
        _slice,
        kwargs={"start": (0, 1), "stop": (3, 4), "step": (2, 2)},
        linear=True,
    ),
    Spec(
        F.slice,
        ((3, 4),),
        _slice,
        kwargs={"start": (2, None), "stop": (None, 0), "step": (-1, -2)},
        linear=True,
        id="negative",
    ),
    Spec(F.pad, ((2, 3),), _pad, kwargs={"pad_width": (1, 2), "constant_value": 0.5}, linear=True),
    Spec(F.pad, ((2, 3),), _pad, kwargs={"pad_width": (1, 0, 2, 1)}, linear=True, id="2d"),
    Spec(
        F.pad,
        ((2, 3),),
        _pad,
        kwargs={"pad_width": (1, 1, 2, 2), "mode": "reflect"},
        linear=True,
        id="reflect",
    ),
    Spec(
        F.pad,
        ((2, 3),),
        _pad,
        kwargs={"pad_width": (0, 2, 3, 1), "mode": "repeat"},
        linear=True,
        id="repeat",
    ),
    Spec(F.flip, ((2, 3),), lambda x: x[:, ::-1], linear=True),
    Spec(
        F.flip,
        ((2, 3, 2),),
        lambda x, axes: np.flip(x, axis=axes),
        kwargs={"axes": (0, 2)},
        linear=True,
        id="axes",
    ),
    Spec(F.tile, ((2, 3),), np.tile, kwargs={"reps": (2, 1, 2)}, linear=True),
    Spec(F.tile, ((3,),), np.tile, kwargs={"reps": 2}, linear=True, id="int"),
    Spec(F.gather, ((3, 2), REPEATS), _gather, linear=True),
    Spec(
        F.gather,
        ((2, 3), fixed([[1, 1], [0, 2]])),
        _gather,
        kwargs={"axis": 1},
        linear=True,
        id="axis1",
    ),
    Spec(
        F.gather,
        ((2, 3, 2), fixed([[2, 2, 0], [1, 0, 1]])),
        _gather,
        kwargs={"axis": 1, "batch_dims": 1},
        linear=True,
        id="batch",
    ),
    Spec(
        F.gather,
        ((2, 2, 3), fixed([[2, 2], [1, 0]])),
        _gather,
        kwargs={"axis": 2, "batch_dims": 1},
        linear=True,
        id="batch_apart",
    ),
    Spec(
        F.clip_by_value,
        ((2, 3),),
        lambda x, min, max: np.clip(x, min, max),
        kwargs={"min": -0.5, "max": 0.7},
        kinks=(-0.5, 0.7),
        linear=True,
    ),
    Spec(
        F.clip_by_value,
        ((2, 3), fixed([-1.0, 0.0, -0.5]), fixed([1.0, 0.5, 1.5])),
        np.clip,
        kinks=(-1.0, -0.5, 0.0, 0.5, 1.0, 1.5),
        linear=True,
        id="arrays",
    ),
    Spec(
        F.constant,
        (),
        lambda val, shape: np.full(shape, val),
        kwargs={"val": 1.5, "shape": (2, 3)},
        order=0,
    ),
    Spec(F.one_hot, (labels((4, 1), 3),), _one_hot, kwargs={"shape": (3,)}, order=0),
    Spec(
        F.one_hot,
        (fixed(np.array([[2.0], [0.0], [1.0]])),),  # float ids, as NNabla's default arrays
        lambda x, shape: _one_hot(x.astype(int), shape),
        kwargs={"shape": (3,)},
        order=0,
        float32=False,
        id="float_ids",
    ),
    Spec(
        F.one_hot,
        (fixed([[1, 0], [2, 1], [0, 1]]),),
        _one_hot,
        kwargs={"shape": (3, 2)},
        order=0,
        id="2d",
    ),
    Spec(
        F.one_hot,
        (fixed([[-1, 0], [2, -2], [3, 1], [0, -3], [-4, 0]]),),  # NNabla's wrap; zeros outside
        _one_hot,
        kwargs={"shape": (4, 2)},
        order=0,
        id="negative_and_out_of_range",
    ),
    Spec(
        F.getitem,
        ((3, 4),),
        lambda x, key: x[key],
        kwargs={"key": (slice(None, None, -2), 1)},
        linear=True,
    ),
    Spec(
        F.getitem,
        ((2, 3, 4),),
        lambda x, key: x[key],
        kwargs={"key": (Ellipsis, None, slice(1, 3))},
        linear=True,
        id="ellipsis_none",
    ),
    Spec(
        F.getitem,
        ((3, 4),),
        lambda x, key: x[key],
        kwargs={"key": (np.array([0, 0, 2]), np.array([3, 3, 1]))},
        linear=True,
        id="repeats",
    ),
    Spec(
        F.getitem,
        ((3, 4),),
        lambda x, key: x[key],
        kwargs={"key": (slice(1, None), [1, 1, 0, 1])},
        linear=True,
        id="mixed",
    ),
    Spec(
        F.getitem,
        ((2, 3, 4),),
        lambda x, key: x[key],
        kwargs={"key": (np.array([1, 1]), slice(None), np.array([[0], [3]]))},
        linear=True,
        id="apart",
    ),
    Spec(
        F.getitem,
        ((2, 3),),
        lambda x, key: x[key],
        kwargs={"key": np.array([[True, False, True], [False, True, True]])},
        linear=True,
        id="mask",
    ),
    Spec(
        index_add, ((4,),), _index_add, kwargs={"key": ([2, 0, 2, 2],), "shape": (3,)}, linear=True
    ),
    Spec(
        index_add,
        ((2, 2),),
        _index_add,
        kwargs={"key": (slice(None, None, 2), slice(1, 3)), "shape": (3, 4)},
        linear=True,
        id="basic",
    ),
    Spec(gather_add, ((4, 2), REPEATS), _gather_add, kwargs={"shape": (3, 2)}, linear=True),
    Spec(
        gather_add,
        ((2, 2, 2), fixed([[2, 2], [1, 0]])),
        _gather_add,
        kwargs={"shape": (2, 2, 3), "axis": 2, "batch_dims": 1},
        linear=True,
        id="batch_apart",
    ),
]

# complex rows: the functions that move or select values take complex values as they are
# (where, split and gather, whose rows have masks, indices or several outputs, are checked on
# complex values by tests/test_complex_ops.py)
_MOVE = {
    F.reshape,
    F.broadcast,
    F.transpose,
    F.concatenate,
    F.stack,
    F.slice,
    F.pad,
    F.flip,
    F.tile,
    F.getitem,
}
SPECS += [replace(s, complex=True) for s in SPECS if s.fn in _MOVE]
