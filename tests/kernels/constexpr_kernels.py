"""Kernels given ``hl.constexpr`` values, for tests/test_constexpr_values.py: as a caller's
argument, and computed by the host code from a block size."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(backend="mlir", autotune_effort="none")
def shifted_sigmoid(x: torch.Tensor, shift: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.sigmoid(x[tile] + shift)
    return out


@helion.kernel(backend="mlir", static_shapes=True)
def small_blocks_add_one(x: torch.Tensor) -> torch.Tensor:
    """``x + 1`` under a block size below 64, ``x + 2`` otherwise: the host code's constexpr
    flag of the block size selects the branch per config."""
    (n,) = x.shape
    block = hl.register_block_size(n)
    small = hl.constexpr(block < 64)
    out = torch.empty_like(x)
    for tile in hl.tile(n, block_size=block):
        if small:
            out[tile] = x[tile] + 1
        else:
            out[tile] = x[tile] + 2
    return out
