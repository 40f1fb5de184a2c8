"""Checks of hodiff.distributed on 2 ranks: ``mpiexec -n 2 python -m mpi4py tests/mpi/checks.py``.

Driven by tests/test_distributed.py. Each check prints ``OK <name>`` or ``FAIL <name>: ...``
on every rank; expected values come from numpy on data gathered with mpi4py directly, or
from single-process training on the full batch (computed on every rank, without MPI).
Every check makes all its collective calls before asserting, so a failed assertion on
one rank cannot leave the other waiting; any other exception aborts both ranks.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import hodiff as hd
import hodiff.functions as F
from hodiff.distributed import Communicator

WORLD = MPI.COMM_WORLD
CHECKS: list[Callable[[Communicator], None]] = []


def check(f: Callable[[Communicator], None]) -> Callable[[Communicator], None]:
    CHECKS.append(f)
    return f


def var(a, need_grad=False):
    return hd.Variable.from_array(np.array(a, dtype=np.float64), need_grad=need_grad)


# ---------------------------------------------------------------- collectives on arrays
@check
def all_reduce_mean_and_sum(comm: Communicator) -> None:
    rng = np.random.default_rng(10 + comm.rank)
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal(5).astype(np.float32)
    c = rng.standard_normal((4, 6))[:, ::2]  # not contiguous
    d = rng.integers(0, 10, size=7)
    gathered = WORLD.allgather((a.copy(), b.copy(), c.copy(), d.copy()))
    mean = [a.copy(), b.copy(), c.copy()]
    out = comm.all_reduce(mean, op="mean")
    summed = [a.copy(), d.copy()]
    comm.all_reduce(summed, op="sum")
    one = a.copy()
    comm.all_reduce(one)  # a single array, default mean
    assert out is mean
    for k, x in enumerate(mean):
        ref = sum(g[k] for g in gathered) / 2
        assert x.dtype == (a, b, c)[k].dtype
        np.testing.assert_allclose(x, ref, rtol=1e-6 if x.dtype == np.float32 else 1e-15)
    np.testing.assert_array_equal(summed[0], gathered[0][0] + gathered[1][0])
    np.testing.assert_array_equal(summed[1], gathered[0][3] + gathered[1][3])
    assert summed[1].dtype == d.dtype
    np.testing.assert_array_equal(one, mean[0])


@check
def bcast_parameters_from_root(comm: Communicator) -> None:
    rng = np.random.default_rng(20 + comm.rank)
    params = {"w": var(rng.standard_normal((3, 2)), True), "b": var(rng.standard_normal(2), True)}
    before = WORLD.allgather({k: v.d.copy() for k, v in params.items()})
    comm.bcast_parameters(params)
    after0 = {k: v.d.copy() for k, v in params.items()}
    as_list = [var(rng.standard_normal(4)), var(rng.standard_normal(()))]
    before_list = WORLD.allgather([v.d.copy() for v in as_list])
    comm.bcast_parameters(as_list, root=1)
    for k in params:
        np.testing.assert_array_equal(after0[k], before[0][k])
    for v, ref in zip(as_list, before_list[1], strict=True):
        np.testing.assert_array_equal(v.d, ref)


@check
def bcast_parameters_mismatch_raises_on_every_rank(comm: Communicator) -> None:
    params = {"w": var(np.zeros((3, 2) if comm.rank == 0 else (2, 3)))}
    try:
        comm.bcast_parameters(params)
    except ValueError as e:
        msg = str(e)
    else:
        msg = ""
    assert "bcast_parameters" in msg, msg
    assert "'w'" in msg, msg
    assert "(3, 2)" in msg, msg
    assert "(2, 3)" in msg, msg


@check
def check_parameters_finds_a_difference(comm: Communicator) -> None:
    params = {"w": var(np.arange(6.0).reshape(2, 3)), "b": var(np.ones(2))}
    comm.check_parameters(params)  # equal: no error
    params["b"].d[1] += 1e-3 if comm.rank == 1 else 0.0
    try:
        comm.check_parameters(params)
    except RuntimeError as e:
        msg = str(e)
    else:
        msg = ""
    comm.check_parameters(params, atol=1e-2)  # within the tolerance
    assert "'b'" in msg, msg
    assert "rank 1" in msg, msg
    assert "0.001" in msg, msg
    assert "'w'" not in msg, msg


@check
def debug_mode_names_mismatched_shapes(comm: Communicator) -> None:
    debug = Communicator(debug=True)
    x = var(np.ones(3 if comm.rank == 0 else 4))
    try:
        F.all_reduce(x, debug)
    except ValueError as e:
        msg = str(e)
    else:
        msg = ""
    assert "all_reduce" in msg, msg
    assert "(3,)" in msg, msg
    assert "(4,)" in msg, msg


def _error_of(call: Callable[[], object]) -> str:
    try:
        call()
    except ValueError as e:
        return str(e)
    return ""


@check
def mismatched_shapes_raise_on_every_rank_without_debug(comm: Communicator) -> None:
    # debug=False (the default): a (3,) parameter on rank 0 and (4,) on rank 1 used to make
    # MPI read past the end of the smaller bucket; now every collective checks a digest
    n = 3 if comm.rank == 0 else 4
    w = var(np.ones(n), True)
    loss = F.sum(w * w)
    messages = {
        "backward": _error_of(lambda: comm.backward(loss, {"w": w})),
        "all_reduce": _error_of(lambda: comm.all_reduce([np.ones(n)])),
        "F.all_reduce": _error_of(lambda: F.all_reduce(var(np.ones(n)), comm)),
        "bcast_arrays": _error_of(lambda: comm.bcast_arrays([np.ones(n)])),
    }
    g_untouched = w._grad is None  # the check ran before the reverse pass
    w32 = hd.Variable.from_array(np.ones(3, np.float32 if comm.rank == 0 else np.float64), True)
    dtype_msg = _error_of(lambda: comm.backward(F.sum(w32 * w32), [w32]))
    # the communicator still works afterwards
    ok = var(np.full(2, 1.0 + comm.rank), True)
    comm.backward(F.sum(ok * ok), {"ok": ok})
    for where, msg in messages.items():
        assert msg.startswith(where.removeprefix("F.")), (where, msg)
        assert "(3,)" in msg, (where, msg)
        assert "(4,)" in msg, (where, msg)
    assert "'w (numpy)'" in messages["backward"], messages["backward"]
    assert g_untouched
    assert "float32" in dtype_msg, dtype_msg
    assert "float64" in dtype_msg, dtype_msg
    np.testing.assert_array_equal(ok.g, np.full(2, 3.0))  # mean of 2 * 1 and 2 * 2


# ---------------------------------------------------------------- F.all_reduce
@check
def all_reduce_function_derivatives_to_order_3(comm: Communicator) -> None:
    """Rank r: y = A(x_r), L_r = sum(c_r y^3). Each derivative is that of sum_r L_r."""
    rng = np.random.default_rng(30 + comm.rank)
    x0, c, v, w = (rng.uniform(0.5, 1.5, 4) for _ in range(4))
    X, C, V, W = (np.sum(WORLD.allgather(a), axis=0) for a in (x0, c, v, w))
    x = var(x0, True)
    y = F.all_reduce(x, WORLD)  # a bare mpi4py communicator: wrapped once
    assert y.parent.comm is Communicator.of(WORLD)
    loss = F.sum(var(c) * y**3)
    (g1,) = hd.grad(loss, x)  # d/dx_r sum_s sum(c_s y^3) = 3 C y^2
    (g2,) = hd.grad(F.sum(g1 * var(v)), x)  # d/dx_r sum_s sum(v_s g1_s) = 6 C V y
    (g3,) = hd.grad(F.sum(g2 * var(w)), x)  # 6 C V W
    x.g = 0.0
    F.sum(g2 * var(w)).backward()  # the plain pass through the recorded graph
    np.testing.assert_allclose(y.d, X, rtol=1e-15)
    np.testing.assert_allclose(g1.d, 3 * C * X**2, rtol=1e-13)
    np.testing.assert_allclose(g2.d, 6 * C * V * X, rtol=1e-13)
    np.testing.assert_allclose(g3.d, 6 * C * V * W, rtol=1e-13)
    np.testing.assert_allclose(x.g, 6 * C * V * W, rtol=1e-13)


@check
def all_reduce_function_of_a_scalar(comm: Communicator) -> None:
    """0-d values (numpy gives scalars for them) through the forward and both backward paths."""
    x = var(np.arange(3.0) + comm.rank, True)
    s = F.all_reduce(F.sum(x * x), comm)  # sum over ranks and elements of x^2
    (g,) = hd.grad(s * s, x)  # d/dx_r sum_q s^2 = 2 * 2 s * 2 x_r
    (s * s).backward()
    xs = WORLD.allgather(x.d.copy())
    total = sum(float(np.sum(a * a)) for a in xs)
    np.testing.assert_allclose(float(s.d), total, rtol=1e-15)
    np.testing.assert_allclose(g.d, 8 * total * x.d, rtol=1e-14)
    np.testing.assert_allclose(x.g, 8 * total * x.d, rtol=1e-14)


@check
def all_reduce_function_in_a_static_graph(comm: Communicator) -> None:
    with hd.auto_forward(False):
        x = hd.Variable((3,), need_grad=True, dtype=np.float64)
        y = F.sum(F.all_reduce(x, comm) ** 2)
    values = []
    for step in range(2):
        x.d = np.arange(3.0) + comm.rank + step
        y.forward()
        x.g = 0.0
        y.backward()
        values.append((float(y.d), x.g.copy()))
    for step, (val, g) in enumerate(values):
        s = 2 * np.arange(3.0) + 1 + 2 * step  # sum over ranks of x
        np.testing.assert_allclose(val, np.sum(s**2))
        np.testing.assert_allclose(g, 2 * 2 * s)  # both ranks' losses depend on x_r


@check
def all_reduce_function_under_vmap(comm: Communicator) -> None:
    """hd.vmap of a function with F.all_reduce equals the loop over examples."""
    rng = np.random.default_rng(90 + comm.rank)
    X = rng.standard_normal((4, 3))

    def f(x):
        return F.sum(F.all_reduce(x * x, comm) * x)

    def per_example_grad(x):
        (g,) = hd.grad(f(x), x)
        return g

    ys = hd.vmap(f)(var(X)).d
    gs = hd.vmap(per_example_grad)(var(X, True)).d
    loop_y = [float(f(var(X[i])).d) for i in range(4)]
    loop_g = []
    for i in range(4):
        x = var(X[i], True)
        loop_g.append(hd.grad(f(x), x)[0].d)
    Xs = WORLD.allgather(X)
    S = Xs[0] ** 2 + Xs[1] ** 2  # per example, summed over the ranks
    # d/dx_r sum_q sum(S * x_q) = S + 2 x_r * (x_0 + x_1)
    np.testing.assert_allclose(ys, np.sum(S * X, axis=1), rtol=1e-13)
    np.testing.assert_allclose(gs, S + 2 * X * (Xs[0] + Xs[1]), rtol=1e-13)
    np.testing.assert_allclose(ys, loop_y, rtol=1e-13)
    np.testing.assert_allclose(gs, np.stack(loop_g), rtol=1e-13)


@check
def saved_graph_reduces_over_the_loading_world(comm: Communicator) -> None:
    """A graph with F.all_reduce saved and loaded on each rank reduces over COMM_WORLD."""
    x = var(np.arange(3.0) + comm.rank, True)
    y = F.all_reduce(x * x, comm)
    sub = Communicator(WORLD.Split(comm.rank, 0))  # one rank each: not the world
    z = F.all_reduce(x, sub)
    with tempfile.TemporaryDirectory() as tmp:
        hd.save_graph(os.path.join(tmp, "g"), y, x)
        f = hd.load_graph(os.path.join(tmp, "g"))
        x2 = var(np.arange(3.0) + 10 * comm.rank, True)
        y2 = f(x2)
        (g,) = hd.grad(F.sum(y2), x2)
        try:
            hd.save_graph(os.path.join(tmp, "h"), z, x)
        except TypeError as e:
            msg = str(e)
        else:
            msg = ""
    xs = [np.arange(3.0) + 10 * r for r in range(2)]
    np.testing.assert_allclose(y2.d, xs[0] ** 2 + xs[1] ** 2)
    np.testing.assert_allclose(g.d, 2 * 2 * xs[comm.rank])  # both ranks' sums depend on x_r
    assert "Communicator" in msg, msg


# ---------------------------------------------------------------- comm.backward
@check
def unused_parameters_are_zero_filled(comm: Communicator) -> None:
    rng = np.random.default_rng(40 + comm.rank)
    a = var(rng.standard_normal(3), True)
    only0 = var(np.ones(3), True)  # reached only by rank 0's pass
    never = var(np.ones(2), True)  # reached by no pass
    loss = F.sum(a * a) + (F.sum(only0 * a) if comm.rank == 0 else 0.0)
    xs = WORLD.allgather(a.d.copy())
    comm.backward(loss, {"a": a, "only0": only0, "never": never})
    ga = (2 * xs[0] + 1.0 + 2 * xs[1]) / 2  # rank 0: 2a + only0, rank 1: 2a
    np.testing.assert_allclose(a.g, ga, rtol=1e-15)
    np.testing.assert_allclose(only0.g, xs[0] / 2, rtol=1e-15)
    np.testing.assert_array_equal(never.g, np.zeros(2))


class _Fails(hd.Function):
    """The identity, whose backward raises: a pass that breaks half-way."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0].copy()

    def backward_impl(self, inputs, outputs, prop_down, accum):
        raise FloatingPointError("planted failure")


