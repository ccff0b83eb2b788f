"""Kernels over a specialized row length that is not a power of two, for
tests/test_padded_dims.py, written as users write them: an accumulator of
``helion.next_power_of_2(n)`` lanes that a row is added into (Helion then reads ``x[tile, :]``
as that many lanes, the last ones padding), row maxima and a softmax over such rows, a dot
of two padded factories, and column sums into an
``hl.zeros([n])`` (which Helion pads too) or into a tensor a factory argument makes."""

from __future__ import annotations

from collections.abc import Callable

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def shifted_rows(x: torch.Tensor) -> torch.Tensor:
    n = hl.specialize(x.size(1))
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        acc = hl.zeros([tile, helion.next_power_of_2(n)])
        acc += x[tile, :] * 2.0 + 1
        out[tile, :] = acc
    return out


@helion.kernel(static_shapes=True)
def row_max_and_softmax(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = hl.specialize(x.size(1))
    peaks = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    probs = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = hl.zeros([tile, helion.next_power_of_2(n)]) + x[tile, :]
        peaks[tile] = row.amax(-1)
        probs[tile, :] = torch.softmax(row, dim=-1)
    return peaks, probs


@helion.kernel(static_shapes=True)
def mean_of_ones_added(x: torch.Tensor) -> torch.Tensor:
    n = hl.specialize(x.size(1))
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        width = helion.next_power_of_2(n)
        share = hl.full([tile, width], 1.0 / width)
        ones = hl.full([width, width], 1.0)
        out[tile, :] = x[tile, :] + torch.matmul(share, ones)
    return out


@helion.kernel(static_shapes=True)
def column_sums(x: torch.Tensor) -> torch.Tensor:
    m_block = hl.register_block_size(x.size(0))
    partial = x.new_empty([(x.size(0) + m_block - 1) // m_block, x.size(1)], dtype=torch.float32)
    n = hl.specialize(x.size(1))
    for outer in hl.tile(x.size(0), block_size=m_block):
        sums = hl.zeros([n], dtype=torch.float32)
        for inner in hl.tile(outer.begin, outer.end):
            sums += x[inner, :].to(torch.float32).sum(0)
        partial[outer.id, :] = sums
    return partial.sum(0)


@helion.kernel(static_shapes=True)
def block_column_sums(x: torch.Tensor, factory: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
    """Each block of rows' column sums, as one row of an output the host code sizes by the
    block size, into an accumulator ``factory`` makes at the row length."""
    m_block = hl.register_block_size(x.size(0))
    partial = x.new_empty([(x.size(0) + m_block - 1) // m_block, x.size(1)], dtype=torch.float32)
    n = hl.specialize(x.size(1))
    for outer in hl.tile(x.size(0), block_size=m_block):
        sums = factory(x, n)
        for inner in hl.tile(outer.begin, outer.end):
            sums += x[inner, :].to(torch.float32).sum(0)
        partial[outer.id, :] = sums
    return partial


@helion.kernel(static_shapes=True)
def scaled_scratch(x: torch.Tensor) -> torch.Tensor:
    n = hl.specialize(x.size(1))
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        scratch = torch.empty(n, dtype=torch.float32, device=x.device)
        out[tile, :] = x[tile, :] + scratch * 0.0
    return out
