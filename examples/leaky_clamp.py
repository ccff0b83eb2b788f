"""Leaky ReLU followed by a symmetric clamp, both parameterised by float scalar arguments.

``y = where(x > 0, x, slope * x)`` then ``where(|y| > limit, sign(y) * limit, y)``.
Exercises: ``aten.where.self`` whose branches are tensors computed from float scalar arguments
(``_get_symnode('zuf0')``/``('zuf1')``), ``aten.gt.Scalar``/``abs``/``sign``, a 2-D grid.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def leaky_clamp(x: torch.Tensor, slope: float, limit: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r, tile_c in hl.tile(x.size()):
        vals = x[tile_r, tile_c]
        leaky = torch.where(vals > 0, vals, vals * slope)
        out[tile_r, tile_c] = torch.where(
            torch.abs(leaky) > limit, torch.sign(leaky) * limit, leaky
        )
    return out


KERNEL = leaky_clamp
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(35)
    x = (3 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return x, 0.1, 2.5


def reference(x: torch.Tensor, slope: float, limit: float) -> torch.Tensor:
    return torch.clamp(torch.nn.functional.leaky_relu(x, slope), -limit, limit)


def main() -> None:
    from _common import run_example

    run_example("leaky_clamp", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
