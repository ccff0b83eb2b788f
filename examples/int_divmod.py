"""Integer bucketing of signed int64 timestamps: floor and truncating division and remainder.

For bucket width ``width`` (an int argument) computes ``t // width`` and ``t % width``
(Python floor semantics, remainder has the divisor's sign), and the C-style pair
``torch.div(t, width, rounding_mode="trunc")`` / ``torch.fmod(t, width)``; inputs include
negative values, where the two conventions differ.
Exercises: ``aten.div.Tensor_mode`` (floor and trunc), ``aten.remainder``, ``aten.fmod``
on int64 tiles with an int SymInt divisor, four int64 outputs.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64]))
def int_divmod(
    t: torch.Tensor, width: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    floor_q = torch.empty_like(t)
    floor_r = torch.empty_like(t)
    trunc_q = torch.empty_like(t)
    trunc_r = torch.empty_like(t)
    for tile in hl.tile(t.size(0)):
        vals = t[tile]
        floor_q[tile] = vals // width
        floor_r[tile] = vals % width
        trunc_q[tile] = torch.div(vals, width, rounding_mode="trunc")
        trunc_r[tile] = torch.fmod(vals, width)
    return floor_q, floor_r, trunc_q, trunc_r


KERNEL = int_divmod
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": 512, "ragged": 500}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(32)
    t = torch.randint(-100_000, 100_000, (SHAPES[shape],), generator=gen).to(dtype or torch.int64)
    return t, 360


def reference(
    t: torch.Tensor, width: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.div(t, width, rounding_mode="floor"),
        torch.remainder(t, width),
        torch.div(t, width, rounding_mode="trunc"),
        torch.fmod(t, width),
    )


def main() -> None:
    from _common import run_example

    run_example("int_divmod", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
