"""Kernels for tests/test_user_messages.py, as a new user writes them: host code with tensor
operations outside the tile loops (each one a Helion warning), kernels without a config, and
one whose config has nothing to tune on CPU (``hl.grid`` only)."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def host_statistics(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    lengths = offsets[1:] - offsets[:-1]
    _mean_length = lengths.float().mean()
    _shift = x.mean()
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2.0
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def quiet_host_statistics(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    _lengths = offsets[1:] - offsets[:-1]
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2.0
    return out


def scale_rows(x: torch.Tensor) -> torch.Tensor:
    """Without a config: Helion's default config (block size 32 for the rows)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] * 3.0
    return out


def shift_rows(x: torch.Tensor) -> torch.Tensor:
    """Without a config, like ``scale_rows`` (a kernel of its own, hinted at once)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] + 1.0
    return out


def double_each(x: torch.Tensor) -> torch.Tensor:
    """One program per element: no block size, no reduction, nothing a config changes on CPU."""
    out = torch.empty_like(x)
    for i in hl.grid(x.size(0)):
        out[i] = x[i] * 2.0
    return out
