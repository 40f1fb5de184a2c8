"""Smoke test of the benchmark harness (issue 5): every workload once, at a tiny size.

No timing is asserted. Peers (torch, jax, autograd) are checked against hodiff
where installed and skipped otherwise; the numpy floor always is.
"""

import json

import numpy as np
import pytest

from bench import report, timing
from bench.run import TOLERANCE, rel_err
from bench.workloads import WORKLOADS, to_numpy

GROUPS = list(WORKLOADS)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _outputs(group: str, lib: str, dtype: str) -> dict[str, list[np.ndarray]]:
    w = WORKLOADS[group]
    fns = w.builders[lib](w.make_inputs("tiny", dtype))
    return {tid: to_numpy(fn()) for tid, fn in fns.items()}


_HODIFF: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {}


def _hodiff(group: str, dtype: str) -> dict[str, list[np.ndarray]]:
    if (group, dtype) not in _HODIFF:
        _HODIFF[(group, dtype)] = _outputs(group, "hodiff", dtype)
    return _HODIFF[(group, dtype)]


@pytest.mark.parametrize("group", GROUPS)
def test_hodiff_runs_every_task(group):
    w = WORKLOADS[group]
    for dtype in w.dtypes:
        out = _hodiff(group, dtype)
        assert sorted(out) == sorted(t.id for t in w.tasks)
        for tid, arrays in out.items():
            assert arrays, tid
            for a in arrays:
                assert a.dtype == np.dtype(dtype), (tid, a.dtype)
                assert np.all(np.isfinite(a)), tid


@pytest.mark.parametrize("lib", ["numpy", "hd.jit", "torch", "jax", "autograd"])
@pytest.mark.parametrize("group", GROUPS)
def test_peer_agrees_with_hodiff(group, lib):
    w = WORKLOADS[group]
    if lib not in w.builders:
        pytest.skip(f"{group} has no {lib} version")
    if lib not in ("numpy", "hd.jit"):
        pytest.importorskip(lib)
    ref = _hodiff(group, "float64")
    for tid, arrays in _outputs(group, lib, "float64").items():
        assert rel_err(arrays, ref[tid]) <= TOLERANCE["float64"], (tid, lib)


def test_rel_err_catches_mismatches():
    a = [np.array([1.0, 2.0])]
    assert rel_err(a, a) == 0.0
    assert rel_err([np.array([1.0, 2.0 + 1e-6])], a) == pytest.approx(5e-7)
    assert rel_err([np.array([1.0])], a) == float("inf")  # shape
    assert rel_err(a, a + a) == float("inf")  # count
    assert rel_err([np.array([np.nan, 2.0])], a) == float("inf")


def test_interleaved_timing_and_memory():
    calls = {"a": 0, "b": 0}

    def f(k):
        def run():
            calls[k] += 1
            return np.ones(1000)

        return run

    stats = timing.interleaved({"a": f("a"), "b": f("b")}, repeats=3, warmup=1, min_time=0.0)
    assert set(stats) == {"a", "b"}
    for s in stats.values():
        assert s["repeats"] == 3
        assert 0 < s["min_s"] <= s["median_s"]
    assert calls["a"] >= 4
    assert timing.peak_traced(lambda: np.ones(100_000)) >= 800_000


def _row(task, lib, t, dtype="float64", ok=True):
    return {
        "task": task,
        "title": task,
        "group": "g",
        "dtype": dtype,
        "lib": lib,
        "median_s": t,
        "check_ok": ok,
        "rel_err": 0.0 if ok else 1.0,
    }


