"""hd.vmap on cupy == on numpy (every spec row, per-example gradients for a sample, Hessians).

Runs where cupy and a GPU are present; skips otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.testing import all_specs, spec_ids
from tests.harness import is_float, outputs_of

cp = pytest.importorskip("cupy")
try:
    if cp.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("no GPU", allow_module_level=True)
except Exception:  # cupy installed without a driver
    pytest.skip("no usable GPU", allow_module_level=True)

SPECS = [s for s in all_specs() if s.args and not s.name.startswith("dropout")]
IDS = spec_ids(SPECS)


def _stacked(spec):
    samples = [spec.sample(seed=b) for b in range(2)]
    return [np.stack([s[i] for s in samples]) for i in range(len(samples[0]))]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vmap_on_cupy_matches_numpy(spec) -> None:
    xs = _stacked(spec)
    fl = [i for i, a in enumerate(xs) if is_float(a)]

    def f(*vs):
        ys = outputs_of(spec.fn(*vs, **spec.kwargs))
        if spec.order < 1 or not fl:
            return ys
        total = None
        for y in ys:
            if y.dtype.kind == "f":
                t = F.sum(y * y)
                total = t if total is None else total + t
        return ys + hd.grad(total, [vs[i] for i in fl], allow_unused=True)

    results = []
    for to in (np.asarray, cp.asarray):
        outs = outputs_of(hd.vmap(f)(*[to(x) for x in xs]))
        results.append([o.d for o in outs])
    for a, b in zip(*results, strict=True):
        assert isinstance(b, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-9, atol=1e-11)


def test_hessian_and_batched_hvp_on_cupy() -> None:
    rng = np.random.default_rng(0)
    a, x, v = rng.standard_normal((20, 6)), rng.standard_normal(6), rng.standard_normal((3, 6))

    def lse(xp):
        return lambda z: F.logsumexp(F.matmul(hd.Variable.from_array(xp.asarray(a)), z))

    h_np = hd.hessian(lse(np), x)
    h_cp = hd.hessian(lse(cp), cp.asarray(x), chunk_size=4)
    assert isinstance(h_cp, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(h_cp), h_np, atol=1e-12)
    _, hv = hd.hvp(lse(cp), cp.asarray(x), cp.asarray(v))
    np.testing.assert_allclose(cp.asnumpy(hv), v @ h_np, atol=1e-12)
