"""Hashed embedding lookup (the hashing trick): ids map to rows through module-level constants.

``bucket = (id * HASH_MULT) % NUM_BUCKETS`` selects the table row, scaled by ``OUT_SCALE``;
all three are module globals (two ints, one float) that become constants of the emitted
code. The row gather ``table[bucket, tile_d]`` has a computed tensor index.
Exercises: module-level ints in integer arithmetic, a module-level float, ``aten.remainder``,
a gather with a tensor index computed in the kernel.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

NUM_BUCKETS = 97
HASH_MULT = 31
OUT_SCALE = 0.5


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def hashed_embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    count = ids.size(0)
    dim = table.size(1)
    out = torch.empty([count, dim], dtype=table.dtype, device=table.device)
    for tile_n, tile_d in hl.tile([count, dim]):
        bucket = (ids[tile_n] * HASH_MULT) % NUM_BUCKETS
        out[tile_n, tile_d] = table[bucket, tile_d] * OUT_SCALE
    return out


KERNEL = hashed_embedding
TOLERANCE = dict(rtol=1e-5, atol=1e-6)
SHAPES = {"divisible": (64, 32), "ragged": (37, 20)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    count, dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(51)
    ids = torch.randint(0, 10_000, (count,), generator=gen)
    return ids, torch.randn(NUM_BUCKETS, dim, generator=gen).to(dtype or torch.float32)


def reference(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return table[(ids * HASH_MULT) % NUM_BUCKETS] * OUT_SCALE


def main() -> None:
    from _common import run_example

    run_example("hashed_embedding", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
