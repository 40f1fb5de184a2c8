"""Solvers against reference formulas written here in numpy (always) and against torch.optim
(when torch is installed), in float64 over many steps with weight decay, clipping and a
learning-rate change; save/load continuing bit for bit; in-place updates."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S
from tests.harness import gpu

SHAPES = [(3, 4), (5,), ()]
STEPS = 40
LR_CHANGE = 20  # the learning rate is halved before this step


def initial(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


def grad_of(ws: list[np.ndarray]) -> list[np.ndarray]:
    """The gradient of sum_k sum(0.5 a_k w_k^2 + sin(3 w_k) / 3), a_k = k + 1: depends on w."""
    return [(k + 1) * w + np.cos(3 * w) for k, w in enumerate(ws)]


# ---------------------------------------------------------------- numpy references
def ref_rule(kind: str, opts: dict, lr: float, w, g, st, t):
    """One step of each rule as the papers / torch docs write it (not in place)."""
    if kind == "Sgd":
        return w - lr * g
    if kind in ("Momentum", "Nesterov"):
        mu = opts.get("momentum", 0.9)
        b = g if t == 1 else mu * st["b"] + g
        st["b"] = b
        return w - lr * (g + mu * b if kind == "Nesterov" else b)
    if kind == "Adagrad":
        st["s"] = st.get("s", 0) + g**2
        return w - lr * g / (np.sqrt(st["s"]) + opts.get("eps", 1e-10))
    if kind == "RMSprop":
        a = opts.get("decay", 0.99)
        st["s"] = a * st.get("s", 0) + (1 - a) * g**2
        return w - lr * g / (np.sqrt(st["s"]) + opts.get("eps", 1e-8))
    if kind in ("Adam", "AdamW"):
        b1, b2 = opts.get("beta1", 0.9), opts.get("beta2", 0.999)
        eps = opts.get("eps", 1e-8)
        if kind == "AdamW":
            w = w * (1 - lr * opts.get("wd", 1e-2))
        st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
        st["v"] = b2 * st.get("v", 0) + (1 - b2) * g**2
        m_hat = st["m"] / (1 - b1**t)
        v_hat = st["v"] / (1 - b2**t)
        return w - lr * m_hat / (np.sqrt(v_hat) + eps)
    raise AssertionError(kind)


def run_reference(kind, opts, lr, decay, clip, steps=STEPS):
    ws = initial()
    states = [{} for _ in ws]
    norms = []
    for t in range(1, steps + 1):
        if t == LR_CHANGE:
            lr = lr / 2
        gs = grad_of(ws)
        if clip is not None:
            total = np.sqrt(sum(np.sum(g**2) for g in gs))
            norms.append(total)
            gs = [g * min(1.0, clip / (total + 1e-6)) for g in gs]
        gs = [g + decay * w for g, w in zip(gs, ws, strict=True)]
        ws = [
            ref_rule(kind, opts, lr, w, g, st, t) for w, g, st in zip(ws, gs, states, strict=True)
        ]
    return ws, norms


def run_hodiff(kind, opts, lr, decay, clip, steps=STEPS, solver=None, params=None, start=1):
    if params is None:
        params = {
            f"p{k}": hd.Variable.from_array(w, need_grad=True) for k, w in enumerate(initial())
        }
    if solver is None:
        solver = getattr(S, kind)(lr, **opts)
        solver.set_parameters(params)
    norms = []
    for t in range(start, start + steps):
        if t == LR_CHANGE:
            solver.set_learning_rate(solver.learning_rate() / 2)
        solver.zero_grad()
        for p, g in zip(params.values(), grad_of([p.d for p in params.values()]), strict=True):
            p.g = g
        if clip is not None:
            norms.append(solver.clip_grad_by_norm(clip))
        if decay:
            solver.weight_decay(decay)
        solver.update()
    return [p.d for p in params.values()], norms, solver, params


CASES = [
    ("Sgd", {}, 0.05),
    ("Momentum", {"momentum": 0.8}, 0.03),
    ("Nesterov", {"momentum": 0.9}, 0.02),
    ("Adagrad", {"eps": 1e-10}, 0.1),
    ("RMSprop", {"decay": 0.95, "eps": 1e-8}, 0.01),
    ("Adam", {"beta1": 0.8, "beta2": 0.99, "eps": 1e-8}, 0.05),
    ("Adam", {"beta1": 0.3, "beta2": 0.9, "eps": 1e-6}, 0.05),  # torch's other lerp branch
    ("AdamW", {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "wd": 0.1}, 0.05),
]
IDS = [f"{k}-{i}" for i, (k, _, _) in enumerate(CASES)]


@pytest.mark.parametrize(("kind", "opts", "lr"), CASES, ids=IDS)
@pytest.mark.parametrize(("decay", "clip"), [(0.0, None), (0.01, True)], ids=["plain", "wd+clip"])
def test_against_numpy_reference(kind, opts, lr, decay, clip) -> None:
    if kind == "AdamW" and decay:
        decay = 0.0  # AdamW decays the weights itself
    if clip:  # a limit between the first and the last gradient norms of an unclipped run
        _, unclipped = run_reference(kind, opts, lr, decay, np.inf)
        clip = float(0.8 * unclipped[0] + 0.2 * unclipped[-1])
    ref, ref_norms = run_reference(kind, opts, lr, decay, clip)
    got, norms, _, _ = run_hodiff(kind, opts, lr, decay, clip)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(norms, ref_norms, rtol=1e-13)
    if clip is not None:  # the clipping was active on some steps and not on others
        assert min(norms) < clip < max(norms)


TORCH = {
    "Sgd": lambda torch, ps, lr, o, wd: torch.optim.SGD(ps, lr=lr, weight_decay=wd),
    "Momentum": lambda torch, ps, lr, o, wd: torch.optim.SGD(
        ps, lr=lr, momentum=o["momentum"], dampening=0, weight_decay=wd
    ),
    "Nesterov": lambda torch, ps, lr, o, wd: torch.optim.SGD(
        ps, lr=lr, momentum=o["momentum"], nesterov=True, weight_decay=wd
    ),
    "Adagrad": lambda torch, ps, lr, o, wd: torch.optim.Adagrad(
        ps, lr=lr, eps=o["eps"], weight_decay=wd
    ),
    "RMSprop": lambda torch, ps, lr, o, wd: torch.optim.RMSprop(
        ps, lr=lr, alpha=o["decay"], eps=o["eps"], weight_decay=wd
    ),
    "Adam": lambda torch, ps, lr, o, wd: torch.optim.Adam(
        ps, lr=lr, betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=wd
    ),
    "AdamW": lambda torch, ps, lr, o, wd: torch.optim.AdamW(
        ps, lr=lr, betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["wd"]
    ),
}


@pytest.mark.parametrize(("kind", "opts", "lr"), CASES, ids=IDS)
def test_against_torch_optim(kind, opts, lr) -> None:
    torch = pytest.importorskip("torch")
    decay = 0.0 if kind == "AdamW" else 0.01
    clip = 2.0
    ps = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in initial()]
    opt = TORCH[kind](torch, ps, lr, opts, decay)
    torch_norms = []
    for t in range(1, STEPS + 1):
        if t == LR_CHANGE:
            for group in opt.param_groups:
                group["lr"] = group["lr"] / 2
        opt.zero_grad()
        for p, g in zip(ps, grad_of([p.detach().numpy() for p in ps]), strict=True):
            p.grad = torch.tensor(g)
        torch_norms.append(float(torch.nn.utils.clip_grad_norm_(ps, clip)))
        opt.step()
    got, norms, _, _ = run_hodiff(kind, opts, lr, decay, clip)
    for a, p in zip(got, ps, strict=True):
        np.testing.assert_allclose(a, p.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(norms, torch_norms, rtol=1e-13)


@pytest.mark.parametrize(("kind", "opts", "lr"), CASES, ids=IDS)
def test_save_and_load_continue_bit_for_bit(kind, opts, lr, tmp_path) -> None:
    hd.clear_parameters()
    try:
        for k, w in enumerate(initial()):
            hd.get_parameter_or_create(f"p{k}", w.shape, w)
        params = hd.get_parameters()
        _, _, solver, _ = run_hodiff(kind, opts, lr, 0.01, 2.0, steps=15, params=params)
        hd.save_parameters(tmp_path / "params.npz")
        solver.save_states(tmp_path / "states.npz")
        expected, _, _, _ = run_hodiff(
            kind, opts, lr, 0.01, 2.0, steps=30, solver=solver, params=params, start=16
        )
        expected = [e.copy() for e in expected]
        # a fresh process: parameters and a new solver from the files
        hd.clear_parameters()
        hd.load_parameters(tmp_path / "params.npz")
        params2 = hd.get_parameters()
        solver2 = getattr(S, kind)(lr * 3, **opts)
        solver2.set_parameters(params2)
        solver2.load_states(tmp_path / "states.npz")
        assert solver2.learning_rate() == lr
        got, _, _, _ = run_hodiff(
            kind, opts, lr, 0.01, 2.0, steps=30, solver=solver2, params=params2, start=16
        )
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)
    finally:
        hd.clear_parameters()


def test_training_through_backward_in_place_and_float32() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], dtype=np.float32) + 0.3
    w = hd.Variable.from_array(np.zeros((3, 1), np.float32), need_grad=True)
    b = hd.Variable.from_array(np.zeros((1,), np.float32), need_grad=True)
    solver = S.Adam(lr=0.05)
    solver.set_parameters({"w": w, "b": b})
    wd, bd = w.d, b.d
    for _ in range(400):
        solver.zero_grad()
        F.mean(F.squared_error(F.affine(x, w, b), y)).backward()
        solver.update()
    assert w.d is wd  # updated in place
    assert b.d is bd
    assert w.d.dtype == np.float32
    np.testing.assert_allclose(w.d.ravel(), [1.0, -2.0, 0.5], atol=1e-3)
    np.testing.assert_allclose(b.d, [0.3], atol=1e-3)


def test_parameters_without_gradient_are_skipped_like_torch() -> None:
    a = hd.Variable.from_array(np.ones(2), need_grad=True)
    b = hd.Variable.from_array(np.ones(2), need_grad=True)
    solver = S.Adam(lr=0.1)
    solver.set_parameters({"a": a, "b": b})
    solver.zero_grad()
    F.sum(a * a).backward()  # b unused: no gradient
    solver.update()
    np.testing.assert_array_equal(b.d, 1.0)
    assert a.d[0] < 1.0
    solver.zero_grad()
    F.sum(b * b).backward()
    solver.update()  # b's first step: the full bias-corrected step lr * sign(g)
    np.testing.assert_allclose(b.d, 1.0 - 0.1, rtol=1e-6)


def test_clip_inf_nan_and_learning_rate() -> None:
    a = hd.Variable.from_array(np.zeros(2), need_grad=True)
    b = hd.Variable.from_array(np.zeros(1), need_grad=True)
    solver = S.Sgd(0.1)
    solver.set_parameters({"a": a, "b": b})
    a.g, b.g = np.array([3.0, 0.0]), np.array([4.0])
    assert solver.clip_grad_by_norm(10.0) == pytest.approx(5.0)
    np.testing.assert_array_equal(a.g, [3.0, 0.0])  # below the limit: untouched
    assert solver.clip_grad_by_norm(1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(np.concatenate([a.g, b.g]), np.array([3.0, 0.0, 4.0]) / 5, rtol=1e-6)
    assert not solver.check_inf_or_nan_grad()
    b.g = np.array([np.nan])
    assert solver.check_inf_or_nan_grad()
    b.g = np.array([-np.inf])
    assert solver.check_inf_or_nan_grad()
    assert solver.learning_rate() == 0.1
    solver.set_learning_rate(0.02)
    assert solver.learning_rate() == 0.02


@pytest.mark.parametrize(
    ("call", "exc", "words"),
    [
        (lambda: S.Sgd(-1.0), ValueError, "Sgd: lr"),
        (lambda: S.Adam(beta1=1.0), ValueError, "Adam: beta1"),
        (lambda: S.RMSprop(decay=1.5), ValueError, "RMSprop: decay"),
        (lambda: S.Momentum(0.1, momentum="a"), TypeError, "Momentum: momentum"),
        (lambda: S.Sgd(0.1).set_parameters({"w": np.zeros(2)}), TypeError, "'w'"),
        (lambda: S.Sgd(0.1).set_parameters(3), TypeError, "dict"),
    ],
)
def test_errors(call, exc, words) -> None:
    with pytest.raises(exc, match=words):
        call()


def test_load_states_checks_names_and_shapes(tmp_path) -> None:
    a = hd.Variable.from_array(np.ones(2), need_grad=True)
    solver = S.Momentum(0.1)
    solver.set_parameters({"a": a})
    a.g = np.ones(2)
    solver.update()
    solver.save_states(tmp_path / "s.npz")
    other = S.Momentum(0.1)
    other.set_parameters({"z": a})
    with pytest.raises(ValueError, match="'a'"):
        other.load_states(tmp_path / "s.npz")
    small = S.Momentum(0.1)
    small.set_parameters({"a": hd.Variable.from_array(np.ones(3), need_grad=True)})
    with pytest.raises(ValueError, match="shape"):
        small.load_states(tmp_path / "s.npz")


def test_cupy_parameters_are_updated_on_the_device() -> None:
    cp = gpu()
    w0 = initial()
    params = {
        f"p{k}": hd.Variable.from_array(cp.asarray(w), need_grad=True) for k, w in enumerate(w0)
    }
    solver = S.Adam(0.05)
    solver.set_parameters(params)
    ref = S.Adam(0.05)
    ref_params = {f"p{k}": hd.Variable.from_array(w, need_grad=True) for k, w in enumerate(w0)}
    ref.set_parameters(ref_params)
    for _ in range(10):
        for ps, s in ((params, solver), (ref_params, ref)):
            host = [cp.asnumpy(p.d) for p in ps.values()]
            for p, g in zip(ps.values(), grad_of(host), strict=True):
                p.g = cp.asarray(g) if ps is params else g
            s.clip_grad_by_norm(2.0)
            s.weight_decay(0.01)
            s.update()
    for k in params:
        assert isinstance(params[k].d, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(params[k].d), ref_params[k].d, rtol=1e-10)


@pytest.mark.parametrize(
    "kind", ["Sgd", "Momentum", "Nesterov", "Adagrad", "RMSprop", "Adam", "AdamW"]
)
def test_a_step_allocates_no_arrays(kind) -> None:
    import tracemalloc

    w = hd.Variable.from_array(np.ones(100_000), need_grad=True)
    w.g = np.full(100_000, 0.5)
    solver = getattr(S, kind)(0.01)
    solver.set_parameters({"w": w})
    solver.weight_decay(0.1)
    solver.clip_grad_by_norm(1.0)
    solver.update()  # the first step makes the state and scratch arrays
    tracemalloc.start()
    try:
        solver.update()
        solver.weight_decay(0.1)
        solver.clip_grad_by_norm(1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.05 * w.d.nbytes, peak  # far below one parameter-sized array (800 kB)
