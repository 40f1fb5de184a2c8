"""The README's demo and the spec table work on a bare install (numpy only: no scipy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# scipy (and every other optional extra) made unimportable before hodiff loads
BARE = """
import sys
for name in ("scipy", "matplotlib", "mpi4py", "cupy", "sklearn", "tqdm", "hypothesis"):
    sys.modules[name] = None
from hodiff.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BARE, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_demo_runs_without_optional_extras() -> None:
    r = _run("demo")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "all derivatives agree" in r.stdout
    assert "7. graphs as data" in r.stdout


def test_check_runs_without_optional_extras() -> None:
    r = _run("check", "--order", "1", "--functions", "logsumexp", "digamma")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "0 failed" in r.stdout
