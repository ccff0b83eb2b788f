"""Reciprocal square root by Newton iteration, run for ``iters`` steps (an int argument).

``y <- y * (1.5 - 0.5 * a * y * y)`` from ``y = 1`` converges for ``0 < a < 3``; the trip count
is a run-time scalar, so the loop stays a loop.
Exercises: ``_while_loop`` with ``WhileConditionGraphInfo`` comparing a 0-d int32 counter
(``hl.zeros([])``) to an int scalar argument (``_get_symnode('u0')``), and a
``WhileLoopGraphInfo`` body carrying the counter and a tile of values.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64]))
def newton_rsqrt(x: torch.Tensor, iters: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        a = x[tile]
        y = hl.full([tile], 1.0, dtype=torch.float32)
        step = hl.zeros([], dtype=torch.int32)
        while step < iters:
            y = y * (1.5 - 0.5 * a * y * y)
            step = step + 1
        out[tile] = y
    return out


KERNEL = newton_rsqrt
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": 256, "ragged": 201}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(26)
    x = (0.5 + 1.5 * torch.rand(SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return x, 8


def reference(x: torch.Tensor, iters: int) -> torch.Tensor:
    return torch.rsqrt(x)


def main() -> None:
    from _common import run_example

    run_example("newton_rsqrt", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
