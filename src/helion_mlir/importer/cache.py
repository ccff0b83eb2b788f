"""The process-wide import cache, keyed on everything that determines an import's result:
the target, the inputs' shapes, dtypes and symbols (numbered by first use), literal
arguments and the output type.

Lowered ops are also kept on disk (:class:`~helion_mlir.caches.DiskCache`, kind ``op``), under
a SHA-256 of that key rendered as text and of the versions of what lowers them
(:func:`~helion_mlir.caches.compiler_fingerprint`), so a new process imports and lowers only
the ops no process lowered before. Failures are not kept.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from ..errors import NodeNormalizationError
from ..caches import DiskCache, LRUCache, cache_directory, compiler_fingerprint
from ..output_type import OutputType
from .normalize import (
    node_inputs,
)
from .input_values import SYMBOLIC_SCALARS, InputValue, TensorSpec
from .rewrites import is_helion_full

# --------------------------------------------------------------------------------------
# Cache and statistics
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportStats:
    """Counters of the process-wide import cache.

    ``lowering_runs`` counts pass-pipeline runs: one per batch of cache misses, plus the
    extra runs spent isolating a node that made a batch fail.
    """

    hits: int
    misses: int
    lowering_runs: int
    entries: int


@dataclass(frozen=True)
class Failure:
    """A cached negative result: why a signature cannot be lowered.

    ``summary`` is torch-mlir's own one-line complaint, ``reason`` the sentence around it.
    """

    reason: str
    summary: str
    diagnostics: tuple[str, ...]
    hint: str | None


@dataclass(frozen=True)
class ResultSpec:
    """Shape (``None`` for a dynamic size) and dtype of one tensor result of an imported node."""

    shape: tuple[int | None, ...]
    dtype: torch.dtype


Results = Any  # ResultSpec, a tuple of them (tuple results), or None (not a tensor)


@dataclass(frozen=True)
class Imported:
    """A node's lowered module text and what its results are."""

    text: str
    results: Results


log = logging.getLogger(__name__)

# Distinct node signatures: a few hundred across all the examples, each about 0.75 KB of
# text and 2.5 KB of key, results and objects around them.
ENTRY_OVERHEAD_BYTES = 2560
IMPORT_CACHE_BYTES = 16 * 2**20


def entry_bytes(result: Imported | Failure) -> int:
    """Estimated memory of a cache entry: its text, plus the key and the objects around it."""
    if isinstance(result, Imported):
        return ENTRY_OVERHEAD_BYTES + len(result.text)
    return ENTRY_OVERHEAD_BYTES + sum(map(len, result.diagnostics)) + len(result.reason)


class _ImportCache:
    """Imports (or failures) by signature; shared by all importers, thread-safe."""

    def __init__(self, capacity_bytes: int) -> None:
        self._lock = threading.Lock()
        self._entries: LRUCache[Imported | Failure] = LRUCache(capacity_bytes, weigh=entry_bytes)
        self.hits = 0
        self.misses = 0
        self.lowering_runs = 0

    def lookup(self, key: tuple) -> Imported | Failure | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
            return found

    def count_hit(self) -> None:
        with self._lock:
            self.hits += 1

    def store(self, key: tuple, result: Imported | Failure) -> None:
        self._entries.put(key, result)

    def count_lowering_run(self) -> None:
        with self._lock:
            self.lowering_runs += 1

    def stats(self) -> ImportStats:
        with self._lock:
            return ImportStats(self.hits, self.misses, self.lowering_runs, len(self._entries))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.lowering_runs = 0


IMPORT_CACHE = _ImportCache(IMPORT_CACHE_BYTES)

_KEPT_OPS = DiskCache("op", durable=False)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def disk_key(key: tuple) -> str | None:
    """The name of a signature's entry on disk, or None when it may not render the same in
    another process: a target other than an ATen op or Helion's ``full``, or an object shown by
    its address."""
    target, *rest = key
    if isinstance(target, torch._ops.OpOverload):
        name = f"op {target}"
    elif is_helion_full(target):
        name = "helion full"
    else:
        return None
    text = "\n".join([name, *map(repr, rest)])
    if _ADDRESS.search(text):
        return None
    return hashlib.sha256(f"{compiler_fingerprint()}\n{text}".encode()).hexdigest()


def _results_record(results: Results) -> Any:
    if results is None:
        return None
    if isinstance(results, ResultSpec):
        return {"shape": list(results.shape), "dtype": str(results.dtype).removeprefix("torch.")}
    if isinstance(results, tuple):
        return {"tuple": [_results_record(r) for r in results]}
    raise TypeError(f"unexpected import results {results!r}")