@check
def backward_refuses_to_run_after_a_pass_that_raised(comm: Communicator) -> None:
    dist = Communicator(bucket_size=8)
    w1, w2 = var(np.ones(3), True), var(np.ones(3), True)
    loss = F.sum(_Fails()(w1) * w2)  # w2's gradient is final (and sent) before _Fails runs
    errors = []
    for _ in range(2):
        try:
            dist.backward(loss, [w1, w2])
        except (FloatingPointError, RuntimeError) as e:
            errors.append(str(e))
    dist._grads.Barrier()  # the bucket of w2 launched by the first pass completes on both
    assert errors[0] == "planted failure", errors
    assert "raised after launching 1 of 2 gradient buckets" in errors[1], errors
    assert "refuses to run backward again" in errors[1], errors


def _critic_params(seed: int, d: int, h: int) -> dict[str, hd.Variable]:
    rng = np.random.default_rng(seed)
    return {
        "l1/W": var(rng.standard_normal((d, h)) / np.sqrt(d), True),
        "l1/b": var(0.1 * rng.standard_normal(h), True),
        "l2/W": var(rng.standard_normal((h, h)) / np.sqrt(h), True),
        "l2/b": var(0.1 * rng.standard_normal(h), True),
        "out/W": var(rng.standard_normal((h, 1)) / np.sqrt(h), True),
        "out/b": var(np.zeros(1), True),
    }


