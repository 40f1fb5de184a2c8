"""Machine code for a program's kernels: LLVM (llvmlite, the ``jit`` extra) and a disk cache.

All kernels of a program are one LLVM module, compiled in one run to an object file for
the host CPU: the IR optimized as ``-O2``, the machine code selected fast (LLVM's ``-O0``
code generator: W4's kernel of 2,192 nodes compiles in 0.3 s instead of 1.3 s, and runs
as fast, its time being the libm calls). Where a C compiler
driver links (``cc``), the object is linked into a shared library stored under
``$HODIFF_CACHE_DIR`` (default ``~/.cache/hodiff``) as ``<key>.so``, ``key`` the SHA-256 of
what determines the module (kernels' members, dtypes, shapes, vectors), the generator's
source, llvmlite's version and the host (CPU model and flags, C library): a new process that
builds the same program opens it with ``ctypes`` and never loads LLVM. Without a linker the
object code itself is stored as ``<key>.o`` (its key adds LLVM's target: triple, CPU,
features) and loaded by LLVM. A library is followed by a trailer (a tag and its SHA-256), an
object file preceded by a header (the same); a file that does not match (a partial write,
another version's) is compiled again and replaced (written to a temporary name, then
renamed, so readers never see half a file).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hodiff.transforms.compile import codegen
from hodiff.transforms.compile.codegen import FUNCTIONS, Vector

__all__ = ["Machine", "Shared", "available", "cache_dir", "load"]

_OBJECT = b"hodiff-kernels-2\n"  # the trailer's tag of a stored object file
_SHARED = b"hodiff-shared-1\n"  # the trailer's tag of a stored shared library


def available() -> bool:
    """Whether the code generator (llvmlite) is installed (found, not imported: a process
    whose kernels are all in the disk cache never loads LLVM).
    """
    return importlib.util.find_spec("llvmlite") is not None


def cache_dir() -> Path:
    """``$HODIFF_CACHE_DIR``, else ``~/.cache/hodiff``."""
    return Path(os.environ.get("HODIFF_CACHE_DIR") or Path.home() / ".cache" / "hodiff")


class Machine:
    """The host, made once per process: its identity and vectors read without LLVM (from
    ``/proc/cpuinfo`` where it exists), LLVM's target made on the first compile.
    """

    _made: Machine | None = None

    def __init__(self) -> None:
        libm = _library("libm.so.6", "m")
        self.libraries = [lib for lib in (libm,) if lib]
        flags, model = _cpuinfo()
        self._llvm: Any = None
        if flags is None:  # no /proc/cpuinfo: LLVM's view of the host
            features = self.llvm.get_host_cpu_features()
            flags = frozenset(k for k, on in features.items() if on)
            model = self.llvm.get_host_cpu_name()
        self.vector = _vector(flags, self.libraries)
        self.host = (
            f"llvmlite {_llvmlite_version()} {platform.machine()} {model} "
            f"{' '.join(sorted(flags))} {_libc()}"
        )

    @property
    def llvm(self) -> Any:
        """llvmlite's binding, initialized for the host (loaded on first use)."""
        if self._llvm is None:
            import llvmlite.binding as llvm

            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            for lib in self.libraries:  # tanh, log1p, ... for the kernels' calls
                llvm.load_library_permanently(lib)
            self._llvm = llvm
        return self._llvm

    @functools.cached_property
    def version(self) -> str:
        """LLVM's target: the key's part of code that LLVM loads (an object file)."""
        llvm = self.llvm
        triple = llvm.Target.from_default_triple().triple
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        return f"{self.host} {triple} {cpu} {features} {self.vector}"

    def target_machine(self, reloc: str = "default") -> Any:
        """A target machine for the host (an execution engine owns the one it is given);
        ``reloc="pic"`` for a shared library.
        """
        llvm = self.llvm
        return llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=0,
            reloc=reloc,
            codemodel="default" if reloc == "pic" else "jitdefault",
        )

    @classmethod
    def get(cls) -> Machine:
        if cls._made is None:
            cls._made = Machine()
        return cls._made

    def compile(self, ir: str, reloc: str = "default") -> bytes:
        """The object code of the module ``ir``, optimized."""
        llvm = self.llvm
        tm = self.target_machine(reloc)
        mod = llvm.parse_assembly(ir)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return bytes(tm.emit_object(mod))


