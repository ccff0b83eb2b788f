"""Kernels with device loops, for the loop-hint config fields (``range_*``, ``static_ranges``)."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

#: A module-level block size: its symbol is the tile-size symbol of the block that uses it.
ROW_CHUNK = 16


@helion.kernel(backend="mlir", static_shapes=True)
def row_scale_loops(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Rows tiled on the grid, columns in a device loop, and a ``range`` loop Helion may make static."""
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        for tile_n in hl.tile(x.size(1)):
            acc = x[tile_m, tile_n] * w[tile_n]
            for _ in range(3):
                acc = acc + 1.0
            out[tile_m, tile_n] = acc
    return out


def row_scale_loops_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w + 3.0


@helion.kernel(backend="mlir", static_shapes=True)
def fixed_chunk_copy(x: torch.Tensor) -> torch.Tensor:
    """A half tensor copied through float, its columns in chunks of the module-level ``ROW_CHUNK``."""
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0), block_size=1):
        for tile_n in hl.tile(x.size(1), block_size=ROW_CHUNK):
            out[tile_m, tile_n] = x[tile_m, tile_n].float() * 2.0
    return out


def fixed_chunk_copy_reference(x: torch.Tensor) -> torch.Tensor:
    return (x.float() * 2.0).to(x.dtype)
