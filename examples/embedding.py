"""Embedding lookup: ``out[i, :] = table[ids[i], :]`` with a tensor of token ids.

Exercises: a load whose first index is a loaded int64 tensor (``table[ids[tile_t], tile_d]``,
a gather), a 2-D grid over ``[tokens, dim]``, int64 id loads; ragged token count and width.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    tokens = ids.size(0)
    dim = table.size(1)
    out = torch.empty([tokens, dim], dtype=table.dtype, device=table.device)
    for tile_t, tile_d in hl.tile([tokens, dim]):
        out[tile_t, tile_d] = table[ids[tile_t], tile_d]
    return out


KERNEL = embedding
TOLERANCE = dict(rtol=0, atol=0)
# (tokens, vocabulary, embedding width)
SHAPES = {"divisible": (64, 100, 64), "ragged": (37, 100, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    tokens, vocab, dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(33)
    ids = torch.randint(0, vocab, (tokens,), generator=gen, dtype=torch.int64)
    table = torch.randn(vocab, dim, generator=gen).to(dtype or torch.float32)
    return ids, table


def reference(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.embedding(ids, table)


def main() -> None:
    from _common import run_example

    run_example("embedding", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
