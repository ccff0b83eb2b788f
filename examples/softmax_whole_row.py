"""Row softmax over one whole-row tile whose block size the host computes: ``next_power_of_2(cols)``.

With ``static_shapes=True`` (this example) Helion folds ``block_cols`` to an int and the row
tile is a padded static tile; with ``static_shapes=False`` (the example tests run it both
ways) ``cols`` is symbolic, so ``block_cols`` is a runtime tile size: the emitted function
takes it as an argument and the row tiles are dynamic, holding exactly the row.
Exercises: a host-computed block size for a tile dimension, ``aten.amax``/``exp``/``sum`` over
a tile dimension (masked on ragged static tiles, exact on runtime ones).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[4]))
def softmax_whole_row(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    block_cols = helion.next_power_of_2(cols)
    out = torch.empty_like(x)
    for tile_r, tile_c in hl.tile([rows, cols], block_size=[None, block_cols]):
        row = x[tile_r, tile_c].to(torch.float32)
        num = torch.exp(row - torch.amax(row, dim=-1, keepdim=True))
        out[tile_r, tile_c] = (num / torch.sum(num, dim=-1, keepdim=True)).to(out.dtype)
    return out


KERNEL = softmax_whole_row
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(55)
    return ((3 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), -1).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("softmax_whole_row", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
