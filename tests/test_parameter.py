"""Parameter scopes, sharing by name, get/clear, save/load, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import hodiff as hd
import hodiff.initializers as I


@pytest.fixture(autouse=True)
def _clean():
    hd.clear_parameters()
    yield
    hd.clear_parameters()


def test_scopes_nest_with_slash_and_names_are_shared() -> None:
    with hd.parameter_scope("gen"):
        with hd.parameter_scope("l1"):
            a = hd.get_parameter_or_create("W", (2, 3))
        with hd.parameter_scope("l1"):
            b = hd.get_parameter_or_create("W", (2, 3))
        c = hd.get_parameter_or_create("l1/W", (2, 3))
    with hd.parameter_scope("gen/l1"):
        d = hd.get_parameter_or_create("W", (2, 3))
    assert a is b
    assert a is c
    assert a is d
    assert list(hd.get_parameters()) == ["gen/l1/W"]


def test_creation_order_grad_only_and_relative_names() -> None:
    hd.get_parameter_or_create("z", (1,))
    with hd.parameter_scope("s"):
        hd.get_parameter_or_create("m", (2,), need_grad=False)
        hd.get_parameter_or_create("a", (3,))
        assert list(hd.get_parameters(grad_only=False)) == ["m", "a"]
    assert list(hd.get_parameters()) == ["z", "s/a"]
    assert list(hd.get_parameters(grad_only=False)) == ["z", "s/m", "s/a"]


def test_initializers_dtype_and_shape_errors() -> None:
    w = hd.get_parameter_or_create("w", (3, 2), I.ConstantInitializer(2.0))
    assert w.dtype == np.float32
    assert w.need_grad
    np.testing.assert_array_equal(w.d, np.full((3, 2), 2.0))
    z = hd.get_parameter_or_create("z", (2,))
    np.testing.assert_array_equal(z.d, 0.0)
    arr = np.arange(4.0).reshape(2, 2)
    a = hd.get_parameter_or_create("a", None, arr)
    arr[0, 0] = 9  # the parameter holds a copy
    assert a.d[0, 0] == 0
    with hd.context_scope(hd.Context(dtype="float64")):
        assert hd.get_parameter_or_create("f64", (1,)).dtype == np.float64
    with pytest.raises(ValueError, match=r"'w' exists with shape \(3, 2\).*\(2, 3\)"):
        hd.get_parameter_or_create("w", (2, 3))
    with pytest.raises(ValueError, match="gave shape"):
        hd.get_parameter_or_create("b", (3,), np.zeros(2))
    with pytest.raises(ValueError, match="name"):
        hd.get_parameter_or_create("", (1,))
    with pytest.raises(TypeError, match="name"):
        hd.parameter_scope(3).__enter__()


def test_need_grad_follows_the_latest_request() -> None:
    w = hd.get_parameter_or_create("w", (2,), need_grad=True)
    assert hd.get_parameter_or_create("w", (2,), need_grad=False) is w
    assert not w.need_grad
    assert "w" not in hd.get_parameters()


def test_clear_parameters_under_a_scope() -> None:
    hd.get_parameter_or_create("keep", (1,))
    with hd.parameter_scope("drop"):
        hd.get_parameter_or_create("x", (1,))
        hd.clear_parameters()
        assert hd.get_parameters() == {}
    assert list(hd.get_parameters()) == ["keep"]


def test_save_and_load_round_trip(tmp_path) -> None:
    rng = np.random.default_rng(0)
    with hd.parameter_scope("net"):
        w = hd.get_parameter_or_create("W", (3, 2), rng.standard_normal((3, 2)))
        m = hd.get_parameter_or_create("mean", (2,), rng.standard_normal(2), need_grad=False)
    path = tmp_path / "params.npz"
    hd.save_parameters(path)
    with np.load(path) as data:  # the documented layout: name -> array
        assert sorted(data.files) == ["net/W", "net/mean"]
        np.testing.assert_array_equal(data["net/W"], w.d)
    saved_w, saved_m = w.d.copy(), m.d.copy()
    w.d[...] = 0
    m.d[...] = 0
    hd.load_parameters(path)  # overwrites in place: the same Variables
    assert hd.get_parameters(grad_only=False)["net/W"] is w
    np.testing.assert_array_equal(w.d, saved_w)
    np.testing.assert_array_equal(m.d, saved_m)
    hd.clear_parameters()
    hd.load_parameters(path)  # creates the missing ones
    params = hd.get_parameters(grad_only=False)
    np.testing.assert_array_equal(params["net/W"].d, saved_w)
    # a later request sets the flag the code asks for
    with hd.parameter_scope("net"):
        m2 = hd.get_parameter_or_create("mean", (2,), need_grad=False)
    np.testing.assert_array_equal(m2.d, saved_m)
    assert list(hd.get_parameters()) == ["net/W"]


def test_save_under_a_scope_loads_under_another(tmp_path) -> None:
    with hd.parameter_scope("a"):
        w = hd.get_parameter_or_create("W", (2,), np.array([1.0, 2.0]))
        hd.save_parameters(tmp_path / "a.npz")
    with hd.parameter_scope("b"):
        hd.load_parameters(tmp_path / "a.npz")
        np.testing.assert_array_equal(hd.get_parameters()["W"].d, w.d)


def test_load_shape_mismatch_raises(tmp_path) -> None:
    hd.get_parameter_or_create("W", (2,))
    hd.save_parameters(tmp_path / "p.npz")
    hd.clear_parameters()
    hd.get_parameter_or_create("W", (3,))
    with pytest.raises(ValueError, match=r"'W' has shape \(3,\).*\(2,\)"):
        hd.load_parameters(tmp_path / "p.npz")


def test_scopes_are_per_thread_and_the_registry_is_shared() -> None:
    barrier = threading.Barrier(4)
    shared: dict[int, hd.Variable] = {}

    def work(i: int) -> None:
        with hd.parameter_scope(f"t{i}"):
            barrier.wait()  # four scopes open at once, one per thread
            for k in range(50):
                hd.get_parameter_or_create(f"p{k}", (1,))
        shared[i] = hd.get_parameter_or_create("shared", (1,))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = list(hd.get_parameters())
    assert len(names) == 4 * 50 + 1
    assert sorted(names) == sorted([f"t{i}/p{k}" for i in range(4) for k in range(50)] + ["shared"])
    assert all(shared[i] is shared[0] for i in range(4))
