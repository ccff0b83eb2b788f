"""Plain float32 matmul: ``torch.matmul`` of tiles inside a K loop with an ``hl.zeros`` accumulator.

Exercises: a 2-D grid over ``[M, N]``, an inner ``hl.tile`` over K (``_for_loop`` with a
loop-carried accumulator), ``torch.matmul`` on 2-D tiles (traced as ``aten.mm.default``),
``hl.zeros`` (``full``). Ragged K relies on masked loads (out-of-range lanes read 0).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32]))
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    size_m, size_k = x.size()
    size_n = y.size(1)
    out = torch.empty([size_m, size_n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(size_k):
            acc = acc + torch.matmul(x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


KERNEL = matmul
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 64, 48), "ragged": (37, 70, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(12)
    dtype = dtype or torch.float32
    x = torch.randn(size_m, size_k, generator=gen).to(dtype)
    y = torch.randn(size_k, size_n, generator=gen).to(dtype)
    return x, y


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.float() @ y.float()).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("matmul", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
