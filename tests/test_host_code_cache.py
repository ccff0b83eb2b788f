"""Helion's generated host code on disk: a process compiling a kernel another process compiled
runs the kept host code without Helion's code generator, with the same numbers; keys follow
the config, the input shapes, the kernel's source and the settings the generator reads, not
the autotuner's; dynamic-shape kernels (whose generation publishes guards) are never kept; a
damaged entry is a miss."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from helion.runtime.kernel import BoundKernel

from examples_util import dynamic_shapes_kernel, load_example_by_name
from helion_mlir import caches
from helion_mlir.runtime.kernel import host_code_cache
from helion_mlir.runtime.kernel.compiled_kernel import clear_kernel_cache, compile_kernel

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache_dir(disk_cache_dir: Path) -> Iterator[Path]:
    """The disk cache on, in a directory of the test's own; no compiled kernel in memory."""
    clear_kernel_cache()
    yield disk_cache_dir
    clear_kernel_cache()


def host_entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("host-*.entry"))


def count_generations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the name of each kernel Helion's code generator runs for."""
    generated: list[str] = []
    generate = BoundKernel.to_code

    def counted(self: BoundKernel, *args: Any, **kwargs: Any) -> str:
        generated.append(self.kernel.name)
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(BoundKernel, "to_code", counted)
    return generated


def softmax_args() -> tuple[torch.Tensor]:
    return (torch.randn(37, 100, generator=torch.Generator().manual_seed(3)),)


def test_another_process_runs_kept_host_code_without_helions_generator(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    child = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        import torch
        from examples_util import load_example_by_name
        from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
        example = load_example_by_name("softmax_two_pass")
        args = (torch.randn(37, 100, generator=torch.Generator().manual_seed(3)),)
        compile_kernel(example.KERNEL.bind(args))(*args)
    """)
    subprocess.run([sys.executable, "-c", child], check=True, capture_output=True, timeout=600)
    assert len(host_entries(cache_dir)) == 1
    generated = count_generations(monkeypatch)
    example = load_example_by_name("softmax_two_pass")
    args = softmax_args()
    compiled = compile_kernel(example.KERNEL.bind(args))
    torch.testing.assert_close(compiled(*args), torch.softmax(args[0], dim=-1))
    assert not generated and compiled.host.device_params  # Helion's host code, not the kernel's source


def test_a_cleared_process_reads_its_kept_host_code_and_a_damaged_entry_is_written_again(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = load_example_by_name("softmax_two_pass")
    args = softmax_args()
    bound = example.KERNEL.bind(args)
    expected = compile_kernel(bound)(*args)
    (entry,) = host_entries(cache_dir)
    kept = entry.read_bytes()
    entry.write_bytes(kept[:-5] + bytes([kept[-5] ^ 0x01]) + kept[-4:])
    generated = count_generations(monkeypatch)
    clear_kernel_cache()
    torch.testing.assert_close(compile_kernel(bound)(*args), expected, rtol=0, atol=0)
    assert generated == ["softmax_two_pass"] and entry.read_bytes() == kept  # generated again and kept whole
    clear_kernel_cache()
    compiled = compile_kernel(bound)
    torch.testing.assert_close(compiled(*args), expected, rtol=0, atol=0)
    assert generated == ["softmax_two_pass"] and compiled.host.device_params


def test_dynamic_shape_kernels_always_generate_their_host_code(cache_dir: Path) -> None:
    kernel = dynamic_shapes_kernel("softmax_two_pass")
    args = softmax_args()
    bound = kernel.bind(args)
    torch.testing.assert_close(compile_kernel(bound)(*args), torch.softmax(args[0], dim=-1))
    assert host_code_cache._key(bound, bound.config_spec.default_config()) is None
    assert list(cache_dir.glob("native-*.entry")) and not host_entries(cache_dir)  # the cache wrote, but no host code


def test_the_variable_keeps_host_code_off_disk(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(caches.ENABLE_VARIABLE, "0")
    args = softmax_args()
    compile_kernel(load_example_by_name("softmax_two_pass").KERNEL.bind(args))(*args)
    assert not host_entries(cache_dir)


def _scale_kernel(directory: Path, source_note: str, **settings: Any) -> helion.Kernel:
    """A row-scaling kernel in a file of its own; ``source_note`` changes its source text, not
    its graphs."""
    path = directory / f"scale_{source_note}.py"
    path.write_text(textwrap.dedent(f"""
        import torch
        import helion.language as hl

        def scale(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)  # {source_note}
            for tile in hl.tile(x.size()):
                out[tile] = x[tile] * 2.0
            return out
    """))
    spec = importlib.util.spec_from_file_location(f"scale_{source_note}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return helion.kernel(module.scale, **settings)


def test_keys_follow_config_shapes_source_and_codegen_settings_not_the_autotuners(tmp_path: Path) -> None:
    x, wider = torch.randn(8, 16), torch.randn(8, 32)
    bound = _scale_kernel(tmp_path, "a").bind((x,))
    config = helion.Config(block_sizes=[4, 16])
    key = host_code_cache._key(bound, config)
    assert key is not None and key == host_code_cache._key(_scale_kernel(tmp_path, "a").bind((x,)), config)
    others = [
        host_code_cache._key(bound, helion.Config(block_sizes=[8, 16])),
        host_code_cache._key(_scale_kernel(tmp_path, "a").bind((wider,)), config),
        host_code_cache._key(_scale_kernel(tmp_path, "b").bind((x,)), config),
        host_code_cache._key(_scale_kernel(tmp_path, "a", index_dtype=torch.int64).bind((x,)), config),
    ]
    assert len({key, *others}) == 5
    reseeded = _scale_kernel(tmp_path, "a", autotune_random_seed=bound.settings.autotune_random_seed + 1)
    assert host_code_cache._key(reseeded.bind((x,)), config) == key
