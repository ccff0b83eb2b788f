"""ALiBi attention bias: ``scores - slope[h] * |i - j|`` with query positions from ``hl.arange``.

Query positions are ``hl.arange(tile_m.begin, tile_m.begin + tile_m.block_size)``, an iota
whose start is only known at run time (torch-mlir's tosa backend cannot lower that; the
lowering builds it itself), key positions ``tile_n.index``; each head has its own slope.
Exercises: ``prims.iota`` with a runtime start, integer ``abs`` and broadcasting of position
vectors, a per-head scalar load, ragged 3-D tiles.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1, 16, 32]))
def alibi_bias(scores: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    heads, q_len, k_len = scores.size()
    out = torch.empty_like(scores)
    for tile_h, tile_m, tile_n in hl.tile([heads, q_len, k_len]):
        rows = hl.arange(tile_m.begin, tile_m.begin + tile_m.block_size)
        distance = (rows[:, None] - tile_n.index[None, :]).abs().to(torch.float32)
        slope = slopes[tile_h]
        out[tile_h, tile_m, tile_n] = scores[tile_h, tile_m, tile_n] - slope[:, None, None] * distance[None, :, :]
    return out


KERNEL = alibi_bias
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
# (heads, query length, key length)
SHAPES = {"divisible": (4, 64, 128), "ragged": (3, 45, 70)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, q_len, k_len = SHAPES[shape]
    gen = torch.Generator().manual_seed(54)
    scores = torch.randn(heads, q_len, k_len, generator=gen).to(dtype or torch.float32)
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / heads) for h in range(heads)], dtype=torch.float32)
    return scores, slopes


def reference(scores: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    _, q_len, k_len = scores.shape
    distance = (torch.arange(q_len)[:, None] - torch.arange(k_len)[None, :]).abs().float()
    return scores - slopes[:, None, None] * distance[None]


def main() -> None:
    from _common import run_example

    run_example("alibi_bias", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
