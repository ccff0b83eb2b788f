"""Embedding rows gathered from a flat table and projected: ``out[b, l] = table[ids[b, l], :] @ w``.

The table is read as one flat buffer (``table.view(-1)``) with a computed index tensor,
as kernels do for packed or paged storage: ``hl.load(flat, [ids[:, :, None] * dim +
tile_d.index[None, None, :]])`` gives a 3-D block of rows, which ``torch.matmul`` multiplies
by a tile of the dense weight, accumulating over the embedding width.
Exercises: ``hl.load`` with a 3-D index tensor built from a loaded tensor and
``tile.index`` (the loaded value's rank follows the index), ``torch.matmul`` of a 3-D
tile by a 2-D one, a reduction loop over ``tile_d`` carrying the accumulator, a host view.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 16, 16, 16]))
def embedding_projection(table: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    batch, length = ids.size()
    dim = hl.specialize(table.size(1))
    n = w.size(1)
    flat = table.view(-1)
    out = torch.empty([batch, length, n], dtype=torch.float32, device=table.device)
    for tile_b, tile_l, tile_n in hl.tile([batch, length, n]):
        acc = hl.zeros([tile_b, tile_l, tile_n], dtype=torch.float32)
        row = ids[tile_b, tile_l]
        for tile_d in hl.tile(dim):
            rows = hl.load(flat, [row[:, :, None] * dim + tile_d.index[None, None, :]])
            acc = acc + torch.matmul(rows, w[tile_d, tile_n])
        out[tile_b, tile_l, tile_n] = acc
    return out


KERNEL = embedding_projection
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (vocabulary, width, batch, length, projected width)
SHAPES = {"divisible": (50, 32, 4, 16, 32), "ragged": (37, 40, 3, 13, 27)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    vocab, dim, batch, length, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(72)
    table = torch.randn(vocab, dim, generator=gen).to(dtype or torch.float32)
    ids = torch.randint(0, vocab, (batch, length), generator=gen, dtype=torch.int64)
    w = torch.randn(dim, n, generator=gen).to(dtype or torch.float32)
    return table, ids, w


def reference(table: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (table[ids].float() @ w.float()).float()


def main() -> None:
    from _common import run_example

    run_example("embedding_projection", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
