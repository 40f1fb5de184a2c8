"""NNabla's per-function test helpers, written for hodiff from what NNabla's check.

``function_tester``: forward (dynamic mode, or a static graph re-set to new shapes with
``reset_inputs``) against the numpy reference; a static graph run with buffers freed
(``clear_buffer``) against one without; first-order gradients of the function node
(hodiff's whole composition, see ``nnabla._core.Node``) against central-free forward
differences (scipy's ``approx_fprime``, as NNabla), or ``ref_grad``; ``need_grad=False``
leaves a zero gradient; ``accum=False`` overwrites (also a NaN gradient) where ``True``
adds; dynamic and static mode give the same gradients.

``backward_function_tester``: the gradient graph (``nn.grad`` = ``hd.grad`` with the output
gradients as Variables) reproduces ``.backward()``'s gradients, and its own gradient with
respect to the output gradients and the inputs matches forward differences (second order).

Not checked (NNabla's internals, or what hodiff deliberately lacks): float16 (``half_test``),
recomputation, the NNP export callback, and NNabla's named backward functions.
"""

from __future__ import annotations

import copy
from typing import Any

import nnabla as nn
import nnabla.functions as F
import numpy as np
from nnabla.testing import assert_allclose
from scipy.optimize import approx_fprime

import hodiff as hd
from bench.nnabla_compat.causes import (
    HalfPrecision,
    Inplace,
    Internals,
    ReferenceWrong,
    ResetShape,
)

_SHAPE_RESET_ERRORS: tuple[type[BaseException], ...] = (AttributeError,)
if hasattr(hd, "ShapeResetError"):
    _SHAPE_RESET_ERRORS = (AttributeError, hd.ShapeResetError)


def list_context(func_name: str) -> list:
    return [(nn.Context(), func_name)]


def snake_to_camel(snake: str) -> str:
    return "".join(x.title() for x in snake.split("_"))


def list_ctx_and_func_name(fnames: list) -> list:
    return [(f, c, n) for f in fnames for c, n in list_context(snake_to_camel(f))]


def list_ctx_and_func_name2(fnames: list) -> list:
    return [(f, c, n) for f, name in fnames for c, n in list_context(name)]


def randn(rng: Any, *shape: int) -> Any:
    return np.asarray(rng.randn(*shape), dtype=np.float32)


def quit_with_gc(f: Any) -> Any:
    if isinstance(f, int):
        return lambda g: g
    return f


def cap_ignore_region(arr: Any, region: Any) -> Any:
    lo, hi = sorted(region)
    arr[np.logical_and(arr > lo, arr < hi)] = lo
    return arr


def force_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, list | tuple) else (x,)


def force_list(x: Any) -> list:
    return list(x) if isinstance(x, list | tuple) else [x]


class ArrayDiffStats:
    def __init__(self, a: Any, b: Any) -> None:
        self.text = f"max |a - b| = {np.max(np.abs(np.asarray(a) - np.asarray(b)))}"

    def __str__(self) -> str:
        return self.text


def convert_to_float2_array(x_complex: Any, dtype: Any = np.float32) -> Any:
    return np.stack([np.real(x_complex), np.imag(x_complex)], axis=-1).astype(dtype)


def convert_to_complex_array(x_float2: Any, dtype: Any = np.complex64) -> Any:
    return (x_float2[..., 0] + 1j * x_float2[..., 1]).astype(dtype)


def half_test(*args: Any, **kwargs: Any) -> None:
    raise HalfPrecision("half_test")


def recomputation_test(*args: Any, **kwargs: Any) -> None:
    raise Internals("recomputation_test (NNabla's recompute flag)")


