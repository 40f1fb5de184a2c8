"""``python -m bench.nnabla_compat --tests DIR``: NNabla's per-function tests on hodiff.

Puts the shim (``bench/nnabla_compat/shim``: a package ``nnabla`` over hodiff and a fresh
``nbla_test_utils``) first on ``sys.path`` for this run only, runs pytest in this process
on the selected ``test_*.py`` of DIR (NNabla's ``python/test/function``; not in this
repository), and prints per-file and total counts: pass, fail, and cannot run by cause
(``bench/nnabla_compat/causes.py``). The counts, every failure's first line and the
missing functions and arguments go to ``bench/results/nnabla_compat.json``.

The selection: each file ``test_<name>.py`` whose ``<name>`` is a function of
``hodiff.functions``, and the files of several functions hodiff has
(``MULTI_FUNCTION_FILES``); ``--all`` runs every file.
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as HF
from bench.nnabla_compat.causes import CAUSES, SHORT, CannotRun, ReferenceWrong

SHIM = Path(__file__).resolve().parent / "shim"
OUT = Path(__file__).resolve().parents[1] / "results" / "nnabla_compat.json"
MULTI_FUNCTION_FILES = ("reduction", "logical", "random_functions")


_np_reshape = np.reshape


def _reshape_with_newshape(
    a: Any, shape: Any = None, *args: Any, newshape: Any = None, **kw: Any
) -> Any:
    """NumPy < 2.4's ``np.reshape(a, newshape=...)``, which NNabla's scatter_add test uses."""
    return _np_reshape(a, shape if newshape is None else newshape, *args, **kw)


def select(test_dir: Path, run_all: bool) -> list[Path]:
    files = sorted(test_dir.glob("test_*.py"))
    if run_all:
        return files
    out = []
    for f in files:
        name = f.stem[len("test_") :]
        fn = getattr(HF, name, None)
        if name in MULTI_FUNCTION_FILES or (callable(fn) and not isinstance(fn, type)):
            out.append(f)
    return out


def classify(exc: BaseException) -> tuple[str, str]:
    """(status, cause or message) of a case that raised ``exc``."""
    if isinstance(exc, ReferenceWrong):
        return "reference wrong", str(exc)[:200]
    if isinstance(exc, CannotRun):
        return "cannot run", exc.cause
    if isinstance(exc, ModuleNotFoundError):
        if (exc.name or "").startswith("nnabla"):
            return "cannot run", "NNabla internals"
        return "cannot run", "test dependency missing"
    if isinstance(exc, pytest.skip.Exception):
        return "skipped", str(exc)[:200]
    first = (str(exc).strip().splitlines() or [""])[0]
    return "fail", f"{type(exc).__name__}: {first[:300]}"


class Plugin:
    def __init__(self, timeout: float, log: Any = None) -> None:
        self.timeout = timeout
        self.log = log
        self.results: dict[str, list[str]] = {}
        self.collect_errors: dict[str, str] = {}

    @pytest.fixture(autouse=True)
    def _nnabla_defaults(self) -> Any:
        # NNabla's conftest: static mode, no parameters, for every test
        hd.set_auto_forward(False)
        hd.clear_parameters()

        def alarm(signum: int, frame: Any) -> None:
            raise TimeoutError(f"longer than {self.timeout} s")

        old = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        yield
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        hd.set_auto_forward(True)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        rep = outcome.get_result()
        if call.when == "teardown" and item.nodeid in self.results:
            return
        if call.excinfo is not None:
            exc = call.excinfo.value
            status, why = classify(exc)
            self.results[item.nodeid] = [status, why, f"{type(exc).__name__}: {exc}"[:200]]
        elif call.when == "call" and rep.passed:
            self.results[item.nodeid] = ["pass", "", ""]

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.log is not None:
            self.log.write(f"{time.strftime('%H:%M:%S')} {nodeid}\n")
            self.log.flush()

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collect_errors[report.nodeid] = str(report.longrepr)[-600:]


# Failures that are differences kept on purpose (docs/porting_layers.md, "NNabla to hodiff"):
# (file, part of the test's name, the difference). A case counts as "deliberate" only if it
# fails; one that passes counts as a pass.
DELIBERATE = (
    *(
        (f"test_{f}.py", "", message, "zero gradient (NNabla: straight-through)")
        for f in ("round", "ceil", "floor", "sign")
        for message in ("depends on no leaf with need_grad=True", "do not depend on inputs")
    ),
    ("test_clip_by_value.py", "forward[array", "DID NOT RAISE", "arrays are accepted as min/max"),
    (
        "test_dropout.py",
        "forward_backward",
        "depends on no leaf with need_grad=True",
        "backward() with no leaf to reach raises (NNabla: does nothing)",
    ),
)


def deliberate(nodeid: str, error: str) -> str | None:
    name = Path(nodeid.split("::")[0]).name
    test = nodeid.split("::")[-1]
    for f, part, message, why in DELIBERATE:
        if name == f and part in test and message in error:
            return why
    return None


def tally(results: dict[str, list[str]], collect_errors: dict[str, str]) -> dict[str, Any]:
    """Counts per file and in total, from each case's [status, cause or message, detail]."""
    per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures: list[dict[str, str]] = []
    details: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for nodeid, (status, why, detail) in results.items():
        c = per_file[Path(nodeid.split("::")[0]).name]
        if status == "fail" and deliberate(nodeid, why):
            status, detail = "deliberate", deliberate(nodeid, why) or ""
        if status == "cannot run":
            c[f"cannot run: {why}"] += 1
            details[why][detail] += 1
            continue
        c[status] += 1
        if status in ("skipped", "deliberate", "reference wrong"):
            details[status][detail or why] += 1
        if status == "fail":
            failures.append({"case": nodeid, "error": why})
    total: collections.Counter = collections.Counter()
    for c in per_file.values():
        total.update(c)
    return {
        "files": {f: dict(c) for f, c in sorted(per_file.items())},
        "total": dict(total),
        "failures": failures,
        "details": {k: dict(v.most_common()) for k, v in sorted(details.items())},
        "collection_errors": collect_errors,
        "results": results,
    }