def _critic(p, x, comm: Communicator | None, n_global: int):
    h = F.affine(x, p["l1/W"], p["l1/b"])
    if comm is not None:  # batch normalization with statistics over the global batch
        mean = F.all_reduce(F.sum(h, axis=0), comm) * (1.0 / n_global)
        c = h - mean
        var_ = F.all_reduce(F.sum(c * c, axis=0), comm) * (1.0 / n_global)
        h = c / F.sqrt(var_ + 1e-5)
    h = F.tanh(h)
    h = F.tanh(F.affine(h, p["l2/W"], p["l2/b"]))
    return F.affine(h, p["out/W"], p["out/b"])


def _wgan_gp_loss(p, real, fake, eps, comm, n_global, lam=10.0):
    """The WGAN-GP critic loss on one shard: its mean over the shard."""
    x_hat = hd.Variable.from_array(eps * real + (1 - eps) * fake, need_grad=True)
    (g,) = hd.grad(F.sum(_critic(p, x_hat, comm, n_global)), x_hat)  # local hd.grad penalty
    norm = F.sqrt(F.sum(g * g, axis=1) + 1e-12)
    penalty = F.mean((norm - 1.0) ** 2)
    d_real = F.mean(_critic(p, var(real), comm, n_global))
    d_fake = F.mean(_critic(p, var(fake), comm, n_global))
    return d_fake - d_real + lam * penalty


