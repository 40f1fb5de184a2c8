"""Data-parallel training over MPI (mpi4py): one process per rank, same model on each.

Start a script with ``mpiexec -n 2 python -m mpi4py train.py`` (``-m mpi4py``
aborts every rank when one raises, instead of leaving the others waiting). In
it::

    import hodiff as hd
    from hodiff.training.distributed import Communicator

    comm = Communicator()                  # MPI.COMM_WORLD
    comm.bcast_parameters(params)          # every rank starts from rank 0's values
    for step in range(n):
        x = my_shard_of_the_batch(step, comm.rank, comm.size)
        loss = model(x)                    # a local loss: this rank's mean
        for p in params.values():
            p.zero_grad()
        comm.backward(loss, params)        # .g = the mean over ranks of the local gradients
        solver.update()

:meth:`Communicator.backward` runs the plain reverse pass and all-reduces each
parameter's gradient as soon as it is final (:func:`hodiff.iter_grads`), in
buckets of about ``bucket_size`` bytes. The buckets are fixed (the parameters in
reverse order, split by dtype and size) and launched in bucket order on every
rank, each by a non-blocking ``Iallreduce`` that overlaps the rest of the pass;
a bucket whose parameters get no gradient this pass is sent at the end with
their current ``.g`` (zeros after ``zero_grad``), so an unused parameter never
blocks anything. A gradient penalty is a local :func:`hodiff.grad` whose graph
is part of the loss: ``comm.backward`` differentiates through it like any
other node, so penalties need no special care.

:func:`hodiff.functions.all_reduce` is the differentiable collective for global
quantities inside the graph (synchronized batch statistics).

mpi4py is imported only when a communicator over MPI is made: this module
imports without it, and :meth:`Communicator.single_process` needs no MPI.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.autograd import iter_grads
from hodiff.engine.context import array_module
from hodiff.engine.variable import Variable

__all__ = ["Communicator"]

#: default size of a gradient bucket, in bytes
BUCKET_SIZE = 1 << 18


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            "hodiff.distributed needs mpi4py and an MPI library: "
            'pip install -e ".[mpi]" in the hodiff source checkout '
            "(mpi4py and mpich). Communicator.single_process() runs without MPI."
        ) from e
    return MPI


def _is_cupy(a: Any) -> bool:
    return type(a).__module__.startswith("cupy")


def _named(params: Any, where: str) -> list[tuple[str, Variable]]:
    """``params`` (a dict name -> Variable, a list of Variables or one) as (name, Variable)."""
    if isinstance(params, Variable):
        items: list[tuple[str, Any]] = [("0", params)]
    elif isinstance(params, Mapping):
        items = [(str(k), v) for k, v in params.items()]
    elif isinstance(params, Iterable) and not isinstance(params, str | bytes):
        items = [(str(i), v) for i, v in enumerate(params)]
    else:
        raise TypeError(
            f"{where}: params must be a dict name -> Variable or a list of Variables, "
            f"got {type(params).__name__}"
        )
    for name, v in items:
        if not isinstance(v, Variable):
            raise TypeError(
                f"{where}: params[{name!r}] must be a hodiff.Variable, got {type(v).__name__}"
            )
    return items


class _Bucket:
    """Gradients of some parameters of one dtype, reduced by one ``Iallreduce``."""

    __slots__ = ("buffer", "members", "offsets", "on_device", "request")

    def __init__(
        self, members: list[Variable], dtype: np.dtype[Any], xp: Any, device_buffer: bool
    ) -> None:
        self.members = members
        self.on_device = xp is not np  # the members' gradients are cupy arrays
        self.offsets = []
        n = 0
        for v in members:
            self.offsets.append(n)
            n += v.size
        self.offsets.append(n)
        self.buffer = (xp if device_buffer else np).empty(n, dtype=dtype)
        self.request: Any = None

    def put(self, i: int, g: Any) -> None:
        """Copies member ``i``'s gradient into the bucket (device to host when staging)."""
        view = self.buffer[self.offsets[i] : self.offsets[i + 1]]
        if _is_cupy(g) and not _is_cupy(view):
            g.ravel().get(out=view)
        else:
            view[...] = g.ravel()

    def take(self, i: int, v: Variable) -> None:
        """Writes member ``i``'s reduced gradient into ``v.g`` (in place)."""
        chunk = self.buffer[self.offsets[i] : self.offsets[i + 1]].reshape(v.shape)
        g = v.g
        if _is_cupy(g) and not _is_cupy(chunk):
            g.set(chunk)  # contiguous: the engine and the setter own .g's buffer
        else:
            g[...] = chunk


