"""Static graphs re-run with new input shapes (``Variable.reset_shape``, NNabla's).

Every spec row is built as a static graph for its sampled inputs, then its leaves are
given new shapes (a grown leading or last axis) and the graph is run again: the values
and the gradients of ``.backward()`` must equal those of a graph built for the new
inputs, or the forward must raise ``ShapeResetError`` before touching anything. No third
outcome (a wrong number, another error) is allowed.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.parametric as PF
import hodiff.solvers as S
from hodiff.engine.api import topological_order
from hodiff.engine.function import REGISTRY, Function
from hodiff.engine.tracing import traced
from hodiff.engine.variable import ShapeResetError, Variable
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.harness import is_float, outputs_of

SPECS = all_specs()
IDS = spec_ids(SPECS)


def _grown(xs: list[np.ndarray], axis: int, which: frozenset[int]) -> list[np.ndarray]:
    """The inputs with one more entry along ``axis``: the mean of the first and the last
    (in the domain of the row's interval and convex domains, and unlike both), or a copy
    of the first for integer inputs (labels, indices)."""
    out = []
    for i, a in enumerate(xs):
        if i in which:
            first = a[:1] if axis == 0 else a[..., :1]
            if a.dtype.kind == "f":
                first = (first + (a[-1:] if axis == 0 else a[..., -1:])) / 2
            a = np.concatenate([a, first], axis=axis)
        out.append(a)
    return out


def _changes(xs: list[np.ndarray]) -> list[tuple[int, frozenset[int]]]:
    """Which inputs grow along which axis: all those of input 0's size there, or input 0."""
    out: list[tuple[int, frozenset[int]]] = []
    if not xs or not xs[0].ndim:
        return out
    for axis in (0, -1):
        n = xs[0].shape[axis]
        same = frozenset(i for i, a in enumerate(xs) if a.ndim and a.shape[axis] == n)
        for which in (same, frozenset({0})):
            if (axis, which) not in out:
                out.append((axis, which))
    return out


def _values(spec, arrays):
    return [
        o.d.copy() for o in outputs_of(spec.fn(*map(Variable.from_array, arrays), **spec.kwargs))
    ]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=1e-13, equal_nan=True)


def _follow(spec, xs, axis, which, static: bool = True) -> str:
    """'ok', 'refuses', or 'n/a' (the new inputs do not fit the function, or it draws).

    ``static``: the graph is built define-then-run (its functions keep their calls and are
    made again); otherwise define-by-run (its nodes follow by their own rules).
    """
    new = _grown(xs, axis, which)
    try:
        fresh = _values(spec, new)
    except Exception:
        return "n/a"  # the function itself does not take these shapes
    with hd.auto_forward(not static):
        vs = [Variable.from_array(a, need_grad=is_float(a)) for a in xs]
        ys = outputs_of(spec.fn(*vs, **spec.kwargs))
    for y in ys:
        y.forward()
    first = [y.d.copy() for y in ys]
    for y in ys:
        y.forward()
    if not all(_same(a, y.d) for a, y in zip(first, ys, strict=True)):
        return "n/a"  # a random function: every static forward draws again
    for i in which:
        vs[i].reset_shape(new[i].shape, force=True)
        vs[i].d = new[i]
    refused = False
    for y in ys:
        graph = [*topological_order([y])]
        shapes = [(x, x.shape) for f in graph for x in (*f.inputs, y) if x.parent is not None]
        try:
            y.forward()
        except ShapeResetError:
            # refused before anything was touched: its graph still has the shapes it had
            assert all(x.shape == shape for x, shape in shapes), spec.name
            refused = True
    if refused:
        return "refuses"
    for a, y in zip(fresh, ys, strict=True):
        assert _same(a, y.d), (spec.name, axis, sorted(which), a.shape, y.shape)
    if spec.order > 0 and ys[0].d.dtype.kind == "f":
        seed = np.cos(np.arange(ys[0].size)).reshape(ys[0].shape)
        ws = [Variable.from_array(a, need_grad=is_float(a)) for a in new]
        with np.errstate(all="ignore"):  # a gradient may be infinite at the grown point
            try:
                outputs_of(spec.fn(*ws, **spec.kwargs))[0].backward(seed)
            except (RuntimeError, NotImplementedError):
                return "ok"  # no gradient to compare (no leaf reached, not implemented)
            ys[0].backward(seed)
        for v, w in zip(vs, ws, strict=True):
            if v.need_grad:
                assert _same(v.g, w.g), (spec.name, "gradient", axis, sorted(which))
    return "ok"


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_row_follows_a_new_shape_or_refuses(spec, static):
    xs = spec.sample(0)
    for axis, which in _changes(xs):
        _follow(spec, xs, axis, which, static)


