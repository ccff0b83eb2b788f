"""A bounded, thread-safe cache for the package's process-wide caches.

Imports, compiled functions and compiled kernels are cached for the life of the process;
a converter or an autotuner that meets thousands of kernels must not keep every one of
them (and its JIT-compiled code) forever, so each cache keeps its most recently used
entries only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["LRUCache"]

V = TypeVar("V")


class LRUCache(Generic[V]):
    """A mapping that keeps the ``capacity`` most recently used entries."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU cache needs a capacity of at least 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value``; the least recently used entry goes when the cache is full."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
