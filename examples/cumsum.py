"""Row-wise inclusive prefix sum with ``torch.cumsum`` on a whole-row block.

Exercises: ``torch.cumsum`` inside a device loop, which Helion lowers to ``_associative_scan``
with an ``aten.add`` combine function (a ``HelperFunctionGraphInfo``); the reduction
dimension is padded to a power of two, and padded lanes sit after the real ones.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def cumsum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r in hl.tile(x.size(0)):
        out[tile_r, :] = torch.cumsum(x[tile_r, :], dim=1)
    return out


KERNEL = cumsum
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=1)


def main() -> None:
    from _common import run_example

    run_example("cumsum", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
