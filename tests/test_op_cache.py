"""Lowered ops on disk: a process that meets an ATen op signature another process lowered
reads its text instead of importing and lowering it again, with a byte-identical module; a
damaged entry is a miss; signatures that do not render the same in another process are not
kept; signatures that differ keep apart."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from examples_util import load_example_by_name
from helion_mlir import caches, generate_mlir
from helion_mlir.importer import cache as import_cache
from helion_mlir.importer.cache import ResultSpec
from helion_mlir.importer.node_importer import clear_import_cache, import_stats
from helion_mlir.output_type import OutputType

aten = torch.ops.aten


@pytest.fixture
def cache_dir(disk_cache_dir: Path) -> Iterator[Path]:
    """The disk cache on, in a directory of the test's own; the memory cache of imports empty."""
    clear_import_cache()
    yield disk_cache_dir
    clear_import_cache()


def op_entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("op-*.entry"))


def emit(name: str, output_type: str = "linalg-on-tensors") -> tuple[str, int]:
    """The module of example ``name`` emitted with the memory cache of imports empty, and how
    many pipeline runs that took."""
    example = load_example_by_name(name)
    bound = example.KERNEL.bind(example.make_args("ragged"))
    clear_import_cache()
    text = generate_mlir(bound, output_type=output_type)
    return text, import_stats().lowering_runs


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "tosa", "stablehlo", "raw"])
def test_ops_kept_on_disk_give_the_same_module_without_lowering(cache_dir: Path, output_type: str) -> None:
    first, runs = emit("softmax_two_pass", output_type)
    assert runs == (0 if output_type == "raw" else 1) and op_entries(cache_dir)
    again, runs = emit("softmax_two_pass", output_type)
    assert runs == 0 and again == first


def test_a_damaged_op_entry_is_a_miss_and_is_written_again(cache_dir: Path) -> None:
    first, _ = emit("softmax_two_pass")
    for entry in op_entries(cache_dir):
        data = entry.read_bytes()
        entry.write_bytes(data[:-3] + bytes([data[-3] ^ 0x20]) + data[-2:])  # a byte of the op's text
    again, runs = emit("softmax_two_pass")
    assert runs == 1 and again == first
    assert emit("softmax_two_pass") == (first, 0)


def test_the_variable_keeps_ops_off_disk(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(caches.ENABLE_VARIABLE, "0")
    emit("softmax_two_pass")
    assert not op_entries(cache_dir)
    assert emit("softmax_two_pass")[1] == 1


def test_signatures_that_differ_have_different_entries() -> None:
    spec = ("contiguous tensor", torch.float32, (4, ("sym", 0)))
    base = (aten.add.Tensor, (spec, spec), ("tuple", (("input", 0), ("input", 1))), ("dict", ()),
            OutputType.LINALG_ON_TENSORS)
    variants = [
        base,
        (aten.sub.Tensor, *base[1:]),
        (*base[:1], (spec, ("contiguous tensor", torch.float16, (4, ("sym", 0)))), *base[2:]),
        (*base[:1], (spec, ("contiguous tensor", torch.float32, (4, ("sym", 1)))), *base[2:]),
        (*base[:2], ("tuple", (("input", 0), ("float", repr(-0.0)))), *base[3:]),
        (*base[:2], ("tuple", (("input", 0), ("float", repr(0.0)))), *base[3:]),
        (*base[:4], OutputType.TOSA),
    ]
    names = [import_cache.disk_key(v) for v in variants]
    assert None not in names and len(set(names)) == len(variants)


def test_signatures_shown_by_address_are_not_kept() -> None:
    spec = ("contiguous tensor", torch.float32, (4,))
    assert import_cache.disk_key((lambda x: x, (spec,), ("tuple", ()), ("dict", ()), OutputType.RAW)) is None
    opaque = object()
    assert import_cache.disk_key((aten.neg.default, (spec,), ("tuple", (opaque,)), ("dict", ()), OutputType.RAW)) is None


def test_result_shapes_and_dtypes_come_back_from_disk(cache_dir: Path) -> None:
    results = (ResultSpec((3, None), torch.bfloat16), None, ResultSpec((), torch.int64))
    key = (aten.max.dim, (("contiguous tensor", torch.bfloat16, (3, 5)),), ("tuple", (("input", 0), ("int", 1))),
           ("dict", ()), OutputType.LINALG_ON_TENSORS)
    import_cache.keep([(key, import_cache.Imported("module {}", results))])
    found = import_cache.load_kept(key)
    assert found is not None and found.text == "module {}" and found.results == results


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from examples_util import load_example_by_name
from helion_mlir import generate_mlir
from helion_mlir.importer.node_importer import import_stats
example = load_example_by_name("softmax_two_pass")
text = generate_mlir(example.KERNEL.bind(example.make_args("ragged")))
print(import_stats().lowering_runs)
print(text)
"""


def test_another_process_reads_the_ops_this_one_lowered(cache_dir: Path) -> None:
    first, _ = emit("softmax_two_pass")
    child = subprocess.run([sys.executable, "-c", CHILD.format(tests=str(Path(__file__).parent))],
                           env={**os.environ}, capture_output=True, text=True, timeout=300, check=True)
    runs, _, text = child.stdout.partition("\n")
    assert runs == "0" and text.rstrip("\n") == first.rstrip("\n")