def _cpuinfo() -> tuple[frozenset[str] | None, str]:
    """The first CPU's flags and model name in ``/proc/cpuinfo`` (None: no such file)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None, ""
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    flags = fields.get("flags") or fields.get("Features") or ""
    return frozenset(flags.split()), fields.get("model name", "")


def _libc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""


def _llvmlite_version() -> str:
    spec = importlib.util.find_spec("llvmlite")
    if spec is None or spec.origin is None:
        return "none"
    version = Path(spec.origin).with_name("_version.py")
    try:  # the version file's digest: no import of the package
        return hashlib.sha256(version.read_bytes()).hexdigest()[:16]
    except OSError:
        return spec.origin


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


def _vector(flags: frozenset[str], libraries: list[str]) -> Vector | None:
    """The vectors of the main loops, decided here: AVX-512 (8 doubles) or AVX2 (4) with
    the functions glibc's libmvec has (the others run lane by lane); None (scalar loops)
    without libmvec or either instruction set. ``libraries`` gains libmvec.
    """
    if "avx512f" in flags:
        bits, isa = 512, "e"
    elif "avx2" in flags and "fma" in flags:
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
    libraries.append(soname)
    return Vector(bits, isa, have)


class Loaded:
    """Object code loaded into this process by LLVM: ``address(name)`` of each kernel."""

    def __init__(self, machine: Machine, obj: bytes) -> None:
        llvm = machine.llvm
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine.target_machine())
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()

    def address(self, name: str) -> int:
        return int(self.engine.get_function_address(name))


class Shared:
    """A shared library's bytes opened in this process (from a private copy, unlinked once
    open, so a later change of the cache's file never reaches loaded code):
    ``address(name)`` of each kernel.
    """

    def __init__(self, library: bytes) -> None:
        fd, tmp = tempfile.mkstemp(prefix="hodiff-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(library)
            self.lib = ctypes.CDLL(tmp)
        finally:
            os.unlink(tmp)

    def address(self, name: str) -> int:
        return int(ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value or 0)


def _opened(library: bytes | None) -> Shared | None:
    """``library`` opened (None: none, or the system refuses it, e.g. a ``noexec`` temporary
    directory: the object file's path is taken instead).
    """
    if library is None:
        return None
    try:
        return Shared(library)
    except OSError:
        return None


def _sealed(data: bytes, tag: bytes) -> bytes:
    """``data`` as stored: followed by ``tag`` (the kind of code) and its SHA-256."""
    return data + tag + hashlib.sha256(data).digest()


def _read(path: Path, tag: bytes) -> bytes | None:
    """The code stored at ``path`` (:func:`_sealed` with ``tag``) if the file is whole (its
    digest matches), else None.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    tail = len(tag) + 32
    if len(data) <= tail or data[-tail:-32] != tag:
        return None
    code = data[:-tail]
    return code if hashlib.sha256(code).digest() == data[-32:] else None


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full disk: the program runs, the next process compiles again


@functools.cache
def _linker() -> str | None:
    """The C compiler driver that links shared libraries (``$CC``, ``cc``, ``gcc``)."""
    for name in (os.environ.get("CC"), "cc", "gcc"):
        if name and (found := shutil.which(name)):
            return found
    return None


def _link(obj: bytes, libraries: list[str]) -> bytes | None:
    """``obj`` linked into a shared library needing ``libraries`` (None: no linker, or it
    failed).
    """
    cc = _linker()
    if cc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="hodiff-link-") as d:
        o, so = Path(d) / "k.o", Path(d) / "k.so"
        o.write_bytes(obj)
        libs = [f"-l:{lib}" if "/" not in lib else lib for lib in libraries]
        try:
            subprocess.run(
                [cc, "-shared", "-o", str(so), str(o), *libs], capture_output=True, check=True
            )
            return so.read_bytes()
        except (OSError, subprocess.CalledProcessError):
            return None


def load(description: str, ir: Callable[[], str]) -> tuple[Any, float, bool]:
    """The module ``ir()`` compiled (or read from the disk cache) and loaded: (code with
    ``address(name)``, seconds spent compiling or reading, whether it came from the cache).
    ``description`` determines the module given the code generator (its kernels' members,
    shapes, dtypes, vectors): the key hashes it with the generator's source and the host, so
    a hit costs no IR. A shared library is looked for first (a hit loads no LLVM); a miss
    builds one where a linker works (a failed link: an object file), else an object file.
    """
    t0 = time.perf_counter()
    machine = Machine.get()
    text = f"shared\n{machine.host}\n{_generator()}\n{description}"
    path = cache_dir() / f"{hashlib.sha256(text.encode()).hexdigest()}.so"
    if _linker() is not None:  # a shared library: a hit loads no LLVM
        library = _read(path, _SHARED)
        hit = library is not None
        if library is None:
            library = _link(machine.compile(ir(), reloc="pic"), machine.libraries)
            if library is not None:
                _write(path, _sealed(library, _SHARED))
        shared = _opened(library)
        if shared is not None:
            return shared, time.perf_counter() - t0, hit
    text = f"object\n{machine.version}\n{_generator()}\n{description}"
    opath = cache_dir() / f"{hashlib.sha256(text.encode()).hexdigest()}.o"
    obj = _read(opath, _OBJECT)
    hit = obj is not None
    if obj is None:
        obj = machine.compile(ir())
        _write(opath, _sealed(obj, _OBJECT))
    return Loaded(machine, obj), time.perf_counter() - t0, hit


@functools.cache
def _generator() -> str:
    """The digest of the code generator's source (a new generator: new keys)."""
    return hashlib.sha256(Path(codegen.__file__).read_bytes()).hexdigest()


def call_kernel(address: int) -> Any:
    """A Python callable of ``void kernel(void **args)`` at ``address``."""
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
