"""The native cache: compiled code kept on disk is loaded by a later compile (another process,
or this one after its memory cache is cleared) with the same numbers; a damaged entry is a
miss; concurrent writers leave valid entries; the size bound evicts; keys follow the options."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from examples_util import load_example_by_name
from helion_mlir import caches, generate_mlir
from helion_mlir.generate import bind_kernel
from helion_mlir.runtime.cpu import native_libraries
from helion_mlir.runtime.kernel.compiled_kernel import clear_kernel_cache, compile_kernel
from helion_mlir.runtime.cpu.engine import clear_compile_cache, compile_module
from helion_mlir.runtime.cpu.rewrites.tensor import tile_parallel

CHILD = Path(__file__).parent / "native_cache_child.py"
CHILD_SECONDS = 600

SCALE = """
#id = affine_map<(d0) -> (d0)>
func.func @scale(%x: tensor<37xf32>, %out: tensor<37xf32>) -> tensor<37xf32> {{
  %c = arith.constant {factor} : f32
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
      ins(%x : tensor<37xf32>) outs(%out : tensor<37xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    %e = math.exp %m : f32
    linalg.yield %e : f32
  }} -> tensor<37xf32>
  return %r : tensor<37xf32>
}}
"""
X = torch.linspace(-2, 2, 37)


@pytest.fixture
def cache_dir(disk_cache_dir: Path) -> Iterator[Path]:
    """The native cache on, in a directory of the test's own, the memory caches empty."""
    clear_kernel_cache()
    yield disk_cache_dir
    clear_kernel_cache()


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("native-*.entry")) if directory.exists() else []


def compile_scale(factor: float = 2.5, **options: object) -> tuple[torch.Tensor, bool]:
    """Compile (memory cache cleared first) and run the scale module: its result and whether
    its code came from disk."""
    clear_compile_cache()
    function = compile_module(SCALE.format(factor=factor), "scale", **options)  # type: ignore[arg-type]
    (result,) = function(X, torch.empty(37))
    return result, function.from_disk


def test_a_cleared_process_loads_the_kept_code_with_the_same_numbers(cache_dir: Path) -> None:
    compiled, from_disk = compile_scale()
    assert not from_disk and len(entries(cache_dir)) == 1
    loaded, from_disk = compile_scale()
    assert from_disk
    assert torch.equal(loaded, compiled)
    torch.testing.assert_close(loaded, torch.exp(X * 2.5))


def test_a_compiled_kernel_runs_in_place_on_code_from_disk(cache_dir: Path) -> None:
    """compile_kernel's code writes its output argument in place (results held by arguments):
    kept and loaded with it."""
    example = load_example_by_name("softmax_two_pass")
    args = example.make_args("ragged")
    first = compile_kernel(example.KERNEL, args, threads=1)
    assert not first.function.from_disk and first.function.held_by == (1,)
    clear_kernel_cache()
    again = compile_kernel(example.KERNEL, args, threads=1)
    assert again.function.from_disk and again.function.held_by == (1,)
    assert torch.equal(again(*args), first(*args))
    torch.testing.assert_close(again(*args), example.reference(*args), **example.TOLERANCE)


def _truncate(data: bytes) -> bytes:
    return data[: len(data) - 100]


def _flip_library_byte(data: bytes) -> bytes:
    return data[:-200] + bytes([data[-200] ^ 0x10]) + data[-199:]


def _flip_header_byte(data: bytes) -> bytes:
    at = data.index(b'"dims"') + 9  # a digit of the first parameter's size
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def _another_function(data: bytes) -> bytes:
    """A well-formed entry (its checksum right) that holds another function."""
    header, library = caches._parse_entry(data)  # type: ignore[misc]
    return caches._entry_bytes({**header, "func_name": "other"}, library)


@pytest.mark.parametrize("damage", [_truncate, _flip_library_byte, _flip_header_byte, _another_function])
def test_a_damaged_entry_is_a_miss_and_is_written_again(cache_dir: Path, damage: Callable[[bytes], bytes]) -> None:
    compile_scale()
    (entry,) = entries(cache_dir)
    entry.write_bytes(damage(entry.read_bytes()))
    result, from_disk = compile_scale()
    assert not from_disk
    torch.testing.assert_close(result, torch.exp(X * 2.5))
    assert compile_scale()[1]  # the miss kept a valid entry again


