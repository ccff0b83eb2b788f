"""Smooth-L1 (Huber) loss with an optional per-column weight and a ``reduction`` string.

The signature follows ``torch.nn.functional.smooth_l1_loss``: ``weight: Tensor | None = None``,
``beta: float = 1.0``, ``reduction: str = "mean"``; the example calls it with keywords
(``weight=..., reduction="sum"``) and leaves ``beta`` at its default. Helion specializes on
``weight`` being ``None`` or a tensor and on the ``reduction`` string (the host code picks
the reduction after the device loop), while ``beta`` stays a runtime float.
Exercises: keyword arguments, defaults, ``None`` for an optional tensor, a string option,
a ``torch.where`` branch on a float argument, a row loop over column tiles.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def smooth_l1_loss(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    beta: float = 1.0,
    reduction: str = "mean",
) -> torch.Tensor:
    rows, cols = input.size()
    per_row = torch.empty([rows], dtype=torch.float32, device=input.device)
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            diff = torch.abs(input[tile_r, tile_c] - target[tile_r, tile_c])
            loss = torch.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta)
            if weight is not None:
                loss = loss * weight[tile_c][None, :]
            acc = acc + torch.sum(loss, -1)
        per_row[tile_r] = acc
    if reduction == "mean":
        return per_row.sum() / (rows * cols)
    if reduction == "sum":
        return per_row.sum()
    return per_row


KERNEL = smooth_l1_loss
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(43)
    input = (2 * torch.randn(rows, cols, generator=gen)).to(dtype or torch.float32)
    target = (2 * torch.randn(rows, cols, generator=gen)).to(dtype or torch.float32)
    return input, target


def make_kwargs(shape: str = "divisible") -> dict:
    gen = torch.Generator().manual_seed(44)
    return {"weight": torch.rand(SHAPES[shape][1], generator=gen), "reduction": "sum"}


def reference(input: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
              beta: float = 1.0, reduction: str = "mean") -> torch.Tensor:
    loss = torch.nn.functional.smooth_l1_loss(input, target, reduction="none", beta=beta)
    rows = (loss if weight is None else loss * weight).sum(-1)
    if reduction == "mean":
        return rows.sum() / input.numel()
    return rows.sum() if reduction == "sum" else rows


def main() -> None:
    from _common import run_example

    run_example("smooth_l1_loss", KERNEL, make_args, reference, TOLERANCE, make_kwargs)


if __name__ == "__main__":
    main()
