"""Row softmax as a persistent reduction: each program loads a whole row block once.

Exercises: ``x[tile, :]`` (a full-width reduction dimension, padded to a power of two),
``aten.amax``, ``aten.exp``, ``aten.sum``, ``aten.div``, ``aten.sub`` with keepdim broadcasts,
and ``_mask_to`` (masked lanes become ``-inf`` before the max and ``0`` before the sum).
``reduction_loops`` is left unset (persistent reduction).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def softmax_one_pass(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r in hl.tile(x.size(0)):
        row = x[tile_r, :]
        row_max = torch.amax(row, dim=1, keepdim=True)
        num = torch.exp(row - row_max)
        out[tile_r, :] = num / torch.sum(num, dim=1, keepdim=True)
    return out


KERNEL = softmax_one_pass
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(5)
    x = (3 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def main() -> None:
    from _common import run_example

    run_example("softmax_one_pass", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
