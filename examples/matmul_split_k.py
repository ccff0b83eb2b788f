"""Split-K matmul: the K dimension is a grid axis and partial products meet in ``hl.atomic_add``.

Each program owns one ``[tile_m, tile_n]`` block and one K chunk ``outer_k``; it loops over
the chunk with ``hl.tile(outer_k.begin, outer_k.end)`` and atomically adds its partial sum
into the zero-initialised float32 output.
Exercises: a 3-D grid whose third axis is a reduction, an inner loop with tile-dependent bounds
(``tile_begin``/``tile_end`` as ``_for_loop`` begin/end), ``atomic_add`` with a tile index,
``torch.matmul`` accumulation, host ``torch.zeros``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 64, 16]))
def matmul_split_k(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    size_m, size_k = x.size()
    size_n = y.size(1)
    out = torch.zeros([size_m, size_n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n, outer_k in hl.tile([size_m, size_n, size_k]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for inner_k in hl.tile(outer_k.begin, outer_k.end):
            acc = acc + torch.matmul(x[tile_m, inner_k], y[inner_k, tile_n])
        hl.atomic_add(out, [tile_m, tile_n], acc)
    return out


KERNEL = matmul_split_k
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 256, 32), "ragged": (37, 200, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(16)
    dtype = dtype or torch.float32
    x = torch.randn(size_m, size_k, generator=gen).to(dtype)
    y = torch.randn(size_k, size_n, generator=gen).to(dtype)
    return x, y


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.float() @ y.float()


def main() -> None:
    from _common import run_example

    run_example("matmul_split_k", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