def _train(p, batches, step_fn, lr=0.05, momentum=0.9):
    """SGD with momentum (torch's rule), written out; the solvers have their own tests."""
    buf = {k: np.zeros_like(v.d) for k, v in p.items()}
    for real, fake, eps in batches:
        for v in p.values():
            v.zero_grad()
        step_fn(real, fake, eps)
        for k, v in p.items():
            buf[k] = momentum * buf[k] + v.g
            v.d = v.d - lr * buf[k]


def _parity(comm: Communicator, sync_bn: bool, bucket_size: int) -> None:
    n, d, h, steps = 8, 3, 5, 4
    rng = np.random.default_rng(50)
    batches = [
        (rng.standard_normal((n, d)) + 1.0, rng.standard_normal((n, d)), rng.uniform(size=(n, 1)))
        for _ in range(steps)
    ]
    one = Communicator.single_process()
    ref = _critic_params(100, d, h)  # one process, the full batch, rank 0's start
    _train(
        ref,
        batches,
        lambda r, f, e: _wgan_gp_loss(ref, r, f, e, one if sync_bn else None, n).backward(),
    )

    dist = Communicator(bucket_size=bucket_size)
    overlapped = []
    p = _critic_params(100 + comm.rank, d, h)  # different on each rank until the broadcast
    dist.bcast_parameters(p)
    np.testing.assert_array_equal(p["l1/W"].d, _critic_params(100, d, h)["l1/W"].d)
    m = n // comm.size
    shard = slice(comm.rank * m, (comm.rank + 1) * m)

    def step(r, f, e):
        loss = _wgan_gp_loss(p, r[shard], f[shard], e[shard], dist if sync_bn else None, n)
        dist.backward(loss, p)
        overlapped.append(dist.overlapped_buckets)

    _train(p, batches, step)
    dist.check_parameters(p)  # every rank holds the same parameters
    for k in p:
        np.testing.assert_allclose(p[k].d, ref[k].d, rtol=1e-10, atol=1e-12, err_msg=k)
    moved = max(np.abs(ref[k].d - _critic_params(100, d, h)[k].d).max() for k in ref)
    assert moved > 1e-2, moved  # training did change the parameters
    n_buckets = len(dist._plan.buckets)
    if bucket_size >= 1 << 20:
        assert (n_buckets, overlapped) == (1, [0] * steps), (n_buckets, overlapped)
    else:  # all buckets but the first layer's (W and b are final together, last) overlap
        assert n_buckets >= 5, n_buckets
        assert overlapped == [overlapped[0]] * steps, overlapped
        assert overlapped[0] >= n_buckets - 2, (overlapped, n_buckets)


