"""Column-wise bitwise OR / AND / XOR of int32 masks via ``hl.reduce`` and bitwise atomics.

Each ``[tile_r, tile_c]`` block is reduced over rows with ``hl.reduce`` and the bitwise
combine functions (``torch.bitwise_or`` etc.), then merged into the column result with
``hl.atomic_or`` / ``hl.atomic_and`` / ``hl.atomic_xor``. Masked lanes use each operation's
identity (0 for OR/XOR, -1 for AND) through the ``other`` argument.
Exercises: three ``_reduce`` nodes with ``HelperFunctionGraphInfo`` combines
(``aten.bitwise_or/and/xor.Tensor``), ``atomic_or``, ``atomic_and``, ``atomic_xor``, int32 data.
"""

from __future__ import annotations

import functools

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def column_bitwise(
    masks: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, cols = masks.size()
    col_or = torch.zeros([cols], dtype=torch.int32, device=masks.device)
    col_and = torch.full([cols], -1, dtype=torch.int32, device=masks.device)
    col_xor = torch.zeros([cols], dtype=torch.int32, device=masks.device)
    for tile_r, tile_c in hl.tile([rows, cols]):
        block = masks[tile_r, tile_c]
        hl.atomic_or(col_or, [tile_c], hl.reduce(torch.bitwise_or, block, dim=0, other=0))
        hl.atomic_and(col_and, [tile_c], hl.reduce(torch.bitwise_and, block, dim=0, other=-1))
        hl.atomic_xor(col_xor, [tile_c], hl.reduce(torch.bitwise_xor, block, dim=0, other=0))
    return col_or, col_and, col_xor


KERNEL = column_bitwise
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (64, 64), "ragged": (37, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(30)
    low = torch.randint(0, 1 << 16, (rows, cols), generator=gen)
    # Mostly-set high bits so that AND keeps some of them.
    high = torch.where(torch.rand(rows, cols, generator=gen) < 0.97, 0x7FFF0000, 0)
    masks = (low | high).to(dtype or torch.int32)
    return (masks,)


def reference(masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows = list(masks.unbind(0))
    return (
        functools.reduce(torch.bitwise_or, rows),
        functools.reduce(torch.bitwise_and, rows),
        functools.reduce(torch.bitwise_xor, rows),
    )


def main() -> None:
    from _common import run_example

    run_example("column_bitwise", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