def grad_function_forward_function_output(
    bwd_func_class: Any, fwd_func: Any, ctx: Any, inputs: list, *func_args: Any, **func_kwargs: Any
) -> tuple:
    """NNabla's gradient function of ``fwd_func`` (``nnabla.backward_function``) and its output."""
    bwd = bwd_func_class(fwd_func, inputs, func_args, func_kwargs)
    vs = [None if a is None else nn.Variable.from_numpy_array(a) for a in inputs]
    with nn.auto_forward(True):
        y = fwd_func(*(vs + list(func_args)), **func_kwargs)
    return bwd, y


def inplace_function_test_helper(*args: Any, **kwargs: Any) -> None:
    raise Inplace("in-place execution")


def create_function_nnp(*args: Any, **kwargs: Any) -> None:
    raise Internals("NNP export")


# ---------------------------------------------------------------- helpers
def _variables(inputs: list, backward: list) -> list:
    vs = []
    for a, b in zip(inputs, backward, strict=False):
        if a is None:
            vs.append(None)
            continue
        v = nn.Variable(a.shape, need_grad=b)
        v.data.cast(a.dtype)[...] = a
        vs.append(v)
    return vs


def _present(vs: list) -> list:
    return [v for v in vs if v is not None]


def _set_flat(vs: list, x: Any) -> None:
    k = 0
    for v in vs:
        v.d = x[k : k + v.size].reshape(v.shape)
        k += v.size


def _check_ctx(ctx: Any) -> None:
    for b in getattr(ctx, "backend", []) or []:
        if "half" in str(b):
            raise HalfPrecision(str(ctx))


def _node_grads(
    f: Any,
    vinputs: list,
    o: tuple,
    rinputs: list,
    vgrads: list,
    eps: float,
    numerical: bool,
) -> tuple:
    """Analytical (f.backward, accumulated) and numerical gradients of sum(o.g * o.d)."""
    ins = _present(vinputs)
    tested = [v for v, r in zip(vinputs, rinputs, strict=False) if v is not None and r is not None]
    x0 = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in rinputs if r is not None])
    rng = np.random.RandomState(np.random.randint(1000))
    for v in ins:
        v.g = randn(rng, *v.shape)

    def set_tested(x: Any) -> list:
        k, backups = 0, []
        for v in tested:
            backups.append(np.array(v.d))
            v.d = x[k : k + v.size].reshape(v.shape)
            k += v.size
        return backups

    def value(x: Any) -> float:
        backups = set_tested(x)
        for oo, g in zip(o, vgrads, strict=True):
            oo.g = g
        f.forward(ins, list(o))
        total = float(sum(np.sum(np.asarray(oo.g, np.float64) * oo.d) for oo in o))
        for v, b in zip(tested, backups, strict=True):
            v.d = b
        return total

    set_tested(x0)
    before = [np.array(v.g) for v in tested]
    for oo, g in zip(o, vgrads, strict=True):
        oo.g = g
    f.forward(ins, list(o))
    f.backward(ins, list(o))
    agrad = np.concatenate(
        [(np.array(v.g) - b).ravel() for v, b in zip(tested, before, strict=True)]
    )
    for v, b in zip(tested, before, strict=True):
        v.g = b
    ngrad = approx_fprime(x0, value, eps) if numerical else None
    return agrad, ngrad


#: the most elements a failed gradient check is re-checked by finite differences over
RECHECK_MAX = 20000

_F32_DIFFERENCES = (
    "the test's float32 forward differences miss its tolerance; float64 central differences "
    "agree with hodiff"
)


def _f64(x: Any, like: Any) -> Any:
    """``x`` in float64 where the input ``like`` is a float array (ids stay integers)."""
    return np.asarray(x, np.float64) if np.asarray(like).dtype.kind == "f" else np.asarray(like)


def _central(value: Any, x0: Any, h: float = 1e-5, coords: Any = None) -> Any:
    """Central differences of a float64 function of the flat ``x0`` (at ``coords`` only)."""
    x = np.array(x0, np.float64)
    idx = range(x.size) if coords is None else coords
    out = np.empty(len(idx))
    for n, i in enumerate(idx):
        a = x[i]
        x[i] = a + h
        up = value(x)
        x[i] = a - h
        down = value(x)
        x[i] = a
        out[n] = (up - down) / (2 * h)
    return out


