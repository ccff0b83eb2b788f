"""Per-row means of ``num_chunks`` column chunks, the chunk width computed on the host.

``chunk = helion.cdiv(cols, num_chunks)`` is the block size of the column dimension
(``hl.tile([rows, cols], block_size=[None, chunk])``). ``num_chunks`` is an int argument that
Helion keeps symbolic, so ``chunk`` is a runtime tile size: the column tiles are dynamic
(``tensor<8x?xf32>``) and hold exactly their in-bounds lanes; each tile's sum is stored at
``out[tile_r, tile_c.id]``. The output has a dimension of ``num_chunks``.
Exercises: a runtime block size on a tile-shaped load and reduction, ``tile.id`` of a
runtime tile, a host tensor sized by an int argument, a float division by the chunk.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def chunk_means(x: torch.Tensor, num_chunks: int = 4) -> torch.Tensor:
    rows, cols = x.size()
    chunk = helion.cdiv(cols, num_chunks)
    out = torch.zeros([rows, num_chunks], dtype=torch.float32, device=x.device)
    for tile_r, tile_c in hl.tile([rows, cols], block_size=[None, chunk]):
        out[tile_r, tile_c.id] = torch.sum(x[tile_r, tile_c], dim=-1) / chunk
    return out


KERNEL = chunk_means
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (64, 256), "ragged": (37, 101)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(54)
    return (torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32),)


def make_kwargs(shape: str = "divisible") -> dict:
    return {"num_chunks": 4 if shape == "divisible" else 5}


def reference(x: torch.Tensor, num_chunks: int = 4) -> torch.Tensor:
    chunk = -(-x.size(1) // num_chunks)
    return torch.stack([x[:, c * chunk:(c + 1) * chunk].float().sum(-1) / chunk for c in range(num_chunks)], dim=1)


def main() -> None:
    from _common import run_example

    run_example("chunk_means", KERNEL, make_args, reference, TOLERANCE, make_kwargs)


if __name__ == "__main__":
    main()
