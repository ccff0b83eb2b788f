"""The bounded caches: least recently used entries go first, the process-wide caches weigh
their entries in bytes, and compiled code that leaves them is freed."""

from __future__ import annotations

import itertools
import threading
import weakref
from pathlib import Path

import helion
import pytest
import torch
from examples_util import load_example_by_name

from helion_mlir import caches, compile_kernel
from helion_mlir.importer import cache as torch_import
from helion_mlir.inliner import survey
from helion_mlir.lowering import kernel_model
from helion_mlir.caches import LRUCache
from helion_mlir.runtime.cpu import engine as execute
from helion_mlir.runtime.iree import engine as iree_engine
from helion_mlir.runtime.kernel import compiled_kernel


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


def test_values_come_most_recently_used_first_without_changing_the_order() -> None:
    cache: LRUCache[str] = LRUCache(3)
    for key in "abc":
        cache.put(key, key.upper())
    cache.get("a")
    assert cache.values() == ["A", "C", "B"]
    cache.put("d", "D")  # "b" is still the least recently used
    assert cache.values() == ["D", "A", "C"]


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


def test_weighed_entries_go_until_the_total_fits_and_the_newest_stays() -> None:
    cache: LRUCache[str] = LRUCache(10, weigh=len)
    cache.put("a", "aaaa")
    cache.put("b", "bbbb")
    assert (len(cache), cache.weight) == (2, 8)
    cache.put("c", "ccc")  # 11 > 10: "a" goes
    assert (cache.get("a"), cache.get("b"), cache.weight) == (None, "bbbb", 7)
    cache.put("b", "bb")  # a replaced entry's weight is replaced too
    assert cache.weight == 5
    cache.put("huge", "h" * 50)  # heavier than the whole capacity: it alone stays
    assert (len(cache), cache.weight, cache.get("huge")) == (1, 50, "h" * 50)
    cache.clear()
    assert (len(cache), cache.weight) == (0, 0)


def test_process_wide_caches_are_bounded_by_bytes() -> None:
    assert execute._CACHE.capacity == execute.COMPILED_FUNCTION_CACHE_BYTES
    assert compiled_kernel._CACHE.capacity == compiled_kernel.COMPILED_KERNEL_CACHE_BYTES
    assert iree_engine._CACHE.capacity == iree_engine.IREE_FUNCTION_CACHE_BYTES
    assert torch_import.IMPORT_CACHE._entries.capacity == torch_import.IMPORT_CACHE_BYTES
    assert survey._SCANNED.capacity == survey.SCANNED_MODULES_BYTES


def test_compiling_many_configs_keeps_only_the_budget_of_compiled_code_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an autotuner does: one matmul compiled for 24 configs (distinct block sizes),
    each called once. Under a budget of a few compiled kernels the caches evict, and the
    ExecutionEngine of an evicted config dies as soon as nobody holds it (no collection
    runs here: nothing keeps compiled code alive in a reference cycle)."""
    budget = 3 * 2**20  # three or four compiled kernels
    monkeypatch.setattr(execute, "_CACHE", LRUCache(budget, weigh=lambda f: f.nbytes))
    monkeypatch.setattr(compiled_kernel, "_CACHE", LRUCache(budget, weigh=lambda k: k.nbytes))
    x, y = torch.randn(64, 64), torch.randn(64, 48)
    bound = load_example_by_name("matmul").KERNEL.bind((x, y))
    configs = [helion.Config(block_sizes=list(sizes))
               for sizes in itertools.product([16, 32, 64, 128], [16, 32], [16, 32, 64])]
    engines = []
    for config in configs:
        compiled = compile_kernel(bound, config=config)
        torch.testing.assert_close(compiled(x, y), x @ y, rtol=1e-4, atol=1e-4)
        assert execute.engine_bytes(0) < compiled.function.nbytes < compiled.nbytes < 2 * execute.engine_bytes(0)
        engines.append(weakref.ref(compiled.function._engine))
        del compiled
    cached = {id(entry.function._engine) for entry, _ in compiled_kernel._CACHE._entries.values()}
    cached |= {id(entry._engine) for entry, _ in execute._CACHE._entries.values()}
    alive = {id(engine()) for engine in engines if engine() is not None}
    assert alive == cached and 3 <= len(alive) <= budget // execute.engine_bytes(0)
    assert execute._CACHE.weight <= budget and compiled_kernel._CACHE.weight <= budget
    assert len(kernel_model._CODEGEN_GRAPHS[bound.host_function.device_ir]) <= kernel_model.CODEGEN_GRAPH_CONFIGS


def _install(site: Path, name: str, *, editable: bool) -> Path:
    """A package ``name`` installed into ``site`` (its module file and its dist-info)."""
    package = site / name
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,sha256=one,10\n")
    if editable:
        (info / "direct_url.json").write_text('{"dir_info": {"editable": true}, "url": "file:///src"}')
    return package


def test_a_wheel_is_fingerprinted_by_its_record_and_an_editable_install_by_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    wheel, editable = _install(tmp_path, "wheel_pkg", editable=False), _install(tmp_path, "editable_pkg", editable=True)

    def fingerprints() -> tuple[str, str]:
        return (caches.installed_fingerprint("wheel_pkg", [str(wheel)], (".py",)),
                caches.installed_fingerprint("editable_pkg", [str(editable)], (".py",)))

    before = fingerprints()
    assert before[0].startswith("wheel_pkg 1.0 ") and "__init__.py" in before[1]
    for package in (wheel, editable):
        (package / "__init__.py").write_text("VALUE = 22\n")  # edited in place
    edited = fingerprints()
    assert edited[0] == before[0] and edited[1] != before[1]
    (tmp_path / "wheel_pkg-1.0.dist-info" / "RECORD").write_text("wheel_pkg/__init__.py,sha256=two,11\n")  # reinstalled
    assert fingerprints()[0] != before[0]
    assert caches.installed_fingerprint("not_installed", [str(wheel)], (".py",)).startswith("not_installed unrecorded")
