"""hodiff/_malloc.py: after ``import hodiff`` a loop that allocates and frees the same few
megabytes of arrays no longer page-faults them in every iteration (glibc only).

Each case runs in a fresh interpreter: the thresholds are process-wide and only rise.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hodiff.engine import malloc as _malloc

pytestmark = pytest.mark.skipif(not _malloc.glibc(), reason="glibc's malloc thresholds")

# a "training step": eight 512 KiB arrays made and dropped; minor faults per step, steady state
_LOOP = """
import resource, sys
import numpy as np
{prelude}
def step():
    arrays = [np.ones(65536) for _ in range(8)]  # 8 x 512 KiB, touched
    return sum(float(a[0]) for a in arrays)
for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def _faults_per_step(prelude: str, **env: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _LOOP.format(prelude=prelude)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(out.stdout)


def test_import_hodiff_stops_the_page_faults_of_a_repeated_step() -> None:
    plain = _faults_per_step("")  # numpy alone: each 512 KiB array is mapped and unmapped
    assert plain > 500  # 8 x 128 pages a step
    assert _faults_per_step("import hodiff") < 20


def test_opt_out_and_explicit_thresholds_are_respected() -> None:
    assert _faults_per_step("import hodiff", HODIFF_MALLOC_TUNE="0") > 500
    # a threshold the program set: glibc keeps it fixed, hodiff's block changes nothing
    assert _faults_per_step("import hodiff", MALLOC_MMAP_THRESHOLD_="131072") > 500


def test_raise_thresholds_reports_what_it_did(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HODIFF_MALLOC_TUNE", "0")
    assert not _malloc.raise_thresholds()
    monkeypatch.setenv("HODIFF_MALLOC_TUNE", "1")
    assert _malloc.raise_thresholds()
    monkeypatch.setattr(_malloc, "glibc", lambda: False)
    assert not _malloc.raise_thresholds()
