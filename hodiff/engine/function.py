"""The ``Function`` protocol: every primitive of hodiff, and every user primitive.

A primitive is a subclass of :class:`Function` with up to four methods::

    class Sin(Function):
        need_inputs = True           # backward reads x (the default)
        need_outputs = False         # ... but not y (the default)

        def setup_impl(self, inputs):            # optional: check arguments, infer outputs
            return [(inputs[0].shape, float_dtype(inputs[0].dtype))]

        def forward_impl(self, inputs, outputs):  # arrays in, output arrays out
            x, = inputs
            outputs[0] = array_module(x).sin(x)

        def backward_impl(self, inputs, outputs, prop_down, accum):
            # d sin(x) = cos(x) dx
            gy = outputs[0].grad
            if prop_down[0]:
                inputs[0].store(gy * F.cos(inputs[0].data), accum[0])

    def sin(x):
        return Sin()(x)

**forward_impl(inputs, outputs)** receives the input arrays (numpy or cupy:
compute with ``array_module(x)``, never with numpy directly) and sets
``outputs[i]`` to each output array. It must not modify its inputs.

**backward_impl(inputs, outputs, prop_down, accum)** receives one
:class:`Slot` per input and per output. ``slot.data`` is the value and
``slot.grad`` the gradient; ``outputs[j].grad`` is the gradient flowing in
(never None: the engine fills absent ones with zeros). For every input ``i``
with ``prop_down[i]`` true, backward_impl computes that input's gradient and
calls ``inputs[i].store(gx, accum[i])``, which overwrites ``inputs[i].grad``
when ``accum[i]`` is false and adds to it when true (and sums a broadcast ``gx``
back to the input's shape). It must not touch inputs with ``prop_down[i]``
false. The engine, never the function, decides both flags.

backward_impl is written in hodiff functions only (``F.*``, Variable
operators, ``hodiff.grad_functions``), which is what makes every order work.
The same code runs in two ways:

* plain ``y.backward()``: the slots hold bare arrays and every ``F.*`` called
  inside runs its ``forward_impl`` directly on them, recording nothing;
* ``hd.grad(...)``: the slots hold Variables (``inputs[i].data`` is the input
  Variable itself) and the calls record a new, differentiable graph.

So a rule may use the *shapes* and dtypes of its slots but never branch on their
*values* (in a static graph they are not computed yet): anything value-dependent
(an argmax, a mask) belongs inside a function's forward_impl.

Slots and the ``prop_down``/``accum`` lists belong to the engine: they are only
valid during the call and must not be kept or mutated.

**setup_impl(inputs)** receives the input Variables (shape and dtype known,
values maybe not) and returns ``[(shape, dtype), ...]`` for the outputs. It is
where argument, shape and dtype errors are raised: it runs when the function is
called, before anything is computed or linked, and must not change ``self``.
(Calls made by backward rules while ``hd.grad`` records in define-by-run mode
skip it: their arguments are consistent by construction.) The default describes
a unary elementwise function.

A setup that only describes what numpy computes for float inputs (the inputs' dtype, numpy's
broadcast shape) may be ``@elementwise_setup``: calls with float inputs of one dtype skip it
(it runs when the forward raises, for its clearer error, or gives another dtype).

Class attributes declare what the backward needs, so ``forward(clear_buffer=True)`` can free
the rest: ``need_inputs`` (True, False or a tuple of input indices) and ``need_outputs``
(bool). ``differentiable = False`` marks functions with integer/boolean output: they cut the
graph. ``n_outputs`` is the number of outputs (an instance may set it in ``__init__``).

Static arguments are keyword-only ``__init__`` parameters, stored once, never mutated, and
recorded as ``static_arguments`` (``(args, kwargs)``, which ``hd.save_graph`` stores), so
``type(f)(*args, **kwargs)`` rebuilds an equivalent primitive. An instance may be called more
than once (a new node each time). Classes of the ``hodiff`` package are in :data:`REGISTRY`.
"""

from __future__ import annotations

import copy
import functools
import re
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from hodiff.engine import batching as _batching
from hodiff.engine import complex_values as _complex
from hodiff.engine import variable as _variable
from hodiff.engine.arguments import check_devices, refuse_input_mask, wrap
from hodiff.engine.context import (
    NO_GRAD,
    RAW,
    STATE,
    STATIC,
    TRUSTED,
    array_module,
)
from hodiff.engine.tracing import traced
from hodiff.engine.variable import Variable, no_value