def _node_grads64(f: Any, inputs: list, backward: list, vgrads: list, coords: Any = None) -> Any:
    """Float64 central differences of ``sum(vgrads * f(inputs))`` over the tested inputs."""
    tested = [
        j for j, (a, b) in enumerate(zip(inputs, backward, strict=False)) if a is not None and b
    ]
    sizes = [np.asarray(inputs[j]).size for j in tested]
    x0 = np.concatenate([np.asarray(inputs[j], np.float64).ravel() for j in tested])

    def value(x: Any) -> float:
        vals = [None if a is None else _f64(a, a) for a in inputs]
        k = 0
        for j, n in zip(tested, sizes, strict=True):
            vals[j] = x[k : k + n].reshape(np.shape(inputs[j]))
            k += n
        vs = [nn.Variable.from_numpy_array(a) for a in vals if a is not None]
        _, outs = f._run(vs)
        return float(
            sum(np.sum(np.asarray(g, np.float64) * o.d) for g, o in zip(vgrads, outs, strict=True))
        )

    return _central(value, x0, coords=coords)


def _static_vs_clear_buffer(
    func: Any,
    inputs: list,
    args: list,
    kw: dict,
    backward: list,
    atol: float,
    rng: Any,
    name: Any,
    insert_identity: Any,
) -> None:
    """Forward and backward of a static graph with buffers freed agree with a kept one."""
    if True not in backward:
        return
    va = _variables(inputs, backward)
    vb = _variables(inputs, backward)
    with nn.auto_forward(False):
        oa = force_tuple(func(*(va + args), **kw))
        ident = insert_identity or [True] * len(vb)
        vbi = [
            (F.identity(v) if i else v) if v is not None else None
            for v, i in zip(vb, ident, strict=False)
        ]
        ob = force_tuple(func(*(vbi + args), **kw))
        ob = tuple(F.identity(o) if o is not None else None for o in ob)
    F.sink(*oa).forward(clear_no_need_grad=False)
    F.sink(*ob).forward(clear_no_need_grad=True)
    for a, b in zip(oa, ob, strict=True):
        if a is not None:
            assert_allclose(
                a.d, b.d, atol=atol, err_msg=f"{name} forward(clear_no_need_grad) fails"
            )
    for a, b in zip(_present(va), _present(vb), strict=True):
        a.grad.zero()
        b.grad.zero()
    for a, b in zip(oa, ob, strict=True):
        if a is not None:
            a.g = randn(rng, *a.shape)
            b.g = a.g
    F.sink(*oa, one_input_grad=False).backward()
    F.sink(*ob, one_input_grad=False).backward(clear_buffer=True)
    for a, b in zip(_present(va), _present(vb), strict=True):
        assert_allclose(a.g, b.g, atol=atol, err_msg=f"{name} backward(clear_buffer) fails")


def _dynamic_vs_static(func: Any, vinputs: list, args: list, kw: dict, backward: list) -> None:
    def build() -> Any:
        for v, b in zip(vinputs, backward, strict=False):
            if v is not None and b:
                v.grad.zero()
        ins = [
            (F.identity(v) if b else v) if v is not None else None
            for v, b in zip(vinputs, backward, strict=False)
        ]
        outs = [
            o
            for o in force_tuple(func(*(ins + args), **kw))
            if o is not None and o.dtype.kind == "f"
        ]
        if len(outs) == 1:
            return outs[0]
        return F.add_n(*[F.sum(o) if o.ndim else o for o in outs])

    def grads() -> list:
        return [
            np.array(v.g) if v is not None and b else None
            for v, b in zip(vinputs, backward, strict=False)
        ]

    saved = [np.array(v.d) if v is not None else None for v in vinputs]
    with nn.auto_forward(False):
        out = build()
    out.forward()
    out.backward()
    ref = grads()
    for v, s in zip(vinputs, saved, strict=False):
        if v is not None:
            v.d = s
    with nn.auto_forward(True):
        out = build()
    out.backward(clear_buffer=True)
    for i, (r, a) in enumerate(zip(ref, grads(), strict=True)):
        if r is not None:
            assert_allclose(r, a, err_msg=f"auto-forward and static gradients differ at input {i}")


