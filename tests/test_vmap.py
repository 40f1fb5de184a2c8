"""hd.vmap (issue 10): every spec row mapped against a loop, per-example gradients, nesting.

The reference is always an independent computation: the function called on each
example separately (a Python loop) and stacked, and ``hd.grad`` per example.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff import batching
from hodiff.function import REGISTRY
from hodiff.testing import all_specs, spec_ids
from hodiff.testing.spec import Spec
from tests.harness import is_float, outputs_of

SPECS = all_specs()
IDS = spec_ids(SPECS)
B = 2

#: the primitives that batch by the generic loop (docs/vmap.md lists the same)
FALLBACK = {
    "BatchNormalization", "ConvolutionFilterGrad", "EmbedWeightGrad", "MaxPooling",
    "MaxPoolingBackward", "MaxPoolingIndex",
}
#: random functions: one independent draw per example, not the loop's repeated seed
RANDOM = ("dropout",)


def test_every_primitive_has_a_batch_rule() -> None:
    missing = [c.__name__ for c in REGISTRY if getattr(c, "batch_rule", None) is None]
    assert not missing, f"primitives without a batch_rule: {missing}"


def test_fallback_list_is_short_and_documented() -> None:
    assert set(batching.fallback_primitives()) == FALLBACK
    text = open("docs/vmap.md").read()
    for name in FALLBACK:
        assert f"`{name}`" in text, f"docs/vmap.md does not list the fallback {name}"


def _batch(spec: Spec) -> tuple[list[list[np.ndarray]], list[np.ndarray]]:
    """B samples of the spec's inputs, and the inputs stacked along a new axis 0."""
    samples = [spec.sample(seed=b) for b in range(B)]
    stacked = [np.stack([s[i] for s in samples]) for i in range(len(samples[0]))]
    return samples, stacked


def _f(spec: Spec):  # noqa: ANN202
    return lambda *xs: spec.fn(*xs, **spec.kwargs)


def _as_list(y: object) -> list[hd.Variable]:
    return outputs_of(y)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vmap_values_match_loop(spec: Spec) -> None:
    if not spec.args:
        pytest.skip("no inputs to map")
    if spec.name.startswith(RANDOM):
        pytest.skip("random: checked in test_vmap_dropout_draws_per_example")
    samples, stacked = _batch(spec)
    ys = _as_list(hd.vmap(_f(spec))(*stacked))
    loops = [_as_list(spec.fn(*[hd.Variable.from_array(a) for a in s], **spec.kwargs))
             for s in samples]
    assert len(ys) == len(loops[0])
    for k, y in enumerate(ys):
        ref = np.stack([np.asarray(r[k].d) for r in loops])
        assert y.shape == ref.shape, f"output {k}: {y.shape} != {ref.shape}"
        np.testing.assert_allclose(y.d, ref, rtol=1e-10, atol=1e-12)
    if len(samples[0]) > 1:  # the inputs after the first unmapped (the same for every example)
        axes = (0,) + (None,) * (len(stacked) - 1)
        args = [stacked[0], *samples[0][1:]]
        ys = _as_list(hd.vmap(_f(spec), in_axes=axes)(*args))
        for b in range(B):
            ref = _as_list(spec.fn(stacked[0][b], *samples[0][1:], **spec.kwargs))
            for y, r in zip(ys, ref, strict=True):
                np.testing.assert_allclose(y.d[b], r.d, rtol=1e-10, atol=1e-12)


def _weights(spec: Spec, samples: list[list[np.ndarray]]) -> list[np.ndarray]:
    ys = _as_list(spec.fn(*[hd.Variable.from_array(a) for a in samples[0]], **spec.kwargs))
    rng = np.random.default_rng(7)
    return [rng.standard_normal(y.shape) for y in ys]


def _scalar(spec: Spec, ws: list[np.ndarray], xs: list[hd.Variable]) -> hd.Variable:
    total = None
    for y, w in zip(_as_list(spec.fn(*xs, **spec.kwargs)), ws, strict=True):
        if y.dtype.kind != "f":
            continue
        t = F.sum(y * y * w)  # squared: second derivatives of linear functions are not all 0
        total = t if total is None else total + t
    return total


DIFF = [(s, i) for s, i in zip(SPECS, IDS, strict=True) if s.order >= 1]


@pytest.mark.parametrize("spec", [s for s, _ in DIFF], ids=[i for _, i in DIFF])
def test_vmap_per_example_gradients_match_loop(spec: Spec) -> None:
    if spec.name.startswith(RANDOM):
        pytest.skip("random: checked in test_vmap_dropout_draws_per_example")
    samples, stacked = _batch(spec)
    ws = _weights(spec, samples)
    fl = [i for i, a in enumerate(samples[0]) if is_float(a)]

    def per_example(*xs: hd.Variable) -> list[hd.Variable]:
        return hd.grad(_scalar(spec, ws, list(xs)), [xs[i] for i in fl], allow_unused=True)

    got = _as_list(hd.vmap(per_example)(*stacked))
    for b, s in enumerate(samples):
        vs = [hd.Variable.from_array(a, need_grad=is_float(a)) for a in s]
        ref = hd.grad(_scalar(spec, ws, vs), [vs[i] for i in fl], allow_unused=True)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-9, atol=1e-11)
    # the mapped result is differentiable in turn: d/dX sum_b scalar(X[b]) row by row
    Xs = [hd.Variable.from_array(a, need_grad=is_float(a)) for a in stacked]
    ys = _as_list(hd.vmap(_f(spec))(*Xs))
    total = None
    for y, w in zip(ys, ws, strict=True):
        if y.dtype.kind == "f":
            t = F.sum(y * y * w)
            total = t if total is None else total + t
    grads = hd.grad(total, [Xs[i] for i in fl], allow_unused=True)
    for b, s in enumerate(samples):
        vs = [hd.Variable.from_array(a, need_grad=is_float(a)) for a in s]
        ref = hd.grad(_scalar(spec, ws, vs), [vs[i] for i in fl], allow_unused=True)
        for g, r in zip(grads, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-9, atol=1e-11)


SECOND = [(s, i) for s, i in zip(SPECS, IDS, strict=True) if s.order >= 2][::4]


@pytest.mark.parametrize("spec", [s for s, _ in SECOND], ids=[i for _, i in SECOND])
def test_vmap_second_order_matches_loop(spec: Spec) -> None:
    """Per-example Hessian-vector products: hd.grad of hd.grad inside vmap."""
    if spec.name.startswith(RANDOM):
        pytest.skip("random: checked in test_vmap_dropout_draws_per_example")
    samples, stacked = _batch(spec)
    ws = _weights(spec, samples)
    fl = [i for i, a in enumerate(samples[0]) if is_float(a)]
    rng = np.random.default_rng(3)
    vs_dir = [rng.standard_normal(samples[0][i].shape) for i in fl]

    def hvp(*xs: hd.Variable) -> list[hd.Variable]:
        wrt = [xs[i] for i in fl]
        gs = hd.grad(_scalar(spec, ws, list(xs)), wrt)
        dot = None
        for g, v in zip(gs, vs_dir, strict=True):
            t = F.sum(g * v)
            dot = t if dot is None else dot + t
        return hd.grad(dot, wrt, allow_unused=True)

    got = _as_list(hd.vmap(hvp)(*stacked))
    for b, s in enumerate(samples):
        ref = _as_list(hvp(*[hd.Variable.from_array(a) for a in s]))
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g.d[b], r.d, rtol=1e-9, atol=1e-11)