COLUMNS = (
    ("pass", "pass"),
    ("fail", "fail"),
    ("deliberate", "deliber."),
    ("reference wrong", "ref wrong"),
    *((f"cannot run: {c}", s) for c, s in zip(CAUSES, SHORT, strict=True)),
    ("skipped", "skip"),
)


def table(result: dict[str, Any]) -> str:
    lines = [f"{'file':<36}" + "".join(f"{s:>10}" for _, s in COLUMNS)]
    rows = [*result["files"].items(), ("TOTAL", result["total"])]
    for name, c in rows:
        lines.append(f"{name:<36}" + "".join(f"{c.get(k, 0):>10}" for k, _ in COLUMNS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.nnabla_compat")
    p.add_argument("--tests", type=Path, help="NNabla's python/test/function")
    p.add_argument("--retally", type=Path, help="recount a stored JSON (no run)")
    p.add_argument("--all", action="store_true", help="every test file, not only the selection")
    p.add_argument("--files", nargs="*", help="only these file stems (relu, convolution, ...)")
    p.add_argument("-k", default=None, help="pytest's -k")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a case may take")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--log", type=Path, default=None, help="each case's start time, to this file")
    a = p.parse_args(argv)
    if a.retally:
        old = json.loads(a.retally.read_text())
        result = tally(old["results"], old["collection_errors"])
        result["run"] = old["run"]
        a.out.write_text(json.dumps(result, indent=1))
        print(table(result))
        return 0
    if a.tests is None:
        p.error("--tests DIR is needed")
    files = select(a.tests, a.all)
    if a.files:
        files = [f for f in files if f.stem[len("test_") :] in set(a.files)]
    args = [str(f) for f in files]
    args += [
        "-q",
        "--tb=no",
        "--continue-on-collection-errors",
        "-rN",
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "--import-mode=append",
        "-o",
        "addopts=",
        "-o",
        "filterwarnings=",
        f"--rootdir={a.tests}",
        "-W",
        "ignore",
    ]
    if a.k:
        args += ["-k", a.k]
    log = a.log.open("w") if a.log else None
    plugin = Plugin(a.timeout, log)
    sys.path.insert(0, str(SHIM))
    np.reshape = _reshape_with_newshape  # type: ignore[assignment]
    t0 = time.process_time()
    try:
        pytest.main(args, plugins=[plugin])
    finally:
        np.reshape = _np_reshape  # type: ignore[assignment]
        sys.path.remove(str(SHIM))
    result = tally(plugin.results, plugin.collect_errors)
    result["run"] = {
        "tests": str(a.tests),
        "files": [f.name for f in files],
        "cpu_s": round(time.process_time() - t0, 1),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    print(table(result))
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
