"""Average pooling of adjacent column pairs: ``out[:, j] = (x[:, 2j] + x[:, 2j + 1]) / 2``.

The column loop is ``hl.grid(0, cols, 2)``: a device loop with a step, whose index is a scalar
SymInt used directly in loads (``x[tile_r, col]``) and, halved, in the store.
Exercises: ``_for_loop_step`` (a stepped ``hl.grid`` inside a tile), scalar SymInt indices,
``operator.floordiv``/``operator.add`` on SymInts, column loads of a row tile.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def pairwise_pool(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows, cols // 2], dtype=x.dtype, device=x.device)
    for tile_r in hl.tile(rows):
        for col in hl.grid(0, cols, 2):
            out[tile_r, col // 2] = (x[tile_r, col] + x[tile_r, col + 1]) * 0.5
    return out


KERNEL = pairwise_pool
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
# Column counts stay even (pairs); "ragged" has a partial last row tile.
SHAPES = {"divisible": (32, 16), "ragged": (37, 14)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(39)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return (x[:, 0::2] + x[:, 1::2]) * 0.5


def main() -> None:
    from _common import run_example

    run_example("pairwise_pool", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
