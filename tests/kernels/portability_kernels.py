"""Small kernels for tests/test_cpu_portability.py and tests/test_branch_merges.py: integers
converted to bfloat16 (explicitly and by type promotion), a dequantizing matmul, and a grouped
matmul that skips empty groups in a branch, written as a kernel author would."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64]))
def scaled_by_counts(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """A bfloat16 tile times an int32 tile: torch promotes the integers to bfloat16."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * counts[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]))
def bf16_times_int16(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """bfloat16 activations times int16 weights converted to bfloat16 tile by tile, f32 accumulation."""
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(x[tile_m, tile_k], w[tile_k, tile_n].to(torch.bfloat16), acc=acc)
        out[tile_m, tile_n] = acc.to(torch.bfloat16)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]), static_shapes=False)
def grouped_matmul_skipping_empty(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Group g's rows ``offsets[g]:offsets[g + 1]`` of ``a`` times ``b``; a group without rows is
    skipped by an ``if`` around its tile loops (the loops' sizes come from the data)."""
    rows, k = a.shape
    n = b.size(1)
    out = torch.zeros([rows, n], dtype=a.dtype, device=a.device)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        count = offsets[g + 1] - start
        if count != 0:
            for tile_m, tile_n in hl.tile([count, n]):
                acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
                for tile_k in hl.tile(k):
                    acc = torch.addmm(acc, a[start + tile_m.index, tile_k], b[tile_k, tile_n])
                out[start + tile_m.index, tile_n] = acc.to(out.dtype)
    return out


def grouped_matmul_reference(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


@helion.kernel(config=helion.Config(block_sizes=[16]), static_shapes=False)
def signed_rows(x: torch.Tensor, flip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row stored as is or negated by its flag, both sides of the ``if`` storing and
    computing the value kept after it (the row's tiles' running total of what was stored)."""
    rows, cols = x.size()
    out = torch.empty_like(x)
    totals = torch.empty([rows, cols], dtype=x.dtype, device=x.device)
    for row in hl.grid(rows):
        for tile in hl.tile(cols):
            vals = x[row, tile]
            if flip[row] != 0:
                out[row, tile] = -vals
                kept = -vals * 2
            else:
                out[row, tile] = vals
                kept = vals * 3
            totals[row, tile] = kept
    return out, totals


def signed_rows_reference(x: torch.Tensor, flip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sign = torch.where(flip[:, None] != 0, -1.0, 1.0)
    return x * sign, torch.where(flip[:, None] != 0, -2 * x, 3 * x)
