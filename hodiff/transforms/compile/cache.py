"""Machine code for a program's kernels: LLVM (llvmlite, the ``jit`` extra) and a disk cache.

All kernels of a program are one LLVM module, compiled in one run to an object file for
the host CPU: the IR optimized as ``-O2``, the machine code selected fast (LLVM's ``-O0``
code generator: W4's kernel of 2,192 nodes compiles in 0.3 s instead of 1.3 s, and runs
as fast, its time being the libm calls). The object file is stored under
``$HODIFF_CACHE_DIR`` (default ``~/.cache/hodiff``) as ``<key>.o``, ``key`` the SHA-256 of
the module's text (kernel source, dtypes, shapes), llvmlite's version and the target (triple,
CPU, features): a new process that builds the same program loads it instead of compiling.
A file is a header, the SHA-256 of the code and the code; one that does not match (a
partial write, another version's) is compiled again and replaced (written to a temporary
name, then renamed, so readers never see half a file).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hodiff.transforms.compile import codegen
from hodiff.transforms.compile.codegen import FUNCTIONS, Vector

__all__ = ["Machine", "available", "cache_dir", "load"]

_MAGIC = b"hodiff-kernels-1\n"


def available() -> bool:
    """Whether the code generator (llvmlite) is installed."""
    try:
        import llvmlite.binding  # noqa: F401
    except ImportError:
        return False
    return True


def cache_dir() -> Path:
    """``$HODIFF_CACHE_DIR``, else ``~/.cache/hodiff``."""
    return Path(os.environ.get("HODIFF_CACHE_DIR") or Path.home() / ".cache" / "hodiff")


class Machine:
    """The host's LLVM target, made once per process."""

    _made: Machine | None = None

    def __init__(self) -> None:
        import llvmlite
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libm = _library("libm.so.6", "m")
        if libm:
            llvm.load_library_permanently(libm)  # tanh, log1p, ... for the kernels' calls
        self.llvm = llvm
        self.cpu = llvm.get_host_cpu_name()
        features = llvm.get_host_cpu_features()
        self.features = features.flatten()
        self.vector = _vector(llvm, features)
        self.target = llvm.Target.from_default_triple()
        self.tm = self.target_machine()
        triple = self.target.triple
        self.version = (
            f"llvmlite {llvmlite.__version__} {triple} {self.cpu} {self.features} {self.vector}"
        )

    def target_machine(self) -> Any:
        """A target machine for the host (an execution engine owns the one it is given)."""
        return self.target.create_target_machine(
            cpu=self.cpu, features=self.features, opt=0, codemodel="jitdefault"
        )

    @classmethod
    def get(cls) -> Machine:
        if cls._made is None:
            cls._made = Machine()
        return cls._made

    def compile(self, ir: str) -> bytes:
        """The object code of the module ``ir``, optimized."""
        llvm = self.llvm
        mod = llvm.parse_assembly(ir)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return bytes(self.tm.emit_object(mod))


def _library(soname: str, name: str) -> str | None:
    """A shared library's name for dlopen: ``soname`` if it loads, else the one found."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return ctypes.util.find_library(name)
    return soname


#: libm's functions the kernels call, and their arity (``pow``: the ``**`` operator)
_VECTOR_MATH = {**{f.removeprefix("llvm."): k for f, k in FUNCTIONS.values() if f}, "pow": 2}
_VECTOR_MATH.pop("sqrt")  # an instruction on vectors
_VECTOR_MATH.pop("fabs")


def _vector(llvm: Any, features: Any) -> Vector | None:
    """The vectors of the main loops, decided here: AVX-512 (8 doubles) or AVX2 (4) with
    the functions glibc's libmvec has (the others run lane by lane); None (scalar loops)
    without libmvec or either instruction set.
    """
    if features.get("avx512f"):
        bits, isa = 512, "e"
    elif features.get("avx2") and features.get("fma"):
        bits, isa = 256, "d"
    else:
        return None
    soname = _library("libmvec.so.1", "mvec")
    if soname is None:
        return None
    lib = ctypes.CDLL(soname)
    v = Vector(bits, isa, frozenset())
    have = frozenset(
        sym
        for name, arity in _VECTOR_MATH.items()
        for t in ("double", "float")
        if hasattr(lib, sym := v.symbol(name, t, arity))
    )
    if not have:
        return None
    llvm.load_library_permanently(soname)
    return Vector(bits, isa, have)


class Loaded:
    """Object code loaded into this process: ``address(name)`` of each kernel."""

    def __init__(self, machine: Machine, obj: bytes) -> None:
        llvm = machine.llvm
        tm = machine.target_machine()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()

    def address(self, name: str) -> int:
        return int(self.engine.get_function_address(name))


def _read(path: Path) -> bytes | None:
    """The code stored at ``path`` if the file is whole (its digest matches), else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32
    if not data.startswith(_MAGIC) or len(data) <= head:
        return None
    obj = data[head:]
    return obj if hashlib.sha256(obj).digest() == data[len(_MAGIC) : head] else None


def _write(path: Path, obj: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".o")
        with os.fdopen(fd, "wb") as fh:
            fh.write(_MAGIC + hashlib.sha256(obj).digest() + obj)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full disk: the program runs, the next process compiles again


def load(description: str, ir: Callable[[], str]) -> tuple[Loaded, float, bool]:
    """The module ``ir()`` compiled (or read from the disk cache) and loaded: (code, seconds
    spent compiling or reading, whether it came from the cache). ``description`` determines
    the module given the code generator (its kernels' members, shapes, dtypes, vectors): the
    key hashes it with the generator's source and the machine, so a hit costs no IR.
    """
    t0 = time.perf_counter()
    machine = Machine.get()
    text = f"{machine.version}\n{_generator()}\n{description}"
    key = hashlib.sha256(text.encode()).hexdigest()
    path = cache_dir() / f"{key}.o"
    obj = _read(path)
    hit = obj is not None
    if obj is None:
        obj = machine.compile(ir())
        _write(path, obj)
    return Loaded(machine, obj), time.perf_counter() - t0, hit


@functools.cache
def _generator() -> str:
    """The digest of the code generator's source (a new generator: new keys)."""
    return hashlib.sha256(Path(codegen.__file__).read_bytes()).hexdigest()


def call_kernel(address: int) -> Any:
    """A Python callable of ``void kernel(void **args)`` at ``address``."""
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
