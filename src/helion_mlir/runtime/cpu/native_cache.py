"""Compiled native code on disk: a new process runs a module compiled before without lowering
or JIT-compiling it again.

An entry is the shared library of one compiled function (:mod:`.native_libraries`) with what
a :class:`~helion_mlir.runtime.cpu.engine.CompiledFunction` needs besides the code (parameters,
results, the arguments results are written into), in one file named by its key. The key is a
SHA-256 of everything that decides the code: the module text, function name, pipeline and its
options (threads among them), the CPU (torch's capability, the features left out, and the
processor's model and flags), the setting of every pass-pipeline tunable of the process, the
versions of torch-mlir's MLIR/LLVM, torch and glibc, and the package's own source files (each
by path, size, modification time and inode: an edited or reinstalled package misses). Parallel
code also needs the library of the OpenMP entry points built over this process's OpenMP
runtime (named by a hash of all that and the runtime's file). Checked-mode code calls back into Python and is not kept, nor is a compile whose IR
is being dumped (``HELION_MLIR_DUMP_PIPELINE``).

Entries live in the package's cache directory (:class:`~helion_mlir.caches.DiskCache`, kind
``native``: written atomically, verified by their checksum before loading, bounded in size,
``HELION_MLIR_CACHE=0`` disables them); a truncated, corrupt or foreign file is a miss and the
function is compiled again. Only verified bytes are ever loaded
(:class:`.native_libraries.LoadedLibrary`).

A miss also links the JIT's code into a library (one ``iree-lld`` process), before the
compiled function is returned: nothing of it runs behind the caller's back (a tuner timing
the function, a process about to exit).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass

import torch
from torch_mlir.execution_engine import ExecutionEngine

from .native_libraries import (
    LinkError,
    LoadedLibrary,
    link_object,
    object_file,
    openmp_library_object,
    start_openmp_library,
    system_libraries,
)
from .openmp import loaded_runtime
from ...caches import DiskCache, compiler_fingerprint, stat_line
from ..params import SCALAR_KINDS, Param, ScalarParam, TensorParam

__all__ = ["NativeFunction", "entry_key", "load", "store"]

log = logging.getLogger(__name__)

#: Part of every key; a change of what an entry holds changes it.
_LAYOUT = "native 2"
# Memory a loaded library holds beyond its bytes (its link map, mappings rounded to pages).
_LIBRARY_BASE_BYTES = 64 * 1024
_NATIVE = DiskCache("native", durable=True)
_OPENMP = DiskCache("openmp", durable=True)


def _cpu_identity() -> str:
    """The processor's vendor, family, model and flags: what LLVM picks its host CPU and
    features from."""
    wanted = ("vendor_id", "cpu family", "model", "stepping", "flags")
    found: dict[str, str] = {}
    with open("/proc/cpuinfo") as info:
        for line in info:
            name, _, value = line.partition(":")
            name = name.strip()
            if name in wanted and name not in found:
                found[name] = value.strip()
            if not line.strip() and found:  # the first processor is enough
                break
    return repr(sorted(found.items()))


@functools.cache
def _environment() -> str:
    """What decides the code besides the module and its options, constant in a process."""
    return "\n".join([_LAYOUT, _cpu_identity(), os.confstr("CS_GNU_LIBC_VERSION") or "", compiler_fingerprint()])


@functools.cache
def _tunable_modules() -> tuple[object, ...]:
    """The modules of the JIT and its pipelines (all imported with this one)."""
    names = sorted(n for n in sys.modules if n.startswith(_TUNABLE_PREFIXES))
    return tuple(sys.modules[n] for n in names)


_TUNABLE_PREFIXES = ("helion_mlir.runtime.cpu.",)


def _tunables() -> str:
    """The module-level settings (upper-case numbers, strings) of the JIT and its pipelines, as
    they are now: tests and users may change them within a process."""
    return "\n".join(
        f"{module.__name__}.{name}={value!r}"  # type: ignore[attr-defined]
        for module in _tunable_modules()
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, (bool, int, float, str))
    )


def entry_key(module_text: str, func_name: str, options: str) -> str:
    """The key of the code of ``@func_name`` in ``module_text`` compiled with ``options`` (the
    pipeline, its options and the CPU features, as the caller writes them)."""
    digest = hashlib.sha256()
    for part in (_environment(), _tunables(), func_name, options, module_text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class NativeFunction:
    """A compiled function loaded from the cache: its library and what calling it needs."""

    library: LoadedLibrary
    entry_address: int
    params: tuple[Param, ...]
    results: tuple[TensorParam, ...]
    held_by: tuple[int | None, ...]
    nbytes: int
    load_seconds: float


def _param_record(param: Param) -> dict[str, object]:
    if isinstance(param, TensorParam):
        return {"type": param.mlir_type, "dims": list(param.dims), "dtype": str(param.dtype).removeprefix("torch.")}
    return {"type": param.mlir_type}


def _param(record: dict[str, object]) -> Param:
    mlir_type = str(record["type"])
    if "dims" not in record:
        ctype, accepted = SCALAR_KINDS[mlir_type]
        return ScalarParam(mlir_type, ctype, accepted)
    dtype = getattr(torch, str(record["dtype"]))
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{record['dtype']!r} is not a torch dtype")
    dims = tuple(None if d is None else int(d) for d in record["dims"])  # type: ignore[union-attr]
    return TensorParam(mlir_type, dims, dtype)


@functools.cache
def _openmp_soname() -> str:
    """The OpenMP entry points' library of this environment (their module is part of the
    package's source) over this process's OpenMP runtime."""
    runtime = loaded_runtime()
    identity = f"{_environment()}\n{stat_line(runtime) if os.path.isabs(runtime) else runtime}"
    return f"libhelion_mlir_omp_{hashlib.sha256(identity.encode()).hexdigest()[:24]}.so"


def load(key: str, func_name: str) -> NativeFunction | None:
    """The function cached under ``key``, loaded, or None (a miss)."""
    started = time.perf_counter()
    found = _NATIVE.read(key)
    if found is None:
        return None
    header, data = found
    try:
        if header["func_name"] != func_name:
            log.debug("native cache: entry %s holds another function; compiling again", key)
            return None
        if header["openmp"] is not None:
            if header["openmp"] != _openmp_soname():  # compiled beside another OpenMP runtime
                return None
            openmp = _OPENMP.read(str(header["openmp"]))
            if openmp is None:
                return None
            start_openmp_library(openmp[1], str(header["openmp"]))
        library = LoadedLibrary(data, f"{func_name}-{key[:16]}")
        entry = library.address(f"_mlir__mlir_ciface_{func_name}")
        if not entry:
            log.debug("native cache: entry %s has no entry point for @%s", key, func_name)
            return None
        function = NativeFunction(
            library,
            entry,
            tuple(_param(p) for p in header["params"]),  # type: ignore[union-attr]
            tuple(_param(p) for p in header["results"]),  # type: ignore[misc,union-attr]
            tuple(header["held_by"]),  # type: ignore[arg-type]
            library.nbytes + _LIBRARY_BASE_BYTES,
            time.perf_counter() - started,
        )
    except (KeyError, TypeError, ValueError, OSError) as err:
        log.debug("native cache: entry %s could not be loaded (%s); compiling again", key, err)
        return None
    log.debug("@%s loaded from the native cache in %.1f ms", func_name, function.load_seconds * 1e3)
    return function


def store(key: str, func_name: str, engine: ExecutionEngine, params: tuple[Param, ...],
          results: tuple[TensorParam, ...], held_by: tuple[int | None, ...], uses_openmp: bool) -> None:
    """Link the object file ``engine`` compiled ``@func_name`` to into a library and keep it under
    ``key``; a function that does not link is not kept (logged at debug level)."""
    started = time.perf_counter()
    try:
        needed: list[str | bytes] = list(system_libraries())
        openmp = _openmp_soname() if uses_openmp else None
        if openmp is not None:
            needed.append(_openmp_library(openmp))
        library = link_object(object_file(engine), f"{func_name}-{key[:16]}.so", needed)
        header: dict[str, object] = {
            "func_name": func_name, "params": [_param_record(p) for p in params],
            "results": [_param_record(r) for r in results], "held_by": list(held_by), "openmp": openmp}
        _NATIVE.write([(key, header, library)])
    except (LinkError, OSError, RuntimeError) as err:  # RuntimeError: the engine kept no object file
        log.debug("native cache: @%s not kept: %s", func_name, err)
        return
    log.debug("@%s kept in the native cache in %.1f ms", func_name, (time.perf_counter() - started) * 1e3)


_OPENMP_WRITE_LOCK = threading.Lock()


def _openmp_library(soname: str) -> bytes:
    """The OpenMP entry points' library (read from the cache, else compiled and kept)."""
    with _OPENMP_WRITE_LOCK:
        found = _OPENMP.read(soname)
        if found is not None:
            return found[1]
        runtime = loaded_runtime()
        library = link_object(openmp_library_object(), soname, [*system_libraries(), runtime])
        _OPENMP.write([(soname, {}, library)])
        return library
