"""A bounded, thread-safe cache for the package's process-wide caches.

Imports, compiled functions and compiled kernels are cached for the life of the process;
a converter or an autotuner that meets thousands of kernels must not keep every one of
them (and its JIT-compiled code) forever, so each cache keeps its most recently used
entries only, within a capacity. Entries of the caches of compiled code differ in size by
far more than their count says, so those caches weigh each entry in bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LRUCache"]

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
