"""The pictures of docs/graphs.md: the forward and the gradient graph of a small MLP.

Run ``python examples/graph_pictures.py [outdir]`` (default: the current directory; pass
``docs/img`` to refresh the pictures the docs ship). PNGs need Graphviz's ``dot``; without it
the DOT sources are written instead, and the script says how to turn them into pictures.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

import hodiff as hd
import hodiff.functions as F


def mlp_graphs() -> tuple[hd.Variable, list[hd.Variable], dict[str, hd.Variable]]:
    """A 3-4-1 tanh MLP with a squared-error loss: (loss, gradients, names for the picture)."""
    rng = np.random.default_rng(0)
    x = hd.Variable.from_array(rng.standard_normal((8, 3)))
    t = hd.Variable.from_array(rng.standard_normal((8, 1)))
    w1 = hd.Variable.from_array(rng.standard_normal((3, 4)) * 0.5, need_grad=True)
    b1 = hd.Variable.from_array(np.zeros(4), need_grad=True)
    w2 = hd.Variable.from_array(rng.standard_normal((4, 1)) * 0.5, need_grad=True)
    b2 = hd.Variable.from_array(np.zeros(1), need_grad=True)
    h = F.tanh(F.affine(x, w1, b1))
    loss = F.mean(F.squared_error(F.affine(h, w2, b2), t))
    grads = hd.grad(loss, [w1, b1, w2, b2])
    names = {"x": x, "t": t, "W1": w1, "b1": b1, "W2": w2, "b2": b2, "h": h, "loss": loss}
    names.update(
        {f"d loss / d {k}": g for k, g in zip(["W1", "b1", "W2", "b2"], grads, strict=True)}
    )
    return loss, grads, names


#: what to do with the DOT sources written where Graphviz is not installed
DOT_HINT = (
    "Graphviz's dot is not installed, so these are DOT sources (text): install Graphviz "
    "(e.g. apt install graphviz, brew install graphviz, conda install graphviz) and run this "
    "again for PNGs, or make one with: dot -Tpng {path} -o {png}"
)


def main(outdir: str | Path = ".", verbose: bool = False) -> list[Path]:
    """Writes mlp_forward and mlp_gradient (PNG with Graphviz, DOT without) into ``outdir``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    loss, grads, names = mlp_graphs()
    ext = ".png" if shutil.which("dot") else ".dot"
    paths = [out / f"mlp_forward{ext}", out / f"mlp_gradient{ext}"]
    hd.to_dot(loss, paths[0], names=names)
    hd.to_dot(grads, paths[1], names=names)
    if verbose:
        for p in paths:
            print(p)
        if ext == ".dot":
            print(DOT_HINT.format(path=paths[0], png=paths[0].with_suffix(".png")))
    return paths


if __name__ == "__main__":
    main(*sys.argv[1:], verbose=True)
