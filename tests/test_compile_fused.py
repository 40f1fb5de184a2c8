"""hd.jit's backend "fused" (the jit extra: llvmlite): every spec row's values and derivatives
at orders 1-3 equal the uncompiled graph's to 1e-12 in float64; every declared scalar kernel
equals its primitive's forward_impl (numpy evaluation of the expression); clusters, broadcast,
effects, the disk cache and the ImportError without the extra.

Expected values come from the uncompiled graph or numpy, never from the generated code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.engine.function import REGISTRY, Function
from hodiff.testing.harness import is_float, outputs_of
from hodiff.testing.spec import Spec
from hodiff.transforms.compile import cache, codegen, fused
from hodiff.transforms.compile.codegen import attributes_of, kernel_of, reference
from tests.test_compile import SPECS, _close, _projections, _rows, _static_reference

ROOT = Path(__file__).resolve().parents[1]

needs_jit = pytest.mark.skipif(
    not fused.available(), reason='the jit extra (llvmlite) is not installed: pip install ".[jit]"'
)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path_factory.getbasetemp() / "hodiff-cache"
    monkeypatch.setenv("HODIFF_CACHE_DIR", str(d))
    return d


# ---------------------------------------------------------------- the spec table
@needs_jit
@pytest.mark.parametrize("spec", _rows(SPECS))
def test_spec_row_fused_equals_uncompiled(spec: Spec) -> None:
    """Values and derivatives of orders 1-3 recorded inside f, fused, equal the static
    graph's at a first and a second call.
    """
    xs = spec.sample()
    h, _ = _projections(spec, xs, min(spec.order, 3))
    reference_run = _static_reference(h, xs)
    g = hd.jit(h, backend="fused")
    for call in ("first", "second"):
        want = reference_run()
        got = g(*[x.copy() for x in xs])
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            _close(a, b, f"{spec.name}: result {k}, {call} call")


@needs_jit
@pytest.mark.parametrize("spec", _rows([s for s in SPECS if s.order >= 1]))
def test_spec_row_derivatives_of_the_fused_function(spec: Spec) -> None:
    """hd.grad of a fused function's results at orders 1-3 equals the uncompiled one's."""
    xs = spec.sample()
    plain = outputs_of(spec.fn(*[hd.Variable.from_array(x.copy()) for x in xs], **spec.kwargs))
    if any(getattr(type(f), "effects", False) for f in hd.engine.api.topological_order(plain)):
        pytest.skip("a node with effects: compared by the recorded-inside test")
    h, _ = _projections(spec, xs, 0)
    us = [np.random.default_rng(5).standard_normal(o.shape) for o in plain]

    def derivatives(f: Callable[..., Any]) -> list[Any]:
        a = [hd.Variable.from_array(x.copy(), need_grad=is_float(x)) for x in xs]
        wrt = [v for v in a if v.need_grad]
        if spec.fn is F.batch_normalization and spec.kwargs.get("batch_stat", True):
            wrt = wrt[:3]
        s = sum(F.sum(y * u) for y, u in zip(f(*a), us, strict=True) if y.dtype.kind == "f")
        out = []
        for _ in range(min(spec.order, 3)):
            gs = hd.grad(s, wrt, allow_unused=True)
            out.append([g.d.copy() for g in gs])
            s = sum(F.sum(g * F.sin(v)) for g, v in zip(gs, wrt, strict=True))
        return out

    want = derivatives(h)
    got = derivatives(hd.jit(h, backend="fused"))
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        scale = max(float(np.max(np.abs(w), initial=0.0)) for w in b)
        for i, (ai, bi) in enumerate(zip(a, b, strict=True)):
            _close(ai, bi, f"{spec.name}: order {k + 1}, input {i}", scale)


# ---------------------------------------------------------------- scalar kernels
def _sample(cls: type[Function], expr: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs in the primitive's domain: positive for logs and powers, in (-1, 1) for arcsin."""
    n = 3 if "where" in expr else 2 if "x1" in expr or "xs" in expr else 1
    lo, hi = (0.2, 0.9) if any(f in expr for f in ("arc", "log", "sqrt", "**")) else (-2.0, 2.0)
    if "arccosh" in expr:
        lo, hi = 1.1, 3.0
    xs = [rng.uniform(lo, hi, (3, 4)) for _ in range(n)]
    if "where" in expr:
        xs[0] = xs[0] > 0.5
    return xs