def test_report_ratios_targets_and_files(tmp_path):
    rows = [
        _row("W1", "hodiff", 0.002),
        _row("W1", "torch", 0.004),
        _row("W1", "numpy", 0.001),
        _row("W2", "hodiff", 0.006),
        _row("W2", "torch", 0.008),
        _row("W2", "jax", 0.001, ok=False),
    ]
    result = {
        "results": rows,
        "errors": [],
        "date": "today",
        "machine": {"cpu": "cpu", "logical_cpus": 1, "memory_gib": 1, "os": "os", "python": "3"},
        "versions": {"numpy": "2"},
        "threads": {"requested": 1, "blas": "env"},
        "settings": {"repeats": 3, "warmup": 1, "min_time": 0.01, "size": "tiny", "quick": True},
    }
    s = result["summary"] = report.summarize(result)
    w1 = next(r for r in s["ratios"] if r["task"] == "W1")
    assert w1["hodiff/torch"] == 0.5
    assert w1["hodiff/numpy"] == 2.0
    assert "hodiff/jax" not in next(r for r in s["ratios"] if r["task"] == "W2")
    assert s["hvp_over_grad"][0]["hodiff"] == 3.0
    assert s["hvp_over_grad"][0]["torch"] == 2.0
    met = {(t["target"], t["dtype"]): t["met"] for t in s["targets"]}
    assert met[("W1: hodiff / torch <= 1.0", "float64")]
    assert not met[("W1: hodiff / numpy floor <= 1.10", "float64")]
    assert not met[("W2: hodiff HVP / hodiff gradient <= 2.5", "float64")]
    md = report.markdown_tables(result)
    assert "wrong (1.0e+00)" in md
    assert "| W1 W1 | float64 | 2 | 4 |" in md
    paths = report.write_all(result, tmp_path, docs=False, root=tmp_path)
    assert json.loads((tmp_path / "quick.json").read_text())["summary"] == json.loads(json.dumps(s))
    assert all(p.exists() for p in paths)


def test_solver_step_benchmark_runs(capsys):
    from bench import solver

    results = solver.main(["--size", "tiny", "--repeats", "2", "--dtypes", "float64"])
    times = results["float64"]
    assert {"W1", "Adam", "AdamW", "Momentum", "Sgd"} <= set(times)
    assert all(t > 0 for t in times.values())
    assert "% of W1" in capsys.readouterr().out


def test_page_fault_benchmark_runs(capsys):
    from bench import faults

    results = faults.main(["--workloads", "chain", "--size", "tiny", "--steps", "3"])
    assert set(results) == {"W4|float64", "W4b|float64", "W4s|float64"}
    for t1, f1, t0, f0 in results.values():
        assert t1 > 0
        assert t0 > 0
        assert f1 >= 0
        assert f0 >= 0
    assert "faults/step" in capsys.readouterr().out


def test_graph_size_benchmark_runs_and_its_steps_agree(capsys):
    import hodiff as hd
    from bench import graph_size

    x0 = np.linspace(-1.0, 1.0, 16)
    values = {
        s: graph_size.step(hd.Variable.from_array(x0, need_grad=True), 5, s)
        for s in graph_size.STEPS
    }
    # the second derivative of tanh applied 5 times, by the three second steps: the same
    np.testing.assert_allclose(values["grad"], values["values"], rtol=1e-13)
    np.testing.assert_allclose(values["grad"], values["backward"], rtol=1e-13)
    results = graph_size.main(["--sizes", "4", "8", "--repeats", "1", "--ops", "16"])
    assert set(results) == {f"{s}|{c}" for s in graph_size.STEPS for c in ("on", "off")}
    assert all(t > 0 for d in results.values() for t in d.values())
    assert "8/4" in capsys.readouterr().out


def test_checker_sweep_summarize_applies_rows_lines_wherever_they_stand(tmp_path) -> None:
    # a --rows run replaces those rows' results of its seed, whether its line comes
    # before or after the seed's full line (or in another file)
    from bench.checker_sweep import summarize

    full = {"seed": 1, "fail": {"sin": 2, "cos": 1}, "nd": {"abs": 1}, "crash": {}}
    rows = {"seed": 1, "rows": ["sin", "abs"], "fail": {}, "nd": {}, "crash": {}}
    other = {"seed": 2, "fail": {}, "nd": {}, "crash": {}}
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(rows) + "\n" + json.dumps(other) + "\n")
    b.write_text(json.dumps(full) + "\n")
    for paths in ([a, b], [b, a]):
        got = summarize([str(p) for p in paths])
        assert got["points"] == 2
        assert got["fail"] == {"cos": [1]}  # sin was run again and passed
        assert got["not_differentiable"] == {}  # so was abs
