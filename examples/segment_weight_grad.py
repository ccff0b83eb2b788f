"""Grouped-GEMM weight gradient: ``dW[e] = X_e^T @ dY_e`` over the rows of segment e.

One program per segment and output tile; the reduction loop ``hl.tile(start, end)`` runs over
the segment's rows with bounds loaded from ``offsets`` (empty segments give zeros), and
``torch.addmm`` multiplies a transposed tile.
Exercises: ``aten.addmm`` with a transposed operand (``permute``) whose contraction dim is a
data-dependent, ragged row tile (zero-padded lanes), a store at a scalar program id.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]))
def segment_weight_grad(x: torch.Tensor, dy: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    _rows, d_in = x.shape
    d_out = dy.size(1)
    segments = offsets.size(0) - 1
    dw = torch.empty([segments, d_in, d_out], dtype=torch.float32, device=x.device)
    for e in hl.grid(segments):
        start = offsets[e]
        end = offsets[e + 1]
        for tile_i, tile_o in hl.tile([d_in, d_out]):
            acc = hl.zeros([tile_i, tile_o], dtype=torch.float32)
            for tile_r in hl.tile(start, end):
                acc = torch.addmm(acc, x[tile_r, tile_i].T, dy[tile_r, tile_o])
            dw[e, tile_i, tile_o] = acc
    return dw


KERNEL = segment_weight_grad
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (rows per segment, d_in, d_out)
SHAPES = {"divisible": ([16, 32, 0, 48], 32, 16), "ragged": ([5, 0, 19, 2, 30], 24, 20)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    lengths, d_in, d_out = SHAPES[shape]
    gen = torch.Generator().manual_seed(43)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    rows = int(offsets[-1])
    x = torch.randn(rows, d_in, generator=gen).to(dtype or torch.float32)
    return x, torch.randn(rows, d_out, generator=gen).to(dtype or torch.float32), offsets


def reference(x: torch.Tensor, dy: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    bounds = offsets.tolist()
    return torch.stack([x[s:e].float().T @ dy[s:e].float() for s, e in zip(bounds[:-1], bounds[1:])])


def main() -> None:
    from _common import run_example

    run_example("segment_weight_grad", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
