"""Un-permute expert outputs back to token order after an activation: a scatter store
``out[perm[tile_n], tile_d] = silu(y[tile_n, tile_d])``; ``perm`` is a permutation, so every
row is written exactly once.

Exercises: ``store`` with a loaded int64 index tile (a scatter, element by element) on ragged
row and column tiles; ``F.silu`` (which Helion traces as ``x / (1 + exp(-x))``).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def moe_unpermute(y: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    rows, hidden = y.shape
    out = torch.empty_like(y)
    for tile_n, tile_d in hl.tile([rows, hidden]):
        out[perm[tile_n], tile_d] = torch.nn.functional.silu(y[tile_n, tile_d])
    return out


KERNEL = moe_unpermute
TOLERANCE = dict(rtol=1e-5, atol=1e-6)
SHAPES = {"divisible": (64, 64), "ragged": (45, 70)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, hidden = SHAPES[shape]
    gen = torch.Generator().manual_seed(25)
    return torch.randn(rows, hidden, generator=gen).to(dtype or torch.float32), torch.randperm(rows, generator=gen)


def reference(y: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    out[perm] = torch.nn.functional.silu(y)
    return out


def main() -> None:
    from _common import run_example

    run_example("moe_unpermute", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
