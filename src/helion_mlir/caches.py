"""The package's caches: bounded ones in memory, and entries on disk that later processes read.

In memory. Imports, compiled functions and compiled kernels are cached for the life of the
process; a converter or an autotuner that meets thousands of kernels must not keep every one
of them (and its JIT-compiled code) forever, so each cache keeps its most recently used
entries only, within a capacity (:class:`LRUCache`). Entries of the caches of compiled code
differ in size by far more than their count says, so those caches weigh each entry in bytes.

On disk. What is costly to compute and decided entirely by a key (compiled native code, an
ATen op lowered by torch-mlir) is also kept in one directory shared by all processes
(:class:`DiskCache`, one per kind of entry). An entry is one file named by its kind and key:
a magic number, the SHA-256 of the rest, a JSON header and the payload. It is written whole to
a temporary name in the directory, then renamed over the entry (``os.replace``), so
concurrent writers each leave one complete entry; a truncated, corrupt or foreign file fails
its checksum and is a miss. After each write the least recently used entries (by
modification time, renewed at every hit) go until the directory holds at most
``HELION_MLIR_CACHE_BYTES`` (1 GiB by default). Read at each use: ``HELION_MLIR_CACHE=0``
disables it, ``HELION_MLIR_CACHE_DIR`` relocates it (by default ``helion_mlir`` in Helion's
cache directory: ``HELION_CACHE_DIR``, else torch's cache directory).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

import torch
import torch_mlir
from helion.autotuner.local_cache import get_helion_cache_dir

__all__ = [
    "BYTES_VARIABLE",
    "DIRECTORY_VARIABLE",
    "ENABLE_VARIABLE",
    "DiskCache",
    "LRUCache",
    "cache_directory",
    "clear_disk_cache",
    "disk_cache_usage",
    "compiler_fingerprint",
    "installed_fingerprint",
    "size_limit",
    "stat_line",
]

log = logging.getLogger(__name__)

V = TypeVar("V")


def _one(_value: object) -> int:
    return 1


class LRUCache(Generic[V]):
    """A mapping that keeps its most recently used entries within ``capacity``.

    Each entry weighs ``weigh(value)``, 1 by default (the capacity then counts entries;
    the caches of compiled code weigh bytes). After a ``put`` the least recently used
    entries go until the total weight fits, except the entry just put, which always stays.
    """

    def __init__(self, capacity: int, weigh: Callable[[V], int] = _one) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU cache needs a capacity of at least 1, got {capacity}")
        self.capacity = capacity
        self._weigh = weigh
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value``; the least recently used entries go while the total weight exceeds the capacity."""
        weight = self._weigh(value)
        with self._lock:
            replaced = self._entries.pop(key, None)
            if replaced is not None:
                self._weight -= replaced[1]
            self._entries[key] = (value, weight)
            self._weight += weight
            while self._weight > self.capacity and len(self._entries) > 1:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._weight -= dropped

    def values(self) -> list[V]:
        """The values, most recently used first (their order of use unchanged)."""
        with self._lock:
            return [value for value, _ in reversed(self._entries.values())]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    @property
    def weight(self) -> int:
        """The total weight of the entries (bytes for the caches of compiled code)."""
        with self._lock:
            return self._weight

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


ENABLE_VARIABLE = "HELION_MLIR_CACHE"
DIRECTORY_VARIABLE = "HELION_MLIR_CACHE_DIR"
BYTES_VARIABLE = "HELION_MLIR_CACHE_BYTES"
DEFAULT_BYTES = 2**30
#: Written at the start of every entry; a change of the layout changes it.
_MAGIC = b"HMCACHE2"
_DIGEST = 32
_SUFFIX = ".entry"
# A temporary file older than this was left by a process that died while writing it.
_STALE_TEMPORARY_SECONDS = 3600


def cache_directory() -> Path | None:
    """Where entries on disk are kept, or None when the disk cache is disabled."""
    if os.environ.get(ENABLE_VARIABLE, "").strip().lower() in ("0", "false", "no", "off"):
        return None
    given = os.environ.get(DIRECTORY_VARIABLE, "").strip()
    if given:
        return Path(given)
    return get_helion_cache_dir() / "helion_mlir"


def size_limit() -> int:
    """The directory's size bound in bytes (``HELION_MLIR_CACHE_BYTES``, 1 GiB by default)."""
    given = os.environ.get(BYTES_VARIABLE, "").strip()
    try:
        return int(given) if given else DEFAULT_BYTES
    except ValueError:
        raise ValueError(f"{BYTES_VARIABLE}={given!r}: write the cache's size limit in bytes") from None


def stat_line(path: str) -> str:
    """A file's identity as a key sees it: path, size, modification time and inode."""
    found = os.stat(path)
    return f"{path} {found.st_size} {found.st_mtime_ns} {found.st_ino}"


