"""Two-level inclusive prefix sum of a vector: block sums, barrier, then block-local scans.

Phase 1 writes each tile's sum to ``block_sums[tile.id]``. After ``hl.barrier()``, phase 2
scans its tile with ``hl.cumsum`` and adds the sum of all earlier blocks, read in a loop over
``hl.tile(tile.id)`` (a loop whose end is the tile id). One registered block size
(``hl.register_block_size``) drives both phases and the host-side size of ``block_sums``.
Exercises: ``tile_id`` as a store index and as a ``_for_loop`` end, ``hl.register_block_size``
with ``block_size=`` on ``hl.tile``, two phases, ``_associative_scan``, ``aten.sum.default``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64, 16]))
def block_scan(x: torch.Tensor) -> torch.Tensor:
    total = x.size(0)
    block = hl.register_block_size(total)
    block_sums = torch.empty([helion.cdiv(total, block)], dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    for tile in hl.tile(total, block_size=block):
        block_sums[tile.id] = torch.sum(x[tile].to(torch.float32))
    hl.barrier()
    for tile in hl.tile(total, block_size=block):
        carry = hl.zeros([], dtype=torch.float32)
        for tile_prev in hl.tile(tile.id):
            carry = carry + torch.sum(block_sums[tile_prev])
        out[tile] = (hl.cumsum(x[tile].to(torch.float32), dim=0) + carry).to(out.dtype)
    return out


KERNEL = block_scan
TOLERANCE = dict(rtol=1e-4, atol=1e-3)
SHAPES = {"divisible": 1024, "ragged": 1000}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(34)
    x = torch.randn(SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x.float(), dim=0).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("block_scan", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