@check
def wgan_gp_two_ranks_equals_one_process_full_batch(comm: Communicator) -> None:
    _parity(comm, sync_bn=False, bucket_size=1 << 20)


@check
def wgan_gp_parity_with_one_bucket_per_parameter(comm: Communicator) -> None:
    _parity(comm, sync_bn=False, bucket_size=8)


@check
def wgan_gp_parity_with_synchronized_batch_statistics(comm: Communicator) -> None:
    """F.all_reduce inside the critic: the penalty differentiates through it twice."""
    _parity(comm, sync_bn=True, bucket_size=64)


@check
def pf_critic_with_adam_two_ranks_equals_one_process(comm: Communicator) -> None:
    """The example's path: PF layers, hd.get_parameters, S.Adam, in float64."""
    import hodiff.parametric as PF
    import hodiff.solvers as S

    n, steps = 8, 3
    rng = np.random.default_rng(80)
    data = [
        (rng.standard_normal((n, 2)) + 1.0, rng.standard_normal((n, 2)), rng.uniform(size=(n, 1)))
        for _ in range(steps)
    ]

    def critic(x):
        return PF.affine(F.tanh(PF.affine(x, 6, name="l1")), 1, name="out")

    def loss(scope, real, fake, eps):
        with hd.parameter_scope(scope):
            x_hat = hd.Variable.from_array(eps * real + (1 - eps) * fake, need_grad=True)
            (g,) = hd.grad(F.sum(critic(x_hat)), x_hat)
            penalty = F.mean((F.sqrt(F.sum(g * g, axis=1)) - 1.0) ** 2)
            return F.mean(critic(fake)) - F.mean(critic(real)) + 10.0 * penalty

    def train(scope, step, bcast=False):
        params = {k: v for k, v in hd.get_parameters().items() if k.startswith(scope + "/")}
        if bcast:
            comm.bcast_parameters(params)
        solver = S.Adam(lr=0.05)
        solver.set_parameters(params)
        for real, fake, eps in data:
            solver.zero_grad()
            step(params, real, fake, eps)
            solver.update()
        return params

    m = n // comm.size
    shard = slice(comm.rank * m, (comm.rank + 1) * m)
    with hd.context_scope(hd.Context(dtype="float64")):
        hd.seed(5)
        loss("ref", *data[0])  # creates ref/... as rank 0 will create dist/...
        hd.seed(5 + comm.rank)  # different on each rank until the broadcast
        loss("dist", *data[0])
        ref = train("ref", lambda p, r, f, e: loss("ref", r, f, e).backward())
        dist = train(
            "dist",
            lambda p, r, f, e: comm.backward(loss("dist", r[shard], f[shard], e[shard]), p),
            bcast=True,
        )
    assert sorted(ref) == ["ref/l1/W", "ref/l1/b", "ref/out/W", "ref/out/b"], sorted(ref)
    for k, v in ref.items():
        np.testing.assert_allclose(dist["dist" + k[3:]].d, v.d, rtol=1e-10, atol=1e-12, err_msg=k)