__all__ = [
    "REGISTRY",
    "Elementwise",
    "Flags",
    "Function",
    "GradientShapeError",
    "Slot",
    "Slots",
    "elementwise_setup",
    "float_dtype",
    "traced",
]

#: every primitive defined in the hodiff package, in definition order
REGISTRY: dict[type[Function], str] = {}
# node numbers: a node is numbered after the nodes its inputs come from; read from the one
# clock (hodiff/engine/clock.py; an alias for the hot path)
ticks = _variable.ticks
_ref = weakref.ref
_new_variable = object.__new__
#: set by hodiff.transforms.vectorize: called with (function, inputs) when an input has no value
BATCH_HOOK: Any = None


class OutRef(weakref.ref["Variable"]):
    """The weak reference to a one-output node's output, which is also that node's ``_outputs``.

    It reads as the one-element sequence of weak references that ``_outputs`` is for several
    outputs (``len``, ``[0]``, iteration), so that a link makes one GC-tracked object where a
    list and a reference made two: the collector traverses every live node at each full
    collection (bench/graph_size.py). Hot loops test ``type(refs) is OutRef`` and call it.
    """

    __slots__ = ()

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> OutRef:
        if i == 0 or i == -1:
            return self
        raise IndexError("a node's output index out of range")

    def __iter__(self) -> Iterator[OutRef]:
        yield self


def _renew(f: Function) -> Function:
    """A copy of a node whose instance is called again (its static arguments kept)."""
    return copy.copy(f)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


_FLOAT64 = np.dtype(np.float64)


def float_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype numpy gives an elementwise function of ``dtype`` (ints -> float64)."""
    return dtype if dtype.kind in "fc" else _FLOAT64


class GradientShapeError(ValueError):
    """A backward rule stored a gradient whose shape cannot be summed to its input's shape."""


class Slot:
    """What backward_impl sees of one input or output: ``data``, ``grad``, ``shape``.

    ``data``/``grad`` are arrays in a plain backward and Variables while ``hd.grad`` records.
    """

    __slots__ = ("data", "grad", "shape")

    def __init__(self, data: Any, grad: Any, shape: tuple[int, ...]) -> None:
        self.data = data
        self.grad = grad
        self.shape = shape

    @property
    def d(self) -> Any:
        return self.data

    @property
    def g(self) -> Any:
        return self.grad

    def store(self, gx: Any, accum: bool) -> None:
        """Writes (``accum`` false) or adds (``accum`` true) ``gx`` as this input's gradient.

        A ``gx`` of a broadcast shape is summed back to this slot's shape; any
        other shape raises :class:`GradientShapeError` (the engine adds the
        function's name).
        """
        if (gx._shape if type(gx) is Variable else gx.shape) != self.shape:  # no property call
            gx = _sum_to(gx, self.shape)
        self.grad = self.grad + gx if accum else gx


