"""Row-wise prefix sum over column tiles: ``hl.cumsum`` per tile plus a carried row total.

Each column tile computes its local inclusive scan and adds the running total of all earlier
tiles; the total then grows by the tile's sum.
Exercises: ``hl.cumsum`` (``_associative_scan``) inside a ``_for_loop``, a loop-carried
carry vector, ``subscript`` broadcast of the carry, int64 inputs (exact results).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def cumsum_looped(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        carry = hl.zeros([tile_r], dtype=x.dtype)
        for tile_c in hl.tile(cols):
            chunk = x[tile_r, tile_c]
            out[tile_r, tile_c] = hl.cumsum(chunk, dim=1) + carry[:, None]
            carry = carry + chunk.sum(dim=1)
    return out


KERNEL = cumsum_looped
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(22)
    x = torch.randint(-1000, 1000, SHAPES[shape], generator=gen).to(dtype or torch.int64)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=1).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("cumsum_looped", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
