"""The bounded caches: least recently used entries go first, and the process-wide caches use them."""

from __future__ import annotations

import threading

import pytest

from helion_mlir.importer import cache as torch_import
from helion_mlir.lru_cache import LRUCache
from helion_mlir.runtime import compiled_kernel
from helion_mlir.runtime import engine as execute


def test_least_recently_used_entry_is_evicted_first() -> None:
    cache: LRUCache[str] = LRUCache(2)
    cache.put("a", "A")
    cache.put("b", "B")
    assert cache.get("a") == "A"  # "b" is now the least recently used
    cache.put("c", "C")
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == ("A", None, "C", 2)
    cache.put("a", "A2")  # replacing counts as a use and does not grow the cache
    assert cache.get("a") == "A2" and len(cache) == 2
    cache.clear()
    assert len(cache) == 0 and cache.get("a") is None


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LRUCache(0)


def test_concurrent_use_keeps_the_bound() -> None:
    cache: LRUCache[int] = LRUCache(50)

    def work(offset: int) -> None:
        for i in range(2000):
            cache.put((offset, i), i)
            cache.get((offset, i - 1))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50


def test_process_wide_caches_are_bounded() -> None:
    assert isinstance(execute._CACHE, LRUCache) and execute._CACHE.capacity == execute.COMPILED_FUNCTION_CACHE_CAPACITY
    assert isinstance(compiled_kernel._CACHE, LRUCache)
    assert compiled_kernel._CACHE.capacity == compiled_kernel.COMPILED_KERNEL_CACHE_CAPACITY
    assert torch_import.IMPORT_CACHE._entries.capacity == torch_import.IMPORT_CACHE_CAPACITY
