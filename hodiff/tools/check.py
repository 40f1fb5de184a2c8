"""Checking derivatives of any order against Richardson-extrapolated finite differences.

Order 1 compares the gradient of ``S1(x) = <u, f(x)>`` (``u`` random) with
finite differences of ``S1``. Order ``k + 1`` does the same for
``S(k+1)(x) = sum_i <v_i, d Sk / d x_i>`` along fresh random directions ``v``:
the analytic side differentiates the recorded gradient graph once more, the
numeric side re-evaluates ``S(k+1)`` -- calling ``f`` again -- at perturbed
inputs. Every element of every input is checked, in float64. One evaluation at
a perturbed point gives ``S1 .. SK`` at once, so every order shares the stencil.

The differences (``eps=None``), per element ``j`` of input ``i``, at the steps
``h, h/2, h/4`` (``h = 0.02 max(|x_j|, min(rms(x_i), 1))``, or ``eps``):

* central ``D(h) = (S(x + h e_j) - S(x - h e_j)) / 2h``, Richardson-extrapolated
  twice (``D = S' + c2 h^2 + c4 h^4 + ...``) to an ``O(h^6)`` value ``C``;
* one-sided ``(S(x + h e_j) - S(x)) / h`` and ``(S(x) - S(x - h e_j)) / h``,
  extrapolated (``O(h^3)``) to a right value ``R`` and a left value ``L``.

Each comes with an error estimate: the spread of its extrapolation (the last two
levels of the table) plus the rounding of the stencil, ``100 eps_64 M / h`` summed
through the extrapolation weights, ``M`` the magnitude of ``S``'s own terms (at
order 1 the larger of ``sum |u * f(x)|`` and ``sum_z sum |z| |dS/dz|`` over the
values of ``S``'s recorded graph, which sees cancellation inside ``f``;
``sum_i |v_i * dS/dx_i|`` at higher orders), so a function of values ~1e6 or ~1e-6
is checked relative to its own scale. The tolerance of an
element is three times its estimate plus the analytic side's rounding and the
resolution floor (``max(1000 eps_64, r_k) max_j |analytic_j|``, ``r_1 = 1e-9``,
``r_k = 1e-7`` above), unless ``atol``/``rtol`` are given.

Kinks: when ``|L - R|`` exceeds their estimates, the stencil crosses a point where
``S`` is not differentiable. The element is then "not differentiable" (a pass)
if the analytic value matches a clean one-sided (or central) value -- a
subgradient the rule may legitimately return -- and a failure otherwise, so a
wrong derivative next to a kink is still caught. When both sides are resolved (their
estimates below ``SHARP |L - R|`` or the floor) the kink is at ``x`` itself: any value
between ``L`` and ``R`` is a subgradient ("not differentiable", a pass: three tied
maxima), and the orders above are not differentiable. A jump of ``S`` at ``x`` itself
(no clean side, one-sided differences growing like ``1/h``) is "not differentiable" too.
An element that is not ``ok`` at the first steps is differenced again at steps 16
times smaller (a kink the stencil only grazed, a steep function, a domain edge),
then 256 and 4096 times smaller, and keeps the better result (a tolerance more than
``1e-8 max|analytic|`` above its floor is retried too, while the smaller steps tighten
it). A better verdict counts only if its error estimate is no larger than the first
one's (a kink's, or a failure's at a kink: than ``1e-8 max|analytic|``), so noise at
small steps never overturns a failure.

``gradcheck(..., fast=True)`` (as PyTorch's fast mode) first checks one number
per order, the derivative along one random direction over all inputs at once,
with the same differences; if that fails, the full check runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hodiff.engine import random as _random
from hodiff.engine.api import topological_order
from hodiff.engine.autograd import grad
from hodiff.engine.context import array_module, auto_forward
from hodiff.engine.variable import Variable
from hodiff.functions.array import stack as _stack
from hodiff.functions.reduction import sum as _sum_all
from hodiff.tools import check_complex as _cx
from hodiff.tools.check_report import (
    FAIL,
    NOT_DIFFERENTIABLE,
    OK,
    GradcheckReport,
    GradcheckRow,
    SummaryRow,
    plot_steps,
)
from hodiff.transforms.vectorize import refuse_batched, vmap

__all__ = [
    "GradcheckError",
    "GradcheckReport",
    "GradcheckRow",
    "SummaryRow",
    "fast_gradcheck",
    "gradcheck",
    "gradgradcheck",
]

EPS64 = float(np.finfo(np.float64).eps)
STEP = 0.02  #: the largest step, relative to the input's scale
STEPS = 3  #: h, h/2, h/4
RETRY = (1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0)  #: the steps of the later tries, relative
COND = 100.0  #: rounding of one evaluation of S, in units of eps_64 * M
ANALYTIC = 1e3  #: rounding of the analytic side, in units of eps_64 max_j |analytic_j|
#: the smallest relative error resolved, per order (1; 2 and above), in units of the input's
#: largest analytic derivative: 1000 times below the targets (1e-6 at order 1, 1e-4 above),
#: above the cancellation a rule's higher derivatives may carry (sinc's quotient near 0)
RESOLUTION = (1e-9, 1e-7)
SAFETY = 3.0  #: tolerance = SAFETY * estimate (+ the analytic side's rounding)
CLEAN = 0.25  #: a one-sided value is clean when its tolerance is below CLEAN |L - R|
KINK = 1e-8  #: a left/right gap below KINK (S's terms / x's scale) is rounding, not a kink
#: a kink is at x itself when both one-sided values are resolved to SHARP |L - R| (or to the
#: floor): a kink at distance d puts a (d / h) |L - R| term into the side that crosses it, so
#: kinks closer than ~SHARP h (2e-6 |x| at the first steps) count as at x
SHARP = 1e-4
LOOSE = 1e-8  #: a tolerance above LOOSE max|analytic| is retried at the smaller steps

_RANK = {FAIL: 0, NOT_DIFFERENTIABLE: 1, OK: 2}


class GradcheckError(AssertionError):
    """Raised by :func:`gradcheck` when an analytic derivative disagrees with finite differences."""


def _to_numpy(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)


def directional(
    f: Callable[..., Any],
    k: int,
    arrays: Sequence[Any],
    diff: Sequence[int],
    u: Any,
    directions: Sequence[Sequence[Any]],
) -> tuple[Variable, list[Variable]]:
    """``S_k`` at ``arrays`` and the Variables it was built from: ``S_1 = sum(u * f(x))``,
    ``S_(j+1) = sum_i <directions[j][i], d S_j / d x_i>`` over the float inputs ``diff``
    (the recursion of autograd's ``check_grads``: each order is a first derivative of the last).
    """
    vs = [Variable.from_array(a, need_grad=i in diff) for i, a in enumerate(arrays)]
    s = _sum_all(f(*vs) * u)
    for level in range(k - 1):
        gs = grad(s, [vs[i] for i in diff], allow_unused=True)
        terms = [_sum_all(g * v) for g, v in zip(gs, directions[level], strict=True)]
        s = terms[0]
        for t in terms[1:]:
            s = s + t
    return s, vs


#: why a batched variable (inside ``hd.vmap``) is refused
NOT_PER_EXAMPLE = (
    "a derivative check compares values with finite differences and returns a report, "
    "which has no per-example form inside vmap"
)


def refuse_batched_output(name: str, y: Any) -> None:
    """``f``'s output must not be batched: ``f`` closes over a batched variable of an hd.vmap."""
    refuse_batched(
        name,
        "f(*inputs)",
        y,
        "f closes over a batched variable of the enclosing hd.vmap; " + NOT_PER_EXAMPLE,
    )


class _SameDraws:
    """``f`` evaluated with the random numbers of its first evaluation (the seeds its random
    nodes took, replayed): a finite difference of a function that draws (dropout) compares
    ``f`` with itself, not with another draw.
    """

    def __init__(self, f: Callable[..., Variable], tape: _random.Tape, name: str) -> None:
        self.f, self.tape, self.name = f, tape, name

    def __call__(self, *vs: Any) -> Variable:
        with _random.replaying(self.tape, self.name):
            return self.f(*vs)


class _Problem:
    """``f`` at float64 copies ``xs`` of the inputs, the random weights ``u`` and directions,
    and the two things every check needs: :meth:`values` (``S_1..S_K`` at some inputs, the
    numeric side) and :meth:`analytic` (``dS_k/dx_i`` at ``xs`` and the scale of each ``S_k``).
    """

    def __init__(self, name: str, f: Callable[..., Variable], inputs: Any, top: int, seed: int):
        raw = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
        self.xs: list[Any] = []
        for a in raw:
            a = a.d if isinstance(a, Variable) else a
            a = array_module(a).asarray(a)
            self.xs.append(a.astype(np.float64) if a.dtype.kind == "f" else a)
        self.diff = [i for i, a in enumerate(self.xs) if a.dtype.kind == "f"]
        if not self.diff:
            raise TypeError(f"{name}: no float input to differentiate")
        for i in self.diff:
            if self.xs[i].size == 0:
                raise ValueError(
                    f"{name}: input {i} has no elements (shape {self.xs[i].shape}): nothing "
                    "would be checked"
                )
        self.top = top
        self.rng = np.random.default_rng(seed)
        tape = _random.Tape()  # the first evaluation's draws, replayed by every later one
        with _random.recording(tape):
            y0 = f(*[Variable.from_array(a) for a in self.xs])
        self.f = _SameDraws(f, tape, name) if tape.seeds else f
        if not isinstance(y0, Variable):
            raise TypeError(f"{name}: f must return a Variable, got {type(y0).__name__}")
        refuse_batched_output(name, y0)
        if y0.size == 0:
            raise ValueError(
                f"{name}: f returned an empty output (shape {y0.shape}): nothing would be checked"
            )
        self.xp = array_module(y0.d)
        self.u = self.xp.asarray(self.rng.standard_normal(y0.shape))
        self.directions = [
            [self.xp.asarray(self.rng.standard_normal(self.xs[i].shape)) for i in self.diff]
            for _ in range(top - 1)
        ]
        self.batched: bool | None = None  # whether hd.vmap evaluates S faithfully (None: untried)
        self.center = np.zeros(top)  # S_1..S_K at xs (set by the check)
        self.scales = np.zeros(top)  # the magnitude of S_k's terms

    def values(self, arrays: Sequence[Any]) -> np.ndarray:
        """``[S_1, .., S_K]`` at ``arrays``."""
        top = self.top
        vs = [
            Variable.from_array(a, need_grad=top > 1 and i in self.diff)
            for i, a in enumerate(arrays)
        ]
        if top == 1:  # f may call hd.grad itself (a gradient penalty): recording stays on
            return np.array([float(_to_numpy(_sum_all(self.f(*vs) * self.u).d))])
        s = _sum_all(self.f(*vs) * self.u)
        out = [float(_to_numpy(s.d))]
        wanted = [vs[i] for i in self.diff]
        for level in range(top - 1):  # recorded, as the analytic side: the same rules run
            gs = grad(s, wanted, allow_unused=True)
            dirs = self.directions[level]
            if level == top - 2:
                out.append(
                    sum(float(_to_numpy((g.d * v).sum())) for g, v in zip(gs, dirs, strict=True))
                )
            else:
                terms = [_sum_all(g * v) for g, v in zip(gs, dirs, strict=True)]
                s = terms[0]
                for t in terms[1:]:
                    s = s + t
                out.append(float(_to_numpy(s.d)))
        return np.array(out)

    def batched_values(self, batches: Sequence[Any]) -> np.ndarray:
        """``values`` at every row of ``batches`` (one array per float input, batch axis
        first) in one ``hd.vmap`` computation: ``(B, K)``. Raises whatever vmap raises.
        """
        top, xs, diff = self.top, self.xs, self.diff

        def one(*mapped: Variable) -> Variable:
            vs = [Variable.from_array(a) for a in xs]
            for slot, i in enumerate(diff):
                vs[i] = mapped[slot]
            s = _sum_all(self.f(*vs) * self.u)
            out = [s]
            wanted = list(mapped)
            for level in range(top - 1):
                gs = grad(s, wanted, allow_unused=True)
                terms = [_sum_all(g * v) for g, v in zip(gs, self.directions[level], strict=True)]
                s = terms[0]
                for t in terms[1:]:
                    s = s + t
                out.append(s)
            return _stack(*out)

        return _to_numpy(vmap(one)(*batches).d).reshape(-1, top)

    def analytic(self, arrays: Sequence[Any] | None = None) -> tuple[list[list[Any]], np.ndarray]:
        """``grads[k-1][slot] = dS_k/dx_i`` (numpy float64) and ``scales[k-1]`` = the summed
        magnitude of ``S_k``'s terms (what its rounding is proportional to).
        """
        arrays = self.xs if arrays is None else arrays
        vs = [Variable.from_array(a, need_grad=i in self.diff) for i, a in enumerate(arrays)]
        wanted = [vs[i] for i in self.diff]
        y = self.f(*vs)
        s = _sum_all(y * self.u)
        scales = [max(float(_to_numpy(abs(y.d * self.u).sum())), _rounding_scale(s))]
        grads = []
        for k in range(1, self.top + 1):
            gs = grad(s, wanted, allow_unused=True)  # recorded: the path hd.grad users get
            grads.append([_to_numpy(g.d) for g in gs])
            if k < self.top:
                dirs = self.directions[k - 1]
                terms = [_sum_all(g * v) for g, v in zip(gs, dirs, strict=True)]
                scales.append(
                    sum(float(_to_numpy(abs(g.d * v).sum())) for g, v in zip(gs, dirs, strict=True))
                )
                s = terms[0]
                for t in terms[1:]:
                    s = s + t
        return grads, np.array(scales)


def _rounding_scale(s: Variable) -> float:
    """``sum_z sum |z| |dS/dz|`` over the values ``z`` of ``S``'s graph: the first-order bound
    on ``S``'s rounding (each operation rounds its result by ``eps |z|``), in units of eps.

    The magnitude of ``f``'s output alone misses cancellation inside ``f``
    (``sum(w * sinc(x))`` near 0 with ``sum(w) ~ 1e-4``: terms ~1, output ~1e-4).
    Values without a float gradient (labels, masks) are skipped, and products that are not
    finite (a mask's ``-inf`` times a zero gradient).
    """
    values = [
        x
        for node in topological_order([s])
        for x in node.inputs
        if x.parent is not None
        and getattr(x.d, "dtype", None) is not None
        and x.d.dtype.kind == "f"
    ]
    values = list({id(v): v for v in [s, *values]}.values())
    gs = grad(s, values, allow_unused=True, create_graph=False)
    total = 0.0
    with np.errstate(all="ignore"):  # -inf scores of a mask times a zero gradient: not counted
        for v, g in zip(values, gs, strict=True):
            terms = np.abs(_to_numpy(v.d)) * np.abs(_to_numpy(g.d))
            total += float(terms[np.isfinite(terms)].sum())
    return total


def _richardson(
    table: np.ndarray, noise: np.ndarray, powers: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Extrapolates ``table[..., m]`` (a difference at step ``h / 2^m``, error ``sum c_p h^p``
    over ``powers``) to ``h -> 0``. Returns the value, the spread (the last two levels'
    difference) and the rounding carried through the weights.
    """
    prev = table[..., -1]
    for p in powers[: table.shape[-1] - 1]:
        r = 2.0**p
        prev = table[..., -1]
        table = (r * table[..., 1:] - table[..., :-1]) / (r - 1.0)
        noise = (r * noise[..., 1:] + noise[..., :-1]) / (r - 1.0)
    value = table[..., -1]
    with np.errstate(invalid="ignore"):
        return value, np.abs(value - prev), noise[..., -1]


@dataclass
class _Judged:
    numeric: np.ndarray  # (n, K)
    estimate: np.ndarray
    tolerance: np.ndarray
    status: np.ndarray  # of str
    #: "not differentiable" because S_k was not differentiable at x at a lower order
    inherited: np.ndarray
    kink: np.ndarray  #: the left and right differences disagreed (the stencil crossed a kink)


def _judge(
    analytic: np.ndarray,
    plus: np.ndarray,
    minus: np.ndarray,
    hp: np.ndarray,
    hm: np.ndarray,
    center: np.ndarray,
    delta: np.ndarray,
    a_noise: np.ndarray,
    atol: float | None,
    rtol: float | None,
    kink_floor: np.ndarray | float = 0.0,
) -> _Judged:
    """Every element of one input at every order: ``plus``/``minus`` ``(n, M, K)`` values of
    ``S_k`` at ``x +- hp/hm``, ``center`` ``(K,)`` at ``x``, ``delta`` ``(K,)`` the rounding of
    one evaluation, ``a_noise`` ``(K,)`` that of the analytic side, ``kink_floor`` ``(K,)``
    the smallest left/right disagreement taken for a kink (below it: rounding).
    """
    # (n, K, M): the steps along the last axis, as _richardson wants them
    plus, minus = plus.transpose(0, 2, 1), minus.transpose(0, 2, 1)
    hp3, hm3 = hp[:, None, :], hm[:, None, :]
    center = center[None, :, None]
    delta = delta[None, :, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        central = (plus - minus) / (hp3 + hm3)
        right = (plus - center) / hp3
        left = (center - minus) / hm3
        n_c = np.broadcast_to(2 * delta / (hp3 + hm3), central.shape)
        c, c_spread, c_noise = _richardson(central, n_c, (2, 4, 6))
        r, r_spread, r_noise = _richardson(
            right, np.broadcast_to(2 * delta / hp3, right.shape), (1, 2, 3)
        )
        lv, l_spread, l_noise = _richardson(
            left, np.broadcast_to(2 * delta / hm3, left.shape), (1, 2, 3)
        )
        est = {"c": c_spread + c_noise, "l": l_spread + l_noise, "r": r_spread + r_noise}
        val = {"c": c, "l": lv, "r": r}

        def tol(key: str) -> np.ndarray:
            if atol is None and rtol is None:
                return SAFETY * est[key] + a_noise
            return (atol or 0.0) + (rtol or 0.0) * np.abs(val[key])

        # a difference across a jump grows like 1/h (each halving of h, 1.5x at least):
        # never smooth nor clean, whatever its extrapolation says
        raw = {"c": central, "l": left, "r": right}
        grow = {}
        for (key, d), noise in zip(raw.items(), (c_noise, l_noise, r_noise), strict=True):
            floor = SAFETY * noise[..., None] + np.asarray(kink_floor)[..., None]
            steps_up = np.abs(d[..., 1:]) > 1.5 * np.abs(d[..., :-1]) + floor
            grow[key] = steps_up.all(axis=-1)
        gap = np.abs(lv - r)
        smooth = (gap <= SAFETY * (est["l"] + est["r"]) + a_noise + kink_floor) & ~grow["c"]
        numeric = np.where(smooth, c, np.nan)
        estimate = np.where(smooth, est["c"], np.nan)
        tolerance = np.where(smooth, tol("c"), np.nan)
        status = np.where(smooth & (np.abs(analytic - c) <= tol("c")), OK, FAIL).astype(object)
        status[~smooth] = FAIL
        # a kink in the stencil: the best clean candidate that the analytic value matches
        best_err = np.full(c.shape, np.inf)
        for key in ("c", "r", "l"):
            t = tol(key)
            clean = ~smooth & np.isfinite(val[key]) & (SAFETY * est[key] < CLEAN * gap)
            clean &= ~grow[key]
            match = clean & (np.abs(analytic - val[key]) <= t)
            take = match & (status != NOT_DIFFERENTIABLE)
            status[take] = NOT_DIFFERENTIABLE
            numeric = np.where(take, val[key], numeric)
            estimate = np.where(take, est[key], estimate)
            tolerance = np.where(take, t, tolerance)
            # a failure shows the cleanest value
            show = clean & (status == FAIL) & (est[key] < best_err)
            best_err = np.where(show, est[key], best_err)
            numeric = np.where(show, val[key], numeric)
            estimate = np.where(show, est[key], estimate)
            tolerance = np.where(show, t, tolerance)
        # a kink at x itself (a tie of a max, |x| at 0): both sides resolved to the floor, so
        # no kink lies inside either side's stencil, and each value between them is a one-sided
        # directional derivative's convex combination (a subgradient: max of three tied
        # elements gives w/3 between 0 and w); a kink merely near x leaves the side that
        # crosses it unresolved (its difference carries a d/h term), and a wrong value outside
        # the two sides fails
        at_x = ~smooth
        for key in ("l", "r"):
            at_x &= np.isfinite(val[key]) & ~grow[key]
            at_x &= SAFETY * est[key] <= np.maximum(a_noise + kink_floor, SHARP * gap)
        lo, hi = np.minimum(lv, r), np.maximum(lv, r)
        margin = np.maximum(tol("l"), tol("r"))
        inside = at_x & (status == FAIL) & (analytic >= lo - margin) & (analytic <= hi + margin)
        status[inside] = NOT_DIFFERENTIABLE
        numeric = np.where(inside, c, numeric)
        estimate = np.where(inside, np.maximum(est["l"], est["r"]), estimate)
        tolerance = np.where(inside, (hi - lo) / 2 + margin, tolerance)
        # a jump of S at x itself (S_2 of |x| at 0): no side is clean, and the one-sided
        # differences grow like 1/h; no derivative exists there to be right or wrong
        jump = ~smooth & (status == FAIL) & ~np.isfinite(best_err) & (grow["l"] | grow["r"])
        status[jump] = NOT_DIFFERENTIABLE
        tolerance = np.where(jump, np.inf, tolerance)
        # S_k not differentiable at x along e_j: S_(k+1), built on its gradient there (the
        # rule's choice at the tie), has no derivative to compare at the orders above
        below = np.zeros_like(at_x)
        below[:, 1:] = np.cumsum(at_x, axis=1)[:, :-1] > 0
        above = below & (status != OK)
        status[above] = NOT_DIFFERENTIABLE
        tolerance = np.where(above, np.inf, tolerance)
        unresolved = ~smooth & ~np.isfinite(numeric)
        numeric = np.where(unresolved, c, numeric)
        estimate = np.where(unresolved, est["c"], estimate)
        tolerance = np.where(unresolved, tol("c"), tolerance)
    return _Judged(numeric, estimate, tolerance, status, above, ~smooth)


BATCH = 1 << 20  #: input elements per vmap call (rows x the float inputs' size): its memory


def _stencil(
    problem: _Problem, i: int, steps: np.ndarray, elements: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Values of ``S_1..S_K`` at ``x_i[j] +- steps[j, m]`` for the listed elements ``j``:
    ``plus, minus`` ``(n, M, K)`` and the actual steps ``hp, hm`` ``(n, M)``.

    The perturbed inputs are evaluated as one batch (``hd.vmap``) when the batch
    reproduces the plain evaluation at ``x`` (two unperturbed rows are appended and
    compared with :meth:`_Problem.values` to rounding); otherwise (a random function,
    a primitive without a batching rule) one by one.
    """
    xs = problem.xs
    n, m_steps = len(elements), steps.shape[1]
    flat = _to_numpy(xs[i]).reshape(-1)
    x0 = flat[list(elements)][:, None]
    up, down = x0 + steps, x0 - steps
    hp, hm = np.abs(up - x0), np.abs(x0 - down)
    moved = np.stack([up, down], axis=2).reshape(-1)  # (n, M, 2) flattened
    rows = np.repeat(np.asarray(list(elements)), 2 * m_steps)
    vals = None
    # a perturbed point may leave f's domain (sqrt at 0.01 - 0.02): its NaN is judged (and
    # retried at smaller steps), numpy's warning about it would only be noise
    with np.errstate(all="ignore"):
        if problem.batched is not False:
            vals = _batched(problem, i, flat, rows, moved)
        if vals is None:
            vals = np.empty((moved.size, problem.top))
            for r, (j, value) in enumerate(zip(rows, moved, strict=True)):
                xi = flat.copy()
                xi[j] = value
                arrays = list(xs)
                arrays[i] = _like(xs[i], xi)
                vals[r] = problem.values(arrays)
    vals = vals.reshape(n, m_steps, 2, problem.top)
    return vals[:, :, 0], vals[:, :, 1], hp, hm


def _like(x: Any, flat: np.ndarray) -> Any:
    return array_module(x).asarray(flat.reshape(x.shape))


def _batched(
    problem: _Problem, i: int, flat: np.ndarray, rows: np.ndarray, moved: np.ndarray
) -> np.ndarray | None:
    """The stencil's values by ``hd.vmap``, in chunks; None when batching is not faithful."""
    total = sum(int(problem.xs[j].size) for j in problem.diff)
    per = max(1, BATCH // max(total, 1))
    out = []
    for start in range(0, rows.size, per):
        r, v = rows[start : start + per], moved[start : start + per]
        points = np.repeat(flat[None, :], r.size, axis=0)
        points[np.arange(r.size), r] = v
        shape = problem.xs[i].shape
        got = _batch_points(problem, {i: points.reshape((-1, *shape))}, r.size)
        if got is None:
            return None
        out.append(got)
    return np.concatenate(out, axis=0)


def _batch_points(problem: _Problem, moved: dict[int, np.ndarray], n: int) -> np.ndarray | None:
    """``values`` at ``n`` points, input ``i`` replaced by ``moved[i][b]`` at point ``b``,
    as one vmap batch. The first call also evaluates two unperturbed points and compares
    them with the plain evaluation at ``x`` (:attr:`_Problem.center`): a function that
    vmap does not reproduce to rounding (random draws per example) is evaluated one by
    one from then on (None).
    """
    if problem.batched is False:
        return None
    check = problem.batched is None
    extra = 2 if check else 0
    batches = []
    for j in problem.diff:
        x = problem.xs[j]
        base = np.repeat(_to_numpy(x)[None], n + extra, axis=0)
        if j in moved:
            base[:n] = moved[j]
        batches.append(array_module(x).asarray(base))
    try:
        got = problem.batched_values(batches)
    except Exception:  # no batching rule, or a function vmap cannot map: one by one
        problem.batched = False
        return None
    if check:
        ref = problem.center
        bound = 1e3 * EPS64 * (problem.scales + np.abs(ref)) + 1e-300
        if not (np.abs(got[n:] - ref[None, :]) <= bound).all():
            problem.batched = False
            return None
        problem.batched = True
    return got[:n]


def _base_steps(x: np.ndarray, eps: float | None) -> np.ndarray:
    """The largest step per element: ``eps``, or ``STEP max(|x_j|, min(rms(x), 1))`` (an
    element near 0 steps by the input's scale, but never by more than ``STEP``: 0.5 next
    to 800 is not perturbed by 11).
    """
    flat = np.abs(x.reshape(-1))
    if eps is not None:
        return np.full(flat.shape, float(eps))
    rms = float(np.sqrt(np.mean(flat**2))) if flat.size else 0.0
    return STEP * np.maximum(flat, min(rms, 1.0) if rms > 0 else 1.0)


def _check_input(
    problem: _Problem,
    slot: int,
    analytic: np.ndarray,
    center: np.ndarray,
    delta: np.ndarray,
    a_noise: np.ndarray,
    eps: float | None,
    atol: float | None,
    rtol: float | None,
    elements: Sequence[int] | None = None,
) -> tuple[list[int], _Judged]:
    """Judges the elements of one input (all of them by default), retrying the non-ok ones."""
    i = problem.diff[slot]
    x = _to_numpy(problem.xs[i])
    elements = list(range(x.size)) if elements is None else list(elements)
    base = _base_steps(x, eps)[elements]
    ladder = 0.5 ** np.arange(STEPS)
    # a derivative of S_k is of the order of (its terms' magnitude) / (x's scale): a left/right
    # disagreement KINK times below that is rounding (S_3 of logaddexp(a, a), zero but noisy)
    rms = float(np.sqrt(np.mean(x**2)))
    kink_floor = KINK * problem.scales / (rms if rms > 0 else 1.0)
    first = _judge(
        analytic[elements],
        *_stencil(problem, i, base[:, None] * ladder, elements),
        center,
        delta,
        a_noise,
        atol,
        rtol,
        kink_floor,
    )
    # retried at smaller steps: what did not pass, and what passed with a loose tolerance
    # (a steep function, a domain edge); the better result of each element is kept
    scale = np.max(np.abs(analytic), axis=0) if len(analytic) else np.zeros(analytic.shape[1])
    rank = np.vectorize(_RANK.__getitem__)
    # an element that passed loosely is retried while smaller steps tighten it (not when its
    # estimate is rounding, which only grows as the steps shrink)
    hopeful = np.ones(len(elements), dtype=bool)
    for factor in RETRY:
        # (the tolerance's own floor, a_noise, is not looseness: at orders >= 2 it is 1e-7 of
        # the scale, and counting it retried every element three times for nothing)
        loose = first.tolerance > LOOSE * np.maximum(scale, 1e-300)[None, :] + a_noise[None, :]
        again = [
            r
            for r in range(len(elements))
            if (first.status[r] != OK).any() or (loose[r].any() and hopeful[r])
        ]
        if not again:
            break
        retry = _judge(
            analytic[elements][again],
            *_stencil(
                problem, i, base[again, None] * ladder * factor, [elements[r] for r in again]
            ),
            center,
            delta,
            a_noise,
            atol,
            rtol,
            kink_floor,
        )
        before, after = rank(first.status[again]), rank(retry.status)
        old_est, new_est = first.estimate[again], retry.estimate
        tighter = (after == before) & (retry.tolerance < first.tolerance[again])
        # a better verdict counts only if the smaller steps are not noisier: a failure is
        # overturned by an estimate no larger than its own (or a first try that had none, NaN
        # at a domain edge); a kink, or a failure at one (a one-sided value, O(h^3) and its
        # spread blind to an h^3 term: svd's sign flip 5e-4 away), by one that is not loose
        loose_at = np.maximum(LOOSE * scale, kink_floor)[None, :]  # all-zero derivatives too
        # (a smooth failure: by one no larger than its own, or than LOOSE times the element's
        # own analytic value: the spread of the first steps can miss a term, 7e-9 of
        # group_normalization's derivative at the sweep's seed 753 against an estimate of
        # 6.5e-10, while the smaller steps' rounding is 5e-9)
        smooth_fail = (before == _RANK[FAIL]) & ~first.kink[again]
        own = LOOSE * np.abs(analytic[elements][again])
        bound = np.where(smooth_fail, own, loose_at)
        bound = np.where(np.isfinite(old_est), np.maximum(bound, old_est), np.inf)
        better = ((after > before) & (new_est <= bound)) | tighter
        # a kink at x found at a lower order by the smaller steps (sharp sides: their
        # estimates at the resolution floor) makes the orders above not differentiable
        better |= retry.inherited & (before == _RANK[FAIL])
        for name in ("numeric", "estimate", "tolerance", "status", "inherited", "kink"):
            old = getattr(first, name)
            sub = old[again]
            sub[better] = getattr(retry, name)[better]
            old[again] = sub
        hopeful[again] = (tighter | better).any(axis=1)
    return elements, first


def _rows(
    problem: _Problem,
    slot: int,
    elements: Sequence[int],
    analytic: np.ndarray,
    judged: _Judged,
    shape: tuple[int, ...],
    input_index: int | None = None,
) -> list[GradcheckRow]:
    rows = []
    index = problem.diff[slot] if input_index is None else input_index
    for r, j in enumerate(elements):
        idx = tuple(int(t) for t in np.unravel_index(j, shape)) if shape else ()
        for k in range(problem.top):
            a, num = float(analytic[r, k]), float(judged.numeric[r, k])
            err = abs(a - num)
            status = str(judged.status[r, k])
            if not np.isfinite(err):
                status, err = FAIL, float("inf") if np.isnan(err) else err
            rows.append(
                GradcheckRow(
                    index,
                    k + 1,
                    idx,
                    a,
                    num,
                    err,
                    status != FAIL,
                    float(judged.estimate[r, k]),
                    float(judged.tolerance[r, k]),
                    status,
                )
            )
    return rows


def _scales(problem: _Problem, grads: list[list[np.ndarray]], scales: np.ndarray) -> tuple:
    delta = COND * EPS64 * scales
    a_noise = [  # the analytic side's rounding, and the resolution floor of each order
        np.array(
            [
                max(ANALYTIC * EPS64, RESOLUTION[min(k, 1)]) * float(np.max(np.abs(grads[k][slot])))
                for k in range(problem.top)
            ]
        )
        for slot in range(len(problem.diff))
    ]
    return delta, a_noise


def fast_gradcheck(
    f: Callable[..., Variable],
    inputs: Any,
    order: int,
    eps: float | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
) -> GradcheckReport:
    """One row per order ``k``: input ``-1`` (all inputs, projected on one random direction
    ``d``), element ``()``: ``sum_i <dS_k/dx_i, d_i>`` against the differences of
    ``t -> S_k(x + t d)`` (the same Richardson differences and estimates as :func:`gradcheck`).
    """
    report = GradcheckReport(atol=atol, rtol=rtol)
    with auto_forward(True):
        problem = _Problem("gradcheck", f, inputs, order, seed)
        d = [problem.rng.standard_normal(problem.xs[i].shape) for i in problem.diff]
        grads, scales = problem.analytic()
        ana = np.array(
            [
                [
                    sum(float((g * di).sum()) for g, di in zip(grads[k], d, strict=True))
                    for k in range(order)
                ]
            ]
        )
        norm = float(np.sqrt(sum(float((di**2).sum()) for di in d)))
        xp = problem.xp
        every = np.concatenate([_to_numpy(problem.xs[i]).reshape(-1) for i in problem.diff])
        rms = float(np.sqrt(np.mean(every**2)))
        base = (STEP * (rms if rms > 0 else 1.0) if eps is None else eps) / norm
        ladder = base * 0.5 ** np.arange(STEPS)
        center = problem.values(problem.xs)
        problem.center, problem.scales = center, scales
        signs = np.array([1.0, -1.0])
        ts = (ladder[:, None] * signs[None, :]).reshape(-1)  # (M, 2) flattened
        moved = {
            i: _to_numpy(problem.xs[i])[None] + ts.reshape((-1,) + (1,) * d[slot].ndim) * d[slot]
            for slot, i in enumerate(problem.diff)
        }
        vals = _batch_points(problem, moved, ts.size)
        if vals is None:
            vals = np.empty((ts.size, order))
            for b in range(ts.size):
                arrays = list(problem.xs)
                for i, m in moved.items():
                    arrays[i] = xp.asarray(m[b])
                vals[b] = problem.values(arrays)
        vals = vals.reshape(1, STEPS, 2, order)
        plus, minus = vals[:, :, 0], vals[:, :, 1]
        delta = COND * EPS64 * scales
        a_noise = COND * EPS64 * np.abs(ana[0])
        steps = ladder[None, :]
        judged = _judge(ana, plus, minus, steps, steps, center, delta, a_noise, atol, rtol)
        report.rows.extend(_rows(problem, 0, [0], ana, judged, (), input_index=-1))
    return report


def gradcheck(
    f: Callable[..., Variable],
    inputs: Any,
    order: int = 1,
    eps: float | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    raise_exception: bool = True,
    seed: int = 0,
    fast: bool = False,
    plot: Any = None,
    holomorphic: bool = False,
) -> GradcheckReport:
    """Checks the derivatives of ``f`` of every order 1..``order`` against finite differences.

    The numeric side is a Richardson-extrapolated central difference at the steps
    ``h, h/2, h/4`` (see the module docstring), with an error estimate per element
    (the spread of the extrapolation plus the rounding at ``f``'s own scale); an
    element passes when ``|analytic - numeric| <= 3 estimate`` (plus the analytic
    side's rounding), or ``<= atol + rtol |numeric|`` when either is given. An
    element whose perturbation crosses a kink is reported ``"not differentiable"``
    (a pass) when the analytic value matches a one-sided difference, or lies
    between the two at a kink at ``x`` itself; a failure otherwise.

    Args:
        f: called as ``f(*inputs)`` with Variables; returns a Variable.
        inputs: arrays, scalars or Variables (one, or a tuple). Float inputs are
            checked (in float64 copies); integer inputs (labels) are passed through.
        order: highest derivative order to check.
        eps: the largest step ``h`` (default ``0.02 max(|x_j|, min(rms(x), 1))`` per element).
        atol: absolute tolerance (default: from the error estimate).
        rtol: relative tolerance (default: from the error estimate).
        raise_exception: raise :class:`GradcheckError` with the report on failure;
            otherwise return the report.
        seed: of the random projection directions.
        fast: first compare one random directional derivative per order (see
            :func:`fast_gradcheck`); if that passes, return its report (one row
            per order, input -1); otherwise fall back to the full check.
        plot: a path: save the picture of the error of the plain central
            difference against its step size, per input and order (matplotlib,
            extra ``plot``).
        holomorphic: also check that ``f`` is holomorphic in its complex inputs
            (Cauchy-Riemann: along ``i e_j``, ``i`` times the derivative along ``e_j``).

    Complex inputs are checked as their real and imaginary parts (rows ``"re"``/``"im"``),
    a complex-valued ``f`` through its real and imaginary parts (``check_complex``).

    Returns:
        A :class:`GradcheckReport`, truthy when every element passed.

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> bool(hd.gradcheck(lambda x: F.exp(x) * x, np.array([0.5, -1.0]), order=3))
    True
    """
    if order < 1:
        raise ValueError(f"gradcheck: order must be >= 1, got {order}")
    refuse_batched("gradcheck", "inputs", inputs, NOT_PER_EXAMPLE)
    if eps is not None and not eps > 0:
        raise ValueError(f"gradcheck: eps must be > 0, got {eps}")
    if _cx.has_complex(inputs) or holomorphic:
        kw = {"order": order, "eps": eps, "atol": atol, "rtol": rtol, "seed": seed}
        report = _cx.by_parts(gradcheck, f, inputs, **kw, fast=fast, raise_exception=False)
        if holomorphic:
            report.rows.extend(_cx.cauchy_riemann(f, inputs, atol, rtol, seed))
        if raise_exception and not report.passed:
            raise GradcheckError(str(report))
        return report
    f = _cx.real_valued(f)  # a complex-valued f of real inputs: through Re f and Im f
    if fast:
        quick = fast_gradcheck(f, inputs, order, eps, atol, rtol, seed)
        if quick.passed:
            return quick
    report = GradcheckReport(atol=atol, rtol=rtol)
    with auto_forward(True):
        problem = _Problem("gradcheck", f, inputs, order, seed)
        grads, scales = problem.analytic()
        center = problem.values(problem.xs)
        problem.center, problem.scales = center, scales
        delta, a_noise = _scales(problem, grads, scales)
        for slot, i in enumerate(problem.diff):
            analytic = np.stack([grads[k][slot].reshape(-1) for k in range(order)], axis=1)
            elements, judged = _check_input(
                problem, slot, analytic, center, delta, a_noise[slot], eps, atol, rtol
            )
            report.rows.extend(
                _rows(problem, slot, elements, analytic, judged, tuple(problem.xs[i].shape))
            )
        report.rows.sort(key=lambda r: r.order)  # order-major, then input, then element
        if plot is not None:
            report.steps = _error_vs_step(problem, grads, delta)
    if plot is not None:
        plot_steps(report, plot, (STEP * 0.5 ** (STEPS - 1), STEP))
    if raise_exception and not report.passed:
        raise GradcheckError(str(report))
    return report


def _error_vs_step(
    problem: _Problem, grads: list[list[np.ndarray]], delta: np.ndarray
) -> dict[tuple[int, int], tuple[list[float], list[float]]]:
    """For each input and order: steps ``h`` from 1e-1 to 1e-12 (times the input's scale) and
    the largest relative error of the plain central difference over (up to 8 of) its elements.
    """
    out: dict[tuple[int, int], tuple[list[float], list[float]]] = {}
    hs = np.logspace(-1, -12, 23)
    for slot, i in enumerate(problem.diff):
        x = _to_numpy(problem.xs[i])
        elements = list(range(min(x.size, 8)))
        scale = _base_steps(x, None)[elements] / STEP
        steps = scale[:, None] * hs[None, :]
        plus, minus, hp, hm = _stencil(problem, i, steps, elements)
        central = (plus - minus) / (hp + hm)[:, :, None]
        for k in range(problem.top):
            a = grads[k][slot].reshape(-1)[elements]
            ref = max(float(np.max(np.abs(a))), 1e-300)
            err = np.max(np.abs(central[:, :, k] - a[:, None]), axis=0) / ref
            out[(i, k + 1)] = (list(hs), [float(e) for e in err])
    return out


def gradgradcheck(f: Callable[..., Variable], inputs: Any, **kwargs: Any) -> GradcheckReport:
    """:func:`gradcheck` with ``order=2``."""
    kwargs.setdefault("order", 2)
    return gradcheck(f, inputs, **kwargs)
