"""Why an NNabla test case cannot run on hodiff: the exceptions the shim raises.

Each is a ``CannotRun`` with a ``cause`` (one of ``CAUSES``); the runner's pytest plugin
counts a case that raises one as "cannot run" for that cause, not as a failure.
"""

from __future__ import annotations

CAUSES = (
    "function missing",
    "argument missing",
    "float16 / half",
    "inplace",
    "NNabla internals",
    "reset_shape",
    "test dependency missing",
)
SHORT = ("no fn", "no arg", "half", "inplace", "internal", "reset", "dep")


class CannotRun(Exception):  # noqa: N818 (a verdict, not an error)
    cause = "NNabla internals"


class MissingFunction(CannotRun):
    cause = "function missing"

    def __init__(self, name: str) -> None:
        super().__init__(f"hodiff has no function {name!r}")
        self.name = name


class MissingArgument(CannotRun):
    cause = "argument missing"

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name


class HalfPrecision(CannotRun):
    cause = "float16 / half"


class Inplace(CannotRun):
    cause = "inplace"


class Internals(CannotRun):
    cause = "NNabla internals"


class ResetShape(CannotRun):
    cause = "reset_shape"


class ReferenceWrong(Exception):  # noqa: N818 (a verdict, not an error)
    """NNabla's reference gradient disagrees with finite differences, which agree with hodiff."""
