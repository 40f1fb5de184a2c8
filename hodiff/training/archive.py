"""Named arrays in one ``.npz`` file: what ``save_parameters`` and ``save_states`` write.

The layout is numpy's ``.npz`` (what ``numpy.savez`` writes and ``numpy.load``
reads): a zip archive with one member ``<name>.npy`` per array, in the ``.npy``
format, uncompressed. :func:`write_arrays` writes the members itself instead of
passing the names to ``numpy.savez`` as keyword arguments, so that every name
round-trips: ``/``, spaces, unicode, and numpy's own keywords (``file``,
``allow_pickle``), which ``numpy.savez`` would take as its arguments. Files
written by ``numpy.savez`` (older hodiff versions) read the same.

:func:`read_arrays` reads every array before returning, so a caller can check them
all before it changes anything; a damaged file (truncated, a flipped bit: every
member's CRC-32 is checked, not a zip, a pickled object) raises one ValueError that
names the function and the file.

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
>>> write_arrays(path, {"file": np.ones(2), "net/W 1": np.zeros(())})
>>> sorted(read_arrays("example", path).items())
[('file', array([1., 1.])), ('net/W 1', array(0.))]
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["read_arrays", "write_arrays"]

_SUFFIX = ".npy"


def _umask() -> int:
    """The process's umask (read by setting it, and set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_arrays(path: str | os.PathLike[str], arrays: Mapping[str, Any]) -> None:
    """Writes ``arrays`` (name -> numpy array) to ``path`` in numpy's ``.npz`` layout.

    The file is written next to ``path`` under a temporary name and then renamed
    over it, so an interrupted save leaves the previous file whole.

    Raises:
        ValueError: a name is not a non-empty str without NUL characters (a zip member
            name cannot hold one).
    """
    for name in arrays:
        if not isinstance(name, str) or not name or "\0" in name:
            raise ValueError(f"write_arrays: cannot store an array named {name!r}")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".hodiff-", suffix=".npz.tmp", dir=folder)
    try:
        # mkstemp makes the file -rw-------; a file is made with the umask's permissions,
        # as open() (and numpy's save) would make it (-rw-r--r-- under umask 022)
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            for name, a in arrays.items():
                with zf.open(name + _SUFFIX, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(a), allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_arrays(where: str, path: str | os.PathLike[str], what: str = "") -> dict[str, Any]:
    """Every array of the ``.npz`` file ``path``, name -> numpy array, in file order.

    Args:
        where: the calling function, for the error message (``"load_parameters"``).
        path: the file.
        what: what the file should be (``"a parameter file of save_parameters"``).

    Raises:
        FileNotFoundError, PermissionError, IsADirectoryError: as ``open`` does.
        ValueError: naming ``where`` and ``path``, when the file is not a readable
            ``.npz`` archive of plain arrays (truncated, corrupted, a pickled object).
    """
    shown = os.fspath(path)
    kind = f" ({what})" if what else ""
    with open(path, "rb") as fh:  # a missing file raises as open does
        try:
            out: dict[str, Any] = {}
            with zipfile.ZipFile(fh) as zf:
                for info in zf.infolist():
                    name = info.filename
                    key = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else name
                    with zf.open(info) as member:
                        a = np.lib.format.read_array(member, allow_pickle=False)
                        if member.read(1):  # reads to the end: checks the CRC-32 too
                            raise ValueError(f"member {name!r} has data after its array")
                    out[key] = a
        except Exception as e:  # zipfile.BadZipFile, zlib.error, EOFError, ValueError, ...
            raise ValueError(
                f"{where}: {shown!r} is not a valid .npz file{kind}: it is truncated or "
                f"corrupted ({type(e).__name__}: {e})"
            ) from e
    return out
