"""Parameter and solver-state files: nothing lost, nothing half-written, damage reported.

``hd.save_parameters``/``hd.load_parameters`` and ``Solver.save_states``/``load_states``
(both through :mod:`hodiff.training.archive`): any name round-trips, a load that raises changes
nothing, a truncated or corrupted file raises ValueError naming the function and the file,
and a state file is checked as the setters check what they set.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.solvers as S

NAMES = [
    "file",  # numpy.savez's positional argument: crashed as a keyword
    "allow_pickle",  # numpy.savez's flag: silently dropped
    "args",
    "kwds",
    "arr_0",  # what numpy.savez names positional arrays
    "net/fc/W",
    "with space",
    "ünïcødé/权重",
    "x.npy",
    "a::b",
]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    hd.clear_parameters()
    yield
    hd.clear_parameters()


def _make(names: list[str], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = {n: rng.standard_normal((i % 3 + 1, 2)) for i, n in enumerate(names)}
    for n, a in values.items():
        hd.get_parameter_or_create(n, a.shape, a)
    return {n: hd.get_parameters()[n].d.copy() for n in names}


# ---------------------------------------------------------------- names
def test_every_name_round_trips(tmp_path: Path) -> None:
    saved = _make(NAMES)
    path = tmp_path / "p.npz"
    hd.save_parameters(path)
    hd.clear_parameters()
    hd.load_parameters(path)
    got = hd.get_parameters()
    assert sorted(got) == sorted(NAMES)
    for n in NAMES:
        np.testing.assert_array_equal(got[n].d, saved[n])
    with np.load(path) as z:  # still numpy's .npz layout
        assert sorted(z.files) == sorted(NAMES)


def test_files_written_by_numpy_savez_still_load(tmp_path: Path) -> None:
    path = tmp_path / "old.npz"
    w = np.arange(6.0).reshape(2, 3)
    np.savez(path, **{"fc/W": w, "fc/b": np.ones(3)})  # what older versions wrote
    hd.load_parameters(path)
    np.testing.assert_array_equal(hd.get_parameters()["fc/W"].d, w)
    np.testing.assert_array_equal(hd.get_parameters()["fc/b"].d, np.ones(3))


def test_solver_states_round_trip_any_parameter_name(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    params = {n: hd.Variable.from_array(rng.standard_normal(3), need_grad=True) for n in NAMES}
    a = S.Adam(lr=0.1)
    a.set_parameters(params)
    for p in params.values():
        p.g = rng.standard_normal(3)
    a.update()
    path = tmp_path / "s.npz"
    a.save_states(path)
    b = S.Adam(lr=0.5)
    b.set_parameters(params)
    b.load_states(path)
    assert b.learning_rate() == 0.1
    assert sorted(b._state) == sorted(NAMES)
    for n in NAMES:
        for s in ("m", "v"):
            np.testing.assert_array_equal(b._state[n][s], a._state[n][s])
        assert b._state[n]["t"] == 1


# ---------------------------------------------------------------- all or nothing
def test_load_parameters_is_all_or_nothing(tmp_path: Path) -> None:
    before = _make(["a", "b", "z"])
    path = tmp_path / "p.npz"
    np.savez(path, a=before["a"] + 1, b=np.zeros((5, 5)), new=np.ones(2))  # b: wrong shape
    with pytest.raises(ValueError, match=r"load_parameters: 'b' has shape \(2, 2\).*\(5, 5\)"):
        hd.load_parameters(path)
    got = hd.get_parameters()
    assert sorted(got) == ["a", "b", "z"]  # 'new' was not created
    for n, v in before.items():
        np.testing.assert_array_equal(got[n].d, v)  # 'a' (before 'b' in the file) untouched


def test_load_parameters_refuses_a_non_parameter_name_or_dtype(tmp_path: Path) -> None:
    before = _make(["a"])
    for bad in ({"b": np.ones(2), "x//y": np.ones(1)}, {"b": np.array(["text"])}):
        path = tmp_path / "p.npz"
        np.savez(path, a=before["a"] + 1, **bad)
        with pytest.raises(ValueError, match="load_parameters") as e:
            hd.load_parameters(path)
        assert str(path) in str(e.value)
        assert sorted(hd.get_parameters()) == ["a"]
        np.testing.assert_array_equal(hd.get_parameters()["a"].d, before["a"])


def _adam_after_steps(n: int) -> tuple[S.Adam, dict[str, hd.Variable]]:
    rng = np.random.default_rng(2)
    params = {
        "w": hd.Variable.from_array(rng.standard_normal(3), need_grad=True),
        "b": hd.Variable.from_array(rng.standard_normal(2), need_grad=True),
    }
    solver = S.Adam(lr=0.01)
    solver.set_parameters(params)
    for _ in range(n):
        for p in params.values():
            p.g = rng.standard_normal(p.shape)
        solver.update()
    return solver, params


def _snapshot(solver: S.Solver) -> tuple[float, dict[str, dict[str, object]]]:
    st = {
        k: {s: (a.copy() if isinstance(a, np.ndarray) else a) for s, a in v.items()}
        for k, v in solver._state.items()
    }
    return solver.learning_rate(), st


def _same(a: tuple[float, dict], b: tuple[float, dict]) -> bool:
    if a[0] != b[0] or sorted(a[1]) != sorted(b[1]):
        return False
    for k in a[1]:
        for s in a[1][k]:
            if not np.array_equal(a[1][k][s], b[1][k][s]):
                return False
    return True


def _states_file(path: Path, solver: S.Solver, **changes: np.ndarray) -> None:
    solver.save_states(path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    with zipfile.ZipFile(path, "w") as zf:  # keys like "::lr" cannot be savez keywords
        for k, a in arrays.items():
            with zf.open(k + ".npy", "w") as f:
                np.lib.format.write_array(f, np.asarray(a))


BAD_STATES = [
    ({"::lr": np.array(-5.0)}, ValueError, "lr must be >= 0"),
    ({"::lr": np.array(np.nan)}, ValueError, "lr must be >= 0"),
    ({"::lr": np.array([0.1, 0.2])}, ValueError, "'::lr' of shape"),
    ({"b::t": np.array([1, 2])}, ValueError, "'b::t' of shape"),
    ({"b::t": np.array(-1)}, ValueError, "non-negative integer"),
    ({"b::t": np.array(1.5)}, ValueError, "non-negative integer"),
    ({"b::v": -np.ones(2)}, ValueError, "negative"),
    ({"b::m": np.array([np.inf, 0.0])}, ValueError, "inf or NaN"),
    ({"b::m": np.ones(7)}, ValueError, r"shape \(7,\)"),
    ({"b::q": np.ones(2)}, ValueError, "unknown state"),
    ({"nope::m": np.ones(2)}, ValueError, "not a parameter"),
]


@pytest.mark.parametrize(("changes", "kind", "message"), BAD_STATES)
def test_load_states_checks_every_value_and_changes_nothing(
    tmp_path: Path, changes: dict[str, np.ndarray], kind: type[Exception], message: str
) -> None:
    solver, _ = _adam_after_steps(3)
    path = tmp_path / "s.npz"
    _states_file(path, solver, **changes)
    solver.update()  # the solver moves on, then a bad file must not change it
    before = _snapshot(solver)
    with pytest.raises(kind, match=message) as e:
        solver.load_states(path)
    assert "Adam.load_states" in str(e.value)
    assert str(path) in str(e.value)
    assert _same(_snapshot(solver), before)


def test_set_learning_rate_refuses_what_load_states_refuses() -> None:
    solver, _ = _adam_after_steps(0)
    for lr in (-5.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lr must be >= 0"):
            solver.set_learning_rate(lr)
    assert solver.learning_rate() == 0.01


# ---------------------------------------------------------------- damaged files
def _damaged(path: Path, how: str) -> Path:
    data = path.read_bytes()
    out = path.with_name(f"{how}.npz")
    if how == "truncated":
        out.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        out.write_bytes(b"")
    elif how == "flipped":  # one bit of an array's data: the member's CRC-32 catches it
        b = bytearray(data)
        with zipfile.ZipFile(path) as zf:
            info = zf.infolist()[0]
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        b[start + info.file_size - 1] ^= 1
        out.write_bytes(bytes(b))
    elif how == "not_a_zip":
        out.write_bytes(b"hello, this is not an archive" * 10)
    elif how == "pickled":
        with zipfile.ZipFile(out, "w") as zf, zf.open("w.npy", "w") as f:
            np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return out


HOW = ["truncated", "empty", "flipped", "not_a_zip", "pickled"]


@pytest.mark.parametrize("how", HOW)
def test_a_damaged_parameter_file_raises_value_error_naming_the_file(
    tmp_path: Path, how: str
) -> None:
    before = _make(["w", "b"])
    path = tmp_path / "p.npz"
    hd.save_parameters(path)
    bad = _damaged(path, how)
    for p in hd.get_parameters().values():
        p.d = p.d + 1  # the values a failed load must leave alone
    now = {k: v.d.copy() for k, v in hd.get_parameters().items()}
    with pytest.raises(ValueError, match="load_parameters") as e:
        hd.load_parameters(bad)
    assert str(bad) in str(e.value)
    assert sorted(hd.get_parameters()) == sorted(before)
    for k, v in hd.get_parameters().items():
        np.testing.assert_array_equal(v.d, now[k])


@pytest.mark.parametrize("how", HOW)
def test_a_damaged_state_file_raises_value_error_naming_the_file(tmp_path: Path, how: str) -> None:
    solver, _ = _adam_after_steps(2)
    path = tmp_path / "s.npz"
    solver.save_states(path)
    bad = _damaged(path, how)
    before = _snapshot(solver)
    with pytest.raises(ValueError, match=r"Adam\.load_states") as e:
        solver.load_states(bad)
    assert str(bad) in str(e.value)
    assert _same(_snapshot(solver), before)


def test_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        hd.load_parameters(tmp_path / "nope.npz")


def test_a_failed_save_keeps_the_previous_file(tmp_path: Path) -> None:
    _make(["w"])
    path = tmp_path / "p.npz"
    hd.save_parameters(path)
    good = path.read_bytes()
    hd.get_parameter_or_create("bad\0name", (1,))
    with pytest.raises(ValueError, match="bad"):
        hd.save_parameters(path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["p.npz"]  # no temporary file left


def test_training_resumes_exactly_after_a_round_trip(tmp_path: Path) -> None:
    # the reloaded solver and parameters continue as the original ones (a fixed loss)
    x = np.linspace(-1, 1, 6).reshape(3, 2)

    def step(solver: S.Solver, w: hd.Variable) -> None:
        solver.zero_grad()
        F.sum(F.tanh(hd.Variable.from_array(x) @ w) ** 2).backward()
        solver.update()

    hd.get_parameter_or_create("model/w", (2, 2), np.eye(2) + 0.5)
    w = hd.get_parameters()["model/w"]
    a = S.Adam(lr=0.05)
    a.set_parameters(hd.get_parameters())
    for _ in range(3):
        step(a, w)
    hd.save_parameters(tmp_path / "p.npz")
    a.save_states(tmp_path / "s.npz")
    for _ in range(2):
        step(a, w)
    expected = w.d.copy()
    hd.clear_parameters()
    hd.load_parameters(tmp_path / "p.npz")
    w2 = hd.get_parameters()["model/w"]
    b = S.Adam(lr=1.0)
    b.set_parameters(hd.get_parameters())
    b.load_states(tmp_path / "s.npz")
    for _ in range(2):
        step(b, w2)
    np.testing.assert_array_equal(w2.d, expected)
