"""Kernels drawing random numbers, for tests/test_random_numbers.py: Helion's Philox generator
with an explicit seed (dropout, integer jitter, counters given as offsets) and torch's random
ops inside the loops, whose seeds the host code draws from torch's generator at each call."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def dropout(x: torch.Tensor, p: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverted dropout; also returns the uniform numbers the mask was drawn from."""
    out = torch.empty_like(x)
    draws = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        u = hl.rand([tile_m, tile_n], seed=seed)
        draws[tile_m, tile_n] = u
        out[tile_m, tile_n] = torch.where(u > p, x[tile_m, tile_n] / (1 - p), 0.0)
    return out, draws


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def jitter(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` plus a random integer in [-9, 9) per element (negative draws included)."""
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + hl.randint([tile_m, tile_n], low=-9, high=9, seed=seed)
    return out


@helion.kernel(config=helion.Config(block_sizes=[32]))
def strided_stream(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` plus, for each row ``i``, the uniform number at counter ``3 * i + 1`` of the stream
    (``offsets=``)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        counters = hl.tile_index(tile).to(torch.int64) * 3 + 1
        out[tile, :] = x[tile, :] + hl.rand([], seed=seed, offsets=counters)[:, None]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def noise_like(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.rand_like`` and ``torch.randn`` in the loop: seeds drawn per call from torch's generator."""
    uniform = torch.empty_like(x)
    normal = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        uniform[tile_m, tile_n] = torch.rand_like(x[tile_m, tile_n])
        normal[tile_m, tile_n] = torch.randn((tile_m, tile_n), dtype=x.dtype, device=x.device)
    return uniform, normal
