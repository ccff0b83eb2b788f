"""Kernels whose operands of lower rank broadcast by tile, for tests/test_implicit_broadcast.py:
``bias[tile_m]`` on a ``[tile_m, tile_n]`` tile is one bias per row (Helion reads it as
``bias[tile_m][:, None]``), whatever the block sizes."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def add_row_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + bias[tile_m]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def scale_and_shift(x: torch.Tensor, row_shift: torch.Tensor, col_scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * col_scale[tile_n] + row_shift[tile_m]
    return out


@helion.kernel(config=helion.Config(block_sizes=[2, 8, 16]))
def add_channel_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A ``[batch, channel, width]`` tensor plus one bias per channel (the middle dim)."""
    out = torch.empty_like(x)
    for tile_b, tile_c, tile_w in hl.tile(x.size()):
        out[tile_b, tile_c, tile_w] = x[tile_b, tile_c, tile_w] + bias[tile_c]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def scale_rows(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        block = x[tile_m, tile_n]
        out[tile_m, tile_n] = block * scale[tile_m].expand_as(block)
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def floor_rows(x: torch.Tensor, low: torch.Tensor) -> torch.Tensor:
    """Each row of ``x`` raised to at least its own floor."""
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = torch.maximum(x[tile_m, tile_n], low[tile_m])
    return out


@helion.kernel(config=helion.Config(block_sizes=[4]))
def add_to_last_dim(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x[tile, :, :] + w``: two whole dims of ``w``'s size could take it; torch's last one does."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :, :] = x[tile, :, :] + w[:]
    return out


@helion.kernel(config=helion.Config(block_sizes=[4, 8, 8]))
def add_transposed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``b[tile_w, tile_b]`` on a ``[tile_b, tile_c, tile_w]`` tile: its tiles out of the result's order."""
    out = torch.empty_like(a)
    for tile_b, tile_c, tile_w in hl.tile(a.size()):
        out[tile_b, tile_c, tile_w] = a[tile_b, tile_c, tile_w] + b[tile_w, tile_b]
    return out


@helion.kernel(config=helion.Config(block_sizes=[4, 8, 8]))
def add_row_under_new_axis(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``b[None, tile_w]`` on a ``[tile_b, tile_c, tile_w]`` tile: the unit dim stays before the tile."""
    out = torch.empty_like(a)
    for tile_b, tile_c, tile_w in hl.tile(a.size()):
        out[tile_b, tile_c, tile_w] = a[tile_b, tile_c, tile_w] + b[None, tile_w]
    return out
