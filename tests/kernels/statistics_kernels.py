"""Kernels for tests/test_input_precision.py, written as users write them: torch's row
statistics (``var``, ``std``, ``var_mean``) in one kernel, integer bucketing with ``//``,
``%`` and ``fmod``, and float remainders; each with its torch reference."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def row_statistics(x: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, _cols = x.size()
    variance = torch.empty([rows], dtype=x.dtype, device=x.device)
    spread = torch.empty([rows], dtype=x.dtype, device=x.device)
    normed = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :]
        variance[tile_r] = torch.var(row, dim=-1)
        spread[tile_r] = row.std(-1, correction=0)
        h = row.to(torch.float32)
        var, mean = torch.var_mean(h, dim=-1, keepdim=True, correction=0)
        normed[tile_r, :] = ((h - mean) * torch.rsqrt(var + eps)).to(x.dtype)
    return variance, spread, normed


def row_statistics_reference(x: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    h = x.float()
    normed = torch.nn.functional.layer_norm(h, [x.size(-1)], eps=eps)
    return h.var(-1).to(x.dtype), h.std(-1, correction=0).to(x.dtype), normed.to(x.dtype)


@helion.kernel(config=helion.Config(block_sizes=[32]))
def float_remainders(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    by_tensor = torch.empty_like(x)
    by_number = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        by_tensor[tile] = torch.remainder(x[tile], y[tile])
        by_number[tile] = x[tile] % -0.75
    return by_tensor, by_number


def float_remainders_reference(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.remainder(x, y), x % -0.75