# ---------------------------------------------------------------- first order
def function_tester(  # noqa: C901 (one check after another, as NNabla's)
    rng: Any,
    func: Any,
    ref_func: Any,
    inputs: list,
    func_args: Any = None,
    func_kwargs: Any = None,
    atol_f: float = 1e-6,
    atol_b: float = 1e-3,
    atol_accum: float = 1e-6,
    dstep: float = 1e-3,
    backward: Any = None,
    ctx: Any = None,
    func_name: Any = None,
    ref_grad: Any = None,
    disable_half_test: bool = False,
    atol_half: float = 1e-1,
    insert_identity: Any = None,
    disable_clear_no_need_grad_test: bool = False,
    auto_forward: bool = False,
    disable_auto_forward_backward_tester: bool = False,
    reset_inputs: Any = None,
) -> None:
    args = list(func_args or [])
    kw = dict(func_kwargs or {})
    _check_ctx(ctx)
    if backward is None:
        backward = [True] * len(inputs)

    # forward against the reference
    vinputs = _variables(inputs, backward)
    if reset_inputs is None:
        with nn.auto_forward(True):
            o = func(*(vinputs + args), **kw)
    else:
        with nn.auto_forward(False):
            o = func(*(vinputs + args), **kw)
        try:
            for v, r in zip(vinputs, reset_inputs, strict=False):
                if v is not None:
                    v.reset_shape(r.shape, True)
                    v.d = r
            F.sink(*force_tuple(o)).forward()
        except _SHAPE_RESET_ERRORS as e:
            raise ResetShape(f"{type(e).__name__}: {e}") from e
        inputs = reset_inputs
    refs = force_tuple(ref_func(*(copy.deepcopy(inputs) + args), **kw))
    o = force_tuple(o)
    assert len(o) == len(refs), f"{func_name}: {len(o)} outputs, the reference has {len(refs)}"
    for ref, res in zip(refs, o, strict=True):
        assert_allclose(ref, res.d, atol=atol_f, err_msg=f"{func_name} forward test fails")

    if not disable_clear_no_need_grad_test:
        _static_vs_clear_buffer(
            func, inputs, args, kw, backward, atol_f, rng, func_name, insert_identity
        )

    if func_name is not None:
        assert o[0].parent.name == func_name, (o[0].parent.name, func_name)
    if True not in backward:
        return

    # first-order gradients of the function node
    vinputs = _variables(inputs, backward)
    rinputs = [r if b else None for r, b in zip(copy.deepcopy(inputs), backward, strict=False)]
    vgrads = [randn(rng, *oo.shape) for oo in o]
    f = o[0].parent

    def reset_ograds() -> None:
        for oo, g in zip(o, vgrads, strict=True):
            oo.g = g

    agrads, ngrads = _node_grads(f, vinputs, o, rinputs, vgrads, dstep, ref_grad is None)
    if ref_grad is not None:
        ngrads = ref_grad(
            *(copy.deepcopy(inputs) + copy.deepcopy(vgrads) + args), **kw, need_grad_flags=backward
        )
    try:
        assert_allclose(
            ngrads, agrads, atol=atol_b, err_msg=f"{func_name} backward w/o accumulation test fails"
        )
    except AssertionError as e:
        if agrads.size > RECHECK_MAX and ref_grad is None:
            raise
        if ref_grad is None:
            # float32 forward differences, or hodiff? float64 central differences decide
            n64 = _node_grads64(f, inputs, backward, vgrads)
            try:
                assert_allclose(n64, agrads, atol=atol_b)
            except AssertionError:
                raise e from None
            raise ReferenceWrong(_F32_DIFFERENCES) from None
        # NNabla's reference gradient, or hodiff's? Finite differences decide.
        coords = None
        if agrads.size > RECHECK_MAX:  # the coordinates that differ most, and random ones
            diff = np.abs(np.asarray(ngrads, np.float64).ravel() - agrads)
            pick = np.random.RandomState(0).choice(agrads.size, 100, replace=False)
            coords = np.unique(np.concatenate([np.argsort(diff)[-100:], pick]))
        numerical = _node_grads64(f, inputs, backward, vgrads, coords)
        try:
            assert_allclose(numerical, agrads if coords is None else agrads[coords], atol=atol_b)
        except AssertionError as e2:
            raise AssertionError(f"{e}\n and finite differences: {e2}") from None
        raise ReferenceWrong(
            f"{func_name}: NNabla's ref_grad differs from finite differences, which agree "
            "with hodiff"
        ) from None

    # need_grad=False: no gradient
    ins = _present(vinputs)
    for v, b in zip(vinputs, backward, strict=False):
        if v is None or not b:
            continue
        v.grad.zero()
        v.need_grad = False
        reset_ograds()
        f.forward(ins, list(o))
        f.backward(ins, list(o))
        assert np.all(v.g == 0), f"{func_name}: a gradient for an input with need_grad=False"
    for v, b in zip(vinputs, backward, strict=False):
        if v is not None:
            v.need_grad = b

    # accum=False overwrites what accum=True adds to
    for i, v in enumerate(vinputs):
        if v is None or not backward[i]:
            continue
        g = randn(rng, *v.shape)
        v.g = g
        reset_ograds()
        f.forward(ins, list(o))
        f.backward(ins, list(o))
        true_g = v.g - g
        accum = [j != i for j, w in enumerate(vinputs) if w is not None]
        v.g = randn(rng, *v.shape)
        reset_ograds()
        f.forward(ins, list(o))
        f.backward(ins, list(o), accum)
        assert_allclose(
            v.g, true_g, atol=atol_accum, err_msg=f"{func_name} backward w/ accumulation test fails"
        )
        v.g = np.float32("nan")
        reset_ograds()
        f.forward(ins, list(o))
        f.backward(ins, list(o), accum)
        assert not np.any(np.isnan(v.g)), f"{func_name}: accum=False kept a NaN gradient"

    if not disable_auto_forward_backward_tester:
        _dynamic_vs_static(func, vinputs, args, kw, backward)


