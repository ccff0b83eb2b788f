"""Per-column max, min, sum and "has a negative" flag, merged across row tiles with atomics.

Each ``[tile_r, tile_c]`` program reduces its block over rows and merges into the column
results: ``hl.atomic_max``, ``hl.atomic_min``, ``hl.atomic_add`` and ``hl.atomic_cas``
(the flag goes 0 -> 1 when the block has a negative; once 1 it stays 1, whatever the order).
The outputs start at -inf / +inf / 0 / 0 on the host. Every index is a column tile, so
lanes of one call never collide.
Exercises: ``atomic_max``, ``atomic_min``, ``atomic_add``, ``atomic_cas`` with tile indices,
``aten.amax``/``amin``/``sum`` over dim 0 with ``_mask_to`` fills, host ``torch.full``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def column_stats(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, cols = x.size()
    col_max = torch.full([cols], float("-inf"), dtype=torch.float32, device=x.device)
    col_min = torch.full([cols], float("inf"), dtype=torch.float32, device=x.device)
    col_sum = torch.zeros([cols], dtype=torch.float32, device=x.device)
    has_negative = torch.zeros([cols], dtype=torch.int32, device=x.device)
    for tile_r, tile_c in hl.tile([rows, cols]):
        block = x[tile_r, tile_c]
        hl.atomic_max(col_max, [tile_c], torch.amax(block, dim=0))
        hl.atomic_min(col_min, [tile_c], torch.amin(block, dim=0))
        hl.atomic_add(col_sum, [tile_c], torch.sum(block, dim=0))
        block_negative = (torch.amin(block, dim=0) < 0).to(torch.int32)
        hl.atomic_cas(has_negative, [tile_c], 0, block_negative)
    return col_max, col_min, col_sum, has_negative


KERNEL = column_stats
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(29)
    # Offset so that some columns have no negative entry at all.
    x = (torch.randn(*SHAPES[shape], generator=gen) + 2.5).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    xf = x.float()
    has_negative = (xf < 0).any(dim=0).to(torch.int32)
    return xf.amax(dim=0), xf.amin(dim=0), xf.sum(dim=0), has_negative


def main() -> None:
    from _common import run_example

    run_example("column_stats", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