def _instances(cls: type[Function]) -> list[Function]:
    """Instances with typical static arguments."""
    for kwargs in ({}, {"val": 0.7}, {"val": 2.0, "beta": 1.5}, {"beta": 1.5}):
        try:
            return [cls(**kwargs)]
        except TypeError:
            continue
    return []


def test_every_scalar_kernel_equals_its_forward() -> None:
    """Walks the registry: each primitive that declares a scalar kernel computes, through
    forward_impl, what numpy computes from the expression (float64 and float32).
    """
    declared = [c for c in REGISTRY if c.scalar_kernel is not None]
    assert len(declared) >= 35
    rng = np.random.default_rng(0)
    checked = 0
    for cls in declared:
        for node in _instances(cls):
            expr = kernel_of(node)
            assert expr is not None, cls.__name__
            attrs = attributes_of(node, expr)
            assert attrs is not None, f"{cls.__name__}: attributes of {expr!r}"
            for dtype in (np.float64, np.float32):
                xs = [x if x.dtype == bool else x.astype(dtype) for x in _sample(cls, expr, rng)]
                ys: list[Any] = [None]
                node.forward_impl(xs, ys)
                want = np.asarray(reference(expr, xs, attrs))
                tol = 1e-13 if dtype == np.float64 else 1e-5
                np.testing.assert_allclose(ys[0], want, rtol=tol, err_msg=f"{cls.__name__} {dtype}")
                checked += 1
    assert checked >= 2 * len(declared) - 2


def test_a_subclass_with_its_own_forward_is_not_fused() -> None:
    class Twice(F.arithmetic.MulScalar, register=False):
        def forward_impl(self, inputs: Any, outputs: list[Any]) -> None:
            outputs[0] = inputs[0] * self.val * 2.0

    assert kernel_of(Twice(val=1.5)) is None
    assert kernel_of(F.arithmetic.MulScalar(val=1.5)) == "x0 * val"


# ---------------------------------------------------------------- clusters and kernels
def _chain(x: Any) -> Any:
    y = x
    for _ in range(20):
        y = F.tanh(y) * 1.01 + 0.1
    (g,) = hd.grad(F.sum(y), x)
    return g


def _numpy_chain_grad(x: np.ndarray) -> np.ndarray:
    g = np.ones_like(x)
    ys = []
    y = x
    for _ in range(20):
        t = np.tanh(y)
        ys.append(t)
        y = t * 1.01 + 0.1
    for t in reversed(ys):
        g = g * 1.01 * (1 - t * t)
    return g


@needs_jit
def test_a_chain_and_its_gradient_are_one_kernel() -> None:
    x = np.linspace(-1, 1, 16)
    g = hd.jit(_chain, backend="fused")
    np.testing.assert_allclose(g(x), _numpy_chain_grad(x), rtol=1e-12)
    stats = g.lower(x)
    assert stats.backend == "fused"
    assert len(stats.kernels) == 1
    assert stats.kernels[0] == stats.nodes_after
    assert stats.compile_seconds > 0
    assert "1 kernels (fused)" in str(stats)


@needs_jit
def test_broadcast_inside_a_kernel_and_float32() -> None:
    def f(a: Any, b: Any, c: Any) -> Any:
        return F.tanh(a * b + c) * F.exp(-b) + F.maximum2(a, c)

    rng = np.random.default_rng(1)
    for dtype, tol in ((np.float64, 1e-13), (np.float32, 1e-5)):
        a = rng.standard_normal((3, 1, 5)).astype(dtype)
        b = rng.standard_normal((4, 1)).astype(dtype)
        c = rng.standard_normal((5,)).astype(dtype)
        want = np.tanh(a * b + c) * np.exp(-b) + np.maximum(a, c)
        g = hd.jit(f, backend="fused")
        got = g(a, b, c)
        assert got.dtype == dtype
        assert got.shape == (3, 4, 5)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        flipped = a[:, :, ::-1]
        np.testing.assert_allclose(g(flipped, b, c), f_np(flipped, b, c), rtol=tol, atol=tol)
        assert g.lower(a, b, c).kernels.count(1) <= 1  # one cluster for the (3, 4, 5) loop


