"""Graphs as data: hd.to_dot, hd.save_graph / hd.load_graph (hodiff/graphio/).

The round trip is driven by the spec table: every function's forward graph and the
gradient graph hd.grad records from it are saved, loaded and re-run, and the values and
derivatives of the loaded graph (orders 1 and 2) must equal those of the original graph,
whose own derivatives test_functions checks against finite differences. The loaded MLP is
gradchecked to order 3 independently. A meta-test asserts that these graphs contain every
registered primitive, so a new function without a spec is a new function not checked here.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.function import REGISTRY, Function
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from hodiff.tools import graphio
from hodiff.tools.graphio import walk
from hodiff.tools.graphio.files import read_file, write_file
from hodiff.tools.graphio.walk import graph_nodes
from tests.harness import call, gpu, outputs_of, weights

SPECS = all_specs()
IDS = spec_ids(SPECS)


def _scalar(ys: list[hd.Variable], ws: list[np.ndarray], power: int) -> hd.Variable:
    total = None
    for y, w in zip(ys, ws, strict=True):
        term = F.sum((y**power if power != 1 else y) * w)
        total = term if total is None else total + term
    assert total is not None
    return total


def _assert_same(a: list[hd.Variable], b: list[hd.Variable], what: str) -> None:
    assert len(a) == len(b), what
    for i, (u, v) in enumerate(zip(a, b, strict=True)):
        assert u.shape == v.shape, f"{what} {i}"
        assert u.dtype == v.dtype, f"{what} {i}"
        np.testing.assert_allclose(v.d, u.d, rtol=1e-13, atol=1e-13, err_msg=f"{what} {i}")


def _fresh(xs: list[np.ndarray], like: list[hd.Variable]) -> list[hd.Variable]:
    return [hd.Variable.from_array(x, need_grad=v.need_grad) for x, v in zip(xs, like, strict=True)]


def _node_types(outputs: list[hd.Variable]) -> set[type[Function]]:
    return {type(f) for f in graph_nodes(outputs)}


def _spec_graphs(spec: Spec) -> tuple[list[hd.Variable], list[hd.Variable], list[hd.Variable]]:
    """(inputs, outputs, gradients of sum(w * y) w.r.t. the float inputs or [])."""
    vs, y = call(spec, spec.sample(), need_grad=True)
    ys = outputs_of(y)
    if spec.order < 1:
        return vs, ys, []
    wrt = [v for v in vs if v.need_grad]
    # allow_unused: an input only a shape or an index is read from (broadcast_to's x,
    # max_pooling_backward's x) gets no gradient
    return vs, ys, hd.grad(_scalar(ys, weights(spec), 1), wrt, allow_unused=True)


# ------------------------------------------------------------------ spec-driven round trip
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_function_round_trips(spec: Spec, tmp_path: Path) -> None:
    xs = spec.sample()
    vs, y = call(spec, xs, need_grad=True)
    ys = outputs_of(y)
    path = tmp_path / "forward"
    hd.save_graph(path, ys, vs)
    f = hd.load_graph(path)
    vs2 = _fresh(xs, vs)
    ys2 = f(*vs2)
    _assert_same(ys, ys2, "output")
    if spec.order < 1:
        return
    ws = weights(spec)
    wrt, wrt2 = [v for v in vs if v.need_grad], [v for v in vs2 if v.need_grad]
    power = 3 if spec.linear and spec.order >= 2 else 1
    g1 = hd.grad(_scalar(ys, ws, power), wrt, allow_unused=True)
    g2 = hd.grad(_scalar(ys2, ws, power), wrt2, allow_unused=True)
    _assert_same(g1, g2, "gradient")
    if spec.order >= 2:  # order 2: a Hessian-vector product
        rng = np.random.default_rng(3)
        us = [rng.standard_normal(v.shape) for v in wrt]
        h1 = hd.grad(_scalar(g1, us, 1), wrt, allow_unused=True)
        h2 = hd.grad(_scalar(g2, us, 1), wrt2, allow_unused=True)
        _assert_same(h1, h2, "Hessian-vector product")


@pytest.mark.parametrize(
    "spec",
    [s for s in SPECS if s.order >= 1],
    ids=[i for s, i in zip(SPECS, IDS, strict=True) if s.order >= 1],
)
def test_every_gradient_graph_round_trips(spec: Spec, tmp_path: Path) -> None:
    """The graph hd.grad records (with hodiff.grad_functions nodes) saves and loads too."""
    xs = spec.sample()
    vs, y = call(spec, xs, need_grad=True)
    ws = weights(spec)
    wrt = [v for v in vs if v.need_grad]
    g1 = hd.grad(_scalar(outputs_of(y), ws, 1), wrt, allow_unused=True)
    path = tmp_path / "gradient"
    hd.save_graph(path, g1, vs)
    vs2 = _fresh(xs, vs)
    g2 = hd.load_graph(path)(*vs2)
    _assert_same(g1, g2, "gradient")
    if spec.order >= 2:  # the loaded gradient graph is differentiable again
        rng = np.random.default_rng(4)
        us = [rng.standard_normal(v.shape) for v in wrt]
        wrt2 = [v for v in vs2 if v.need_grad]
        h1 = hd.grad(_scalar(g1, us, 1), wrt, allow_unused=True)
        h2 = hd.grad(_scalar(g2, us, 1), wrt2, allow_unused=True)
        _assert_same(h1, h2, "derivative of the gradient")


def test_spec_graphs_contain_every_primitive() -> None:
    """The round trips above see every registered function and gradient-only function."""
    seen: set[type[Function]] = set()
    for spec in SPECS:
        _, ys, gs = _spec_graphs(spec)
        seen |= _node_types(ys) | _node_types(gs)
    missing = sorted(c.__name__ for c in REGISTRY if c not in seen)
    assert not missing, f"no spec graph contains {missing}"


# ------------------------------------------------------------------ a model
def _mlp(seed: int = 0) -> tuple[hd.Variable, list[hd.Variable], hd.Variable]:
    rng = np.random.default_rng(seed)
    x = hd.Variable.from_array(rng.standard_normal((5, 3)))
    ws = [
        hd.Variable.from_array(rng.standard_normal(s) * 0.7, need_grad=True)
        for s in [(3, 4), (4,), (4, 2), (2,)]
    ]
    t = hd.Variable.from_array(rng.integers(0, 2, size=(5, 1)))
    h = F.tanh(F.affine(x, ws[0], ws[1]))
    loss = F.mean(F.softmax_cross_entropy(F.affine(h, ws[2], ws[3]), t))
    return x, ws, loss


def test_loaded_model_is_differentiable_to_order_3(tmp_path: Path) -> None:
    x, ws, loss = _mlp()
    hd.save_graph(tmp_path / "mlp", loss, [x, *ws])
    f = hd.load_graph(tmp_path / "mlp")
    assert f.parameters == {}
    assert len(f.constants) == 1
    # finite differences of the loaded callable itself, orders 1..3
    hd.gradcheck(lambda *w: f(x.d, *w), [w.d for w in ws], order=3)
    np.testing.assert_allclose(f(x.d, *ws).d, loss.d, rtol=1e-15)


def test_parameters_of_a_loaded_graph(tmp_path: Path) -> None:
    x, ws, loss = _mlp()
    names = {"fc1/W": ws[0], "fc1/b": ws[1], "fc2/W": ws[2], "fc2/b": ws[3]}
    hd.save_graph(tmp_path / "mlp", loss, x, parameters=names)
    f = hd.load_graph(tmp_path / "mlp")
    assert list(f.parameters) == list(names)
    for name, v in f.parameters.items():
        assert v.need_grad
        assert v is not names[name]
        np.testing.assert_array_equal(v.d, names[name].d)
    y = f(x.d)
    grads = hd.grad(y, list(f.parameters.values()))
    expected = hd.grad(loss, ws)
    _assert_same(expected, grads, "parameter gradient")
    # parameters are shared by every call: changing one changes what the next call computes
    f.parameters["fc2/b"].d = f.parameters["fc2/b"].d + np.array([1.0, -1.0])
    ws[3].d = ws[3].d + np.array([1.0, -1.0])
    assert not np.allclose(f(x.d).d, loss.d)
    h = F.tanh(F.affine(x, ws[0], ws[1]))
    t = next(iter(f.constants.values()))
    ref = F.mean(F.softmax_cross_entropy(F.affine(h, ws[2], ws[3]), t))
    np.testing.assert_allclose(f(x.d).d, ref.d, rtol=1e-14)


def test_parameters_known_to_the_parameter_scope_keep_their_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, ws, loss = _mlp()
    registry = {"fc1/W": ws[0], "fc1/b": ws[1], "fc2/W": ws[2], "fc2/b": ws[3]}
    monkeypatch.setattr(walk, "get_parameters", lambda grad_only=True: registry)
    source = hd.to_dot(loss)
    assert "parameter fc2/W\\n(4, 2) float64" in source
    assert "need_grad leaf" not in source
    hd.save_graph(tmp_path / "g", loss, x, parameters={"first": ws[0]})  # given names win
    assert list(hd.load_graph(tmp_path / "g").parameters) == ["first", "fc1/b", "fc2/W", "fc2/b"]


def test_unnamed_leaves_get_names(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones(3))
    w = hd.Variable.from_array(np.arange(3.0), need_grad=True)
    hd.save_graph(tmp_path / "g", F.sum(x * w * 2.0 + np.array([0.0, 0.0, 1.0])), x)
    f = hd.load_graph(tmp_path / "g")
    assert list(f.parameters) == ["param0"]
    assert list(f.constants) == ["const0"]  # the array; the scalar is a static argument
    assert float(f(np.array([1.0, 1.0, 2.0])).d) == pytest.approx(2 * (0 + 1 + 4) + 1)


def test_gradient_graph_of_a_model_round_trips(tmp_path: Path) -> None:
    x, ws, loss = _mlp()
    grads = hd.grad(loss, ws)
    hd.save_graph(tmp_path / "grads", grads, [x, *ws])
    f = hd.load_graph(tmp_path / "grads")
    g2 = f(x.d, *ws)
    assert isinstance(g2, list)
    _assert_same(grads, g2, "gradient")
    # a Hessian-vector product through the loaded gradient graph equals finite differences
    rng = np.random.default_rng(1)
    us = [rng.standard_normal(w.shape) for w in ws]
    hv = hd.grad(_scalar(g2, us, 1), ws)
    eps = 1e-6
    plus = f(x.d, *[hd.Variable.from_array(w.d + eps * u) for w, u in zip(ws, us, strict=True)])
    minus = f(x.d, *[hd.Variable.from_array(w.d - eps * u) for w, u in zip(ws, us, strict=True)])
    for h, p, m in zip(hv, plus, minus, strict=True):
        np.testing.assert_allclose(h.d, (p.d - m.d) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_loaded_graph_with_arrays_and_other_batch_size(tmp_path: Path) -> None:
    x, ws, _loss = _mlp()
    h = F.tanh(F.affine(x, ws[0], ws[1]))
    hd.save_graph(tmp_path / "h", h, x)
    f = hd.load_graph(tmp_path / "h")
    x7 = np.random.default_rng(2).standard_normal((7, 3))
    np.testing.assert_allclose(f(x7).d, np.tanh(x7 @ ws[0].d + ws[1].d), rtol=1e-14)
    with pytest.raises(TypeError, match="takes 1 input"):
        f(x7, x7)


def test_inputs_may_be_intermediate_and_outputs_leaves(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.array([0.5, 1.5]), need_grad=True)
    h = F.exp(x)
    y = F.sin(h)
    hd.save_graph(tmp_path / "g", [y, h, x], [h, x])
    f = hd.load_graph(tmp_path / "g")
    hh = hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
    y2, h2, x2 = f(hh, x)
    assert h2 is hh
    assert x2 is x
    np.testing.assert_allclose(y2.d, np.sin([1.0, 2.0]))
    assert graphio.load_graph(tmp_path / "g").definition["functions"][0]["type"] == "Sin"


def test_multi_output_function(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.arange(6.0).reshape(3, 2), need_grad=True)
    a, _b, c = F.split(x, axis=0)
    y = a * c  # b unused
    hd.save_graph(tmp_path / "g", y, x)
    f = hd.load_graph(tmp_path / "g")
    np.testing.assert_array_equal(f(x).d, [0.0, 5.0])
    (g,) = hd.grad(F.sum(f(x)), x)
    np.testing.assert_array_equal(g.d, [[4.0, 5.0], [0.0, 0.0], [0.0, 1.0]])


def test_outputs_come_back_in_the_form_they_were_saved(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.array([0.5, 2.0]))
    for outputs, kind in [(F.exp(x), hd.Variable), ([F.exp(x)], list), ((F.exp(x), x), tuple)]:
        hd.save_graph(tmp_path / "g", outputs, x)
        assert type(hd.load_graph(tmp_path / "g")(x)) is kind


def test_python_scalar_input_takes_the_saved_dtype(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.array(0.25))
    hd.save_graph(tmp_path / "g", F.exp(x), x)
    y = hd.load_graph(tmp_path / "g")(0.25)
    assert y.dtype == np.float64
    assert float(y.d) == np.exp(0.25)


def test_static_graph_saves_and_runs(tmp_path: Path) -> None:
    with hd.auto_forward(False):
        x = hd.Variable((2, 3), dtype=np.float32)
        w = hd.Variable.from_array(np.ones((3, 1), np.float32), need_grad=True)
        y = F.affine(x, w)
        hd.save_graph(tmp_path / "static", y, x)
        f = hd.load_graph(tmp_path / "static")
        z = f(hd.Variable((2, 3), dtype=np.float32))
        z.parent.inputs[0].d = np.arange(6, dtype=np.float32).reshape(2, 3)
        z.forward()
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z.d, [[3.0], [12.0]])


def test_seeded_dropout_replays_its_mask(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones((4, 5)))
    y = F.dropout(x, p=0.5, seed=7)
    hd.save_graph(tmp_path / "d", y, x)
    np.testing.assert_array_equal(hd.load_graph(tmp_path / "d")(x).d, y.d)


# ------------------------------------------------------------------ static arguments
class _Scaled(Function):
    """A user primitive with static arguments of every encodable kind (positional too)."""

    def __init__(self, scale: float, *, extra: Any, inner: Function | None = None) -> None:
        self.scale = scale
        self.extra = extra
        self.inner = inner

    def forward_impl(self, inputs: Any, outputs: list[Any]) -> None:
        outputs[0] = inputs[0] * self.scale

    def backward_impl(self, inputs: Any, outputs: Any, prop_down: Any, accum: Any) -> None:
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * self.scale, accum[0])


class _ScaledTwice(_Scaled):
    def __init__(self, *, twice: bool, **params: Any) -> None:
        super().__init__(2.0, **params)
        self.twice = twice


EXTRA = {
    "none": None,
    "t": (1, (2, 3), ()),
    "l": [1.5, "s", True],
    "inf": float("inf"),
    "nan": float("nan"),
    "c": 1 - 2j,
    "f32": np.float32(0.1),
    "i8": np.int8(-3),
    "f64": np.float64(2.5),
    "bool_": np.bool_(True),
    "cls": F.math.Sin,
    "user_cls": _ScaledTwice,
    "dtype": np.dtype("float32"),
    "type": np.float16,
    "py": float,
    "a": np.arange(6).reshape(2, 3),
    "b": np.array([True, False]),
    "s": slice(1, None, -1),
    "e": Ellipsis,
    3: "int key",
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    if isinstance(a, np.generic):
        return type(a) is type(b) and a == b
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, Function):
        return type(a) is type(b) and _same(a.static_arguments, b.static_arguments)
    return type(a) is type(b) and a == b


def test_static_arguments_are_recorded_by_every_constructor() -> None:
    f = _ScaledTwice(twice=True, extra=1)
    assert f.static_arguments == ((), {"twice": True, "extra": 1})  # the most derived call
    assert _Scaled(3.0, extra=None).static_arguments == ((3.0,), {"extra": None})
    assert F.reshape(hd.Variable.from_array(np.ones(6)), (2, 3)).parent.static_arguments == (
        (),
        {"shape": (2, 3)},
    )


def test_typed_static_arguments_round_trip(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.array([1.0, -2.0]), need_grad=True)
    inner = _ScaledTwice(twice=False, extra=(np.float64(2.5),))
    y = _Scaled(3.0, extra=EXTRA, inner=inner)(x)
    z = _ScaledTwice(twice=True, extra=[])(y)
    hd.save_graph(tmp_path / "typed", z, x)
    f = hd.load_graph(tmp_path / "typed")
    z2 = f(x)
    np.testing.assert_array_equal(z2.d, [6.0, -12.0])
    node = z2.parent.inputs[0].parent
    assert type(node) is _Scaled
    assert _same(node.static_arguments, ((3.0,), {"extra": EXTRA, "inner": inner}))
    assert _same(z2.parent.static_arguments, ((), {"twice": True, "extra": []}))
    (g,) = hd.grad(F.sum(z2), x)
    np.testing.assert_array_equal(g.d, [6.0, 6.0])


def test_advanced_indexing_keys_round_trip(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.arange(24.0).reshape(2, 3, 4), need_grad=True)
    y = x[1:, None, ..., np.array([0, 2, 2])]
    hd.save_graph(tmp_path / "idx", y, x)
    y2 = hd.load_graph(tmp_path / "idx")(x)
    np.testing.assert_array_equal(y2.d, x.d[1:, None, ..., [0, 2, 2]])


def test_unstorable_static_argument_is_a_type_error(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones(2))
    y = _Scaled(1.0, extra={"fn": print})(x)
    with pytest.raises(TypeError, match=r"_scaled static argument 'extra'.*builtin_function"):
        hd.save_graph(tmp_path / "bad", y, x)
    assert not (tmp_path / "bad").exists()


def test_unknown_function_type_is_a_value_error(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones(2))
    hd.save_graph(tmp_path / "g", F.sin(x), x)
    definition, arrays = read_file(str(tmp_path / "g"))
    definition["functions"][0]["type"] = "NoSuchFunction"
    write_file(tmp_path / "g", definition, arrays)
    with pytest.raises(ValueError, match=r"'.*g'.*NoSuchFunction"):
        hd.load_graph(tmp_path / "g")


def test_static_arguments_a_constructor_rejects_fail_at_load(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones(6))
    hd.save_graph(tmp_path / "g", F.reshape(x, (2, 3)), x)
    definition, arrays = read_file(str(tmp_path / "g"))
    definition["functions"][0]["kwargs"]["shape"] = {"$tuple": ["two", 3]}
    write_file(tmp_path / "g", definition, arrays)
    with pytest.raises(ValueError, match=r"'.*g'.*Reshape.*cannot be rebuilt"):
        hd.load_graph(tmp_path / "g")


# ------------------------------------------------------------------ the file
def _saved(tmp_path: Path, name: str = "model") -> Path:
    x, _ws, loss = _mlp()
    path = tmp_path / name
    hd.save_graph(path, loss, x)
    return path


@pytest.mark.parametrize("name", ["model", "model.npz", "model.json", "model.hdg"])
def test_writes_exactly_the_given_path(tmp_path: Path, name: str) -> None:
    path = _saved(tmp_path, name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert hd.load_graph(str(path)).path == str(path)


def test_file_layout_is_the_documented_one(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["graph.json", "values.npz"]
        definition = json.loads(zf.read("graph.json"))
        assert zf.testzip() is None
        assert zf.comment == data[-84:]
    assert definition["format"] == "hodiff-graph"
    assert definition["version"] == 1
    # F.mean is one primitive (it reads its count 1/n from its input's shape when it runs)
    assert [e["type"] for e in definition["functions"]] == [
        "Affine",
        "Tanh",
        "Affine",
        "SoftmaxCrossEntropy",
        "Mean",
    ]

    assert data[-84:-64] == b"hodiff-graph sha256:"
    assert data[-64:].decode() == hashlib.sha256(data[:-64]).hexdigest()
    with (
        zipfile.ZipFile(path) as zf,
        np.load(io.BytesIO(zf.read("values.npz")), allow_pickle=False) as npz,
    ):
        for e in definition["values"]:
            assert list(npz[e["array"]].shape) == e["shape"]


def _damaged(tmp_path: Path, data: bytes) -> None:
    bad = tmp_path / "damaged.hdg"
    bad.write_bytes(data)
    with pytest.raises(ValueError, match=r"damaged\.hdg"):
        hd.load_graph(bad)


def test_garbage_and_empty_files(tmp_path: Path) -> None:
    _damaged(tmp_path, b"")
    _damaged(tmp_path, b"not a graph at all" * 10)
    _damaged(tmp_path, np.random.default_rng(0).bytes(4000))
    np.savez(tmp_path / "arrays.npz", a=np.ones(3))  # a zip, but not a graph file
    _damaged(tmp_path, (tmp_path / "arrays.npz").read_bytes())


def test_truncated_files(tmp_path: Path) -> None:
    data = _saved(tmp_path).read_bytes()
    for n in (1, 22, 100, len(data) // 2, len(data) - 65, len(data) - 1):
        _damaged(tmp_path, data[: len(data) - n])


def test_every_flipped_byte_is_caught(tmp_path: Path) -> None:
    data = _saved(tmp_path).read_bytes()
    for i in range(0, len(data), max(1, len(data) // 400)):
        flipped = bytearray(data)
        flipped[i] ^= 0x5A
        _damaged(tmp_path, bytes(flipped))
    middle = bytearray(data)
    middle[len(data) // 2] ^= 1
    _damaged(tmp_path, bytes(middle))


def test_newer_version_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    definition, arrays = read_file(str(path))
    definition["version"] = graphio.VERSION + 1
    write_file(path, definition, arrays)
    with pytest.raises(ValueError, match=r"model.*version 2.*newer"):
        hd.load_graph(path)
    # rewritten by another zip tool (no checksum): still named as a newer version
    with zipfile.ZipFile(path) as zf:
        values = zf.read("values.npz")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("graph.json", json.dumps(definition))
        zf.writestr("values.npz", values)
    with pytest.raises(ValueError, match="newer"):
        hd.load_graph(path)


def test_edited_file_without_checksum_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    with pytest.raises(ValueError, match="checksum"):
        hd.load_graph(path)


def test_no_pickle_in_values(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones(2))
    hd.save_graph(tmp_path / "g", F.sin(x), x)
    definition, arrays = read_file(str(tmp_path / "g"))
    arrays["a0"] = np.array([object()], dtype=object)
    write_file(tmp_path / "g", definition, arrays)  # np.savez pickles object arrays
    with pytest.raises(ValueError, match="pickle"):
        hd.load_graph(tmp_path / "g")


# ------------------------------------------------------------------ DOT
def _dot_nodes(source: str) -> dict[str, str]:
    """node id -> its attribute text."""
    out = {}
    for line in source.splitlines():
        line = line.strip()
        if line[:1] in "vf" and " [" in line and "->" not in line:
            ident, rest = line.split(" [", 1)
            out[ident] = rest
    return out


def test_dot_of_a_forward_graph() -> None:
    x, _ws, loss = _mlp()
    source = hd.to_dot(loss, names={"x": x, "loss": loss})
    nodes = _dot_nodes(source)
    functions = [a for k, a in nodes.items() if k.startswith("f")]
    variables = [a for k, a in nodes.items() if k.startswith("v")]
    assert len(functions) == len(graph_nodes([loss])) == 5  # affine, tanh, affine, sce, mean
    assert any(a.startswith('label="affine\\nbase_axis=1"') for a in functions)
    assert any(a.startswith('label="softmax_cross_entropy\\naxis=None"') for a in functions)
    # 6 leaves (x, 4 parameters, labels) + 5 results
    assert len(variables) == 11
    params = [a for a in variables if "#f6c667" in a]
    assert len(params) == 4
    assert all("need_grad leaf" in a for a in params)
    assert sum("(4, 2) float64" in a for a in params) == 1
    assert any(a.startswith('label="x\\n(5, 3) float64"') for a in variables)
    assert [a for a in variables if "peripheries=2" in a] == [
        'label="loss\\n() float64", shape=ellipse, peripheries=2];'
    ]
    edges = [line for line in source.splitlines() if "->" in line]
    assert len(edges) == sum(len(f.inputs) + 1 for f in graph_nodes([loss]))
    assert source.startswith("digraph hodiff {")
    assert source.rstrip().endswith("}")


def test_dot_of_a_gradient_graph() -> None:
    _x, ws, loss = _mlp()
    grads = hd.grad(loss, ws)
    source = hd.to_dot(grads)
    nodes = _dot_nodes(source)
    n_functions = sum(k.startswith("f") for k in nodes)
    assert n_functions == len(graph_nodes(grads)) > 6
    assert "#f5dcd7" in source  # a gradient-only function (hodiff.grad_functions)
    assert sum("peripheries=2" in a for a in nodes.values()) == 4


def test_dot_multi_output_edges_are_labelled() -> None:
    x = hd.Variable.from_array(np.ones((2, 2)))
    a, b = F.split(x, axis=0)
    source = hd.to_dot([a * b])
    assert "[label=0];" in source
    assert "[label=1];" in source


def test_dot_escapes_quotes() -> None:
    x = hd.Variable.from_array(np.ones(2))
    y = _Scaled(1.0, extra='say "hi" \\ there')(x)
    source = hd.to_dot(y)
    assert "extra='say \\\"hi\\\" \\\\\\\\ there'" in source


def test_render_without_graphviz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = hd.Variable.from_array(np.ones(2), need_grad=True)
    y = F.sin(x)
    source = hd.to_dot(y, tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text() == source
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="graphviz"):
        hd.to_dot(y, tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_with_graphviz(tmp_path: Path) -> None:
    x = hd.Variable.from_array(np.ones(2), need_grad=True)
    hd.to_dot(F.sin(x), tmp_path / "g.svg")
    text = (tmp_path / "g.svg").read_text()
    assert "<svg" in text
    assert "sin" in text
    hd.to_dot(F.sin(x), tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_prints_the_graph_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hodiff.tools.demo import run_demo

    assert run_demo() == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("7. graphs as data")]
    assert len(line) == 1
    assert line[0].endswith("|loss - loaded| = 0.0e+00, |grad - loaded grad| = 0.0e+00")


def test_example_makes_both_pictures(tmp_path: Path) -> None:
    import importlib.util

    file = Path(__file__).resolve().parent.parent / "examples" / "graph_pictures.py"
    spec = importlib.util.spec_from_file_location("graph_pictures", file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths = module.main(tmp_path)
    assert [p.stem for p in paths] == ["mlp_forward", "mlp_gradient"]
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(b"\x89PNG" if p.suffix == ".png" else b"digraph hodiff {")


# ------------------------------------------------------------------ cupy
def test_cupy_graph_saves_and_loads_onto_either_backend(tmp_path: Path) -> None:
    cp = gpu()
    rng = np.random.default_rng(0)
    xs, ws_np = rng.standard_normal((5, 3)), [rng.standard_normal(s) for s in [(3, 4), (4,)]]
    x = hd.Variable.from_array(cp.asarray(xs))
    ws = [hd.Variable.from_array(cp.asarray(w), need_grad=True) for w in ws_np]
    y = F.sum(F.tanh(F.affine(x, *ws))[:, np.array([0, 2, 2])] ** 2)
    assert "getitem" in hd.to_dot(y)
    hd.save_graph(tmp_path / "gpu", y, x)
    with hd.context_scope(hd.Context(backend="cupy", dtype="float64")):
        f = hd.load_graph(tmp_path / "gpu")
    assert all(isinstance(p.d, cp.ndarray) for p in f.parameters.values())
    y2 = f(x)
    assert isinstance(y2.d, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(y2.d), cp.asnumpy(y.d), rtol=1e-14)
    g = hd.grad(y, ws)
    g2 = hd.grad(y2, list(f.parameters.values()))
    for a, b in zip(g, g2, strict=True):
        np.testing.assert_allclose(cp.asnumpy(b.d), cp.asnumpy(a.d), rtol=1e-13)
    f_np = hd.load_graph(tmp_path / "gpu")  # the same file, onto numpy
    y3 = f_np(xs)
    assert isinstance(y3.d, np.ndarray)
    np.testing.assert_allclose(y3.d, cp.asnumpy(y.d), rtol=1e-12)