class Function:
    """Base class of all primitives; see the module docstring for the protocol."""

    n_outputs: int = 1
    need_inputs: ClassVar[bool | tuple[int, ...]] = True
    need_outputs: ClassVar[bool] = False
    differentiable: ClassVar[bool] = True
    name: ClassVar[str] = "function"
    set_active_input_mask = refuse_input_mask  # NNabla's; says what hodiff does instead
    #: whether a node follows new input shapes after :meth:`Variable.reset_shape` (its
    #: setup runs again): true when its arguments hold nothing computed from the shapes it
    #: was made for. False unless the class says so (``class P(Function, follows_shape=True)``
    #: or the class attribute), so that a primitive that does not say refuses new shapes
    #: (ShapeResetError) instead of computing with its old set-up. A node made by
    #: ``hd.grad``'s rules never follows (``_shape_bound``).
    follows_shape: ClassVar[bool] = False
    #: whether it may also follow inputs of another rank (an elementwise primitive; the same
    #: default and the same two ways to say it)
    follows_rank: ClassVar[bool] = False
    #: set on an instance that holds numbers computed from its inputs' shapes (a rule's
    #: ``sum_to`` shape, a mean's ``1/n``): it refuses new shapes whatever its class says
    _shape_bound: bool | str = False

    # set when the node is linked into a graph (``seq`` stays -1 until then: the check
    # does not read ``__dict__``, which Python would then build for every instance)
    inputs: Sequence[Variable]
    seq: int = -1
    #: the clock time of the last forward pass (hodiff/engine/run.py) that recomputed this
    #: node's values; they are as of ``max(seq, _computed)`` (checks.check_values)
    _computed: int = -1
    #: weak references to the outputs: a list, or for one output its :class:`OutRef`
    _outputs: list[weakref.ref[Variable]] | OutRef
    #: the output values backward needs (``need_outputs``): a tuple of arrays, which the
    #: collector untracks
    _ydata: Sequence[Any] | None
    _out_meta: list[tuple[tuple[int, ...], Any]]

    #: the constructor's ``(args, kwargs)``, recorded by :func:`_recorded` (None: no arguments)
    static_arguments: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    #: whether ``setup_impl`` is elementwise: with float inputs of one dtype, the outputs have
    #: that dtype and the shape numpy gives, and numpy raises where it would (then it runs to
    #: raise its clear error). Define-by-run calls then skip it; set from ``setup_impl``.
    _elementwise_setup: ClassVar[bool] = True
    #: a numpy ufunc equal to ``forward_impl`` on one numpy array (``ufunc(x)``, or
    #: ``ufunc(x, self.val)`` with ``_fast_val``): called inline, without forward_impl's frame
    _fast_forward: ClassVar[Any] = None
    _fast_val: ClassVar[bool] = False

    #: the kind of its Taylor rule (:mod:`hodiff.transforms.taylor`, docs/custom_functions.md):
    #: ``"linear"`` (``y_k = f(x_k)`` through ``batch_rule``), ``"multilinear"`` (Leibniz),
    #: ``"elementwise"`` (Faa di Bruno through ``dydx``), ``"composite"`` (the jet of its
    #: ``composition``), ``"constant"``; a ``jet_rule`` method is a rule of its own. ``""``
    #: declares none: the generic rule (nested vjps, slow), which ``rule_kinds`` reports
    taylor: ClassVar[str] = ""
    #: the inputs a linear (multilinear) rule maps, None: all; a linear primitive's output does
    #: not move with the others (indices, masks), a multilinear one adds them (a bias)
    linear_in: ClassVar[tuple[int, ...] | None] = None
    #: an "elementwise" rule whose ``dydx`` is locally constant (a mask): ``y_k = dydx x_k``
    piecewise_linear: ClassVar[bool] = False
    #: its forward does more than compute its outputs (draws random numbers, updates a
    #: running statistic, communicates): a compiler never folds, merges or drops it
    effects: ClassVar[bool] = False
    #: complex values: ``""`` real only (a complex input raises TypeError), ``"holomorphic"``
    #: (its real rules hold unchanged), ``"own"`` (rules of its own; engine/complex_values.py)
    complex_values: ClassVar[str] = ""
    #: its forward on one element as a numpy expression of the inputs ``x0, x1, ...`` (``xs``:
    #: all), its numeric attributes and ``exp``, ``where``, ``maximum``...: the code a compiler
    #: fuses (hodiff/transforms/compile/codegen.py). None: not fusable
    scalar_kernel: ClassVar[str | None] = None

    def linear_part(self) -> Function:
        """``L`` of an affine ``y = L x + b`` (itself when linear): the linear rule's map."""
        return self

    def __init_subclass__(
        cls,
        register: bool = True,
        follows_shape: bool | None = None,
        follows_rank: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if follows_shape is not None:  # the shape facts named in the class statement
            cls.follows_shape = follows_shape
        if follows_rank is not None:
            cls.follows_rank = follows_rank
        if "forward_impl" in cls.__dict__ and "_fast_forward" not in cls.__dict__:
            cls._fast_forward = None  # a new forward_impl: the inherited ufunc no longer applies
        if "setup_impl" in cls.__dict__:
            cls._elementwise_setup = getattr(cls.__dict__["setup_impl"], "elementwise", False)
        if "__init__" in cls.__dict__ and not getattr(cls.__dict__["__init__"], "records", False):
            cls.__init__ = _recorded(cls.__dict__["__init__"])  # type: ignore[method-assign]
        if "name" not in cls.__dict__:
            cls.name = _snake(cls.__name__)
        if register and cls.__module__.startswith("hodiff."):
            if any(c.__name__ == cls.__name__ for c in REGISTRY):
                raise RuntimeError(f"hodiff: a primitive {cls.__name__} is already registered")
            REGISTRY[cls] = cls.name

    # ------------------------------------------------------------ protocol
    def setup_impl(self, inputs: Sequence[Variable]) -> list[tuple[tuple[int, ...], Any]]:
        """Checks the inputs and returns ``[(shape, dtype)]`` of the outputs."""
        x = inputs[0]
        return [(x.shape, float_dtype(x.dtype))]

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        """Sets ``outputs[i]`` to each output array from the input arrays (see the module)."""
        raise NotImplementedError(f"{self.name}: forward_impl is not implemented")

    def backward_impl(
        self,
        inputs: Sequence[Slot],
        outputs: Sequence[Slot],
        prop_down: Sequence[bool],
        accum: Sequence[bool],
    ) -> None:
        """Stores each wanted input gradient: ``inputs[i].store(gx, accum[i])`` (see the module)."""
        wanted = [i for i, p in enumerate(prop_down) if p]
        raise NotImplementedError(
            f"{self.name}: no backward rule (gradient asked for input {wanted[0] if wanted else 0})"
        )

    def follows(self, seen: list[tuple[int, ...]], now: list[tuple[int, ...]]) -> bool:
        """Whether this node may run again on inputs of shapes ``now`` (it was set up for
        ``seen``) after :meth:`Variable.reset_shape`: its setup then runs again.

        The default is the class's ``follows_shape``; a primitive whose arguments fit some
        new shapes and not others (a reshape's ``-1``, a full slice) says which.
        """
        return self.follows_shape

    # ------------------------------------------------------------ calling
    def __call__(self, *args: Any) -> Any:
        """Computes this primitive on ``args`` and links a node; returns the output(s).

        The steps (:meth:`_call` is the general path, one named step a line): wrap
        arguments that are not Variables as constant leaves; hand batched inputs to
        ``hd.vmap``; define-by-run: check the arguments and compute the outputs
        (:meth:`_compute`), define-then-run: only infer their shapes; make the output
        Variables and link the node (:meth:`_link`), unless recording is off. In a
        plain pass (raw mode) a call only computes, on bare arrays.
        """
        mode = STATE.get().modes
        # ---------------------------------------------------------------- fast paths
        # The common calls, in fewer frames (graph building and the plain pass are the hot
        # loops). Each gives what the general path gives: tests/test_engine.py compares them.
        if mode & RAW:  # a plain pass: arrays in, arrays out, nothing recorded
            uf = self._fast_forward
            if uf is not None and len(args) == 1 and type(args[0]) is np.ndarray:
                return uf(args[0], self.val) if self._fast_val else uf(args[0])  # type: ignore[attr-defined]
            return self._forward_arrays(args)
        if self.n_outputs == 1 and not mode & STATIC:  # define-by-run, one output
            return self._call1(args, mode)
        # ---------------------------------------------------------------- general path
        return self._call(args, mode)

    def _call1(self, args: Sequence[Any], mode: int) -> Any:
        """:meth:`__call__` define-by-run with one output: the common calls on one or two
        Variables with values in few frames, any other through :meth:`_call`.
        """
        n = len(args)
        if n == 1:
            a = b = args[0]
        elif n == 2:
            a, b = args
        else:
            return self._call(args, mode)
        if type(a) is not Variable or type(b) is not Variable or a._data is None or b._data is None:
            return self._call(args, mode)
        xs = [a._data] if n == 1 else [a._data, b._data]
        # no check needed: hd.grad's rules (trusted), or a skippable elementwise setup
        if mode & TRUSTED or (
            self._elementwise_setup and a._dtype.kind == "f" and b._dtype is a._dtype
        ):
            try:
                uf = self._fast_forward
                if uf is not None and n == 1 and type(xs[0]) is np.ndarray:
                    y = uf(xs[0], self.val) if self._fast_val else uf(xs[0])  # type: ignore[attr-defined]
                else:
                    ys: list[Any] = [None]
                    self.forward_impl(xs, ys)
                    y = ys[0]
            except Exception:  # the general path raises the clearest error
                return self._call(args, mode)
            if mode & TRUSTED or getattr(y, "dtype", None) is a._dtype:
                return self._link1(args, y, mode)
        if a._dtype.kind == "c" or b._dtype.kind == "c":
            return self._call(args, mode)  # its complex_values fact is checked there
        return self._link1(args, self._compute(args, xs, mode)[0], mode)

    def _call(self, args: Sequence[Any], mode: int) -> Any:
        """The general path of :meth:`__call__`."""
        inputs = self._as_inputs(args)
        if not mode & TRUSTED and _complex.has_complex(inputs):
            inputs = _complex.checked_inputs(self, inputs)
        xs = [x._data for x in inputs]
        unfilled = any(d is None for d in xs)
        if (unfilled or not inputs) and BATCH_HOOK is not None:  # hd.vmap (vectorize.py):
            # a batched input, or no input at all (a random function draws per example)
            out = BATCH_HOOK(self, inputs)
            if out is not None:
                return out
        if mode & STATIC:  # define-then-run: shapes now, values at .forward()
            specs = self.setup_impl(inputs)
            ys: list[Any] = [None] * self.n_outputs
        else:
            specs = None
            ys = self._compute(inputs, self._filled(inputs) if unfilled else xs, mode)
        if self.n_outputs == 1:
            return self._link1(inputs, ys[0], mode, specs)
        return self._link(inputs, ys, mode, specs)

    def _as_inputs(self, args: Sequence[Any]) -> Sequence[Variable]:
        """The arguments as Variables: arrays and scalars become constant leaves."""
        for a in args:
            if not isinstance(a, Variable):
                return [
                    a if isinstance(a, Variable) else self._wrap(i, a, args)
                    for i, a in enumerate(args)
                ]
        return args

    def _forward_arrays(self, xs: Sequence[Any]) -> Any:
        """``forward_impl`` on bare arrays: the output array, or a tuple of them."""
        ys: list[Any] = [None] * self.n_outputs
        self.forward_impl(xs, ys)
        return ys[0] if self.n_outputs == 1 else tuple(ys)

    def _compute(self, inputs: Sequence[Variable], xs: Sequence[Any], mode: int) -> list[Any]:
        """Define-by-run: checks the arguments (``setup_impl``) and computes the output arrays.

        Calls made by ``hd.grad``'s rules (trusted mode) are not checked, and an
        elementwise setup is skipped for float inputs of one dtype: it then runs only
        when the forward raises (for its clear error) or gives another dtype.
        """
        specs = None
        skipped = False
        if not mode & TRUSTED:
            skipped = self._setup_skippable(inputs)
            if not skipped:
                specs = self.setup_impl(inputs)
        ys: list[Any] = [None] * self.n_outputs
        try:
            uf = self._fast_forward
            if uf is not None and len(xs) == 1 and type(xs[0]) is np.ndarray:
                ys[0] = uf(xs[0], self.val) if self._fast_val else uf(xs[0])  # type: ignore[attr-defined]
            else:
                self.forward_impl(xs, ys)
        except Exception as e:  # costs nothing unless raised
            self._forward_failed(inputs, e, skipped)
        if skipped and (self.n_outputs > 1 or ys[0].dtype is not inputs[0]._dtype):
            specs = self.setup_impl(inputs)  # another dtype than the inputs'
        if specs is not None:
            ys = as_declared(self, xs, ys, [s[1] for s in specs])
        return ys

    def _setup_skippable(self, inputs: Sequence[Variable]) -> bool:
        """Whether an elementwise setup may be skipped: float inputs of one dtype."""
        if not self._elementwise_setup or not inputs:
            return False
        dtype = inputs[0]._dtype
        return dtype.kind == "f" and (len(inputs) == 1 or _same_dtype(inputs, dtype))

    def _forward_failed(self, inputs: Sequence[Variable], error: Exception, skipped: bool) -> None:
        """Raises the clearest error for a failed forward: the skipped setup's, or a device
        mismatch, or ``error`` itself.
        """
        if skipped:
            self.setup_impl(inputs)
        if isinstance(error, TypeError):
            check_devices(self.name, inputs, error)
        raise error

    def _needs_grad(self, inputs: Sequence[Variable], mode: int) -> bool:
        """Whether the outputs need a gradient: recording, differentiable, an input needs one."""
        if mode & NO_GRAD or not self.differentiable:
            return False
        for x in inputs:  # noqa: SIM110 (a loop: a generator costs a frame)
            if x.need_grad:
                return True
        return False

    def _node(self, inputs: Sequence[Variable]) -> Function:
        """The node to link: this instance, or a copy when the instance is linked already."""
        node = self if self.seq < 0 else _renew(self)
        node.inputs = inputs
        node.seq = next(ticks)
        return node

    def _link1(self, inputs: Sequence[Variable], y: Any, mode: int, specs: Any = None) -> Variable:
        """The output Variable of a one-output call (value ``y``, or only ``specs``), linked."""
        v = _new_variable(Variable)
        if y is None:
            v._shape, v._dtype, v._data = tuple(specs[0][0]), np.dtype(specs[0][1]), None
        else:
            if type(y) is not np.ndarray:
                y = as_array(y)
            v._shape, v._dtype, v._data = y.shape, y.dtype, y
        v._grad = None
        if mode & NO_GRAD:
            v.need_grad = False
            v.parent = None
            return v
        need = False
        if self.differentiable:
            for x in inputs:  # a plain loop: a generator costs a frame
                if x.need_grad:
                    need = True
                    break
        v.need_grad = need
        node = self if self.seq < 0 else _renew(self)  # a linked instance: a copy
        node.inputs = inputs
        node.seq = next(ticks)
        # one GC-tracked object per link: the weak reference is the node's _outputs, and a
        # kept value is in a tuple of arrays, which the collector untracks
        node._outputs = OutRef(v)
        node._ydata = (y,) if self.need_outputs else None
        if mode & TRUSTED:  # a gradient graph's node: made for these shapes (set last: the
            node._shape_bound = "hd.grad"  # instances keep sharing one key table)
        v.parent = node
        return v

    def _link(
        self, inputs: Sequence[Variable], ys: list[Any], mode: int, specs: Any = None
    ) -> tuple[Variable, ...]:
        """The output Variables of a call with several outputs, linked to one node."""
        need = self._needs_grad(inputs, mode)
        outputs = []
        for i, y in enumerate(ys):
            v = _output(specs[i] if specs is not None else None, y)
            v.need_grad = need
            outputs.append(v)
        if not mode & NO_GRAD:
            node = self._node(inputs)
            node._outputs = [_ref(v) for v in outputs]
            for v in outputs:
                v.parent = node
            node._ydata = tuple([v._data for v in outputs]) if self.need_outputs else None
            node._out_meta = [(v._shape, v._dtype) for v in outputs]  # for dropped outputs
            if mode & TRUSTED:
                node._shape_bound = "hd.grad"
        return tuple(outputs)

    def _filled(self, inputs: Sequence[Variable]) -> list[Any]:
        """The input arrays; an unfilled leaf reads as zeros, a function's output must have one."""
        for i, x in enumerate(inputs):
            if x._data is None and x.parent is not None:
                raise RuntimeError(f"{self.name}: input {i} is {no_value(x)}")
        return [x.d for x in inputs]

    def _wrap(self, i: int, value: Any, args: Sequence[Any]) -> Variable:
        try:
            return wrap(value, args)
        except TypeError as e:
            why = f" ({e})" if isinstance(value, list | tuple) else ""  # a list of Variables
            raise TypeError(
                f"{self.name}: input {i} must be a Variable, an array or a scalar, "
                f"got {type(value).__name__}{why}"
            ) from None

    # ------------------------------------------------------------ engine helpers
    def relinked(self, inputs: Sequence[Variable]) -> tuple[Variable, ...] | None:
        """A copy of this node linked again to ``inputs``, its outputs holding this node's output
        arrays: no forward runs (so no draw and no side effect runs again).

        For ``inputs`` that hold the very arrays of this node's inputs (a value computed
        again elsewhere, e.g. by a checkpoint's jet, and shared with the first): the copy
        computes what this node computed, and a graph built on its outputs reaches what the
        values depend on through ``inputs`` instead of this node's inputs. None when an
        output is freed or dead, or an input does not hold the same array.
        """
        if len(inputs) != len(self.inputs):
            return None
        for x, y in zip(inputs, self.inputs, strict=True):
            if x._data is None or x._data is not y._data:
                return None
        ys = [r() for r in self._outputs]
        if any(v is None or v._data is None for v in ys):
            return None
        mode = STATE.get().modes
        if self.n_outputs == 1:
            return (self._link1(list(inputs), ys[0]._data, mode),)  # type: ignore[union-attr]
        return self._link(list(inputs), [v._data for v in ys], mode)  # type: ignore[union-attr]

    def output_variable(self, i: int) -> Variable:
        """Output ``i`` as a Variable: the live one, or a new one re-linked to this node."""
        v = self._outputs[i]()
        if v is None:
            if self._ydata is None or self._ydata[i] is None:
                raise RuntimeError(f"{self.name}: output {i} was freed and is not retained")
            y = self._ydata[i]
            v = Variable.__new__(Variable)
            v._data, v._shape, v._dtype, v._grad = y, y.shape, y.dtype, None
            v.parent = self
            v.need_grad = True
            refs = self._outputs
            if isinstance(refs, OutRef):  # one output: its reference is the node's _outputs
                self._outputs = OutRef(v)
            else:
                refs[i] = weakref.ref(v)
        elif v._data is None and self._ydata is not None:  # freed by clear_buffer, but retained
            v._data = self._ydata[i]
        return v

    def output_shape(self, i: int) -> tuple[int, ...]:
        """Shape of output ``i`` (for messages), whether or not the output is alive."""
        v = self._outputs[i]()
        if v is not None:
            return v._shape
        meta = getattr(self, "_out_meta", None)
        return meta[i][0] if meta else ()

    def needs_input(self, i: int) -> bool:
        """Whether backward_impl reads the value of input ``i``."""
        n = self.need_inputs
        return n if isinstance(n, bool) else i in n

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def elementwise_setup(setup: Any) -> Any:
    """Marks a ``setup_impl`` as elementwise (see ``Function._elementwise_setup``)."""
    setup.elementwise = True
    return setup


def records_arguments(init: Any) -> Any:
    """Marks an ``__init__`` that sets ``self.static_arguments`` itself (a hot constructor)."""
    init.records = True
    return init


def _recorded(init: Any) -> Any:
    """Wraps a primitive's ``__init__`` so that the instance keeps its constructor arguments.

    They are the node's static arguments as the caller gave them: what ``hd.to_dot`` shows
    and ``hd.save_graph`` stores, so that ``type(node)(*args, **kwargs)`` rebuilds the node
    (for every primitive, including those defined later, with no per-function code). The
    most derived ``__init__`` returns last, so its arguments are the ones kept.
    """

    @functools.wraps(init)
    def init_and_record(self: Function, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.static_arguments = (args, kwargs)

    return init_and_record


Slots = Sequence[Slot]
Flags = Sequence[bool]


class Elementwise(Function, register=False):
    """A unary elementwise primitive whose rule is one line of mathematics, ``dydx(x, y)``.

    ``dydx`` returns the derivative ``dy/dx`` elementwise, written in hodiff functions
    from the input ``x`` and/or the output ``y`` (``None`` unless ``need_inputs`` /
    ``need_outputs`` declares it); the backward is ``gx = gy * dydx(x, y)``::

        class Sin(Elementwise):
            def forward_impl(self, inputs, outputs):
                outputs[0] = array_module(inputs[0]).sin(inputs[0])

            def dydx(self, x, y):
                return F.cos(x)  # d sin(x) = cos(x) dx

    ``ufunc`` may name the numpy/cupy function instead of a ``forward_impl``.
    """

    ufunc: ClassVar[str] = ""
    _np_ufunc: ClassVar[Any] = None  # numpy's function named by ufunc (set per subclass)
    batch_rule = _batching.elementwise  # hd.vmap: broadcasting carries the batch axis
    taylor = "elementwise"  # Taylor mode: Faa di Bruno through dydx
    # reset_shape: an elementwise rule fits inputs of any shape and rank (a user's too)
    follows_shape = True
    follows_rank = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "ufunc" in cls.__dict__:
            cls._np_ufunc = getattr(np, cls.ufunc, None) if cls.ufunc else None
        if cls.forward_impl is Elementwise.forward_impl:
            cls._fast_forward = cls._np_ufunc

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x = inputs[0]
        if type(x) is np.ndarray and self._np_ufunc is not None:
            outputs[0] = self._np_ufunc(x)
            return
        if not self.ufunc:
            raise NotImplementedError(f"{self.name}: forward_impl is not implemented")
        outputs[0] = getattr(array_module(x), self.ufunc)(x)

    def dydx(self, x: Any, y: Any) -> Any:
        """``dy/dx`` elementwise, in hodiff functions (``x``/``y`` as declared)."""
        raise NotImplementedError(f"{self.name}: no derivative rule dydx (gradient asked for x)")

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gx = gy * dy/dx
        if prop_down[0]:
            x = inputs[0].data if self.need_inputs else None
            y = outputs[0].data if self.need_outputs else None
            inputs[0].store(outputs[0].grad * self.dydx(x, y), accum[0])


def _same_dtype(inputs: Sequence[Variable], dtype: Any) -> bool:
    """Whether every input has ``dtype`` (the case an elementwise setup can skip)."""
    for x in inputs:  # noqa: SIM110 (a loop: a generator costs a frame)
        if x._dtype is not dtype:
            return False
    return True


def as_array(y: Any) -> Any:
    """``y``, with numpy's scalars (what numpy returns for 0-d results) made 0-d arrays.

    The one fix-up of values the engine makes: for outputs of functions
    (:func:`_output`, the static forward) and for gradients of the plain pass.
    """
    return np.asarray(y) if type(y) is not np.ndarray and array_module(y) is np else y


def _output(spec: tuple[tuple[int, ...], Any] | None, y: Any) -> Variable:
    """A new unlinked Variable for one output (value ``y``, or only ``spec`` when not computed)."""
    v = _new_variable(Variable)
    if y is None:
        assert spec is not None
        v._shape, v._dtype, v._data = tuple(spec[0]), np.dtype(spec[1]), None
    else:
        if type(y) is not np.ndarray:
            y = as_array(y)
        v._shape, v._dtype, v._data = y.shape, y.dtype, y
    v._grad = None
    v.need_grad = False
    v.parent = None
    return v


def as_declared(f: Function, xs: Sequence[Any], ys: list[Any], dtypes: Sequence[Any]) -> list[Any]:
    """``f``'s outputs in their declared dtypes: one float dtype in both modes.

    numpy computes float16 (or float32) from small integer and bool arrays where
    ``setup_impl`` declares float64; ``f`` is then run again on float inputs.
    """
    dtypes = [np.dtype(d) for d in dtypes]
    if not any(_off(y, d) for y, d in zip(ys, dtypes, strict=True)):
        return ys
    if any(_is_int(x) for x in xs):
        wanted = next(d for d in dtypes if d.kind == "f")
        ys = [None] * len(ys)
        f.forward_impl([x.astype(wanted) if _is_int(x) else x for x in xs], ys)
    return [y.astype(d) if _off(y, d) else y for y, d in zip(ys, dtypes, strict=True)]


def _off(y: Any, d: np.dtype[Any]) -> bool:
    """Whether ``y`` (an output or None) is not of its declared float dtype ``d``."""
    return y is not None and d.kind == "f" and y.dtype != d


def _is_int(x: Any) -> bool:
    """Whether ``x`` is an integer or boolean array."""
    return getattr(x, "dtype", _FLOAT64).kind in "biu"


def _sum_to(gx: Any, shape: tuple[int, ...]) -> Any:
    have = gx.shape
    lead = len(have) - len(shape)
    if lead < 0 or any(s != 1 and s != t for s, t in zip(shape, have[lead:], strict=True)):
        raise GradientShapeError(
            f"a gradient of shape {tuple(have)} was stored for an input of shape {shape} "
            "(it must have the input's shape, or a shape that broadcasting made from it)"
        )
    return _SUM_TO(gx, shape)


def _unregistered_sum_to(gx: Any, shape: tuple[int, ...]) -> Any:
    raise RuntimeError(
        "Slot.store: no sum-to function is registered (import hodiff: "
        "hodiff.grad_functions.arithmetic registers it)"
    )


#: the differentiable sum of a broadcast gradient back to its input's shape
#: (``grad_functions.arithmetic.sum_to``, registered by :mod:`hodiff.functions`)
_SUM_TO: Any = _unregistered_sum_to


def register_sum_to(sum_to: Any) -> None:
    """Registers the function :meth:`Slot.store` sums a broadcast gradient with."""
    global _SUM_TO
    if _SUM_TO is not _unregistered_sum_to and _SUM_TO is not sum_to:
        raise RuntimeError(f"register_sum_to: a sum-to function is already registered ({_SUM_TO})")
    _SUM_TO = sum_to