class _Plan:
    """The fixed buckets of one parameter list: the same on every rank by construction."""

    def __init__(self, params: list[Variable], bucket_size: int, device_buffers: bool) -> None:
        self.params = params
        #: (name, shape, gradient dtype) of each parameter, and its digest (set by backward)
        self.meta: list[tuple[str, tuple[int, ...], Any]] = []
        self.digest = 0
        self.buckets: list[_Bucket] = []
        self.where: dict[Variable, tuple[int, int]] = {}
        group: list[Variable] = []
        nbytes = 0
        key: Any = None
        for v in reversed(params):  # gradients become final roughly from the last layer
            g_dtype = api.grad_dtype(v)
            xp = array_module(api.value_of(v)) if api.value_of(v) is not None else np
            k = (g_dtype, xp)
            if group and (k != key or nbytes + v.size * g_dtype.itemsize > bucket_size):
                self._close(group, key, device_buffers)
                group, nbytes = [], 0
            key = k
            group.append(v)
            nbytes += v.size * g_dtype.itemsize
        if group:
            self._close(group, key, device_buffers)

    def _close(self, group: list[Variable], key: Any, device_buffers: bool) -> None:
        dtype, xp = key
        b = len(self.buckets)
        for i, v in enumerate(group):
            self.where[v] = (b, i)
        self.buckets.append(_Bucket(group, dtype, xp, device_buffers))

    def matches(self, params: list[Variable]) -> bool:
        """Whether ``params`` are the same Variables, of the same sizes and modules, as planned."""
        if len(params) != len(self.params):
            return False
        for a, b in zip(params, self.params, strict=True):
            if a is not b:
                return False
        for bucket in self.buckets:
            for i, v in enumerate(bucket.members):
                if v.size != bucket.offsets[i + 1] - bucket.offsets[i] or (
                    api.value_of(v) is not None and _is_cupy(api.value_of(v)) != bucket.on_device
                ):
                    return False
        return True


