"""Elementwise add of two 2-D tensors.

Exercises: a 2-D top-level ``hl.tile`` grid (one root graph), ``load``/``store`` indexed by
two tiles, ``aten.add.Tensor``. Ragged shapes leave partial edge tiles.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + y[tile_m, tile_n]
    return out


KERNEL = add
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(0)
    dtype = dtype or torch.float32
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    y = torch.randn(rows, cols, generator=gen).to(dtype)
    return x, y


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def main() -> None:
    from _common import run_example

    run_example("add", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
