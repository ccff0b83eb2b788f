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

Safety. A file is written whole to a temporary name in the cache directory, flushed to disk,
then renamed over the entry (``os.replace``), so concurrent processes each leave one complete
entry. Before loading, the SHA-256 of the file's contents, written at its start, is checked;
a truncated, corrupt or foreign file is a miss (logged at debug level) and the function is
compiled again. Only verified bytes are ever loaded (:class:`.native_libraries.LoadedLibrary`).

Size. After each write, the least recently used entries (by modification time, renewed at
every hit) are removed until the directory holds at most ``HELION_MLIR_NATIVE_CACHE_BYTES``
(1 GiB by default).

Settings, read at each compile: ``HELION_MLIR_NATIVE_CACHE=0`` disables the cache,
``HELION_MLIR_NATIVE_CACHE_DIR`` relocates it (by default ``helion_mlir/native`` in Helion's
cache directory: ``HELION_CACHE_DIR``, else torch's cache directory).

A miss also links the JIT's code into a library (one ``iree-lld`` process), before the
compiled function is returned: nothing of it runs behind the caller's back (a tuner timing
the function, a process about to exit).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from helion.autotuner.local_cache import get_helion_cache_dir
from torch_mlir import _mlir_libs
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
from ..params import SCALAR_KINDS, Param, ScalarParam, TensorParam

__all__ = [
    "BYTES_VARIABLE",
    "DIRECTORY_VARIABLE",
    "ENABLE_VARIABLE",
    "NativeFunction",
    "cache_directory",
    "entry_key",
    "load",
    "store",
]

log = logging.getLogger(__name__)

ENABLE_VARIABLE = "HELION_MLIR_NATIVE_CACHE"
DIRECTORY_VARIABLE = "HELION_MLIR_NATIVE_CACHE_DIR"
BYTES_VARIABLE = "HELION_MLIR_NATIVE_CACHE_BYTES"
DEFAULT_BYTES = 2**30
#: Written at the start of every entry; a change of the layout changes it.
_MAGIC = b"HMNATIV1"
_DIGEST = 32
_SUFFIX = ".entry"
# Memory a loaded library holds beyond its bytes (its link map, mappings rounded to pages).
_LIBRARY_BASE_BYTES = 64 * 1024
# A temporary file older than this was left by a process that died while writing it.
_STALE_TEMPORARY_SECONDS = 3600


def cache_directory() -> Path | None:
    """Where entries are kept, or None when the cache is disabled."""
    if os.environ.get(ENABLE_VARIABLE, "").strip().lower() in ("0", "false", "no", "off"):
        return None
    given = os.environ.get(DIRECTORY_VARIABLE, "").strip()
    if given:
        return Path(given)
    return get_helion_cache_dir() / "helion_mlir" / "native"


def _limit() -> int:
    given = os.environ.get(BYTES_VARIABLE, "").strip()
    try:
        return int(given) if given else DEFAULT_BYTES
    except ValueError:
        raise ValueError(f"{BYTES_VARIABLE}={given!r}: write the cache's size limit in bytes") from None


def _stat_line(path: str) -> str:
    found = os.stat(path)
    return f"{path} {found.st_size} {found.st_mtime_ns} {found.st_ino}"


def _files(directory: str, suffix: str) -> list[str]:
    """The files under ``directory`` whose names end with ``suffix``, sorted."""
    found = []
    for root, _, names in os.walk(directory):
        found += [os.path.join(root, name) for name in names if name.endswith(suffix)]
    return sorted(found)


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
    package = str(Path(__file__).resolve().parents[2])  # helion_mlir/
    mlir_libraries = os.path.dirname(os.path.abspath(_mlir_libs.__file__))
    parts = [
        _MAGIC.decode(),
        _cpu_identity(),
        torch.__version__,
        os.confstr("CS_GNU_LIBC_VERSION") or "",
        *(_stat_line(p) for p in _files(mlir_libraries, ".so")),
        *(_stat_line(p) for p in _files(package, ".py")),
    ]
    return "\n".join(parts)


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


def _entry_bytes(header: dict[str, object], library: bytes) -> bytes:
    header_bytes = json.dumps(header, sort_keys=True).encode()
    body = len(header_bytes).to_bytes(8, "little") + header_bytes + library
    return _MAGIC + hashlib.sha256(body).digest() + body


def _read_entry(path: Path) -> tuple[dict[str, object], bytes] | None:
    """The header and library bytes of the entry at ``path``, or None when it is missing or
    does not verify."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    found = _parse_entry(data)
    if found is None:
        log.debug("native cache: %s does not verify (truncated or corrupt); compiling again", path)
    return found


def _parse_entry(data: bytes) -> tuple[dict[str, object], bytes] | None:
    """The header and library bytes of an entry's ``data``, or None when its checksum is wrong."""
    start = len(_MAGIC) + _DIGEST
    if data[: len(_MAGIC)] != _MAGIC or hashlib.sha256(data[start:]).digest() != data[len(_MAGIC) : start]:
        return None
    length = int.from_bytes(data[start : start + 8], "little")
    return json.loads(data[start + 8 : start + 8 + length]), data[start + 8 + length :]


