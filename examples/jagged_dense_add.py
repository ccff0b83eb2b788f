"""Jagged + dense: row i of a prefix-sparse jagged matrix (its first ``K_i`` entries, packed
in the 1-D ``x_data`` at ``x_offsets[i]``) added to row i of a dense matrix.

The jagged part is loaded from the 1-D buffer with a 2-D index tile
``starts[:, None] + tile_c.index[None, :]`` and an ``extra_mask``; the rest of each row is
copied by a second loop that starts at the data-dependent ``max_nnz``.
Exercises: a 1-D tensor indexed by a 2-D index tile (a gather), ``extra_mask`` on a gather,
loop bounds from a reduction of loaded offsets (``nnz.amax()``) as end of one loop and begin
of the next, ``tile_index``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 16, 16]))
def jagged_dense_add(x_data: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    num_rows = y.size(0)
    out = torch.zeros_like(y)
    for tile_r in hl.tile(num_rows):
        starts = x_offsets[tile_r]
        ends = x_offsets[tile_r.index + 1]
        nnz = ends - starts
        max_nnz = nnz.amax()
        for tile_c in hl.tile(0, max_nnz):
            x_slice = hl.load(x_data, [starts[:, None] + tile_c.index[None, :]],
                              extra_mask=tile_c.index[None, :] < nnz[:, None])
            out[tile_r, tile_c] = y[tile_r, tile_c] + x_slice
        for tile_c in hl.tile(max_nnz, out.size(1)):
            out[tile_r, tile_c] = y[tile_r, tile_c]
    return out


KERNEL = jagged_dense_add
TOLERANCE = dict(rtol=1e-6, atol=1e-6)
# (rows, columns of the dense matrix)
SHAPES = {"divisible": (32, 64), "ragged": (27, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(35)
    lengths = torch.randint(0, cols + 1, (rows,), generator=gen)
    offsets = torch.zeros(rows + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, dim=0)
    x_data = torch.randn(int(offsets[-1]), generator=gen).to(dtype or torch.float32)
    return x_data, offsets, torch.randn(rows, cols, generator=gen).to(dtype or torch.float32)


def reference(x_data: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = y.clone()
    bounds = x_offsets.tolist()
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        out[i, : b - a] += x_data[a:b]
    return out


def main() -> None:
    from _common import run_example

    run_example("jagged_dense_add", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
