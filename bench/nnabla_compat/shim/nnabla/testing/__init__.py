"""``nnabla.testing``: numpy's assert_allclose with numpy.allclose's tolerances."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_allclose(
    actual: Any,
    desired: Any,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    equal_nan: bool = True,
    err_msg: str = "",
    verbose: bool = True,
) -> None:
    np.testing.assert_allclose(
        np.asarray(actual),
        np.asarray(desired),
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        err_msg=err_msg,
        verbose=verbose,
    )