class Communicator:
    """A group of processes training one model on shards of each batch, over MPI.

    Args:
        comm: an mpi4py communicator; default ``MPI.COMM_WORLD``. It is
            duplicated (twice: one copy for gradient buckets, one for the other
            collectives), so hodiff's traffic never mixes with the caller's.
        bucket_size: bytes of gradient per bucket in :meth:`backward`.
        cuda_aware: reduce cupy arrays directly (an MPI built with CUDA
            support); default: the environment variable
            ``HODIFF_MPI_CUDA_AWARE=1``, otherwise cupy arrays are staged
            through host memory.
        debug: compare in full on every collective that all ranks pass the same
            names, shapes and dtypes, and before each :meth:`backward` that the
            parameters' values agree on every rank (:meth:`check_parameters`); slow.
            Without it the shapes and dtypes are still checked on every collective,
            by one all-reduce of a 16-byte digest: a mismatch (a parameter of shape
            (3,) on one rank and (4,) on another) raises ValueError on every rank.

    Attributes:
        rank: this process's index, ``0 <= rank < size``.
        size: the number of processes.

    Every method is collective: all ranks call it, in the same order, with
    arguments of the same names, shapes and dtypes.
    """

    def __init__(
        self,
        comm: Any = None,
        *,
        bucket_size: int = BUCKET_SIZE,
        cuda_aware: bool | None = None,
        debug: bool = False,
    ) -> None:
        mpi = _mpi()
        if comm is None:
            comm = mpi.COMM_WORLD
        if not isinstance(comm, mpi.Comm):
            raise TypeError(
                f"Communicator: comm must be an mpi4py communicator, got {type(comm).__name__}"
            )
        if int(bucket_size) <= 0:
            raise ValueError(f"Communicator: bucket_size must be positive, got {bucket_size}")
        self._MPI = mpi
        self._parent = comm
        #: whether this is MPI.COMM_WORLD (or a single process): what a saved graph refers to
        self.is_world = comm == mpi.COMM_WORLD
        self.rank: int = comm.Get_rank()
        self.size: int = comm.Get_size()
        self._comm = comm.Dup()  # blocking collectives (all_reduce, bcast, F.all_reduce)
        self._grads = comm.Dup()  # gradient buckets (non-blocking), never mixed with the above
        self.bucket_size = int(bucket_size)
        if cuda_aware is None:
            cuda_aware = os.environ.get("HODIFF_MPI_CUDA_AWARE", "") == "1"
        self.cuda_aware = bool(cuda_aware)
        self.debug = bool(debug)
        self._plan: _Plan | None = None
        self._broken = ""  # why backward can no longer be used, after a pass that raised
        #: seconds the last :meth:`backward` spent in communication work (bucket copies,
        #: launches, progress calls, the final wait), and of those, waiting at the end
        self.comm_time = 0.0
        self.wait_time = 0.0
        #: buckets of the last :meth:`backward` launched before its last gradient was final
        self.overlapped_buckets = 0

    @classmethod
    def default(cls) -> Communicator:
        """The world: ``Communicator.of(MPI.COMM_WORLD)`` when MPI is in use (mpi4py imported,
        or the process started by mpiexec), else :meth:`single_process`.
        """
        global _SINGLE
        started = any(
            k in os.environ for k in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
        )
        if "mpi4py.MPI" in sys.modules or started:
            return cls.of(_mpi().COMM_WORLD)
        if _SINGLE is None:
            _SINGLE = cls.single_process()
        return _SINGLE

    @classmethod
    def of(cls, comm: Any) -> Communicator:
        """The Communicator of an mpi4py communicator, made on first use and then reused.

        Collective the first time (every rank must call it then).
        """
        key = comm.py2f()  # the handle: one per communicator while it exists
        found = _OF.get(key)
        if found is None or found._parent != comm:
            found = _OF[key] = cls(comm)
        return found

    @classmethod
    def single_process(cls) -> Communicator:
        """A communicator of one process (rank 0, size 1) that needs no MPI.

        Every collective is the identity, so a data-parallel script also runs
        as a plain ``python script.py`` without mpi4py.
        """
        self = cls.__new__(cls)
        self._MPI = None
        self._parent = None
        self.is_world = True
        self.rank, self.size = 0, 1
        self._comm = self._grads = None
        self.bucket_size = BUCKET_SIZE
        self.cuda_aware = False
        self.debug = False
        self._plan = None
        self._broken = ""
        self.comm_time = self.wait_time = 0.0
        self.overlapped_buckets = 0
        return self

    def __repr__(self) -> str:
        return f"Communicator(rank={self.rank}, size={self.size})"

    # ------------------------------------------------------------ arrays
    def all_reduce(self, arrays: Any, op: str = "mean") -> Any:
        """Reduces arrays over the ranks, in place: each becomes the sum or the mean.

        Args:
            arrays: a numpy/cupy array or a list of them (e.g. ``[v.g for v in
                params]``), writeable; the same shapes and dtypes on every rank.
            op: ``"mean"`` (float arrays only) or ``"sum"``.

        Returns:
            ``arrays``, reduced.

        The mean is ``sum / size``: with every rank holding the same value, it
        returns that value exactly when ``size`` is a power of two.
        """
        if op not in ("mean", "sum"):
            raise ValueError(f"all_reduce: op must be 'mean' or 'sum', got {op!r}")
        single = not isinstance(arrays, list | tuple)
        items = [arrays] if single else list(arrays)
        for i, a in enumerate(items):
            self._check_reducible(i, a, op)
        self._check_meta("all_reduce", _meta(items))
        if self.size == 1:
            return arrays
        self._reduce_grouped(items, op)
        return arrays

    @staticmethod
    def _check_reducible(i: int, a: Any, op: str) -> None:
        """Raises unless ``arrays[i]`` is a writeable numpy or cupy array (float for a mean)."""
        if isinstance(a, Variable):
            raise TypeError(f"all_reduce: arrays[{i}] is a Variable; pass its array (v.d or v.g)")
        if not isinstance(a, np.ndarray) and not _is_cupy(a):
            raise TypeError(
                f"all_reduce: arrays[{i}] must be a numpy or cupy array, got {type(a).__name__}"
            )
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            raise ValueError(f"all_reduce: arrays[{i}] (shape {a.shape}) is read-only")
        if op == "mean" and a.dtype.kind != "f":
            raise TypeError(f"all_reduce: op='mean' needs float arrays, arrays[{i}] is {a.dtype}")

    def _reduce_grouped(self, items: list[Any], op: str) -> None:
        """:meth:`all_reduce` after its checks: one message per (array module, dtype), in
        first-appearance order (the same everywhere); a lone contiguous array goes as itself.
        """
        groups: dict[Any, list[Any]] = {}
        for a in items:
            groups.setdefault((array_module(a), a.dtype), []).append(a)
        for group in groups.values():
            if len(group) == 1 and (group[0].flags.c_contiguous or group[0].size == 0):
                self._sum_over_ranks(group[0], "all_reduce", check=False)
                if op == "mean":
                    group[0] /= self.size
                continue
            xp = array_module(group[0])
            flat = xp.concatenate([a.ravel() for a in group])
            self._sum_over_ranks(flat, "all_reduce", check=False)
            if op == "mean":
                flat /= self.size
            n = 0
            for a in group:
                a[...] = flat[n : n + a.size].reshape(a.shape)
                n += a.size

    def _sum_over_ranks(self, buf: Any, where: str, check: bool = True) -> None:
        """Blocking in-place sum of one C-contiguous array over the ranks (its shape and dtype
        checked first, unless the caller checked them).
        """
        if self.size == 1:
            return
        if check:
            self._check_meta(where, [("x", buf.shape, buf.dtype)])
        if buf.size == 0:
            return
        if _is_cupy(buf) and not self.cuda_aware:
            host = buf.get()
            self._comm.Allreduce(self._MPI.IN_PLACE, host, op=self._MPI.SUM)
            buf.set(host)
            return
        if _is_cupy(buf):
            _synchronize(buf)
        self._comm.Allreduce(self._MPI.IN_PLACE, buf, op=self._MPI.SUM)

    # ------------------------------------------------------------ parameters
    def bcast_parameters(self, params: Any, root: int = 0) -> None:
        """Overwrites every rank's parameter values with ``root``'s, in place.

        Call it at the start (so that every rank begins from the same weights,
        whatever each one's random initialization) and after loading
        parameters on one rank.

        Args:
            params: a dict name -> Variable (e.g. ``hd.get_parameters()``) or a
                list of Variables; the same names, shapes and dtypes on every
                rank (checked: a mismatch raises ValueError on every rank).
            root: the rank whose values are sent.
        """
        items = _named(params, "bcast_parameters")
        self._check_root("bcast_parameters", root)
        self._check_same("bcast_parameters", [(n, v.shape, v.dtype) for n, v in items])
        for _, v in items:
            if isinstance(v.d, np.ndarray) and not v.d.flags.writeable:
                v.d = np.array(v.d)  # our own copy, written in place below
        self._bcast([v.d for _, v in items], root)
        if self.size > 1:  # written in place: the nodes computed with the old values are stale
            for n, v in items:
                api.mark_written(v, f"the parameter {n!r} written in place by bcast_parameters")

    def bcast_arrays(self, arrays: list[Any], root: int = 0) -> None:
        """Overwrites ``arrays`` with ``root``'s, in place (e.g. solver states).

        Args:
            arrays: writeable numpy/cupy arrays, the same shapes and dtypes on every rank.
            root: the rank whose values are sent.
        """
        self._check_root("bcast_arrays", root)
        for i, a in enumerate(arrays):
            if isinstance(a, np.ndarray) and not a.flags.writeable:
                raise ValueError(f"bcast_arrays: arrays[{i}] (shape {a.shape}) is read-only")
        self._check_meta("bcast_arrays", _meta(arrays))
        self._bcast(arrays, root)

    def _bcast(self, arrays: list[Any], root: int) -> None:
        """:meth:`bcast_arrays` after its checks."""
        if self.size == 1:
            return
        groups: dict[Any, list[Any]] = {}
        for a in arrays:
            groups.setdefault((array_module(a), a.dtype), []).append(a)
        for group in groups.values():
            xp = array_module(group[0])
            one = len(group) == 1 and group[0].flags.c_contiguous
            flat = group[0] if one else xp.concatenate([a.ravel() for a in group])
            if flat.size == 0:
                continue
            if _is_cupy(flat) and not self.cuda_aware:
                host = flat.get()
                self._comm.Bcast(host, root=root)
                flat.set(host)
            else:
                if _is_cupy(flat):
                    _synchronize(flat)
                self._comm.Bcast(flat, root=root)
            if one:
                continue
            n = 0
            for a in group:
                a[...] = flat[n : n + a.size].reshape(a.shape)
                n += a.size

    def bcast_solver_states(self, solver: Any, root: int = 0) -> None:
        """Gives every rank's solver ``root``'s states (moments, step counts, learning rate).

        Call it with :meth:`bcast_parameters` after loading a checkpoint (e.g.
        ``solver.load_states(path)`` on ``root`` only), so that every rank
        continues exactly as ``root`` would. Goes through the solver's own
        ``save_states``/``load_states`` archive (see :mod:`hodiff.solvers`), so
        it works for every solver; the solvers must have the same parameter
        names on every rank.
        """
        self._check_root("bcast_solver_states", root)
        for method in ("save_states", "load_states"):
            if not callable(getattr(solver, method, None)):
                raise TypeError(
                    f"bcast_solver_states: solver must have {method}(path) (a hodiff.solvers "
                    f"solver), got {type(solver).__name__}"
                )
        if self.size == 1:
            return
        with tempfile.TemporaryDirectory(prefix="hodiff-states-") as tmp:
            path = os.path.join(tmp, "states.npz")
            blob = None
            if self.rank == root:
                solver.save_states(path)
                with open(path, "rb") as f:
                    blob = f.read()
            blob = self._comm.bcast(blob, root=root)
            error = None
            if self.rank != root:
                with open(path, "wb") as f:
                    f.write(blob)
                try:
                    solver.load_states(path)
                except (ValueError, TypeError, KeyError) as e:
                    error = f"{type(e).__name__}: {e}"
        errors = self._comm.allgather(error)  # every rank raises, none is left waiting
        for r, message in enumerate(errors):
            if message is not None:
                raise ValueError(
                    f"bcast_solver_states: rank {r} cannot take rank {root}'s states: {message}"
                )

    def check_parameters(self, params: Any, root: int = 0, atol: float = 0.0) -> None:
        """Debug check: raises RuntimeError on every rank if some parameter differs from root's.

        Compares names, shapes and dtypes, then every value against ``root``'s
        (exactly with ``atol=0``; NaNs in the same places agree). The error
        names the parameter, the ranks and the largest difference. Costs one
        broadcast of all parameters.
        """
        items = _named(params, "check_parameters")
        self._check_root("check_parameters", root)
        self._check_same("check_parameters", [(n, v.shape, v.dtype) for n, v in items])
        if self.size == 1:
            return
        mine = [v.d for _, v in items]
        theirs = [_to_numpy(a).copy() for a in mine]
        self._bcast(theirs, root)
        bad: list[tuple[str, float]] = []
        for (name, _), a, r in zip(items, mine, theirs, strict=True):
            a = _to_numpy(a)
            if np.array_equal(a, r, equal_nan=a.dtype.kind == "f"):
                continue
            with np.errstate(invalid="ignore"):
                diff = np.abs(a.astype(np.float64) - r.astype(np.float64))
            diff[np.isnan(a) & np.isnan(r)] = 0.0
            worst = float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))) if diff.size else 0.0
            if worst > atol:
                bad.append((name, worst))
        reports = self._comm.allgather(bad)
        lines = [
            f"  {name!r}: rank {r} differs from rank {root} by up to {worst:.3g}"
            for r, rep in enumerate(reports)
            for name, worst in rep
        ]
        if lines:
            raise RuntimeError(
                "check_parameters: the parameters differ between ranks (atol="
                f"{atol}):\n" + "\n".join(lines[:20])
            )

    # ------------------------------------------------------------ the reverse pass
    def backward(self, loss: Variable, params: Any) -> None:
        """Reverse pass from ``loss``; afterwards each parameter's ``.g`` is the mean over ranks.

        Runs ``loss``'s plain reverse pass (accumulating into ``.g`` as
        ``loss.backward()`` does) and all-reduces the gradients to their mean
        over the ranks, in buckets, each launched without blocking as soon as
        its parameters' gradients are final, in the same fixed order on every
        rank, overlapping the rest of the pass. A parameter this rank's pass
        does not reach contributes its current ``.g`` (zeros after
        ``zero_grad``). The mean is taken of the whole ``.g``: gradients
        accumulated by local ``backward()`` calls before it are averaged too.

        With a local loss that is the mean over this rank's share of the batch,
        and equal shares, the result is the gradient of the full-batch mean:
        what one process would get, up to floating-point rounding.

        Args:
            loss: the output to differentiate (seeded with ones).
            params: a dict name -> Variable or a list of Variables: the same
                list, in the same order, on every rank. Parameters with
                ``need_grad=False`` are skipped.
        """
        if not isinstance(loss, Variable):
            raise TypeError(f"backward: loss must be a hodiff.Variable, got {type(loss).__name__}")
        items = _named(params, "backward")
        if self._broken:
            raise RuntimeError(self._broken)
        if self.debug:
            self.check_parameters(params)
        wanted = [v for _, v in items if v.need_grad]
        if self.size == 1:
            _check_distinct(items)
            for _ in iter_grads(loss, wanted):
                pass
            for v in wanted:
                v.g  # noqa: B018 - materializes zeros for parameters the pass did not reach
            return
        plan = self._plan
        if plan is None or not plan.matches(wanted):
            _check_distinct(items)
            plan = self._plan = _Plan(wanted, self.bucket_size, self.cuda_aware)
            names = {v: n for n, v in items}
            plan.meta = [
                (
                    f"{names[v]} ({'cupy' if _is_cupy(api.value_of(v)) else 'numpy'})",
                    v.shape,
                    api.grad_dtype(v),
                )
                for v in wanted
            ]
            plan.digest = _digest(plan.meta)
        # every pass, every rank: the buckets agree (one 16-byte all-reduce), before any .g
        self._check_digest("backward", plan.meta, plan.digest)
        launched, seen, active, spent = self._launch_during_pass(loss, wanted, plan)
        t = time.perf_counter()
        self._finish_buckets(plan.buckets, launched, seen, active)
        self.comm_time = spent + time.perf_counter() - t

    def _launch_during_pass(
        self, loss: Variable, wanted: list[Variable], plan: _Plan
    ) -> tuple[int, set[Variable], list[Any], float]:
        """The plain reverse pass from ``loss``, each bucket launched (non-blocking, in the
        plan's order) as soon as its gradients are final.

        Returns the number of buckets launched, the parameters the pass reached, the
        requests in flight and the seconds spent in communication work. A pass that raises
        leaves this communicator refusing further passes.
        """
        buckets = plan.buckets
        where = plan.where
        left = [len(b.members) for b in buckets]
        seen: set[Variable] = set()
        launched = 0
        active: list[Any] = []
        mpi = self._MPI
        clock = time.perf_counter
        spent = 0.0  # seconds in communication work (copies, launches, progress, the wait)
        before_last = 0  # buckets launched before the last gradient arrived
        try:
            for v, g in iter_grads(loss, wanted):
                t = clock()
                before_last = launched
                b, i = where[v]
                buckets[b].put(i, g)
                seen.add(v)
                left[b] -= 1
                while launched < len(buckets) and left[launched] == 0:
                    active.append(self._launch(buckets[launched]))
                    launched += 1
                if active:
                    mpi.Request.Testall(active)  # lets MPI progress the messages in flight
                spent += clock() - t
        except BaseException:
            # Other ranks may have launched more buckets, or fewer: the gradient reductions may
            # be out of step, and another pass could silently mix gradients of different steps.
            self._broken = (
                f"backward: an earlier backward raised after launching {launched} of "
                f"{len(buckets)} gradient buckets; the ranks' gradient reductions may be out of "
                "step, so this communicator refuses to run backward again (restart the job; "
                "python -m mpi4py stops every rank when one raises)"
            )
            self._plan = None  # requests in flight keep their buffers alive
            raise
        self.overlapped_buckets = before_last
        return launched, seen, active, spent

    def _finish_buckets(
        self, buckets: list[_Bucket], launched: int, seen: set[Variable], active: list[Any]
    ) -> None:
        """Launches the buckets still waiting (a parameter the pass did not reach gives its
        current ``.g``), waits for every request, and writes each mean back into ``.g``.
        """
        clock = time.perf_counter
        for b in range(launched, len(buckets)):  # parameters this pass did not reach
            bucket = buckets[b]
            for i, v in enumerate(bucket.members):
                if v not in seen:
                    bucket.put(i, v.g)
            active.append(self._launch(bucket))
        t_wait = clock()
        self._MPI.Request.Waitall(active)
        self.wait_time = clock() - t_wait
        for bucket in buckets:
            bucket.request = None
            bucket.buffer /= self.size
            for i, v in enumerate(bucket.members):
                bucket.take(i, v)

    def _launch(self, bucket: _Bucket) -> Any:
        buf = bucket.buffer
        if _is_cupy(buf):
            _synchronize(buf)
        bucket.request = self._grads.Iallreduce(self._MPI.IN_PLACE, buf, op=self._MPI.SUM)
        return bucket.request

    # ------------------------------------------------------------ checks
    def _check_root(self, where: str, root: int) -> None:
        if not isinstance(root, int | np.integer) or not 0 <= root < self.size:
            raise ValueError(f"{where}: root must be a rank in [0, {self.size}), got {root!r}")

    def _check_meta(self, where: str, meta: list[tuple[str, tuple[int, ...], Any]]) -> None:
        """Raises ValueError on every rank unless all ranks passed the same (name, shape, dtype).

        Always on: without ``debug`` one all-reduce of a 16-byte digest (the full
        comparison, which names the difference, runs only when the digests differ), so a
        mismatch raises instead of letting MPI read past the end of a buffer.
        """
        if self.size == 1:
            return
        if self.debug:
            self._check_same(where, meta)
        else:
            self._check_digest(where, meta, _digest(meta))

    def _check_digest(
        self, where: str, meta: list[tuple[str, tuple[int, ...], Any]], digest: int
    ) -> None:
        """:meth:`_check_meta` with the digest of ``meta`` already made."""
        if self.size == 1:
            return
        buf = np.array([digest, -digest], dtype=np.int64)
        self._comm.Allreduce(self._MPI.IN_PLACE, buf, op=self._MPI.MAX)
        if int(buf[0]) == -int(buf[1]):  # max == min: every rank has the same digest
            return
        self._check_same(where, meta)  # every rank sees the mismatch: all come here, and raise
        raise ValueError(f"{where}: the ranks disagree on the arrays' shapes and dtypes")

    def _check_same(self, where: str, meta: list[tuple[str, tuple[int, ...], Any]]) -> None:
        """Raises ValueError on every rank unless all ranks passed the same (name, shape, dtype)."""
        if self.size == 1:
            return
        mine = [(n, tuple(s), str(np.dtype(d))) for n, s, d in meta]
        digest = hashlib.sha1(repr(mine).encode()).hexdigest()
        digests = self._comm.allgather(digest)
        if all(d == digests[0] for d in digests):
            return
        metas = self._comm.allgather(mine)
        for r in range(1, self.size):
            if metas[r] != metas[0]:
                a, b = metas[0], metas[r]
                if len(a) != len(b):
                    detail = f"rank 0 passed {len(a)} arrays, rank {r} passed {len(b)}"
                else:
                    k = next(k for k in range(len(a)) if a[k] != b[k])
                    detail = (
                        f"item {k}: rank 0 has {a[k][0]!r} of shape {a[k][1]} {a[k][2]}, "
                        f"rank {r} has {b[k][0]!r} of shape {b[k][1]} {b[k][2]}"
                    )
                raise ValueError(f"{where}: the ranks disagree: {detail}")


_OF: dict[int, Communicator] = {}
_SINGLE: Communicator | None = None


def _check_distinct(items: list[tuple[str, Variable]]) -> None:
    seen: set[Variable] = set()
    for name, v in items:
        if v in seen:
            raise ValueError(f"backward: params[{name!r}] is a Variable listed twice")
        seen.add(v)


def _digest(meta: list[tuple[str, tuple[int, ...], Any]]) -> int:
    """A 60-bit digest of (name, shape, dtype) items, the same on every rank for the same items."""
    mine = [(n, tuple(int(d) for d in s), str(np.dtype(t))) for n, s, t in meta]
    return int(hashlib.sha1(repr(mine).encode()).hexdigest()[:15], 16)


def _meta(arrays: list[Any]) -> list[tuple[str, tuple[int, ...], Any]]:
    return [(str(i), a.shape, a.dtype) for i, a in enumerate(arrays)]


def _to_numpy(a: Any) -> np.ndarray:
    return a.get() if _is_cupy(a) else np.asarray(a)


def _synchronize(a: Any) -> None:
    """Waits for the GPU work on ``a`` before MPI reads it (CUDA-aware MPI)."""
    import cupy

    cupy.cuda.get_current_stream().synchronize()
