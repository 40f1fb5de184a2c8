"""hodiff.distributed: the 2-rank checks of tests/mpi/checks.py under ``mpiexec -n 2``, and
the single-process behaviour (no MPI needed) here.

The MPI checks are skipped only where mpi4py is missing and HODIFF_REQUIRE_MPI is unset;
CI (.ci/run) installs the ``mpi`` extra and sets it, so there they always run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
from hodiff.distributed import Communicator

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ROOT / "tests" / "mpi" / "checks.py"
NAMES = re.findall(r"^@check\ndef (\w+)", CHECKS.read_text(), flags=re.M)
TIMEOUT = 300  # seconds for one mpiexec run (a hang is a failure, not a stuck suite)


def mpiexec() -> str:
    """The path of mpiexec (the one installed with the Python environment first)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        if os.environ.get("HODIFF_REQUIRE_MPI"):
            raise
        pytest.skip('mpi4py is not installed (pip install -e ".[mpi]")')
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        if os.environ.get("HODIFF_REQUIRE_MPI"):
            raise RuntimeError("mpiexec not found (pip install mpich)")
        pytest.skip("mpiexec not found")
    return found


def run_mpi(
    args: list[str], n: int = 2, timeout: int = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # one BLAS thread per rank
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", *args]
    try:
        return subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s:\n{e.stdout}\n{e.stderr}")


@pytest.fixture(scope="module")
def mpi_checks() -> subprocess.CompletedProcess[str]:
    return run_mpi([str(CHECKS)])


def test_the_check_list_is_found() -> None:
    assert len(NAMES) >= 10, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_on_two_ranks(mpi_checks: subprocess.CompletedProcess[str], name: str) -> None:
    out = mpi_checks.stdout
    if f"SKIP {name} (rank 0)" in out:
        pytest.skip(out.split(f"SKIP {name} (rank 0): ")[1].splitlines()[0])
    for rank in (0, 1):
        assert f"OK {name} (rank {rank})" in out, (
            f"{name} on rank {rank}:\n"
            + "\n".join(line for line in out.splitlines() if name in line)
            + f"\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{mpi_checks.stderr[-3000:]}"
        )


def test_two_rank_run_exits_cleanly(mpi_checks: subprocess.CompletedProcess[str]) -> None:
    assert mpi_checks.returncode == 0, mpi_checks.stderr[-3000:]


def test_example_wgan_gp_on_two_ranks(tmp_path: Path) -> None:
    """Train and save on rank 0; resume from rank 0's checkpoint with another seed: the loaded
    parameters and solver states reach rank 1, so the ranks still agree after a step."""
    example = str(ROOT / "examples" / "wgan_gp_mpi.py")
    ckpt = str(tmp_path / "ckpt")
    first = run_mpi([example, "--steps", "2", "--save", ckpt])
    resumed = run_mpi([example, "--steps", "1", "--load", ckpt, "--check", "--seed", "1"])
    for r in (first, resumed):
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "parameters agree on every rank (2 ranks)" in resumed.stdout
    assert (tmp_path / "ckpt.params.npz").exists()


# ---------------------------------------------------------------- one process, no MPI
def test_module_imports_without_mpi4py() -> None:
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"
        "import hodiff.distributed as D, hodiff.functions as F\n"
        "assert F.all_reduce\n"
        "c = D.Communicator.single_process()\n"
        "try:\n    D.Communicator()\nexcept ImportError as e:\n    print('IMPORT-ERROR', e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "IMPORT-ERROR" in r.stdout
    assert 'pip install -e ".[mpi]"' in r.stdout


def _mlp(seed: int):
    rng = np.random.default_rng(seed)
    w = hd.Variable.from_array(rng.standard_normal((3, 2)), need_grad=True)
    b = hd.Variable.from_array(rng.standard_normal(2), need_grad=True)
    x = rng.standard_normal((4, 3))
    return {"w": w, "b": b}, lambda: F.sum(F.tanh(F.affine(x, w, b)) ** 2)


def test_single_process_backward_is_the_plain_backward() -> None:
    comm = Communicator.single_process()
    assert (comm.rank, comm.size) == (0, 1)
    params, loss = _mlp(0)
    loss().backward()
    expected = {k: v.g.copy() for k, v in params.items()}
    unused = hd.Variable.from_array(np.ones(2), need_grad=True)
    for v in params.values():
        v.zero_grad()
    comm.backward(loss(), [*params.values(), unused])
    for k, v in params.items():
        np.testing.assert_array_equal(v.g, expected[k])
    np.testing.assert_array_equal(unused.g, np.zeros(2))


def test_single_process_collectives_are_identities() -> None:
    comm = Communicator.single_process()
    a = np.arange(4.0)
    assert comm.all_reduce([a], op="sum")[0] is a
    np.testing.assert_array_equal(a, np.arange(4.0))
    params, _ = _mlp(1)
    before = params["w"].d.copy()
    comm.bcast_parameters(params)
    comm.check_parameters(params)
    np.testing.assert_array_equal(params["w"].d, before)


def test_misuse_raises_clear_errors() -> None:
    comm = Communicator.single_process()
    with pytest.raises(ValueError, match="op must be 'mean' or 'sum'"):
        comm.all_reduce(np.ones(2), op="max")
    with pytest.raises(TypeError, match=r"arrays\[0\] is a Variable; pass its array"):
        comm.all_reduce([hd.Variable.from_array(np.ones(2))])
    with pytest.raises(TypeError, match="op='mean' needs float arrays"):
        comm.all_reduce(np.ones(2, dtype=np.int64))
    with pytest.raises(ValueError, match="read-only"):
        comm.all_reduce(np.broadcast_to(np.ones(1), (3,)))
    with pytest.raises(TypeError, match=r"params\['w'\] must be a hodiff\.Variable"):
        comm.bcast_parameters({"w": np.ones(2)})
    with pytest.raises(TypeError, match="params must be a dict"):
        comm.backward(hd.Variable.from_array(np.ones(())), 3)
    w = hd.Variable.from_array(np.ones(2), need_grad=True)
    with pytest.raises(ValueError, match=r"params\['1'\] is a Variable listed twice"):
        comm.backward(F.sum(w), [w, w])
    with pytest.raises(TypeError, match=r"loss must be a hodiff\.Variable"):
        comm.backward(np.ones(()), [])
    with pytest.raises(ValueError, match="root must be a rank"):
        comm.bcast_parameters([], root=1)
    with pytest.raises(TypeError, match=r"comm must be a hodiff\.distributed\.Communicator or"):
        F.all_reduce(np.ones(2), "world")


def test_bench_distributed_smoke() -> None:
    """bench/distributed.py runs (1 and 2 ranks, with and without the exchange); no timing."""
    mpiexec()  # skips (or fails under HODIFF_REQUIRE_MPI) without MPI
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.distributed",
            "--repeats",
            "1",
            "--rounds",
            "1",
            "--steps",
            "1",
            "--batch",
            "8",
            "--dtypes",
            "float64",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for row in ("| float64 | 1 |", "| float64 | 2 |", "| float64 | 2, no exchange |"):
        assert row in r.stdout, r.stdout