def _results(record: Any) -> Results:
    if record is None:
        return None
    if "tuple" in record:
        return tuple(_results(r) for r in record["tuple"])
    dtype = getattr(torch, record["dtype"])
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{record['dtype']!r} is not a torch dtype")
    return ResultSpec(tuple(None if d is None else int(d) for d in record["shape"]), dtype)


def load_kept(key: tuple) -> Imported | None:
    """The lowered op a process kept on disk for ``key``, or None (also when the disk cache is off)."""
    if cache_directory() is None:
        return None
    name = disk_key(key)
    found = _KEPT_OPS.read(name) if name is not None else None
    if found is None:
        return None
    header, text = found
    try:
        return Imported(text.decode(), _results(header["results"]))
    except (KeyError, TypeError, ValueError) as err:
        log.debug("op cache: entry %s could not be read (%s); lowering again", name, err)
        return None


def keep(imported: Iterable[tuple[tuple, Imported]]) -> None:
    """Keep lowered ops on disk for later processes (a directory that cannot be written is
    logged at debug level and skipped)."""
    if cache_directory() is None:
        return
    entries = []
    for key, result in imported:
        name = disk_key(key)
        if name is not None:
            entries.append((name, {"results": _results_record(result.results)}, result.text.encode()))
    try:
        _KEPT_OPS.write(entries)
    except OSError as err:
        log.debug("op cache: lowered ops not kept: %s", err)



def import_stats() -> ImportStats:
    """Hit, miss and pipeline-run counts of the process-wide cache since the last clear."""
    return IMPORT_CACHE.stats()


def clear_import_cache() -> None:
    """Forget every cached result and reset the counters (tests and benchmarks use it)."""
    IMPORT_CACHE.clear()


# --------------------------------------------------------------------------------------
# Signatures: what determines an import's result
# --------------------------------------------------------------------------------------


class _SymbolNumbering:
    """Numbers symbolic expressions by first appearance, so ``[u3, u7]`` and ``[u0, u1]``
    give the same key while ``[u0, u0]`` and ``[u0, u1]`` do not."""

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}

    def fresh(self, key: Hashable | None = None) -> tuple[str, int]:
        """The symbol of a dynamic size of a TensorSpec: one per ``same_as`` key, else one
        unlike every other."""
        ident = ("same_as", key) if key is not None else object()
        number = self._ids.setdefault(ident, len(self._ids))
        return ("sym", number)

    def dim(self, value: Any) -> Any:
        if isinstance(value, SYMBOLIC_SCALARS):
            expr = value.node.expr
            number = self._ids.setdefault(expr, len(self._ids))
            return ("sym", number)
        return int(value)


def _literal_key(value: Any, node: fx.Node, input_index: dict[fx.Node, int]) -> Any:
    """A hashable, type-exact rendering of a node's literal arguments (inputs by position)."""
    if isinstance(value, fx.Node):
        return ("input", input_index[value])
    if value is None or isinstance(value, (str, torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        # repr keeps -0.0, inf and nan apart and makes nan equal to itself.
        return ("float", repr(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_literal_key(v, node, input_index) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _literal_key(v, node, input_index)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", tuple(_literal_key(v, node, input_index) for v in (value.start, value.stop, value.step)))
    raise NodeNormalizationError(
        node,
        f"it has a literal argument of unsupported kind {type(value).__name__} ({value!r})",
        hint="literal arguments must be None, bool, int, float, str, dtype, device, layout, "
        "memory format, or lists/tuples of those; symbolic values must come from FX nodes",
    )


def _value_key(value: InputValue, symbols: _SymbolNumbering) -> tuple:
    if isinstance(value, TensorSpec):
        dims = tuple(symbols.fresh(value.size_key(i)) if d is None else d for i, d in enumerate(value.shape))
        return ("contiguous tensor", value.dtype, dims)
    if isinstance(value, torch.Tensor):
        return (
            "tensor",
            value.dtype,
            tuple(symbols.dim(d) for d in value.shape),
            tuple(symbols.dim(s) for s in value.stride()) if value.layout == torch.strided else (),
        )
    if isinstance(value, SYMBOLIC_SCALARS):
        return (type(value).__name__, symbols.dim(value))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def signature(node: fx.Node, values: Sequence[InputValue], output_type: OutputType) -> tuple:
    symbols = _SymbolNumbering()
    input_index = {inp: i for i, inp in enumerate(node_inputs(node))}
    return (
        node.target,
        tuple(_value_key(v, symbols) for v in values),
        _literal_key(tuple(node.args), node, input_index),
        _literal_key(dict(node.kwargs), node, input_index),
        output_type,
    )