def _states(solver) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        solver.save_states(os.path.join(tmp, "s.npz"))
        with np.load(os.path.join(tmp, "s.npz")) as data:
            return {k: data[k] for k in data.files}


@check
def loaded_parameters_and_solver_states_reach_every_rank(comm: Communicator) -> None:
    """Rank 0 has trained (as after loading a checkpoint there); the others start fresh."""
    import hodiff.solvers as S

    rng = np.random.default_rng(70 + comm.rank)
    p = {"w": var(rng.standard_normal(3), True), "b": var(rng.standard_normal(()), True)}
    solver = S.Adam(lr=0.1)
    solver.set_parameters(p)
    if comm.rank == 0:
        for _ in range(2):
            solver.zero_grad()
            F.sum(p["w"] ** 2 * p["b"]).backward()
            solver.update()
    comm.bcast_parameters(p)
    comm.bcast_solver_states(solver)
    after_bcast = WORLD.allgather(_states(solver))
    solver.zero_grad()
    comm.backward(F.sum(p["w"] ** 2 * p["b"]), p)  # the same loss on both ranks
    solver.update()
    values = WORLD.allgather({k: v.d.copy() for k, v in p.items()})
    final = WORLD.allgather(_states(solver))
    other = S.Adam(lr=0.1)  # parameter names that differ between the ranks
    other.set_parameters({"w" if comm.rank == 0 else "v": var(np.ones(2), True)})
    if comm.rank == 0:
        other.get_parameters()["w"].g = np.ones(2)
        other.update()
    try:
        comm.bcast_solver_states(other)
    except ValueError as e:
        msg = str(e)
    else:
        msg = ""
    assert sorted(after_bcast[0]) == sorted(after_bcast[1])
    for k in after_bcast[0]:
        np.testing.assert_array_equal(after_bcast[0][k], after_bcast[1][k], err_msg=k)
    assert int(after_bcast[1]["w::t"]) == 2
    assert int(final[1]["w::t"]) == 3
    for k in values[0]:
        np.testing.assert_array_equal(values[0][k], values[1][k], err_msg=k)
    for k in final[0]:
        np.testing.assert_array_equal(final[0][k], final[1][k], err_msg=k)
    assert "bcast_solver_states: rank 1" in msg, msg
    assert "'w'" in msg, msg


