"""Scaled outer product with a row offset: ``out[i, j] = alpha * x[i] * y[j] + bias[i]``.

The 1-D tiles become ``[tile_i, 1]`` and ``[1, tile_j]`` blocks with ``x_tile[:, None]`` and
``y_tile[None, :]`` (the same as ``hl.subscript(y_tile, [None, slice(None)])``; the explicit call
works too but makes reference mode index with a list, which torch warns about).
Exercises: ``subscript`` with ``None``/``slice`` entries, broadcasting of ``[m, 1] * [1, n]``,
a float scalar argument, 1-D loads on a 2-D grid.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def outer_product(
    x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float
) -> torch.Tensor:
    out = torch.empty([x.size(0), y.size(0)], dtype=x.dtype, device=x.device)
    for tile_i, tile_j in hl.tile(out.size()):
        col = x[tile_i][:, None]
        row = y[tile_j][None, :]
        out[tile_i, tile_j] = alpha * col * row + bias[tile_i][:, None]
    return out


KERNEL = outer_product
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_i, size_j = SHAPES[shape]
    gen = torch.Generator().manual_seed(38)
    dtype = dtype or torch.float32
    x = torch.randn(size_i, generator=gen).to(dtype)
    y = torch.randn(size_j, generator=gen).to(dtype)
    bias = torch.randn(size_i, generator=gen).to(dtype)
    return x, y, bias, 0.5


def reference(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float) -> torch.Tensor:
    return alpha * torch.outer(x, y) + bias[:, None]


def main() -> None:
    from _common import run_example

    run_example("outer_product", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
