"""Elementwise ``exp`` over a flattened tensor.

Exercises: a 1-D grid over ``x.numel()`` with host-side ``view`` (host tensors that are views),
``aten.exp.default``. Ragged sizes leave a partial last tile.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[128]))
def exp_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    x_flat = x.view(-1)
    out_flat = out.view(-1)
    for tile in hl.tile(x_flat.size(0)):
        out_flat[tile] = torch.exp(x_flat[tile])
    return out


KERNEL = exp_kernel
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (16, 128), "ragged": (37, 51)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(x)


def main() -> None:
    from _common import run_example

    run_example("exp", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
