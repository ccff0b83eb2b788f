"""Batched matmul ``a @ b`` for 3-D tensors with a 3-D tile grid and ``torch.baddbmm``.

Exercises: a 3-D top-level grid ``[batch, M, N]``, 3-D loads, ``aten.baddbmm`` accumulation
in a K loop, a float32 accumulator from ``hl.zeros`` with three tile dimensions.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 16, 16, 16]))
def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, size_m, size_k = a.size()
    size_n = b.size(2)
    out = torch.empty([batch, size_m, size_n], dtype=a.dtype, device=a.device)
    for tile_b, tile_m, tile_n in hl.tile([batch, size_m, size_n]):
        acc = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(size_k):
            acc = torch.baddbmm(acc, a[tile_b, tile_m, tile_k], b[tile_b, tile_k, tile_n])
        out[tile_b, tile_m, tile_n] = acc.to(out.dtype)
    return out


KERNEL = bmm
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (4, 16, 32, 16), "ragged": (3, 19, 40, 21)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    batch, size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(14)
    dtype = dtype or torch.float32
    a = torch.randn(batch, size_m, size_k, generator=gen).to(dtype)
    b = torch.randn(batch, size_k, size_n, generator=gen).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a.float(), b.float()).to(a.dtype)


def main() -> None:
    from _common import run_example

    run_example("bmm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