def _files(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    """The files under ``directory`` whose names end with one of ``suffixes``, sorted."""
    found = []
    for root, _, names in os.walk(directory):
        found += [os.path.join(root, name) for name in names if name.endswith(suffixes)]
    return sorted(found)


def installed_fingerprint(distribution: str, package_paths: Iterable[str], suffixes: tuple[str, ...]) -> str:
    """An installed package's identity as a key sees it. A wheel: its version and a SHA-256 of
    its ``RECORD`` (every file's hash, rewritten by each install), one read instead of
    hundreds of stats; a file edited in place without reinstalling is not noticed (clear the
    cache: ``helion-mlir cache --clear``). An editable or unrecorded install (a checkout being
    edited): the :func:`stat_line` of each of its files ending with ``suffixes``."""
    try:
        found = importlib.metadata.distribution(distribution)
        version, record = found.version, found.read_text("RECORD")
        editable = "editable" in (found.read_text("direct_url.json") or "")
    except importlib.metadata.PackageNotFoundError:
        version, record, editable = "unrecorded", None, True
    if record and not editable:
        return f"{distribution} {version} {hashlib.sha256(record.encode()).hexdigest()}"
    files = [stat_line(p) for directory in package_paths for p in _files(directory, suffixes)]
    return "\n".join([f"{distribution} {version}", *files])


@functools.cache
def compiler_fingerprint() -> str:
    """What compiles a module, as part of a disk key (constant in a process): a SHA-256 of
    torch's version, torch-mlir's install (:func:`installed_fingerprint`: a reinstall misses)
    and the package's own source files (an edited file misses). A digest, so that
    keys computed per op hash 64 characters of it, not the lines it covers."""
    package = os.path.dirname(os.path.abspath(__file__))
    parts = [
        torch.__version__,
        installed_fingerprint("torch-mlir", torch_mlir.__path__, (".so", ".py")),
        *(stat_line(p) for p in _files(package, (".py",))),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class DiskCache:
    """The entries of one kind (``native``, ``op``, ...) in the cache directory.

    ``durable`` entries are flushed to the disk before they are renamed into place (an entry
    whose loss costs a second or more); the others rely on their checksum alone, which turns a
    file a crash left half-written into a miss.
    """

    def __init__(self, kind: str, *, durable: bool) -> None:
        self.kind = kind
        self.durable = durable

    def path(self, directory: Path, key: str) -> Path:
        return directory / f"{self.kind}-{key}{_SUFFIX}"

    def read(self, key: str) -> tuple[dict[str, object], bytes] | None:
        """The header and payload kept under ``key``, or None (disabled, missing, or not
        verifying; logged at debug level). A hit makes the entry the most recently used."""
        directory = cache_directory()
        if directory is None:
            return None
        path = self.path(directory, key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        found = _parse_entry(data)
        if found is None or found[0].get("key") != key:
            log.debug("disk cache: %s does not verify (truncated, corrupt or foreign); a miss", path)
            return None
        try:
            os.utime(path)  # most recently used
        except OSError:
            pass
        return found

    def write(self, entries: Iterable[tuple[str, dict[str, object], bytes]]) -> None:
        """Keep each ``(key, header, payload)`` (nothing when the cache is disabled), then
        bound the directory's size once. Raises OSError when the directory cannot be written."""
        directory = cache_directory()
        if directory is None:
            return
        limit = size_limit()
        directory.mkdir(parents=True, exist_ok=True)
        for key, header, payload in entries:
            _replace(self.path(directory, key), _entry_bytes({**header, "key": key}, payload), durable=self.durable)
        _evict(directory, limit)


def disk_cache_usage(directory: Path) -> dict[str, tuple[int, int]]:
    """Entries and bytes per kind (``native``, ``op``, ``host``, ...) in ``directory``."""
    usage: dict[str, tuple[int, int]] = {}
    for path in directory.glob(f"*{_SUFFIX}") if directory.is_dir() else ():
        kind = path.name.split("-", 1)[0]
        try:
            size = path.stat().st_size
        except OSError:
            continue
        count, total = usage.get(kind, (0, 0))
        usage[kind] = (count + 1, total + size)
    return usage


def clear_disk_cache(directory: Path) -> int:
    """Remove every entry (and temporary file) in ``directory``; returns how many entries went.
    Safe beside running processes: a removed entry is a miss for them."""
    removed = 0
    for path in list(directory.iterdir()) if directory.is_dir() else ():
        if path.name.endswith(_SUFFIX):
            path.unlink(missing_ok=True)
            removed += 1
        elif path.name.endswith(".tmp"):
            path.unlink(missing_ok=True)
    return removed


def _entry_bytes(header: dict[str, object], payload: bytes) -> bytes:
    header_bytes = json.dumps(header, sort_keys=True).encode()
    body = len(header_bytes).to_bytes(8, "little") + header_bytes + payload
    return _MAGIC + hashlib.sha256(body).digest() + body


def _parse_entry(data: bytes) -> tuple[dict[str, object], bytes] | None:
    """The header and payload of an entry's ``data``, or None when its checksum is wrong."""
    start = len(_MAGIC) + _DIGEST
    if data[: len(_MAGIC)] != _MAGIC or hashlib.sha256(data[start:]).digest() != data[len(_MAGIC) : start]:
        return None
    length = int.from_bytes(data[start : start + 8], "little")
    try:
        header = json.loads(data[start + 8 : start + 8 + length])
    except ValueError:
        return None
    return (header, data[start + 8 + length :]) if isinstance(header, dict) else None


def _replace(path: Path, data: bytes, *, durable: bool) -> None:
    """Write ``path`` whole or not at all: a temporary file of the same directory, renamed over it."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            if durable:
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
    with os.scandir(directory) as found_entries:
        for item in found_entries:
            try:
                found = item.stat()
            except OSError:
                continue
            if item.name.endswith(".tmp"):
                if now - found.st_mtime > _STALE_TEMPORARY_SECONDS:
                    Path(item.path).unlink(missing_ok=True)
            elif item.name.endswith(_SUFFIX):
                entries.append((found.st_mtime, found.st_size, Path(item.path)))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size
        log.debug("disk cache: evicted %s", path.name)
