"""Row sum with an explicit inner loop over column tiles and a float32 accumulator.

Exercises: a nested ``hl.tile`` (``_for_loop`` + ``ForLoopGraphInfo``), loop-carried
accumulator (``_new_var``/``_phi``), ``hl.zeros`` (``full``), ``aten.sum.dim_IntList`` of a tile
whose out-of-range lanes are loaded as 0 (no ``_mask_to`` needed), ragged rows and columns.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def row_sum(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows], dtype=x.dtype, device=x.device)
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            acc = acc + x[tile_r, tile_c].to(torch.float32).sum(dim=1)
        out[tile_r] = acc.to(out.dtype)
    return out


KERNEL = row_sum
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().sum(dim=1).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("row_sum", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
