"""Gradient-only functions of the linalg family."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

from hodiff.engine.context import array_module
from hodiff.engine.function import Function, Slot
from hodiff.engine.variable import Variable
from hodiff.functions import linalg as _linalg

__all__ = ["einsum_expand"]


class EinsumExpand(Function, follows_shape=False):
    """The transpose of ``einsum(dst -> src)``: ``x`` (indices ``src``) laid out on ``dst``.

    Each index of ``dst`` missing from ``src`` is a broadcast; an index repeated
    in ``dst`` puts ``x`` on that diagonal (zeros elsewhere).
    """

    complex_values = "holomorphic"
    need_inputs = False
    taylor = "linear"

    def __init__(self, *, src: str, dst: str, shape: Sequence[int]) -> None:
        self.src = str(src)
        self.dst = str(dst)
        self.shape = tuple(int(s) for s in shape)

    def _sizes(self) -> dict[str, int]:
        return dict(zip(self.dst, self.shape, strict=True))

    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        x = inputs[0]
        unique = "".join(dict.fromkeys(self.dst))
        order = [c for c in unique if c in self.src]
        sizes: dict[str, int] = {}
        ok = len(self.dst) == len(self.shape) and "".join(order) == self.src
        ok = ok and len(self.dst) - len(unique) <= len(string.ascii_letters) - len(unique)
        for c, d in zip(self.dst, self.shape, strict=False):
            ok = ok and sizes.setdefault(c, d) == d
        if not ok or x.shape != tuple(sizes[c] for c in self.src):
            raise ValueError(
                f"einsum_expand: x of shape {x.shape} with indices {self.src!r} cannot be laid "
                f"out on {self.dst!r} of shape {self.shape}"
            )
        return [(self.shape, x.dtype)]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        xp = array_module(x)
        sizes = self._sizes()
        unique = "".join(dict.fromkeys(self.dst))
        y = x.reshape([sizes[c] if c in self.src else 1 for c in unique])
        y = xp.broadcast_to(y, [sizes[c] for c in unique])
        if len(unique) < len(self.dst):  # repeated indices: times one identity per repeat
            free = iter(c for c in string.ascii_letters if c not in self.dst)
            terms, out, seen = [unique], "", set()
            for c in self.dst:
                if c in seen:
                    e = next(free)
                    terms.append(c + e)
                    out += e
                else:
                    seen.add(c)
                    out += c
            eyes = [xp.eye(sizes[t[0]], dtype=x.dtype) for t in terms[1:]]
            y = xp.einsum(",".join(terms) + "->" + out, y, *eyes)
        outputs[0] = y

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        # transpose of the layout: take the diagonals and sum over the broadcast indices
        if prop_down[0]:
            gx = _linalg.einsum(f"{self.dst}->{self.src}", outputs[0].grad)
            inputs[0].store(gx, accum[0])

    def batch_rule(self, inputs: Sequence[Any], axes: Sequence[int | None]) -> Any:
        # one more index for the batch axis, in front of src and dst
        (x,) = inputs
        z = next(c for c in string.ascii_letters[::-1] if c not in self.dst)
        f = EinsumExpand(src=z + self.src, dst=z + self.dst, shape=(x.shape[0], *self.shape))
        return f(x)


def einsum_expand(x: Any, src: str, dst: str, shape: Sequence[int]) -> Variable:
    """``x`` with einsum indices ``src`` laid out on indices ``dst`` of ``shape``.

    The transpose (adjoint) of ``einsum(dst + "->" + src, .)``: indices of ``dst``
    absent from ``src`` are broadcast, repeated ones are diagonals.

    >>> import numpy as np
    >>> einsum_expand(np.array([1.0, 2.0]), "i", "ii", (2, 2)).d
    array([[1., 0.],
           [0., 2.]])
    """
    return EinsumExpand(src=src, dst=dst, shape=shape)(x)