def test_most_rows_follow_a_new_batch_size():
    # the point of reset_shape: a new batch size (the leading axis of every input of that
    # size) on one static graph. Count the rows that follow it rather than refuse.
    results = []
    for spec in SPECS:
        xs = spec.sample(0)
        ch = _changes(xs)
        if ch:
            results.append(_follow(spec, xs, *ch[0]))
    follow, refuse = results.count("ok"), results.count("refuses")
    assert follow > 4 * refuse, (follow, refuse)


# ---------------------------------------------------------------- a static network, trained
def _mlp(x):
    with hd.parameter_scope("mlp"):
        h = F.tanh(PF.affine(x, 8, name="l1"))
        h = F.relu(PF.convolution(F.reshape(h, (-1, 2, 4)), 3, (3,), pad=(1,), name="c"))
        h = F.max_pooling(h, (2,))
        h = PF.batch_normalization(h, name="bn")
        return PF.affine(h, 3, name="out")


@pytest.fixture
def fresh_scope():
    hd.clear_parameters()
    yield
    hd.clear_parameters()


def test_a_static_network_trains_with_new_batch_sizes(fresh_scope):
    # NNabla's way: one static graph, a new batch size per step through reset_shape; the
    # same steps on graphs built for each batch (dynamic mode) give the same parameters
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((n, 5)), rng.integers(0, 3, (n, 1))) for n in (4, 7, 2, 7)]

    def run(static: bool) -> dict[str, np.ndarray]:
        hd.clear_parameters()
        hd.seed(0)
        x0, t0 = batches[0]
        with hd.auto_forward(not static):
            x = Variable.from_array(x0)
            t = Variable.from_array(t0)
            loss = F.mean(F.softmax_cross_entropy(_mlp(x), t))
        solver = S.Adam(lr=0.01)
        solver.set_parameters(hd.get_parameters())
        for xb, tb in batches:
            if static:
                x.reset_shape(xb.shape, force=True)
                t.reset_shape(tb.shape, force=True)
                x.d, t.d = xb, tb
                loss.forward()
            else:
                loss = F.mean(F.softmax_cross_entropy(_mlp(Variable.from_array(xb)), tb))
            solver.zero_grad()
            loss.backward()
            solver.update()
        return {k: v.d.copy() for k, v in hd.get_parameters().items()}

    static, dynamic = run(True), run(False)
    assert static.keys() == dynamic.keys()
    for k in static:
        np.testing.assert_allclose(static[k], dynamic[k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_the_record_of_shape_changes_is_bounded_in_a_long_loop():
    # a static graph run for 300 batch sizes in turn: the leaf and every value that
    # followed remember the last SHAPE_HISTORY changes only, and every run is right
    from hodiff.engine.variable import SHAPE_HISTORY

    with hd.auto_forward(False):
        x = Variable((2, 3), need_grad=True, dtype=np.float64)
        h = F.tanh(x * 2.0)
        y = F.sum(h * h)
    for k in range(300):
        n = 1 + k % 7
        x.reset_shape((n, 3), force=True)
        x.d = np.linspace(-1.0, 1.0, 3 * n).reshape(n, 3) * (1 + k / 300)
        y.forward()
        x.zero_grad()
        y.backward()
        t = np.tanh(2 * x.d)
        assert y.d == pytest.approx(np.sum(t * t), rel=1e-13)
        np.testing.assert_allclose(x.g, 4 * t * (1 - t * t), rtol=1e-12)
    from hodiff.engine.follow import shape_changes  # the record is the follow module's

    for v in (x, h):
        assert SHAPE_HISTORY <= len(shape_changes(v)) <= SHAPE_HISTORY + 1
        assert shape_changes(v)[0][1] is None  # the older changes: dropped


def test_a_graph_run_between_changes_back_and_forth_keeps_following():
    # x alternates between two batch sizes, each with its own static graph; g2 was made
    # for x's first shape, which x has again whenever g2 runs (g2 never sets up again).
    # Run many more times than x remembers shape changes, both stay right.
    from hodiff.engine.variable import SHAPE_HISTORY

    with hd.auto_forward(False):
        x = Variable((4, 3), need_grad=True, dtype=np.float64)
        g1 = F.sum(F.exp(x))
        g2 = F.sum(x * x)
    for k in range(2 * SHAPE_HISTORY + 3):
        x.reset_shape((7, 3), force=True)
        x.d = np.full((7, 3), 0.5)
        g1.forward()
        assert g1.d == pytest.approx(21 * np.exp(0.5))
        x.reset_shape((4, 3), force=True)
        x.d = np.full((4, 3), k / 10)
        g2.forward()
        assert g2.d == pytest.approx(12 * (k / 10) ** 2)


def test_a_graph_made_before_the_remembered_shape_changes_refuses():
    # a graph made on x, never run while x changed shape SHAPE_HISTORY + 5 times (in a
    # graph that followed): the shapes it was made for are no longer known, and it
    # raises naming its node and the reset, before anything is touched; one made after
    # the last change runs
    from hodiff.engine.variable import SHAPE_HISTORY

    with hd.auto_forward(False):
        x = Variable((2, 3), need_grad=True, dtype=np.float64)
        old = F.sum(F.exp(x))
        y = F.sum(x * x)
    for k in range(SHAPE_HISTORY + 5):
        x.reset_shape((2 + k % 2, 3), force=True)
        x.d = np.ones((2 + k % 2, 3))
        y.forward()
    with pytest.raises(ShapeResetError, match=r"exp was made before the last 32 shape"):
        old.forward()
    assert y.d == pytest.approx(x.d.size)  # untouched
    with hd.auto_forward(False):
        new = F.sum(F.exp(x))
    x.reset_shape((5, 3), force=True)
    x.d = np.zeros((5, 3))
    new.forward()
    assert new.d == pytest.approx(15.0)


def test_a_dynamic_graph_forward_follows_too():
    x = Variable.from_array(np.arange(6.0).reshape(2, 3), need_grad=True)
    y = F.sum(F.mean(x * x, axis=0))
    x.reset_shape((4, 3), force=True)
    x.d = np.arange(12.0).reshape(4, 3)
    y.forward()
    assert y.d == pytest.approx(np.sum(np.mean(x.d**2, axis=0)))
    y.backward()
    np.testing.assert_allclose(x.g, 2 * x.d / 4)


# ---------------------------------------------------------------- what refuses, and how
def _penalty(x):
    (g,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
    return F.sum(g * g)


def test_a_gradient_graph_of_a_static_graph_is_recorded_again_for_the_new_shape():
    # hd.grad in a static graph keeps its call: the forward after reset_shape records the
    # gradient graph again (as NNabla sets up its functions again), and so does every order
    with hd.auto_forward(False):
        x = Variable((2, 3), need_grad=True, dtype=np.float64)
        p = _penalty(x)
        (gp,) = hd.grad(p, x)  # the penalty's own gradient: a second-order graph
    for n in (2, 5, 1, 4):
        x.reset_shape((n, 3), force=True)
        x.d = np.linspace(-1.0, 1.5, 3 * n).reshape(n, 3)
        gp.forward()
        p.forward()
        xv = Variable.from_array(x.d, need_grad=True)
        ref = _penalty(xv)
        (gref,) = hd.grad(ref, xv)
        assert p.d == pytest.approx(ref.d, rel=1e-13)
        np.testing.assert_allclose(gp.d, gref.d, rtol=1e-12)
        t = np.tanh(x.d)  # and against the closed form: p = sum((2 t (1 - t^2))^2)
        g = 2 * t * (1 - t**2)
        np.testing.assert_allclose(gp.d, 2 * g * (2 - 6 * t**2) * (1 - t**2), rtol=1e-12)


def test_a_gradient_graph_of_a_dynamic_graph_refuses_and_names_hd_grad():
    x = Variable.from_array(np.ones((2, 3)), need_grad=True)
    penalty = _penalty(x)  # define-by-run: the gradient graph keeps no call
    before = penalty.d.copy()
    x.reset_shape((5, 3), force=True)
    why = r"hd\.grad in define-by-run.*call hd\.grad or hd\.vmap again"
    with pytest.raises(ShapeResetError, match=why):
        penalty.forward()
    x.reset_shape((2, 3), force=True)  # nothing was touched: back at the old shape it runs
    x.d = np.ones((2, 3))
    penalty.forward()
    assert penalty.d == before


def test_functions_are_set_up_again_as_nnabla_does():
    # a function's arguments are kept; the function is made again for the new inputs:
    # F.broadcast keeps its target, F.reshape infers its -1 again, a size that no longer
    # fits raises ShapeResetError naming the function, before anything is touched
    with hd.auto_forward(False):
        x = Variable((2, 3), dtype=np.float64)
        cols = F.broadcast(F.sum(x, axis=0, keepdims=True), (2, 3))
        flat = F.reshape(x, (-1,))
        rows = F.reshape(x, (3, -1))
        fixed = F.reshape(x, (3, 2))
    x.reset_shape((4, 3), force=True)
    x.d = np.arange(12.0).reshape(4, 3)
    cols.forward()
    np.testing.assert_array_equal(cols.d, np.broadcast_to(x.d.sum(0), (2, 3)))
    flat.forward()
    rows.forward()
    np.testing.assert_array_equal(flat.d, x.d.reshape(-1))
    np.testing.assert_array_equal(rows.d, x.d.reshape(3, 4))
    with pytest.raises(ShapeResetError, match=r"reshape refuses.*\(4, 3\).*\(3, 2\)"):
        fixed.forward()
    assert fixed.shape == (3, 2)


def test_operators_follow_by_their_own_rules():
    # Variable methods and operators are not traced: a reshape follows where its -1 takes
    # the change, a slice where the changed axis is taken whole
    with hd.auto_forward(False):
        x = Variable((2, 3, 4), dtype=np.float64)
        flat = x.reshape(-1, 12)  # the batch flows into the -1: follows
        rows = x.reshape(2, -1)  # the batch is fixed: a new one cannot be carried
        head = x[:, 1:]
        first = x[:1]
    x.reset_shape((5, 3, 4), force=True)
    x.d = np.arange(60.0).reshape(5, 3, 4)
    flat.forward()
    head.forward()
    np.testing.assert_array_equal(flat.d, x.d.reshape(5, 12))
    np.testing.assert_array_equal(head.d, x.d[:, 1:])
    for v in (rows, first):
        with pytest.raises(ShapeResetError, match=r"reshape|getitem"):
            v.forward()


def test_setup_errors_of_the_new_shapes_name_the_function_and_restore_the_shapes():
    with hd.auto_forward(False):
        x = Variable((2, 3))
        w = Variable.from_array(np.ones((3, 4)))
        h = F.tanh(x)
        y = F.affine(h, w)
    x.reset_shape((2, 5), force=True)  # no longer fits w
    with pytest.raises(ShapeResetError, match=r"affine.*\(2, 5\).*\(3, 4\)"):
        y.forward()
    assert h.shape == (2, 3)
    assert y.shape == (2, 4)


def test_a_failure_after_a_function_was_made_again_restores_the_old_graph():
    with hd.auto_forward(False):
        x = Variable((2, 3), dtype=np.float64)
        w = Variable.from_array(np.ones((3, 2)))
        h = F.top_k_data(x, 2)  # made again for (2, 4) below
        z = F.affine(x, w) + F.sum(h)  # ... then affine refuses (4 != 3)
    x.d = np.arange(6.0).reshape(2, 3)
    z.forward()
    before, parent = z.d.copy(), h.parent
    x.reset_shape((2, 4), force=True)
    with pytest.raises(ShapeResetError, match="affine"):
        z.forward()
    assert h.parent is parent
    assert h.shape == (2, 2)
    x.reset_shape((2, 3), force=True)
    x.d = np.arange(6.0).reshape(2, 3)
    z.forward()
    np.testing.assert_array_equal(z.d, before)


def test_a_change_of_rank_is_followed_by_functions_and_elementwise_nodes():
    with hd.auto_forward(False):
        x = Variable((2, 3), dtype=np.float64)
        y = F.tanh(x) * 2.0  # elementwise nodes
        s = F.sum(F.tanh(x), axis=1)  # a function: made again, axis=1 of the new x
        m = F.tanh(x).sum(axis=1)  # an operator's node: an axis chosen for a rank
    x.reset_shape((2, 3, 2), force=True)
    x.d = np.arange(12.0).reshape(2, 3, 2) / 12
    y.forward()
    s.forward()
    np.testing.assert_allclose(y.d, np.tanh(x.d) * 2.0, rtol=1e-15)
    np.testing.assert_allclose(s.d, np.tanh(x.d).sum(axis=1), rtol=1e-15)
    with pytest.raises(ShapeResetError, match=r"sum.*changed rank"):
        m.forward()


def test_reset_shape_arguments():
    x = Variable.from_array(np.arange(6.0).reshape(2, 3), need_grad=True)
    x.g = 1.0
    x.reset_shape((3, 2))  # same size: the values are kept, in order; the gradient dropped
    np.testing.assert_array_equal(x.d, np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(x.g, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"\(4, 2\) has 8 elements.*force=True"):
        x.reset_shape((4, 2))
    x.reset_shape((4, 2), force=True)  # a new size: zeros until set
    np.testing.assert_array_equal(x.d, np.zeros((4, 2)))
    y = F.tanh(x)
    with pytest.raises(ValueError, match="only a leaf"):
        y.reset_shape((8,))
    with pytest.raises(ValueError, match="negative"):
        x.reset_shape((-1, 2), force=True)


def test_the_new_shape_is_seen_by_graphs_built_after_it():
    # a node made after the reset was set up for the new shape: it never refuses
    with hd.auto_forward(False):
        x = Variable((2, 3))
        h = F.tanh(x)
    x.reset_shape((5, 3), force=True)
    x.d = np.ones((5, 3))
    h.forward()
    with hd.auto_forward(False):
        m = F.mean(h) * (1.0 / h.shape[0])  # a user's own number from the new shape
    m.forward()
    assert m.d == pytest.approx(np.tanh(1.0) / 5)


def test_hd_grad_called_again_after_the_reset_records_for_the_new_shape():
    # the gradient graph of the old shape refuses; hd.grad called after the reset (before
    # any forward) sees the new shapes and gives the gradient penalty of the new batch
    def penalty_of(x):
        (g,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
        return F.sum(g * g)

    with hd.auto_forward(False):
        x = Variable((2, 3), need_grad=True, dtype=np.float64)
        penalty_of(x)
        x.reset_shape((5, 3), force=True)
        p = penalty_of(x)
    x.d = np.linspace(-1, 1, 15).reshape(5, 3)
    p.forward()
    expected = penalty_of(Variable.from_array(x.d, need_grad=True))
    assert p.d == pytest.approx(expected.d, rel=1e-12)
    (gx,) = hd.grad(p, x, create_graph=False)  # and its own gradient, at the new shape
    t = np.tanh(x.d)
    g = 2 * t * (1 - t**2)
    np.testing.assert_allclose(gx.d, 2 * g * (2 - 6 * t**2) * (1 - t**2), rtol=1e-10)


def test_a_reverse_pass_after_a_reset_without_forward_raises_before_touching_anything():
    x = Variable.from_array(np.ones((2, 3)), need_grad=True)
    y = F.sum(x * 2.0)  # the rule reads no value: only the shape is stale
    x.reset_shape((5, 3), force=True)
    with pytest.raises(RuntimeError, match=r"reset to \(5, 3\).*call \.forward\(\)"):
        y.backward()
    with pytest.raises(RuntimeError, match="reset_shape"):
        hd.grad(y, x)
    y.forward()
    y.backward()
    np.testing.assert_array_equal(x.g, np.full((5, 3), 2.0))


def test_a_vmap_result_refuses_and_names_vmap():
    # hd.vmap's batching rules are made for the batch's shapes: a static graph of a vmap
    # refuses a new batch (it never computes with the old shapes)
    def f(v):
        return F.cumsum(F.softmax(v, axis=0) * 2.0, axis=0)

    with hd.auto_forward(False):
        x = Variable((3, 5), dtype=np.float64)
        y = hd.vmap(f)(x)
    x.d = np.linspace(0.0, 1.0, 15).reshape(3, 5)
    y.forward()
    np.testing.assert_allclose(y.d, hd.vmap(f)(Variable.from_array(x.d)).d, rtol=1e-14)
    x.reset_shape((4, 5), force=True)
    with pytest.raises(ShapeResetError, match=r"hd\.vmap"):
        y.forward()
    assert y.shape == (3, 5)


def test_a_pullback_made_before_a_reset_raises_and_says_to_make_it_again():
    # a pullback (the plan of hd.jacobian, a Hessian operator) keeps the nodes it was made
    # on; after reset_shape the static graph's hd.grad is made again for the new shape,
    # and the old pullback refuses, naming the reset, before computing anything
    from hodiff.engine.api import Pullback

    with hd.auto_forward(False):
        x = Variable((2, 3), need_grad=True, dtype=np.float64)
        (g,) = hd.grad(F.sum(F.tanh(x) ** 2), x)
    x.d = np.full((2, 3), 0.3)
    g.forward()
    pb = Pullback([g], [x])
    t = np.tanh(0.3)
    hv = 2 * (1 - t**2) ** 2 - 4 * t**2 * (1 - t**2)  # d/dx of 2 t (1 - t^2)
    np.testing.assert_allclose(pb([np.ones((2, 3))])[0], np.full((2, 3), hv), rtol=1e-12)
    x.reset_shape((4, 3), force=True)
    x.d = np.full((4, 3), 0.3)
    g.forward()
    with pytest.raises(RuntimeError, match=r"pullback: a variable of its graph was given a new"):
        pb([np.ones((4, 3))])
    pb2 = Pullback([g], [x])  # made again: right
    np.testing.assert_allclose(pb2([np.ones((4, 3))])[0], np.full((4, 3), hv), rtol=1e-12)


# ---------------------------------------------------------------- the shape facts of a class
class _Cube(Function):
    """``y = x^3``, declaring no shape fact: the default refuses new shapes."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] ** 3


class _CubeOfAnyShape(_Cube, follows_shape=True):
    pass


class _CubeOfAnyRank(_Cube, follows_shape=True, follows_rank=True):
    pass


class _CubeSaidByAttribute(_Cube):
    follows_shape = True


@pytest.mark.parametrize(
    ("cls", "shape", "follows"),
    [
        (_Cube, (5, 3), False),
        (_CubeOfAnyShape, (5, 3), True),
        (_CubeSaidByAttribute, (5, 3), True),
        (_CubeOfAnyShape, (5, 3, 2), False),  # another rank: follows_rank is not said
        (_CubeOfAnyRank, (5, 3, 2), True),
    ],
)
def test_a_users_primitive_follows_new_shapes_only_where_its_class_says_so(cls, shape, follows):
    assert cls not in REGISTRY  # a user's class: no fact set for it from outside
    with hd.auto_forward(False):
        x = Variable((2, 3), dtype=np.float64)
        y = cls()(x)
    x.reset_shape(shape, force=True)
    x.d = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    if not follows:
        with pytest.raises(ShapeResetError, match=cls.name):
            y.forward()
        assert y.shape == (2, 3)
        return
    y.forward()
    np.testing.assert_allclose(y.d, x.d**3, rtol=1e-15)


def test_the_default_of_a_users_primitive_is_to_refuse():
    assert Function.follows_shape is False
    assert Function.follows_rank is False
    assert _Cube.follows_shape is False
    assert _Cube.follows_rank is False
    # hodiff's own: every registered primitive says what it does (its class or a base of
    # hodiff's, not Function's default), and follows ranks only if it follows shapes
    for c in REGISTRY:
        own = [k for k in c.__mro__ if k not in (Function, object)]
        assert any("follows_shape" in k.__dict__ for k in own), c.__name__
        assert c.follows_shape or not c.follows_rank, c.__name__


def _flatten(x):
    return F.reshape(x, (x.shape[0], -1))  # a target computed from x's shape


def test_a_traced_composition_is_made_again_for_the_new_shapes():
    # with @traced, the call is kept and made again: the new batch size flows through;
    # without it, the inner F.reshape is made again with the target of the old shape
    for fn, batch in ((traced(_flatten), 5), (_flatten, 2)):
        with hd.auto_forward(False):
            x = Variable((2, 3, 4), dtype=np.float64)
            y = fn(x)
        x.reset_shape((5, 3, 4), force=True)
        x.d = np.arange(60.0).reshape(5, 3, 4)
        y.forward()
        np.testing.assert_array_equal(y.d, x.d.reshape(batch, -1))


def test_variable_matmul_and_squeeze_follow_by_their_nodes_own_rules():
    # a @ b of a vector and Variable.squeeze are not traced; the reshapes inside them are
    # their nodes, not traced calls kept with the target of the old shape
    with hd.auto_forward(False):
        a = Variable((3,), dtype=np.float64)
        b = Variable((3, 4), dtype=np.float64)
        y = a @ b
        x = Variable((2, 1, 4), dtype=np.float64)
        s = x.squeeze(1)
    b.reset_shape((3, 6), force=True)
    a.d, b.d = np.arange(3.0), np.arange(18.0).reshape(3, 6)
    y.forward()
    np.testing.assert_array_equal(y.d, a.d @ b.d)
    x.reset_shape((5, 1, 4), force=True)
    x.d = np.arange(20.0).reshape(5, 1, 4)
    s.forward()
    np.testing.assert_array_equal(s.d, x.d[:, 0, :])


def test_a_vmap_output_the_same_for_every_example_refuses_a_new_shape():
    # hd.vmap broadcasts such an output along the batch with nodes set up for its shape:
    # a new shape of the same size must not be read in the old one
    with hd.auto_forward(False):
        x = Variable((3, 4), dtype=np.float64)
        w = Variable((2, 3), dtype=np.float64)
        y = hd.vmap(lambda r: F.tanh(w))(x)
    assert y.shape == (3, 2, 3)
    w.reset_shape((3, 2), force=True)
    w.d, x.d = np.arange(6.0).reshape(3, 2), np.ones((3, 4))
    try:
        y.forward()
    except ShapeResetError:
        assert y.shape == (3, 2, 3)
    else:
        np.testing.assert_allclose(y.d, np.broadcast_to(np.tanh(w.d), (3, 3, 2)), rtol=1e-15)
