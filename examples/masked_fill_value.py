"""Attention-score masking with a fill value passed at run time: ``where(mask, s, mask_value)``.

``torch.where`` with a Python-float argument traces to ``aten.scalar_tensor`` of a runtime
scalar; tosa legalizes only constant ones, so the lowering builds the 0-d tensor itself.
Exercises: ``aten.scalar_tensor`` of a kernel argument, a bool mask input, ``aten.where``.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def masked_fill_value(scores: torch.Tensor, mask: torch.Tensor, mask_value: float) -> torch.Tensor:
    out = torch.empty_like(scores)
    for tile_m, tile_n in hl.tile(scores.size()):
        out[tile_m, tile_n] = torch.where(mask[tile_m, tile_n], scores[tile_m, tile_n], mask_value)
    return out


KERNEL = masked_fill_value
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (64, 128), "ragged": (45, 70)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(58)
    scores = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    mask = torch.rand(*SHAPES[shape], generator=gen) > 0.3
    return scores, mask, -1.0e4


def reference(scores: torch.Tensor, mask: torch.Tensor, mask_value: float) -> torch.Tensor:
    return scores.masked_fill(~mask, mask_value)


def main() -> None:
    from _common import run_example

    run_example("masked_fill_value", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