class Skip(Exception):  # noqa: N818 - a check that cannot run here
    pass


@check
def cupy_arrays_through_host_staging(comm: Communicator) -> None:
    """Gradients, all_reduce, bcast and F.all_reduce on cupy arrays equal the numpy results."""
    try:
        import cupy as cp

        cp.zeros(1)
    except Exception as e:  # no cupy, or no GPU
        raise Skip(f"cupy unavailable: {type(e).__name__}") from None
    rng = np.random.default_rng(60 + comm.rank)
    w0, b0, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))

    def loss(w, b, xv):
        return F.sum(F.tanh(F.all_reduce(F.affine(xv, w, b), comm)) ** 2)

    host = [var(w0, True), var(b0, True)]
    dev = [hd.Variable.from_array(cp.asarray(a), need_grad=True) for a in (w0, b0)]
    comm.bcast_parameters(host)
    comm.bcast_parameters(dev)
    comm.backward(loss(*host, var(x)), host)
    comm.backward(loss(*dev, hd.Variable.from_array(cp.asarray(x))), dev)
    arrays = [cp.asarray(w0), cp.asarray(x)]
    comm.all_reduce(arrays, op="sum")
    gathered = WORLD.allgather((w0, x))
    for h, d in zip(host, dev, strict=True):
        assert isinstance(d.g, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(d.d), h.d, rtol=0, atol=0)
        np.testing.assert_allclose(cp.asnumpy(d.g), h.g, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cp.asnumpy(arrays[0]), gathered[0][0] + gathered[1][0])
    np.testing.assert_allclose(cp.asnumpy(arrays[1]), gathered[0][1] + gathered[1][1])


def main() -> int:
    if WORLD.Get_size() != 2:
        print("run with: mpiexec -n 2 python -m mpi4py tests/mpi/checks.py", file=sys.stderr)
        return 2
    comm = Communicator()
    names = sys.argv[1:]
    failed = 0
    for f in CHECKS:
        if names and f.__name__ not in names:
            continue
        try:
            f(comm)
        except Skip as e:
            print(f"SKIP {f.__name__} (rank {comm.rank}): {e}", flush=True)
        except AssertionError as e:
            failed += 1
            first = (str(e) or traceback.format_exc()).strip().splitlines()
            print(f"FAIL {f.__name__} (rank {comm.rank}): {' | '.join(first[:6])}", flush=True)
        else:
            print(f"OK {f.__name__} (rank {comm.rank})", flush=True)
        WORLD.Barrier()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
