"""hodiff.curvature against dense Hessians (numpy.linalg.eigvalsh of hd.hessian) on small models."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff import curvature as C
from tests.harness import gpu

SHAPES = [(5, 7), (7,), (7, 3), (3,)]  # 62 parameters: more than the Lanczos basis (restarts)


def problem(seed: int = 0, batch: int = 24, bn: bool = False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 5))
    t = rng.integers(0, 3, size=(batch, 1))
    arrays = [rng.standard_normal(s) * 0.6 for s in SHAPES]
    if bn:
        arrays += [0.1 * rng.standard_normal((1, 7)), 1.0 + 0.1 * rng.standard_normal((1, 7))]
    return x, t, arrays


def make_loss(x, t, bn: bool = False):
    mean, var = np.zeros((1, 7)), np.ones((1, 7))

    def loss(*ws: hd.Variable) -> hd.Variable:
        h = F.affine(x, ws[0], ws[1])
        if bn:
            h = F.batch_normalization(h, ws[4], ws[5], mean, var, axes=(1,))
        h = F.tanh(h)
        return F.mean(F.softmax_cross_entropy(F.affine(h, ws[2], ws[3]), t))

    return loss


def dense(loss, arrays) -> np.ndarray:
    blocks = hd.hessian(loss, tuple(arrays))
    sizes = [a.size for a in arrays]
    return np.block(
        [
            [b.reshape(m, n) for b, n in zip(row, sizes, strict=True)]
            for row, m in zip(blocks, sizes, strict=True)
        ]
    )


def flat(v) -> np.ndarray:
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list):
        return np.concatenate([a.reshape(-1) for a in v])
    return np.asarray(v).reshape(-1)


def expected(ev: np.ndarray, which: str, k: int) -> np.ndarray:
    order = {"LA": np.argsort(-ev), "SA": np.argsort(ev), "LM": np.argsort(-np.abs(ev))}[which]
    return np.sort(ev[order[:k]])[::-1]


@pytest.fixture(scope="module")
def mlp():
    x, t, arrays = problem()
    loss = make_loss(x, t)
    H = dense(loss, arrays)
    return loss, arrays, H, np.linalg.eigvalsh(H)


@pytest.mark.parametrize("which", ["LA", "SA", "LM"])
def test_eigenvalues_match_dense_hessian(mlp, which):
    loss, arrays, H, ev = mlp
    ps = [hd.Variable.from_array(a, need_grad=True) for a in arrays]
    values, vectors = C.eigenvalues(loss(*ps), ps, k=3, which=which, tol=1e-8)
    assert values.shape == (3,)
    assert np.all(np.diff(values) <= 0)  # descending
    np.testing.assert_allclose(values, expected(ev, which, 3), atol=1e-10)
    for lam, vec in zip(values, vectors, strict=True):
        assert [a.shape for a in vec] == [a.shape for a in arrays]
        v = flat(vec)
        assert abs(np.linalg.norm(v) - 1) < 1e-10
        assert np.linalg.norm(H @ v - lam * v) < 1e-6 * np.abs(ev).max()


def test_eigenvalues_accept_a_dict_and_a_variable(mlp):
    loss, arrays, _, ev = mlp
    ps = {f"p{i}": hd.Variable.from_array(a, need_grad=True) for i, a in enumerate(arrays)}
    values, vectors = C.eigenvalues(loss(*ps.values()), ps, k=2)
    np.testing.assert_allclose(values, ev[::-1][:2], rtol=1e-8)
    assert list(vectors[0]) == list(ps)
    assert vectors[0]["p0"].shape == (5, 7)
    w = hd.Variable.from_array(np.array([3.0, -1.0, 2.0]), need_grad=True)
    values, vectors = C.eigenvalues(F.sum(F.exp(w)), w, k=1, which="SA")  # H = diag(e^w)
    np.testing.assert_allclose(values, [np.exp(-1.0)], rtol=1e-12)
    np.testing.assert_allclose(np.abs(vectors[0]), [0.0, 1.0, 0.0], atol=1e-10)


def test_repeated_eigenvalues_in_a_full_basis():
    c = np.array([1.0, 5.0, 5.0, 5.0, 2.0, -3.0])  # H = diag(2 c): 10 three times
    w = hd.Variable.from_array(np.linspace(-1, 1, 6), need_grad=True)
    values, _ = C.eigenvalues(F.sum(c * w**2), w, k=4)
    np.testing.assert_allclose(values, [10.0, 10.0, 10.0, 4.0], atol=1e-12)
    values, _ = C.eigenvalues(F.sum(c * w**2), w, k=2, which="LM")
    np.testing.assert_allclose(values, [10.0, 10.0], atol=1e-12)


def test_batch_normalization_model():
    x, t, arrays = problem(seed=1, bn=True)
    loss = make_loss(x, t, bn=True)
    ev = np.linalg.eigvalsh(dense(loss, arrays))
    ps = [hd.Variable.from_array(a, need_grad=True) for a in arrays]
    values, _ = C.eigenvalues(loss(*ps), ps, k=2, which="LM", tol=1e-8)
    np.testing.assert_allclose(values, expected(ev, "LM", 2), atol=1e-9)
    estimate = C.trace(loss(*ps), ps, n_samples=60, seed=3)
    assert abs(estimate - ev.sum()) < 4 * estimate.stderr


def test_loss_over_batches_averages_the_hessians():
    x, t, arrays = problem(seed=2, batch=30)
    batches = [(x[i : i + 10], t[i : i + 10]) for i in range(0, 30, 10)]
    H = np.mean([dense(make_loss(bx, bt), arrays) for bx, bt in batches], axis=0)
    ev = np.linalg.eigvalsh(H)
    ps = [hd.Variable.from_array(a, need_grad=True) for a in arrays]

    def loss(batch):
        return make_loss(*batch)(*ps)

    values, _ = C.eigenvalues(loss, ps, k=2, data=iter(batches))  # a one-shot iterator
    np.testing.assert_allclose(values, ev[::-1][:2], rtol=1e-8)
    estimate = C.trace(loss, ps, n_samples=40, data=batches)
    assert abs(estimate - np.trace(H)) < 4 * estimate.stderr


def test_trace_within_its_standard_error(mlp):
    loss, arrays, H, _ = mlp
    ps = [hd.Variable.from_array(a, need_grad=True) for a in arrays]
    estimate = C.trace(loss(*ps), ps, n_samples=200)
    value, stderr = estimate
    assert value == float(estimate) == estimate[0]
    assert stderr == estimate.stderr == estimate[1]
    assert 0 < stderr < abs(np.trace(H))
    assert abs(value - np.trace(H)) < 4 * stderr
    per = C.trace(loss(*ps), ps, n_samples=200, per_param=True)
    assert list(per) == [0, 1, 2, 3]
    np.testing.assert_allclose(sum(per.values()), value, rtol=1e-12)  # same probes
    offsets = np.cumsum([0] + [a.size for a in arrays])
    for i, est in per.items():
        block = np.trace(H[offsets[i] : offsets[i + 1], offsets[i] : offsets[i + 1]])
        assert abs(est - block) < 4 * est.stderr + 1e-12


def test_trace_of_a_diagonal_hessian_is_exact():
    w = hd.Variable.from_array(np.array([1.0, 2.0, 3.0]), need_grad=True)
    b = hd.Variable.from_array(np.array([0.5]), need_grad=True)
    loss = F.sum(w**4) / 12 + F.sum(b**2)
    est = C.trace(loss, {"w": w, "b": b}, n_samples=5, per_param=True)
    assert float(est["w"]) == pytest.approx(14.0, abs=1e-12)
    assert est["w"].stderr == pytest.approx(0.0, abs=1e-12)
    assert float(est["b"]) == pytest.approx(2.0, abs=1e-12)
    assert C.trace(loss, [w, b], n_samples=1).stderr == float("inf")


def test_density_integrates_to_one_and_sits_on_the_eigenvalues(mlp):
    loss, arrays, _, ev = mlp
    ps = [hd.Variable.from_array(a, need_grad=True) for a in arrays]
    sigma = 0.01
    grid, values = C.density(loss(*ps), ps, n_probes=4, n_steps=100, sigma=sigma)
    assert grid.shape == values.shape
    assert np.all(values >= 0)
    np.testing.assert_allclose(
        np.sum((values[1:] + values[:-1]) * np.diff(grid)) / 2, 1.0, rtol=1e-12
    )
    # n_steps >= n: the nodes are the exact eigenvalues, so all mass is within a few sigma
    near = np.min(np.abs(grid[:, None] - ev[None, :]), axis=1) < 4 * sigma
    dt = np.diff(grid)[0]
    assert np.sum(values[near]) * dt > 0.999
    assert grid[0] < ev.min() < ev.max() < grid[-1]


def test_density_of_few_steps_still_a_density(mlp):
    loss, arrays, _, ev = mlp
    ps = [hd.Variable.from_array(a, need_grad=True) for a in arrays]
    grid = np.linspace(ev.min() - 1, ev.max() + 1, 500)
    g, values = C.density(loss(*ps), ps, n_probes=3, n_steps=10, grid=grid, seed=1)
    assert g is not grid
    np.testing.assert_array_equal(g, grid)
    np.testing.assert_allclose(np.sum((values[1:] + values[:-1]) * np.diff(g)) / 2, 1.0)
    # Gauss quadrature is exact for the mean: int t phi(t) = mean_v v^T H v, near tr(H) / n
    mean = np.sum((values * g)[1:] + (values * g)[:-1]) * (g[1] - g[0]) / 2
    assert abs(mean - ev.mean()) < 0.5 * np.abs(ev).max()


def test_static_graph_and_float32():
    x, t, arrays = problem(seed=4)
    loss = make_loss(x, t)
    ev = np.linalg.eigvalsh(dense(loss, arrays))
    with hd.auto_forward(False):
        ps = [hd.Variable(a.shape, need_grad=True, dtype=np.float64) for a in arrays]
        y = loss(*ps)
    for p, a in zip(ps, arrays, strict=True):
        p.d = a
    values, _ = C.eigenvalues(y, ps, k=1)
    np.testing.assert_allclose(values, ev[-1:], rtol=1e-8)
    ps32 = [hd.Variable.from_array(a.astype(np.float32), need_grad=True) for a in arrays]
    values, vectors = C.eigenvalues(loss(*ps32), ps32, k=1, tol=1e-4)
    np.testing.assert_allclose(values, ev[-1:], rtol=1e-4)
    assert vectors[0][0].dtype == np.float32


def test_errors_name_the_argument():
    w = hd.Variable.from_array(np.ones(3), need_grad=True)
    c = hd.Variable.from_array(np.ones(3))
    u = hd.Variable.from_array(np.ones(2), need_grad=True)
    loss = F.sum(w**3)
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 3\]"):
        C.eigenvalues(loss, w, k=4)
    with pytest.raises(ValueError, match="which must be one of"):
        C.eigenvalues(loss, w, which="BE")
    with pytest.raises(ValueError, match=r"params\['c'\] .* need_grad=False"):
        C.trace(F.sum(w * c), {"w": w, "c": c})
    with pytest.raises(ValueError, match=r"does not depend on params\[1\]"):
        C.trace(loss, [w, u])
    with pytest.raises(ValueError, match="must be a scalar"):
        C.density(w**2, w)
    with pytest.raises(TypeError, match="pass data="):
        C.eigenvalues(lambda b: loss, w)
    with pytest.raises(ValueError, match="data has no batches"):
        C.trace(lambda b: loss, w, data=[])
    with pytest.raises(TypeError, match="params must be a Variable"):
        C.trace(loss, np.ones(3))


def test_plot_density(tmp_path):
    pytest.importorskip("matplotlib")
    w = hd.Variable.from_array(np.array([1.0, 2.0, 3.0]), need_grad=True)
    grid, values = C.density(F.sum(w**4) / 12, w, sigma=0.1)
    path = tmp_path / "density.png"
    assert C.plot_density(grid, values, path, eigenvalues=[1, 4, 9], sigma=0.1) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["density.png"]


def test_demo_shows_curvature_and_check_function(capsys):
    from hodiff.__main__ import main

    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "5. curvature: top Hessian eigenvalue" in out
    assert "6. check_function: custom Softplus passes 8/8 checks" in out
    assert "fails: finite differences, order 2, accumulate vs overwrite" in out


def test_cupy_matches_numpy(mlp):
    cp = gpu()
    loss, arrays, H, ev = mlp
    ps = [hd.Variable.from_array(cp.asarray(a), need_grad=True) for a in arrays]
    values, vectors = C.eigenvalues(loss(*ps), ps, k=2, which="LM", tol=1e-8)
    np.testing.assert_allclose(values, expected(ev, "LM", 2), atol=1e-10)
    assert isinstance(vectors[0][0], cp.ndarray)
    v = np.concatenate([cp.asnumpy(a).reshape(-1) for a in vectors[0]])
    assert np.linalg.norm(H @ v - values[0] * v) < 1e-6 * np.abs(ev).max()
    estimate = C.trace(loss(*ps), ps, n_samples=100)
    assert abs(estimate - np.trace(H)) < 4 * estimate.stderr
    grid, values = C.density(loss(*ps), ps, n_probes=2, n_steps=100, sigma=0.01)
    assert isinstance(grid, np.ndarray)
    near = np.min(np.abs(grid[:, None] - ev[None, :]), axis=1) < 0.04
    assert np.sum(values[near]) * (grid[1] - grid[0]) > 0.999
