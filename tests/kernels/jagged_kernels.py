"""Kernels over rows of different lengths with ``hl.jagged_tile``, for tests/test_jagged_tiles.py:
each lane of a row past the row's own length is masked (reads 0, writes nothing), while the
loop runs to the longest row of the tile."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[4, 8]))
def packed_sums_of_squares(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Row ``r`` of a packed jagged tensor is ``values[offsets[r]:offsets[r + 1]]``."""
    rows = offsets.size(0) - 1
    out = torch.zeros([rows], dtype=values.dtype, device=values.device)
    for tile_r in hl.tile(rows):
        starts = offsets[tile_r]
        lengths = offsets[tile_r.index + 1] - starts
        acc = hl.zeros([tile_r], dtype=values.dtype)
        for tile_k in hl.jagged_tile(lengths):
            picked = values[starts[:, None] + tile_k.index[None, :]]
            acc = acc + (picked * picked).sum(dim=1)
        out[tile_r] = acc
    return out


@helion.kernel(config=helion.Config(block_sizes=[4, 8]))
def prefix_maxima(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The largest of the first ``lengths[r]`` entries of row ``r`` (-inf for an empty row)."""
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_r in hl.tile(x.size(0)):
        best = hl.full([tile_r], float("-inf"), dtype=x.dtype)
        row_lengths = lengths[tile_r]
        for tile_k in hl.jagged_tile(row_lengths):
            best = torch.maximum(best, x[tile_r, tile_k].amax(dim=1))
        out[tile_r] = best
    return out


@helion.kernel(config=helion.Config(block_sizes=[4, 8]))
def scale_prefixes(x: torch.Tensor, lengths: torch.Tensor, scale: float) -> torch.Tensor:
    """The first ``lengths[r]`` entries of row ``r`` scaled; the rest of ``out`` stays zero."""
    out = torch.zeros_like(x)
    for tile_r in hl.tile(x.size(0)):
        row_lengths = lengths[tile_r]
        for tile_k in hl.jagged_tile(row_lengths):
            out[tile_r, tile_k] = x[tile_r, tile_k] * scale
    return out


@helion.kernel(config=helion.Config(block_sizes=[2, 4, 8]))
def grid_prefix_means(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """For a ``[rows, cols, depth]`` tensor, the mean of the first ``lengths[i, j]`` entries of
    ``x[i, j]`` (a jagged tile under a 2-D parent)."""
    rows, cols = lengths.size()
    out = torch.zeros([rows, cols], dtype=x.dtype, device=x.device)
    for tile_i, tile_j in hl.tile([rows, cols]):
        counts = lengths[tile_i, tile_j]
        acc = hl.zeros([tile_i, tile_j], dtype=x.dtype)
        for tile_k in hl.jagged_tile(counts):
            acc += x[tile_i, tile_j, tile_k].sum(dim=2)
        out[tile_i, tile_j] = acc / counts.clamp(min=1).to(x.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[4, 8]))
def label_counts(labels: torch.Tensor, offsets: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """How often each label occurs in a packed jagged tensor of labels, counted with atomics."""
    rows = offsets.size(0) - 1
    for tile_r in hl.tile(rows):
        starts = offsets[tile_r]
        row_lengths = offsets[tile_r.index + 1] - starts
        for tile_k in hl.jagged_tile(row_lengths):
            picked = labels[starts[:, None] + tile_k.index[None, :]]
            hl.atomic_add(counts, [picked], 1)
    return counts
