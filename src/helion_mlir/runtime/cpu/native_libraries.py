"""Shared libraries of JIT-compiled code: linked from the JIT's object file, loaded from verified bytes.

The ExecutionEngine keeps the object file it compiled a module to (position-independent when
it was created with ``enable_pic=True``, as :func:`~helion_mlir.runtime.cpu.engine.compile_module`
does). ``iree-lld`` (shipped with ``iree-base-compiler``) links it into a shared library with
``-z defs``: every symbol the code calls must be found, at link time, in the libraries the JIT
resolved it from in this process (libc, libm, libmvec, libgcc_s, and the OpenMP entry points
below), or the link fails and the code is not kept; the library names each of them
(``DT_NEEDED``) by its soname.

Parallel loops call the ``__kmpc_*`` entry points of :mod:`.openmp`, which the JIT compiles
in-process. For libraries they are compiled once into a library of their own
(:func:`openmp_library_object`, :func:`start_openmp_library`), its ``pthread`` key set when it
is loaded; a kernel's library needs
it by its soname, so the dynamic loader binds the kernel to the copy this process loaded first.

A library is loaded from bytes the caller verified: they are written to an anonymous
in-memory file (``memfd_create``) and ``dlopen``-ed through ``/proc/self/fd``, so no file on
disk can change between the check and the load. The descriptor stays open as long as the
library is loaded: ``dlopen`` recognizes a loaded library by its path, and a reused
descriptor number would otherwise name a library loaded before.
"""

from __future__ import annotations

import _ctypes  # ctypes's own module: dlclose
import ctypes
import functools
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from ...mlir_context import mlir_session
from .openmp import AFTER_FORK, KEY_GLOBAL, mapped_libraries, records_key, shim_text

__all__ = ["LinkError", "LoadedLibrary", "link_object", "object_file", "openmp_library_object", "start_openmp_library",
           "system_libraries"]

log = logging.getLogger(__name__)

# Libraries of the process the JIT's code may call into (libmvec: rewrites.vector_math; libgcc_s:
# compiler runtime helpers).
_SYSTEM_LIBRARIES = ("libc.so.6", "libm.so.6", "libmvec.so.1", "libgcc_s.so.1")
_LINK_SECONDS = 60


class LinkError(Exception):
    """The object file could not be linked into a library (an unresolved symbol, no linker)."""


@functools.cache
def _linker() -> Path | None:
    """``iree-lld`` of the installed ``iree-base-compiler``, or None."""
    try:
        spec = importlib.util.find_spec("iree.compiler")
    except ModuleNotFoundError:
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / "_mlir_libs" / "iree-lld"
        if os.access(path, os.X_OK):
            return path
    return None


@functools.cache
def system_libraries() -> tuple[str, ...]:
    """The libraries a kernel's code may call besides ours: glibc's libc, libm and libmvec and
    libgcc_s, from the directory of the libc this process runs on."""
    libc = next((p for p in mapped_libraries() if os.path.basename(p).startswith("libc.so")), None)
    if libc is None:
        return ()
    directory = os.path.dirname(libc)
    return tuple(path for name in _SYSTEM_LIBRARIES if os.path.exists(path := os.path.join(directory, name)))


def link_object(object_bytes: bytes, soname: str, libraries: list[str | bytes]) -> bytes:
    """``object_bytes`` linked into a shared library named ``soname`` that needs ``libraries``
    (paths, or the bytes of a library of ours, given by its soname); raises :class:`LinkError`
    naming what is missing."""
    linker = _linker()
    if linker is None:
        raise LinkError("iree-lld (iree-base-compiler) is not installed")
    with tempfile.TemporaryDirectory(prefix="helion-mlir-link-") as work:
        directory = Path(work)
        (directory / "code.o").write_bytes(object_bytes)
        inputs = []
        for index, library in enumerate(libraries):
            if isinstance(library, bytes):
                path = directory / f"needed{index}.so"
                path.write_bytes(library)
                library = str(path)
            inputs.append(library)
        command = [str(linker), "-flavor", "gnu", "-shared", "-z", "defs", "--as-needed", "--hash-style=gnu",
                   "-soname", soname, "-o", str(directory / "code.so"), str(directory / "code.o"), *inputs]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=_LINK_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise LinkError(f"iree-lld did not run: {err}") from None
        if done.returncode != 0:
            raise LinkError(done.stderr.strip() or f"iree-lld exited with {done.returncode}")
        return (directory / "code.so").read_bytes()


class LoadedLibrary:
    """A library loaded from verified bytes (OSError when the dynamic loader refuses them);
    unloaded when the last reference to it goes."""

    def __init__(self, data: bytes, name: str) -> None:
        self._fd = os.memfd_create(name[:200], os.MFD_CLOEXEC)  # the kernel takes names of up to 249 bytes
        try:
            unwritten = memoryview(data)
            while unwritten:
                unwritten = unwritten[os.write(self._fd, unwritten):]
            self.handle = ctypes.CDLL(f"/proc/self/fd/{self._fd}")
        except BaseException:
            os.close(self._fd)
            raise
        self.nbytes = len(data)

    def address(self, symbol: str) -> int:
        """The address of ``symbol``, or 0 when the library does not define it."""
        try:
            return ctypes.cast(getattr(self.handle, symbol), ctypes.c_void_p).value or 0
        except AttributeError:
            return 0

    def __del__(self) -> None:
        # Not loaded (the loader refused it), or the interpreter shutting down: nothing to undo.
        if "handle" not in self.__dict__ or sys.is_finalizing():
            return
        _ctypes.dlclose(self.handle._handle)
        os.close(self._fd)


def object_file(engine: ExecutionEngine) -> bytes:
    """The object file the JIT compiled ``engine``'s module to (after its first lookup)."""
    with tempfile.NamedTemporaryFile(suffix=".o") as dump:
        engine.dump_to_object_file(dump.name)
        return Path(dump.name).read_bytes()


def openmp_library_object() -> bytes:
    """The object file of the OpenMP entry points, their ``pthread`` key read from a global."""
    with mlir_session():
        engine = ExecutionEngine(ir.Module.parse(shim_text(None)), opt_level=2, enable_pic=True)
        engine.initialize()
        engine.raw_lookup(AFTER_FORK)  # machine code is generated at the first lookup
        return object_file(engine)


_OPENMP_LOCK = threading.Lock()
_OPENMP: dict[str, LoadedLibrary] = {}


def start_openmp_library(data: bytes, soname: str) -> LoadedLibrary:
    """Load the entry points' library ``data`` once per process: its ``pthread`` key is set (the
    process's, shared with the JIT's copy), and the forking thread of a forked child runs
    parallel loops alone, as with the JIT's copy (:mod:`.openmp`)."""
    with _OPENMP_LOCK:
        found = _OPENMP.get(soname)
        if found is not None:
            return found
        library = LoadedLibrary(data, soname)
        ctypes.c_uint.in_dll(library.handle, KEY_GLOBAL).value = records_key()
        after_fork = ctypes.CFUNCTYPE(None)(library.address(AFTER_FORK))
        os.register_at_fork(after_in_child=after_fork)
        _OPENMP[soname] = library
        log.debug("OpenMP entry points loaded from the native cache (%s)", soname)
        return library

