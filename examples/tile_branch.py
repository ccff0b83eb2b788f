"""Triangular mask by tile position: tiles fully above the diagonal are zero-filled without loads.

For lower-triangular masking of a square matrix (``torch.tril`` with a diagonal offset given
as an int argument), a tile whose first column ``tile_c.begin`` lies past its last row's diagonal
``tile_r.end - 1 + diagonal`` is all zero; other tiles apply an element mask built from
``tile.index``.
Exercises: ``_if`` whose test is SymInt arithmetic on ``tile_begin``/``tile_end`` and an int
scalar argument, an if branch storing ``hl.zeros`` and an else branch with ``tile_index`` masks,
``aten.where``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def tile_branch(x: torch.Tensor, diagonal: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r, tile_c in hl.tile(x.size()):
        if tile_c.begin > tile_r.end - 1 + diagonal:
            out[tile_r, tile_c] = hl.zeros([tile_r, tile_c], dtype=x.dtype)
        else:
            keep = tile_c.index[None, :] <= tile_r.index[:, None] + diagonal
            out[tile_r, tile_c] = torch.where(keep, x[tile_r, tile_c], 0.0)
    return out


KERNEL = tile_branch
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (64, 64), "ragged": (45, 45)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(25)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return x, 1


def reference(x: torch.Tensor, diagonal: int) -> torch.Tensor:
    return torch.tril(x, diagonal=diagonal)


def main() -> None:
    from _common import run_example

    run_example("tile_branch", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