@functools.cache
def _openmp_soname() -> str:
    """The OpenMP entry points' library of this environment (their module is part of the
    package's source) over this process's OpenMP runtime."""
    runtime = loaded_runtime()
    identity = f"{_environment()}\n{_stat_line(runtime) if os.path.isabs(runtime) else runtime}"
    return f"libhelion_mlir_omp_{hashlib.sha256(identity.encode()).hexdigest()[:24]}.so"


def load(key: str, func_name: str) -> NativeFunction | None:
    """The function cached under ``key``, loaded, or None (a miss)."""
    directory = cache_directory()
    if directory is None:
        return None
    started = time.perf_counter()
    path = directory / f"{key}{_SUFFIX}"
    try:
        found = _read_entry(path)
        if found is None:
            return None
        header, data = found
        if header["key"] != key or header["func_name"] != func_name:
            log.debug("native cache: %s holds another function; compiling again", path)
            return None
        if header["openmp"] is not None:
            if header["openmp"] != _openmp_soname():  # compiled beside another OpenMP runtime
                return None
            openmp = _read_entry(directory / f"{header['openmp']}{_SUFFIX}")
            if openmp is None:
                return None
            start_openmp_library(openmp[1], str(header["openmp"]))
        library = LoadedLibrary(data, f"{func_name}-{key[:16]}")
        entry = library.address(f"_mlir__mlir_ciface_{func_name}")
        if not entry:
            log.debug("native cache: %s has no entry point for @%s", path, func_name)
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
        log.debug("native cache: %s could not be loaded (%s); compiling again", path, err)
        return None
    try:
        os.utime(path)  # most recently used
    except OSError:
        pass
    log.debug("@%s loaded from the native cache in %.1f ms", func_name, function.load_seconds * 1e3)
    return function


def store(key: str, func_name: str, engine: ExecutionEngine, params: tuple[Param, ...],
          results: tuple[TensorParam, ...], held_by: tuple[int | None, ...], uses_openmp: bool) -> None:
    """Link the object file ``engine`` compiled ``@func_name`` to into a library and keep it under
    ``key``; a function that does not link is not kept (logged at debug level)."""
    directory = cache_directory()
    if directory is None:
        return
    limit = _limit()
    started = time.perf_counter()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        needed: list[str | bytes] = list(system_libraries())
        openmp = _openmp_soname() if uses_openmp else None
        if openmp is not None:
            needed.append(_openmp_library(directory, openmp))
        library = link_object(object_file(engine), f"{func_name}-{key[:16]}.so", needed)
        header = {"key": key, "func_name": func_name, "params": [_param_record(p) for p in params],
                  "results": [_param_record(r) for r in results], "held_by": list(held_by), "openmp": openmp}
        _replace(directory / f"{key}{_SUFFIX}", _entry_bytes(header, library))
        _evict(directory, limit)
    except (LinkError, OSError, RuntimeError) as err:  # RuntimeError: the engine kept no object file
        log.debug("native cache: @%s not kept: %s", func_name, err)
        return
    log.debug("@%s kept in the native cache in %.1f ms", func_name, (time.perf_counter() - started) * 1e3)


_OPENMP_WRITE_LOCK = threading.Lock()


def _openmp_library(directory: Path, soname: str) -> bytes:
    """The OpenMP entry points' library (read from the cache, else compiled and kept)."""
    with _OPENMP_WRITE_LOCK:
        found = _read_entry(directory / f"{soname}{_SUFFIX}")
        if found is not None:
            return found[1]
        runtime = loaded_runtime()
        library = link_object(openmp_library_object(), soname, [*system_libraries(), runtime])
        _replace(directory / f"{soname}{_SUFFIX}", _entry_bytes({"key": soname, "openmp": None}, library))
        return library


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temporary file of the same directory, flushed,
    renamed over it."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _evict(directory: Path, limit: int) -> None:
    """Remove the least recently used entries beyond ``limit`` bytes, and temporary files
    that writers which died left behind."""
    entries = []
    now = time.time()
    for path in directory.iterdir():
        try:
            found = path.stat()
        except OSError:
            continue
        if path.name.endswith(".tmp"):
            if now - found.st_mtime > _STALE_TEMPORARY_SECONDS:
                path.unlink(missing_ok=True)
        elif path.name.endswith(_SUFFIX):
            entries.append((found.st_mtime, found.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size
        log.debug("native cache: evicted %s", path.name)
