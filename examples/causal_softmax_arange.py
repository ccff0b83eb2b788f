"""Causal row softmax over a full score row, key positions from ``hl.arange(n)``.

Row ``i`` keeps columns ``j <= i`` and fills the rest with ``-inf`` before a numerically
stable softmax. The row width is fixed at bind time (``hl.specialize``), as full-row kernels
do, so ``hl.arange`` spans the whole row.
Exercises: ``prims.iota`` over a whole dimension, ``tile.index`` broadcast against it,
``aten.where`` with a ``-inf`` literal (a hex float in the IR), ``aten.amax``/``aten.sum``.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16]))
def causal_softmax_arange(scores: torch.Tensor) -> torch.Tensor:
    m = scores.size(0)
    n = hl.specialize(scores.size(1))
    out = torch.empty_like(scores)
    for tile_m in hl.tile(m):
        cols = hl.arange(n)
        visible = cols[None, :] <= tile_m.index[:, None]
        row = torch.where(visible, scores[tile_m, :], float("-inf"))
        shifted = torch.exp(row - torch.amax(row, dim=-1, keepdim=True))
        out[tile_m, :] = shifted / torch.sum(shifted, dim=-1, keepdim=True)
    return out


KERNEL = causal_softmax_arange
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (128, 128), "ragged": (37, 37)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(55)
    return (torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32),)


def reference(scores: torch.Tensor) -> torch.Tensor:
    m, n = scores.shape
    visible = torch.arange(n)[None, :] <= torch.arange(m)[:, None]
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)


def main() -> None:
    from _common import run_example

    run_example("causal_softmax_arange", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
