"""Integer matmul: int8 operands, exact int32 accumulation with ``hl.dot(a, b, acc=acc)``.

Exercises: ``dot`` on int8 tiles with an int32 accumulator (``hl.zeros(..., dtype=torch.int32)``),
integer ``full``, an int32 output; results are exact, so the tolerance is zero.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32]))
def matmul_int8(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    size_m, size_k = a.size()
    size_n = b.size(1)
    out = torch.empty([size_m, size_n], dtype=torch.int32, device=a.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.int32)
        for tile_k in hl.tile(size_k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc
    return out


KERNEL = matmul_int8
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (32, 64, 32), "ragged": (37, 70, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(17)
    dtype = dtype or torch.int8
    a = torch.randint(-128, 128, (size_m, size_k), generator=gen).to(dtype)
    b = torch.randint(-128, 128, (size_k, size_n), generator=gen).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.to(torch.int32) @ b.to(torch.int32)


def main() -> None:
    from _common import run_example

    run_example("matmul_int8", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
