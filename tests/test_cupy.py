"""Every spec on cupy == on numpy. Runs when cupy and a GPU are present; skips otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
from hodiff.testing import all_specs
from tests.harness import is_float, outputs_of

cp = pytest.importorskip("cupy")
try:
    if cp.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("no GPU", allow_module_level=True)
except Exception:  # cupy installed without a driver
    pytest.skip("no usable GPU", allow_module_level=True)

SPECS = all_specs()


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_cupy_matches_numpy(spec) -> None:
    xs = spec.sample()
    results = []
    for to in (np.asarray, cp.asarray):
        vs = [hd.Variable.from_array(to(x), need_grad=is_float(x) and spec.order > 0)
              for x in xs]
        ys = outputs_of(spec.fn(*vs, **spec.kwargs))
        grads = []
        if spec.order > 0:
            root = ys[0]
            for o in ys[1:]:
                root = root + o if o.shape == root.shape else root
            root.backward()
            grads = [v.g for v in vs if v.need_grad]
        results.append(([o.d for o in ys], grads))
    (ys_np, gs_np), (ys_cp, gs_cp) = results
    for a, b in zip(ys_np, ys_cp, strict=True):
        assert isinstance(b, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-10, atol=1e-12)
    for a, b in zip(gs_np, gs_cp, strict=True):
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-10, atol=1e-12)


def test_context_backend_cupy_makes_cupy_arrays() -> None:
    with hd.context_scope(hd.Context(backend="cupy", dtype="float64")):
        x = hd.Variable((2, 3))
        assert isinstance(x.d, cp.ndarray)
