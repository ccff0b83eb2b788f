"""Kernels comparing floats, for tests/test_nan_semantics.py, written as users write them:
activations and clamps of a tile (literal and per-call bounds, a bound tensor), the larger and
smaller of two tensors, and row statistics (maxima, minima, their positions, a softmax, a row
maximum taken chunk by chunk and through ``hl.reduce``), each with its torch reference."""

from __future__ import annotations

import helion
import helion.language as hl
import torch
import torch.nn.functional as F


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def activations(
    x: torch.Tensor, y: torch.Tensor, lo: float, hi: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    clipped, bounded, relu, hard, larger, smaller, floor = (torch.empty_like(x) for _ in range(7))
    for tile_m, tile_n in hl.tile(x.size()):
        v, w = x[tile_m, tile_n], y[tile_m, tile_n]
        clipped[tile_m, tile_n] = torch.clamp(v, -1.0, 1.0)
        bounded[tile_m, tile_n] = torch.clamp(v, min=lo, max=hi)
        relu[tile_m, tile_n] = torch.relu(v)
        hard[tile_m, tile_n] = F.hardsigmoid(v) + F.relu6(w)
        larger[tile_m, tile_n] = torch.maximum(v, w)
        smaller[tile_m, tile_n] = torch.minimum(v, w)
        floor[tile_m, tile_n] = torch.clamp_min(v, w)
    return clipped, bounded, relu, hard, larger, smaller, floor


def activations_reference(x: torch.Tensor, y: torch.Tensor, lo: float, hi: float) -> tuple[torch.Tensor, ...]:
    return (torch.clamp(x, -1.0, 1.0), torch.clamp(x, min=lo, max=hi), torch.relu(x),
            F.hardsigmoid(x) + F.relu6(y), torch.maximum(x, y), torch.minimum(x, y), torch.clamp_min(x, y))


#: Outputs of ``activations`` whose zero signs torch fixes (``clamp(-0.0, 0, 1)`` is -0.0): torch's
#: ``maximum``/``minimum``/``clamp_min(x, tensor)`` give either zero for two equal zeros,
#: depending on whether its scalar or vector code ran.
ACTIVATIONS_SIGNED_ZEROS = (0, 1, 2, 3)


def max_combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.maximum(a, b)


@helion.kernel(config=helion.Config(block_sizes=[4]))
def row_extremes(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, cols = x.size()
    top, bottom, best, reduced = (torch.empty([rows], dtype=x.dtype, device=x.device) for _ in range(4))
    best_at, lowest_at = (torch.empty([rows], dtype=torch.int64, device=x.device) for _ in range(2))
    probs = torch.empty_like(x)
    for tile in hl.tile(rows):
        row = x[tile, :]
        top[tile] = torch.amax(row, dim=-1)
        bottom[tile] = torch.amin(row, dim=-1)
        value, index = torch.max(row, dim=-1)
        best[tile] = value
        best_at[tile] = index
        lowest_at[tile] = torch.argmin(row, dim=-1)
        probs[tile, :] = torch.softmax(row, dim=-1)
        reduced[tile] = hl.reduce(max_combine, row, dim=1)
    return top, bottom, best, best_at, lowest_at, probs, reduced


@helion.kernel(config=helion.Config(block_sizes=[4]))
def rollable_row_extremes(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``row_extremes`` without its ``hl.reduce``, which keeps Helion from rolling the row into a loop."""
    rows, cols = x.size()
    top, bottom, best = (torch.empty([rows], dtype=x.dtype, device=x.device) for _ in range(3))
    best_at, lowest_at = (torch.empty([rows], dtype=torch.int64, device=x.device) for _ in range(2))
    probs = torch.empty_like(x)
    for tile in hl.tile(rows):
        row = x[tile, :]
        top[tile] = torch.amax(row, dim=-1)
        bottom[tile] = torch.amin(row, dim=-1)
        value, index = torch.max(row, dim=-1)
        best[tile] = value
        best_at[tile] = index
        lowest_at[tile] = torch.argmin(row, dim=-1)
        probs[tile, :] = torch.softmax(row, dim=-1)
    return top, bottom, best, best_at, lowest_at, probs


def row_extremes_reference(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    best, best_at = torch.max(x, dim=-1)
    return (torch.amax(x, dim=-1), torch.amin(x, dim=-1), best, best_at, torch.argmin(x, dim=-1),
            torch.softmax(x, dim=-1), torch.amax(x, dim=-1))


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def chunked_row_max(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(rows):
        running = hl.full([tile_m], float("-inf"), dtype=x.dtype)
        for tile_n in hl.tile(cols):
            running = torch.maximum(running, torch.amax(x[tile_m, tile_n], dim=-1))
        out[tile_m] = running
    return out


def chunked_row_max_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.amax(x, dim=-1)
