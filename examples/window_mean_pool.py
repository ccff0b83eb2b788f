"""Average pooling over windows of 8 columns, the last window partial (``ceil_mode``).

Each column tile of ``block_size=8`` is one pooling window; ``torch.mean`` over the tile
divides by the in-bounds width, so the ragged last window averages fewer columns, as
``avg_pool1d(..., ceil_mode=True)`` does.
Exercises: ``aten.mean.dim`` over a ragged tile dimension (its in-bounds part has a dynamic
width: the mean is lowered as a sum divided by the width read at run time, which tosa
needs), a store at ``tile.id``, ``hl.tile(..., block_size=[None, 8])``.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16]))
def window_mean_pool(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, (n + 7) // 8], dtype=x.dtype, device=x.device)
    for tile_m, tile_w in hl.tile([m, n], block_size=[None, 8]):
        out[tile_m, tile_w.id] = torch.mean(x[tile_m, tile_w], dim=1)
    return out


KERNEL = window_mean_pool
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(56)
    return (torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.avg_pool1d(x[:, None, :], kernel_size=8, ceil_mode=True)[:, 0, :]


def main() -> None:
    from _common import run_example

    run_example("window_mean_pool", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
