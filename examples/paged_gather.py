"""Read tokens out of a paged cache: ``out[t, :] = cache[page_table[t // page] * page + t % page, :] * scale``.

A KV cache stored in fixed-size pages is addressed through a page table: token ``t`` lives
in page ``page_table[t // page]`` at slot ``t % page``. The row index of the 2-D load is
built on the device from a gathered value, the tile's indices, ``//`` and ``%``.
Exercises: a gather (``page_table[tile_t.index // page_size]``) inside the index expression
of a 2-D load, ``tile.index`` with integer ``//`` and ``%`` by an int argument, a float
scalar argument; ragged token count and width.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def paged_gather(cache: torch.Tensor, page_table: torch.Tensor, page_size: int, scale: float) -> torch.Tensor:
    n_tokens = page_table.size(0) * page_size
    dim = cache.size(1)
    out = torch.empty([n_tokens, dim], dtype=cache.dtype, device=cache.device)
    for tile_t, tile_d in hl.tile([n_tokens, dim]):
        page_id = page_table[tile_t.index // page_size]
        rows = cache[page_id * page_size + tile_t.index % page_size, tile_d]
        out[tile_t, tile_d] = rows * scale
    return out


KERNEL = paged_gather
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
# (pages in the cache, pages read, page size, width)
SHAPES = {"divisible": (12, 8, 4, 32), "ragged": (11, 7, 5, 45)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    pages, used, page_size, dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(71)
    cache = torch.randn(pages * page_size, dim, generator=gen).to(dtype or torch.float32)
    page_table = torch.randperm(pages, generator=gen)[:used].to(torch.int32)
    return cache, page_table, page_size, 0.5


def reference(cache: torch.Tensor, page_table: torch.Tensor, page_size: int, scale: float) -> torch.Tensor:
    pages = cache.view(-1, page_size, cache.size(1))
    return pages[page_table.long()].reshape(-1, cache.size(1)) * scale


def main() -> None:
    from _common import run_example

    run_example("paged_gather", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
