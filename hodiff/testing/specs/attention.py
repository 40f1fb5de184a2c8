"""Specs of hodiff/functions/attention.py and hodiff/functions/sampling.py."""

import numpy as np

import hodiff.functions as F
from hodiff.functions.attention import stop_gradient, write_back
from hodiff.functions.sampling import CornerIndex
from hodiff.testing.spec import Spec, fixed


def _sdpa_ref(q, k, v, attn_mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if attn_mask is not None:
        s = np.where(attn_mask, s, -np.inf) if attn_mask.dtype == bool else s + attn_mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _sn_ref(w, u, dim=0, itr=1, eps=1e-12, test=False):
    """NNabla's numpy reference (power iteration, sigma = u^T W v)."""
    wt = np.moveaxis(w, dim, 0)
    wm = wt.reshape(wt.shape[0], -1)
    for _ in range(itr):
        v = wm.T @ u
        v = v / np.sqrt(np.sum(v**2) + eps)
        u = wm @ v
        u = u / np.sqrt(np.sum(u**2) + eps)
    return np.moveaxis((wm / (u @ wm @ v)).reshape(wt.shape), 0, dim)


# singular values 3, 1, 0.5 and a random basis: the power iteration converges fast
_W_GAP = (
    np.linalg.qr(np.random.default_rng(7).standard_normal((3, 3)))[0]
    @ np.diag([3.0, 1.0, 0.5])
    @ np.linalg.qr(np.random.default_rng(8).standard_normal((4, 4)))[0][:3]
)


def multi_head_attention(query, key, value, wq, wk, wv, wo, bq, bk, bv, bo, *extra, **kw):
    """``F.multi_head_attention`` with the arrays first (the spec table's calling convention);
    ``extra`` are ``attn_bias_k, attn_bias_v, additive_mask`` when given.
    """
    named = dict(zip(("attn_bias_k", "attn_bias_v", "additive_mask"), extra, strict=False))
    heads = kw.pop("num_heads")
    return F.multi_head_attention(
        query, key, value, heads, wq, wk, wv, wo, bq, bk, bv, bo, **named, **kw
    )


def _mha_ref(
    query, key, value, wq, wk, wv, wo, bq, bk, bv, bo, *extra, num_heads, key_padding_mask=None
):
    """Loops over samples and heads: softmax(q_h k_h^T / sqrt(d) + mask) v_h, then W_out."""
    bias_k, bias_v, mask = (list(extra) + [None] * 3)[:3]
    lt, b, _ = query.shape
    q, k, v = query @ wq + bq, key @ wk + bk, value @ wv + bv
    if bias_k is not None:
        k = np.concatenate([k, np.broadcast_to(bias_k, (1, b, bias_k.size))], axis=0)
        v = np.concatenate([v, np.broadcast_to(bias_v, (1, b, bias_v.size))], axis=0)
    ls = k.shape[0]
    d, dv = q.shape[-1] // num_heads, v.shape[-1] // num_heads
    out = np.zeros((lt, b, v.shape[-1]))
    weights = np.zeros((b * num_heads, lt, ls))
    for n in range(b):
        for h in range(num_heads):
            s = q[:, n, h * d : (h + 1) * d] @ k[:, n, h * d : (h + 1) * d].T / np.sqrt(d)
            if mask is not None:
                s = s + (np.pad(mask, ((0, 0), (0, 1))) if bias_k is not None else mask)
            if key_padding_mask is not None:
                pad = np.pad(key_padding_mask, ((0, 0), (0, ls - key_padding_mask.shape[1])))
                s = np.where(pad[n] != 0, -np.inf, s)
            a = np.exp(s - s.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            weights[n * num_heads + h] = a
            out[:, n, h * dv : (h + 1) * dv] = a @ v[:, n, h * dv : (h + 1) * dv]
    return out @ wo + bo, weights


_MHA = ((3, 2, 4), (5, 2, 3), (5, 2, 2), (4, 4), (3, 4), (2, 6), (6, 3), (4,), (4,), (6,), (3,))


def _base(size, align):
    axes = [np.linspace(-1, 1, n) * (1 if align else (n - 1) / n) for n in size]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m for m in mesh[::-1]] + [np.ones_like(mesh[0])], -1)


def _affine_grid_ref(theta, size, align_corners=False):
    return np.einsum("...k,bjk->b...j", _base(size, align_corners), theta)


def _bilinear_ref(x, grid, align_corners=False, padding_mode="zero"):
    """Loops over pixels (2-D, channel first)."""
    b, c, h, w = x.shape
    out = np.zeros((b, c, *grid.shape[1:3]))
    for n in range(b):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                gx, gy = grid[n, i, j]
                if align_corners:
                    sx, sy = (gx + 1) * (w - 1) / 2, (gy + 1) * (h - 1) / 2
                else:
                    sx, sy = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
                if padding_mode == "repeat":
                    sx, sy = min(max(sx, 0), w - 1), min(max(sy, 0), h - 1)
                x0, y0 = int(np.floor(sx)), int(np.floor(sy))
                for yy, wy in ((y0, 1 - (sy - y0)), (y0 + 1, sy - y0)):
                    for xx, wx in ((x0, 1 - (sx - x0)), (x0 + 1, sx - x0)):
                        if 0 <= yy < h and 0 <= xx < w:
                            out[n, :, i, j] += wy * wx * x[n, :, yy, xx]
    return out