def test_the_size_bound_evicts_the_least_recently_used_entry(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_scale(1.5)
    (first,) = entries(cache_dir)
    compile_scale(2.5)
    (second,) = set(entries(cache_dir)) - {first}
    os.utime(first, ns=(1, 1))
    os.utime(second, ns=(2, 2))
    assert compile_scale(1.5)[1]  # a hit: now the most recently used
    monkeypatch.setenv(caches.BYTES_VARIABLE, str(first.stat().st_size + second.stat().st_size))
    compile_scale(3.5)  # a third entry: one must go, the least recently used
    assert first.exists() and not second.exists() and len(entries(cache_dir)) == 2


def test_the_variable_disables_the_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(caches.ENABLE_VARIABLE, "0")
    assert caches.cache_directory() is None
    compile_scale()
    assert not compile_scale()[1] and not entries(cache_dir)


def test_a_size_limit_that_is_not_a_number_is_refused_naming_the_variable(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(caches.BYTES_VARIABLE, "1G")
    with pytest.raises(ValueError, match=caches.BYTES_VARIABLE):
        compile_scale()


def test_code_that_cannot_be_linked_is_not_kept(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_libraries, "_linker", lambda: None)  # no iree-lld
    result, from_disk = compile_scale()
    assert not from_disk and not entries(cache_dir)
    torch.testing.assert_close(result, torch.exp(X * 2.5))


def test_checked_code_is_not_kept(cache_dir: Path) -> None:
    compile_scale(checked=True, pipeline="plain")
    assert not entries(cache_dir)


def test_the_default_directory_is_in_helions_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(caches.ENABLE_VARIABLE, raising=False)
    monkeypatch.delenv(caches.DIRECTORY_VARIABLE, raising=False)
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    assert caches.cache_directory() == tmp_path / "helion_mlir"


def test_keys_differ_by_threads_pipeline_cpu_features_and_pipeline_settings(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compile_scale(threads=1)
    compile_scale(threads=2)
    compile_scale(pipeline="plain")
    monkeypatch.setenv("HELION_MLIR_CPU_FEATURES", "-avx512bf16")
    compile_scale(threads=1)
    monkeypatch.setattr(tile_parallel, "MIN_PARALLEL_WORK", 0)
    compile_scale(threads=1)
    assert len(entries(cache_dir)) == 5
    assert compile_scale(threads=1)[1]  # each of them is found again under its own options


def _kernel_case(name: str, dtype: torch.dtype, threads: int) -> tuple[str, str, int, tuple[torch.Tensor, ...]]:
    """An example's emitted module, its function, a thread count and the function's arguments."""
    example = load_example_by_name(name)
    args = example.make_args("ragged", dtype) if dtype is not torch.float32 else example.make_args("ragged")
    text = generate_mlir(bind_kernel(example.KERNEL, args))
    out = torch.empty(args[0].shape[0], args[-1].shape[-1], dtype=dtype)
    return text, example.KERNEL.name, threads, (*args, out)


def _children(count: int, cases: Path, directory: Path, tmp_path: Path, *extra: str) -> list[Path]:
    """Run ``count`` fresh processes on ``cases`` at once; the files they wrote."""
    env = {**os.environ, caches.ENABLE_VARIABLE: "1", caches.DIRECTORY_VARIABLE: str(directory)}
    outputs = [tmp_path / f"child{i}-{len(list(tmp_path.glob('child*')))}.pt" for i in range(count)]
    running = [subprocess.Popen([sys.executable, str(CHILD), str(cases), str(o), *extra], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for o in outputs]
    for child in running:
        log, _ = child.communicate(timeout=CHILD_SECONDS)
        assert child.returncode == 0, log
    return outputs


@pytest.mark.slow
def test_fresh_processes_share_kept_code_parallel_single_threaded_and_bf16(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes compile the same modules at once (each writes every entry); a third loads
    all of them, with the numbers the first two computed, and so does this process. A child the
    first two fork after their parallel loops ran loads the entries too (its OpenMP workers
    gone: the entry points' library, first loaded there, runs the loops on the forking thread)."""
    cases = {
        "matmul on 2 threads": _kernel_case("matmul", torch.float32, 2),
        "softmax on 1 thread": _kernel_case("softmax_two_pass", torch.float32, 1),
        "bf16 matmul on 2 threads": _kernel_case("matmul", torch.bfloat16, 2),
    }
    path = tmp_path / "cases.pt"
    torch.save(cases, path)
    directory = tmp_path / "native"
    first_path, second_path = _children(2, path, directory, tmp_path, "fork")
    first, second = torch.load(first_path), torch.load(second_path)
    for name in cases:  # the directory was empty: one of them compiled (the other may have loaded it)
        assert not (first[name][1] and second[name][1]), name
    (third_path,) = _children(1, path, directory, tmp_path)
    loads = [torch.load(third_path), torch.load(f"{first_path}.fork"), torch.load(f"{second_path}.fork")]
    for loaded in loads:
        assert all(from_disk for _, from_disk in loaded.values())
        for name, (results, _) in loaded.items():
            assert all(torch.equal(a, b) for a, b in zip(results, first[name][0])), name
            assert all(torch.equal(a, b) for a, b in zip(results, second[name][0])), name
    assert len(entries(directory)) == 3 and len(list(directory.glob("openmp-*.entry"))) == 1  # and the entry points
    assert not list(directory.glob("*.tmp"))
    monkeypatch.setenv(caches.ENABLE_VARIABLE, "1")
    monkeypatch.setenv(caches.DIRECTORY_VARIABLE, str(directory))
    monkeypatch.setattr(tile_parallel, "MIN_PARALLEL_WORK", 0)
    clear_compile_cache()
    try:
        for name, (text, func_name, threads, args) in cases.items():
            function = compile_module(text, func_name, threads=threads)
            assert function.from_disk, name
            assert all(torch.equal(a, b) for a, b in zip(function(*args), first[name][0])), name
    finally:
        clear_compile_cache()
    matmul = cases["matmul on 2 threads"][3]
    torch.testing.assert_close(first["matmul on 2 threads"][0][0], matmul[0] @ matmul[1], rtol=1e-4, atol=1e-4)
