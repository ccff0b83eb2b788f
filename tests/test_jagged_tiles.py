"""``hl.jagged_tile``: a loop over rows of different lengths inside tiles over the rows.

The loop runs to the longest row of the parent tile; each lane past its own row's end is
masked as padding is: gathers and loads read 0 there, ``_mask_to`` sets the fill a reduction
needs (-inf before a max), stores and atomics leave memory alone (``lowering/jagged.py``).
Without the masks, rows summed their neighbours' values and stores wrote past each row.
Helion 1.5.1's reference mode has no jagged tiles, so the numbers are compared with torch per
row, under configs from Helion's generator, static and dynamic shapes, empty rows included.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path
from typing import Any, Callable

import helion
import pytest
import torch
from config_fuzz import random_configs
from examples_util import load_example
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel, generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "jagged_kernels.py")
SSA = "[A-Za-z0-9_#]+"


def _offsets(lengths: torch.Tensor) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])


def _sums_of_squares(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    return torch.stack([(values[a:b] ** 2).sum() for a, b in zip(offsets[:-1], offsets[1:])])


def _prefix_maxima(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    return torch.stack([x[r, :n].max() if n else torch.tensor(float("-inf")) for r, n in enumerate(lengths)])


def _scale_prefixes(x: torch.Tensor, lengths: torch.Tensor, scale: float) -> torch.Tensor:
    keep = torch.arange(x.size(1))[None, :] < lengths[:, None]
    return torch.where(keep, x * scale, 0.0)


def _grid_prefix_means(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    keep = torch.arange(x.size(2))[None, None, :] < lengths[:, :, None]
    return torch.where(keep, x, 0.0).sum(2) / lengths.clamp(min=1)


def _label_counts(labels: torch.Tensor, offsets: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    return counts + torch.bincount(labels[: int(offsets[-1])], minlength=counts.numel()).to(counts.dtype)


def _case(name: str, seed: int, rows: int) -> tuple[tuple[Any, ...], Callable[..., torch.Tensor]]:
    """Arguments (rows of lengths 0 to 19, the first one empty) and torch's result."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 20, (rows,), generator=gen)
    lengths[0] = 0
    offsets = _offsets(lengths)
    total = int(offsets[-1])
    return {
        "packed_sums_of_squares": ((torch.randn(total + 3, generator=gen), offsets), _sums_of_squares),
        "prefix_maxima": ((torch.randn(rows, 21, generator=gen), lengths), _prefix_maxima),
        "scale_prefixes": ((torch.randn(rows, 21, generator=gen), lengths, 1.5), _scale_prefixes),
        "grid_prefix_means": ((torch.randn(rows, 3, 21, generator=gen),
                               torch.randint(0, 22, (rows, 3), generator=gen)), _grid_prefix_means),
        "label_counts": ((torch.randint(0, 6, (total + 3,), generator=gen), offsets, torch.zeros(6, dtype=torch.int32)),
                         _label_counts),
    }[name]


NAMES = ["packed_sums_of_squares", "prefix_maxima", "scale_prefixes", "grid_prefix_means", "label_counts"]


@functools.cache
def kernel(name: str, static: bool) -> helion.Kernel:
    found = getattr(KERNELS, name)
    return found if static else helion.kernel(found.fn, configs=list(found.configs), static_shapes=False)


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", NAMES)
def test_lanes_past_each_rows_end_are_masked_under_generated_configs(name: str, static: bool) -> None:
    """The kernel's own config, then Helion's generated configs (tiles of one row included);
    with dynamic shapes one compiled kernel runs every row count."""
    args, _ = _case(name, 0, 11)
    configs = [None] + random_configs(kernel(name, static).bind(args), seed=len(name) + static, count=2)
    for config in configs:
        for seed, rows in [(1, 11)] if static else [(1, 11), (2, 16), (3, 5)]:
            args, reference = _case(name, seed, rows)
            compiled = compile_kernel(kernel(name, static).bind(args), config=config, threads=2)
            torch.testing.assert_close(compiled(*_clone(args)), reference(*_clone(args)), rtol=1e-5, atol=1e-5,
                                       msg=lambda m, c=config, r=rows: f"{r} rows, {c}: {m}")


def test_a_load_over_a_jagged_tile_selects_zero_past_each_rows_end() -> None:
    args, _ = _case("scale_prefixes", 1, 11)
    run_filecheck(generate_mlir(KERNELS.scale_prefixes.bind(args)), string.Template("""
        // CHECK-LABEL: func.func @scale_prefixes(
        // CHECK:       %[[ENDS:$V]] = tensor.insert_slice %{{$V}} into %{{$V}}[0] [%{{$V}}] [1] : tensor<?xi64> into tensor<4xi64>
        // CHECK:       scf.for %[[K:$V]] =
        // CHECK:         linalg.generic
        // CHECK:           %[[ROW:$V]] = linalg.index 0 : index
        // CHECK-NEXT:      %[[END:$V]] = tensor.extract %[[ENDS]][%[[ROW]]] : tensor<4xi64>
        // CHECK-NEXT:      %[[LAST:$V]] = arith.index_cast %[[END]] : i64 to index
        // CHECK-NEXT:      %[[LANE:$V]] = linalg.index 1 : index
        // CHECK-NEXT:      %[[POS:$V]] = arith.addi %[[K]], %[[LANE]] : index
        // CHECK-NEXT:      %[[INSIDE:$V]] = arith.cmpi slt, %[[POS]], %[[LAST]] : index
        // CHECK-NEXT:      arith.select %[[INSIDE]], %{{$V}}, %{{$V}} : f32
    """).substitute(V=SSA))