def corner_index(i0, i1):
    """The flat indices and masks of the corners (+0, +1) and (+1, +0) in a 3 x 4 image."""
    return CornerIndex(sizes=(3, 4), offsets=((0, 1), (1, 0)))(i0, i1)


def _warp_kinks(n: int, align: bool) -> tuple[float, ...]:
    """Grid values where the pixel coordinate is an integer (for sizes n = 3 and 4)."""
    ks = set()
    for size in (3, 4):
        for i in range(-2, size + 2):
            ks.add(round(2 * i / (size - 1) - 1 if align else (2 * i + 1) / size - 1, 12))
    return tuple(sorted(ks))


_MASK = fixed(
    np.array([[0.0, -1.0, 0.5, 0.0, -2.0], [0.3, 0.0, 0.0, -0.5, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
)
_BOOL = fixed(
    np.array(
        [
            [True, False, True, True, False],
            [True, True, False, True, True],
            [False, False, False, False, True],
        ]
    )
)

SPECS = [
    Spec(F.scaled_dot_product_attention, ((2, 3, 4), (2, 5, 4), (2, 5, 2)), _sdpa_ref),
    Spec(
        F.scaled_dot_product_attention,
        ((2, 3, 4), (2, 5, 4), (2, 5, 2), _MASK),
        _sdpa_ref,
        id="float_mask",
    ),
    Spec(
        F.scaled_dot_product_attention, ((3, 4), (5, 4), (5, 2), _BOOL), _sdpa_ref, id="bool_mask"
    ),
    Spec(
        F.scaled_dot_product_attention,
        ((2, 4), (3, 4), (3, 2)),
        lambda q, k, v, scale: _sdpa_ref(q * scale * 2.0, k, v),
        kwargs={"scale": 0.25},
        id="scale",
    ),
    # NNabla's gradient (u, v constant) is the derivative of W / sigma_max(W) once the
    # iteration has converged: order 1 against finite differences at a converged point
    Spec(
        F.spectral_norm,
        (fixed(_W_GAP), fixed(np.array([0.6, -0.3, 0.7]))),
        _sn_ref,
        kwargs={"itr": 60, "test": True},
        ref_atol=1e-10,
        order=1,
        id="converged",
    ),
    Spec(
        F.spectral_norm,
        ((3, 4), fixed(np.array([0.6, -0.3, 0.7]))),
        lambda w, u, **kw: _sn_ref(w, u, test=True),
        kwargs={"test": True, "grad_through_iteration": True},
        ref_atol=1e-10,
        id="through_iteration",
    ),
    Spec(
        F.spectral_norm,
        ((2, 3, 2), fixed(np.array([0.6, -0.3, 0.7]))),
        lambda w, u, **kw: _sn_ref(w, u, dim=1, itr=3),
        kwargs={"dim": 1, "itr": 3, "test": True, "grad_through_iteration": True},
        ref_atol=1e-10,
        id="through_iteration_dim1_itr3",
    ),
    Spec(
        F.spectral_norm,
        (fixed(_W_GAP), fixed(np.array([0.6, -0.3, 0.7]))),
        lambda w, u, **kw: (_sn_ref(w, u, itr=60), u),
        kwargs={"itr": 60, "test": True, "output_u": True},
        ref_atol=1e-10,
        order=1,
        id="output_u",
    ),
    Spec(stop_gradient, ((2, 3),), lambda x: x, order=0),
    Spec(write_back, ((3,), fixed(np.zeros(3))), lambda u, t: u, linear=True),
    Spec(multi_head_attention, _MHA, _mha_ref, kwargs={"num_heads": 2}, atol=1e-5),
    Spec(
        multi_head_attention,
        (*_MHA, (4,), (6,), (3, 5)),
        _mha_ref,
        kwargs={"num_heads": 2, "key_padding_mask": np.array([[0, 0, 0, 1, 0], [1, 0, 0, 0, 0]])},
        atol=1e-5,
        id="bias_kv_masks",
    ),
    Spec(F.affine_grid, ((2, 2, 3),), _affine_grid_ref, kwargs={"size": (3, 4)}, linear=True),
    Spec(
        F.affine_grid,
        ((1, 2, 3),),
        _affine_grid_ref,
        kwargs={"size": (2, 3), "align_corners": True},
        linear=True,
        id="align",
    ),
    Spec(
        F.affine_grid,
        ((1, 3, 4),),
        _affine_grid_ref,
        kwargs={"size": (2, 2, 3)},
        linear=True,
        id="3d",
    ),
    Spec(
        F.warp_by_grid,
        ((2, 2, 3, 4), (2, 2, 3, 2)),
        _bilinear_ref,
        domain=(-1.2, 1.2),
        kinks=_warp_kinks(4, False),
        gap=0.03,
    ),
    Spec(
        F.warp_by_grid,
        ((1, 2, 3, 4), (1, 2, 2, 2)),
        _bilinear_ref,
        domain=(-1.2, 1.2),
        kwargs={"align_corners": True, "padding_mode": "repeat"},
        kinks=(*_warp_kinks(4, True), -1.0, 1.0),
        gap=0.03,
        id="align_repeat",
    ),
    Spec(
        corner_index,
        (fixed(np.array([0.0, 2.0, -1.0])), fixed(np.array([1.0, 3.0, 0.0]))),
        lambda i0, i1: (
            np.array([[2, 5], [11, 11], [1, 0]]),  # worked out by hand
            np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 1.0]]),
        ),
        order=0,
        id="corner_index",
    ),
]
