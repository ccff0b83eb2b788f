"""Small kernels whose device IR provides real ATen nodes, for the importer and
normalization tests."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[32, 32]))
def add_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[1]))
def softmax_kernel(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        out[tile_r, :] = torch.nn.functional.softmax(x[tile_r, :], dim=1)
    return out


@helion.kernel(config=helion.Config(block_sizes=[32, 32, 32]))
def matmul_kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rows, inner = x.size()
    _, cols = w.size()
    out = torch.empty([rows, cols], dtype=x.dtype, device=x.device)
    for tile_r, tile_c in hl.tile([rows, cols]):
        acc = hl.zeros([tile_r, tile_c], dtype=torch.float32)
        for tile_k in hl.tile(inner):
            acc = torch.addmm(acc, x[tile_r, tile_k], w[tile_k, tile_c])
        out[tile_r, tile_c] = acc.to(x.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def row_max_kernel(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows], dtype=torch.int64, device=x.device)
    for tile_r in hl.tile(rows):
        values, indices = torch.max(x[tile_r, :], dim=1)
        out[tile_r] = indices + values.to(torch.int64)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def negate(x: torch.Tensor) -> torch.Tensor:
    """``-x``, integers included (Helion's Philox generator negates int64 values)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = -x[tile]
    return out