def f_np(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.tanh(a * b + c) * np.exp(-b) + np.maximum(a, c)


@needs_jit
def test_non_contiguous_and_nan_arguments() -> None:
    g = hd.jit(lambda x: F.maximum2(F.tanh(x) * 2.0, F.minimum_scalar(x, 0.5)), backend="fused")
    x = np.array([[0.1, np.nan, -3.0, 4.0], [np.inf, -np.inf, 0.0, 0.7]])
    xt = x.T  # not C-contiguous
    want = np.maximum(np.tanh(xt) * 2.0, np.minimum(xt, 0.5))
    np.testing.assert_allclose(g(xt), want, rtol=1e-13)  # NaN where numpy gives NaN


@needs_jit
def test_where_with_a_mask_and_effects_stay_outside_kernels() -> None:
    def f(x: Any) -> Any:
        noise = F.randn(shape=x.shape)  # a draw: effects, never fused, folded or dropped
        return F.where(x > 0.0, F.tanh(x) + noise * 0.0, F.exp(x) * 2.0)

    x = np.array([-1.0, 0.5, 2.0, -0.25])
    g = hd.jit(f, backend="fused")
    np.testing.assert_allclose(g(x), np.where(x > 0, np.tanh(x), np.exp(x) * 2.0), rtol=1e-13)
    hd.seed(7)
    a = hd.jit(lambda x: F.randn(shape=x.shape) + F.tanh(x), backend="fused")(x)
    hd.seed(7)
    b = F.randn(shape=x.shape).d + np.tanh(x)
    np.testing.assert_allclose(a, b, rtol=1e-13)


@needs_jit
def test_check_true_compares_fused_kernels() -> None:
    g = hd.jit(_chain, backend="fused", check=True)
    x = np.linspace(-1, 1, 8)
    np.testing.assert_allclose(g(x), _numpy_chain_grad(x), rtol=1e-12)


# ---------------------------------------------------------------- the disk cache
@needs_jit
@pytest.mark.parametrize("kind", ["so", "o"])
def test_the_disk_cache_is_written_read_and_rebuilt(
    kind: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """A shared library where a linker works (``so``), else LLVM's object code (``o``)."""
    monkeypatch.setenv("HODIFF_CACHE_DIR", str(tmp_path))
    if kind == "o":
        monkeypatch.setattr(cache, "_linker", lambda: None)
    elif cache._linker() is None:
        pytest.skip("no C compiler driver to link a shared library")
    x = np.linspace(-1, 1, 16)
    want = _numpy_chain_grad(x)
    g = hd.jit(_chain, backend="fused")
    np.testing.assert_allclose(g(x), want, rtol=1e-12)
    assert [f.suffix for f in tmp_path.iterdir()] == [f".{kind}"]
    files = list(tmp_path.glob(f"*.{kind}"))
    assert len(files) == 1
    assert not g.lower(x).cached
    g2 = hd.jit(_chain, backend="fused")  # a new function object: records again, loads
    np.testing.assert_allclose(g2(x), want, rtol=1e-12)
    assert g2.lower(x).cached
    good = files[0].read_bytes()
    for bad in (good[: len(good) // 2], good[:-8] + b"\0" * 8, b"not an object file"):
        files[0].write_bytes(bad)
        g3 = hd.jit(_chain, backend="fused")
        np.testing.assert_allclose(g3(x), want, rtol=1e-12)
        assert not g3.lower(x).cached  # rebuilt
        assert files[0].read_bytes() == good  # and replaced


_NO_LLVM = """
import sys
import numpy as np
import hodiff as hd
from tests.test_compile_fused import _chain
x = np.linspace(-1, 1, 16)
g = hd.jit(_chain, backend="fused")
y = g(x)
print(g.lower(x).cached, "llvmlite.binding" in sys.modules, repr(y.tolist()))
"""


@needs_jit
def test_a_library_the_system_refuses_falls_back_to_object_code(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A shared library that cannot be opened (a ``noexec`` temporary directory): the
    kernels are built as object code and loaded by LLVM; the values are right.
    """
    monkeypatch.setenv("HODIFF_CACHE_DIR", str(tmp_path))

    def refuse(library: bytes) -> None:
        raise OSError("failed to map segment from shared object")

    monkeypatch.setattr(cache, "Shared", refuse)
    x = np.linspace(-1, 1, 16)
    g = hd.jit(_chain, backend="fused")
    np.testing.assert_allclose(g(x), _numpy_chain_grad(x), rtol=1e-12)
    assert list(tmp_path.glob("*.o"))


@needs_jit
def test_a_new_process_with_a_warm_cache_never_loads_llvm(tmp_path: Path) -> None:
    """The shared library read from the cache is opened by ctypes: no LLVM in the process."""
    if cache._linker() is None:
        pytest.skip("no C compiler driver to link a shared library")
    env = dict(os.environ, HODIFF_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", _NO_LLVM], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        cached, llvm, y = out.stdout.split(" ", 2)
        runs.append((cached, llvm, np.array(eval(y))))
    assert runs[0][:2] == ("False", "True")  # built: LLVM compiled it
    assert runs[1][:2] == ("True", "False")  # read: no LLVM
    x = np.linspace(-1, 1, 16)
    np.testing.assert_allclose(runs[1][2], _numpy_chain_grad(x), rtol=1e-12)


def test_cache_dir_default_and_variable(monkeypatch: Any) -> None:
    monkeypatch.delenv("HODIFF_CACHE_DIR", raising=False)
    assert cache.cache_dir() == Path.home() / ".cache" / "hodiff"
    monkeypatch.setenv("HODIFF_CACHE_DIR", "/tmp/somewhere")
    assert cache.cache_dir() == Path("/tmp/somewhere")


def test_fused_without_the_extra_raises_and_auto_replays(monkeypatch: Any) -> None:
    monkeypatch.setattr(fused, "available", lambda: False)
    with pytest.raises(ImportError, match=r"'jit'.*pip install"):
        hd.jit(_chain, backend="fused")
    with pytest.raises(ImportError, match="jit"):
        hd.compile(hd.Variable((2,)), backend="fused")
    g = hd.jit(_chain)
    assert g.lower(np.zeros(3)).backend == "replay"


# ---------------------------------------------------------------- vectors (libmvec)
#: (loop shape, the second input's shape): whole vectors and a remainder, an input read
#: lane by lane (11 elements a row), contiguous along the lanes (16), one element per row
_VECTOR_SHAPES = [((5, 11), (5, 11)), ((5, 11), (11,)), ((3, 16), (16,)), ((3, 16), (3, 1))]


@needs_jit
@pytest.mark.parametrize("lanes", ["host", "lane by lane", "scalar"])
def test_every_scalar_kernel_fused_on_vectors_and_remainder(lanes: str, monkeypatch: Any) -> None:
    """Each declared scalar kernel, fused over loops longer than a vector (the vector loop
    with libmvec's functions, then the scalar remainder), equals its forward_impl (numpy):
    1e-12 in float64, 1e-5 in float32; also with every function called lane by lane (a
    libmvec without them) and with scalar loops only (no libmvec).
    """
    machine = cache.Machine.get()
    if lanes != "host" and machine.vector is not None:
        vector = (
            None if lanes == "scalar" else codegen.Vector(machine.vector.bits, "e", frozenset())
        )
        monkeypatch.setattr(machine, "vector", vector)
    rng = np.random.default_rng(4)
    declared = [c for c in REGISTRY if c.scalar_kernel is not None]
    checked = 0
    for cls in declared:
        if not _instances(cls):
            continue
        expr = kernel_of(_instances(cls)[0])
        assert expr is not None
        for shape, other in _VECTOR_SHAPES:
            for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
                xs = [x.astype(dtype) for x in _sample(cls, expr, rng)]
                xs = [np.resize(x, shape if k == 0 else other) for k, x in enumerate(xs)]
                xs = [x > 0.5 if "where" in expr and k == 0 else x for k, x in enumerate(xs)]
                if "where" in expr:
                    xs[0] = np.resize(xs[0], shape)
                ys: list[Any] = [None]
                _instances(cls)[0].forward_impl(xs, ys)
                g = hd.jit(lambda *v, cls=cls: _instances(cls)[0](*v), backend="fused")
                got = g(*xs)
                np.testing.assert_allclose(
                    got, ys[0], rtol=tol, atol=tol * 1e-3, err_msg=f"{cls.__name__} {shape} {other}"
                )
                checked += 1
    assert checked >= 8 * 30
