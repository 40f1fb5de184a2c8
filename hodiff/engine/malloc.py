"""Keep glibc's malloc from giving a training step's memory back to the system every step.

A step allocates and frees the same few megabytes of arrays each iteration. glibc serves
blocks of 128 KiB or more by ``mmap`` and returns memory to the system once 128 KiB are
free at the top of its heap, so every step touches fresh pages again: 1,000-2,400 minor page
faults a step on the benchmarks' workloads, which cost W6a 5.95 ms a step against 1.97 ms
without them, W3 (float32) 10.0 against 7.1 ms, W1 (float64) 14.2 against 10.5 ms (one
thread, a process running hodiff only). glibc raises both thresholds by itself the first time
a program frees a block it had mapped (to that block's size, and twice that for returning
memory, at most 32 MiB): hodiff frees one 16 MiB block at import, as a numpy program that
once dropped a 16 MiB array would have. The cost: up to 32 MiB of freed memory may stay with
the process instead of going back to the system.

Nothing happens outside glibc, when ``HODIFF_MALLOC_TUNE=0`` is set, or when the program set
the thresholds itself (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or
``mallopt``): glibc then keeps its thresholds fixed.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["BLOCK_BYTES", "glibc", "raise_thresholds"]

#: the size of the block freed at import: glibc's thresholds rise to it (mmap) and twice it (trim)
BLOCK_BYTES = 16 * 2**20


def glibc() -> bool:
    """Whether this process runs on glibc."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return False


def raise_thresholds() -> bool:
    """Frees one mapped :data:`BLOCK_BYTES` block (never touched: no page is faulted in).

    Returns whether it did (on glibc, unless ``HODIFF_MALLOC_TUNE=0``).
    """
    if os.environ.get("HODIFF_MALLOC_TUNE", "1") == "0" or not glibc():
        return False
    block = np.empty(BLOCK_BYTES, dtype=np.uint8)
    del block
    return True