def compute_analytical_and_numerical_grad_graph(
    terminal: Any, inputs: list, epsilon: float = 1e-3, recompute_graph: bool = True
) -> tuple:
    def value(x: Any) -> Any:
        _set_flat(inputs, x)
        terminal.forward()
        return np.array(terminal.d)

    x0 = np.concatenate([np.asarray(v.d).ravel() for v in inputs])
    _set_flat(inputs, x0)
    before = [np.array(v.g) for v in inputs]
    if recompute_graph:
        terminal.forward()
        terminal.backward()
    agrad = np.concatenate(
        [(np.array(v.g) - b).ravel() for v, b in zip(inputs, before, strict=True)]
    )
    for v, b in zip(inputs, before, strict=True):
        v.g = b
    return agrad, approx_fprime(x0, value, epsilon)


# ---------------------------------------------------------------- second order
def backward_function_tester(  # noqa: C901 (one check after another, as NNabla's)
    rng: Any,
    func: Any,
    inputs: Any = None,
    func_args: Any = None,
    func_kwargs: Any = None,
    rtol_accum: float = 1e-5,
    atol_f: float = 1e-4,
    atol_b: float = 1e-3,
    atol_accum: float = 5e-2,
    dstep: float = 1e-3,
    backward: Any = None,
    backward_b: Any = None,
    ctx: Any = None,
    non_accum_check: bool = False,
    skip_backward_check: bool = False,
    insert_identity: Any = None,
    auto_forward: bool = False,
) -> None:
    args = list(func_args or [])
    kw = dict(func_kwargs or {})
    _check_ctx(ctx)
    inputs = list(inputs)
    if backward is None:
        backward = [True] * len(inputs)
    if not insert_identity:
        insert_identity = [True] * len(inputs)

    def with_identity(vs: list) -> list:
        return [
            (F.identity(v) if ins else v) if v is not None else None
            for v, ins in zip(vs, insert_identity, strict=False)
        ]

    # first order by .backward() (the reference for the gradient graph)
    vinputs = _variables(inputs, backward)
    with nn.auto_forward(auto_forward):
        vid = with_identity(vinputs)
        outputs0 = force_list(func(*(vid + args), **kw))
    F.sink(*outputs0).forward(clear_no_need_grad=False)
    outputs0 = [o for o in outputs0 if o is not None]
    seeds = [np.asarray(rng.randn(*o.shape), dtype=o.dtype) for o in outputs0]
    for v in _present(vinputs):
        v.grad.zero()
    for o, s in zip(outputs0, seeds, strict=True):
        o.g = s
    F.sink(*outputs0, one_input_grad=False).backward()
    present = _present(vinputs)
    grads0 = [np.array(v.g) for v in present]

    # the same with buffers freed
    vcb = _variables(inputs, backward)
    with nn.auto_forward(auto_forward):
        ocb = force_list(func(*(with_identity(vcb) + args), **kw))
        ocb = [F.identity(o) for o in ocb if o is not None]
    F.sink(*ocb).forward(clear_no_need_grad=True)
    for o, s in zip(ocb, seeds, strict=True):
        o.g = s
    F.sink(*ocb, one_input_grad=False).backward(clear_buffer=True)
    for r, v in zip(grads0, _present(vcb), strict=True):
        assert_allclose(
            r,
            v.g,
            atol=atol_f,
            err_msg="backward(clear_buffer=True) and (clear_buffer=False) differ",
        )

    # the gradient graph: output gradients as Variables
    gvouts = [nn.Variable.from_numpy_array(s).apply(need_grad=True) for s in seeds]
    wrt = [
        (k, v)
        for k, (v, b) in enumerate(zip(vid, backward, strict=False))
        if v is not None and b and present[_index(vinputs, k)]._v.dtype.kind == "f"
    ]
    # on a graph of its own, run once (as NNabla's: a function that updates an input in
    # place, spectral_norm's u, must start from the same values as the first graph did)
    vng = _variables(inputs, backward)
    with nn.auto_forward(auto_forward):
        vngi = with_identity(vng)
        outs_ng = [o for o in force_list(func(*(vngi + args), **kw)) if o is not None]
        ograds_ng = nn.grad(outs_ng, [vngi[k] for k, _ in wrt], grad_outputs=gvouts)
        F.sink(*ograds_ng).forward(clear_no_need_grad=True)
    with nn.auto_forward(auto_forward):
        ograds = nn.grad(outputs0, [v for _, v in wrt], grad_outputs=gvouts)
    for (k, _), og in zip(wrt, ograds_ng, strict=True):
        assert_allclose(
            grads0[_index(vinputs, k)],
            og.d,
            atol=atol_f,
            err_msg=f"the gradient graph differs from backward() at input {k}",
        )
    if non_accum_check:
        # the node's backward overwrites (accum=False) what it adds with accum=True
        parent = outputs0[0].parent
        pins = parent.inputs
        for o, sd in zip(outputs0, seeds, strict=True):
            o.g = sd
        flags = [b for v, b in zip(vinputs, backward, strict=False) if v is not None]
        before = [np.zeros(v.shape, v.dtype) for v in pins]
        for v, b in zip(pins, before, strict=True):
            v.g = b
        parent.backward(pins, outputs0, accum=[True] * len(pins))
        added = [np.array(v.g) - b for v, b in zip(pins, before, strict=True)]
        parent.backward(pins, outputs0, accum=[False] * len(pins))
        for v, a, b in zip(pins, added, flags, strict=False):
            if b:
                assert_allclose(a, v.g, atol=atol_b, err_msg="backward (non-accum) fails")
    if skip_backward_check:
        return

    # second order: d(sum(grad_k) * r) / d(dy, x) against forward differences
    grad_vinputs = gvouts + present
    ngr = len(gvouts)
    backward_b = [True] * len(grad_vinputs) if backward_b is None else backward_b
    nb = [b for v, b in zip(vinputs, backward, strict=False) if v is not None]
    initial = [np.asarray(rng.randn(*v.shape)) for v in grad_vinputs]
    x0 = np.concatenate([np.asarray(v.d, np.float64).ravel() for v in grad_vinputs])
    seps = np.cumsum([0] + [v.size for v in grad_vinputs])
    for (kk, _), og in zip(wrt, ograds, strict=True):
        for v, g in zip(grad_vinputs, initial, strict=True):
            v.g = g
        r = rng.randn()
        with nn.auto_forward(auto_forward):
            sum_og = F.sum(og) * r
        sum_og.forward(clear_no_need_grad=True)
        sum_og.backward()
        agrad = np.concatenate(
            [(np.array(v.g) - g).ravel() for v, g in zip(grad_vinputs, initial, strict=True)]
        )

        def value(x: Any, out: Any = sum_og) -> Any:
            _set_flat(grad_vinputs, x)
            out.forward()
            return np.array(out.d)

        ngrad = approx_fprime(x0.copy(), value, dstep)
        _set_flat(grad_vinputs, x0)
        checked = [
            k
            for k in range(len(grad_vinputs))
            if not ((k >= ngr and not nb[k - ngr]) or not backward_b[k])
        ]
        try:
            for k in checked:
                s0, s1 = seps[k], seps[k + 1]
                assert_allclose(
                    agrad[s0:s1],
                    ngrad[s0:s1],
                    rtol=rtol_accum,
                    atol=atol_accum,
                    err_msg=f"second order wrt {k}-th of {len(grad_vinputs)} inputs fails",
                )
        except AssertionError as e:
            if x0.size > RECHECK_MAX:
                raise

            # float32 forward differences, or hodiff? float64 central differences decide
            def value64(x: Any, k_in: int = kk, r_: float = r) -> float:
                parts = [
                    x[seps[j] : seps[j + 1]].reshape(v.shape) for j, v in enumerate(grad_vinputs)
                ]
                dys = [nn.Variable.from_numpy_array(a) for a in parts[:ngr]]
                it = iter(parts[ngr:])
                vs = [
                    None
                    if a is None
                    else nn.Variable.from_numpy_array(_f64(next(it), a), need_grad=b)
                    for a, b in zip(inputs, backward, strict=False)
                ]
                with nn.auto_forward(True):
                    vi = with_identity(vs)
                    outs = [o for o in force_list(func(*(vi + args), **kw)) if o is not None]
                    g = nn.grad(outs, [vi[k_in]], grad_outputs=dys)[0]
                return float(np.sum(np.asarray(g.d, np.float64)) * r_)

            n64 = _central(value64, x0)
            for k in checked:
                s0, s1 = seps[k], seps[k + 1]
                try:
                    assert_allclose(agrad[s0:s1], n64[s0:s1], rtol=rtol_accum, atol=atol_accum)
                except AssertionError:
                    raise e from None
            raise ReferenceWrong(_F32_DIFFERENCES) from None


def _index(vinputs: list, k: int) -> int:
    """The position of input ``k`` among the inputs that are not None."""
    return sum(1 for v in vinputs[:k] if v is not None)
