"""Per block of ``route_block`` columns, a routing table sends the block to one of two row
accumulators (sum, sum of squares) or, for route 2, copies it to a second output.

Exercises: ``if``/``elif``/``else`` on a loaded int32 route inside two nested loops (an
``hl.grid`` over blocks and an ``hl.tile`` over the block's columns, ragged when the column
tile does not divide the block), each branch reassigning a different loop-carried
accumulator (the other passes through unchanged) and one branch storing; two outputs.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def routed_accumulate(x: torch.Tensor, routes: torch.Tensor, route_block: int) -> tuple[torch.Tensor, torch.Tensor]:
    m, _n = x.shape
    blocks = routes.size(0)
    passthrough = torch.zeros_like(x)
    sums = torch.empty([m, 2], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        left = hl.zeros([tile_m], dtype=torch.float32)
        right = hl.zeros([tile_m], dtype=torch.float32)
        for blk in hl.grid(blocks):
            route = routes[blk]
            for tile_n in hl.tile(blk * route_block, blk * route_block + route_block):
                block = x[tile_m, tile_n].to(torch.float32)
                if route == 0:
                    left = left + block.sum(dim=1)
                elif route == 1:
                    right = right + (block * block).sum(dim=1)
                else:
                    passthrough[tile_m, tile_n] = block.to(passthrough.dtype)
        sums[tile_m, 0] = left
        sums[tile_m, 1] = right
    return sums, passthrough


KERNEL = routed_accumulate
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
ROUTE_BLOCK = 24
# (rows, columns): columns are a multiple of ROUTE_BLOCK
SHAPES = {"divisible": (32, 96), "ragged": (29, 72)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    m, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(17)
    x = torch.randn(m, n, generator=gen).to(dtype or torch.float32)
    routes = torch.randint(0, 3, (n // ROUTE_BLOCK,), generator=gen, dtype=torch.int32)
    return x, routes, ROUTE_BLOCK


def reference(x: torch.Tensor, routes: torch.Tensor, route_block: int) -> tuple[torch.Tensor, torch.Tensor]:
    route = routes.repeat_interleave(route_block)
    xf = x.float()
    sums = torch.stack([(xf * (route == 0)).sum(dim=1), (xf * xf * (route == 1)).sum(dim=1)], dim=1)
    return sums, x * (route == 2)


def main() -> None:
    from _common import run_example

    run_example("routed_accumulate", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
